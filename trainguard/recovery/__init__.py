"""Recovery: the run's record of suspect nodes and restarts, and the batch scripts' CLI.

`python -m trainguard.recovery {note,plan,exclude,restart,show}` (see `__main__.py`); the
record itself is `trainguard.recovery.journal`, read and written through
`trainguard.recovery.suspects` and `trainguard.recovery.restarts`. Standard library only.
"""
