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
