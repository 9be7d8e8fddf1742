"""Hypothesis strategies for whole watchdogs.toml files, built from the option declarations.

Each option's kind (its `kind_name`) picks a strategy of plausible values, edge cases
(0s, 10**20 days, a bare "80", a file where a folder is wanted, NUL, "..") and, now and
then, junk of the wrong TOML type. Paths are relative to the config's folder, where
`make_site` lays out the files the paths name.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from watchdogs.config import sections
from watchdogs.config.options import Option, kind_name
from watchdogs.plugins import CHECKS_GROUP, NOTIFIERS_GROUP, load_group

PATHS = ("state", "sub/state", "cron.d", "templates", "file.txt", "nope/deeper", "dangling",
         "a\0b", "", "..", "/etc/passwd", "/proc/self/nope", "~/.no-such-watchdogs-dir/x",
         "log.txt", "*.log")
CHANNELS = ("n0", "n1", "missing")
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_junk = st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(), st.booleans(), _text,
                  st.lists(st.integers(0, 9), max_size=2))
_units = st.sampled_from(["ms", "s", "m", "h", "d", "w", "", "x"])
_amount = st.one_of(st.integers(0, 1000), st.sampled_from([0, 10**20, 10**400]))
_size_units = st.sampled_from(["", "B", "K", "KiB", "G", "GB", "TiB", "%", "i"])


def make_site(root: Path) -> None:
    """The files the generated paths point at."""
    for folder in ("state", "templates", "cron.d/cron.hourly"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "file.txt").write_text("not a folder\n")
    (root / "log.txt").write_text("step 12\n")
    (root / "dangling").symlink_to(root / "no-such-target")
    dropin = root / "cron.d" / "cron.hourly" / "hello"
    dropin.write_text("#!/bin/sh\necho 'OK - hello'\n")
    dropin.chmod(0o700)


def _good(kind: Any) -> st.SearchStrategy[Any]:
    name = kind_name(kind)
    if name == "duration":
        return st.builds(lambda n, u: f"{n}{u}", _amount, _units)
    if name in ("size", "limit"):
        return st.one_of(st.builds(lambda n, u: f"{n}{u}", _amount, _size_units), st.integers(0, 10**6))
    if name == "count":
        return st.one_of(st.integers(0, 10**7), st.builds(lambda n, u: f"{n}{u}", _amount,
                                                           st.sampled_from(["", "k", "M"])))
    if name == "percent":
        return st.builds(lambda n: f"{n}%", st.integers(0, 150))
    if name == "integer":
        low = getattr(kind, "minimum", 0)
        high = getattr(kind, "maximum", None) or low + 100
        return st.integers(low - 1, high + 1)
    if name == "number":
        return st.floats()
    if name == "boolean":
        return st.booleans()
    if name == "path":
        return st.sampled_from(PATHS)
    if name == "regex":
        return st.sampled_from([r"step (\d+)", "x", "(", "((a))", ".*"])
    if name == "choice":
        return st.sampled_from([*getattr(kind, "allowed", ()), "nope"])
    if name in ("name", "slurm_name", "string"):
        return st.one_of(_text, st.sampled_from(["a/b", "wd-cron", ".", "x" * 200, "ok name"]))
    if name == "string_list":
        return st.one_of(_text, st.lists(_text, max_size=3))
    if name == "notify_route":
        names = st.lists(st.sampled_from(CHANNELS), min_size=1, max_size=2)
        return st.one_of(names, st.fixed_dictionaries({}, optional={"warning": names, "critical": names}))
    return _junk


_TAME = {
    "duration": st.sampled_from(["1s", "2s", "90s", "5m", "1h30m", "3650d"]),
    "size": st.sampled_from(["0B", "1B", "4096B", "500GiB", "1.5TB", "8EiB"]),
    "limit": st.sampled_from(["0%", "1%", "50%", "100%", "1B", "800G"]),
    "count": st.sampled_from([0, 1, 3000000, "3M"]),
    "percent": st.sampled_from(["0%", "1%", "100%"]),
    "number": st.sampled_from([0, -1, 0.5, 1e300]),
    "path": st.sampled_from(["state", "sub/state", "cron.d", "templates", "log.txt", "nope/deeper",
                             "*.log"]),
    "regex": st.just(r"step (\d+)"),
    "notify_route": st.sampled_from([["n0"], {"critical": ["n0"]}]),
    "name": st.sampled_from(["ok name", "x" * 100, "é", "a.b"]),
    "slurm_name": st.sampled_from(["wd-cron", "a", "x" * 100, "a.b+c"]),
    "string": st.sampled_from(["x", "ok text", "é"]),
    "string_list": st.sampled_from(["x", ["a", "b"], ["*"]]),
}


def value(option: Option, tame: bool) -> st.SearchStrategy[Any]:
    """Wild: plausible values of the option's kind and edge cases, junk one time in five.
    Tame: values that should mostly validate, including edge cases that do."""
    name = kind_name(option.kind)
    if tame:
        if name == "integer":
            low = getattr(option.kind, "minimum", 0)
            return st.integers(low, getattr(option.kind, "maximum", None) or low + 100)
        return _TAME[name] if name in _TAME else _good(option.kind)
    return st.sampled_from([0, 1, 2, 3, 4]).flatmap(lambda i: _junk if i == 0 else _good(option.kind))


def table(options: Mapping[str, Option], fixed: Mapping[str, Any] | None = None,
          tame: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    optional = {k: value(o, tame) for k, o in options.items() if k not in (fixed or {})}
    return st.fixed_dictionaries({k: st.just(v) for k, v in (fixed or {}).items()}, optional=optional)


TAME_FIXED: dict[str, dict[str, Any]] = {
    "job": {"job_name": "wd-probe-job", "job_regex": None, "resubmit": None, "kill_switch": None},
    "log_stale": {"path": "log.txt", "job": None},
    "nodes": {"job": None},
    "logfile": {"path": "alerts.log"},
    "disk": {"path": ".", "checkpoint_dir": None, "warn": "85%", "crit": "95%",
             "warn_days": None, "crit_days": None},
}
"""Tame tables of these types: keys fixed (None: left out) so cross-key rules mostly hold."""


def _plugins(group: str, kinds: tuple[str, ...], prefix: str, common: Mapping[str, Option],
             tame: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    registry = load_group(group)
    def one(type_name: str, index: int) -> st.SearchStrategy[dict[str, Any]]:
        cls = registry.classes[type_name]
        fixed = {"name": f"{prefix}{index}", "type": type_name}
        own = TAME_FIXED.get(type_name, {}) if tame else {}
        return st.tuples(table(common, fixed, tame), table(cls.options, own, tame)).map(
            lambda t: {k: v for k, v in {**t[0], **t[1]}.items() if v is not None})
    if tame and group == NOTIFIERS_GROUP:
        return st.lists(st.sampled_from(kinds), min_size=1, max_size=2).flatmap(
            lambda types: st.tuples(*(one(t, i) for i, t in enumerate(types))).map(list))
    return st.lists(st.sampled_from(kinds), max_size=2).flatmap(
        lambda types: st.tuples(*(one(t, i) for i, t in enumerate(types))).map(list))


def configs(checks: tuple[str, ...] = ("disk", "log_stale", "job", "nodes"),
            channels: tuple[str, ...] = ("logfile", "console")) -> st.SearchStrategy[dict[str, Any]]:
    """Half wild, half tame (see `value`)."""
    return st.booleans().flatmap(lambda tame: _config(checks, channels, tame))


def _config(checks: tuple[str, ...], channels: tuple[str, ...], tame: bool
            ) -> st.SearchStrategy[dict[str, Any]]:
    scheduler = st.one_of(st.just({}), table(sections.SCHEDULER, tame=tame)).map(
        lambda t: {"state_dir": "state", **t} if tame or "state_dir" not in t else t)
    return st.fixed_dictionaries({
        "scheduler": scheduler,
        "cron": table(sections.CRON, tame=tame),
        "alerts": table(sections.ALERTS, tame=tame),
        "check": _plugins(CHECKS_GROUP, checks, "c", sections.CHECK_COMMON, tame),
        "notify": _plugins(NOTIFIERS_GROUP, channels, "n", sections.NOTIFY_COMMON, tame),
    })


# -- TOML writing (tomllib only reads) ----------------------------------------------------
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v) if -2**63 <= v < 2**63 else json.dumps(str(v))
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_string(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def _string(v: str) -> str:
    return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")


def to_toml(config: Mapping[str, Any]) -> str:
    lines = []
    for name in ("scheduler", "cron", "alerts"):
        lines.append(f"[{name}]")
        lines += [f"{_string(k)} = {_toml_value(v)}" for k, v in config[name].items()]
    for name in ("check", "notify"):
        for entry in config[name]:
            lines.append(f"[[{name}]]")
            lines += [f"{_string(k)} = {_toml_value(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"
