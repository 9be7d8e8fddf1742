"""What a job is billed for, per hour, from Slurm's own rules: billing is the CPUs allocated
unless the partition sets `TRESBillingWeights` (then the weighted sum of CPU, memory in GB,
GPUs ..., or their maximum with `PriorityFlags=MAX_TRES`), and a job given a whole node
(`OverSubscribe=EXCLUSIVE`, select/linear) is allocated, and billed for, the whole node.
Pure: the partitions come from `slurmctl.partitions`."""
from __future__ import annotations

from dataclasses import dataclass

from watchdogs.slurmctl.partitions import Partition, SelectConfig

HOURS_PER_DAY = 24.0


@dataclass(frozen=True)
class Billing:
    partition: str
    units_per_hour: float
    whole_node: bool
    cpus: int
    """The CPUs allocated (all of a node's when whole)."""
    why: str

    @property
    def per_day(self) -> float:
        return self.units_per_hour * HOURS_PER_DAY

    @property
    def per_year(self) -> float:
        return self.per_day * 365


def billing_per_hour(cpus: int, mem_mb: int | None, partition: Partition, config: SelectConfig) -> Billing:
    """Billing units per hour of a job asking for `cpus` and `mem_mb` (None: the partition's
    DefMemPerCPU) in `partition`."""
    whole = partition.exclusive or config.whole_nodes
    node_cpus = partition.cpus_per_node
    alloc = max(cpus, node_cpus) if whole and node_cpus else cpus
    if mem_mb is None:
        mem_mb = (partition.def_mem_per_cpu_mb or 0) * cpus
    if whole and partition.mem_per_node_mb:
        mem_mb = max(mem_mb, partition.mem_per_node_mb)   # a whole node's memory is allocated too
    mem_gb = mem_mb / 1024
    how = ("OverSubscribe=EXCLUSIVE: every job gets whole nodes"
           if partition.oversubscribe.upper().startswith("EXCLUSIVE") else
           f"Exclusive={partition.exclusive_mode}: every job gets whole nodes" if partition.exclusive else
           f"{config.select_type}: whole nodes" if whole else "shared nodes")
    weights = partition.billing_weights
    if not weights:
        return Billing(partition.name, float(alloc), whole, alloc,
                       f"{how}; billed by CPUs allocated ({alloc}; no TRESBillingWeights)")
    terms = {"cpu": weights.get("cpu", 0.0) * alloc, "mem": weights.get("mem", 0.0) * mem_gb}
    units = max(terms.values()) if config.max_tres else sum(terms.values())
    shown = ", ".join(f"{k}={v:g}" for k, v in terms.items() if v)
    rule = "the largest (PriorityFlags=MAX_TRES)" if config.max_tres else "the sum"
    return Billing(partition.name, units, whole, alloc,
                   f"{how}; TRESBillingWeights give {shown or 'nothing'}, billed {rule}")
