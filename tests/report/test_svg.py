"""The report's charts and forecast line as pure functions: points, axes, levels, escaping."""
from __future__ import annotations

import re
import time

from watchdogs.report import svg
from watchdogs.report.forecastline import forecast_line
from watchdogs.units import format_size

HOUR, DAY = 3600.0, 86400.0
T0 = 1_790_000_000.0


def _points(svg_text: str) -> list[list[str]]:
    return [p.split() for p in re.findall(r' points="([^"]*)"', svg_text)]


def test_line_chart_draws_one_point_per_reading_with_labelled_axes() -> None:
    readings = tuple((T0 + i * 600, 1e9 + i * 1e8) for i in range(12))
    text = svg.line_chart([svg.Series("bytes used", readings)], title="scratch: bytes used",
                          y_label="bytes used", fmt=format_size, t0=readings[0][0], t1=readings[-1][0])
    assert [len(p) for p in _points(text)] == [12]
    assert 'data-points="12"' in text
    assert re.search(r'class="axis"[^>]*>bytes used<', text)
    assert f"local time ({svg.zone_name(T0)})" in text
    labels = re.findall(r'class="ylab"[^>]*>([^<]+)<', text)
    assert labels[0] == "0B" and labels[-1].endswith("GiB")
    hours = re.findall(r'class="xlab"[^>]*>([^<]+)<', text)
    assert hours and all(re.fullmatch(r"\d\d:\d\d", h) for h in hours)
    assert text.count('class="dot"') == 12


def test_a_long_history_is_thinned_but_keeps_its_last_reading() -> None:
    readings = tuple((T0 + i * 60, float(i)) for i in range(5000))
    kept = svg.thin(readings)
    assert len(kept) <= svg.MAX_POINTS and kept[0] == readings[0] and kept[-1] == readings[-1]
    text = svg.line_chart([svg.Series("x", readings)], title="t", y_label="y", fmt=str,
                          t0=T0, t1=readings[-1][0])
    assert [len(p) for p in _points(text)] == [len(kept)]
    assert 'class="dot"' not in text


def test_levels_and_marks_are_drawn_and_labelled() -> None:
    text = svg.line_chart([svg.Series("used", ((T0, 10.0), (T0 + HOUR, 20.0)))], title="t", y_label="y",
                          fmt=lambda v: f"{v:g} u", t0=T0, t1=T0 + 2 * HOUR,
                          levels=[svg.Level("warn 80 u", 80.0, "#d4a017"),
                                  svg.Level("crit 90 u", 90.0, "#c0392b")],
                          marks=[svg.Mark("crit Fri 10:00", T0 + 1.5 * HOUR, "#c0392b")])
    assert re.findall(r'class="levlab"[^>]*>([^<]+)<', text) == ["warn 80 u", "crit 90 u"]
    assert re.findall(r'class="marklab"[^>]*>([^<]+)<', text) == ["crit Fri 10:00"]
    assert re.findall(r'class="ylab"[^>]*>([^<]+)<', text)[-1] in ("100 u", "90 u")


def test_text_from_data_is_escaped() -> None:
    text = svg.status_strip([svg.Tick("CRITICAL", T0, T0 + 5, "<script>x</script> & co")],
                            title="a<b", t0=T0, t1=T0 + 60)
    assert "<script>" not in text and "&lt;script&gt;x&lt;/script&gt; &amp; co" in text
    assert 'aria-label="a&lt;b"' in text


def test_status_strip_draws_one_bar_per_run_coloured_by_result() -> None:
    ticks = [svg.Tick("OK", T0, T0 + 5, "fine"), svg.Tick("CRITICAL", T0 + 60, T0 + 61, "down"),
             svg.Tick(None, T0 + 120, T0 + 130, "interrupted")]
    text = svg.status_strip(ticks, title="t", t0=T0, t1=T0 + 180)
    assert re.findall(r'data-status="(\w+)"', text) == ["OK", "CRITICAL", "INTERRUPTED"]
    assert svg.STATUS_COLOURS["CRITICAL"] in text


