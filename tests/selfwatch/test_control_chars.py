"""Control characters and sizes from outside: a drop-in's name, its first line, a 50 MB
line, a silence reason, an address in the config. Nothing forges a line in the logfile
channel, no escape sequence reaches a terminal, a mail or the logfile raw, every field is
bounded, and a header-bound value with CR/LF is refused at validate."""
from __future__ import annotations

import pytest

from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site, script
from tests.selfwatch.conftest import mail_config, mails

ESC = "\x1b"
FORGED = "2026-01-01T00:00:00+00:00 WATCHDOGS RESOLVED train"


def with_logfile(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp, tables=f'[[notify]]\nname = "log"\ntype = "logfile"\n'
                                   f'path = "{site.root / "alerts.log"}"\n')


def raw(text: str) -> list[str]:
    """The raw control characters in `text` that a terminal or a line-based log obeys."""
    return sorted({c for c in text if c in "\x1b\r\x9b\u202e" or (ord(c) < 32 and c not in "\n\t")})


@pytest.mark.timeout(120)
def test_a_drop_in_name_with_a_newline_is_refused_and_forges_no_line(site: Site, smtp: SmtpServer) -> None:
    with_logfile(site, smtp)
    marker = site.root / "ran"
    site.dropin(f"a\n{FORGED}", script(f"touch {marker}\necho 'CRITICAL - x'\nexit 2"))
    site.dropin("ok-name", script("echo 'CRITICAL - a real problem'\nexit 2"))
    site.dropin("check.sh", script(f"touch {marker}\nexit 0"))
    once = site.watchdogs("run", "--once")
    status = site.watchdogs("status")
    assert not marker.exists(), "a drop-in with a name cron would not run was run"
    log_lines = (site.root / "alerts.log").read_text().splitlines()
    assert log_lines and all(" WATCHDOGS " in line for line in log_lines)
    assert not any(line.startswith(FORGED) for line in log_lines), log_lines
    assert any("cron.hourly/ok-name" in line for line in log_lines)
    for out in (once.stdout + once.stderr, status.stdout):
        assert raw(out) == []
    # Each refusal says which characters and why, on one line of its own.
    refused = [line for line in status.stdout.splitlines() if "name not run" in line]
    assert len(refused) == 2, status.stdout
    assert any("\\n" in line and "WATCHDOGS RESOLVED" in line and "'\\n'" in line for line in refused)
    assert any("check.sh" in line and "'.'" in line for line in refused)


@pytest.mark.timeout(120)
def test_escape_sequences_from_a_drop_in_reach_no_mail_logfile_or_terminal_raw(
        site: Site, smtp: SmtpServer) -> None:
    with_logfile(site, smtp)
    site.dropin("painter", script(
        "printf 'CRITICAL - \\033[2J\\033[31mdisk gone\\033[0m\\r fine "
        "\\302\\233 \\342\\200\\256 x\\n'\nexit 2"))
    site.watchdogs("run", "--once")
    silence = site.watchdogs("silence", "cron.hourly/other", "--for", "1h",
                             "--reason", f"maintenance{ESC}]0;pwned{ESC}\\\nforged line")
    outputs = [site.watchdogs(*argv).stdout for argv in (["status"], ["alerts", "--history", "5"],
                                                        ["silences"])]
    outputs.append(silence.stdout)
    mail = smtp.received[0].data.decode().replace("\r\n", "\n")  # SMTP's own line ends
    logfile = (site.root / "alerts.log").read_text()
    for text in [mail, logfile, *outputs]:
        assert raw(text) == [], text
    assert "\\x1b[31mdisk gone" in logfile and "fine \\x9b \\u202e x" in mail  # shown, not lost
    assert "\\x1b[31mdisk gone" in mail
    assert "\\x1b[31mdisk gone" in outputs[0]
    silences = outputs[2].splitlines()
    assert len(silences) == 1
    assert "maintenance\\x1b]0;pwned" in silences[0] and "\\nforged line" in silences[0]


