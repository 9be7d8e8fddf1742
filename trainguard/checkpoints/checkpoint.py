"""Checkpoint helpers: atomic commit, keep the last N, resume with fallback.

Not a format: the caller's writer fills a directory (torch.save, safetensors,
torch.distributed.checkpoint, anything). A checkpoint is committed by

  1. writing into `.tmp-step-00000123/` (a deterministic name: every rank writes there),
  2. fsync of every file and of the directory, then a completeness marker `COMPLETE.json`
     listing every file and its size,
  3. `rename` to `step-00000123/` (atomic), fsync of the parent,
  4. replacing the `latest` pointer file atomically (write a temporary file, rename).

A reader therefore sees a complete checkpoint or none. Resume tries the newest `step-*`
folder and, if it is damaged (its marker missing or a file shorter than the marker says) or
the caller's loader fails on it, falls back to the previous one. Never silently: a
fallback is logged as an error with the steps lost, and the damaged folders are renamed
`damaged-step-*` (kept for a post-mortem; a later save of the same step cannot overwrite
them). When every checkpoint is damaged, `resume` raises `CheckpointError` unless the
caller asked for a fresh start on purpose (`start_over`). At least two are kept: the
newest may be the one that was cut off. With a scratch directory (`$SLURM_TMPDIR`), saves go to
fast local storage and `sync_to_shared()` copies the newest one to shared storage at exit.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The marker moved to its own module; these names stay importable from here.
from trainguard.checkpoints.marker import MARKER as MARKER
from trainguard.checkpoints.marker import damage as damage
from trainguard.checkpoints.marker import fsync_path, write_atomically
from trainguard.checkpoints.marker import is_complete as is_complete
from trainguard.checkpoints.marker import mark_complete as mark_complete

log = logging.getLogger("trainguard")
LATEST = "latest"
_NAME = re.compile(r"step-(\d+)")
Writer = Callable[[Path], None]
Loader = Callable[[Path], None]


DAMAGED = "damaged-"


class CheckpointError(Exception):
    """No checkpoint could be loaded although some exist (never silently start over)."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int


@dataclass(frozen=True)
class Skipped:
    """A checkpoint that resume passed over, and why."""

    path: Path
    step: int
    why: str


@dataclass(frozen=True)
class Fallback:
    """What a resume had to pass over: said in the log and in the heartbeat."""

    skipped: tuple[Skipped, ...]
    resumed_step: int | None      # None: started over (on purpose)
    kept_as: tuple[Path, ...]     # where the damaged folders are now

    @property
    def steps_lost(self) -> int:
        newest = max(s.step for s in self.skipped)
        return newest - (self.resumed_step if self.resumed_step is not None else -1)

    def describe(self) -> str:
        damaged = "; ".join(f"{s.path.name} {s.why}" for s in self.skipped)
        where = (f"resumed from step {self.resumed_step}" if self.resumed_step is not None
                 else "started over from step 0 (start_over)")
        kept = f"; kept as {', '.join(p.name for p in self.kept_as)}" if self.kept_as else ""
        return f"{where}, not the newest checkpoint: {damaged}; {self.steps_lost} step(s) lost{kept}"


def step_name(step: int) -> str:
    return f"step-{step:08d}"


