"""What would help a successor that cannot start before its predecessor's time limit, for
the WARNING that says the watchdog is about to go blind. One sinfo, asked once per warning."""
from __future__ import annotations

from collections.abc import Mapping

from watchdogs.errors import WatchdogsError
from watchdogs.slurmctl.runner import SlurmRunner, run_slurm


def idle_partitions(sinfo: str, current: str | None) -> list[str]:
    """Pure: partitions that are up with idle CPUs now, from `sinfo -h -o %P|%a|%C`
    (%C is allocated/idle/other/total), the current one left out."""
    found: dict[str, int] = {}
    for line in sinfo.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or parts[1] != "up":
            continue
        name = parts[0].rstrip("*")
        counts = parts[2].split("/")
        if name != current and len(counts) == 4 and counts[1].isdigit() and int(counts[1]) > 0:
            found[name] = found.get(name, 0) + int(counts[1])
    return [f"partition {name} has {idle} idle CPU{'s' if idle != 1 else ''} now (SBATCH_PARTITION={name})"
            for name, idle in sorted(found.items(), key=lambda kv: -kv[1])]


def remedies(partition: str | None, env: Mapping[str, str] | None = None,
             runner: SlurmRunner = run_slurm) -> list[str]:
    try:
        reply = runner(["sinfo", "--noheader", "--format=%P|%a|%C"], env=env)
        idle = idle_partitions(reply.stdout, partition)
    except WatchdogsError:
        idle = []
    return [*idle[:3],
            "a QOS that ranks higher (SBATCH_QOS; many sites offer a workflow or cron QOS for this)",
            "a shorter time limit (SBATCH_TIMELIMIT): a short job backfills into holes a long one cannot",
            "another home where the site allows it: scrontab or a login node's crontab (`watchdogs doctor`)"]