@pytest.mark.timeout(180)
def test_a_50_mb_line_becomes_a_bounded_alert_line(site: Site, smtp: SmtpServer) -> None:
    with_logfile(site, smtp)
    site.dropin("flood", script("printf 'CRITICAL - '\nhead -c 50000000 /dev/zero | tr '\\0' 'x'\n"
                                "echo\nexit 2"))
    once = site.watchdogs("run", "--once", timeout=150)
    status = site.watchdogs("status")
    assert max(len(line) for line in (once.stdout + once.stderr).splitlines()) < 6000
    lines = (site.root / "alerts.log").read_text().splitlines()
    flood = [line for line in lines if "cron.hourly/flood" in line]
    assert flood and max(len(line) for line in flood) < 6000, [len(x) for x in flood]
    assert "more characters)" in flood[0]
    assert max(len(line) for line in status.stdout.splitlines()) < 3000
    assert len(smtp.received[0].data) < 60_000


@pytest.mark.timeout(60)
def test_an_address_with_cr_lf_is_refused_at_validate_with_where(site: Site, smtp: SmtpServer) -> None:
    mail_config(site, smtp)
    text = site.config.read_text().replace('to = ["oncall@example.org"]',
                                           'to = ["a@x.org\\r\\nBcc: b@y.org"]')
    site.config.write_text(text)
    for argv in (["validate"], ["notify-test", "mail"], ["run", "--once"]):
        done = site.watchdogs(*argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        said = done.stdout + done.stderr
        assert str(site.config) in said and 'notify "mail"' in said and "key 'to'" in said
        assert "'\\r'" in said and "'\\n'" in said and raw(said) == []
    assert smtp.received == []


@pytest.mark.timeout(60)
def test_a_channel_that_failed_validation_is_reported_once(site: Site, smtp: SmtpServer) -> None:
    site.write_config()
    with site.config.open("a") as fh:
        fh.write('[alerts]\nnotify = { warning = ["log"], critical = ["log"] }\n'
                 '[[check]]\nname = "d"\ntype = "disk"\npath = "."\n'
                 'notify = { warning = ["log"], critical = ["log"], unknown = ["log"], resolved = ["log"] }\n'
                 '[[notify]]\nname = "log"\ntype = "email"\nsender = "wd@example.org"\n'
                 'to = ["not an address"]\n'
                 '[[check]]\nname = "e"\ntype = "disk"\npath = "."\nnotify = { warning = ["nosuch"] }\n')
    done = site.watchdogs("validate")
    problems = [line for line in done.stdout.splitlines() + done.stderr.splitlines() if line.startswith("  ")]
    assert done.returncode == 2
    assert len(problems) == 2, problems
    assert "key 'to'" in problems[0] and "nosuch" in problems[1]


@pytest.mark.timeout(120)
def test_alerts_names_the_killed_process_that_still_holds_a_message(site: Site) -> None:
    """`run --once` killed with SIGKILL while its webhook hangs (a server that accepts and
    never answers): the message stays leased to that pid until its budget runs out."""
    import os
    import signal
    import socket

    from tests.helpers import wait_for
    from tests.notifiers.fakes import Blackhole

    with Blackhole() as hole:
        site.write_config()
        with site.config.open("a") as fh:
            fh.write(f'[[notify]]\nname = "hook"\ntype = "webhook"\nurl = "http://127.0.0.1:{hole.port}/h"\n'
                     'timeout = "20s"\n')
        site.dropin("bad", script("echo 'CRITICAL - bad'\nexit 2"))
        proc = site.popen("run", "--once")
        wait_for(lambda: hole.accepted, timeout=60, what="the webhook's connection")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        done = site.watchdogs("alerts")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.strip().startswith("#"))
    assert f"being sent by pid {proc.pid} on {socket.gethostname()} since " in line, line
    assert "retried after " in line and "0 attempt(s), next in 0 s" not in line