class Checkpoints:
    def __init__(self, root: Path, keep: int = 2, scratch: Path | None = None) -> None:
        if keep < 2:
            raise ValueError(f"keep = {keep}: expected 2 or more")
        self.root = Path(root)
        self.keep = keep
        self.scratch = Path(scratch) if scratch is not None else None
        self.rank = 0
        self._barrier: Callable[[], None] = lambda: None
        self._agree_all: Callable[[bool], bool] = lambda ok: ok
        self.fallback: Fallback | None = None

    def bind(self, rank: int, barrier: Callable[[], None], agree_all: Callable[[bool], bool]) -> None:
        """Make saves and resumes collective (the guard does this under torch.distributed)."""
        self.rank, self._barrier, self._agree_all = rank, barrier, agree_all

    @property
    def save_root(self) -> Path:
        return self.scratch if self.scratch is not None else self.root

    # ---- listing -------------------------------------------------------------------------
    def complete(self, base: Path | None = None) -> list[Checkpoint]:
        """Complete checkpoints under `base` (default: root and scratch), newest first."""
        bases = [base] if base is not None else [b for b in (self.scratch, self.root) if b]
        found: dict[int, Checkpoint] = {}
        for b in bases:
            for path in b.glob("step-*") if b.is_dir() else ():
                m = _NAME.fullmatch(path.name)
                if m and int(m.group(1)) not in found and is_complete(path):
                    found[int(m.group(1))] = Checkpoint(path, int(m.group(1)))
        return sorted(found.values(), key=lambda c: c.step, reverse=True)

    def all_steps(self) -> list[Checkpoint]:
        """Every `step-N` folder (complete or not) under root and scratch, newest first."""
        found: dict[int, Checkpoint] = {}
        for b in [b for b in (self.scratch, self.root) if b]:
            for path in b.glob("step-*") if b.is_dir() else ():
                m = _NAME.fullmatch(path.name)
                if m and path.is_dir() and (int(m.group(1)) not in found
                                            or not is_complete(found[int(m.group(1))].path)):
                    found[int(m.group(1))] = Checkpoint(path, int(m.group(1)))
        return sorted(found.values(), key=lambda c: c.step, reverse=True)

    def latest(self) -> Checkpoint | None:
        newest = self.complete()
        return newest[0] if newest else None

    # ---- saving --------------------------------------------------------------------------
    def save(self, step: int, writer: Writer, all_ranks: bool = False, collective: bool = True) -> Checkpoint:
        """Write and commit checkpoint `step`. With `all_ranks`, every rank's writer runs
        (sharded formats); otherwise rank 0's only. `collective=False` skips the barriers
        (a save after an exception on one rank, whose peers are not at this point)."""
        base = self.save_root
        tmp = base / f".tmp-{step_name(step)}"
        barrier = self._barrier if collective else (lambda: None)
        if self.rank == 0:
            base.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
        barrier()
        if all_ranks or self.rank == 0:
            writer(tmp)
        barrier()
        final = base / step_name(step)
        if self.rank == 0:
            self._commit(tmp, final, step)
        barrier()
        return Checkpoint(final, step)

    def _commit(self, tmp: Path, final: Path, step: int) -> None:
        mark_complete(tmp, step)
        old = final.with_name(f".old-{final.name}")
        if final.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.rename(final, old)
        os.rename(tmp, final)
        fsync_path(final.parent)
        write_atomically(final.parent / LATEST, final.name + "\n")
        fsync_path(final.parent)
        shutil.rmtree(old, ignore_errors=True)
        self.prune(final.parent)

    def discard_partial(self, step: int) -> None:
        """Remove what a failed save of `step` left (rank 0): its temporary folder."""
        if self.rank == 0:
            shutil.rmtree(self.save_root / f".tmp-{step_name(step)}", ignore_errors=True)

    def prune(self, base: Path) -> None:
        """Keep the newest `keep` complete checkpoints; remove older ones and leftovers of
        interrupted saves (temporary directories are re-created by the next save anyway)."""
        for ckpt in self.complete(base)[self.keep:]:
            shutil.rmtree(ckpt.path, ignore_errors=True)
        for leftover in list(base.glob(".tmp-step-*")) + list(base.glob(".old-step-*")):
            shutil.rmtree(leftover, ignore_errors=True)

    def sync_to_shared(self) -> Checkpoint | None:
        """Copy the newest scratch checkpoint to shared storage (rank 0; at exit)."""
        if self.scratch is None or self.rank != 0:
            return None
        newest = self.complete(self.scratch)
        if not newest or any(c.step == newest[0].step for c in self.complete(self.root)):
            return None
        src = newest[0]
        tmp = self.root / f".tmp-{step_name(src.step)}"
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src.path, tmp, ignore=shutil.ignore_patterns(MARKER))
        self._commit(tmp, self.root / step_name(src.step), src.step)
        return Checkpoint(self.root / step_name(src.step), src.step)

    # ---- resuming ------------------------------------------------------------------------
    def resume(self, loader: Loader, start_over: bool = False) -> Checkpoint | None:
        """Load the newest loadable checkpoint (every rank agrees on which); None when there
        is none. Passing over a damaged one is an error in the log and `self.fallback`
        (the guard writes it into the heartbeat). Raises CheckpointError when checkpoints
        exist but none loads, unless `start_over` (then they are kept aside, and None)."""
        self.fallback = None
        skipped: list[Skipped] = []
        for ckpt in self.all_steps():
            why = damage(ckpt.path)
            if why is None:
                why = self._try_load(loader, ckpt)
            if self._agree_all(why is None):
                if skipped:
                    self._fell_back(skipped, ckpt.step)
                return ckpt
            skipped.append(Skipped(ckpt.path, ckpt.step, why or "could not be loaded on another rank"))
        if not skipped:
            return None
        listing = "; ".join(f"{s.path} {s.why}" for s in skipped)
        if not start_over:
            raise CheckpointError(
                f"none of the {len(skipped)} checkpoint(s) in {self.root} can be loaded ({listing}); "
                "refusing to start over silently. They are left as they are. To start from step 0 "
                "on purpose, move them aside or set start_over=True (TRAINGUARD_START_OVER=1)")
        self._fell_back(skipped, None)
        return None

    def _fell_back(self, skipped: list[Skipped], resumed_step: int | None) -> None:
        # Rename, never delete: the folders are the evidence, and a later save of the same
        # step (the training redoes those steps) must not overwrite them.
        kept = tuple(self._set_aside(s.path) for s in skipped) if self.rank == 0 else ()
        self.fallback = Fallback(tuple(skipped), resumed_step, tuple(p for p in kept if p))
        log.error("trainguard: %s", self.fallback.describe())

    @staticmethod
    def _set_aside(path: Path) -> Path | None:
        target = path.with_name(f"{DAMAGED}{path.name}")
        n = 1
        while target.exists():
            n += 1
            target = path.with_name(f"{DAMAGED}{path.name}.{n}")
        try:
            os.rename(path, target)
        except OSError as exc:
            log.error("trainguard: cannot rename the damaged %s aside: %s", path, exc.strerror or exc)
            return None
        return target

    @staticmethod
    def _try_load(loader: Loader, ckpt: Checkpoint) -> str | None:
        """None when the caller's loader took it, else why not."""
        try:
            loader(ckpt.path)
            return None
        except Exception as exc:  # noqa: BLE001 - any failure of the user's loader means "try the previous one"
            log.warning("trainguard: loading %s failed: %s: %s; falling back", ckpt.path,
                        type(exc).__name__, exc)
            return f"failed to load ({type(exc).__name__}: {str(exc)[:200]})"
