"""The self-perpetuating scheduler job.

A running instance keeps two successors queued, told apart by `--comment`
(`watchdogs:<role>:<predecessor job>`), both with the chain's job name:

- **next** (`--begin=<own EndTime - lead>`, no dependency): eligible before this instance's
  time limit, so it accrues age priority and can backfill into a hole *while* this one still
  watches. When it starts it asks this one to hand over (watchdogs.scheduler.handover) and
  takes over the state: no gap where the cluster frees a CPU in time.
- **rescue** (`--dependency=afterany:<itself>`): starts within seconds after any death the
  next cannot cover (scancel, a crash, SIGKILL, a node failure).

There is no `singleton`: it would hold the next back until this instance ends, the very gap
the next removes. Two instances never both own the state: the newcomer waits until Slurm no
longer lists its predecessor (so its process is gone) before it opens the database, and the
state lock backs that up. A crash loop is slowed down by giving the rescue a growing
`--begin=now+N`, decided from how the previous instances ended.
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from watchdogs import ownfiles, units
from watchdogs.config.sections import SCHEDULER
from watchdogs.errors import SlurmError, WatchdogsError
from watchdogs.scheduler.runs import Life
from watchdogs.slurmctl.runner import SlurmRunner, listing, run_slurm, unparsed
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
TIME_MIN = "01:00:00"
"""Backfill may start an instance with this limit instead of the script's --time."""
USR1_MARGIN_S = 120.0
"""cron-scheduler.slurm's `--signal=B:USR1@120`: watching stops this long before EndTime."""
RECHECK_S = 300.0
"""How often a running instance makes sure its successor is still queued."""
HEALTHY_ENDS = ("handover", "stop file", "superseded")
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
    lead: float = SCHEDULER["handover_lead"].default
    warn: float = SCHEDULER["handover_warn"].default

    @property
    def output_dir(self) -> Path:
        return self.state_dir / "scheduler"


COMMENT_PREFIX = "watchdogs:"
ROLES = ("next", "rescue", "start")
FORMAT = "%i|%T|%r|%S|%e|%k"


@dataclass(frozen=True)
class ChainJob:
    id: str
    state: str
    reason: str
    start: str
    end: str = ""
    """Slurm's EndTime (local time, as squeue prints it): the time limit once it runs."""
    comment: str = ""
    """`watchdogs:<role>:<predecessor>` for the jobs this chain submits (`--comment`)."""

    @property
    def role(self) -> str:
        """"next", "rescue", or "start" (`watchdogs start`, a hand-submitted job)."""
        return self._ours()[0]

    @property
    def predecessor(self) -> str | None:
        return self._ours()[1]

    def _ours(self) -> tuple[str, str | None]:
        parts = self.comment.split(":")
        if len(parts) != 3 or parts[0] + ":" != COMMENT_PREFIX or parts[1] not in ROLES:
            return "start", None
        return parts[1], parts[2] or None


def comment(role: str, predecessor: str | None) -> str:
    return f"{COMMENT_PREFIX}{role}:{predecessor or ''}"


