"""Why a job ended, on the real dev cluster with slurmdbd: a memory kill, a time limit, a
node failure (resubmitted excluding the node), a failure at once (not resubmitted), a cancel
by the owner, lifecycle notices in a real mailbox, and accounting unreachable.

The slow endings (the time limit takes 60-90 s, a node failure ~30 s) are all submitted when
the module starts, so their waits overlap with each other and with the quick tests."""
from __future__ import annotations

import getpass
import json
import os
import re
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.checks.conftest import tick, write_config
from tests.helpers import accounted, job_state, left_the_queue, privileged, sh, wait_for
from tests.notifiers.fakes import SmtpServer
from watchdogs.alerts import build_sink
from watchdogs.result import Status
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

pytestmark = pytest.mark.slurm
HOG = ("import time\nblocks = []\nfor _ in range(100):\n"
       "    blocks.append(bytearray(20 * 2**20)); time.sleep(0.05)\nprint('survived')\n")
SECRET = "hf_" + "s3cr3t" * 5
CRASH = ("printf 'step 40 loss 2.1\\nTraceback (most recent call last):\\n  File train.py, line 9\\n"
         "ValueError: loss is nan\\n' >&2; exit 1")


@dataclass
class Ended:
    folder: Path
    prefix: str
    ids: dict[str, str]


def submit(name: str, *args: str, wrap: str) -> str:
    return sh("sbatch", "--parsable", f"--job-name={name}", *args, "--wrap", wrap).strip().split(";")[0]


def dev_cluster(command: str, node: str) -> None:
    """Stop or start a node's slurmd: root's daemon, so through tests/privileged.py."""
    privileged(command, str(Path(os.environ["SLURM_CONF"]).parent), node)


@pytest.fixture(scope="module")
def ended(slurm_cluster: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ended]:
    folder = tmp_path_factory.mktemp("endings")
    prefix = f"wdend{os.getpid()}"
    (folder / "hog.py").write_text(HOG)
    (folder / "work" / "logs").mkdir(parents=True)
    ids = {
        "oom": submit(f"{prefix}-oom", "--mem=100M", f"--output={folder}/%x-%j.out",
                      wrap=f"python3 {folder}/hog.py"),
        "timeout": submit(f"{prefix}-timeout", "--time=1", "--output=/dev/null", wrap="sleep 300"),
        "fail": submit(f"{prefix}-fail", f"--output={folder}/%x-%j.out",
                       wrap=f"echo step 10 loss 0.3; echo HF_TOKEN={SECRET}; echo boom >&2; exit 1"),
        # Off node2, which stops below: a cancel on a stopped node never completes.
        "cancel": submit(f"{prefix}-cancel", "--output=/dev/null", "--exclude=node2",
                         wrap=f"touch {folder}/cancel-started; sleep 300"),
        "nodefail": submit(f"{prefix}-nodefail", "--no-requeue", "-w", "node2", "--output=/dev/null",
                           wrap="sleep 300"),
        # An array task that crashes at once into `-o logs/%x-%A_%a.out`: never seen running.
        "array": submit(f"{prefix}-array", "--array=0", f"--chdir={folder}/work", "--exclude=node2",
                        "-o", "logs/%x-%A_%a.out", wrap=CRASH),
    }
    slurmd_started = node_field("node2", "SlurmdStartTime")
    stopped = False
    try:
        wait_for(lambda: job_state(ids["nodefail"]) == "RUNNING", timeout=60, what="job on node2 running")
        dev_cluster("node-stop", "node2")
        stopped = True
        # RUNNING is the controller's word at allocation: cancelled before slurmd has launched
        # it (a loaded machine, cgroups to set up), a job can stay COMPLETING for a minute.
        wait_for(lambda: (folder / "cancel-started").exists(), timeout=60, what="job to cancel started")
        sh("scancel", ids["cancel"])
        yield Ended(folder, prefix, ids)
    finally:
        # node2 first, and registered, then the cancels: a cancel sent while its slurmd is
        # down is lost when the controller has not yet marked the node down (a module that
        # ends within SlurmdTimeout, as one selected test does), and its job then stays
        # COMPLETING, node2 with it.
        if stopped:
            dev_cluster("node-start", "node2")
            wait_for(lambda: node_field("node2", "SlurmdStartTime") != slurmd_started, timeout=90,
                     what="node2's slurmd registered again")
        sh("scancel", *ids.values(), check=False)
        wait_for(lambda: node_field("node2", "State") == "IDLE", timeout=180,
                 what="node2 back in service (State=IDLE)")


