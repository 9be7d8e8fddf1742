"""The training story's job ids match its text (issue 36 item 5): a training seen running as
job A is cancelled and resubmitted by hand as job B, which fails before the next look. The
check's words explain B ("… (job B) failed …; and 1 earlier run …: job A was cancelled"), so the
page's `ended` row must show B: someone running `sacct -j` on the shown id reads the run the
text is about. Real scheduler runs (`watchdogs run --once`, as the user) on the dev cluster."""
from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.helpers import accounted, sh, wait_for
from tests.report.conftest import look
from tests.scheduler.conftest import Site
from tests.trainguard.support import Cluster

pytestmark = pytest.mark.slurm


@pytest.mark.timeout(180)
def test_the_ended_row_shows_the_resubmitted_run_its_text_explains_not_the_last_one_seen(
        site: Site, cluster: Cluster, tmp_path: Path) -> None:
    name = f"resub-{uuid.uuid4().hex[:8]}"  # accounting keeps earlier runs: a name of its own
    site.write_config(f'[[check]]\nname = "train"\ntype = "job"\njob_name = "{name}"\n')
    first = cluster.sbatch(None, sbatch_args=("-J", name, "-o", "/dev/null", "--wrap", "sleep 600"))
    cluster.wait_state(first, ("RUNNING",), timeout=60)
    look(site)                                          # running: job `first` seen
    sh("scancel", first)
    second = cluster.sbatch(None, sbatch_args=("-J", name, "-o", "/dev/null", "--wrap", "exit 3"))
    wait_for(lambda: accounted(first) and accounted(second), 90, 0.25, "both runs in accounting")
    look(site)                                          # gone: the newest run explained
    page = tmp_path / "report.html"
    done = site.watchdogs("report", "--out", str(page))
    assert done.returncode == 0, done.stderr

    rows = re.findall(r'<tr><td class="when">[^<]+</td><td><span class="status"[^>]*>(\w+)</span></td>'
                      r'<td data-label="Job">([\w-]+)</td>'
                      r'<td class="summary">([^<]*)</td></tr>', page.read_text())
    ended = [(job, text) for kind, job, text in rows if kind == "ended"]
    assert len(ended) == 1, rows
    shown, text = ended[0]
    assert shown == second, (shown, text)
    assert f"(job {second}) failed" in text and f"job {first} was cancelled" in text, text
    # What the reader of the page runs next: the shown id is the failed run the text names.
    assert sh("sacct", "-n", "-X", "-P", "-j", shown, "-o", "JobName,State").split() == [f"{name}|FAILED"]
