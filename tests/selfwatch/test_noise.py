"""Noise a woken person does not need: a new wording of the same problem is not a
"(changed)" alert (only a new fingerprint is), and the results of one tick that finish a
moment apart go out as one message."""
from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.alerts.support import outbox
from tests.checks.conftest import tick, write_config
from tests.helpers import wait_for
from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site, script
from tests.selfwatch.conftest import mail_config, mails
from watchdogs.alerts import build_sink
from watchdogs.alerts.sink import AlertSink
from watchdogs.plugins import CHECKS_GROUP, load_group
from watchdogs.result import Status
from watchdogs.scheduler.items import check_items
from watchdogs.state.store import StateStore


def test_hang_message_gaining_a_stuck_counter_is_not_a_second_alert(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("iter 8 loss 2.0\n")
    config = write_config(tmp_path, '[[check]]\nname = "hung"\ntype = "log_stale"\npath = "train.log"\n'
                                    'max_age = "10m"\nprogress = "iter (\\\\d+)"\n'
                                    '[[notify]]\nname = "log"\ntype = "logfile"\npath = "alerts.log"\n')
    store = StateStore(config.scheduler.state_dir)
    sink = build_sink(config, store)
    assert isinstance(sink, AlertSink)
    item = check_items(config, load_group(CHECKS_GROUP))[0][0]
    start = datetime.now().astimezone()
    os.utime(log, (time.time() - 3600, time.time() - 3600))
    summaries = []
    for minutes in (0, 11, 12):  # stale; stale + "progress stuck at 8"; the same
        now = start + timedelta(minutes=minutes)
        result = tick(config, store, now=now)[0]["hung"]
        assert result.status is Status.CRITICAL
        summaries.append(result.summary)
        sink.handle([item.outcome(result, now, now)], now)
    assert "progress stuck at 8" not in summaries[0] and "progress stuck at 8" in summaries[1]
    assert len(outbox(sink)) == 1  # one alert for one hang, whatever its wording became


@pytest.mark.timeout(60)
def test_results_of_one_tick_finishing_apart_go_out_as_one_message(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp)
    site.config.write_text(site.config.read_text().replace('hourly = "2s"', 'hourly = "1h"'))
    site.dropin("fast", script("echo 'CRITICAL - fast one broke'\nexit 2"))
    site.dropin("slow", script("sleep 2.5\necho 'CRITICAL - slow one broke too'\nexit 2"))
    proc = site.popen("run")
    try:
        wait_for(lambda: any("slow one broke" in m for m in mails(smtp)), timeout=30, what="the slow alert")
        time.sleep(1.5)  # a second mail, if any, would have come by now
    finally:
        proc.terminate()
        proc.wait(20)
    said = mails(smtp)
    assert len(said) == 1, [m.splitlines()[0] for m in said]
    assert "fast one broke" in said[0] and "slow one broke too" in said[0]
