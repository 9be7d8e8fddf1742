"""The guard's settings: one frozen dataclass, from keyword arguments and/or the
environment (`TRAINGUARD_*`, which the batch script templates set).

Durations accept seconds or strings such as "90s", "5m", "1h30m"; sizes accept bytes or
strings such as "12GiB"; bad values raise ValueError naming the setting, the value and
what was expected.
"""
from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from trainguard import _units as units
from trainguard.causes import Action, Cause, Policy
from trainguard.hangs.watch import HangLimits
from trainguard.recovery.restarts import StormPolicy
from trainguard.recovery.suspects import SuspectPolicy
from trainguard.stopping.signals import DEFAULT_SIGNALS, parse_signal

ENV_PREFIX = "TRAINGUARD_"


@dataclass(frozen=True)
class GuardConfig:
    # --- checkpoints ---
    checkpoint_dir: Path | None = None       # shared storage; None: the guard saves nothing
    keep: int = 2                            # complete checkpoints kept (never fewer than 2)
    scratch_dir: Path | None = None          # e.g. $SLURM_TMPDIR: save here, copy to shared at exit
    start_over: bool = False                 # all checkpoints damaged: start at 0, not CheckpointError
    # --- signals ---
    signals: tuple[signal.Signals, ...] = DEFAULT_SIGNALS  # caught; add USR2 where NCCL swallows USR1
    forced_exit: float | None = None         # s after a stop cause; None: from the time left; 0: off
    # --- deadline ---
    exit_after: float | None = None          # s from start(); the job's EndTime is used as well
    use_slurm_endtime: bool = True           # read the job's EndTime at start and re-read it (rank 0)
    endtime_every: float = 30.0              # s between EndTime re-reads (keep < GraceTime)
    warning_lead: float = 120.0              # a USR1 this close to EndTime is the time-limit warning
    save_estimate: float = 30.0              # s, until the first save has been timed
    safety_margin: float = 10.0              # s, on top of the longest recent step + save time
    step_window: float = 300.0               # s over which "the longest recent step" is kept
    # --- files ---
    kill_switch: Path | None = None          # exists (even a dangling symlink): save, exit 0, no requeue
    save_switch: Path | None = None          # exists: save, remove it, continue
    stop_file: Path | None = None            # written by the batch script's trap
    pid_file: Path | None = None             # each process appends its PID (for the trap)
    exit_file: Path | None = None            # rank 0 writes its exit code (torchrun reports only 1)
    file_every: float = 2.0                  # s between polls of the files above
    # --- memory ---
    max_rss: int | None = None               # bytes of this process's RSS
    min_available: int | None = None         # bytes of system available memory
    min_gpu_free: int | None = None          # bytes free on the current CUDA device
    memory_every: float = 5.0                # s between memory readings
    # --- heartbeat ---
    heartbeat_dir: Path | None = None        # per-rank records for the log_stale check
    heartbeat_every: float = 30.0            # s between records; a phase change is written at once
    # --- agreement and requeue ---
    sync_every: int = 10                     # steps to the first agreement (all_reduce), same on all ranks
    sync_interval: float = 1.0               # s between agreements after it (0: every sync_every steps)
    max_restarts_without_progress: int = 3   # requeue-loop protection
    self_requeue: bool = False               # call `scontrol requeue` itself (no batch script template)
    fast_exit: bool = True                   # skip the interpreter's finalisation after a guard exit
    policy: Policy = field(default_factory=Policy)  # cause -> action; config.with_policy({...})
    # --- hangs (trainguard.hangs.watch): a step budget learned from the step times ---
    hang_detect: bool = True                 # the progress watchdog thread (no work on the hot path)
    hang_floor: float = 300.0                # s, the budget's lower bound
    hang_ceiling: float = 3600.0             # s, its upper bound
    hang_multiple: float = 10.0              # x the step times' percentile below
    hang_percentile: float = 99.0            # of the observed step times
    hang_first_step: float | None = None     # s before a step time is known; None: the ceiling
    hang_saving: float = 3600.0              # s, the budgets of declared phases
    hang_eval: float = 3600.0                # s, guard.phase("eval")
    hang_data_loading: float = 1800.0        # s, guard.phase("data_loading")
    hang_grace: float = 5.0                  # s between the hang report and the exit
    hang_report_dir: Path | None = None      # None: heartbeat_dir, else checkpoint_dir
    hang_native_stacks: bool = True          # also `py-spy dump --native` when installed
    max_hangs_without_progress: int = 3      # hangs with no new checkpoint that end the chain
    # --- suspect nodes and restart storms (trainguard.recovery.suspects, trainguard.recovery.restarts) ---
    run_dir: Path | None = None              # the run folder (the templates' $RUN_DIR): its recovery/ record
    suspect_window: float = 86400.0          # s in which suspicions of a node count
    suspect_at_once: tuple[str, ...] = ("hang", "precheck")  # causes that exclude a node at once
    suspect_limit: int = 2                   # suspicions of any cause that exclude a node (0: never)
    storm_restarts: int = 5                  # restarts within storm_window that end the chain (0: off)
    storm_window: float = 1800.0
    storm_no_progress: int | None = None     # restarts from one checkpoint step; None: max_hangs_...
    # --- training health (trainguard.health.monitor): from guard.observe(), judged on the slow path ---
    health: bool = True
    health_window: float = 60.0              # s of training per throughput/compute/data window
    health_warmup: float = 300.0             # s before the throughput baseline is measured
    baseline_windows: int = 3                # windows after warm-up whose median is the baseline
    throughput_fraction: float = 0.7         # below this x baseline ...
    throughput_windows: int = 2              # ... for this many windows: the throughput finding
    spike_sigmas: float = 6.0                # a loss this many std devs above its trend ...
    spike_rise: float = 0.5                  # ... and this fraction above it ...
    spike_readings: int = 3                  # ... in this many readings in a row: a spike
    straggler_factor: float = 1.5            # compute per step x the other ranks' median ...
    straggler_windows: int = 3               # ... for this many windows: the straggler finding
    data_share: float = 0.5                  # share of step time waiting for data
    idle_utilization: float = 5.0            # % GPU utilization (NVML) at or below which ...
    idle_windows: int = 10                   # ... for this many windows: the idle-accelerator finding

    def __post_init__(self) -> None:
        if self.keep < 2:
            raise ValueError(f"keep = {self.keep}: expected 2 or more (the newest checkpoint may be "
                             "the one that was cut off)")
        if self.sync_every < 1:
            raise ValueError(f"sync_every = {self.sync_every}: expected a whole number >= 1")
        for name in ("endtime_every", "file_every", "memory_every", "heartbeat_every", "step_window",
                     "health_window"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} = {getattr(self, name)}: expected a duration > 0")
        if self.hang_detect:
            hang_limits(self)   # raises ValueError naming the setting
        suspect_policy(self)    # the same for the suspect and storm settings
        storm_policy(self)

    def with_policy(self, overrides: Mapping[Cause | str, Action | str]) -> GuardConfig:
        return replace(self, policy=self.policy.with_overrides(overrides))


