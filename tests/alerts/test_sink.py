"""The sink the scheduler calls: grouping, routing, repeats, silences, outbox retries and
channel-down notices, with real channels (log files, a local HTTP receiver, SMTP)."""
from __future__ import annotations

from pathlib import Path

from notifiers.base import Message
from notifiers.logfile import LogfileNotifier
from notifiers.render import Templates
from tests.alerts.support import at, lines, logfile, make_sink, outbox, outcome
from tests.notifiers.fakes import FakeHTTP, SmtpServer
from watchdogs.alerts import silences, summary
from watchdogs.alerts.events import Batch
from watchdogs.alerts.sink import AlertSink
from watchdogs.result import Status

OK, WARN, CRIT = Status.OK, Status.WARNING, Status.CRITICAL


def webhook(url: str, name: str = "hook") -> str:
    return f'[[notify]]\nname = "{name}"\ntype = "webhook"\nurl = "{url}"\ntimeout = "2s"\n'


def email(port: int) -> str:
    return (f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {port}\n'
            'sender = "w@example.org"\nto = "ops@example.org"\ntimeout = "2s"\n')


def test_an_alert_storm_is_one_message_per_channel(tmp_path: Path) -> None:
    with FakeHTTP() as http, SmtpServer() as smtp:
        text = '[alerts]\ncluster = "gpu-cluster"\n' + logfile("log") + webhook(http.url) + email(smtp.port)
        sink = make_sink(tmp_path, text)
        storm = [outcome(f"check-{i:03d}", CRIT if i % 5 else WARN) for i in range(500)]
        sink.handle(storm, at(0))
        assert sorted(row["channel"] for row in outbox(sink)) == ["hook", "log", "mail"]
        sink.flush(at(0))
        sink.handle(storm, at(1))
        sink.flush(at(1))
    assert len(http.seen) == 1 and len(http.seen[0].json()["alerts"]) == 500
    assert len(smtp.received) == 1
    mail = smtp.received[0].message
    # The count, then the worst one: a phone's notification shows what to look at first.
    assert mail["Subject"] == ("[watchdogs gpu-cluster] 500 problems (400 CRITICAL, 100 WARNING); "
                               "worst: check-001 - check-001 is CRITICAL")
    assert "check-499" in mail.get_body(("plain",)).get_content()
    assert len(lines(tmp_path, "log")) == 500
    assert not outbox(sink, pending_only=True)


def test_routing_by_severity_with_a_default_route(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, '[alerts]\nnotify = ["c"]\n' + logfile("a") + logfile("b") + logfile("c"))
    route = {"warning": ("a",), "critical": ("a", "b")}
    sink.handle([outcome("x", WARN, notify=route), outcome("y", CRIT)], at(0))
    sink.flush(at(0))
    assert [len(lines(tmp_path, n)) for n in "abc"] == [1, 0, 1]
    sink.handle([outcome("x", CRIT, notify=route), outcome("y", CRIT)], at(1))
    sink.handle([outcome("x", OK, notify=route), outcome("y", CRIT)], at(2))
    sink.flush(at(2))
    assert [line.split()[2] for line in lines(tmp_path, "a")] == ["WARNING", "CRITICAL", "RESOLVED"]
    assert [line.split()[2] for line in lines(tmp_path, "b")] == ["CRITICAL", "RESOLVED"]
    assert len(lines(tmp_path, "c")) == 1


def test_with_no_route_configured_every_enabled_channel_hears(tmp_path: Path) -> None:
    text = logfile("a") + logfile("b") + logfile("off") + "enabled = false\n"
    sink = make_sink(tmp_path, text)
    sink.handle([outcome("x", CRIT)], at(0))
    sink.flush(at(0))
    assert [len(lines(tmp_path, n)) for n in ("a", "b", "off")] == [1, 1, 0]


def test_repeat_while_failing_then_resolved(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, logfile("log"))
    for minute in (0, 30, 60, 90, 120, 125):
        status = OK if minute == 125 else CRIT
        sink.handle([outcome("train", status, at(minute), repeat_every=3600.0)], at(minute))
        sink.flush(at(minute))
    events = [line.split("event=")[1].split()[0] for line in lines(tmp_path, "log")]
    assert events == ["alert", "repeat", "repeat", "resolved"]


def test_flap_damping_waits_for_after_bad_readings(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, '[alerts]\nafter = 3\n' + logfile("log"))
    for minute, status in enumerate([CRIT, CRIT, OK, CRIT, CRIT, CRIT]):
        sink.handle([outcome("flappy", status, at(minute))], at(minute))
        sink.flush(at(minute))
    assert len(lines(tmp_path, "log")) == 1 and "event=alert" in lines(tmp_path, "log")[0]


