"""Crash and cancel alerts point at the job's real log (issue 36, log paths): Slurm's own
paths while the job is seen (squeue StdOut/StdErr), accounting's (sacct StdOut/StdErr on
24.11 and later, the sbatch line's -o/-e on 22.05), and when nothing says, the key to set
instead of a guessed file. Recorded output of the dev cluster's releases and real files;
no cluster (test_job_output_paths_cluster.py runs the crash on each release)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from watchdogs.checks.jobfiles import Where, job_log_tail, where_logs
from watchdogs.slurmctl.ending import EndFacts
from watchdogs.slurmctl.jobinfo import outputs_argv, parse_outputs
from watchdogs.slurmctl.outputs import JobNames, expand, submit_line_patterns
from watchdogs.slurmctl.sacct import FIELDS, SEP, offered, parse_sacct

# `squeue --jobs=15,16,17 -O JobID:␟,StdOut:␟,StdErr:␟` on 22.05 (slurm-wlm 22.05.8): the
# patterns as given, made absolute by sbatch; a space in a path stays whole.
SQUEUE_2205 = ("15\x1f/tmp/h37repro/sub dir/train-%j.out\x1f/tmp/h37repro/%x-%j.err\x1f\n"
               "17\x1f/tmp/h37repro/arr-%A_%a.out\x1f/tmp/h37repro/arr-%A_%a.out\x1f\n"
               "16\x1f/tmp/h37repro/arr-%A_%a.out\x1f/tmp/h37repro/arr-%A_%a.out\x1f\n")
# sacct SubmitLine on 22.05 for the same jobs: joined by spaces, quotes gone.
SUBMIT_2205 = "sbatch --parsable --job-name=o1 -o sub dir/train-%j.out -e %x-%j.err --wrap sleep 100"
HELPFORMAT_2205 = "Account AdminComment AllocCPUS\nSubmit SubmitLine Suspended\nWorkDir\n"
HELPFORMAT_2411 = "Account StdErr StdIn StdOut\nSubmitLine WorkDir\n"


def test_squeue_is_asked_for_every_new_job_at_once_and_its_answer_read_whole() -> None:
    argv = outputs_argv(["15", "16", "17"])
    assert argv[:3] == ["squeue", "--noheader", "--jobs=15,16,17"]
    assert argv[-1] == "JobID:\x1f,StdOut:\x1f,StdErr:\x1f"
    found = parse_outputs(SQUEUE_2205)
    assert found["15"].stdout == "/tmp/h37repro/sub dir/train-%j.out"
    assert found["15"].stderr == "/tmp/h37repro/%x-%j.err"
    assert found["17"].stdout == "/tmp/h37repro/arr-%A_%a.out"
    assert parse_outputs("squeue: error: Invalid job id specified\n") == {}


def test_sacct_asks_for_output_fields_only_where_the_release_offers_them() -> None:
    assert offered(HELPFORMAT_2205) == ("SubmitLine",)
    assert offered(HELPFORMAT_2411) == ("StdOut", "StdErr", "SubmitLine")
    base = ["15", "15", "FAILED", "1:0", "2026-11-28T02:51:05", "2026-11-28T02:51:06",
            "2026-11-28T02:51:09", "3", "5", "node1", "1", "1", "cpu=1,mem=4000M", "4000M", "",
            "00:00:00", "1001", "wdtest", "None", "o1", "/tmp/h37repro"]
    assert len(base) == len(FIELDS)
    old = parse_sacct(SEP.join([*base, SUBMIT_2205]) + "\n", ("SubmitLine",))["15"]
    assert old.submit_line == SUBMIT_2205 and old.stdout == ""
    new = parse_sacct(SEP.join([*base, "/tmp/h37repro/train-15.out", "/tmp/h37repro/o1-15.err",
                                SUBMIT_2205]) + "\n", ("StdOut", "StdErr", "SubmitLine"))["15"]
    assert (new.stdout, new.stderr) == ("/tmp/h37repro/train-15.out", "/tmp/h37repro/o1-15.err")
    # A recording without the optional fields still reads (the fixtures of earlier rounds).
    assert parse_sacct(SEP.join(base) + "\n")["15"].submit_line == ""


@pytest.mark.parametrize(("line", "output", "error", "wrap"), [
    # sbatch recorded "-o 'sub dir/...'" unquoted: the path is cut at its space and the rest
    # reads as the script (the log is then named as not found, never guessed).
    (SUBMIT_2205, "sub", None, False),
    ("sbatch --job-name=o1 -o train-%j.out -e %x-%j.err --wrap sleep 100", "train-%j.out", "%x-%j.err", True),
    ("sbatch -o train-%j.out train.slurm --lr 3 -o not-an-option", "train-%j.out", None, False),
    ("sbatch --output=logs/%x-%A_%a.out --array=0-3 -J t train.slurm", "logs/%x-%A_%a.out", None, False),
    ("sbatch -otrain.out -N 2 --exclusive train.slurm -e x", "train.out", None, False),
    ("sbatch train.slurm", None, None, False),
])
def test_the_sbatch_line_gives_its_own_options_not_the_scripts_arguments(
        line: str, output: str | None, error: str | None, wrap: bool) -> None:
    found = submit_line_patterns(line)
    assert found is not None and (found.output, found.error, found.wrap) == (output, error, wrap)
    assert submit_line_patterns("srun python train.py") is None


def test_patterns_expand_for_a_job_and_an_array_task() -> None:
    job = JobNames("18", "train", "alice", "node1")
    assert expand("train-%j.out", job) == "train-18.out"
    assert expand("%x-%j.%u.%N.out", job) == "train-18.alice.node1.out"
    assert expand("100%%-%j", job) == "100%-18"
    task = JobNames("88_3", "arr", "alice", "node2", "88", "3")
    assert expand("logs/%x-%A_%a.out", task) == "logs/arr-88_3.out"
    assert expand("/abs/train-18.out", job) == "/abs/train-18.out"  # an expanded path stays


OPTS: dict[str, Any] = {"tail_lines": 20, "probe_timeout": 10.0}


def facts(tmp_path: Path, job_id: str = "18", name: str = "train", uid: int | None = None
          ) -> EndFacts:
    return EndFacts(job_id, name, "FAILED", "sacct", "1:0", nodelist="node1", owner="alice",
                    workdir=str(tmp_path), uid=os.geteuid() if uid is None else uid)


def traceback(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("step 40 loss 2.1\nTraceback (most recent call last):\n  File \"train.py\", "
                    "line 9, in <module>\nValueError: loss is nan\n")


def test_the_path_seen_while_the_job_ran_is_tailed_relative_and_pattern_alike(tmp_path: Path) -> None:
    traceback(tmp_path / "runs" / "train-18.out")
    pattern = str(tmp_path / "runs" / "train-%j.out")
    seen = {"stdout": pattern, "stderr": pattern}
    where = where_logs(OPTS, "train", "18", seen, None, 10.0)
    assert where.source == "Slurm, while the job ran"
    tail = job_log_tail(facts(tmp_path), where, 20, 10.0)
    assert tail is not None and tail["path"] == str(tmp_path / "runs" / "train-18.out")
    assert tail["lines"][-1] == "ValueError: loss is nan"


def test_the_sbatch_line_names_a_relative_array_log_of_a_job_never_seen(tmp_path: Path) -> None:
    traceback(tmp_path / "logs" / "arr-88_3.out")
    record = parse_sacct(SEP.join(["88_3", "92", "FAILED", "1:0", "", "", "", "3", "5", "node1", "1",
                                   "1", "", "", "", "00:00:00", "1001", "alice", "None", "arr",
                                   str(tmp_path), "sbatch --array=3 -o logs/%x-%A_%a.out t.slurm"]) + "\n",
                         ("SubmitLine",))["88_3"]
    where = where_logs(OPTS, "train", "92", None, record, 10.0)
    assert (where.output, where.source) == ("logs/%x-%A_%a.out", "the sbatch command line")
    tail = job_log_tail(facts(tmp_path, "88_3", "arr"), where, 20, 10.0)
    assert tail is not None and tail["lines"][-1] == "ValueError: loss is nan"


def test_the_check_keys_come_first_then_slurm_then_accounting(tmp_path: Path) -> None:
    seen = {"stdout": "/seen/%j.out", "stderr": "/seen/%j.out"}
    keyed = where_logs({**OPTS, "output": "mine-%j.out"}, "train", "18", seen, None, 10.0)
    assert keyed.output == "mine-%j.out"
    assert where_logs(OPTS, "train", "18", seen, None, 10.0).output == "/seen/%j.out"


def test_an_unknown_path_says_which_key_to_set_and_names_no_guessed_file(tmp_path: Path) -> None:
    (tmp_path / "slurm-18.out").write_text("a guess would read this\n")
    record = parse_sacct(SEP.join(["18", "18", "FAILED", "1:0", "", "", "", "3", "5", "node1", "1",
                                   "1", "", "", "", "00:00:00", "1001", "alice", "None", "train",
                                   str(tmp_path), "sbatch train.slurm"]) + "\n", ("SubmitLine",))["18"]
    for known in (None, record):
        where = where_logs(OPTS, "my-train", "18", None, known, 10.0)
        assert where.output is None and where.error is None
        tail = job_log_tail(facts(tmp_path), where, 20, 10.0)
        assert tail is not None and tail["lines"] == []
        assert tail["problem"].startswith("the output file of job 18 is not known (")
        assert tail["problem"].endswith('set output = "<its sbatch -o pattern, e.g. train-%j.out>" '
                                        'in check "my-train"')
        assert "slurm-18.out" not in tail["problem"]


def test_a_wrapped_command_without_o_writes_slurms_default(tmp_path: Path) -> None:
    traceback(tmp_path / "slurm-18.out")
    record = parse_sacct(SEP.join(["18", "18", "FAILED", "1:0", "", "", "", "3", "5", "node1", "1",
                                   "1", "", "", "", "00:00:00", "1001", "alice", "None", "train",
                                   str(tmp_path), "sbatch --wrap python train.py"]) + "\n",
                         ("SubmitLine",))["18"]
    where = where_logs(OPTS, "train", "18", None, record, 10.0)
    assert where == Where(None, None, "the sbatch command line", default_ok=True)
    tail = job_log_tail(facts(tmp_path), where, 20, 10.0)
    assert tail is not None and tail["path"] == str(tmp_path / "slurm-18.out")


def test_a_log_the_jobs_user_does_not_own_is_named_not_quoted(tmp_path: Path) -> None:
    """The path comes from the job (its -o, its folder): a link to someone else's file must
    not put that file's end into an alert."""
    traceback(tmp_path / "train-18.out")
    where = where_logs({**OPTS, "output": "train-%j.out"}, "train", "18", None, None, 10.0)
    other = os.geteuid() + 4242
    tail = job_log_tail(facts(tmp_path, uid=other), where, 20, 10.0)
    assert tail is not None and tail["lines"] == []
    assert tail["problem"] == (f"{tmp_path}/train-18.out: not quoted: owned by uid {os.geteuid()}, "
                               f"not by the job's user (uid {other})")
    mine = job_log_tail(facts(tmp_path), where, 20, 10.0)
    assert mine is not None and mine["lines"][-1] == "ValueError: loss is nan"