_PATHS = ("checkpoint_dir", "scratch_dir", "kill_switch", "save_switch", "stop_file", "pid_file",
          "exit_file", "heartbeat_dir", "hang_report_dir", "run_dir")
_DURATIONS = ("forced_exit", "exit_after", "sync_interval", "endtime_every", "warning_lead", "save_estimate",
              "safety_margin", "step_window", "file_every", "memory_every", "heartbeat_every",
              "hang_floor", "hang_ceiling", "hang_first_step", "hang_saving", "hang_eval",
              "hang_data_loading", "hang_grace", "health_window", "health_warmup", "suspect_window",
              "storm_window")
_SIZES = ("max_rss", "min_available", "min_gpu_free")
_INTS = ("keep", "sync_every", "max_restarts_without_progress", "max_hangs_without_progress",
         "suspect_limit", "storm_restarts", "storm_no_progress", "baseline_windows", "throughput_windows",
         "spike_readings", "straggler_windows", "idle_windows")
_BOOLS = ("start_over", "use_slurm_endtime", "self_requeue", "fast_exit", "hang_detect", "hang_native_stacks",
          "health")
_FLOATS = ("hang_multiple", "hang_percentile", "throughput_fraction", "spike_sigmas", "spike_rise",
           "straggler_factor", "data_share", "idle_utilization")