@pytest.mark.timeout(120)
def test_an_error_no_retry_mends_is_told_once_at_once_and_not_retried_every_30_s(
        site: Site, smtp: SmtpServer) -> None:
    import time

    from tests.helpers import wait_for
    from tests.notifiers.fakes import FakeHTTP

    with FakeHTTP() as http:
        http.default.status = 400
        http.default.body = "unknown hook"
        mail_config(site, smtp, tables=f'[[notify]]\nname = "hook"\ntype = "webhook"\nurl = "{http.url}/h"\n')
        site.dropin("bad", script("echo 'CRITICAL - bad'\nexit 2"))
        proc = site.popen("run")  # the foreground scheduler, ticking every second
        try:
            wait_for(lambda: any("alert channel hook" in r.data.decode() for r in smtp.received),
                     timeout=60, what="the news that channel hook is broken")
            time.sleep(5)  # five more ticks: a retry every tick (or every 30 s) would show here
            alerts = site.watchdogs("alerts")
        finally:
            proc.terminate()
            proc.wait(20)
        tries = len(http.seen)
    told = [r for r in smtp.received if "alert channel hook" in r.data.decode()]
    assert len(told) == 1, "the broken channel is told once, at once"
    assert "HTTP 400" in told[0].data.decode()
    assert tries == 1, f"a permanent error was retried {tries} times within seconds"
    assert "next in 1 h" in alerts.stdout or "next in 59 min" in alerts.stdout, alerts.stdout


def forged_lines(text: str, forged: str) -> list[str]:
    """Lines of `text` that begin (after indentation) with the forged text: a line the
    outside text made, not the watchdog."""
    return [line for line in text.splitlines() if line.strip().startswith(forged)]


REASONS = [
    "x\nCRITICAL forged by a newline",
    "x\rCRITICAL forged by a carriage return",
    "x\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\ \u202edesrever\nCRITICAL forged with escapes",
    "x\u2028CRITICAL forged by a line separator\x85next line",
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("reason", REASONS, ids=["lf", "cr", "osc8-bidi", "ls-nel"])
def test_a_resolve_reason_with_line_breaks_or_escapes_forges_no_line_in_any_output(
        site: Site, smtp: SmtpServer, reason: str) -> None:
    with_logfile(site, smtp)
    site.dropin("bad", script("echo 'CRITICAL - bad'\nexit 2"))
    site.watchdogs("run", "--once")
    resolved = site.watchdogs("resolve", "cron.hourly/bad", "--reason", reason)
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    missing = site.watchdogs("resolve", "cron.hourly/\rbad\nCRITICAL forged", "--reason", reason)
    assert missing.returncode != 0
    acked = site.watchdogs("ack", "cron.hourly/\r*\nCRITICAL forged")
    outputs = {"resolve": resolved.stdout + resolved.stderr,
               "resolve (no match)": missing.stdout + missing.stderr,
               "ack": acked.stdout + acked.stderr}
    for argv in (["alerts"], ["alerts", "--history", "10"], ["status"], ["silences"]):
        done = site.watchdogs(*argv)
        outputs[" ".join(argv)] = done.stdout + done.stderr
    outputs["logfile"] = (site.root / "alerts.log").read_text()
    outputs["mail"] = "\n".join(mails(smtp)).replace("\r\n", "\n")  # SMTP's own line ends
    for where, text in outputs.items():
        assert forged_lines(text, "CRITICAL forged") == [], (where, text)
        assert raw(text) == [], (where, text)
        assert "\u2028" not in text and "\x85" not in text, where
    # Shown, not lost: the reason reaches the answer, the history and the RESOLVED message.
    shown = reason.split("CRITICAL forged")[0]
    for where in ("resolve", "alerts --history 10", "logfile", "mail"):
        assert "CRITICAL forged" in outputs[where], (where, outputs[where])
    assert "x\\" in outputs["resolve"] and shown.startswith("x")