def node_field(node: str, field: str) -> str:
    """One field of `scontrol show node` ('' when the controller does not answer)."""
    out = sh("scontrol", "-o", "show", "node", node, check=False)
    found = re.search(rf"\b{field}=(\S*)", out)
    return found.group(1) if found else ""


def mail_channel(port: int) -> str:
    return textwrap.dedent(f"""
        [[notify]]
        name = "mail"
        type = "email"
        host = "127.0.0.1"
        port = {port}
        sender = "w@example.org"
        to = "ops@example.org"
        """)


def config(tmp_path: Path, name: str, **opts: object) -> str:
    keys = "".join(f"{k} = {json.dumps(v)}\n" for k, v in opts.items())
    return f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n{keys}'


def script(tmp_path: Path, body: str = "sleep 300") -> str:
    path = tmp_path / "train.slurm"
    path.write_text(f"#!/bin/bash\n#SBATCH --output=/dev/null\n{body}\n")
    return str(path)


def queued_named(name: str) -> list[str]:
    return sh("squeue", "-h", "--name", name, "-o", "%i").split()


def test_a_failure_at_once_is_explained_with_its_log_and_not_resubmitted(
        ended: Ended, tmp_path: Path, store: StateStore) -> None:
    name, job = f"{ended.prefix}-fail", ended.ids["fail"]
    wait_for(lambda: accounted(job), timeout=60, what="accounting has the failure")
    cfg = write_config(tmp_path, config(tmp_path, name, resubmit=script(tmp_path),
                                        output=f"{ended.folder}/%x-%j.out"))
    result = tick(cfg, store)[0]["train"]
    assert result.status is Status.CRITICAL
    assert re.match(rf"{name} \(job {job}\) failed on node\d after \d+ s: exit 1; ended "
                    r"\d{4}-\d\d-\d\d \d\d:\d\d \w+", result.summary), result.summary
    assert "Not resubmitted: it failed within 10 min 00 s of its start (fail_fast)" in result.summary
    assert queued_named(name) == []
    assert f"last lines of {ended.folder}/{name}-{job}.out:" in result.details
    assert "boom" in result.details and "HF_TOKEN=***" in result.details
    assert SECRET not in "\n".join(result.details)


def test_a_crash_alert_mails_the_traceback_from_the_real_o_file_seen_while_running(
        ended: Ended, tmp_path: Path) -> None:
    """Issue 36: `sbatch -o train-%j.out` (relative), no `output` key: Slurm's path, asked
    while the job ran, is the one tailed; the delivered mail holds the traceback's last line."""
    name, work = f"{ended.prefix}-crash", ended.folder / "work"
    # Off node2, which this module's node failure stops.
    job = submit(name, f"--chdir={work}", "--exclude=node2", "-o", "train-%j.out",
                 wrap=f"while [ ! -e {ended.folder}/go ]; do sleep 0.2; done; {CRASH}")
    ended.ids["crash"] = job  # cancelled at the module's end whatever happens
    wait_for(lambda: job_state(job) == "RUNNING", timeout=60, what="the training running")
    with SmtpServer() as smtp:
        cfg = write_config(tmp_path, config(tmp_path, name) + mail_channel(smtp.port))
        store = StateStore(cfg.scheduler.state_dir)
        try:
            assert tick(cfg, store)[0]["train"].status is Status.OK  # seen running
            (ended.folder / "go").touch()
            wait_for(lambda: accounted(job), timeout=60, what="accounting has the crash")
            results, ctx = tick(cfg, store)
            sink = build_sink(cfg, store)
            sink.handle([ItemOutcome("train", "check", results["train"], ctx.now, ctx.now)], ctx.now)
            sink.flush(ctx.now)
        finally:
            store.close()
        wait_for(lambda: smtp.received, timeout=30, what="the crash alert")
    text = " ".join(plain(smtp.received[0].message).split())
    assert f"{name} (job {job}) failed" in text, text
    assert f"last lines of {ended.folder}/work/train-{job}.out" in text, text
    assert "ValueError: loss is nan" in text, text


