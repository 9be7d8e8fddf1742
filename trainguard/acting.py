"""What the Guard does outside its hot path, moved out of trainguard/guard.py to keep that
module small: resuming, acting on a decision (save, continue or stop), saving, phases and
the end of `with guard:`. The Guard's methods of the same names call these."""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from trainguard import lifecycle
from trainguard.causes import HEALTH_CAUSES, Cause, Decision
from trainguard.checkpoints.checkpoint import Checkpoint

if TYPE_CHECKING:
    from trainguard.guard import Guard

log = logging.getLogger("trainguard")


def resume(guard: Guard) -> int:
    """Detect torch.distributed, load the newest loadable checkpoint, apply the requeue-loop
    protection and log the job-info line. Returns the first step to run."""
    guard.start()
    if guard._resumed_done:
        return guard.last_step + 1
    guard._resumed_done = True
    guard.agreement = lifecycle.bind_agreement(guard.config, guard.sensors, guard.heartbeat, guard.saver)
    guard.rank = guard.agreement.rank if guard.agreement else guard.rank
    if guard.health is not None:
        guard.health.rank = guard.rank
        guard.health.nodes = guard.agreement.nodes if guard.agreement else []
    if guard._anyone(guard.files is not None and guard.files.kill_switch_present()):
        guard._stop_at_start(Cause.KILL_SWITCH, f"kill switch {guard.config.kill_switch} is present")
    lifecycle.check_saving(guard.saver, guard.rank, guard._anyone, guard.heartbeat)
    if guard.checkpoints is not None and guard._load_fn is not None:
        guard.resumed = guard.checkpoints.resume(guard._load_fn, guard.config.start_over)
    if guard.checkpoints is not None:   # also after an integration's own resume
        lifecycle.report_fallback(guard.checkpoints, guard.heartbeat)
        if guard.resumed is None and guard._load_fn is not None:
            lifecycle.report_fresh_restart(guard.checkpoints, guard.job, guard.heartbeat)
    guard.last_step = guard.resumed.step if guard.resumed else -1
    if guard.resumed is not None and guard.health is not None:
        guard.health.saved(guard.resumed.step, 0.0)
    guard._protect_against_requeue_loop()
    lifecycle.start_deadline(guard.config, guard.job, guard.deadline, guard.sensors,
                             guard.agreement is None or guard.rank == 0, guard._clock(), guard._wall())
    lifecycle.log_job_line(guard.job, guard.deadline, guard.resumed,
                           guard.agreement.world if guard.agreement else 1)
    guard._beat(guard.last_step, "train")
    guard._last_tick = guard._next_poll = guard._clock()   # the first check polls everything
    guard._next_sync = guard.last_step + guard.config.sync_every   # the same on every rank
    guard.check = guard._check_distributed if guard.agreement else guard._check_local
    return guard.last_step + 1


def leave(guard: Guard, exc: BaseException | None) -> None:
    """`with guard:` ends: finish, or (an exception) save and exit 1."""
    if not isinstance(exc, Exception):
        guard.finish()   # normal end, SystemExit (ours included), KeyboardInterrupt
        return
    if guard.hang is not None and guard.hang.reported and guard.hang.alive:
        # A peer that ended for the hang broke this rank's collective: the exception is the
        # hang's echo. The hang's response exits with its own code (a save here, of a
        # state the ranks never agreed on, and exit 1 would end a run that restarts).
        log.error("trainguard: the training raised %s after the hang was reported: "
                  "leaving the exit to the hang's response", type(exc).__name__)
        while guard.hang.alive:
            time.sleep(0.1)
    code = lifecycle.after_exception(exc, guard.config, guard.saver, guard.forced, guard._forced_timeout,
                                     guard.last_step, guard.rank, guard.agreement is not None)
    guard._stop(code)


