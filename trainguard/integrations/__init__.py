"""trainguard inside training frameworks: one module per framework, each imported only
when used (importing this package imports no framework).

    from trainguard.integrations.lightning import TrainguardCallback   # PyTorch Lightning
    from trainguard.integrations.hf import TrainguardCallback          # Hugging Face Trainer
    from trainguard.integrations.accelerate import accelerate_guard    # accelerate loops
"""
