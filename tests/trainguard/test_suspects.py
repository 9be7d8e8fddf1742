"""Suspect nodes and restart storms: the record in the run folder, the exclusion policy
(a hang once, any cause twice, within the window), the storm rules, the in-place plan and
the one-line summary; the `python -m trainguard.recovery` CLI as the batch scripts run it
(real processes, real files), including a corrupt record and concurrent writers."""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainguard.config import config_from, storm_policy, suspect_policy
from trainguard.recovery import hostlist, journal, plan, restarts, summary, suspects
from trainguard.recovery.restarts import Restart, StormPolicy
from trainguard.recovery.suspects import SuspectPolicy, Suspicion

POLICY = SuspectPolicy(window=3600.0)
NOW = 1_800_000_000.0


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINGUARD_", "SLURM_JOB"))}
    return subprocess.run([sys.executable, "-m", "trainguard.recovery", *args], capture_output=True,
                          text=True, env={**full, **(env or {})}, timeout=60)


def answer(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def test_a_hang_excludes_its_node_at_once_and_other_causes_only_twice(tmp_path: Path) -> None:
    suspects.record(tmp_path, Suspicion("node2", "hang", NOW - 10, "7", 41200, "rank 3, in all_reduce"))
    suspects.record(tmp_path, Suspicion("node3", "rank_died", NOW - 5, "7", 41200))
    assert suspects.to_exclude(tmp_path, NOW, POLICY) == ["node2"]
    suspects.record(tmp_path, Suspicion("node3", "node_fail", NOW - 1, "8", 41300))
    assert suspects.to_exclude(tmp_path, NOW, POLICY) == ["node2", "node3"]


def test_suspicions_older_than_the_window_no_longer_count(tmp_path: Path) -> None:
    suspects.record(tmp_path, Suspicion("node2", "hang", NOW - 3601, "7", 10))
    assert suspects.to_exclude(tmp_path, NOW, POLICY) == []
    assert suspects.to_exclude(tmp_path, NOW - 2, POLICY) == ["node2"]


def test_one_failure_seen_by_several_ranks_counts_once(tmp_path: Path) -> None:
    for _rank in range(4):   # every peer names the same straggler
        suspects.record(tmp_path, Suspicion("node3", "rank_died", NOW, "7", 500, "rank 5"))
    verdict, = suspects.judge(suspects.read(tmp_path)[0], NOW, POLICY)
    assert (verdict.node, len(verdict.suspicions), verdict.excluded) == ("node3", 1, False)


def test_the_policy_comes_from_trainguard_settings() -> None:
    cfg = config_from({"TRAINGUARD_SUSPECT_WINDOW": "2h", "TRAINGUARD_SUSPECT_AT_ONCE": "precheck",
                       "TRAINGUARD_SUSPECT_LIMIT": "3", "TRAINGUARD_STORM_RESTARTS": "4",
                       "TRAINGUARD_STORM_WINDOW": "10m"})
    assert suspect_policy(cfg) == SuspectPolicy(7200.0, frozenset({"precheck"}), 3)
    assert storm_policy(cfg) == StormPolicy(4, 600.0, 3)


def test_the_old_hang_limit_is_the_default_of_the_no_progress_limit() -> None:
    assert storm_policy(config_from({"TRAINGUARD_MAX_HANGS_WITHOUT_PROGRESS": "5"})).no_progress == 5
    assert storm_policy(config_from({"TRAINGUARD_MAX_HANGS_WITHOUT_PROGRESS": "5",
                                     "TRAINGUARD_STORM_NO_PROGRESS": "2"})).no_progress == 2


@pytest.mark.parametrize(("env", "named"), [
    ({"TRAINGUARD_SUSPECT_AT_ONCE": "hang,gremlins"}, "gremlins"),
    ({"TRAINGUARD_SUSPECT_LIMIT": "two"}, "suspect_limit"),
    ({"TRAINGUARD_STORM_WINDOW": "soon"}, "storm_window"),
    ({"TRAINGUARD_STORM_RESTARTS": "-1"}, "storm_restarts = -1"),
])
def test_a_bad_setting_is_named_with_its_value(env: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        config_from(env)


def test_a_corrupt_line_is_reported_and_left_out_never_a_suspect(tmp_path: Path) -> None:
    suspects.record(tmp_path, Suspicion("node2", "node_fail", NOW, "7"))
    with (journal.folder(tmp_path) / "node9.jsonl").open("a") as f:
        f.write('{"v": 1, "kind": "suspect", "at": 1800000000, "node": "node2", "cau\n[1, 2]\n')
    found, problems = suspects.read(tmp_path)
    assert [s.node for s in found] == ["node2"]
    assert len(problems) == 2 and all("node9.jsonl" in p for p in problems)
    assert suspects.to_exclude(tmp_path, NOW, POLICY) == []   # one node_fail: not yet


def test_an_unreadable_record_excludes_nothing(tmp_path: Path) -> None:
    journal.folder(tmp_path).mkdir()
    (journal.folder(tmp_path) / "node1.jsonl").mkdir()   # a folder where a file should be
    assert suspects.to_exclude(tmp_path, NOW, POLICY) == []
    assert "cannot read" in suspects.read(tmp_path)[1][0]


def test_a_record_others_could_have_written_is_left_out(tmp_path: Path) -> None:
    suspects.record(tmp_path, Suspicion("node2", "hang", NOW, "7", 1))
    path, = journal.folder(tmp_path).glob("*.jsonl")
    path.chmod(0o666)
    assert suspects.to_exclude(tmp_path, NOW, POLICY) == []
    assert "writable by others (mode 666): left out" in suspects.read(tmp_path)[1][0]
    path.chmod(0o644)
    assert suspects.to_exclude(tmp_path, NOW, POLICY) == ["node2"]


def _append_many(run_dir: str, node: str) -> None:
    for i in range(200):
        suspects.record(Path(run_dir), Suspicion(node, "rank_died", NOW + i, "7", i, "x" * 200))


def test_concurrent_writers_leave_only_whole_lines(tmp_path: Path) -> None:
    procs = [multiprocessing.get_context("spawn").Process(target=_append_many, args=(str(tmp_path), f"n{i}"))
             for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    found, problems = suspects.read(tmp_path)
    assert problems == () and len(found) == 800


def test_five_restarts_in_the_window_are_a_storm() -> None:
    policy = StormPolicy(restarts=5, window=1800.0, no_progress=0)
    history = [Restart(NOW - 1700 + 300 * i, "7", "inplace", "hang", "node2", 100 * i) for i in range(5)]
    storm = restarts.storm(history, NOW, policy)
    assert storm is not None and storm.reason == "5 restarts in 30 min"
    assert restarts.storm(history, NOW + 200, policy) is None   # the first one left the window


def test_three_restarts_without_the_checkpoint_advancing_are_a_storm() -> None:
    policy = StormPolicy(restarts=0, window=1800.0, no_progress=3)
    steps = [100, 300, 300, 300]
    history = [Restart(NOW - 1000 * (4 - i), "7", "requeue", "node_fail", "node1", s)
               for i, s in enumerate(steps)]
    assert restarts.storm(history[:3], NOW, policy) is None
    storm = restarts.storm(history, NOW, policy)
    assert storm is not None and "3 restarts without the checkpoint step advancing" in storm.reason
    assert [r.step for r in storm.history] == [300, 300, 300]
    assert restarts.storm([*history, Restart(NOW, "8", "resubmit", "hang", "", 400)], NOW, policy) is None


def test_hostlists_in_slurms_compressed_form_are_expanded() -> None:
    assert hostlist.expand("node[1-3,07],gpu01") == ["node1", "node2", "node3", "node07", "gpu01"]
    with pytest.raises(ValueError, match="bad host range"):
        hostlist.expand("node[a-b]")


def test_the_in_place_plan_keeps_suspects_out_or_says_there_are_not_enough() -> None:
    verdicts = suspects.judge([Suspicion("node2", "hang", NOW, "7", 5)], NOW, POLICY)
    ok = plan.in_place(["node1", "node2", "node3"], 2, verdicts)
    assert (ok.use, ok.exclude, ok.spares_left, ok.enough) == (("node1", "node3"), ("node2",), 0, True)
    short = plan.in_place(["node1", "node2"], 2, verdicts)
    assert not short.enough and short.use == () and "only 1 of the allocation's 2" in short.why


def test_excluding_that_would_leave_too_few_partition_nodes_is_refused() -> None:
    verdicts = suspects.judge([Suspicion("node2", "hang", NOW, "7", 5)], NOW, POLICY)
    nodes = [("node1", "idle"), ("node2", "mix"), ("node3", "drain"), ("node4", "down*")]
    assert plan.for_partition(nodes, 1, verdicts).exclude == ("node2",)
    refused = plan.for_partition(nodes, 2, verdicts)
    assert refused.exclude == () and "leave 1 usable node of the partition's 4" in refused.why


def test_the_summary_says_what_happened_and_what_was_done() -> None:
    fault = Suspicion("node2", "hang", NOW - 240, "7", 41200, "rank 3, in all_reduce")
    text = summary.summarize(Restart(NOW, "7", "inplace", "hang", "node2", 41000), fault,
                             summary.Placement(("node2",), ("node1", "node3"), 1))
    assert text.startswith("node2 stopped the run at step 41,200 (rank 3, in all_reduce); node2 excluded; "
                           "training resumed at ")
    assert text.endswith(" on node1,node3 from step 41,000, 4 min 00 s after the fault; 1 spare left")


def test_the_summary_speaks_for_a_failure_recorded_twice_with_its_detail() -> None:
    hang = Suspicion("node2", "hang", NOW - 30, "7", 500, "rank 1, its peers waiting in all_reduce")
    again = Suspicion("node2", "hang", NOW - 20, "7", 500)            # the template's note of it
    older = Suspicion("node3", "rank_died", NOW - 900, "7", 100, "rank 2")
    assert summary.newest_suspicion([hang, again, older], "7", "node2") == hang
    assert summary.newest_suspicion([hang, again, older], "7", "node3,node2") == hang
    assert summary.newest_suspicion([hang, again, older], "8", "") is None


def test_cli_note_plan_restart_for_an_in_place_restart(tmp_path: Path) -> None:
    run = str(tmp_path)
    assert answer(cli("note", "--run-dir", run, "--job", "7", "--cause", "hang", "--nodes", "node2",
                      "--step", "41200", "--detail", "rank 3, in all_reduce")) == {"noted": "node2"}
    got = answer(cli("plan", "--run-dir", run, "--allocation", "node[1-3]", "--need", "2", "--job", "7"))
    assert got["exclude"] == "node2" and got["use"] == "node1,node3"
    assert (got["spares_left"], got["enough"]) == ("0", "yes")
    proc = cli("restart", "--run-dir", run, "--job", "7", "--kind", "inplace", "--cause", "hang",
               "--node", "node2", "--step", "41000")
    assert proc.returncode == 0, proc.stderr
    said = answer(proc)["summary"]
    assert said.startswith("node2 stopped the run at step 41,200 (rank 3, in all_reduce); node2 excluded")
    assert "on node1,node3 from step 41,000" in said and said.endswith("0 spares left")
    assert (journal.folder(tmp_path) / "summary.txt").read_text() == said + "\n"
    shown = cli("show", "--run-dir", run).stdout
    assert "node2 suspect: hang at step 41,200 (rank 3, in all_reduce), job 7" in shown
    assert "excluded now: node2: hang at step 41,200" in shown


def test_cli_restart_storm_exits_6_with_the_history(tmp_path: Path) -> None:
    codes = []
    for i in range(5):
        cli("note", "--run-dir", str(tmp_path), "--job", f"{10 + i}", "--cause", "node_fail",
            "--nodes", f"node{i % 2 + 1}", "--step", str(100 * i))
        proc = cli("restart", "--run-dir", str(tmp_path), "--job", f"{10 + i}", "--kind", "requeue",
                   "--cause", "node_fail", "--node", f"node{i % 2 + 1}", "--step", str(100 * i))
        codes.append(proc.returncode)
    assert codes == [0, 0, 0, 0, 6]
    got = answer(proc)
    assert got["storm"] == "5 restarts in 30 min"
    history = [line for line in proc.stdout.splitlines() if line.startswith("history=")]
    assert len(history) == 5 and "requeue  node_fail  node node1" in history[0] and "step 400" in history[4]
    assert "restart storm: 5 restarts in 30 min; the chain ends here" in got["summary"]
    assert [e.fields["reason"] for e in journal.read(tmp_path).of("storm")] == ["5 restarts in 30 min"]


def test_cli_bad_input_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    bad = cli("plan", "--run-dir", str(tmp_path), "--allocation", "node[x]", "--need", "2")
    assert bad.returncode == 2 and "--allocation 'node[x]': bad host range" in bad.stderr
    assert "Traceback" not in bad.stderr
    zero = cli("plan", "--run-dir", str(tmp_path), "--allocation", "node1", "--need", "0")
    assert zero.returncode == 2 and "expected a whole number >= 1" in zero.stderr
    setting = cli("show", "--run-dir", str(tmp_path), env={"TRAINGUARD_SUSPECT_LIMIT": "many"})
    assert setting.returncode == 2 and "suspect_limit = 'many'" in setting.stderr


def test_cli_plan_with_a_corrupt_record_warns_and_excludes_nothing_it_cannot_read(tmp_path: Path) -> None:
    journal.folder(tmp_path).mkdir()
    (journal.folder(tmp_path) / "node1.jsonl").write_text('{"kind": "suspect", "node": "node2", "cause": "ha')
    proc = cli("plan", "--run-dir", str(tmp_path), "--allocation", "node[1-2]", "--need", "2")
    assert proc.returncode == 0 and answer(proc)["exclude"] == "" and answer(proc)["enough"] == "yes"
    assert "node1.jsonl:1: not a whole record" in proc.stderr


def test_cli_exclude_asks_the_real_partition_and_refuses_to_leave_too_few(slurm_cluster: Path, tmp_path: Path
                                                                        ) -> None:
    """The dev cluster's `debug` partition holds node1 and node2."""
    run = str(tmp_path)
    assert answer(cli("exclude", "--run-dir", run, "--partition", "debug", "--need", "1")) == {
        "exclude": "", "why": "no suspect node"}
    cli("note", "--run-dir", run, "--job", "7", "--cause", "hang", "--nodes", "node2", "--step", "9")
    env = {"SLURM_CONF": str(slurm_cluster)}
    assert answer(cli("exclude", "--run-dir", run, "--partition", "debug", "--need", "1", env=env)
                  )["exclude"] == "node2"
    refused = answer(cli("exclude", "--run-dir", run, "--partition", "debug", "--need", "2", env=env))
    assert refused["exclude"] == ""
    assert "leave 1 usable node of the partition's 2, and the job needs 2" in refused["why"]
    unknown = answer(cli("exclude", "--run-dir", run, "--partition", "nosuch", "--need", "1", env=env))
    assert unknown["exclude"] == "" and "not excluding: cannot tell how many nodes" in unknown["why"]


def test_the_policy_a_record_names_is_its_newest_and_the_defaults_stand_in_saying_so() -> None:
    from trainguard.recovery.policy import NO_POLICY, recorded, to_fields
    from trainguard.recovery.restarts import StormPolicy
    from trainguard.recovery.suspects import SuspectPolicy

    old = to_fields(SuspectPolicy(limit=3), StormPolicy(restarts=4))
    new = to_fields(SuspectPolicy(limit=0), StormPolicy(restarts=2, window=600.0))
    found = recorded([{"kind": "suspect", "policy": old}, {"kind": "restart", "policy": new},
                      {"kind": "plan"}])
    assert (found.suspect.limit, found.storm.restarts, found.storm.window, found.source) == (0, 2, 600.0, "")
    bare = recorded([{"kind": "suspect"}])
    assert bare.suspect == SuspectPolicy() and bare.storm == StormPolicy() and bare.source == NO_POLICY
    broken = recorded([{"kind": "restart", "policy": {"storm_restarts": "many"}}])
    assert broken.storm == StormPolicy() and broken.source.startswith("the record's policy is unreadable")


def cli_bytes(*args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """The CLI with raw bytes in argv, as a batch script passes a Latin-1 path on."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINGUARD_", "SLURM_JOB"))}
    return subprocess.run([sys.executable, "-m", "trainguard.recovery", *args], capture_output=True,
                          env=full, timeout=60, check=False)


@pytest.mark.parametrize(("detail", "shown"), [
    (b"/data/caf\xe9/train.py", "/data/caf\\xe9/train.py"),     # Latin-1
    (b"rank 3 \xff\xfe in all_reduce", "rank 3 \\xff\\xfe in all_reduce"),
    (b"x\x80y \xc0\xaf", "x\\x80y \\xc0\\xaf"),                # a lone continuation, an overlong
    (b"clear \x1b[2J\nstorm=forged", "clear \\x1b[2J\\x0astorm=forged"),  # escapes, a forged key
])
def test_a_detail_with_bytes_that_are_not_utf8_is_recorded_and_restart_still_answers(
        tmp_path: Path, detail: bytes, shown: str) -> None:
    run = str(tmp_path).encode()
    noted = cli_bytes(b"note", b"--run-dir", run, b"--job", b"7", b"--cause", b"hang", b"--nodes",
                      b"node2", b"--step", b"41200", b"--detail", detail)
    assert noted.returncode == 0 and b"Traceback" not in noted.stderr, noted.stderr
    proc = cli_bytes(b"restart", b"--run-dir", run, b"--job", b"7", b"--kind", b"inplace", b"--cause",
                     b"hang", b"--node", b"node2", b"--step", b"41000")
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.decode().splitlines()
    summaries = [line for line in lines if line.startswith("summary=")]
    assert len(summaries) == 1 and not any(line.startswith("storm=") for line in lines), lines
    assert shown in summaries[0]
    written = (journal.folder(tmp_path) / "summary.txt").read_text()
    assert shown in written and written.count("\n") == 1
    # Every later reader of the record too: show, dump (the watchdog's), and the next restart.
    assert shown.split()[0] in cli("show", "--run-dir", str(tmp_path)).stdout
    dumped = cli("dump", "--run-dir", str(tmp_path))
    assert dumped.returncode == 0 and shown in dumped.stdout.encode().decode("unicode_escape")


def test_a_record_line_holding_a_lone_surrogate_is_read_and_shown_with_the_byte_visible(
        tmp_path: Path) -> None:
    folder = journal.folder(tmp_path)
    folder.mkdir()
    # An earlier version wrote the surrogate of a Latin-1 byte as JSON "\udce9"; a hand edit a raw byte.
    (folder / "node1.jsonl").write_bytes(
        b'{"v": 1, "kind": "suspect", "at": %d, "node": "node2", "cause": "hang", "job": "7", '
        b'"step": 5, "detail": "in caf\\udce9.py", "text": "x"}\n'
        b'{"v": 1, "kind": "suspect", "at": %d, "node": "node3", "cause": "hang", "job": "8", '
        b'"step": 6, "detail": "in r\xe9sum\xe9.py", "text": "y"}\n' % (int(NOW), int(NOW)))
    found, problems = suspects.read(tmp_path)
    assert problems == () and [s.detail for s in found] == ["in caf\\xe9.py", "in r\\xe9sum\\xe9.py"]
    proc = cli("restart", "--run-dir", str(tmp_path), "--job", "7", "--kind", "inplace", "--cause", "hang",
               "--node", "node2", "--step", "4")
    assert proc.returncode == 0 and "in caf\\xe9.py" in answer(proc)["summary"], proc.stderr


def test_a_restart_whose_summary_cannot_be_written_still_answers_not_a_storm(tmp_path: Path) -> None:
    folder = journal.folder(tmp_path)
    folder.mkdir()
    (folder / summary.SUMMARY_FILE).mkdir()      # the summary's name is taken by a folder
    proc = cli("restart", "--run-dir", str(tmp_path), "--job", "7", "--kind", "inplace", "--cause", "hang",
               "--node", "node2", "--step", "4")
    assert proc.returncode == 0 and "warning: cannot record the restart" in proc.stderr, proc.stderr
    assert answer(proc)["summary"].startswith("the run stopped (hang on node2)")


def test_the_why_line_stays_bounded_and_counts_when_every_node_is_suspect(tmp_path: Path) -> None:
    nodes = [f"node{i}" for i in range(1, 65)]
    causes = ("hang", "rank_died", "node_fail", "precheck")
    now = time.time()    # the CLI judges by its own clock
    for i in range(2000):    # 2000 suspicions over 64 nodes, each a different failure
        suspects.record(tmp_path, Suspicion(nodes[i % 64], causes[i % 4], now - 3000 + i,
                                            str(i), i))
    proc = cli("plan", "--run-dir", str(tmp_path), "--allocation", "node[1-64]", "--need", "8", "--job", "7",
               env={"TRAINGUARD_SUSPECT_WINDOW": "30d"})
    assert proc.returncode == 0, proc.stderr
    got = answer(proc)
    assert got["enough"] == "no" and got["use"] == ""
    for line in proc.stdout.splitlines():
        assert len(line.encode()) <= 1024 or line.startswith("exclude="), line[:200]
    why = got["why"]
    assert why.startswith("only 0 of the allocation's 64 nodes are not suspect (64 nodes (16 hang, "
                          "16 a rank died, 16 node failure, 16 failed the check before a restart): "
                          "node[1-5] and 59 more")
    assert "59 more (`python -m trainguard.recovery show" in why and "the training needs 8" in why
    # One node, many suspicions: counted, with the last step.
    verdict = next(v for v in suspects.judge(suspects.read(tmp_path)[0], now, SuspectPolicy(window=1e6))
                   if v.node == "node2")
    assert verdict.why().startswith("node2: 32 ranks died") and len(verdict.why()) < 200
    assert verdict.why().endswith(f"last at step {max(s.step for s in verdict.suspicions):,}")
    # The requeue's exclusion over a 10 000-node partition: the same bound.
    many = [Suspicion(f"gpu{i:05d}", "hang", NOW - 10, "7", i) for i in range(10_000)]
    verdicts = suspects.judge(many, NOW, POLICY)
    refused = plan.for_partition([(f"gpu{i:05d}", "idle") for i in range(10_000)], 8, verdicts)
    assert refused.exclude == () and len(refused.why) < 1024, len(refused.why)
    assert "10000 nodes (10000 hang): gpu[00000-00004] and 9995 more" in refused.why
    assert "not excluding gpu[00000-" in refused.why


def test_the_summary_names_many_excluded_nodes_as_a_bounded_host_list() -> None:
    many = tuple(f"node{i}" for i in range(1, 2001))
    text = summary.summarize(Restart(NOW, "7", "requeue", "hang", "", 5), None, summary.Placement(many))
    assert "node[1-2000] excluded" in text and len(text) < 400
    scattered = tuple(f"n{i}" for i in range(1, 6000, 2))
    text = summary.summarize(Restart(NOW, "7", "requeue", "hang", "", 5), None, summary.Placement(scattered))
    assert len(text) < 600 and "more excluded" in text
    assert hostlist.compress(["node1", "node2", "node3", "node7", "login"]) == "node[1-3,7],login"
    assert hostlist.expand(hostlist.compress(["gpu01", "gpu02", "gpu10"])) == ["gpu01", "gpu02", "gpu10"]


BAD_NUMBERS = ["nan", "inf", "-inf", "1e400", "-5", "abc", ""]
RUN = ("--run-dir", "/nonexistent-run")
ARGUMENTS = [   # (module, the command's other arguments, the argument, values that must be refused)
    ("trainguard.recovery", ("note", *RUN, "--job", "7", "--cause", "hang", "--nodes", "n1"), "--at",
     [*BAD_NUMBERS, "0", "99999999999"]),
    ("trainguard.recovery", ("note", *RUN, "--job", "7", "--cause", "hang", "--nodes", "n1"), "--step",
     [*BAD_NUMBERS, "-2", "1.5"]),
    ("trainguard.recovery", ("restart", *RUN, "--job", "7", "--kind", "inplace", "--cause", "hang"), "--step",
     [*BAD_NUMBERS, "-2"]),
    ("trainguard.recovery", ("plan", *RUN, "--allocation", "n1"), "--need", [*BAD_NUMBERS, "0"]),
    ("trainguard.recovery", ("exclude", *RUN, "--partition", "p"), "--need", [*BAD_NUMBERS, "0"]),
    ("trainguard.recovery.inplace", ("reap", "--job", "7", "--pid", "1", "--exit-file", "/x"), "--grace",
     [*BAD_NUMBERS, "0", "1e9"]),
    ("trainguard.recovery.inplace", ("reap", "--job", "7", "--exit-file", "/x"), "--pid",
     [*BAD_NUMBERS, "0"]),
    ("trainguard.recovery.inplace", ("reap", "--pid", "1", "--exit-file", "/x"), "--job",
     ["7.0", "abc", "", "-1", "7;rm"]),
    ("trainguard.recovery.inplace", ("after", *RUN, "--job", "7", "--allocation", "n1", "--need", "1",
                                     "--job-nodes", "1", "--partition", "p"), "--rc",
     [*BAD_NUMBERS, "256"]),
    ("trainguard.recovery.inplace", ("after", *RUN, "--job", "7", "--allocation", "n1", "--job-nodes", "1",
                                     "--partition", "p", "--rc", "1"), "--need", [*BAD_NUMBERS, "0"]),
    ("trainguard.recovery.inplace", ("after", *RUN, "--job", "7", "--allocation", "n1", "--need", "1",
                                     "--job-nodes", "1", "--partition", "p", "--rc", "1"), "--max",
     BAD_NUMBERS),
    ("trainguard.recovery.requeue", ("--exclude", ""), "--job", ["abc", "", "7.1", "-3", "--all"]),
]


@pytest.mark.parametrize(("module", "others", "name", "values"), ARGUMENTS,
                         ids=[f"{m.rsplit('.', 1)[-1]}-{o[0]}-{n}" for m, o, n, _ in ARGUMENTS])
def test_every_recovery_cli_argument_out_of_range_exits_2_without_a_traceback(
        module: str, others: tuple[str, ...], name: str, values: list[str]) -> None:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINGUARD_", "SLURM_"))}
    for value in values:
        proc = subprocess.run([sys.executable, "-m", module, *others, f"{name}={value}"], capture_output=True,
                              text=True, env=full, timeout=60, check=False)
        assert proc.returncode == 2, (name, value, proc.returncode, proc.stderr[-500:])
        assert "Traceback" not in proc.stderr, (name, value, proc.stderr)
        assert f"argument {name}" in proc.stderr, (name, value, proc.stderr)
