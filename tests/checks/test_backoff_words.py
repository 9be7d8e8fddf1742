"""A hung controller is said to have not answered, never to have "asked us to slow down":
the real runner, a real command that hangs past its timeout, the real state database."""
from __future__ import annotations

from pathlib import Path

import pytest

from watchdogs.slurmctl.backoff import guarded
from watchdogs.slurmctl.runner import SlurmBusy, run_slurm
from watchdogs.state.store import open_store


def test_a_hung_command_is_said_to_have_not_answered_while_backing_off(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    with pytest.raises(SlurmBusy, match="did not answer within 0.5s"):
        guarded(store, "squeue", 1000.0, lambda: run_slurm(["sleep", "30"], timeout=0.5))
    with pytest.raises(SlurmBusy) as skipped:
        guarded(store, "squeue", 1001.0, lambda: run_slurm(["true"]))
    said = str(skipped.value)
    assert "asked us to slow down" not in said
    assert said.startswith("the Slurm controller did not answer (hung, overloaded or unreachable); "
                           "not asking again for 19s more after 1 failed call(s)")
    assert "last: sleep did not answer within 0.5s" in said


def test_a_rate_limited_reply_is_said_to_be_busy(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)

    def busy() -> None:
        raise SlurmBusy("squeue failed (exit 1): rate limit exceeded")
    with pytest.raises(SlurmBusy):
        guarded(store, "squeue", 1000.0, busy)
    with pytest.raises(SlurmBusy, match="the Slurm controller said it is busy; .*rate limit exceeded"):
        guarded(store, "squeue", 1001.0, busy)
