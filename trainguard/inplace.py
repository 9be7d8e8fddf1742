"""Deprecated: `python -m trainguard.inplace` moved to `python -m trainguard.recovery.inplace` (0.1.x).

Kept so that a batch script copied from an earlier release still restarts and requeues: it
runs the new module's CLI unchanged, after one line on stderr (the templates parse stdout's
key=value lines, so the notice cannot be mistaken for an answer). Removed in 0.2.
"""
from __future__ import annotations

import sys

from trainguard.recovery.inplace import main

NOTICE = ("trainguard: 'python -m trainguard.inplace' is deprecated and goes in 0.2; "
          "use 'python -m trainguard.recovery.inplace' (the templates in slurm/ do)")

if __name__ == "__main__":
    print(NOTICE, file=sys.stderr)
    sys.exit(main())
