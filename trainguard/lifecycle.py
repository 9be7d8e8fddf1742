"""The Guard's less frequent duties, kept out of guard.py: the job-info and stop log
lines, the PID file, the requeue-loop record, the save after an exception, the forced-exit
timeout and the binding to torch.distributed.

Each function takes the values it needs (never the Guard): nothing here reaches into the
Guard's state, and the Guard stays the one place that decides and exits."""
from __future__ import annotations

import errno
import logging
import math
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from trainguard.causes import EXIT_CANNOT_SAVE, Action, Cause, Decision, Save
from trainguard.checkpoints.checkpoint import Checkpoint, Checkpoints
from trainguard.checkpoints.saving import Saver
from trainguard.config import GuardConfig
from trainguard.heartbeat import HeartbeatWriter
from trainguard.slurm.job import JobEnv, format_epoch, format_seconds, query_kill_wait
from trainguard.stopping.agreement import Agreement, initialized_dist
from trainguard.stopping.deadline import Deadline, slurm_query
from trainguard.stopping.forced_exit import ForcedExit
from trainguard.stopping.progress import is_stuck, next_progress, read_progress, stuck_message, write_progress
from trainguard.stopping.sensors import Sensors

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


def log_job_line(job: JobEnv, deadline: Deadline, resumed: Checkpoint | None, world: int) -> None:
    """One line: job id, array task, restart count, nodes, time limit, EndTime, resume."""
    first = deadline.first
    resumed_from = (f"resumed from step {resumed.step} ({resumed.path})" if resumed
                    else "starting fresh (no checkpoint)")
    log.info("trainguard: job %s, restart %d, nodes %s, %d rank(s), time limit %s, EndTime %s, %s",
             job.label or "(not in SLURM)", job.restart_count, job.nodelist or "-", world,
             format_seconds(first.time_limit) if first else "unknown",
             format_epoch(deadline.end_time), resumed_from)
    restart = inplace_restart(os.environ)
    if restart:
        # Slurm's restart count does not move for a new step in the same job: this is ours.
        log.warning("trainguard: in-place restart %d of job %s (a new job step on %s, no requeue), %s",
                    restart, job.label, os.environ.get("SLURM_STEP_NODELIST") or job.nodelist or "-",
                    resumed_from)


def inplace_restart(env: Mapping[str, str]) -> int:
    """TRAINGUARD_INPLACE_RESTART, set by the templates for each new step (0: the first)."""
    value = env.get("TRAINGUARD_INPLACE_RESTART", "0")
    return int(value) if value.isdigit() else 0


def log_stop_line(decision: Decision, step: int, saved: bool = True) -> str:
    """Log what the stop does, in words; returns them for the exit file (the batch script's
    line). A requeue without a checkpoint (a hang) says so: the work since the last save is lost."""
    action = decision.action
    if action.requeue:
        what = (f"checkpoint saved at step {step}: requeue" if saved else
                "no checkpoint saved: requeue, resuming from the last checkpoint (the work "
                "since it is lost)")
    else:
        what = (f"checkpoint saved at step {step}: not requeued" if saved else
                "no checkpoint saved: not requeued")
    others = sorted(c.label for c in decision.causes - {decision.cause, Cause.NO_TIME})
    also = f" (also: {', '.join(others)})" if others else ""
    log.warning("trainguard: stopping after step %d: %s%s -> exit %d (%s)", step, decision.cause.label,
                also, action.exit_code, what)
    # The batch script says "requeueing" or "not requeueing" itself.
    kept = (f"checkpoint saved at step {step}" if saved else
            "NO checkpoint saved (the work since the last one is lost)")
    return f"{decision.cause.label} after step {step}{also}; {kept}"


def record_progress(config: GuardConfig, job: JobEnv, last_step: int, rank: int) -> str | None:
    """Update the requeue-loop record (rank 0); the stuck message if this start is one too many."""
    root = config.checkpoint_dir
    if root is None or not job.job_id:
        return None
    progress = next_progress(read_progress(root), job.chain_id, last_step)
    if is_stuck(progress, config.max_restarts_without_progress):
        return stuck_message(progress, root)
    if rank == 0:
        write_progress(root, progress)
    return None