def slurm_time(text: str) -> datetime | None:
    """A time as squeue prints it (local, no zone), or None for N/A, Unknown, NONE."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def next_begin(own: ChainJob, lead: float, now: datetime) -> datetime | None:
    """When this instance's next should become eligible: its EndTime minus the lead, the lead
    capped at half of this job's life (a --time-min cut the limit short: a full lead would
    have the next take over at once, and its own next at once again). None: the end is not
    known (no time limit), so no next is needed. Never in the past."""
    end, start = slurm_time(own.end), slurm_time(own.start)
    if end is None:
        return None
    life = (end - start).total_seconds() if start is not None else 2 * lead
    begin = end - timedelta(seconds=min(lead, max(0.0, life) / 2))
    return max(begin, now.replace(microsecond=0))


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
                         value("mail_user"), source, problem, value("handover_lead"), value("handover_warn"))


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
                    f"--format={FORMAT}"], env=env)
    # Submitting and cancelling successors act on this listing: a line we cannot read or
    # text on stderr is a SlurmDoubt (the caller says so and acts on nothing).
    jobs = [ChainJob(*_chain_fields(line)) for line in listing(reply).splitlines() if line.strip()]
    return sorted(jobs, key=lambda j: int(j.id) if j.id.isdigit() else 0)


def _chain_fields(line: str) -> list[str]:
    # The comment is last and is split off whole: it is ours for chain jobs, anything for others.
    parts = line.strip().split("|", 5)
    if len(parts) != 6 or not parts[0]:
        raise unparsed("squeue", line)
    parts[5] = "" if parts[5] == "(null)" else parts[5]
    return parts


def live_job(job_id: str, env: Mapping[str, str] | None = None,
             runner: SlurmRunner = run_slurm) -> ChainJob | None:
    """One of this user's jobs by id if it is still live (one squeue call)."""
    reply = runner(["squeue", "--me", "--noheader", f"--jobs={job_id}", f"--states={LIVE_STATES}",
                    f"--format={FORMAT}"], env=env)
    for line in listing(reply).splitlines():
        if line.strip() and (parts := _chain_fields(line))[0] == job_id:
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
                    env: Mapping[str, str], runner: SlurmRunner = run_slurm, *, role: str | None = None,
                    begin_at: datetime | None = None) -> str:
    """sbatch one scheduler instance (a side effect on the cluster). Returns its job id.
    A script someone else could change is never submitted (watchdogs.trust).

    `role` "rescue" (the default with `after`) waits for `after` to end; "next" has no
    dependency and begins at `begin_at`; "start" (the default without `after`) begins now."""
    from watchdogs.errors import SlurmError
    from watchdogs.trust import distrust

    found = distrust(script) if script.exists() else None   # a missing one: sbatch says so
    if found is not None:
        raise SlurmError(f"the scheduler's batch script is not only yours, not submitted: {found}")
    ownfiles.make_dirs(settings.output_dir)
    role = role or ("rescue" if after else "start")
    argv = ["sbatch", "--parsable", f"--job-name={settings.job_name}", f"--comment={comment(role, after)}",
            f"--output={settings.output_dir}/%x-%j.out"]
    if role == "rescue" and after:
        argv.append(f"--dependency=afterany:{after}")
    if not env.get("SBATCH_TIMELIMIT"):
        # Not an #SBATCH line: a minimum above a user's shorter SBATCH_TIMELIMIT is an error.
        argv.append(f"--time-min={TIME_MIN}")
    if begin_at is not None:
        argv.append(f"--begin={begin_at.replace(microsecond=0).isoformat()}")
    elif delay > 0:
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


def release_now(job_id: str, env: Mapping[str, str] | None = None, runner: SlurmRunner = run_slurm,
                timeout: float = 10.0) -> None:
    """A pending next may start now rather than at its begin time (the owner may do this)."""
    runner(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], timeout=timeout, env=env)


def move_begin(job_id: str, when: datetime, env: Mapping[str, str] | None = None,
               runner: SlurmRunner = run_slurm) -> None:
    runner(["scontrol", "update", f"JobId={job_id}", f"StartTime={when.replace(microsecond=0).isoformat()}"],
           env=env)


@dataclass(frozen=True)
class Successors:
    """What one look at the queue found for a running instance: its own job, its queued
    next and rescue, and a newer instance already running (a handover under way)."""

    own: ChainJob | None
    next: ChainJob | None
    rescue: ChainJob | None
    newer_running: ChainJob | None
    done: str


BEGIN_SLACK_S = 60.0
"""A next whose begin is this close to the wanted one is left alone."""


def ensure_successor(settings: ChainSettings, own_job: str | None, script: Path, delay: float,
                     env: Mapping[str, str], runner: SlurmRunner = run_slurm, *, lead: float | None = None,
                     now: datetime | None = None) -> str:
    """Exactly one pending rescue (and, with `lead`, one pending next): look first, cancel
    what is not ours, submit only what is missing."""
    return keep_successors(settings, own_job, script, delay, env, runner, lead=lead, now=now).done


