"""What the guard does when its progress watchdog (trainguard.hangs.watch) finds a hang.

Runs in the watchdog's thread while the main thread is stuck (often inside a C call that
released the GIL: a gloo all_reduce, a read() on a hung mount):

1. arm a backstop timer that `os._exit`s anyway, in case a file write below hangs too;
2. write the per-rank hang report (every thread's stack; native stacks via py-spy);
3. mark the heartbeat `hung` (step, phase, top frames, report path) and count the hang;
4. wait `hang_grace` (the peers write their own `hung` records), name the rank that
   stopped first in the report and the log;
5. act by the policy's `hang` entry: by default `os._exit(140)` so the job is requeued
   and resumes from the last good checkpoint (a wedged collective cannot save). A normal
   exit would wait for the stuck thread forever; `os._exit` does not.
"""
from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from trainguard._units import format_duration
from trainguard.causes import EXIT_NO_PROGRESS, EXIT_REQUEUE, Cause
from trainguard.config import hang_limits
from trainguard.hangs import stacks
from trainguard.hangs.record import (
    HangCount,
    HangEvent,
    append_event,
    chain_end_message,
    chain_ends,
    describe,
    first_to_stop,
    next_count,
    read_count,
    suspicion,
    write_count,
)
from trainguard.hangs.watch import HangWatch, Stall
from trainguard.heartbeat import node_name, read_heartbeats, write_heartbeat
from trainguard.recovery import suspects
from trainguard.recovery.suspects import Suspicion
from trainguard.stopping.exits import ProcessExit, write_exit_file

if TYPE_CHECKING:
    from trainguard.guard import Guard

log = logging.getLogger("trainguard")
BACKSTOP_S = 30.0   # s on top of the grace for the report's file writes and py-spy


def hang_watch(guard: Guard) -> HangWatch | None:
    """The guard's progress watchdog (started at the first `train` phase), or None when off."""
    cfg = guard.config
    if not cfg.hang_detect:
        return None
    return HangWatch(hang_limits(cfg), lambda: (guard.last_step, guard._last_tick),
                     lambda: guard.deadline.deadline, lambda stall: respond(guard, stall), guard._clock)


def respond(guard: Guard, stall: Stall) -> bool:
    """Report the hang and act. Returns True to keep watching (report-only policy)."""
    cfg = guard.config
    action = cfg.policy.action(Cause.HANG)
    code = action.exit_code
    detected = time.monotonic()
    if action.stop:
        _arm_backstop(cfg.hang_grace + BACKSTOP_S, code)
    native = stacks.NativeDump() if cfg.hang_native_stacks else None   # runs while we write
    frames = stacks.main_thread_frames()
    waiting = frames   # the Python frames ("all_reduce (...)"): the suspect's words
    report = report_path(guard)
    checkpoint = newest_checkpoint_step(guard)
    count = _count(guard, checkpoint) if action.requeue else None
    limit = cfg.max_hangs_without_progress
    ends = count is not None and chain_ends(count, limit)
    count_note = "" if count is None else (f"; hang {count.hangs} of {limit} allowed without a new "
                                           f"checkpoint" + (": ENDING THE CHAIN" if ends else ""))
    if ends:
        code = EXIT_NO_PROGRESS
    what = _what_next(action.stop, code, cfg.hang_grace)
    where = " <- ".join(frames) or "(no Python frame)"
    log.error("trainguard: HANG: no progress for %s in phase %s after step %d (budget %s); "
              "stuck in %s; %s%s", format_duration(stall.stalled_for), stall.phase, stall.step,
              format_duration(stall.budget), where, what, count_note)
    report = _write_report(guard, report, stall, frames, checkpoint, f"{what}{count_note}")
    _mark_hung(guard, stall, frames, report)
    if native is not None:
        frames = _add_native(guard, stall, native, report) or frames
    if ends and count is not None and cfg.checkpoint_dir is not None:
        log.error("%s", chain_end_message(count, cfg.checkpoint_dir))
    if not action.stop:
        return True
    time.sleep(max(0.0, cfg.hang_grace - (time.monotonic() - detected)))
    first, frozen = _name_first_to_stop(guard, report, waiting)
    _log_event(guard, HangEvent(time.time(), guard.job.job_id, guard.job.restart_count, guard.rank,
                                node_name(), stall.step, stall.phase, round(stall.stalled_for, 1),
                                frames, str(report or ""), checkpoint, count.hangs if count else 0,
                                first, what))
    if action.requeue and cfg.self_requeue and guard.rank == 0 and not ends:
        ProcessExit.requeue(guard.job.job_id)
    resume = f"step {checkpoint}" if checkpoint >= 0 else "the start (no checkpoint yet)"
    _write_exit(guard, code, f"hung at step {stall.step} ({stall.phase}) with no progress for "
                             f"{format_duration(stall.stalled_for)}; NO checkpoint saved"
                             + (f": it resumes from {resume} (the work since it is lost)"
                                if code == EXIT_REQUEUE else "") + count_note)
    if frozen:
        _end_job_step(frozen)
    _exit(code)
    return False


