"""The doctor's `cost` finding: what the scheduler job is billed per day where it will run,
from Slurm's own rules (watchdogs.slurmctl.billing), against what it uses; a WARNING when the
job would hold a whole node or bill far more than one CPU, naming the cheaper partitions
this user may use and the homes that bill per run."""
from __future__ import annotations

import grp
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from watchdogs.commands.doctor.checks import Finding
from watchdogs.errors import SlurmError
from watchdogs.result import Status
from watchdogs.slurmctl.billing import Billing, billing_per_hour
from watchdogs.slurmctl.partitions import Partition, SelectConfig, read_partitions
from watchdogs.slurmctl.runner import SlurmRunner
from watchdogs.slurmctl.slurmtime import parse_elapsed

TYPICAL_CPU_S_PER_HOUR = 49.5
"""One chain instance, measured (issue 34; benchmarks/scheduler_footprint.py): 0.33 core-h a day."""
MIN_LIFE_S = 3600.0
"""A partition whose MaxTime is shorter cannot hold an instance worth its start-up."""
FAR_MORE = 2.0
"""Billed this many times a one-CPU job's units or more: a warning."""


@dataclass(frozen=True)
class JobRequest:
    """What the scheduler job asks for, and where each part came from."""

    cpus: int = 1
    mem_mb: int | None = None
    partition: str | None = None
    source: str = "the default partition"
    account: str | None = None
    qos: str | None = None


_SBATCH = re.compile(r"^#SBATCH\s+--([\w-]+)(?:[= ](\S+))?")


def _mem_mb(text: str) -> int | None:
    match = re.fullmatch(r"(\d+)([KMGT]?)B?", text.strip().upper())
    if not match:
        return None
    return int(int(match[1]) * {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 ** 2}[match[2]])


def job_request(script: Path, env: Mapping[str, str]) -> JobRequest:
    """The batch script's #SBATCH lines, overridden by SBATCH_* in the environment as sbatch
    does it (a commented `##SBATCH` line counts for nothing)."""
    found: dict[str, str] = {}
    try:
        lines = script.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        match = _SBATCH.match(line)
        if match and match[2]:
            found.setdefault(match[1], match[2])
    cpus = int(found["cpus-per-task"]) if found.get("cpus-per-task", "").isdigit() else 1
    partition, source = found.get("partition"), f"#SBATCH --partition in {script}"
    if env.get("SBATCH_PARTITION"):
        partition, source = env["SBATCH_PARTITION"], "SBATCH_PARTITION"
    if partition is None:
        source = "the default partition"
    return JobRequest(cpus, _mem_mb(env.get("SBATCH_MEM_PER_NODE") or found.get("mem", "")) if (
        env.get("SBATCH_MEM_PER_NODE") or found.get("mem")) else None, partition, source,
        env.get("SBATCH_ACCOUNT") or found.get("account"), env.get("SBATCH_QOS") or found.get("qos"))


def _per_day(units: float) -> str:
    return f"{units:,.1f}" if units < 100 else f"{units:,.0f}"


