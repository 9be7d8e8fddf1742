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

`HangResponse` knows what the response needs (the config, the job, this rank among how
many, the newest checkpoint from the saver's memory) and nothing of the Guard.
"""
from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trainguard._units import format_duration
from trainguard.causes import EXIT_NO_PROGRESS, EXIT_REQUEUE, Cause
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
from trainguard.hangs.watch import Stall
from trainguard.heartbeat import node_name, read_heartbeats, write_heartbeat
from trainguard.recovery import suspects
from trainguard.recovery.suspects import Suspicion
from trainguard.stopping.exits import write_exit_file

if TYPE_CHECKING:
    from trainguard.checkpoints.saving import Saver
    from trainguard.config import GuardConfig
    from trainguard.slurm.job import JobEnv

log = logging.getLogger("trainguard")
BACKSTOP_S = 30.0   # s on top of the grace for the report's file writes and py-spy


class HangResponse:
    """Reports a hang and acts on it (`respond`, called by the watchdog's thread). `bind`
    tells it the config, rank and world size the training resumed with (the config too: the
    HF integration sets `checkpoint_dir`, where hangs are counted, before the resume)."""

    def __init__(self, config: GuardConfig, job: JobEnv, saver: Saver, rank: int,
                 requeue: Callable[[str], None]) -> None:
        self.config = config
        self.job = job
        self.saver = saver
        self.requeue = requeue      # the self-requeue (the stopper's), used without a template
        self.rank = rank
        self.world = 1

    def bind(self, config: GuardConfig, rank: int, world: int) -> None:
        self.config, self.rank, self.world = config, rank, world

    def respond(self, stall: Stall) -> bool:
        """Report the hang and act. Returns True to keep watching (report-only policy)."""
        cfg = self.config
        action = cfg.policy.action(Cause.HANG)
        code = action.exit_code
        detected = time.monotonic()
        if action.stop:
            _arm_backstop(cfg.hang_grace + BACKSTOP_S, code)
        native = stacks.NativeDump() if cfg.hang_native_stacks else None   # runs while we write
        frames = stacks.main_thread_frames()
        waiting = frames   # the Python frames ("all_reduce (...)"): the suspect's words
        report = self.report_path()
        checkpoint = self.saver.newest_step
        count = self._count(checkpoint) if action.requeue else None
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
        report = self._write_report(report, stall, frames, checkpoint, f"{what}{count_note}")
        self._mark_hung(stall, frames, report)
        if native is not None:
            frames = self._add_native(stall, native, report) or frames
        if ends and count is not None and cfg.checkpoint_dir is not None:
            log.error("%s", chain_end_message(count, cfg.checkpoint_dir))
        if not action.stop:
            return True
        time.sleep(max(0.0, cfg.hang_grace - (time.monotonic() - detected)))
        first, frozen = self._name_first_to_stop(report, waiting)
        self._log_event(HangEvent(time.time(), self.job.job_id, self.job.restart_count, self.rank,
                                  node_name(), stall.step, stall.phase, round(stall.stalled_for, 1),
                                  frames, str(report or ""), checkpoint, count.hangs if count else 0,
                                  first, what))
        if action.requeue and cfg.self_requeue and self.rank == 0 and not ends:
            self.requeue(self.job.job_id)
        resume = f"step {checkpoint}" if checkpoint >= 0 else "the start (no checkpoint yet)"
        self._write_exit(code, f"hung at step {stall.step} ({stall.phase}) with no progress for "
                               f"{format_duration(stall.stalled_for)}; NO checkpoint saved"
                               + (f": it resumes from {resume} (the work since it is lost)"
                                  if code == EXIT_REQUEUE else "") + count_note)
        if frozen:
            _end_job_step(frozen)
        _exit(code)
        return False

    def report_path(self) -> Path | None:
        cfg, job = self.config, self.job
        folder = cfg.hang_report_dir or cfg.heartbeat_dir or cfg.checkpoint_dir
        if folder is None:
            return None
        name = f"hang-{job.job_id or 'local'}-restart{job.restart_count}-rank{self.rank}.txt"
        return Path(folder) / name

    def _count(self, checkpoint: int) -> HangCount | None:
        root = self.config.checkpoint_dir
        if root is None or not self.job.job_id:
            return None
        try:
            count = next_count(read_count(root), self.job.chain_id, checkpoint, self.job.restart_count)
            write_count(root, count)
        except OSError as exc:
            log.error("trainguard: cannot record the hang in %s: %s", root, exc)
            return None
        return count

    def _write_report(self, path: Path | None, stall: Stall, frames: tuple[str, ...],
                      checkpoint: int, action: str) -> Path | None:
        """The report's header and Python stacks; its path, or None when it went to stderr."""
        job = self.job
        header = "\n".join([
            "trainguard hang report",
            f"job {job.label or '(not in SLURM)'}, restart {job.restart_count}, rank {self.rank} of "
            f"{self.world}, host {node_name()}, pid {os.getpid()}",
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

    def _add_native(self, stall: Stall, native: stacks.NativeDump, report: Path | None
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
        self._mark_hung(stall, frames, report)
        return frames

    def _mark_hung(self, stall: Stall, frames: tuple[str, ...], report: Path | None) -> None:
        folder = self.config.heartbeat_dir
        if folder is None:
            return
        try:
            write_heartbeat(folder, self.rank, stall.step, "hung", job_id=self.job.job_id,
                            stalled_for=round(stall.stalled_for, 1), frames=frames,
                            report=str(report or ""))
        except OSError as exc:
            log.error("trainguard: cannot write the hung heartbeat in %s: %s", folder, exc)

    def _name_first_to_stop(self, report: Path | None, frames: tuple[str, ...]
                            ) -> tuple[str, list[int]]:
        """(the rank that stopped first, described; the peers of this job that are neither hung
        nor done, i.e. frozen or dead) from the heartbeats, after the peers' grace. Its node is
        recorded as the run's suspect."""
        folder = self.config.heartbeat_dir
        if folder is None or self.world == 1:   # no peers to name
            return "", []
        beats = [b for b in read_heartbeats(folder) if b.job_id == self.job.job_id]
        first = first_to_stop(beats)
        if first is None:
            return "", []
        now = time.time()
        frozen = [b.rank for b in beats if b.phase not in ("hung", "done") and b.rank != self.rank]
        line = ("first to stop (lowest step, then not reporting hung, then oldest heartbeat): "
                f"{describe(first, now)}")
        log.error("trainguard: %s", line)
        if report is not None:
            with contextlib.suppress(OSError), report.open("a", errors="backslashreplace") as out:
                out.write(f"\n{line}\n" + "".join(f"  {describe(b, now)}\n" for b in beats))
        self._record_suspect(suspicion(first, self.job.job_id, frames, now))
        return describe(first, now), frozen

    def _record_suspect(self, found: Suspicion | None) -> None:
        folder = self.config.run_dir
        if folder is None or found is None:
            return
        try:
            suspects.record(folder, found)
        except OSError as exc:
            log.error("trainguard: cannot record the suspect node in %s: %s", folder, exc)
            return
        log.error("trainguard: recorded in the run's suspect nodes: %s", found.sentence())

    def _log_event(self, event: HangEvent) -> None:
        folder = self.config.heartbeat_dir
        if folder is None:
            return
        try:
            append_event(folder, event)
        except OSError as exc:
            log.error("trainguard: cannot append to the hang log in %s: %s", folder, exc)

    def _write_exit(self, code: int, why: str) -> None:
        if self.config.exit_file is not None:
            # Any rank: the rank that writes it normally (rank 0) may be the one that is stuck.
            write_exit_file(self.config.exit_file, code, why)


def _what_next(stop: bool, code: int, grace: float) -> str:
    if not stop:
        return "policy: report only, training continues to wait"
    if code == 140:
        # The batch script, not trainguard, picks the recovery: a template with a spare node
        # restarts in place, others requeue. Promising one of them misled (issue 36).
        return (f"exiting {code} in {grace:g} s: the batch script decides "
                "(restart in place if a spare is left, else requeue)")
    return f"exiting {code} (no requeue) in {grace:g} s"


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


def _exit(code: int) -> None:
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
