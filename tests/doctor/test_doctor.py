"""`watchdogs doctor` run as the user runs it (the real CLI, the dev cluster, real servers):
it reports the state folder's filesystem and lock kind and each channel's reachability,
names the fix for a broken channel and exits with the Nagios code of the worst finding."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cancel, job_state, sh, wait_for
from tests.notifiers.fakes import FakeHTTP, SmtpServer, free_port
from tests.notifiers.proxies import OnlyThroughProxy, Tinyproxy

pytestmark = pytest.mark.usefixtures("slurm_cluster")


@pytest.fixture
def http() -> Iterator[FakeHTTP]:
    with FakeHTTP() as server:
        yield server


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with SmtpServer() as server:
        yield server


def site(tmp_path: Path, channels: str, scheduler: str = "") -> Path:
    path = tmp_path / "watchdogs.toml"
    path.write_text(f'[scheduler]\nstate_dir = "{tmp_path}/state"\n{textwrap.dedent(scheduler)}\n'
                    + textwrap.dedent(channels))
    return path


def doctor(config: Path, *args: str, timeout: float = 120, **extra_env: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()} | extra_env
    done = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(config), "doctor", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)
    return done.returncode, done.stdout, done.stderr


def by_area(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["area"]: f for f in document["findings"]}


def fs_type_of(path: Path) -> str:
    return subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", str(path)], capture_output=True,
                          text=True, check=True).stdout.strip()


def channels(http: FakeHTTP, smtp: SmtpServer, closed: int) -> str:
    return f"""
    [[notify]]
    name = "hook"
    type = "webhook"
    url = "{http.url}/hook"

    [[notify]]
    name = "mail"
    type = "email"
    host = "127.0.0.1"
    port = {smtp.port}
    sender = "watchdogs@cluster.example"
    to = "ops@example.org"

    [[notify]]
    name = "broken"
    type = "webhook"
    url = "http://127.0.0.1:{closed}/hook"
    """


def test_doctor_reports_fs_lock_kind_and_reachability_and_fails_on_a_closed_port(
        tmp_path: Path, http: FakeHTTP, smtp: SmtpServer) -> None:
    closed = free_port()
    config = site(tmp_path, channels(http, smtp, closed), f'heartbeat_url = "{http.url}/ping/uuid"')
    code, out, err = doctor(config, "--json")
    assert code == 2, err
    found = by_area(json.loads(out))
    state = found["state"]["facts"]
    assert state["fs_type"] == fs_type_of(tmp_path) and state["flock"] == "works"
    assert found["locks"]["status"] == "OK" and "flock works" in found["locks"]["summary"]
    assert found["channel hook"]["status"] == "OK" and "direct" in found["channel hook"]["summary"]
    assert found["channel mail"]["status"] == "OK"
    broken = found["channel broken"]
    assert broken["status"] == "CRITICAL" and f"127.0.0.1:{closed}" in broken["summary"]
    assert "https_proxy" in broken["fix"] and '`proxy` in [[notify]] "broken"' in broken["fix"]
    assert found["heartbeat"]["status"] == "OK" and "127.0.0.1" in found["heartbeat"]["summary"]
    assert http.seen == [] and smtp.received == [], "a probe must not send anything (nor ping)"
    assert found["accounting"]["status"] == "OK" and found["slurm"]["summary"].startswith("slurm")


def test_the_text_answer_leads_with_the_verdict_and_the_worst_problem(
        tmp_path: Path, http: FakeHTTP, smtp: SmtpServer) -> None:
    code, out, _ = doctor(site(tmp_path, channels(http, smtp, free_port())))
    first, *rest = out.splitlines()
    assert code == 2
    assert first.startswith("DOCTOR CRITICAL: channel broken: cannot reach 127.0.0.1:")
    assert " | checks=" in first and "critical=1" in first
    assert any(line.strip().startswith("fix: this host cannot reach 127.0.0.1:") for line in rest)


def test_a_healthy_site_has_no_critical_finding_and_send_delivers_a_test_message(
        tmp_path: Path, http: FakeHTTP, smtp: SmtpServer) -> None:
    config = site(tmp_path, channels(http, smtp, 1).split("[[notify]]\n    name = \"broken\"")[0])
    code, out, err = doctor(config, "--send", "--json")
    document = json.loads(out)
    worst = {f["status"] for f in document["findings"]}
    assert "CRITICAL" not in worst, out
    # This dev cluster runs an older Slurm than the tested releases: that alone is a WARNING.
    assert code == (1 if "WARNING" in worst else 0) == document["exit_code"]
    assert [s.json()["severity"] for s in http.seen] == ["warning"]
    assert "test message from watchdogs" in http.seen[0].json()["text"]
    mail = smtp.received[0].message
    assert mail["X-Watchdogs-Severity"] == "warning" and "test message from watchdogs" in mail.as_string()


def test_reachability_goes_through_the_channels_proxy(tmp_path: Path) -> None:
    with Tinyproxy(tmp_path) as proxy, OnlyThroughProxy() as server:
        config = site(tmp_path, f"""
        [[notify]]
        name = "hook"
        type = "webhook"
        url = "{server.url}/hook"
        proxy = "{proxy.url}"

        [[notify]]
        name = "tls"
        type = "webhook"
        url = "https://127.0.0.1:{server.server.server_address[1]}/hook"
        proxy = "{proxy.url}"

        [[notify]]
        name = "gone"
        type = "webhook"
        url = "http://127.0.0.1:{free_port()}/hook"
        proxy = "{proxy.url}"
        """)
        code, out, _ = doctor(config, "--json")
        found = by_area(json.loads(out))
        assert found["channel hook"]["status"] == "OK"
        assert f"via proxy {proxy.url}" in found["channel hook"]["summary"]
        assert server.refused == []
        assert any(f"{server.url}/" in line for line in proxy.requests()), proxy.requests()
        assert found["channel tls"]["status"] == "OK"
        tunnel = f"CONNECT 127.0.0.1:{server.server.server_address[1]}"
        assert any(tunnel in line for line in proxy.requests()), proxy.requests()
        gone = found["channel gone"]
        assert code == 2 and gone["status"] == "CRITICAL" and "proxy" in gone["summary"]


def test_an_invalid_config_is_one_critical_finding_naming_the_key(tmp_path: Path) -> None:
    config = site(tmp_path, """
    [[notify]]
    name = "hook"
    type = "webhook"
    url = "ftp://example.org/x"
    """)
    code, out, err = doctor(config)
    assert code == 2 and "Traceback" not in err
    assert out.startswith("DOCTOR CRITICAL: config: invalid:") and "url" in out.splitlines()[0]


def test_on_node_runs_the_checks_in_a_job_and_sends_through_every_channel(
        tmp_path: Path, http: FakeHTTP, smtp: SmtpServer) -> None:
    closed = free_port()
    code, out, err = doctor(site(tmp_path, channels(http, smtp, closed)), "--on-node", "--json",
                            "--wait", "120", timeout=180)
    document = json.loads(out)
    assert code == 2, err
    assert document["job"] and document["job"].isdigit()
    found = by_area(document)
    assert found["state"]["facts"]["fs_type"] == fs_type_of(tmp_path)
    assert found["locks"]["facts"]["flock"] == "works"
    assert found["channel hook"]["facts"]["delivered"] is True
    assert found["channel mail"]["facts"]["delivered"] is True
    assert "compute nodes cannot reach" in found["channel broken"]["fix"]
    assert len(http.seen) == 1 and len(smtp.received) == 1
    assert smtp.received[0].message["X-Watchdogs-Severity"] == "warning"
    assert (tmp_path / "state" / "doctor" / f"doctor-{document['job']}.json").exists()


def test_on_node_gives_up_on_a_job_that_does_not_start_and_cancels_it(tmp_path: Path) -> None:
    """Partition `cpu` (one node) is taken by an exclusive job: the doctor's job stays pending."""
    blocker = sh("sbatch", "--parsable", "-p", "cpu", "--exclusive", "-t", "5", "-o", "/dev/null",
                 "--wrap", "sleep 300").strip().split(";")[0]
    try:
        wait_for(lambda: job_state(blocker) == "RUNNING", 60, what=f"blocker {blocker} running")
        code, out, err = doctor(site(tmp_path, ""), "--on-node", "--json", "--wait", "3",
                                SBATCH_PARTITION="cpu")
    finally:
        cancel(blocker)
    document = json.loads(out)
    node = by_area(document)["node job"]
    assert code == 3 and node["status"] == "UNKNOWN", err
    job = node["summary"].split()[1]
    assert "still PENDING" in node["summary"] and "cancelled" in node["summary"]
    assert subprocess.run(["squeue", "-h", "-j", job, "-t", "PENDING,RUNNING"], capture_output=True,
                          text=True).stdout.strip() == ""