def test_a_silenced_alert_is_recorded_not_sent_and_said_when_the_silence_ends(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, logfile("log"))
    with sink.store.transaction() as db:
        silences.add(db, "scratch-*", at(-1).timestamp(), at(10).timestamp(), "maintenance", "me")
    sink.handle([outcome("scratch-disk", CRIT, at(0)), outcome("job", CRIT, at(0))], at(0))
    sink.flush(at(0))
    assert [line.split()[3] for line in lines(tmp_path, "log")] == ["job"]
    log = sink.store.connection().execute("SELECT item, silenced_by FROM alert_log ORDER BY id").fetchall()
    assert sorted((r["item"], r["silenced_by"]) for r in log) == [("job", None), ("scratch-disk", 1)]
    sink.handle([outcome("scratch-disk", CRIT, at(11))], at(11))
    sink.flush(at(11))
    last = lines(tmp_path, "log")[-1]
    assert " scratch-disk " in last and "event=repeat" in last and 'note="a silence ended"' in last


def test_handling_the_same_tick_twice_queues_it_once(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, logfile("log"))
    sink.handle([outcome("x", CRIT)], at(0))
    with sink.store.transaction() as db:  # as if the tick's state had not been saved
        db.execute("DELETE FROM alert_state")
    sink.handle([outcome("x", CRIT)], at(0))
    assert len(outbox(sink)) == 1


def test_an_undeliverable_message_waits_with_backoff_and_run_once_forces_it(tmp_path: Path) -> None:
    with FakeHTTP() as http:
        http.reply(503, "busy")
        sink = make_sink(tmp_path, webhook(http.url))
        sink.handle([outcome("x", CRIT)], at(0))
        sink.flush(at(0))
        assert outbox(sink)[0]["attempts"] == 1 and "HTTP 503" in outbox(sink)[0]["last_error"]
        sink.flush(at(0.2))
        assert len(http.seen) == 1  # backoff: 30 s
        sink.flush(at(0.2), force=True)
        sink.flush(at(5))
    assert len(http.seen) == 2 and not outbox(sink, pending_only=True)
    assert summary(sink.store) == {"open_alerts": 1, "outbox_pending": 0, "failing_channels": []}


def test_a_down_channel_is_tried_once_per_flush_however_much_waits(tmp_path: Path) -> None:
    with FakeHTTP() as http:
        http.default.status = 503
        sink = make_sink(tmp_path, webhook(http.url) + logfile("log"))
        for minute in range(3):
            sink.handle([outcome(f"x{minute}", CRIT, at(minute))], at(minute))
        sink.flush(at(3), force=True)
    assert len(http.seen) == 1 and len(lines(tmp_path, "log")) == 3
    assert len(outbox(sink, pending_only=True)) == 3


def test_a_failing_channel_is_announced_on_the_others_once_and_its_recovery_too(tmp_path: Path) -> None:
    with FakeHTTP() as http:
        http.default.status = 500
        text = '[alerts]\nchannel_down_after = "10m"\n' + webhook(http.url) + logfile("log")
        sink = make_sink(tmp_path, text)
        sink.handle([outcome("x", CRIT, at(0))], at(0))
        for minute in (0, 5, 11, 20):
            sink.flush(at(minute), force=True)
        told = [line for line in lines(tmp_path, "log") if "channel:hook" in line]
        assert len(told) == 1 and "failing since 2024-05-01 12:00" in told[0] and "HTTP 500" in told[0]
        assert summary(sink.store)["failing_channels"] == ["hook"]
        http.default.status = 200
        sink.flush(at(21), force=True)
    told = [line for line in lines(tmp_path, "log") if "channel:hook" in line]
    assert len(told) == 2 and "WATCHDOGS RESOLVED channel:hook" in told[1]
    assert [a["item"] for a in http.seen[-1].json()["alerts"]] == ["x"]
    assert summary(sink.store)["failing_channels"] == []


class _BrokenRenderer(LogfileNotifier):
    """A third-party channel whose renderer has a bug."""

    def render(self, batch: Batch, templates: Templates) -> Message:
        raise RuntimeError("bug in a plugin")


def test_a_channel_whose_renderer_fails_still_gets_the_alert_as_plain_text(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, logfile("log"))
    broken = AlertSink(sink.config, sink.store, {"log": _BrokenRenderer(sink.config.notifiers[0])})
    broken.handle([outcome("train-job", CRIT, at(0), summary="job 4242 FAILED")], at(0))
    broken.flush(at(0))
    assert lines(tmp_path, "log")[-1] == "CRITICAL: train-job: job 4242 FAILED"
