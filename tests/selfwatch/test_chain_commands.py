"""`watchdogs stop` never reports success while the chain runs; `watchdogs start` checks
before it submits; a hand-made `sbatch slurm/cron-scheduler.slurm` fails clearly without a
config and otherwise ends up as `watchdogs start` would have it; optional Slurm mail for
the chain's own job. On the real local Slurm cluster."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import job_state, sh, wait_for
from tests.scheduler.conftest import Site
from tests.scheduler.test_chain import live_jobs, running

pytestmark = pytest.mark.slurm
SCRIPT = REPO / "slurm" / "cron-scheduler.slurm"


@pytest.fixture
def chain_site(site: Site, slurm_cluster: Path) -> Iterator[Site]:
    yield site
    site.state.mkdir(parents=True, exist_ok=True)
    (site.state / "STOP").write_text("test teardown\n")
    sh("scancel", "--me", f"--name={site.job_name}", check=False)
    wait_for(lambda: not live_jobs(site.job_name), timeout=30, what="the chain's jobs to end")


def break_toml(site: Site) -> None:
    site.config.write_text(site.config.read_text().replace("[cron]", "[cron"))


def test_stop_with_an_unreadable_config_and_no_record_says_so_and_fails(site: Site) -> None:
    break_toml(site)
    stopped = site.watchdogs("stop")
    assert stopped.returncode != 0
    assert "Nothing was stopped" in stopped.stderr and "scancel <job id>" in stopped.stderr
    assert "Traceback" not in stopped.stderr


@pytest.mark.timeout(90)
def test_stop_with_an_unreadable_config_finds_the_chain_from_its_record(chain_site: Site) -> None:
    site = chain_site
    started = site.watchdogs("start")
    assert started.returncode == 0, started.stderr
    first = wait_for(lambda: running(site.job_name), timeout=30, what="the first instance")
    # Break the config only once the instance has read it: an instance that starts on a
    # broken config ends at once (by design), and on a loaded machine Slurm's RUNNING comes
    # seconds before the instance's own start (it failed so on 24.11 in CI).
    out = site.state / "scheduler" / f"{site.job_name}-{first}.out"
    wait_for(lambda: out.exists() and "scheduling " in out.read_text(), timeout=60,
             what=f"instance {first} read its config")
    break_toml(site)
    stopped = site.watchdogs("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "used the last good copy" in stopped.stdout and f"{first} (RUNNING)" in stopped.stdout
    wait_for(lambda: not live_jobs(site.job_name), timeout=30, what="the chain to end")


@pytest.mark.timeout(60)
def test_start_refuses_a_state_folder_that_cannot_hold_the_database(chain_site: Site) -> None:
    site = chain_site
    blocker = site.root / "not-a-folder"
    blocker.write_text("a file where the state folder should be\n")
    site.write_config(f'state_dir = "{blocker}"')
    site.config.write_text(site.config.read_text().replace('state_dir = "state"\n', "", 1))
    started = site.watchdogs("start")
    assert started.returncode != 0 and "Traceback" not in started.stderr
    assert str(blocker) in started.stderr
    assert live_jobs(site.job_name) == []


@pytest.mark.timeout(60)
def test_sbatch_without_a_config_fails_at_once_with_a_clear_message(site: Site, slurm_cluster: Path) -> None:
    env = {k: v for k, v in site.env().items() if k != "WATCHDOGS_CONFIG"}
    empty = site.root / "elsewhere"
    empty.mkdir()
    job = subprocess.run(["sbatch", "--parsable", f"--job-name={site.job_name}", str(SCRIPT)], env=env,
                         cwd=empty, capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    wait_for(lambda: job_state(job) == "FAILED", timeout=30, what="the job to fail")
    out = (empty / f"slurm-{job}.out").read_text()
    assert "watchdogs: error: no config: submit with WATCHDOGS_CONFIG=" in out
    assert "ExitCode=2:0" in sh("scontrol", "show", "job", job)
    assert live_jobs(site.job_name) == []  # no successor left behind


@pytest.mark.timeout(90)
def test_sbatch_by_hand_hands_over_to_the_name_and_log_folder_start_uses(chain_site: Site) -> None:
    site = chain_site
    site.write_config('mail_user = "oncall@example.org"')
    hand = subprocess.run(["sbatch", "--parsable", str(SCRIPT)], env=site.env(), cwd=site.root,
                          capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    chained = wait_for(lambda: running(site.job_name), timeout=40,
                       what="an instance named as the config says")
    wait_for(lambda: job_state(hand) == "COMPLETED", timeout=30, what="the hand-made job to hand over")
    assert "handover: submitted by hand as 'watchdogs-cron'" in (site.root / f"slurm-{hand}.out").read_text()
    log = site.state / "scheduler" / f"{site.job_name}-{chained}.out"
    wait_for(lambda: log.exists() and "scheduling " in log.read_text(), timeout=30, what="its log")
    show = sh("scontrol", "show", "job", chained)
    assert "MailUser=oncall@example.org" in show and "MailType=INVALID_DEPEND,FAIL" in show


@pytest.mark.timeout(90)
def test_stop_after_a_job_name_change_still_ends_the_running_chain(chain_site: Site) -> None:
    site = chain_site
    assert site.watchdogs("start").returncode == 0
    first = wait_for(lambda: running(site.job_name), timeout=30, what="the first instance")
    log = site.state / "scheduler" / f"{site.job_name}-{first}.out"
    wait_for(lambda: log.exists() and "scheduling " in log.read_text(), timeout=30, what="it to run")
    renamed = f"{site.job_name}-new"
    site.config.write_text(site.config.read_text().replace(f'job_name = "{site.job_name}"',
                                                           f'job_name = "{renamed}"'))
    stopped = site.watchdogs("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"{first} (RUNNING)" in stopped.stdout  # found from the state directory's record
    wait_for(lambda: not live_jobs(site.job_name), timeout=40, what="the old chain to end")
