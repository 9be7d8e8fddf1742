"""Why a training stops, and what it does about it: the causes and the policy table.

A cause is one bit of a small integer mask, so that ranks can OR their causes with one
`all_reduce(MAX)` of a vector of 0/1 flags (MAX of 0/1 is OR, and MAX works on every
backend, NCCL included, where the bitwise reductions do not).

Exit code 140 is the one and only "checkpoint saved, please requeue" code: the batch
script requeues on 140 and passes every other code through, so a crash (1), a kill switch
(0), a requeue loop (3), a stop with no way to save (4) or a plain `scancel` (143) never
lead to a requeue.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

EXIT_REQUEUE = 140
EXIT_OK = 0
EXIT_EXCEPTION = 1
EXIT_NO_PROGRESS = 3
EXIT_CANNOT_SAVE = 4   # a stop that would requeue, but no checkpoint can be written: not requeued
EXIT_NAN_LOSS = 5      # the loss turned NaN/Inf: stopped without saving the poisoned state, not requeued
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a process killed by a plain scancel reports


class Cause(enum.IntEnum):
    """One reason to act. The value is the bit index in the agreement mask; the order of
    PRIORITY (not of the values) decides which cause wins when several arrive together."""

    TIME_LIMIT = 0      # EndTime (or exit_after) is closer than one step + a save + margin
    PREEMPTION = 1      # EndTime moved to now + GraceTime, or SIGTERM while still RUNNING
    USER_SIGNAL = 2     # SIGUSR1 (or USR2) far from EndTime: someone ran scancel --signal=USR1
    KILL_SWITCH = 3     # the kill-switch file exists
    SAVE_SWITCH = 4     # the save-switch file exists
    MEMORY = 5          # RSS / available memory / GPU free memory crossed a threshold
    EXCEPTION = 6       # the training loop raised
    TERMINATE = 7       # SIGTERM from a plain scancel (the job is already being cancelled)
    NO_TIME = 8         # not a cause: "a save would not finish before SIGKILL" (agreed like one)
    HANG = 9            # no step completed within the hang budget (trainguard.hangs.watch; never agreed)
    # Training health (trainguard.health.monitor): read on the slow path from guard.observe().
    NAN_LOSS = 10       # the observed loss is NaN or Inf
    LOSS_SPIKE = 11     # the loss far above its recent trend for several readings
    THROUGHPUT = 12     # throughput below a fraction of this run's own baseline
    STRAGGLER = 13      # one rank's compute per step far above the others'
    DATA_BOUND = 14     # a large share of step time spent waiting for data
    IDLE_GPU = 15       # the accelerator near 0 % utilization for a while (NVML)

    @property
    def bit(self) -> int:
        return 1 << self.value

    @property
    def label(self) -> str:
        return self.name.lower()


# First listed wins. A kill switch beats a requeue (the user wants it to stop); preemption
# beats a plain TERM because a rank that cannot ask the controller labels its SIGTERM
# "terminate" while rank 0, which did ask, knows it is a preemption.
PRIORITY: tuple[Cause, ...] = (
    Cause.EXCEPTION, Cause.KILL_SWITCH, Cause.PREEMPTION, Cause.TERMINATE,
    Cause.NAN_LOSS, Cause.TIME_LIMIT, Cause.USER_SIGNAL, Cause.MEMORY, Cause.SAVE_SWITCH, Cause.HANG,
    Cause.STRAGGLER, Cause.THROUGHPUT, Cause.DATA_BOUND, Cause.LOSS_SPIKE, Cause.IDLE_GPU,
)
HEALTH_CAUSES = frozenset({Cause.NAN_LOSS, Cause.LOSS_SPIKE, Cause.THROUGHPUT, Cause.STRAGGLER,
                           Cause.DATA_BOUND, Cause.IDLE_GPU})
MASK_LEN = len(Cause)


class Save(enum.Enum):
    ALWAYS = "always"
    IF_TIME = "if_time"   # only when the measured save time fits before SIGKILL (KillWait)
    NEVER = "never"


@dataclass(frozen=True)
class Action:
    """What to do for a cause: save or not, stop or continue, and the exit code.
    `requeue` and `exit_code == 140` always go together (checked here)."""

    save: Save = Save.ALWAYS
    stop: bool = True
    requeue: bool = False
    exit_code: int = EXIT_OK

    def __post_init__(self) -> None:
        if self.requeue != (self.exit_code == EXIT_REQUEUE):
            raise ValueError(f"an action requeues exactly when its exit code is {EXIT_REQUEUE}: {self}")
        if not self.stop and self.requeue:
            raise ValueError("an action that continues training cannot requeue")


SAVE_AND_REQUEUE = Action(Save.ALWAYS, stop=True, requeue=True, exit_code=EXIT_REQUEUE)
SAVE_AND_STOP = Action(Save.ALWAYS, stop=True, requeue=False, exit_code=EXIT_OK)
SAVE_AND_CONTINUE = Action(Save.ALWAYS, stop=False, requeue=False, exit_code=EXIT_OK)
SAVE_AND_FAIL = Action(Save.ALWAYS, stop=True, requeue=False, exit_code=EXIT_EXCEPTION)
SAVE_IF_TIME_AND_END = Action(Save.IF_TIME, stop=True, requeue=False, exit_code=EXIT_TERMINATED)
# The stricter team policy: a plain scancel is final; log it and exit at once, save nothing.
END_AT_ONCE = Action(Save.NEVER, stop=True, requeue=False, exit_code=EXIT_TERMINATED)
# A hang: a wedged collective cannot save, so the last good checkpoint stands.
REQUEUE_WITHOUT_SAVE = Action(Save.NEVER, stop=True, requeue=True, exit_code=EXIT_REQUEUE)
# Report the hang (stacks, heartbeat) and keep waiting: for debugging a hang in place.
REPORT_ONLY = Action(Save.NEVER, stop=False, requeue=False, exit_code=EXIT_OK)
# A health finding that only warns: logged, in the heartbeat, raised by the watchdog.
WARN = REPORT_ONLY
# NaN/Inf loss: the state is poisoned, so it is not saved; a requeue would only repeat it.
STOP_WITHOUT_SAVE = Action(Save.NEVER, stop=True, requeue=False, exit_code=EXIT_NAN_LOSS)
# The alternative for NaN: exit 140 without saving; the batch script requeues and the run
# resumes from the last good checkpoint, bounded by the requeue-loop protection
# (max_restarts_without_progress: the same resume step too often ends the chain, exit 3).
ROLLBACK = REQUEUE_WITHOUT_SAVE

DEFAULT_ACTIONS: Mapping[Cause, Action] = {
    Cause.TIME_LIMIT: SAVE_AND_REQUEUE,
    Cause.PREEMPTION: SAVE_AND_REQUEUE,
    Cause.USER_SIGNAL: SAVE_AND_REQUEUE,
    Cause.KILL_SWITCH: SAVE_AND_STOP,
    Cause.SAVE_SWITCH: SAVE_AND_CONTINUE,
    Cause.MEMORY: SAVE_AND_REQUEUE,       # a fresh process gets the leaked memory back
    Cause.EXCEPTION: SAVE_AND_FAIL,
    Cause.TERMINATE: SAVE_IF_TIME_AND_END,
    Cause.HANG: REQUEUE_WITHOUT_SAVE,
    Cause.NAN_LOSS: STOP_WITHOUT_SAVE,
    Cause.LOSS_SPIKE: WARN,
    Cause.THROUGHPUT: WARN,
    Cause.STRAGGLER: WARN,
    Cause.DATA_BOUND: WARN,
    Cause.IDLE_GPU: WARN,
}
# Action names for TRAINGUARD_POLICY_<CAUSE>=<name> (and policy={"nan_loss": "rollback"}).
NAMED_ACTIONS: Mapping[str, Action] = {
    "save_and_requeue": SAVE_AND_REQUEUE, "save_and_stop": SAVE_AND_STOP,
    "save_and_continue": SAVE_AND_CONTINUE, "save_and_fail": SAVE_AND_FAIL,
    "save_if_time_and_end": SAVE_IF_TIME_AND_END, "end_at_once": END_AT_ONCE,
    "requeue_without_save": REQUEUE_WITHOUT_SAVE, "rollback": ROLLBACK,
    "report_only": REPORT_ONLY, "warn": WARN, "stop_without_save": STOP_WITHOUT_SAVE,
}


def parse_action(cause: str, value: Action | str) -> Action:
    if isinstance(value, Action):
        return value
    action = NAMED_ACTIONS.get(str(value).strip().lower())
    if action is None:
        raise ValueError(f"policy for {cause!r} = {value!r}: expected one of {', '.join(NAMED_ACTIONS)}")
    return action


@dataclass(frozen=True)
class Policy:
    """The cause -> action table. `Policy.with_overrides({"terminate": END_AT_ONCE})`."""

    actions: Mapping[Cause, Action] = field(default_factory=lambda: dict(DEFAULT_ACTIONS))

    def action(self, cause: Cause) -> Action:
        return self.actions[cause]

    def with_overrides(self, overrides: Mapping[Cause | str, Action | str]) -> Policy:
        merged = dict(self.actions)
        for key, action in overrides.items():
            cause = parse_cause(key)
            if not isinstance(action, (Action, str)):
                raise ValueError(f"policy for {cause.label!r}: expected an Action, got {action!r}")
            merged[cause] = parse_action(cause.label, action)
        return replace(self, actions=merged)


def parse_cause(key: Cause | str) -> Cause:
    if isinstance(key, Cause) and key is not Cause.NO_TIME:
        return key
    names = [c.label for c in PRIORITY]
    if isinstance(key, str) and key.lower() in names:
        return Cause[key.upper()]
    raise ValueError(f"policy key {key!r}: expected one of {', '.join(names)}")


@dataclass(frozen=True)
class Decision:
    """The agreed outcome of one poll point: the winning cause, its action, and every cause
    that was present (a stop that also saw the save switch consumes the switch too)."""

    cause: Cause
    action: Action
    causes: frozenset[Cause]

    @property
    def save(self) -> bool:
        if self.action.save is Save.IF_TIME:
            return Cause.NO_TIME not in self.causes
        return self.action.save is Save.ALWAYS


def causes_in(mask: int) -> frozenset[Cause]:
    return frozenset(c for c in Cause if mask & c.bit)


def decide(mask: int, policy: Policy) -> Decision | None:
    """A pure function of the (agreed) mask: the same on every rank."""
    present = causes_in(mask)
    for cause in PRIORITY:
        if cause in present:
            return Decision(cause, policy.action(cause), present)
    return None


def mask_to_flags(mask: int) -> list[int]:
    return [1 if mask & (1 << i) else 0 for i in range(MASK_LEN)]


def flags_to_mask(flags: list[int]) -> int:
    return sum(1 << i for i, flag in enumerate(flags) if flag)
