"""The Guard's less frequent duties, kept out of guard.py: the job-info and stop log
lines, the PID file, the requeue-loop record, the exception path, the forced-exit timeout
and the end of the process group."""
from __future__ import annotations

import logging
import math
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainguard.agreement import Agreement, initialized_dist
from trainguard.causes import Cause, Decision
from trainguard.deadline import slurm_query
from trainguard.progress import is_stuck, next_progress, read_progress, stuck_message, write_progress
from trainguard.slurm import format_epoch, format_seconds, query_kill_wait

if TYPE_CHECKING:
    from trainguard.guard import Guard

log = logging.getLogger("trainguard")
FALLBACK_FORCED_EXIT = 300.0   # s, when the time left is unknown (no EndTime, no exit_after)
REQUEUE_RESERVE = 5.0          # s left to the batch script to requeue after a forced exit
MIN_FORCED_EXIT = 2.0


def write_pid(pid_file: Path | None) -> None:
    """Append this process's PID, one line, for the batch script's trap: it signals the
    processes listed there when they were started directly in the batch shell."""
    if pid_file is None:
        return
    fd = os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)


def write_exit_file(path: Path, code: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(f"{code}\n")
        os.replace(tmp, path)
    except OSError as exc:
        log.error("trainguard: cannot write the exit code to %s: %s", path, exc)


def log_job_line(guard: Guard) -> None:
    """One line: job id, array task, restart count, nodes, time limit, EndTime, resume."""
    job, first = guard.job, guard.deadline.first
    resumed = (f"resumed from step {guard.resumed.step} ({guard.resumed.path})" if guard.resumed
               else "starting fresh (no checkpoint)")
    world = guard.agreement.world if guard.agreement else 1
    log.info("trainguard: job %s, restart %d, nodes %s, %d rank(s), time limit %s, EndTime %s, %s",
             job.label or "(not in SLURM)", job.restart_count, job.nodelist or "-", world,
             format_seconds(first.time_limit) if first else "unknown",
             format_epoch(guard.deadline.end_time), resumed)


def log_stop_line(guard: Guard, decision: Decision, step: int) -> None:
    action = decision.action
    what = "requeue" if action.requeue else "no requeue"
    others = sorted(c.label for c in decision.causes - {decision.cause, Cause.NO_TIME})
    also = f" (also: {', '.join(others)})" if others else ""
    log.warning("trainguard: stopping after step %d: %s%s -> exit %d (%s)", step, decision.cause.label,
                also, action.exit_code, what)


def record_progress(guard: Guard) -> str | None:
    """Update the requeue-loop record (rank 0); the stuck message if this start is one too many."""
    root = guard.config.checkpoint_dir
    if root is None or not guard.job.job_id:
        return None
    progress = next_progress(read_progress(root), guard.job.chain_id, guard.last_step)
    if is_stuck(progress, guard.config.max_restarts_without_progress):
        return stuck_message(progress, root)
    if guard.rank == 0:
        write_progress(root, progress)
    return None


def on_exception(guard: Guard, exc: BaseException) -> None:
    """The loop raised: save (on this rank alone: its peers are elsewhere), exit non-zero.
    Never 140, so the batch script does not requeue a crash."""
    action = guard.config.policy.action(Cause.EXCEPTION)
    log.error("trainguard: the training raised %s: %s", type(exc).__name__, exc, exc_info=exc)
    if guard.forced is not None:
        guard.forced.arm(forced_timeout(guard, 0)[0], action.exit_code, "saving after an exception")
    single = guard.agreement is None
    if action.save.value != "never" and (single or not guard._save_all_ranks):
        try:
            _save_alone(guard)
        except Exception as save_exc:  # noqa: BLE001 - report the original exception, not the save's
            log.error("trainguard: saving after the exception failed: %s", save_exc)
    log_stop_line(guard, Decision(Cause.EXCEPTION, action, frozenset({Cause.EXCEPTION})), guard.last_step)
    guard.finish(phase="stopping")
    guard._exit_process(action.exit_code)


def _save_alone(guard: Guard) -> None:
    ckpts = guard.checkpoints
    if ckpts is None or guard._save_fn is None or guard.last_step < 0 or guard.rank != 0:
        return
    if guard._saved_step == guard.last_step:
        return
    ckpt = ckpts.save(guard.last_step, guard._save_fn, all_ranks=False, collective=False)
    guard._saved_step = guard.last_step
    log.info("trainguard: saved step %d to %s after the exception", guard.last_step, ckpt.path)


def forced_timeout(guard: Guard, pending_signals: int) -> tuple[float, int]:
    """(seconds, exit code) for the forced-exit timer: the configured value, else the time
    left before the job's end minus a reserve for the requeue; for a plain SIGTERM, KillWait."""
    policy = guard.config.policy
    term = bool(pending_signals & (1 << signal.SIGTERM))
    code = policy.action(Cause.TERMINATE if term else Cause.TIME_LIMIT).exit_code
    if guard.config.forced_exit:
        return guard.config.forced_exit, code
    left = guard.deadline.deadline - guard._clock()
    if term:
        left = min(left, guard.sensors.kill_wait)
        return max(MIN_FORCED_EXIT, left - 1.0), code
    if math.isinf(left):
        return FALLBACK_FORCED_EXIT, code
    return max(MIN_FORCED_EXIT, left - REQUEUE_RESERVE), code


def destroy_process_group(agreement: Any) -> None:
    """Leave torch.distributed cleanly before exiting (avoids the 'process group was not
    destroyed' warning and a hang in some backends' atexit teardown)."""
    if agreement is None:
        return
    try:
        agreement._dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - exiting anyway; a teardown error is not worth a crash
        log.debug("trainguard: destroy_process_group: %s", exc)


def bind_agreement(guard: Guard) -> None:
    """Under torch.distributed (2+ ranks): the agreement, the real rank, collective saves."""
    dist = initialized_dist()
    if dist is None:
        return
    guard.agreement = agreement = Agreement(dist, guard.config.sync_every, guard.config.sync_interval)
    guard.rank = agreement.rank
    if guard.rank != 0:
        # Rank 0 alone polls the shared files; the agreement tells the others. (Spares a
        # metadata server thousands of stats per second on a large run.)
        guard.sensors.files = None
    if guard.heartbeat is not None:
        guard.heartbeat.rank = guard.rank
    if guard.checkpoints is not None:
        guard.checkpoints.bind(guard.rank, agreement.barrier, agreement.all)
    guard._margin = replace(guard._margin, steps_before_decision=guard.config.sync_every)


def start_deadline(guard: Guard) -> None:
    # One rank asks the controller when the ranks agree anyway: a 1000-rank job must not
    # send slurmctld 1000 requests per re-read.
    cfg, job = guard.config, guard.job
    if cfg.use_slurm_endtime and job.job_id and (guard.agreement is None or guard.rank == 0):
        guard.deadline.query = slurm_query(job.job_id)
        guard.sensors.kill_wait_query = query_kill_wait
    guard.deadline.start(guard._clock(), guard._wall(), cfg.exit_after)
