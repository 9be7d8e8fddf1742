"""The check before a restart (issue 22 item 5): before the training resumes on a node set,
each rank checks its node, and a failing node becomes a suspect at once instead of hanging
the run again.

Checked, each in a small function with its own error in words:
- the checkpoint folder can be listed (read) and a file created in it (write);
- there is free space for a save (the newest checkpoint's size, plus a margin);
- local scratch works (the scratch folder, else $TMPDIR or /tmp: create, write, read back);
- the accelerator is visible when the job holds one (CUDA_VISIBLE_DEVICES names devices:
  their /dev/nvidia* files exist). UNTESTED here: the dev cluster has no GPU.

Only in a job step of the templates (TRAINGUARD_RUN_DIR set): the failing rank records its
node (cause "precheck"), writes the exit code file (EXIT_PRECHECK, the reason in words),
ends the job step so that its peers do not wait at the rendezvous, and exits. The template
then restarts in place without that node, or requeues excluding it.

A failure of the checkpoint folder's filesystem that every node shares (full: ENOSPC, over
quota: EDQUOT, or too little space for a save) is the run's, not the node's: no node becomes
a suspect (each would be excluded in turn); the rank writes EXIT_CANNOT_SAVE with the words,
ends the step and exits, and the template ends the job with that code (not requeued).
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainguard.causes import EXIT_CANNOT_SAVE
from trainguard.heartbeat import node_name

if TYPE_CHECKING:  # the config is read, never built, here: no run-time import of the layer above
    from trainguard.config import GuardConfig

log = logging.getLogger("trainguard")
EXIT_PRECHECK = 7          # this node failed the check before a (re)start: a suspect, not a crash
SPACE_MARGIN = 1.2         # a save needs the newest checkpoint's size and a fifth more
# A folder's permissions or a read-only mount are a setting of the run, not a node's fault.
SETTINGS_ERRORS = (errno.EACCES, errno.EPERM, errno.EROFS)
# A full or over-quota shared filesystem: the run's storage, the same seen from every node.
FULL_ERRORS = (errno.ENOSPC, errno.EDQUOT)
NODE, RUN = "node", "run"   # whose fault a failed check is

@dataclass(frozen=True)
class Failed:
    what: str              # "checkpoint folder", "free space", "scratch", "accelerator"
    why: str
    scope: str = NODE      # RUN: the shared checkpoint folder's, the same from every node

    def sentence(self) -> str:
        return f"{self.what}: {self.why}"


def _tree_size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def newest_checkpoint_size(root: Path) -> int:
    steps = sorted((p for p in root.glob("step-*") if p.is_dir()), reverse=True)
    return _tree_size(steps[0]) if steps else 0


def check_folder(root: Path) -> Failed | None:
    probe = root / f".precheck-{node_name()}-{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        os.listdir(root)
        probe.write_bytes(b"precheck")
        probe.unlink()
    except OSError as exc:
        return folder_failure(root, exc)
    return None


def folder_failure(root: Path, exc: OSError) -> Failed | None:
    """Whose fault an error of the checkpoint folder is: None for a setting of the run (its
    permissions, a read-only mount: the save check at resume ends it, exit 4), the run's for
    a full or over-quota filesystem, else this node's."""
    if exc.errno in SETTINGS_ERRORS:
        return None
    if exc.errno in FULL_ERRORS:
        return Failed("checkpoint folder", f"{root} is full ({exc.strerror})", RUN)
    return Failed("checkpoint folder", f"{root} cannot be read and written: {exc}")


def check_space(root: Path, free: Callable[[Path], int]) -> Failed | None:
    try:
        need = int(newest_checkpoint_size(root) * SPACE_MARGIN)
        left = free(root)
    except OSError as exc:
        return Failed("free space", f"cannot tell the free space of {root}: {exc}")
    if left < need:
        # The checkpoint folder is on the run's shared storage: every node sees the same.
        return Failed("free space", f"{left} bytes free in {root}, a save needs about {need}", RUN)
    return None


def check_scratch(folder: Path) -> Failed | None:
    probe = folder / f".trainguard-precheck-{os.getpid()}"
    try:
        probe.write_bytes(b"scratch")
        ok = probe.read_bytes() == b"scratch"
        probe.unlink()
    except OSError as exc:
        return Failed("scratch", f"{folder} does not work: {exc}")
    return None if ok else Failed("scratch", f"{folder} gave back other bytes than written")


