"""Values that used to pass `validate` and then break `run`, and secrets written into the
config: each gets one clear line naming file, table, key and what was expected, and a
secret's value is never printed (validate, --json, the scheduler's own output)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.foundation.inprocess import cli
from tests.helpers import wait_for


def watchdogs(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=60, cwd=config.parent)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("x\n")
    return tmp_path


DISK = '[[check]]\nname = "d"\ntype = "disk"\npath = "."\n'


@pytest.mark.parametrize("toml, table, key, expected", [
    ('[scheduler]\ntick = "0s"\n', "[scheduler]", "tick", "at least 1s"),
    ('[cron]\nhourly = "0s"\n', "[cron]", "hourly", "at least 1s"),
    ('[cron]\nhourly = "99999999999999999999d"\n', "[cron]", "hourly", "at most 10 years"),
    ('[scheduler]\ndropin_timeout = "999999999999d"\n', "[scheduler]", "dropin_timeout",
     "at most 10 years"),
    (DISK + 'timeout = "0s"\n', 'check "d"', "timeout", "at least 1ms"),
    (DISK + 'probe_timeout = "3650d"\n', 'check "d"', "probe_timeout", "at most 1d for a timeout"),
    ('[scheduler]\nstate_dir = "a-file"\n', "[scheduler]", "state_dir", "a folder (this is a file)"),
    ('[scheduler]\njob_name = "a/b"\n', "[scheduler]", "job_name", "a job name of letters"),
    ('[scheduler]\njob_name = "x,y"\n', "[scheduler]", "job_name", "a job name of letters"),
    ('[alerts]\ntemplates = "no-such-folder"\n', "[alerts]", "templates", "an existing folder"),
    (DISK + 'warn = "95%"\ncrit = "90%"\n', 'check "d"', "warn", "a value below crit ('90%')"),
    (DISK + 'crit = "70%"\n', 'check "d"', "warn", "a value below crit ('70%')"),
    (DISK + 'warn_days = 1\ncrit_days = 7\n', 'check "d"', "warn_days", "a value above crit_days (7)"),
    ('[scheduler]\nstop_file = "a\\u0000b"\n', "[scheduler]", "stop_file", "without NUL"),
    (DISK + 'warn = "80"\n', 'check "d"', "warn", 'a bare number is refused: write "80%" for a percentage'),
    (DISK + 'warn = 80\n', 'check "d"', "warn", "a size with its unit"),
    (DISK + 'bytes_limit = "99999999999999999999999999EiB"\n', 'check "d"', "bytes_limit", "at most 8EiB"),
    (DISK + 'warn_days = nan\n', 'check "d"', "warn_days", "a finite number"),
    ('[[check]]\nname = "a/b"\ntype = "disk"\npath = "."\n', 'check "a/b"', "name", "without '/'"),
])
def test_a_value_run_cannot_take_is_refused_by_validate(site: Path, toml: str, table: str, key: str,
                                                        expected: str) -> None:
    config = site / "watchdogs.toml"
    config.write_text(toml)
    code, out, err, tracebacks = cli("validate", "--config", str(config))
    assert code == 2, out
    head, *lines = out.splitlines()
    assert head in ("1 problem in config:", "2 problems in config:"), out
    line = next(x for x in lines if f"key {key!r}" in x)
    assert line.startswith(f"  {config}: {table}: key {key!r} = ") and expected in line, line
    assert not tracebacks


def test_non_utf8_bytes_name_the_line_and_column(site: Path) -> None:
    config = site / "watchdogs.toml"
    config.write_bytes(b'[scheduler]\njob_name = "caf\xe9"\n')
    code, out, _, _ = cli("validate", "--config", str(config))
    assert code == 2
    assert out.splitlines() == ["1 problem in config:", f"  {config}: line 2, column 16: "
                                        "not UTF-8 text (byte 0xe9); TOML files are UTF-8"]


def test_a_toml_syntax_error_says_line_column_and_what_is_wrong(site: Path) -> None:
    config = site / "watchdogs.toml"
    config.write_text('[scheduler]\ntick = 10s\n')
    out = cli("validate", "--config", str(config))[1]
    assert out.splitlines()[1] == (f"  {config}: line 2, column 10: TOML syntax error: expected "
                                           "newline or end of document after a statement, in: tick = 10s")


SECRETS = {
    "password": "hunter2-hunter2",
    "token": "xoxb-1234-abcdefSECRET",
    "webhook_url": "https://hooks.slack.com/services/T00/B00/SECRETSECRETSECRET",
    "auth_token": "twilio-auth-SECRET-0001",
}


@pytest.mark.parametrize("channel, key", [("email", "password"), ("slack", "token"),
                                          ("slack", "webhook_url"), ("sms", "auth_token")])
def test_a_secret_written_into_the_config_is_refused_without_being_printed(site: Path, channel: str,
                                                                          key: str) -> None:
    secret = SECRETS[key]
    config = site / "watchdogs.toml"
    config.write_text(f'[scheduler]\nstate_dir = "state"\n[[notify]]\nname = "n"\ntype = "{channel}"\n'
                      f'{key} = "{secret}"\n')
    text = cli("validate", "--config", str(config))
    as_json = cli("validate", "--json", "--config", str(config))
    for code, out, err, _ in (text, as_json):
        assert code == 2
        assert secret not in out + err
    problems = json.loads(as_json[1])["problems"]
    line = next(p for p in problems if f"key {key!r}" in p)
    assert f"key {key!r} = '***': expected no secret in the config: write it in a file or " \
           f"variable named by {key}_env or {key}_file" in line
    scheduler = _scheduler_output(config)  # the channel is left out, and said so in the log
    assert secret not in scheduler and "scheduling" in scheduler, scheduler
    status = watchdogs(config, "status")
    assert secret not in status.stdout + status.stderr
    # The config itself and its last good copy hold what the user wrote; nothing else may.
    written = [p for p in site.rglob("*") if p.is_file() and p.name not in
               ("watchdogs.toml", "last-good-config.toml", "scheduler.out")]
    assert not [p for p in written if secret in p.read_text(errors="replace")]


def _scheduler_output(config: Path) -> str:
    """What `watchdogs run` printed up to its first tick, then stopped with SIGTERM."""
    log = config.parent / "scheduler.out"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "watchdogs", "--config", str(config), "run"],
                                stdout=out, stderr=subprocess.STDOUT, cwd=config.parent)
    try:
        wait_for(lambda: "scheduling" in log.read_text() or proc.poll() is not None, timeout=60,
                 what="the scheduler to start")
    finally:
        proc.terminate()
        proc.wait(30)
    return log.read_text()


def test_a_token_shaped_value_under_any_key_is_masked(site: Path) -> None:
    config = site / "watchdogs.toml"
    config.write_text('[[notify]]\nname = "n"\ntype = "webhook"\n'
                      'url = "hooks.slack.com/services/T00/B00/SECRETSECRETSECRET"\n'
                      'headers = { Authorization = "Bearer abc.def.SECRET" }\n')
    out = cli("validate", "--config", str(config))[1]
    assert "SECRET" not in out, out
    assert "hooks.slack.com/services/***" in out