def test_an_array_task_never_seen_running_is_tailed_from_accountings_record(
        ended: Ended, tmp_path: Path, store: StateStore) -> None:
    """`-o logs/%x-%A_%a.out`, gone before the first look: 24.11+ from sacct StdOut, 22.05
    from the recorded sbatch line's -o, relative to the job's working folder."""
    name, job = f"{ended.prefix}-array", ended.ids["array"]
    wait_for(lambda: accounted(f"{job}_0"), timeout=60, what="accounting has the array task")
    result = tick(write_config(tmp_path, config(tmp_path, name)), store)[0]["train"]
    assert result.status is Status.CRITICAL, result.summary
    assert f"last lines of {ended.folder}/work/logs/{name}-{job}_0.out:" in result.details, result.details
    assert "ValueError: loss is nan" in result.details


def test_a_cancel_by_the_owner_says_who_and_is_not_resubmitted(
        ended: Ended, tmp_path: Path, store: StateStore) -> None:
    name, job = f"{ended.prefix}-cancel", ended.ids["cancel"]
    wait_for(lambda: accounted(job), timeout=60, what="accounting has the cancel")
    cfg = write_config(tmp_path, config(tmp_path, name, resubmit=script(tmp_path)))
    result = tick(cfg, store)[0]["train"]
    assert f"{name} (job {job}) was cancelled by {getpass.getuser()} (its owner) after " in result.summary
    assert "Not resubmitted: it was cancelled by its owner" in result.summary
    assert queued_named(name) == []


@pytest.mark.cgroup
def test_a_memory_kill_gives_peak_against_request(ended: Ended, slurm_cluster: Path, tmp_path: Path,
                                                  store: StateStore) -> None:
    name, job = f"{ended.prefix}-oom", ended.ids["oom"]
    wait_for(lambda: accounted(job), timeout=60, what="accounting has the memory kill")
    cfg = write_config(tmp_path, config(tmp_path, name, resubmit=script(tmp_path),
                                        output=f"{ended.folder}/%x-%j.out"))
    result = tick(cfg, store)[0]["train"]
    assert result.context["ending"] == "out_of_memory"
    assert "Not resubmitted: the same request would fail again; raise --mem" in result.summary
    if "ProctrackType=proctrack/cgroup" in slurm_cluster.read_text():
        # Memory enforced by the kernel (slurm/dev-cluster's default): Slurm's own state.
        assert sh("sacct", "-n", "-X", "-P", "-o", "State", "-j", job).split() == ["OUT_OF_MEMORY"]
        assert re.search(r"ran out of memory on node\d after \d+ s: (peak [\d.]+ MiB of the 100.0 "
                         r"MiB requested|the kernel killed it at its 100.0 MiB limit)",
                         result.summary), result.summary
        assert "Slurm recorded" not in result.summary or "last sample" in result.summary
        assert any("oom" in line.lower() for line in result.details), result.details
        return
    # Enforced by polling (`up --cgroup no`, OverMemoryKill): FAILED, killed by signal 9.
    peak = re.search(r"ran out of memory on node\d after \d+ s: peak ([\d.]+) MiB of the 100.0 MiB "
                     r"requested \((\d+) %\)", result.summary)
    assert peak is not None, result.summary
    # Sampled every second: the recorded peak passed the limit, by little or by much.
    assert float(peak.group(1)) > 100 and int(peak.group(2)) >= 100
    assert "Not resubmitted: the same request would fail again; raise --mem" in result.summary
    assert any("exceeded memory limit" in line for line in result.details)


def test_accounting_unreachable_degrades_to_the_controller_and_says_so(
        ended: Ended, slurm_cluster: Path, tmp_path: Path, store: StateStore) -> None:
    name, job = f"{ended.prefix}-fail", ended.ids["fail"]
    wait_for(lambda: job_state(job) == "FAILED", what="failed job remembered by the controller")
    # As with slurmdbd stopped: sacct finds nobody at the accounting port (the shared
    # cluster's slurmdbd keeps serving the other tests).
    text = re.sub(r"(?m)^AccountingStoragePort=.*$", "AccountingStoragePort=1", slurm_cluster.read_text())
    dead = tmp_path / "no-slurmdbd.conf"
    dead.write_text(text)
    cfg = write_config(tmp_path, config(tmp_path, name, resubmit=script(tmp_path)))
    result = tick(cfg, store, env={"SLURM_CONF": str(dead)})[0]["train"]
    assert result.status is Status.CRITICAL
    assert f"{name} (job {job}) failed on node" in result.summary
    assert "(from the controller's memory only: accounting did not answer (sacct failed" in result.summary
    assert "Connection refused" in result.summary and "no exit code, memory or CPU figures" in result.summary
    # Nothing only accounting knows is made up: the exit status is said to be unknown.
    assert "(exit status not recorded)" in result.summary and ": exit 1;" not in result.summary
    # Neither accounting nor the controller: "unknown", never a guessed reason.
    store.kv_put("check.job", "train", {"job_ids": ["999999"]})
    other = write_config(tmp_path, config(tmp_path, f"{name}-never"))
    unknown = tick(other, store, env={"SLURM_CONF": str(dead)})[0]["train"]
    assert "(job 999999): how it ended is unknown: accounting did not answer" in unknown.summary
    assert "the controller no longer remembers the job" in unknown.summary


