"""The self-perpetuating scheduler job.

At start, the running instance makes sure exactly one successor is pending: it looks
first (one squeue by job name) and submits only if none is, with
`--dependency=afterany:<itself>,singleton` and the same job name. The successor cannot
start while any instance of that name runs (singleton), so there are never two running;
when the running one ends for any reason (time limit, scancel, crash, node failure), the
successor is already in the queue. A crash loop is slowed down by giving the successor
a growing `--begin=now+N`, decided from how the previous instances ended.
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdogs import units
from watchdogs.config.sections import SCHEDULER
from watchdogs.errors import SlurmError, WatchdogsError
from watchdogs.scheduler.runs import Life
from watchdogs.slurmctl.runner import SlurmRunner, run_slurm
from watchdogs.state import lastgood

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

LOG = logging.getLogger("watchdogs.chain")
YOUNG_S = 60.0
"""An instance that ends sooner than this after starting counts towards a crash loop."""
BACKOFF_BASE_S = 30.0
BACKOFF_CAP_S = 1800.0
RECHECK_S = 300.0
"""How often a running instance makes sure its successor is still queued."""
HEALTHY_ENDS = ("handover", "stop file")
SCRIPT_ENV = "WATCHDOGS_CHAIN_SCRIPT"
PYTHON_ENV = "WATCHDOGS_PYTHON"
STATE_ENV = "WATCHDOGS_STATE_DIR"
"""Where the last good config lies, for an instance whose config cannot be parsed."""
MAIL_TYPES = "FAIL,INVALID_DEPEND"
LIVE_STATES = "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED,REQUEUED,REQUEUE_HOLD,RESIZING"


@dataclass(frozen=True)
class ChainSettings:
    config_path: Path
    state_dir: Path
    stop_file: Path
    job_name: str
    mail_user: str | None = None
    source: str = "config"
    """Where these settings come from: "config", "last good copy" or "defaults"."""
    problem: str | None = None
    """Why the config itself could not be read, if it could not."""

    @property
    def output_dir(self) -> Path:
        return self.state_dir / "scheduler"


@dataclass(frozen=True)
class ChainJob:
    id: str
    state: str
    reason: str
    start: str


def lenient_settings(config_path: Path, env: Mapping[str, str] | None = None) -> ChainSettings:
    """The chain's settings from [scheduler], even when the rest of the config is bad: a
    broken config must still leave a backed-off successor (and `watchdogs stop` must work).
    Keys that do not parse fall back to their defaults, resolved as the loader does. When
    the file cannot be read or parsed at all, the last good copy kept in the state
    directory stands in: $WATCHDOGS_STATE_DIR (the chain passes it on to successors), else
    the folder noted for this config file in the per-user index (see state.lastgood)."""
    env = os.environ if env is None else env
    config_path = config_path.expanduser().absolute()
    raw, problem = _scheduler_table(config_path, None)
    source = "config"
    if problem is not None:
        # Only a copy known to be this config's: the default folder may hold another chain's.
        index = Path(SCHEDULER["state_dir"].default).expanduser()
        where = Path(env[STATE_ENV]) if env.get(STATE_ENV) else lastgood.noted_state_dir(config_path, index)
        copy = lastgood.load(where) if where is not None else None
        raw, bad_copy = _scheduler_table(config_path, copy) if copy is not None else ({}, "none")
        source = f"last good copy in {where}" if copy is not None and bad_copy is None else "defaults"
    def value(key: str) -> Any:
        try:
            return SCHEDULER[key].kind(raw[key]) if key in raw else SCHEDULER[key].default
        except ValueError:
            return SCHEDULER[key].default
    def path(key: str, default: Path) -> Path:
        found = value(key)
        found = Path(found).expanduser() if found else default
        return found if found.is_absolute() else config_path.parent / found
    state_dir = path("state_dir", Path(SCHEDULER["state_dir"].default))
    return ChainSettings(config_path, state_dir, path("stop_file", state_dir / "STOP"), value("job_name"),
                         value("mail_user"), source, problem)


def _scheduler_table(config_path: Path, source: bytes | None) -> tuple[dict[str, Any], str | None]:
    """The raw [scheduler] table of the file (or of `source`), and why it could not be read."""
    try:
        if source is None:
            source = config_path.read_bytes()
        table = tomllib.loads(source.decode("utf-8")).get("scheduler", {})
    except OSError as exc:
        return {}, f"cannot read {config_path}: {exc.strerror}"
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, f"{config_path} is not valid TOML: {exc}"
    return (table if isinstance(table, dict) else {}), None


def crash_backoff(lives: Sequence[Life]) -> tuple[float, int]:
    """(seconds the successor should wait, how many instances in a row died young), from the
    previous instances, newest first. One early death is forgiven (a scancel, a node
    failure); from the second on, the wait doubles from BACKOFF_BASE_S up to BACKOFF_CAP_S."""
    streak = 0
    for life in lives:
        if (life.reason or "").startswith(HEALTHY_ENDS) or life.last_seen - life.started >= YOUNG_S:
            break
        streak += 1
    if streak < 2:
        return 0.0, streak
    return min(BACKOFF_BASE_S * 2 ** (streak - 2), BACKOFF_CAP_S), streak


def chain_jobs(name: str, env: Mapping[str, str] | None = None,
               runner: SlurmRunner = run_slurm) -> list[ChainJob]:
    """This user's live jobs with the chain's name: one squeue call."""
    reply = runner(["squeue", "--me", "--noheader", f"--name={name}", f"--states={LIVE_STATES}",
                    "--format=%i|%T|%r|%S"], env=env)
    jobs = []
    for line in reply.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4:
            jobs.append(ChainJob(*parts))
    return sorted(jobs, key=lambda j: int(j.id) if j.id.isdigit() else 0)


def live_job(job_id: str, env: Mapping[str, str] | None = None,
             runner: SlurmRunner = run_slurm) -> ChainJob | None:
    """One of this user's jobs by id if it is still live (one squeue call)."""
    reply = runner(["squeue", "--me", "--noheader", f"--jobs={job_id}", f"--states={LIVE_STATES}",
                    "--format=%i|%T|%r|%S"], env=env)
    for line in reply.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[0] == job_id:
            return ChainJob(*parts)
    return None