def test_on_node_says_when_sbatch_refuses_the_job(tmp_path: Path) -> None:
    code, out, _ = doctor(site(tmp_path, ""), "--on-node", SBATCH_PARTITION="no-such-partition")
    assert code == 2
    assert out.startswith("DOCTOR CRITICAL: node job: cannot submit the doctor job: sbatch failed")
    assert "SBATCH_PARTITION" in out


def test_an_unreadable_secret_is_critical_without_revealing_anything(tmp_path: Path) -> None:
    config = site(tmp_path, """
    [[notify]]
    name = "team"
    type = "slack"
    webhook_url_env = "NOT_EXPORTED_HOOK"
    """)
    code, out, _ = doctor(config, "--json")
    team = by_area(json.loads(out))["channel team"]
    assert code == 2 and team["status"] == "CRITICAL" and "NOT_EXPORTED_HOOK" in team["summary"]


def test_accounting_names_the_state_without_sacct_s_uid() -> None:
    """sacct says "CANCELLED by 1001": the doctor's line says CANCELLED, not a bare uid."""
    from tests.helpers import accounted
    from watchdogs.commands.doctor.checks import check_accounting
    from watchdogs.slurmctl.runner import run_slurm

    job = sh("sbatch", "--parsable", "--hold", "--output=/dev/null", "--wrap", "true").strip().split(";")[0]
    sh("scancel", job)
    wait_for(lambda: accounted(job), timeout=60, what="accounting has the cancel")
    found = check_accounting(run_slurm, job)
    assert found.summary.startswith(f"sacct answers: job {job} CANCELLED (this doctor job"), found.summary
    assert found.facts["state"].startswith("CANCELLED by "), found.facts  # the whole answer stays in facts
