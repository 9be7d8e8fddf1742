"""Templates: shipped defaults, user overrides, a broken user template, the logfile lines."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from notifiers.render import Templates
from tests.notifiers.support import batch, channel, event, render

CONSOLE = """
[[notify]]
name = "con"
type = "console"
"""


def test_a_user_template_overrides_only_what_it_defines(tmp_path: Path) -> None:
    user = tmp_path / "tpl"
    user.mkdir()
    (user / "console.subject.j2").write_text("ALARM {{ batch.events|length }} on {{ batch.cluster }}")
    message = render(channel(tmp_path, CONSOLE), event(), user_dir=user)
    assert message.subject == "ALARM 1 on cl1"
    assert "what:  job 4242 FAILED (exit 1)" in message.text


def test_a_broken_user_template_falls_back_to_the_shipped_one(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    user = tmp_path / "tpl"
    user.mkdir()
    (user / "default.subject.j2").write_text("{{ batch.no_such_thing }}")
    message = render(channel(tmp_path, CONSOLE), event(), user_dir=user)
    assert message.subject.startswith("[watchdogs cl1] CRITICAL: train-job")
    assert "is broken" in caplog.text and caplog.records[0].levelno == logging.ERROR


def test_every_message_says_what_where_since_and_what_next() -> None:
    text = Templates().message(batch(event()), "console").text
    for needed in ("CRITICAL: train-job", "what:  job 4242 FAILED", "where: job=4242 partition=debug",
                   "since: 2024-05-01 11:53:00 UTC (7 min 00 s ago)", "next:  https://wiki.example.org/runbooks/oom",
                   "watchdogs silence ITEM"):
        assert needed in text


def test_a_resolution_says_how_long_it_was_failing() -> None:
    resolved = event(state="resolved", status="OK", previous="CRITICAL", summary="job 4242 RUNNING")
    message = Templates().message(batch(resolved), "console")
    assert message.subject == "[watchdogs cl1] RESOLVED: train-job - job 4242 RUNNING"
    assert "was failing since 2024-05-01 11:53:00 UTC (7 min 00 s)" in message.text
    assert message.severity == "resolved"


def test_logfile_appends_one_greppable_line_per_event(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 100 loss 2.1\n")
    notifier = channel(tmp_path, f'[[notify]]\nname = "log"\ntype = "logfile"\npath = "{log}"\n')
    events = [event(), event(item="scratch", status="WARNING", summary="91% full"),
              event(item="old", state="resolved", status="OK", summary="fine again")]
    notifier.notify(render(notifier, *events))
    lines = log.read_text().splitlines()
    assert lines[0] == "step 100 loss 2.1" and len(lines) == 4
    assert lines[1].startswith("2024-05-01T12:00:00+00:00 WATCHDOGS CRITICAL train-job [cl1] job 4242 FAILED")
    assert "job=4242 partition=debug" in lines[1] and "event=alert" in lines[1]
    assert " WATCHDOGS WARNING scratch " in lines[2] and " WATCHDOGS RESOLVED old " in lines[3]


def test_a_logfile_whose_folder_is_missing_says_so_with_the_fix_and_is_not_made(tmp_path: Path) -> None:
    """A missing folder may be a mount not back yet: the channel does not create it, and both
    the retry's error and doctor say which folder and how to make it."""
    from notifiers.base import TransportError
    from watchdogs.commands.doctor.reach import channel_reach

    folder = tmp_path / "my logs"
    notifier = channel(tmp_path, f'[[notify]]\nname = "log"\ntype = "logfile"\npath = "{folder}/a.log"\n')
    with pytest.raises(TransportError) as raised:
        notifier.notify(render(notifier, event()))
    said = f"the folder {folder} does not exist (create it: mkdir -p '{folder}')"
    assert said in raised.value.message and not raised.value.permanent
    assert not folder.exists()
    found = channel_reach(notifier, on_node=False)
    assert found.status.name == "CRITICAL" and said in found.summary and "notify-test log" in found.fix
    folder.mkdir()
    assert channel_reach(notifier, on_node=False).status.name == "OK"