def check_saving(saver: Saver, rank: int, anyone: Callable[[bool], bool],
                 heartbeat: HeartbeatWriter | None) -> None:
    """At start, not at the first save: a stop request must not find out then that no
    checkpoint can be written. `anyone` ORs a flag across ranks (so all ranks act alike);
    the heartbeat carries the problem to the cluster-side check."""
    problem = saver.probe(writes=rank == 0 or saver.all_ranks)
    if not anyone(bool(problem)):
        return
    saver.problem = problem or "another rank cannot write into its checkpoint folder"
    log.warning("trainguard: %s; training anyway, but a stop request will end the training "
                "without a checkpoint and without requeue (exit %d)", saver.problem, EXIT_CANNOT_SAVE)
    if heartbeat is not None:
        heartbeat.problem = saver.problem


def report_fallback(checkpoints: Checkpoints, heartbeat: HeartbeatWriter | None) -> None:
    """A resume that passed over damaged checkpoints is told to the cluster-side check
    (the heartbeat's `problem`, for this run), not only to the log."""
    if checkpoints.fallback is not None and heartbeat is not None and not heartbeat.problem:
        heartbeat.problem = checkpoints.fallback.describe()


def report_fresh_restart(checkpoints: Checkpoints, job: JobEnv, heartbeat: HeartbeatWriter | None) -> None:
    """A requeued run (restart N > 0) that finds no checkpoint at all starts from step 0:
    legitimate when the first run was stopped before its first save, but also what a
    moved, renamed or unmounted checkpoint folder looks like. Said, never silent."""
    if job.restart_count <= 0:
        return
    where = checkpoints.root if checkpoints.root.is_dir() else f"{checkpoints.root} (which does not exist)"
    of_job = f" of job {job.label}" if job.label else ""
    problem = (f"restart {job.restart_count}{of_job} found no checkpoint in "
               f"{where}: starting from step 0; if an earlier run saved one, this is not its folder")
    log.warning("trainguard: %s", problem)
    if heartbeat is not None and not heartbeat.problem:
        heartbeat.problem = problem


def save_failure(step: int, exc: BaseException, checkpoints: Checkpoints | None,
                 heartbeat: HeartbeatWriter | None) -> str:
    """A save failed (ENOSPC, EDQUOT, EIO, or the writer's own error: torch reports a full
    disk as a RuntimeError). Say why in words, remove the partial save (which also gives
    back its space; the last good checkpoint is untouched, a save commits by rename after
    its marker) and tell the cluster-side check through the heartbeat. Returns the why."""
    why = _why_save_failed(exc, checkpoints)
    last = checkpoints.latest() if checkpoints is not None else None
    if checkpoints is not None:
        checkpoints.discard_partial(step)
    kept = (f"the last good checkpoint, step {last.step} ({last.path}), is kept" if last is not None
            else "there is no earlier checkpoint")
    if heartbeat is not None:
        heartbeat.problem = f"cannot write into the checkpoint folder: saving step {step} failed: {why}"
    log.error("trainguard: saving step %d failed: %s; %s", step, why, kept)
    return f"{why}; {kept}"


def _why_save_failed(exc: BaseException, checkpoints: Checkpoints | None) -> str:
    full = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
    free = None
    if checkpoints is not None:
        try:
            st = os.statvfs(checkpoints.save_root)
            free = st.f_bavail * st.f_frsize
        except OSError:
            pass
    if full or (free is not None and free < 1 << 20):
        return (f"the checkpoint disk is full ({free if free is not None else 0} bytes free in "
                f"{checkpoints.save_root if checkpoints else '?'}; {type(exc).__name__}: {str(exc)[:120]})")
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def save_failed(decision: Decision, step: int, why: str, checkpoints: Checkpoints | None) -> Decision:
    """The decision after the save it asked for failed: go on without it, or stop with
    EXIT_CANNOT_SAVE and no requeue (the requeued run would resume from the older
    checkpoint and meet the same disk)."""
    action = decision.action
    if not action.stop:
        log.error("trainguard: continuing without the save %s asked for", decision.cause.label)
        return replace(decision, action=replace(action, save=Save.NEVER))
    code = EXIT_CANNOT_SAVE if action.requeue else action.exit_code
    requeue = ("not requeued: a requeued run would resume from an older checkpoint and meet the same "
               "problem; fix it (free space), then resubmit" if action.requeue else "no requeue (policy)")
    log.error("trainguard: stop requested (%s) after step %d, but saving it failed: %s; %s (exit %d)",
              decision.cause.label, step, why, requeue, code)
    return replace(decision, action=Action(Save.NEVER, stop=True, requeue=False, exit_code=code))


