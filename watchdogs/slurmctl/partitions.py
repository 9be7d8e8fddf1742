"""The partitions this cluster offers, as `scontrol show partition --oneliner` and `scontrol
show config` print them: what a job there is billed for (`slurmctl.billing` does the sums)
and who may use it. Read by `doctor`'s cost finding, once per run, never per tick."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from watchdogs.slurmctl.runner import SlurmRunner, listing

_PAIR = re.compile(r"(\w+)=(\S*)")
_MEM_SUFFIX = {"K": 1 / 1024 / 1024, "M": 1 / 1024, "G": 1.0, "T": 1024.0}


@dataclass(frozen=True)
class Partition:
    name: str
    state: str
    default: bool
    total_cpus: int
    total_nodes: int
    oversubscribe: str
    """NO, EXCLUSIVE, YES:n, FORCE:n: EXCLUSIVE gives every job whole nodes (up to 25.x)."""
    billing_weights: Mapping[str, float] = field(default_factory=dict)
    """`TRESBillingWeights`, lower-case TRES names; memory weights are per GB."""
    def_mem_per_cpu_mb: int | None = None
    max_cpus_per_node: int | None = None
    allow_accounts: tuple[str, ...] = ("ALL",)
    deny_accounts: tuple[str, ...] = ()
    allow_groups: tuple[str, ...] = ("ALL",)
    allow_qos: tuple[str, ...] = ("ALL",)
    deny_qos: tuple[str, ...] = ()
    max_time: str = "UNLIMITED"
    exclusive_mode: str = "NO"
    """26.05's own key for it: `Exclusive=NODE` (with `OverSubscribe=NO`); NO when shared."""
    total_mem_mb: int | None = None
    """The memory of its nodes together, from `TRES=...,mem=...`."""

    @property
    def mem_per_node_mb(self) -> int | None:
        return self.total_mem_mb // self.total_nodes if self.total_mem_mb and self.total_nodes else None

    @property
    def cpus_per_node(self) -> int:
        """What a node holds (the mean when nodes differ: the finding says "about")."""
        return max(1, round(self.total_cpus / self.total_nodes)) if self.total_nodes else 0

    @property
    def exclusive(self) -> bool:
        return self.oversubscribe.upper().startswith("EXCLUSIVE") or \
            self.exclusive_mode.upper() not in ("NO", "", "(NULL)")

    @property
    def up(self) -> bool:
        return self.state.upper() == "UP"

    def open_to(self, account: str | None, groups: set[str], qos: str | None) -> bool:
        """Whether this user may submit here, as far as the partition's own lists tell (an
        association limit can still refuse; `sbatch --test-only` is the last word)."""
        if "ALL" not in self.allow_groups and not groups & set(self.allow_groups):
            return False
        if account is not None:
            if "ALL" not in self.allow_accounts and account not in self.allow_accounts:
                return False
            if account in self.deny_accounts:
                return False
        if qos is not None:
            if "ALL" not in self.allow_qos and qos not in self.allow_qos:
                return False
            if qos in self.deny_qos:
                return False
        return True


@dataclass(frozen=True)
class SelectConfig:
    select_type: str = "select/cons_tres"
    select_parameters: str = ""
    priority_flags: str = ""

    @property
    def whole_nodes(self) -> bool:
        """select/linear allocates whole nodes, whatever the partition says."""
        return self.select_type.endswith("/linear")

    @property
    def max_tres(self) -> bool:
        return "MAX_TRES" in self.priority_flags.upper()


def parse_weights(text: str) -> dict[str, float]:
    """`CPU=1.0,Mem=0.25G,GRES/gpu=2.0` -> {"cpu": 1.0, "mem": 0.25, "gres/gpu": 2.0}; memory
    weights are per GB (Slurm reads a bare number as per MB)."""
    weights: dict[str, float] = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        key = key.strip().lower()
        value = value.strip()
        if not key or not value:
            continue
        scale = 1.0
        if key == "mem":
            suffix = value[-1].upper()
            if suffix in _MEM_SUFFIX:
                scale, value = _MEM_SUFFIX[suffix], value[:-1]
            else:
                scale = 1024.0   # a bare memory weight is per MB
        try:
            weights[key] = float(value) * scale
        except ValueError:
            continue
    return weights


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _names(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if value is None or value in ("", "(null)"):
        return default
    return tuple(v for v in value.split(",") if v)


def _tres_mem(tres: str | None) -> int | None:
    """`cpu=12,mem=46.87G,node=3,billing=12` -> the memory in MB."""
    for part in (tres or "").split(","):
        key, _, value = part.partition("=")
        if key == "mem" and value:
            scale = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2}.get(value[-1].upper())
            try:
                return int(float(value[:-1]) * scale) if scale else int(value)
            except ValueError:
                return None
    return None


def parse_partitions(text: str) -> list[Partition]:
    """One partition per line of `scontrol show partition --oneliner`."""
    found = []
    for line in text.splitlines():
        pairs = dict(_PAIR.findall(line))
        if "PartitionName" not in pairs:
            continue
        weights = pairs.get("TRESBillingWeights")
        found.append(Partition(
            name=pairs["PartitionName"], state=pairs.get("State", "UNKNOWN"),
            default=pairs.get("Default") == "YES", total_cpus=_int(pairs.get("TotalCPUs")) or 0,
            total_nodes=_int(pairs.get("TotalNodes")) or 0,
            oversubscribe=pairs.get("OverSubscribe", "NO"), exclusive_mode=pairs.get("Exclusive", "NO"),
            billing_weights=parse_weights(weights) if weights and weights != "(null)" else {},
            def_mem_per_cpu_mb=_int(pairs.get("DefMemPerCPU")),
            max_cpus_per_node=_int(pairs.get("MaxCPUsPerNode")),
            allow_accounts=_names(pairs.get("AllowAccounts"), ("ALL",)),
            deny_accounts=_names(pairs.get("DenyAccounts"), ()),
            allow_groups=_names(pairs.get("AllowGroups"), ("ALL",)),
            allow_qos=_names(pairs.get("AllowQos"), ("ALL",)),
            deny_qos=_names(pairs.get("DenyQos"), ()),
            max_time=pairs.get("MaxTime", "UNLIMITED"), total_mem_mb=_tres_mem(pairs.get("TRES"))))
    return found


def parse_config(text: str) -> SelectConfig:
    """The lines of `scontrol show config` that change what a job is billed for."""
    pairs = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            pairs[key.strip()] = value.strip()
    return SelectConfig(pairs.get("SelectType", "select/cons_tres"), pairs.get("SelectTypeParameters", ""),
                        pairs.get("PriorityFlags", ""))


def read_partitions(runner: SlurmRunner) -> tuple[list[Partition], SelectConfig]:
    """Two calls to the controller: the partitions and its config."""
    parts = parse_partitions(listing(runner(["scontrol", "show", "partition", "--oneliner"])))
    config = parse_config(runner(["scontrol", "show", "config"]).stdout)
    return parts, config