def shim(tmp_path: Path, *commands: str) -> tuple[Path, Path]:
    """A PATH folder whose `commands` log their arguments and run the real ones."""
    folder, log = tmp_path / "bin", tmp_path / "calls.log"
    folder.mkdir()
    for command in commands:
        real = sh("which", command).strip()
        (folder / command).write_text(f'#!/bin/sh\necho "{command} $*" >> {log}\nexec {real} "$@"\n')
        (folder / command).chmod(0o700)
    return folder, log


def test_twenty_checks_with_ended_jobs_ask_accounting_once(ended: Ended, tmp_path: Path,
                                                          store: StateStore) -> None:
    gone = [ended.ids[k] for k in ("fail", "cancel", "oom")]
    wait_for(lambda: all(accounted(j) for j in gone), timeout=60, what="accounting has the ends")
    names = [f"{ended.prefix}-{k}" for k in ("fail", "cancel", "oom")]
    names += [f"{ended.prefix}-none{i}" for i in range(17)]
    body = "".join(config(tmp_path, n).replace('name = "train"', f'name = "c{i}"')
                   for i, n in enumerate(names))
    folder, log = shim(tmp_path, "sacct", "scontrol", "squeue")
    results = tick(write_config(tmp_path, body), store, env={"PATH": f"{folder}:{os.environ['PATH']}"})[0]
    calls = [c for c in log.read_text().split("\n") if c.strip()]
    # `sacct --helpformat`: which output fields this release offers, asked once a day.
    assert calls == [calls[0], "sacct --helpformat", calls[2]], calls
    assert [c.split()[0] for c in calls] == ["squeue", "sacct", "sacct"], calls
    # Every check's job is gone: one sacct asks for every run of their names since the look.
    asked = calls[2].split(" --name=", 1)[1].split()[0].split(",")
    assert sorted(asked) == sorted(names)
    assert all(results[f"c{i}"].context.get("ending") for i in range(3))


def test_a_node_failure_is_resubmitted_excluding_the_node(ended: Ended, tmp_path: Path,
                                                         store: StateStore) -> None:
    name, job = f"{ended.prefix}-nodefail", ended.ids["nodefail"]
    wait_for(lambda: accounted(job), timeout=150, what="accounting has the node failure")
    cfg = write_config(tmp_path, config(tmp_path, name, resubmit=script(tmp_path)))
    result = tick(cfg, store)[0]["train"]
    assert result.status is Status.WARNING, result.summary
    new = result.context["resubmitted"]
    try:
        assert f"{name} (job {job}) was on node2 when the node failed (NODE_FAIL; drain reason " \
               "node2: 'Not responding')" in result.summary
        assert f"Resubmitted as job {new} excluding node2 (1st of at most 3 in 6 h 00 min)." in result.summary
        assert "ExcNodeList=node2" in sh("scontrol", "show", "job", new)
    finally:
        sh("scancel", new, check=False)


def plain(message: EmailMessage) -> str:
    body = message.get_body(("plain",))
    assert body is not None, "every alert mail has a plain-text part"
    return str(body.get_content())


def notice_lines(text: str) -> list[str]:
    """The `what:` line of every NOTICE block of a plain-text alert mail."""
    found, in_notice = [], False
    for line in text.splitlines():
        if line and not line.startswith(" "):
            in_notice = line.startswith("NOTICE: ")
        elif in_notice and line.strip().startswith("what:"):
            found.append(line.split("what:", 1)[1].strip())
    return found


