"""trainguard inside training frameworks: one module per framework, each imported only
when used (importing this package imports no framework).

    from trainguard.integrations.lightning import TrainguardCallback   # PyTorch Lightning
"""
