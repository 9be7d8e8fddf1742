"""`doctor` on the dev cluster, as the user runs it (issue 34 items 6 to 8): without a dead
man's switch it warns and says why; with `SBATCH_PARTITION=whole` (the dev cluster's
OverSubscribe=EXCLUSIVE partition) the cost finding warns that the one-core job holds a
whole node and names the cheaper partitions; the homes finding says which homes work for
this user here (scrontab only on a release that ships the client)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.doctor.test_doctor import by_area, doctor, site

pytestmark = pytest.mark.usefixtures("slurm_cluster")
LOGFILE = """
[[notify]]
name = "log"
type = "logfile"
path = "alerts.log"
"""


def test_without_a_heartbeat_url_doctor_warns_that_nothing_reports_the_watchdogs_own_death(
        tmp_path: Path) -> None:
    code, out, err = doctor(site(tmp_path, LOGFILE), "--json")
    found = by_area(json.loads(out))
    heartbeat = found["heartbeat"]
    assert heartbeat["status"] == "WARNING" and code >= 1, out
    assert "nothing can report the watchdog's own death" in heartbeat["summary"]
    assert "healthchecks.io" in heartbeat["fix"] and "Uptime Kuma" in heartbeat["fix"]
    assert "heartbeat_url" in heartbeat["fix"]


def test_a_whole_node_partition_draws_a_cost_warning_naming_cheaper_partitions(tmp_path: Path) -> None:
    config = site(tmp_path, LOGFILE, 'heartbeat_url = "http://127.0.0.1:9/ping/x"\n')
    code, out, err = doctor(config, SBATCH_PARTITION="whole")
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("WARNING  cost"))
    assert "partition whole (SBATCH_PARTITION): whole node (4 CPUs), 4.0 billing units/h = 96.0 a day" in line
    assert "OverSubscribe=EXCLUSIVE" in line or "Exclusive=NODE" in line  # 26.05 has a key of its own
    fix = out.splitlines()[out.splitlines().index(line) + 1]
    assert "fix: cheaper partitions you may use: cpu (24.0 a day), debug (24.0 a day)" in fix, fix
    assert "SBATCH_PARTITION=cpu `watchdogs start`" in fix
    shared = doctor(config, "--json", SBATCH_PARTITION="debug")[1]
    cost = by_area(json.loads(shared))["cost"]
    assert cost["status"] == "OK" and cost["summary"].startswith("partition debug (SBATCH_PARTITION): 1 CPU")


def test_homes_says_which_homes_work_for_this_user_here(tmp_path: Path) -> None:
    out = doctor(site(tmp_path, LOGFILE), "--json")[1]
    homes = by_area(json.loads(out))["homes"]
    assert homes["status"] == "OK"
    facts = homes["facts"]["homes"]
    assert facts["job"]["works"]
    if shutil.which("scrontab") is None:
        assert facts["scrontab"] == {"works": False, "why": "no scrontab command here"}
    else:   # the dev cluster enables it (ScronParameters=enable)
        assert facts["scrontab"]["works"], facts["scrontab"]
        assert "--home scrontab" in homes["fix"]