def test_time_ticks_say_the_weekday_once_the_span_passes_a_day() -> None:
    short = svg.time_ticks(T0, T0 + 6 * HOUR)
    assert 2 <= len(short) <= 7 and all(re.fullmatch(r"\d\d:\d\d", label) for _, label in short)
    week = svg.time_ticks(T0, T0 + 7 * DAY)
    assert all(re.fullmatch(r"[A-Z][a-z]{2} \d\d:\d\d", label) for _, label in week)
    assert all(T0 <= t <= T0 + 7 * DAY for t, _ in week)
    assert time.localtime(short[0][0]).tm_sec == 0


def test_value_ticks_cover_the_range_in_round_steps() -> None:
    assert svg.value_ticks(0, 95) == [0, 20, 40, 60, 80, 100]
    assert svg.value_ticks(0, 0) == [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]


def test_forecast_line_follows_the_growth_and_says_when_it_crosses_warn_crit_and_full() -> None:
    # 10 units an hour for 3 hours, up to 50 of 100: warn 80 in 3 h, crit 90 in 4 h, full in 5 h.
    history = [(T0 + i * HOUR / 4, 20.0 + 2.5 * i) for i in range(13)]
    line = forecast_line(history, T0 + 3 * HOUR, DAY, 80.0, 90.0, 100.0)
    assert line is not None
    assert abs(line.rate * HOUR - 10.0) < 1e-9
    assert [(name, round((t - history[-1][0]) / HOUR, 6)) for name, t in line.crossings] == [
        ("warn", 3.0), ("crit", 4.0), ("full", 5.0)]
    assert line.start == history[-1] and line.end[0] >= T0 + 8 * HOUR


def test_no_forecast_line_before_an_hour_of_history_or_without_a_capacity() -> None:
    minutes = [(T0 + i * 60, float(i)) for i in range(30)]
    assert forecast_line(minutes, T0 + 1800, DAY, 80.0, 90.0, 100.0) is None
    hours = [(T0 + i * HOUR, float(i)) for i in range(3)]
    assert forecast_line(hours, T0 + 2 * HOUR, DAY, None, None, None) is None
    shrinking = [(T0 + i * HOUR, 50.0 - i) for i in range(3)]
    found = forecast_line(shrinking, T0 + 2 * HOUR, DAY, 80.0, 90.0, 100.0)
    assert found is not None and found.crossings == ()


def test_a_bytes_axis_steps_round_in_its_binary_unit() -> None:
    gib = 1024.0 ** 3
    text = svg.line_chart([svg.Series("used", ((T0, 40 * gib), (T0 + HOUR, 44 * gib)))], title="t",
                          y_label="bytes used", fmt=format_size, t0=T0, t1=T0 + HOUR,
                          levels=[svg.Level("crit", 91.3 * gib, "#c0392b")], unit=gib)
    assert re.findall(r'class="ylab"[^>]*>([^<]+)<', text) == [
        "0B", "20.0GiB", "40.0GiB", "60.0GiB", "80.0GiB", "100.0GiB"]


def test_a_count_axis_steps_in_whole_units_without_repeated_labels() -> None:
    counts = ((T0, 0.0), (T0 + HOUR, 1.0), (T0 + 2 * HOUR, 2.0))
    text = svg.line_chart([svg.Series("drained", counts)], title="t", y_label="nodes",
                          fmt=lambda v: f"{v:.0f}", t0=T0, t1=T0 + 2 * HOUR, whole=True)
    assert re.findall(r'class="ylab"[^>]*>([^<]+)<', text) == ["0", "1", "2"]


def test_checkpoints_are_dots_without_a_line_and_marks_near_the_axis_are_labelled_to_their_right() -> None:
    steps = svg.Series("step", ((T0, 0.0), (T0 + HOUR, 100.0)))
    saved = svg.Series("checkpoint saved", ((T0 + 600, 20.0), (T0 + 1200, 40.0)), line=False)
    text = svg.line_chart([steps, saved], title="t", y_label="step", fmt=str, t0=T0, t1=T0 + HOUR,
                          marks=[svg.Mark("requeued 10:01", T0 + 60, "#d4a017"),
                                 svg.Mark("requeued 10:50", T0 + 3000, "#d4a017")])
    assert re.findall(r'data-label="([^"]+)"', text) == ["step", "checkpoint saved", "checkpoint saved"]
    assert text.count('<circle class="point" data-label="checkpoint saved"') == 2
    near, far = re.findall(r'<text class="marklab"[^>]*>', text)
    assert "text-anchor: start" in near and "text-anchor" not in far
