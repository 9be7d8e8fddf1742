"""Every shipped template, rendered with worst-case inputs (long names, unicode, a 10 000-line
log, empty fields, every event state), against the rules of docs/alert-style.md that a
program can check: the subject's length and whole words, no empty `key=`, no raw seconds,
the log's last line present, the first line of the body telling the whole story."""
from __future__ import annotations

import re
from itertools import product

import pytest

from notifiers.render import Templates
from tests.notifiers.support import batch, event
from watchdogs.alerts.events import AlertEvent

LAST = "slurmstepd: error: *** JOB 9 ON node1 CANCELLED AT 2026-11-25T03:14:07 DUE TO TIME LIMIT ***"
LOG = ("last lines of /scratch/ü/训练-run/train-9.out:",
       *(f"step {i} loss {1 / (i + 1):.4f} 🚀" for i in range(10_000)), LAST)
LONG_ITEM = "cron.hourly/" + "very-long-drop-in-name-" * 8 + "χ"
LONG_SUMMARY = ("my-training-run-with-a-very-long-name-ω-训练 (job 9) hit its time limit of "
                "24 h 00 min at step 41,200, having saved at step 41,000 12 min 00 s before the end; "
                "ended 2026-11-25 03:14 UTC. Not resubmitted: no checkpoint was saved during this "
                "run, so it would redo the same work")
CHANNELS = ("console", "email", "slack", "sms", "logfile", "webhook", "apprise")
STATES = (("alert", "CRITICAL"), ("changed", "WARNING"), ("repeat", "UNKNOWN"),
          ("resolved", "OK"), ("notice", "OK"), ("test", "WARNING"))
SHOWS_DETAILS = ("console", "email", "slack", "webhook", "apprise")


def worst_cases() -> list[tuple[str, AlertEvent]]:
    cases = []
    for state, status in STATES:
        cases.append((f"{state}-log", event(item=LONG_ITEM, state=state, status=status,
                                            summary=LONG_SUMMARY, details=LOG, runbook=None,
                                            context={"job": "9", "nodes": "", "state": "GONE",
                                                     "partition": ""})))
        cases.append((f"{state}-empty", event(item="x", state=state, status=status, summary="",
                                              details=(), runbook=None, context={"nodes": ""},
                                              note="")))
    return cases


CASES = worst_cases()


@pytest.mark.parametrize(("channel", "case"), list(product(CHANNELS, range(len(CASES)))),
                         ids=[f"{c}-{CASES[i][0]}" for c, i in product(CHANNELS, range(len(CASES)))])
def test_every_template_keeps_the_style_rules_with_worst_case_inputs(channel: str, case: int) -> None:
    name, e = CASES[case]
    message = Templates().message(batch(e), channel, html=channel == "email")
    texts = [message.subject, message.text, message.html or ""]
    assert len(message.subject) <= 200
    assert "\n" not in message.subject
    if message.subject.endswith("…"):
        kept = message.subject.removesuffix("…").rstrip().split()[-1]
        # Cut at a word of the summary; only an item name longer than a subject by itself
        # (one "word" of 200+ characters) is cut inside, as there is no word to cut at.
        inside_item = e.item.startswith(kept.rstrip(":"))
        assert inside_item or re.search(rf"(^|\s){re.escape(kept)}(\s|[;:,.(]|$)", e.summary), message.subject
    for text in texts:
        assert not re.search(r'(?<![\w-])[a-z_]+=(?:\s|$|"")', text), f"an empty key= in {text[:300]!r}"
        assert not re.search(r"\b\d{3,}(\.\d+)? ?(s|sec|seconds)\b", text), "raw seconds"
    if name.endswith("-log"):
        if channel in SHOWS_DETAILS:
            assert LAST in message.text, f"{channel}: the log's last line is missing"
            assert "older lines not shown (the newest follow)" in message.text
            assert message.text.index("older lines not shown") < message.text.index(LAST)
        if channel == "logfile":
            assert f'log_end="{LAST}"' in message.text
        if channel == "email":
            assert LAST in (message.html or "")
    if channel in ("console", "email") and e.summary:
        assert e.summary in message.text.splitlines()[0], "the first line is the whole story"


def test_a_test_message_is_not_counted_as_a_problem() -> None:
    e = event(item="notify-test", state="test", status="WARNING", summary="channel mail works")
    message = Templates().message(batch(e, event(item="notify-test2", state="test")), "console")
    assert "problem" not in message.text.splitlines()[0]
    assert "2 test messages" in message.text.splitlines()[0]