def judge(partitions: Sequence[Partition], config: SelectConfig, request: JobRequest, groups: set[str],
          used_cpu_s_per_hour: float = TYPICAL_CPU_S_PER_HOUR, measured: bool = False) -> Finding:
    """Pure: the finding for `request` on this cluster's partitions."""
    chosen = next((p for p in partitions if p.name == request.partition), None) if request.partition else \
        next((p for p in partitions if p.default), None)
    if chosen is None:
        return Finding("cost", Status.WARNING,
                       f"partition {request.partition or '(default)'} ({request.source}) is not one this "
                       "cluster lists: its cost cannot be told",
                       "name a partition of `sinfo -s` in SBATCH_PARTITION or the batch script")
    bill = billing_per_hour(request.cpus, request.mem_mb, chosen, config)
    used = used_cpu_s_per_hour * 24 / 3600
    one_cpu = billing_per_hour(1, request.mem_mb, _shared(chosen), config).units_per_hour
    far = bill.units_per_hour >= FAR_MORE * max(one_cpu, 1e-9)
    facts = {"partition": chosen.name, "source": request.source,
             "units_per_hour": round(bill.units_per_hour, 3),
             "units_per_day": round(bill.per_day, 2), "whole_node": bill.whole_node, "cpus": bill.cpus,
             "used_core_hours_per_day": round(used, 3), "used_measured": measured}
    summary = (f"partition {chosen.name} ({request.source}): "
               + (f"whole node ({bill.cpus} CPUs), " if bill.whole_node else f"{bill.cpus} CPU"
                  f"{'s' if bill.cpus != 1 else ''}, ")
               + f"{_per_day(bill.units_per_hour)} billing units/h = {_per_day(bill.per_day)} a day "
               f"({_per_day(bill.per_year)} a year); the watchdog uses about {used:.2f} core-h a day "
               f"({'measured' if measured else 'typical'}: {used_cpu_s_per_hour:g} CPU-s/h)")
    if not bill.whole_node and not far:
        return Finding("cost", Status.OK, summary + f"; {bill.why}", facts=facts)
    cheaper = _cheaper(partitions, config, request, groups, bill)
    facts["cheaper"] = [{"partition": b.partition, "units_per_day": round(b.per_day, 2)} for b in cheaper]
    why = (f"the job holds a whole node ({bill.why})" if bill.whole_node else
           f"it bills {bill.units_per_hour / max(one_cpu, 1e-9):.0f}x a one-CPU job ({bill.why})")
    fix = ("cheaper partitions you may use: " + ", ".join(
        f"{b.partition} ({_per_day(b.per_day)} a day)" for b in cheaper[:4])
        + f"; submit there with SBATCH_PARTITION={cheaper[0].partition} `watchdogs start`, or "
        "#SBATCH --partition in the batch script") if cheaper else \
        "no partition this user may use shares nodes"
    fix += ("; or a home that bills per run, where the site allows it: `watchdogs start --home "
            "scrontab|cron|timer` (see the `homes` finding)")
    return Finding("cost", Status.WARNING, f"{summary}: {why}", fix, facts)


def _shared(partition: Partition) -> Partition:
    """The same partition as if nodes were shared: what one CPU would be billed."""
    from dataclasses import replace

    return replace(partition, oversubscribe="NO")


def _cheaper(partitions: Sequence[Partition], config: SelectConfig, request: JobRequest, groups: set[str],
             now: Billing) -> list[Billing]:
    found = []
    for part in partitions:
        if part.name == now.partition or not part.up:
            continue
        if not part.open_to(request.account, groups, request.qos):
            continue
        if _max_time_s(part.max_time) < MIN_LIFE_S:
            continue
        bill = billing_per_hour(request.cpus, request.mem_mb, part, config)
        if bill.units_per_hour < now.units_per_hour and not bill.whole_node:
            found.append(bill)
    return sorted(found, key=lambda b: (b.units_per_hour, b.partition))


def _max_time_s(text: str) -> float:
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return float("inf")
    try:
        return parse_elapsed(text) if ":" in text or "-" in text else float(text) * 60  # bare minutes
    except ValueError:
        return float("inf")   # unreadable: not a reason to hide the partition


def user_groups() -> set[str]:
    names = set()
    for gid in os.getgroups() + [os.getgid()]:
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return names


def check_cost(runner: SlurmRunner, script: Path, env: Mapping[str, str]) -> Finding:
    try:
        partitions, config = read_partitions(runner)
    except SlurmError as exc:
        return Finding("cost", Status.UNKNOWN, f"cannot read the partitions: {exc}",
                       "`scontrol show partition` must answer where `doctor` runs")
    return judge(partitions, config, job_request(script, env), user_groups())
