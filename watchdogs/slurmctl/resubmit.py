"""Optional self-healing for a `job` check: resubmit a gone job, within a crash-loop limit.

The decision is a pure function of the resubmit history, the time and what is known of the
last run; only `submit` touches Slurm.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from watchdogs.slurmctl.runner import SlurmRunner
from watchdogs.units import format_duration


@dataclass(frozen=True)
class ResubmitPolicy:
    script: Path
    limit: int
    window: float
    kill_switch: Path


@dataclass(frozen=True)
class Decision:
    allowed: bool
    why: str
    recent: tuple[float, ...]


def decide(policy: ResubmitPolicy, history: Sequence[float], now: float, kill_switch_exists: bool,
           last_state: str | None) -> Decision:
    recent = tuple(t for t in history if now - t < policy.window)
    if kill_switch_exists:
        return Decision(False, f"not resubmitted: kill switch {policy.kill_switch} exists", recent)
    if last_state == "COMPLETED":
        return Decision(False, "not resubmitted: the last run completed successfully", recent)
    if len(recent) >= policy.limit:
        return Decision(False, f"not resubmitted: crash loop ({len(recent)} resubmits in the last "
                               f"{format_duration(policy.window)}, limit {policy.limit})", recent)
    return Decision(True, f"resubmit {len(recent) + 1} of {policy.limit} allowed in "
                          f"{format_duration(policy.window)}", recent)


def submit(script: Path, job_name: str | None, cluster: str | None, timeout: float,
           env: Mapping[str, str] | None, runner: SlurmRunner) -> str:
    """sbatch the script from its own folder (its relative paths mean what they meant when
    a person submitted it), under the watched name so the next tick finds it."""
    argv = ["sbatch", "--parsable", f"--chdir={script.parent}"]
    if job_name:
        argv.append(f"--job-name={job_name}")
    if cluster:
        argv.append(f"--clusters={cluster}")
    reply = runner([*argv, str(script)], timeout=timeout, env=env)
    return reply.stdout.strip().split(";")[0]
