"""Alert storm: 500 failing checks in one tick.

Measures, for the real sink (grouping, outbox in SQLite, real channels against local
servers: aiosmtpd for email, HTTP servers answering like Slack, Twilio and a webhook
receiver, a log file):
  - messages per channel,
  - time to render and enqueue (`handle`, one transaction),
  - time to drain the outbox (`flush`) to each channel, and to the local SMTP server alone,
  - a second tick with the same 500 still failing (flip detection: nothing to send).
and, in the same run, the alternative without grouping: one email per failing check,
rendered with the same templates and sent through the same channel to the same server.
The three runs (all channels, email only, one email per check) are interleaved, --repeat
rounds (>= 5), each from a fresh state database and fresh servers; min/median/max.

    .venv/bin/python benchmarks/alert_storm.py [--checks 500] [--repeat 5]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.notifiers.fakes

from _stats import Row, interleave, record, spread

from notifiers.render import Templates
from tests.notifiers.fakes import FakeHTTP, SmtpServer
from watchdogs.alerts import build_sink
from watchdogs.alerts.channels import build_notifier
from watchdogs.alerts.events import AlertEvent, Batch
from watchdogs.config import load_config
from watchdogs.result import CheckResult, Status
from watchdogs.sink import ItemOutcome
from watchdogs.state.store import StateStore

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
SID = "AC0123456789abcdef0123456789abcdef"


def channels_toml(smtp_port: int, slack: str, twilio: str, hook: str, only_email: bool) -> str:
    email = (f'[[notify]]\nname = "mail"\ntype = "email"\nhost = "127.0.0.1"\nport = {smtp_port}\n'
             'sender = "w@example.org"\nto = ["ops@example.org", "ml@example.org"]\n')
    if only_email:
        return email
    return email + (
        f'[[notify]]\nname = "slack"\ntype = "slack"\nwebhook_url_env = "BENCH_HOOK"\nbase_url = "{slack}"\n'
        f'[[notify]]\nname = "sms"\ntype = "sms"\naccount_sid = "{SID}"\nauth_token_env = "BENCH_TW"\n'
        f'from_number = "+15559990000"\nto = "+15550001111"\nbase_url = "{twilio}"\n'
        f'[[notify]]\nname = "hook"\ntype = "webhook"\nurl = "{hook}/alerts"\n'
        '[[notify]]\nname = "log"\ntype = "logfile"\npath = "train.log"\n')


def storm(n: int, when: datetime) -> list[ItemOutcome]:
    def result(i: int) -> CheckResult:
        return CheckResult(Status.CRITICAL if i % 5 else Status.WARNING, f"check {i} failing: disk 97% full",
                           ("detail line one", "detail line two"),
                           context={"partition": "debug", "path": f"/scratch/{i}"})
    return [ItemOutcome(f"check-{i:03d}", "check", result(i), when, when,
                        runbook="https://wiki.example.org/runbook") for i in range(n)]


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def grouped_run(n: int, only_email: bool) -> dict[str, object]:
    import os

    os.environ.update(BENCH_HOOK="https://hooks.slack.com/services/T1/B2/bench", BENCH_TW="bench-token")
    with tempfile.TemporaryDirectory() as tmp, SmtpServer() as smtp, FakeHTTP() as slack, \
            FakeHTTP() as twilio, FakeHTTP() as hook:
        twilio.default.status, twilio.default.body = 201, {"sid": "SM1", "status": "queued"}
        path = Path(tmp) / "watchdogs.toml"
        path.write_text('[scheduler]\nstate_dir = "state"\n[alerts]\ncluster = "bench"\n'
                        + channels_toml(smtp.port, slack.url, twilio.url, hook.url, only_email))
        config = load_config(path)
        sink = build_sink(config, StateStore(config.scheduler.state_dir))
        handle = timed(lambda: sink.handle(storm(n, T0), T0))
        per_channel = Counter(r[0] for r in sink.store.connection().execute("SELECT channel FROM outbox"))
        flush = timed(lambda: sink.flush(T0))
        second = timed(lambda: sink.handle(storm(n, T0 + timedelta(minutes=1)), T0 + timedelta(minutes=1)))
        queued_after_second = sink.store.connection().execute("SELECT COUNT(*) FROM outbox").fetchone()[0]
        received = {"mail": len(smtp.received), "slack": len(slack.seen), "sms": len(twilio.seen),
                    "hook": len(hook.seen)}
        return {"handle": handle, "flush": flush, "second_tick": second, "per_channel": dict(per_channel),
                "received": received, "queued_after_second": queued_after_second,
                "email_bytes": len(smtp.received[0].data) if smtp.received else 0}


def ungrouped_email_run(n: int) -> dict[str, float]:
    """The alternative: one email per failing check, same templates, same channel, same server."""
    with tempfile.TemporaryDirectory() as tmp, SmtpServer() as smtp:
        path = Path(tmp) / "watchdogs.toml"
        path.write_text(channels_toml(smtp.port, "", "", "", only_email=True))
        notifier = build_notifier(load_config(path).notifiers[0])
        templates = Templates()
        events = [AlertEvent(o.item, "alert", o.result.status, Status.OK, o.result.summary, T0, T0,
                             details=o.result.details, context=dict(o.result.context), runbook=o.runbook)
                  for o in storm(n, T0)]
        messages = []
        render = timed(lambda: messages.extend(
            notifier.render(Batch("mail", (e,), T0, "bench", "host", f"wd-{uuid.uuid4().hex}"), templates)
            for e in events))
        send = timed(lambda: [notifier.notify(m) for m in messages])
        assert len(smtp.received) == n
        return {"render": render, "send": send}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checks", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.checks
    full: list[dict[str, object]] = []
    email: list[dict[str, object]] = []
    alt: list[dict[str, float]] = []

    def run_full() -> float:
        full.append(grouped_run(n, only_email=False))
        return float(full[-1]["handle"]) + float(full[-1]["flush"])  # type: ignore[arg-type]  # floats

    def run_email() -> float:
        email.append(grouped_run(n, only_email=True))
        return float(email[-1]["handle"]) + float(email[-1]["flush"])  # type: ignore[arg-type]  # floats

    def run_alt() -> float:
        alt.append(ungrouped_email_run(n))
        return alt[-1]["render"] + alt[-1]["send"]
    totals = interleave({"full": run_full, "email": run_email, "alt": run_alt}, args.repeat, warmup=0)

    def ms(runs: list[dict], key: str) -> str:  # type: ignore[type-arg]  # mixed values
        return spread([float(r[key]) for r in runs]).fmt(1000, " ms", 0)

    print(f"alert storm: {n} failing checks in one tick, {args.repeat} interleaved rounds, "
          "median (min–max)\n")
    print(f"all five channels  messages queued per channel: {full[0]['per_channel']}")
    print(f"                   requests/messages received:  {full[0]['received']}")
    print(f"                   render + enqueue (handle):   {ms(full, 'handle')}")
    print(f"                   drain outbox (flush):        {ms(full, 'flush')}")
    print(f"                   2nd tick, still failing:     {ms(full, 'second_tick')}, "
          f"{full[0]['queued_after_second'] - sum(full[0]['per_channel'].values())} new messages")  # type: ignore[attr-defined, operator]  # an int and a dict
    print(f"email only         render + enqueue (handle):   {ms(email, 'handle')}")
    print(f"                   drain to local SMTP (flush): {ms(email, 'flush')} "
          f"(1 message, {float(email[0]['email_bytes']) / 1024:.0f} KiB)")  # type: ignore[arg-type]  # an int
    print(f"alternative:       render {n} separate emails:  {ms(alt, 'render')}")
    print(f"one email per check send {n} to local SMTP:    {ms(alt, 'send')} ({n} messages)")
    record(__file__, [Row(
        f"alert storm: {n} failing checks in one tick, email to a local SMTP server",
        "1 message per channel per tick", f"one email per failing check ({n} emails), interleaved",
        f"1 email, render+send {spread(totals['email']).fmt(1000, ' ms', 0)} vs "
        f"{spread(totals['alt']).fmt(1000, ' ms', 0)}; all five channels "
        f"{spread(totals['full']).fmt(1000, ' ms', 0)}",
        ".venv/bin/python benchmarks/alert_storm.py")])


if __name__ == "__main__":
    main()
