"""The pure parts of the restart decisions: what counts as a fault, which ranks stopped, and
when Slurm itself requeues a preempted job (trainguard.recovery.inplace, trainguard.recovery.requeue)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from trainguard.heartbeat import Heartbeat
from trainguard.recovery.inplace import (
    Failure,
    Situation,
    decide,
    died_under_an_exception,
    fault_cause,
    hung,
    stopped_ranks,
)
from trainguard.recovery.inplace_io import Recovery, kv, recovery_cli
from trainguard.recovery.requeue import release, slurm_requeues_preemption
from trainguard.recovery.step_end import reap
from trainguard.slurm.run import Reply
from trainguard.stopping.exits import write_exit_file

HUNG_WHY = "hung at step 61 (train) with no progress for 2.2 s; NO checkpoint saved"


def test_a_hang_or_a_dead_rank_is_a_fault_only_when_no_stop_was_asked_for() -> None:
    assert fault_cause(140, HUNG_WHY, signalled=False) == "hang"
    assert fault_cause(137, "", signalled=False) == "rank_died"
    assert fault_cause(7, "node node2 failed the check", signalled=False) == "precheck"
    # A time limit, a preemption, a scancel: the batch shell was signalled: the queue's business.
    assert fault_cause(140, HUNG_WHY, signalled=True) is None
    assert fault_cause(137, "", signalled=True) is None
    # Answers, never restarted in place: a save for a requeue, done, an exception, NaN, a storm.
    # ... and a code of the training's own, the same on any node (2: python could not open the script).
    answers = ((140, "checkpoint saved at step 9"), (0, ""), (1, ""), (2, ""), (3, ""), (5, ""), (6, ""),
               (143, ""))
    for rc, why in answers:
        assert fault_cause(rc, why, signalled=False) is None, rc


def beat(rank: int, phase: str, host: str, step: int, job: str = "7") -> Heartbeat:
    return Heartbeat(rank, step, phase, 0.0, host=host, job_id=job)


def test_the_ranks_neither_hung_nor_done_are_the_stopped_ones_of_this_job_only() -> None:
    beats = [beat(0, "hung", "node1", 61), beat(1, "train", "node2", 49),
             beat(2, "train", "node3", 55, job="6")]
    stopped = stopped_ranks(beats, "7")
    assert stopped is not None and stopped.nodes == ("node2",) and stopped.step == 49
    assert hung(beats, "7") and not hung(beats, "6")
    assert stopped_ranks([beat(0, "done", "node1", 9)], "7") is None


def test_exit_1_is_a_dead_rank_when_a_rank_never_said_it_stopped_and_an_answer_when_all_raised() -> None:
    # rank 1 killed outright (still "train"); rank 0 raised when its collective broke.
    killed = [beat(0, "stopping", "node1", 12), beat(1, "train", "node2", 12)]
    assert died_under_an_exception(1, False, killed, "7")
    stopped = stopped_ranks(killed, "7")
    assert stopped is not None and stopped.nodes == ("node2",)     # not the peer that only raised
    # A bug raises on every rank: the training's own answer, not restarted.
    bug = [beat(0, "stopping", "node1", 12), beat(1, "stopping", "node2", 12)]
    assert not died_under_an_exception(1, False, bug, "7") and stopped_ranks(bug, "7") is None
    assert not died_under_an_exception(1, True, killed, "7")       # a stop was asked for
    assert not died_under_an_exception(140, False, killed, "7")    # not an exception


def test_key_value_lines_keep_a_value_with_equals_signs() -> None:
    assert kv("use=node1,node3\nwhy=a=b\nnoise\n") == {"use": "node1,node3", "why": "a=b"}


def test_slurm_requeues_a_preempted_job_itself_from_24_11_on() -> None:
    job = "JobId=5 Partition=low PreemptTime=2026-11-26T16:00:00 ExcNodeList=(null)"
    part = "PartitionName=low PreemptMode=REQUEUE GraceTime=20"
    assert release("slurm-wlm 24.11.5") == (24, 11) and release("slurm 26.05.0") == (26, 5)
    assert slurm_requeues_preemption(job, part, (24, 11)) and slurm_requeues_preemption(job, part, (26, 5))
    assert not slurm_requeues_preemption(job, part, (22, 5))                  # 22.05: ours
    assert not slurm_requeues_preemption(job.replace("PreemptTime=2026-11-26T16:00:00", "PreemptTime=None"),
                                         part, (26, 5))                       # not preempted
    assert not slurm_requeues_preemption(job, "PartitionName=low PreemptMode=CANCEL", (26, 5))
    assert not slurm_requeues_preemption(job, part, None)                     # unknown: ours


def test_a_node_down_not_responding_or_gone_from_the_job_failed_and_is_said_so() -> None:
    from trainguard.recovery.nodefail import lost_nodes, state_words
    assert state_words("down*") == ("down", "not responding")
    assert state_words("mix*") == ("not responding",)
    assert state_words("alloc") == () and state_words("drain") == ()   # drained: still answers
    lost = lost_nodes(["node1", "node2", "node3"], ["node1", "node3"],
                      {"node1": "mix", "node2": "down*", "node3": "idle*"})
    assert lost.nodes == ("node2", "node3") and lost.remaining == ("node1",)
    assert lost.details == ("NODE_FAIL: down, not responding, removed from the job",
                            "NODE_FAIL: not responding")
    # Slurm could not be asked: no node is called failed on doubt.
    assert lost_nodes(["node1", "node2"], None, {}).nodes == ()


def test_the_failure_is_at_the_furthest_ranks_step_and_the_failed_nodes_last_heartbeat() -> None:
    from trainguard.recovery.nodefail import when
    beats = [Heartbeat(0, 66, "hung", 110.0, host="node1", job_id="7"),
             Heartbeat(1, 49, "train", 100.0, host="node2", job_id="7"),
             Heartbeat(1, 400, "train", 50.0, host="node2", job_id="6")]
    assert when(beats, "7", ["node2"]) == (66, 100.0)
    assert when([], "7", ["node2"]) == (-1, None)


def test_a_failed_node_is_left_out_whatever_the_policy_and_only_when_the_partition_has_room() -> None:
    from trainguard.recovery.plan import for_partition, in_place
    plan = in_place(["node1", "node2", "node3"], 2, [], down=["node2"])
    assert plan.enough and plan.use == ("node1", "node3") and plan.exclude == ("node2",)
    assert plan.spares_left == 0 and "node2: failed" in plan.why
    assert not in_place(["node1", "node2"], 2, [], down=["node2"]).enough
    nodes = [("node1", "mix"), ("node2", "down*"), ("node3", "idle")]
    assert for_partition(nodes, 2, [], down=["node2"]).exclude == ("node2",)
    # Too few nodes left even without it: the job waits for the node rather than for ever.
    assert for_partition(nodes[:2], 2, [], down=["node2"]).exclude == ()


def test_a_restart_the_record_could_not_take_still_relaunches_and_only_a_storm_ends_it(
        tmp_path: Path) -> None:
    def crashing(code: int) -> Recovery:    # the real CLI, except that `restart` fails with `code`
        def recovery(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
            if argv[0] == "restart":
                return subprocess.CompletedProcess(list(argv), code, "", "Traceback: UnicodeEncodeError\n")
            return recovery_cli(argv)
        return recovery

    situation = Situation(tmp_path, "7", "node[1-3]", 2, 3, "spare", 0, 3)
    failure = Failure("hang", ("node2",), 41200)
    for code in (1, 2, 120):
        decision = decide(situation, failure, 41000, crashing(code))
        assert (decision.action, decision.code, decision.use) == ("relaunch", 0, "node1,node3"), code
    assert decide(situation, failure, 41000, crashing(6)).action == "exit"
    requeue = decide(Situation(tmp_path, "7", "node[1-3]", 2, 3, "spare", 3, 3), failure, 41000, crashing(1))
    assert requeue.action == "requeue" and requeue.code == 140


def test_reap_ends_only_the_step_that_wrote_the_exit_code_never_a_sidecar(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srun = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])   # the training's srun
    steps = ["7.0", "7.1", "7.2", "7.batch", "7.extern"]     # a sidecar, the training, a later sidecar
    calls: list[list[str]] = []

    def slurm(argv: Sequence[str]) -> Reply:
        calls.append(list(argv))
        if argv[0] == "scancel":
            steps.remove(argv[-1])
            if argv[-1] == "7.1":
                srun.kill()
                srun.wait()
        return Reply(tuple(argv), "\n".join(steps) + "\n", "")

    exit_file = tmp_path / "exit"
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_STEP_ID", "1")
    write_exit_file(exit_file, 1, "hung at step 4")
    assert exit_file.read_text().splitlines() == ["1", "hung at step 4", "step=7.1"]
    said: list[str] = []
    reap("7", srun.pid, exit_file, 0.1, said.append, slurm)
    assert [c for c in calls if c[0] == "scancel"] == [["scancel", "--signal=KILL", "7.1"]]
    assert steps == ["7.0", "7.2", "7.batch", "7.extern"], said
    # An exit file that names no step (an older trainguard), or another job's: nothing is ended.
    for text in ("1\nhung\n", "1\nhung\nstep=8.1\n", "1\nhung\nstep=7.batch\n"):
        exit_file.write_text(text)
        # A step that ends by itself a moment later; reaped by a thread, so its pid goes away.
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
        threading.Thread(target=other.wait, daemon=True).start()
        calls.clear()
        said.clear()
        reap("7", other.pid, exit_file, 0.1, said.append, slurm)
        assert not [c for c in calls if c[0] == "scancel"], text
        assert any("cannot tell which step is the training's; not ending any" in s for s in said), said


@pytest.mark.parametrize("byte", [b"\\udce9", b"\xe9", b"\xff\xfe"])
def test_a_hang_detail_with_a_byte_that_is_not_utf8_restarts_in_place_never_a_storm(
        tmp_path: Path, byte: bytes) -> None:
    """The attack of issue 35 item 6, as the template runs `after` (no Slurm: its questions fail
    and are taken as "no node lost"): the hang path recorded the frozen rank's node with a
    detail naming a Latin-1 source path, once in JSON as "\\udce9" (an earlier trainguard), once
    as the raw byte (a hand edit or another writer)."""
    run, beats = tmp_path / "run", tmp_path / "beats"
    (run / "recovery").mkdir(parents=True)
    beats.mkdir()
    now = time.time()
    (run / "recovery" / "node1.jsonl").write_bytes(
        b'{"v": 1, "kind": "suspect", "at": %.3f, "node": "node2", "cause": "hang", "job": "7", "step": 12, '
        b'"detail": "rank 1, in all_reduce (/data/caf%s/train.py:40)", "text": "node2 suspect"}\n'
        % (now - 5, byte))
    for rank, phase, host in ((0, "hung", "node1"), (1, "train", "node2")):
        (beats / f"rank-{rank}.json").write_text(json.dumps(
            {"rank": rank, "step": 12, "phase": phase, "time": now - 5, "host": host, "job_id": "7",
             "frames": ["/data/caf\udce9/train.py:40 (all_reduce)"], "restart": 0, "inplace": 0}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINGUARD_", "SLURM_"))}
    done = subprocess.run(
        [sys.executable, "-m", "trainguard.recovery.inplace", "after", "--run-dir", str(run), "--job", "7",
         "--allocation", "node[1-3]", "--need", "2", "--job-nodes", "3", "--partition", "spare",
         "--rc", "140", "--why", "hung at step 12 (train); NO checkpoint saved", "--heartbeats", str(beats)],
        capture_output=True, env={**env, "SLURM_CONF": str(tmp_path / "no-slurm.conf")}, timeout=120,
        check=False)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    answer = kv(done.stdout.decode())
    assert (answer["action"], answer["code"], answer["use"]) == ("relaunch", "0", "node1,node3"), answer
    assert "caf\\xe9" in answer["summary"] or "caf\\xff" in answer["summary"], answer
