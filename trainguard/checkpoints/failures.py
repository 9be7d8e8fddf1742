"""A save that fails or cannot happen: why, in words (a full disk is named as one), and
what a decision becomes without its checkpoint.

Never a requeue without the checkpoint a stop asked for: the requeued run would resume
from an older checkpoint, or from nothing, and meet the same disk or folder. Such a stop
exits with EXIT_CANNOT_SAVE instead; a decision that continues goes on without the save.
"""
from __future__ import annotations

import errno
import logging
import os
from dataclasses import replace
from pathlib import Path

from trainguard.causes import EXIT_CANNOT_SAVE, Action, Decision, Save

log = logging.getLogger("trainguard")


def why_save_failed(exc: BaseException, save_root: Path | None) -> str:
    """The writer's exception in words: ENOSPC, EDQUOT or less than 1 MiB free is a full
    disk (torch reports one as a RuntimeError); anything else is the exception itself."""
    full = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
    free = None
    if save_root is not None:
        try:
            st = os.statvfs(save_root)
            free = st.f_bavail * st.f_frsize
        except OSError:
            pass
    if full or (free is not None and free < 1 << 20):
        return (f"the checkpoint disk is full ({free if free is not None else 0} bytes free in "
                f"{save_root if save_root is not None else '?'}; {type(exc).__name__}: {str(exc)[:120]})")
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def save_failed(decision: Decision, step: int, why: str) -> Decision:
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