def test_lifecycle_notices_arrive_once_each_in_order(ended: Ended, tmp_path: Path) -> None:
    name = f"{ended.prefix}-life"
    with SmtpServer() as smtp:
        cfg = write_config(tmp_path, config(tmp_path, name, notices=["started", "requeued", "ended"])
                           + textwrap.dedent(f"""
                           [[notify]]
                           name = "mail"
                           type = "email"
                           host = "127.0.0.1"
                           port = {smtp.port}
                           sender = "w@example.org"
                           to = "ops@example.org"
                           """))
        store = StateStore(cfg.scheduler.state_dir)
        sink = build_sink(cfg, store)

        def look() -> None:
            results, ctx = tick(cfg, store)
            sink.handle([ItemOutcome("train", "check", results["train"], ctx.now, ctx.now)], ctx.now)
            sink.flush(ctx.now)

        job = submit(name, "--hold", "--output=/dev/null", wrap="sleep 300")
        try:
            look()  # learns that the job is queued
            sh("scontrol", "release", job)
            wait_for(lambda: job_state(job) == "RUNNING", what="released job running")
            look()
            look()  # nothing new: no second "started"
            sh("scontrol", "requeue", job)
            wait_for(lambda: job_state(job) == "PENDING", what="requeued job pending")
            look()
            # Skip the requeue delay (BeginTime). slurmd revokes the previous run's credential
            # with a 1-second resolution, so a start within that second is refused: wait it
            # out, and ask again while the job is still pending.
            time.sleep(1.5)

            def running_again() -> bool:
                if job_state(job) == "RUNNING":
                    return True
                sh("scontrol", "update", f"JobId={job}", "StartTime=now", check=False)
                return False
            wait_for(running_again, timeout=60, interval=1.0, what="requeued job running again")
            look()
            sh("scancel", job)
            # 24.11+: accounting has the cancel while squeue still lists the job completing.
            wait_for(lambda: accounted(job) and left_the_queue(job), timeout=60,
                     what="accounting has the end and squeue let the job go")
            look()
            look()
        finally:
            sh("scancel", job, check=False)
        store.close()
    texts = [plain(m.message) for m in smtp.received]
    notices = [n for text in texts for n in notice_lines(text)]
    said = [re.match(rf"{name} \(job {job}\) (started on|was requeued|was cancelled)", n) for n in notices]
    assert [m.group(1) if m else None for m in said] == [
        "started on", "was requeued", "started on", "was cancelled"], notices
    assert re.search(r"started on node\d at \d{4}-\d\d-\d\d \d\d:\d\d \w+", notices[0])
    ended_mail = texts[-1]
    assert re.search(r"\| efficiency: .*memory.*; elapsed \d+ s", ended_mail), ended_mail


def test_a_time_limit_with_a_fresh_checkpoint_is_resubmitted(ended: Ended, tmp_path: Path,
                                                            store: StateStore) -> None:
    name, job = f"{ended.prefix}-timeout", ended.ids["timeout"]
    checkpoints, beats = tmp_path / "ckpt", tmp_path / "beats"
    (checkpoints / "step-00000042").mkdir(parents=True)
    # The module's other tests may outlast the job's 1-minute limit: running or already ended.
    # It may wait for a node while the module's other jobs run (three suites share two cores in CI).
    wait_for(lambda: job_state(job) in ("RUNNING", "COMPLETING", "TIMEOUT"), timeout=180, interval=1.0,
             what="time-limited job started")
    started = datetime.fromisoformat(re.search(r"StartTime=(\S+)", sh("scontrol", "show", "job", job))[1])
    marker = checkpoints / "step-00000042" / "COMPLETE.json"
    marker.write_text('{"step": 42}')
    # Committed during the run, a second after it started (as a save would be).
    for path in (marker, marker.parent):
        os.utime(path, (started.timestamp() + 1, started.timestamp() + 1))
    beats.mkdir()
    (beats / "rank-0.json").write_text(json.dumps({"rank": 0, "step": 50, "phase": "train",
                                                   "time": datetime.now().timestamp(), "job_id": job}))
    wait_for(lambda: accounted(job), timeout=150, interval=2, what="accounting has the time limit")
    cfg = write_config(tmp_path, config(tmp_path, name, resubmit=script(tmp_path),
                                        checkpoints=str(checkpoints), heartbeats=str(beats)))
    result = tick(cfg, store)[0]["train"]
    new = result.context.get("resubmitted", "")
    try:
        assert f"{name} (job {job}) hit its time limit of 1 min 00 s at step 50, having saved at " \
               "step 42" in result.summary, result.summary
        assert f"Resubmitted as job {new} (1st of at most 3" in result.summary
        assert result.context["resubmit"] == "timeout_saved"
    finally:
        sh("scancel", new, check=False) if new else None