def check_accelerator(env: Mapping[str, str], exists: Callable[[str], bool]) -> Failed | None:
    devices = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip().isdigit()]
    if not devices:
        return None        # the job holds no GPU (or names them by UUID: not checked here)
    missing = [d for d in devices if not exists(f"/dev/nvidia{d}")]
    if missing or not exists("/dev/nvidiactl"):
        return Failed("accelerator", f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} but "
                                     f"/dev/nvidia{','.join(missing) or 'ctl'} is missing")
    return None


def _free(path: Path) -> int:
    return shutil.disk_usage(path).free


def precheck(cfg: GuardConfig, env: Mapping[str, str]) -> Failed | None:
    """The first failing check of this node, or None."""
    checks: list[Callable[[], Failed | None]] = []
    if cfg.checkpoint_dir is not None:
        root = cfg.checkpoint_dir
        checks += [lambda: check_folder(root), lambda: check_space(root, _free)]
    scratch = cfg.scratch_dir or Path(env.get("TMPDIR", "/tmp"))
    checks += [lambda: check_scratch(scratch), lambda: check_accelerator(env, os.path.exists)]
    for check in checks:
        failed = check()
        if failed is not None:
            return failed
    return None


def record(cfg: GuardConfig, env: Mapping[str, str], failed: Failed) -> None:
    """This node as a suspect in the run's record (trainguard.recovery.suspects)."""
    from trainguard.recovery import suspects
    if cfg.run_dir is None:
        return
    try:
        suspects.record(cfg.run_dir, suspects.Suspicion(node_name(), "precheck", time.time(),
                                                        env.get("SLURM_JOB_ID", ""), -1,
                                                        failed.sentence()))
    except (OSError, ValueError) as exc:
        log.error("trainguard: cannot record %s as a suspect in %s: %s", node_name(), cfg.run_dir, exc)


def in_template_step(cfg: GuardConfig, env: Mapping[str, str]) -> bool:
    step = env.get("SLURM_STEP_ID", "")
    return cfg.run_dir is not None and step.isdigit() and int(step) < 4294967290


def run(cfg: GuardConfig, env: Mapping[str, str]) -> None:
    """From the guard's start: check this node; on a failure record it, end the step, exit."""
    if not in_template_step(cfg, env):
        return
    failed = precheck(cfg, env)
    if failed is None:
        return
    if failed.scope == RUN:
        _end_run(cfg, env, failed)
    why = f"node {node_name()} failed the check before the start: {failed.sentence()}"
    log.error("trainguard: %s; it is a suspect now: ending the job step", why)
    record(cfg, env, failed)
    if cfg.exit_file is not None:
        from trainguard.stopping.exits import write_exit_file
        write_exit_file(cfg.exit_file, EXIT_PRECHECK, why)
    _end_own_step(env)
    logging.shutdown()
    os._exit(EXIT_PRECHECK)


def _end_run(cfg: GuardConfig, env: Mapping[str, str], failed: Failed) -> None:
    """The run's storage cannot take a save: no suspect (every node would fail the same),
    the words in the exit file, the step ended, EXIT_CANNOT_SAVE (not requeued)."""
    why = (f"{failed.sentence()}: the run's storage, not node {node_name()}; free space (or "
           "raise the quota) or move TRAINGUARD_CHECKPOINT_DIR, then resubmit")
    log.error("trainguard: cannot save a checkpoint: %s; no node is a suspect: ending the job step", why)
    if cfg.exit_file is not None:
        from trainguard.stopping.exits import write_exit_file
        write_exit_file(cfg.exit_file, EXIT_CANNOT_SAVE, f"cannot save: {why}")
    _end_own_step(env)
    logging.shutdown()
    os._exit(EXIT_CANNOT_SAVE)


def _end_own_step(env: Mapping[str, str]) -> None:
    # Its peers would wait at the rendezvous until its timeout (30 min): end the step now.
    from trainguard.errors import SlurmError
    from trainguard.slurm.run import run_slurm
    try:
        run_slurm(["scancel", "--signal=KILL", f"{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"])
    except (SlurmError, KeyError) as exc:
        log.error("trainguard: cannot end the job step: %s", exc)
