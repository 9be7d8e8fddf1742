"""Where a hung rank waits is named by the training's own line: every trainguard module is
left out as library code, wherever in the package it lives (after the modules moved into
subpackages, guard.py and stopping/agreement.py were counted as the training's frames, and a
rank caught in the guard's agreement was reported "stuck in ... _check_distributed (guard.py)")."""
from __future__ import annotations

import trainguard
import trainguard.guard
import trainguard.hangs.stacks
import trainguard.stopping.agreement
from trainguard.hangs.stacks import is_library


def test_every_trainguard_module_counts_as_library_code_and_the_training_does_not() -> None:
    for module in (trainguard, trainguard.guard, trainguard.stopping.agreement, trainguard.hangs.stacks):
        assert module.__file__ is not None and is_library(module.__file__), module.__file__
    assert not is_library(__file__)