def sbatch_env(base: Mapping[str, str], settings: ChainSettings, script: Path) -> dict[str, str]:
    """What the next instance needs to find its config, script and Python. The running job's
    own SLURM_* variables are dropped so they do not leak into the successor."""
    env = {k: v for k, v in base.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    env["WATCHDOGS_CONFIG"] = str(settings.config_path)
    env[SCRIPT_ENV] = str(script)
    env[STATE_ENV] = str(settings.state_dir)
    env.setdefault(PYTHON_ENV, sys.executable)
    return env


def submit_instance(settings: ChainSettings, script: Path, after: str | None, delay: float,
                    env: Mapping[str, str], runner: SlurmRunner = run_slurm) -> str:
    """sbatch one scheduler instance (a side effect on the cluster). Returns its job id."""
    settings.output_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    dependency = f"afterany:{after},singleton" if after else "singleton"
    argv = ["sbatch", "--parsable", f"--job-name={settings.job_name}", f"--dependency={dependency}",
            f"--output={settings.output_dir}/%x-%j.out"]
    if delay > 0:
        argv.append(f"--begin=now+{int(delay)}")
    if settings.mail_user:
        # Slurm's own mail: reaches a person even when nothing of ours runs (sites where it works).
        argv += [f"--mail-user={settings.mail_user}", f"--mail-type={MAIL_TYPES}"]
    reply = runner([*argv, str(script)], env=sbatch_env(env, settings, script))
    return reply.stdout.strip().split(";")[0]


def cancel(job_ids: Sequence[str], env: Mapping[str, str] | None = None,
           runner: SlurmRunner = run_slurm) -> None:
    """scancel (a side effect on the cluster): used for extra successors and by `stop`."""
    if job_ids:
        runner(["scancel", *job_ids], env=env)


def ensure_successor(settings: ChainSettings, own_job: str | None, script: Path, delay: float,
                     env: Mapping[str, str], runner: SlurmRunner = run_slurm) -> str:
    """Exactly one pending successor: look first, cancel extras, submit only if none."""
    if settings.stop_file.exists():
        return f"stop file {settings.stop_file} exists: no successor"
    jobs = chain_jobs(settings.job_name, env, runner)
    pending = [j for j in jobs if j.state == "PENDING" and j.id != own_job]
    others = [j for j in jobs if j.state != "PENDING" and j.id != own_job]
    if others:
        LOG.warning("other live instances of %s: %s", settings.job_name,
                    ", ".join(f"{j.id} ({j.state})" for j in others))
    if pending:
        if len(pending) > 1:
            cancel([j.id for j in pending[1:]], env, runner)
            LOG.warning("cancelled extra successors %s", ", ".join(j.id for j in pending[1:]))
        return f"successor {pending[0].id} already pending ({pending[0].reason})"
    job = submit_instance(settings, script, own_job, delay, env, runner)
    wait = f", begins in {units.format_duration(delay)}" if delay else ""
    return f"submitted successor {job}{wait}"


def own_script(job_id: str | None, env: Mapping[str, str], runner: SlurmRunner = run_slurm) -> Path:
    """The batch script to resubmit: $WATCHDOGS_CHAIN_SCRIPT, else this job's Command."""
    if env.get(SCRIPT_ENV):
        return Path(env[SCRIPT_ENV])
    if not job_id:
        raise WatchdogsError(f"cannot tell which script to resubmit: set ${SCRIPT_ENV}")
    reply = runner(["scontrol", "show", "job", job_id], env=env)
    for token in reply.stdout.split():
        if token.startswith("Command=") and token != "Command=(null)":
            return Path(token.split("=", 1)[1])
    raise WatchdogsError(f"job {job_id} has no batch script to resubmit: set ${SCRIPT_ENV}")


def default_script(env: Mapping[str, str] | None = None) -> Path:
    """For `watchdogs start`: $WATCHDOGS_CHAIN_SCRIPT, else the copy in this checkout, else
    the copy an installed wheel carries beside this module (pyproject.toml's force-include)."""
    env = os.environ if env is None else env
    if env.get(SCRIPT_ENV):
        return Path(env[SCRIPT_ENV]).expanduser().absolute()
    here = Path(__file__).resolve().parent
    checkout = here.parents[1] / "slurm" / "cron-scheduler.slurm"
    return checkout if checkout.is_file() else here / "cron-scheduler.slurm"


def safe_chain_jobs(settings: ChainSettings, env: Mapping[str, str] | None = None,
                    runner: SlurmRunner = run_slurm) -> tuple[list[ChainJob], str | None]:
    """chain_jobs, or ([], why) when Slurm cannot be asked."""
    try:
        return chain_jobs(settings.job_name, env, runner), None
    except SlurmError as exc:
        return [], str(exc)