POLICY_PREFIX = ENV_PREFIX + "POLICY_"   # TRAINGUARD_POLICY_NAN_LOSS=rollback


def _duration(name: str, value: Any) -> float | None:
    if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if value is None else float(value)
    try:
        return float(value) if str(value).replace(".", "", 1).isdigit() else units.parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{name} = {value!r}: expected {exc}") from None


def _size(name: str, value: Any) -> int | None:
    if value is None:
        return None
    try:
        return units.parse_size(int(value) if str(value).isdigit() else value)
    except ValueError as exc:
        raise ValueError(f"{name} = {value!r}: expected {exc}") from None


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name} = {value!r}: expected true or false")


def _int(name: str, value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {value!r}: expected a whole number") from None


def _float(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {value!r}: expected a number") from None


def hang_limits(cfg: GuardConfig) -> HangLimits:
    phases = {"saving": cfg.hang_saving, "eval": cfg.hang_eval, "data_loading": cfg.hang_data_loading}
    return HangLimits(cfg.hang_floor, cfg.hang_ceiling, cfg.hang_multiple, cfg.hang_percentile,
                      cfg.hang_first_step, phases)


def suspect_policy(cfg: GuardConfig) -> SuspectPolicy:
    return SuspectPolicy(cfg.suspect_window, frozenset(cfg.suspect_at_once), cfg.suspect_limit)


def storm_policy(cfg: GuardConfig) -> StormPolicy:
    # The old hang-only limit is the default of the general one: a site that set
    # TRAINGUARD_MAX_HANGS_WITHOUT_PROGRESS keeps its number.
    no_progress = cfg.max_hangs_without_progress if cfg.storm_no_progress is None else cfg.storm_no_progress
    return StormPolicy(cfg.storm_restarts, cfg.storm_window, no_progress)


def coerce(name: str, value: Any) -> Any:
    """One setting from a string (environment) or Python value to its typed value."""
    if name in _PATHS:
        return None if value in (None, "") else Path(value)
    if name in _DURATIONS:
        return _duration(name, value)
    if name in _SIZES:
        return _size(name, value)
    if name == "storm_no_progress" and value in (None, ""):
        return None
    if name in _INTS:
        return _int(name, value)
    if name in _BOOLS:
        return _bool(name, value)
    if name in _FLOATS:
        return _float(name, value)
    if name == "suspect_at_once":
        return tuple(value.replace(",", " ").split()) if isinstance(value, str) else tuple(value)
    if name == "signals":
        items = value.replace(",", " ").split() if isinstance(value, str) else value
        return tuple(parse_signal(s) for s in items)
    return value


def config_from(env: Mapping[str, str] | None = None, **overrides: Any) -> GuardConfig:
    """Settings from `TRAINGUARD_<NAME>` environment variables, then keyword overrides."""
    environ = os.environ if env is None else env
    known = {f.name for f in fields(GuardConfig)}
    values: dict[str, Any] = {}
    for name in known - {"policy"}:
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = coerce(name, raw)
    env_policy = {key[len(POLICY_PREFIX):].lower(): raw for key, raw in environ.items()
                  if key.startswith(POLICY_PREFIX)}
    for name, value in overrides.items():
        if name not in known:
            raise ValueError(f"unknown trainguard setting {name!r}; known: {', '.join(sorted(known))}")
        values[name] = value if name == "policy" else coerce(name, value)
    policy = values.get("policy", Policy())
    if isinstance(policy, Mapping):   # policy={"nan_loss": "rollback"}: entries over the defaults
        policy = Policy().with_overrides(policy)
    if env_policy:
        try:
            policy = Policy(dict(policy.actions)).with_overrides(
                {key: raw for key, raw in env_policy.items() if "policy" not in overrides})
        except ValueError as exc:
            raise ValueError(f"{POLICY_PREFIX}*: {exc}") from None
    values["policy"] = policy
    return GuardConfig(**values)