def keep_successors(settings: ChainSettings, own_job: str | None, script: Path, delay: float,
                    env: Mapping[str, str], runner: SlurmRunner = run_slurm, *, lead: float | None = None,
                    now: datetime | None = None) -> Successors:
    if settings.stop_file.exists():
        return Successors(None, None, None, None, f"stop file {settings.stop_file} exists: no successor")
    now = now or datetime.now()
    jobs = chain_jobs(settings.job_name, env, runner)
    seen = classify(jobs, own_job)
    if seen.newer_running is not None:
        # A successor runs and is taking over (it asked this one to hand over): queue nothing.
        return seen
    own, rescue = seen.own, seen.rescue
    nxt = seen.next if lead is not None else None
    pending = [j for j in jobs if j.state == "PENDING" and j.id != own_job]
    extra = [j for j in pending if j not in (rescue, nxt)]
    if extra:
        cancel([j.id for j in extra], env, runner)
        LOG.warning("cancelled extra successors %s", ", ".join(j.id for j in extra))
    said = []
    if rescue is None:
        job = submit_instance(settings, script, own_job, delay, env, runner,
                              role="rescue" if own_job else None)
        rescue = ChainJob(job, "PENDING", "Dependency" if own_job else "", "N/A", "",
                          comment("rescue", own_job))
        wait = f", begins in {units.format_duration(delay)}" if delay else ""
        said.append(f"submitted successor {job}{wait}")
    else:
        said.append(f"successor {rescue.id} already pending ({rescue.reason})")
    begin = next_begin(own, lead, now) if own is not None and lead is not None and own_job else None
    if begin is not None and nxt is None:
        job = submit_instance(settings, script, own_job, 0.0, env, runner, role="next", begin_at=begin)
        nxt = ChainJob(job, "PENDING", "BeginTime", begin.isoformat(), "", comment("next", own_job))
        said.append(f"submitted next {job}, eligible from {begin:%H:%M:%S}")
    elif begin is not None and nxt is not None:
        wanted = slurm_time(nxt.start)
        moved = wanted is None or abs((wanted - begin).total_seconds()) > BEGIN_SLACK_S
        if nxt.reason == "BeginTime" and moved:
            move_begin(nxt.id, begin, env, runner)  # the time limit moved (an admin, --time-min)
            said.append(f"next {nxt.id} now eligible from {begin:%H:%M:%S}")
        else:
            said.append(f"next {nxt.id} pending ({nxt.reason})")
    return Successors(own, nxt, rescue, None, "; ".join(said))


def look(settings: ChainSettings, own_job: str | None, env: Mapping[str, str] | None = None,
         runner: SlurmRunner = run_slurm) -> Successors:
    """One squeue, nothing submitted or cancelled."""
    return classify(chain_jobs(settings.job_name, env, runner), own_job)


def classify(jobs: Sequence[ChainJob], own_job: str | None) -> Successors:
    """Pure: this instance's own job, its queued next and rescue, a newer one running."""
    own = next((j for j in jobs if j.id == own_job), None)
    newer = next((j for j in jobs if j.id != own_job and j.state != "PENDING" and _newer(j, own_job)), None)
    if newer is not None:
        return Successors(own, None, None, newer, f"successor {newer.id} is {newer.state}: handing over")
    pending = [j for j in jobs if j.state == "PENDING" and j.id != own_job]
    mine = [j for j in pending if j.predecessor == own_job] if own_job else pending
    rescue = next((j for j in mine if j.role != "next"), None)
    nxt = next((j for j in mine if j.role == "next"), None)
    return Successors(own, nxt, rescue, None, "")


def _newer(job: ChainJob, own_job: str | None) -> bool:
    if own_job is None or not own_job.isdigit() or not job.id.isdigit():
        return False
    return int(job.id) > int(own_job)


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