def report_path(guard: Guard) -> Path | None:
    cfg, job = guard.config, guard.job
    folder = cfg.hang_report_dir or cfg.heartbeat_dir or cfg.checkpoint_dir
    if folder is None:
        return None
    name = f"hang-{job.job_id or 'local'}-restart{job.restart_count}-rank{guard.rank}.txt"
    return Path(folder) / name


def newest_checkpoint_step(guard: Guard) -> int:
    """From memory (no file system access: the file system may be what hangs)."""
    saved = guard.saver.saved_step
    resumed = guard.resumed.step if guard.resumed is not None else -1
    return max(resumed, saved if saved is not None else -1)


def _what_next(stop: bool, code: int, grace: float) -> str:
    if not stop:
        return "policy: report only, training continues to wait"
    why = "requeue" if code == 140 else "no requeue"
    return f"exiting {code} ({why}) in {grace:g} s"


def _count(guard: Guard, checkpoint: int) -> HangCount | None:
    root = guard.config.checkpoint_dir
    if root is None or not guard.job.job_id:
        return None
    try:
        count = next_count(read_count(root), guard.job.chain_id, checkpoint, guard.job.restart_count)
        write_count(root, count)
    except OSError as exc:
        log.error("trainguard: cannot record the hang in %s: %s", root, exc)
        return None
    return count


def _write_report(guard: Guard, path: Path | None, stall: Stall, frames: tuple[str, ...],
                  checkpoint: int, action: str) -> Path | None:
    """The report's header and Python stacks; its path, or None when it went to stderr."""
    job = guard.job
    world = guard.agreement.world if guard.agreement is not None else 1
    header = "\n".join([
        "trainguard hang report",
        f"job {job.label or '(not in SLURM)'}, restart {job.restart_count}, rank {guard.rank} of "
        f"{world}, host {node_name()}, pid {os.getpid()}",
        f"detected {time.strftime('%Y-%m-%dT%H:%M:%S')}: no progress for "
        f"{format_duration(stall.stalled_for)} in phase {stall.phase} "
        f"(budget {format_duration(stall.budget)})",
        f"last completed step {stall.step}; newest checkpoint step {checkpoint}",
        f"stuck in: {' <- '.join(frames) or '(no Python frame)'}",
        f"action: {action}",
    ])
    if path is None:
        sys.stderr.write(header + "\n")
        stacks.write_python_stacks(sys.stderr)
        return None
    try:
        stacks.write_report(path, header)
    except OSError as exc:
        log.error("trainguard: cannot write the hang report %s: %s; stacks to stderr", path, exc)
        stacks.write_python_stacks(sys.stderr)
        return None
    log.error("trainguard: hang report (every thread's stack): %s", path)
    return path


def _add_native(guard: Guard, stall: Stall, native: stacks.NativeDump, report: Path | None
                ) -> tuple[str, ...] | None:
    """Wait for py-spy; its stacks go to the report, and where the main thread waits in
    native code to the heartbeat. The new top frames, or None when py-spy says nothing."""
    native.collect()
    if report is not None:
        with contextlib.suppress(OSError):
            stacks.append_native(report, native)
    else:
        native.write(sys.stderr)
    top = native.main_thread_top
    if top is None:
        return None
    frames = stacks.main_thread_frames(top)
    _mark_hung(guard, stall, frames, report)
    return frames


