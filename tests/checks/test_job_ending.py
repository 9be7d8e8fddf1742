"""Pure parts of "why the job ended": the batched sacct parser (on bytes recorded from the
dev cluster's slurmdbd), the words, the end-aware resubmit policy, output paths, lifecycle
transitions, log scrubbing, and the formatting every alert uses."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from watchdogs import humanize
from watchdogs.checks.jobfiles import last_lines, scrub
from watchdogs.slurmctl import ending as e
from watchdogs.slurmctl.outputs import JobNames, expand, log_paths, script_patterns
from watchdogs.slurmctl.resubmit import ResubmitPolicy, decide, ending_key
from watchdogs.slurmctl.sacct import SEP, parse_sacct, sacct_argv
from watchdogs.slurmctl.squeue import JobRow
from watchdogs.slurmctl.transitions import ENDED, REQUEUED, STARTED, remember, transitions

# ruff: noqa: E501 - recorded sacct lines are kept byte-for-byte, one record a line
# `sacct` on the dev cluster for: 1 killed by OverMemoryKill (--mem=100M), 2 cancelled by
# root while running, 3 `exit 2`, 5 `--time=1`.
RECORDED = """\
1|1|FAILED|0:9|2026-11-23T04:59:23|2026-11-23T04:59:24|2026-11-23T04:59:25|1|525600|node1|1|1|billing=1,cpu=1,mem=100M,node=1|100M||00:00.002|0|root|None|wrap|/tmp
1.batch|1.batch|CANCELLED by 0|0:9|2026-11-23T04:59:24|2026-11-23T04:59:24|2026-11-23T04:59:25|1||node1|1|1|cpu=1,mem=100M,node=1||162254848|00:00.002||||batch|
2|2|CANCELLED by 0|0:0|2026-11-23T05:00:18|2026-11-23T05:00:18|2026-11-23T05:00:20|2|UNLIMITED|node1|1|1|billing=1,cpu=1,mem=100M,node=1|100M||00:00.002|0|root|None|wrap|/tmp
2.batch|2.batch|CANCELLED|0:15|2026-11-23T05:00:18|2026-11-23T05:00:18|2026-11-23T05:00:21|3||node1|1|1|cpu=1,mem=100M,node=1||3338240|00:00.002||||batch|
3|3|FAILED|2:0|2026-11-23T05:00:18|2026-11-23T05:00:18|2026-11-23T05:00:18|0|UNLIMITED|node1|1|1|billing=1,cpu=1,mem=100M,node=1|100M||00:00.002|0|root|None|wrap|/tmp
3.batch|3.batch|FAILED|2:0|2026-11-23T05:00:18|2026-11-23T05:00:18|2026-11-23T05:00:18|0||node1|1|1|cpu=1,mem=100M,node=1|||00:00.002||||batch|
5|5|TIMEOUT|0:0|2026-11-23T05:01:33|2026-11-23T05:01:34|2026-11-23T05:02:52|78|1|node1|1|1|billing=1,cpu=1,mem=100M,node=1|100M||00:00.004|0|root|None|wrap|/tmp
5.batch|5.batch|CANCELLED|0:15|2026-11-23T05:01:34|2026-11-23T05:01:34|2026-11-23T05:02:52|78||node1|1|1|cpu=1,mem=100M,node=1||3170304|00:00.004||||batch|
""".replace("|", SEP)
USERS = {0: "root"}
POLICY = ResubmitPolicy(Path("/x/train.slurm"), 3, 6 * 3600.0, Path("/x/NO_RESUBMIT"),
                        checkpoints_known=True)


def ending_of(job_id: str, **bad: str) -> e.Ending:
    facts = e.EndFacts.from_sacct(parse_sacct(RECORDED)[job_id], USERS)
    return e.explain(facts, dict(bad), [facts.nodelist])


def test_one_call_names_every_job_and_asks_for_steps_and_earlier_runs() -> None:
    argv = sacct_argv(["12", "3", "12", "88_4"])
    assert argv[argv.index("-j") + 1] == "3,12,88_4"
    assert "--duplicates" in argv and "--noconvert" in argv and "-X" not in argv


def test_sacct_records_carry_peak_memory_from_steps_and_who_cancelled() -> None:
    records = parse_sacct(RECORDED)
    oom, cancelled, timeout = records["1"], records["2"], records["5"]
    assert (oom.state, oom.exit_code, oom.max_rss, oom.mem_per_node) == ("FAILED", "0:9", 162254848,
                                                                        100 * 2**20)
    assert (cancelled.state, cancelled.cancelled_by, cancelled.uid) == ("CANCELLED", 0, 0)
    assert (timeout.time_limit, timeout.elapsed, timeout.finished) == (60.0, 78.0, True)


def test_a_placeholder_record_is_not_taken_for_the_end() -> None:
    # Polled right after a job's end: slurmdbd holds a placeholder made from the step.
    text = "1010|1010|FAILED|3:0|2026-11-23T05:19:55|2026-11-23T05:19:55|2026-11-23T05:19:55|0||" \
           "node1|1|1||16?||00:00.002|0|root|None|allocation|\n"
    assert not parse_sacct(text.replace("|", SEP))["1010"].finished
    assert parse_sacct(RECORDED)["3"].finished


def test_a_requeued_job_keeps_its_earlier_runs_states() -> None:
    first = RECORDED.splitlines()[6].replace("TIMEOUT", "NODE_FAIL")
    text = first + "\n" + RECORDED.splitlines()[6] + "\n"
    assert parse_sacct(text)["5"].earlier == ("NODE_FAIL",)


def test_memory_enforcement_kill_is_explained_as_out_of_memory_with_peak_and_request() -> None:
    ending = ending_of("1")
    assert ending.kind == e.OUT_OF_MEMORY
    text = ending.sentence()
    assert "wrap (job 1) ran out of memory on node1 after 1 s: peak 154.7 MiB of the 100.0 MiB " \
           "requested (155 %)" in text
    assert "Slurm recorded FAILED, killed by signal 9 (KILL)" in text


def test_cancel_names_the_user_and_whether_it_was_the_owner() -> None:
    ending = ending_of("2")
    assert "was cancelled by root (its owner) after 2 s" in ending.sentence()
    assert ending_key(ending, POLICY, None) == "cancelled_by_owner"


def test_time_limit_gives_limit_step_reached_and_step_saved() -> None:
    facts = e.EndFacts.from_sacct(parse_sacct(RECORDED)["5"], USERS)
    end = facts.end.timestamp() if facts.end else 0.0
    ending = e.explain(facts, {}, ["node1"], e.Progress(41200, 41000, end - 30))
    assert "hit its time limit of 1 min 00 s at step 41,200, having saved at step 41,000 " \
           "30 s before the end" in ending.sentence()
    assert ending_key(ending, POLICY, None) == "timeout_saved"
    stale = e.explain(facts, {}, ["node1"], e.Progress(41200, 41000, end - 3600))
    assert ending_key(stale, POLICY, None) == "timeout_unsaved"


def test_node_failure_names_the_node_and_its_drain_reason_and_excludes_it() -> None:
    facts = e.EndFacts.from_sacct(parse_sacct(RECORDED)["3"], USERS)
    facts = e.EndFacts(**{**facts.__dict__, "state": "NODE_FAIL", "exit_code": "0:0"})
    ending = e.explain(facts, {"node1": "xid 79", "node9": "other"}, ["node1"])
    assert "was on node1 when the node failed (NODE_FAIL; drain reason node1: 'xid 79')" in ending.sentence()
    decision = decide(POLICY, [], 1e9, False, ending)
    assert decision.allowed and decision.exclude == ("node1",)
    assert decision.why == "1st of at most 3 in 6 h 00 min"


@pytest.mark.parametrize(("job", "allowed", "words"), [
    ("1", False, "Not resubmitted: the same request would fail again; raise --mem"),
    ("3", False, "Not resubmitted: it failed within 10 min 00 s of its start"),
    ("2", False, "Not resubmitted: it was cancelled by its owner"),
])
def test_endings_a_resubmit_cannot_fix_are_not_resubmitted(job: str, allowed: bool, words: str) -> None:
    decision = decide(POLICY, [], 1e9, False, ending_of(job))
    assert decision.allowed is allowed
    assert decision.why.startswith(words)


def test_a_late_failure_is_resubmitted_until_the_crash_loop_limit() -> None:
    facts = e.EndFacts.from_sacct(parse_sacct(RECORDED)["3"], USERS)
    late = e.explain(e.EndFacts(**{**facts.__dict__, "elapsed": 7200.0}), {}, ["node1"])
    now = 1e9
    assert decide(POLICY, [now - 10, now - 20], now, False, late).allowed
    looped = decide(POLICY, [now - 10, now - 20, now - 30], now, False, late)
    assert not looped.allowed and "crash loop (3 resubmits in the last 6 h 00 min, limit 3)" in looped.why
    assert not decide(POLICY, [], now, True, late).allowed
    assert decide(POLICY, [now - 7 * 3600] * 5, now, False, late).allowed  # outside the window
    done = e.explain(e.EndFacts(**{**facts.__dict__, "state": "COMPLETED", "exit_code": "0:0"}), {}, [])
    assert decide(POLICY, [], now, False, done).why == "Not resubmitted: the last run completed successfully"


def test_unknown_ending_says_so_and_never_invents_a_reason() -> None:
    facts = e.EndFacts.unknown("9", "train", "did not answer (Connection refused); the controller "
                                             "no longer remembers it")
    ending = e.explain(facts, {}, [])
    assert ending.kind == e.UNKNOWN
    assert ending.sentence() == ("train (job 9): how it ended is unknown: did not answer "
                                 "(Connection refused); the controller no longer remembers it")


def row(job_id: str, state: str, start: datetime | None = None) -> JobRow:
    return JobRow(job_id, job_id, job_id, None, state, "root", "debug", start, None, None, 5.0, 1,
                  "node1", None, "None", "train")


def test_transitions_started_requeued_and_ended_each_once() -> None:
    t0 = datetime(2026, 11, 23, 5, 0, tzinfo=timezone.utc)
    seen: dict[str, dict[str, object]] = {}
    steps = [[row("7", "PENDING")], [row("7", "RUNNING", t0)], [row("7", "RUNNING", t0)],
             [row("7", "RUNNING", t0 + timedelta(minutes=3))],
             [row("7", "COMPLETING", t0 + timedelta(minutes=4))], [row("7", "PENDING")],
             [row("7", "RUNNING", t0 + timedelta(minutes=9))], []]
    kinds = []
    for rows in steps:
        kinds.append([t.kind for t in transitions(seen, rows)])
        seen = remember(rows)
    assert kinds == [[], [STARTED], [], [REQUEUED, STARTED], [], [REQUEUED], [STARTED], [ENDED]]


def test_output_patterns_from_the_script_expand_for_the_job(tmp_path: Path) -> None:
    out, err = script_patterns("#!/bin/bash\n#SBATCH --job-name=x\n#SBATCH -o logs/%x-%j.out\n"
                               "#SBATCH --error=logs/%x-%3j.err\nsrun python train.py\n#SBATCH -e no\n")
    assert (out, err) == ("logs/%x-%j.out", "logs/%x-%3j.err")
    job = JobNames("7", "train", "root", "node1")
    assert expand("%x_%u_%N_%%_%4j", job) == "train_root_node1_%_0007"
    assert log_paths(out, err, job, "/work") == [Path("/work/logs/train-007.err"),
                                                 Path("/work/logs/train-7.out")]
    assert log_paths(None, None, job, "/work") == [Path("/work/slurm-7.out")]


def test_log_tail_is_scrubbed_and_capped() -> None:
    text = "partial line\nstep 10 loss 0.3 tokens_per_sec=1234\nHF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz\n" \
           "https://bob:hunter2@example.org/x\n" + "x" * 500 + "\n\n"
    lines = last_lines(text, 4)
    assert lines[0] == "step 10 loss 0.3 tokens_per_sec=1234"
    assert lines[1] == "HF_TOKEN=***"
    assert "hunter2" not in lines[2]
    assert len(lines[3]) == 200 and lines[3].endswith("…")
    assert scrub('{"api_key": "abc123"}') == '{"api_key": "***"}'


@pytest.mark.parametrize(("seconds", "words"), [
    (0, "0 s"), (45, "45 s"), (125, "2 min 05 s"), (6 * 3600 + 120, "6 h 02 min"),
    (3 * 86400 + 4 * 3600, "3 d 04 h")])
def test_durations_in_words(seconds: float, words: str) -> None:
    assert humanize.duration(seconds) == words


@pytest.mark.parametrize(("code", "words"), [
    ("1:0", "exit 1"), ("0:9", "killed by signal 9 (KILL)"), ("0:15", "killed by signal 15 (TERM)"),
    ("137:0", "exit 137 (a process killed by signal 9 (KILL))"), ("", "")])
def test_exit_status_in_words(code: str, words: str) -> None:
    assert humanize.slurm_exit(code) == words


def test_moment_has_date_and_zone_and_sizes_have_units() -> None:
    moment = datetime(2026, 11, 23, 3, 15, tzinfo=timezone.utc)
    assert humanize.moment(moment) == "2026-11-23 03:15 UTC"
    assert humanize.size(61.8 * 2**30) == "61.8 GiB"
    assert humanize.percent(61.8, 64) == "97 %"
    assert [humanize.ordinal(n) for n in (1, 2, 3, 4, 11, 22)] == ["1st", "2nd", "3rd", "4th", "11th", "22nd"]


@pytest.mark.parametrize(("code", "words"), [
    ("4:0", "exit 4: trainguard could not save a checkpoint for the requeue it wanted (the checkpoint "
            "folder is full, over quota or not writable): not requeued"),
    ("5:0", "exit 5: trainguard stopped on a NaN/Inf loss without saving the poisoned state"),
    ("3:0", "exit 3: trainguard's requeue-loop protection"),
])
def test_trainguards_own_exit_codes_are_said_in_words_when_the_run_kept_its_records(code: str, words: str) -> None:
    facts = e.EndFacts.from_sacct(parse_sacct(RECORDED)["3"], USERS)
    facts = e.EndFacts(**{**facts.__dict__, "exit_code": code})
    assert words in e.explain(facts, {}, ["node1"], e.Progress(1200)).sentence()
    # Without trainguard's records the number may mean anything: said as a number only.
    bare = e.explain(facts, {}, ["node1"]).sentence()
    assert "trainguard" not in bare and f"exit {code[0]}" in bare, bare