@contextmanager
def phase(guard: Guard, name: str) -> Iterator[None]:
    """Mark a phase in the heartbeat (e.g. "eval"), so a long evaluation is not a hang."""
    guard._beat(guard.last_step, name)
    start = guard._clock()
    try:
        yield
    finally:
        guard._beat(guard.last_step, "train")
        guard._last_tick = end = guard._clock()   # the phase is not a training step
        if guard.health is not None:             # waiting for data, or not training
            if name == "data_loading":
                guard.health.data_time += end - start
            else:
                guard.health.excluded += end - start


def act(guard: Guard, decision: Decision, step: int) -> None:
    """Save if the policy says so; then continue (return) or stop (exit the process)."""
    if decision.save and guard.saver.problem:
        decision = lifecycle.without_save(decision, step, guard.saver.problem)
    guard.arm_forced_exit(decision)
    wanted = decision.save
    if wanted and guard.save(step) is None and guard.save_failure:
        decision = lifecycle.save_failed(decision, step, guard.save_failure, guard.checkpoints)
    action = decision.action
    if not wanted and action.stop and not guard.saver.problem:
        log.warning("trainguard: not saving (%s)", "policy" if action.save.value == "never"
                    else "a save would not finish before SIGKILL")
    if Cause.SAVE_SWITCH in decision.causes and guard.files is not None:
        guard.files.consume_save_switch(remove=guard.rank == 0)
    if decision.cause in HEALTH_CAUSES and guard.health is not None:
        guard.health.acted(decision, step)
    if not action.stop:
        # Warnings of training health are acted upon (logged) together.
        warned = sum(c.bit for c in decision.causes & HEALTH_CAUSES
                     if not guard.config.policy.action(c).stop)
        guard.sensors.clear(Cause.SAVE_SWITCH.bit | decision.cause.bit | warned)
        if guard.forced is not None:
            guard.forced.disarm()
        return
    why = lifecycle.log_stop_line(decision, step, saved=decision.save)
    guard._stop(action.exit_code, step, requeue=action.requeue and guard.config.self_requeue,
               why=why)


def save(guard: Guard, step: int) -> Checkpoint | None:
    """Save and commit checkpoint `step` now (also for the training's periodic saves, so
    the guard knows how long a save takes). Saves each step at most once. A save that
    fails (a full disk, a quota, the writer's own error) returns None and is said in
    the log and the heartbeat (`save_failure`); the training goes on, the last good
    checkpoint stays, and a stop then exits without requeue."""
    if not guard.saver.due(step):
        return None
    if guard.health is not None and not guard.health.finite_now(step):
        # The loss is NaN/Inf: the state is poisoned; the last good checkpoint stands.
        log.error("trainguard: not saving step %d: the loss is %s", step, guard.health.record.nan_value)
        guard.sensors.mask |= guard.health.poll(guard._clock(), step)
        guard._next_poll = -math.inf    # the next poll point decides
        return None
    guard._beat(step, "saving")
    try:
        ckpt, elapsed = guard.saver.save(step)
    except Exception as exc:  # noqa: BLE001 - the writer may raise anything (torch: RuntimeError)
        guard.save_failure = lifecycle.save_failure(step, exc, guard.checkpoints, guard.heartbeat)
        guard._beat(step, "train")
        return None
    guard.save_failure = ""
    _saved(guard, step, elapsed, ckpt.path)
    return ckpt

def record_save(guard: Guard, step: int, elapsed: float, path: Path) -> None:
    """A save of `step` that a framework made itself (the HF Trainer's checkpoint-N):
    it feeds the save-time estimate, the heartbeat and the log as the guard's own do."""
    guard.saver.record(step, elapsed)
    _saved(guard, step, elapsed, path)

def _saved(guard: Guard, step: int, elapsed: float, path: Path) -> None:
    if guard.health is not None:
        guard.health.saved(step, guard._wall())
        guard.health.excluded += elapsed
    guard._beat(step, "train")
    log.info("trainguard: saved step %d in %.3f s to %s", step, elapsed, path)
    guard._last_tick = guard._clock()   # the save is not a training step

