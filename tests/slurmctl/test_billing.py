"""What the scheduler job is billed for, from recorded `scontrol show partition --oneliner`
of a LUMI-like cluster (128-core nodes, `standard` OverSubscribe=EXCLUSIVE, `small` shared
with a memory weight) and an ARCHER2-like one (every partition whole-node but `serial`),
and the doctor's judgement of it."""
from __future__ import annotations

from pathlib import Path

import pytest

from watchdogs.commands.doctor.cost import JobRequest, job_request, judge
from watchdogs.result import Status
from watchdogs.slurmctl.billing import billing_per_hour
from watchdogs.slurmctl.partitions import (
    Partition,
    SelectConfig,
    parse_config,
    parse_partitions,
    parse_weights,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm" / "partitions"
CONS_TRES = SelectConfig()
ASK = JobRequest(cpus=1, mem_mb=512)


def partitions(name: str) -> dict[str, Partition]:
    return {p.name: p for p in parse_partitions((FIXTURES / f"{name}.txt").read_text())}


def test_lumi_standard_bills_a_whole_128_core_node_about_1_12_million_a_year() -> None:
    standard = partitions("lumi")["standard"]
    assert standard.exclusive and standard.cpus_per_node == 128
    bill = billing_per_hour(1, 512, standard, CONS_TRES)
    assert bill.whole_node and bill.cpus == 128
    assert bill.units_per_hour == 128 and bill.per_day == 3072
    assert round(bill.per_year / 1e6, 2) == 1.12


def test_lumi_small_bills_the_cpu_plus_half_a_unit_per_gb() -> None:
    small = partitions("lumi")["small"]
    bill = billing_per_hour(1, 2048, small, CONS_TRES)
    assert not bill.whole_node and bill.units_per_hour == pytest.approx(1 + 0.5 * 2)
    assert "the sum" in bill.why


def test_max_tres_bills_the_largest_term_not_the_sum() -> None:
    small = partitions("lumi")["small"]
    flags = parse_config("SelectType              = select/cons_tres\nPriorityFlags           = MAX_TRES\n")
    assert flags.max_tres
    assert billing_per_hour(1, 8192, small, flags).units_per_hour == pytest.approx(4.0)


def test_memory_weights_read_per_gb_or_per_mb() -> None:
    assert parse_weights("CPU=1.0,Mem=0.25G,GRES/gpu=2") == {"cpu": 1.0, "mem": 0.25, "gres/gpu": 2.0}
    assert parse_weights("Mem=0.001")["mem"] == pytest.approx(1.024)


def test_26_05_says_exclusive_nodes_in_a_key_of_its_own() -> None:
    whole = partitions("devcluster-26.05")["whole"]   # recorded on the dev cluster (26.05.5)
    assert whole.oversubscribe == "NO" and whole.exclusive
    bill = billing_per_hour(1, 512, whole, CONS_TRES)
    assert bill.whole_node and bill.cpus == 4 and bill.why.startswith("Exclusive=NODE: every job gets whole")
    debug = partitions("devcluster-26.05")["debug"]
    assert not debug.exclusive and not billing_per_hour(1, 512, debug, CONS_TRES).whole_node


def test_select_linear_gives_whole_nodes_on_any_partition() -> None:
    small = partitions("lumi")["small"]
    linear = parse_config("SelectType = select/linear\n")
    bill = billing_per_hour(1, 512, small, linear)
    assert bill.whole_node and bill.cpus == 128


def test_doctor_warns_on_lumi_standard_and_names_small_as_cheaper() -> None:
    found = judge(list(partitions("lumi").values()), CONS_TRES,
                  JobRequest(1, 512, "standard", "SBATCH_PARTITION"), set())
    assert found.status is Status.WARNING
    assert "partition standard (SBATCH_PARTITION): whole node (128 CPUs), 128 billing units/h = 3,072 a day" \
        in found.summary
    assert "the job holds a whole node (OverSubscribe=EXCLUSIVE" in found.summary
    assert found.fix.startswith("cheaper partitions you may use: small (30.0 a day);")
    assert "debug" not in found.fix  # MaxTime 30 minutes: no room for an instance
    assert "standard-g" not in found.fix  # whole nodes too
    assert "--home scrontab" in found.fix


def test_doctor_on_archer2_names_serial_only_for_a_user_with_its_qos() -> None:
    parts = list(partitions("archer2").values())
    default = judge(parts, CONS_TRES, JobRequest(1, 512, None, "the default partition", qos="serial"),
                    set())
    assert default.status is Status.WARNING
    assert "partition standard (the default partition): whole node (128" in default.summary
    assert "serial (24.0 a day)" in default.fix
    other_qos = judge(parts, CONS_TRES, JobRequest(1, 512, None, "the default partition", qos="standard"),
                      set())
    assert "no partition this user may use shares nodes" in other_qos.fix


def test_a_shared_partition_is_ok_and_says_what_it_costs_against_what_is_used() -> None:
    found = judge(list(partitions("lumi").values()), CONS_TRES,
                  JobRequest(1, 512, "small", "SBATCH_PARTITION"), set())
    assert found.status is Status.OK, found
    assert "1.2 billing units/h = 30.0 a day" in found.summary
    assert "uses about 0.33 core-h a day" in found.summary


def test_the_request_comes_from_the_script_and_sbatch_variables_win(tmp_path: Path) -> None:
    script = tmp_path / "job.slurm"
    script.write_text("#!/bin/bash\n#SBATCH --cpus-per-task=2\n#SBATCH --mem=1G\n##SBATCH --partition=cpu\n"
                      "#SBATCH --partition=small\n")
    assert job_request(script, {}) == JobRequest(2, 1024, "small", f"#SBATCH --partition in {script}")
    chosen = job_request(script, {"SBATCH_PARTITION": "debug", "SBATCH_QOS": "q"})
    assert (chosen.partition, chosen.source, chosen.qos) == ("debug", "SBATCH_PARTITION", "q")
