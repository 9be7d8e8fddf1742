"""The pure parts of the restart decisions: what counts as a fault, which ranks stopped, and
when Slurm itself requeues a preempted job (trainguard.recovery.inplace, trainguard.recovery.requeue)."""
from __future__ import annotations

from trainguard.heartbeat import Heartbeat
from trainguard.recovery.inplace import died_under_an_exception, fault_cause, hung, stopped_ranks
from trainguard.recovery.inplace_io import kv
from trainguard.recovery.requeue import release, slurm_requeues_preemption

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