def without_save(decision: Decision, step: int, problem: str) -> Decision:
    """The decision when no checkpoint can be written: never a requeue (the next run would
    start again from an older checkpoint, or from nothing, and meet the same folder)."""
    action = decision.action
    if not action.stop:
        log.error("trainguard: cannot save step %d for %s: %s; continuing", step,
                  decision.cause.label, problem)
        return replace(decision, action=replace(action, save=Save.NEVER))
    code = EXIT_CANNOT_SAVE if action.requeue else action.exit_code
    log.error("trainguard: stop requested (%s) after step %d, but no checkpoint can be written: "
              "%s. Exiting with code %d, no requeue: fix the folder, then resubmit.", decision.cause.label,
              step, problem, code)
    return replace(decision, action=Action(Save.NEVER, stop=True, requeue=False, exit_code=code))


def after_exception(exc: BaseException, config: GuardConfig, saver: Saver, forced: ForcedExit | None,
                    timeout_for: Callable[[int], tuple[float, int]], step: int, rank: int,
                    distributed: bool) -> int:
    """The loop raised: log it, arm the forced exit, save on this rank alone (its peers are
    elsewhere) unless the policy says never. Returns the exit code (the caller exits)."""
    action = config.policy.action(Cause.EXCEPTION)
    log.error("trainguard: the training raised %s: %s", type(exc).__name__, exc, exc_info=exc)
    if forced is not None:
        forced.arm(timeout_for(0)[0], action.exit_code, "saving after an exception")
    if action.save.value != "never":
        try:
            ckpt = saver.save_alone(step, rank, distributed)
            if ckpt is not None:
                log.info("trainguard: saved step %d to %s after the exception", step, ckpt.path)
            elif distributed and rank == 0:
                log.info("trainguard: not saving after the exception: the ranks agreed on no step "
                         "(the newest agreed checkpoint is the one to resume from)")
        except Exception as save_exc:  # noqa: BLE001 - report the original exception, not the save's
            log.error("trainguard: saving after the exception failed: %s", save_exc)
    log_stop_line(Decision(Cause.EXCEPTION, action, frozenset({Cause.EXCEPTION})), step)
    return action.exit_code


def forced_timeout(config: GuardConfig, time_left: float, kill_wait: float,
                   pending_signals: int) -> tuple[float, int]:
    """(seconds, exit code) for the forced-exit timer: the configured value, else the time
    left before the job's end minus a reserve for the requeue; for a plain SIGTERM, KillWait."""
    term = bool(pending_signals & (1 << signal.SIGTERM))
    code = config.policy.action(Cause.TERMINATE if term else Cause.TIME_LIMIT).exit_code
    if config.forced_exit:
        return config.forced_exit, code
    if term:
        return max(MIN_FORCED_EXIT, min(time_left, kill_wait) - 1.0), code
    if math.isinf(time_left):
        return FALLBACK_FORCED_EXIT, code
    return max(MIN_FORCED_EXIT, time_left - REQUEUE_RESERVE), code


def bind_agreement(config: GuardConfig, sensors: Sensors, heartbeat: HeartbeatWriter | None,
                   saver: Saver) -> Agreement | None:
    """Under torch.distributed (2+ ranks): the agreement, with the real rank told to the
    heartbeat and the checkpoints (collective saves); None for a single process."""
    dist = initialized_dist()
    if dist is None:
        return None
    agreement = Agreement(dist, config.sync_every, config.sync_interval)
    if agreement.rank != 0:
        # Rank 0 alone polls the shared files; the agreement tells the others. (Spares a
        # metadata server thousands of stats per second on a large run.)
        sensors.files = None
    if heartbeat is not None:
        heartbeat.rank = agreement.rank
    if saver.checkpoints is not None:
        saver.checkpoints.bind(agreement.rank, agreement.barrier, agreement.all)
    saver.wait_steps(config.sync_every)
    return agreement


def start_deadline(config: GuardConfig, job: JobEnv, deadline: Deadline, sensors: Sensors,
                   asks_slurm: bool, now: float, wall: float) -> None:
    # One rank asks the controller when the ranks agree anyway (`asks_slurm`): a 1000-rank
    # job must not send slurmctld 1000 requests per re-read.
    if config.use_slurm_endtime and job.job_id and asks_slurm:
        deadline.query = slurm_query(job.job_id)
        sensors.kill_wait_query = query_kill_wait
    deadline.start(now, wall, config.exit_after)
