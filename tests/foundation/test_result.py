from __future__ import annotations

from watchdogs.result import Status, parse_plugin_output, worst


def test_plugin_exit_codes_map_to_statuses_and_others_are_unknown() -> None:
    assert parse_plugin_output(0, "fine").status is Status.OK
    assert parse_plugin_output(2, "bad").status is Status.CRITICAL
    odd = parse_plugin_output(127, "sh: not found")
    assert odd.status is Status.UNKNOWN
    assert odd.summary == "exit 127: sh: not found"


def test_first_line_is_summary_and_perfdata_follows_the_bar() -> None:
    out = ("DISK OK - free space: / 3326 MB (56%); | /=2643MB;5948;5958;0;5968 'my disk'=12%;80;90\n"
           "detail one\n"
           "detail two | extra=5s;1;2\n"
           "more=3\n")
    result = parse_plugin_output(0, out)
    assert result.summary == "DISK OK - free space: / 3326 MB (56%);"
    assert result.details == ("detail one", "detail two")
    labels = {m.label: m for m in result.metrics}
    assert labels["/"].value == 2643 and labels["/"].unit == "MB" and labels["/"].warn == "5948"
    assert labels["my disk"].value == 12 and labels["my disk"].unit == "%"
    assert labels["extra"].unit == "s" and labels["more"].value == 3


def test_empty_output_still_gives_a_summary() -> None:
    assert parse_plugin_output(1, "").summary == "no output (exit 1)"
    killed = parse_plugin_output(137, "").summary
    assert killed == "no output (exit 137 (a process killed by signal 9 (KILL)))"


def test_render_round_trips_through_the_parser() -> None:
    original = parse_plugin_output(1, "WARN - x | a=1;2;3 b=4s\nline")
    again = parse_plugin_output(1, original.render())
    assert again == original


def test_unknown_ranks_above_warning_and_below_critical() -> None:
    assert worst([Status.OK, Status.UNKNOWN, Status.WARNING]) is Status.UNKNOWN
    assert worst([Status.UNKNOWN, Status.CRITICAL]) is Status.CRITICAL
    assert worst([]) is Status.OK


def test_every_text_field_of_a_result_is_storable_and_one_line_at_the_seam() -> None:
    """A lone surrogate (a byte that was not UTF-8, from a file name or JSON) becomes \\xNN;
    a one-line text's control characters and line breaks are shown, never obeyed."""
    from watchdogs.result import BadNode, CheckResult, JobLook, Metric, Notice

    result = CheckResult(Status.CRITICAL, "caf\udce9\nCRITICAL forged", ("a\x1b[2J\udcff", "\udcc0\udcaf"),
                         context={"job\udce9": "n\u202ex\udce9"}, fingerprint="fp\udce9",
                         notices=(Notice("s\r\udce9", ("d\n",)),), metrics=(Metric("l\udce9", 1.0),))
    assert result.summary == "caf\\xe9\\nCRITICAL forged"
    assert result.details == ("a\\x1b[2J\\xff", "\\xc0\\xaf")
    assert result.context == {"job\\xe9": "n\\u202ex\\xe9"}
    assert result.fingerprint == "fp\\xe9" and result.metrics[0].label == "l\\xe9"
    assert result.notices[0].summary == "s\\r\\xe9" and result.notices[0].details == ("d\\n",)
    assert BadNode("n1", "drained", "caf\udce9\x1b").reason == "caf\\xe9\\x1b"
    assert JobLook("queued", "4\udce9", reason="r\n").job_id == "4\\xe9"
    for text in (result.summary, *result.details, result.render()):
        text.encode("utf-8")


def test_clean_text_passes_the_seam_untouched_so_keys_stay_the_same() -> None:
    """Plain ASCII and valid Unicode are the very same objects afterwards (nothing copied),
    and an item id or fingerprint keeps its control characters' keys: only the texts a
    person reads are escaped, so an alert opened before keeps its id."""
    from datetime import datetime, timezone

    from watchdogs.result import CheckResult
    from watchdogs.sink import ItemOutcome

    summary, details, context = "job 42 FAILED (exit 1)", ("a", "ü 训练"), {"job": "42"}
    result = CheckResult(Status.CRITICAL, summary, details, context=context, fingerprint="x\ny")
    assert result.summary is summary and result.details is details and result.context is context
    assert result.fingerprint == "x\ny"
    now = datetime.now(timezone.utc)
    item = "watchdogs:refused:/c/cron.hourly/a\nb"
    outcome = ItemOutcome(item, "dropin", result, now, now, runbook="mv a\nb c", log="/l/caf\udce9")
    assert outcome.item is item and outcome.runbook == "mv a\\nb c" and outcome.log == "/l/caf\\xe9"
    assert ItemOutcome("cron.hourly/caf\udce9", "dropin", result, now, now).item == "cron.hourly/caf\\xe9"


def test_bytes_from_outside_are_decoded_once_with_every_byte_visible() -> None:
    import os

    from watchdogs.textsafe import from_bytes, from_os, one_line, visible

    for raw in (b"caf\xe9", b"\xff\xfe", b"x\x80y", b"\xc0\xaf", b"ok\xed\xa0\x80", b"\xf4\x90\x80\x80"):
        shown = from_bytes(raw)
        assert shown == from_os(os.fsdecode(raw)) == visible(os.fsdecode(raw)), raw
        shown.encode("utf-8")
        assert "\\x" in shown
    assert from_os("\ud800 \udfff") == "\\ud800 \\udfff"  # JSON's lone surrogates that stand for no byte
    assert one_line("caf\udce9\n") == "caf\\xe9\\n"
    text = "plain ASCII"
    assert from_os(text) is text and visible(text) is text