def _mark_hung(guard: Guard, stall: Stall, frames: tuple[str, ...], report: Path | None) -> None:
    folder = guard.config.heartbeat_dir
    if folder is None:
        return
    try:
        write_heartbeat(folder, guard.rank, stall.step, "hung", job_id=guard.job.job_id,
                        stalled_for=round(stall.stalled_for, 1), frames=frames,
                        report=str(report or ""))
    except OSError as exc:
        log.error("trainguard: cannot write the hung heartbeat in %s: %s", folder, exc)


def _name_first_to_stop(guard: Guard, report: Path | None, frames: tuple[str, ...]
                        ) -> tuple[str, list[int]]:
    """(the rank that stopped first, described; the peers of this job that are neither hung
    nor done, i.e. frozen or dead) from the heartbeats, after the peers' grace. Its node is
    recorded as the run's suspect."""
    folder = guard.config.heartbeat_dir
    if folder is None or guard.agreement is None:
        return "", []
    beats = [b for b in read_heartbeats(folder) if b.job_id == guard.job.job_id]
    first = first_to_stop(beats)
    if first is None:
        return "", []
    now = time.time()
    frozen = [b.rank for b in beats if b.phase not in ("hung", "done") and b.rank != guard.rank]
    line = ("first to stop (lowest step, then not reporting hung, then oldest heartbeat): "
            f"{describe(first, now)}")
    log.error("trainguard: %s", line)
    if report is not None:
        with contextlib.suppress(OSError), report.open("a") as out:
            out.write(f"\n{line}\n" + "".join(f"  {describe(b, now)}\n" for b in beats))
    _record_suspect(guard, suspicion(first, guard.job.job_id, frames, now))
    return describe(first, now), frozen


def _record_suspect(guard: Guard, found: Suspicion | None) -> None:
    folder = guard.config.run_dir
    if folder is None or found is None:
        return
    try:
        suspects.record(folder, found)
    except OSError as exc:
        log.error("trainguard: cannot record the suspect node in %s: %s", folder, exc)
        return
    log.error("trainguard: recorded in the run's suspect nodes: %s", found.sentence())


def _log_event(guard: Guard, event: HangEvent) -> None:
    folder = guard.config.heartbeat_dir
    if folder is None:
        return
    try:
        append_event(folder, event)
    except OSError as exc:
        log.error("trainguard: cannot append to the hang log in %s: %s", folder, exc)


def _end_job_step(frozen: list[int]) -> None:
    # A frozen rank (SIGSTOP, a dead node, D state) never exits, and the job step (srun)
    # waits for it forever: the job would never be requeued. Ending the step is the only
    # way out; the batch script reads the real exit code from TRAINGUARD_EXIT_FILE.
    job, step = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID", "")
    # Only a real srun step: never the batch (or extern) step, which holds the batch script
    # that must requeue the job (some Slurm versions set their ids, 4294967290 and up).
    if not job or not step.isdigit() or int(step) >= 4294967290:
        return
    log.error("trainguard: rank(s) %s neither progress nor report the hang: ending job step %s.%s",
              ",".join(map(str, frozen)), job, step)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    try:
        subprocess.run(["scancel", "--signal=KILL", f"{job}.{step}"], timeout=10, check=False,
                       capture_output=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.error("trainguard: scancel of the job step failed: %s", exc)


def _arm_backstop(after: float, code: int) -> None:
    # If a write below blocks on a hung file system, the process still ends, with the
    # same code: a hung guard would be worse than a report missing.
    timer = threading.Timer(after, os._exit, (code,))
    timer.daemon = True
    timer.start()


def _write_exit(guard: Guard, code: int, why: str) -> None:
    if guard.config.exit_file is not None:
        # Any rank: the rank that writes it normally (rank 0) may be the one that is stuck.
        write_exit_file(guard.config.exit_file, code, why)


def _exit(code: int) -> None:
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
