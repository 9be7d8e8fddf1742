"""The configuration reference, generated from the option declarations while MkDocs builds.

Every key comes from the code that validates it: the top-level tables and the keys common to
every [[check]]/[[notify]] (watchdogs.config.sections), each built-in check type's and
channel's `options` table (watchdogs.plugins.BUILTIN), and trainguard's settings (the fields
of trainguard.config.GuardConfig, their `TRAINGUARD_*` names and the comment beside each
field). Nothing here is written by hand, so the reference cannot drift from the code;
tests/foundation/test_docs.py checks the built page against the declarations.

    python docs/hooks/reference.py     # prints the page's Markdown
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import re
import tokenize
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

PAGE = "reference.md"


@dataclasses.dataclass(frozen=True)
class Key:
    name: str
    kind: str
    default: str
    help: str
    env: str = ""


@dataclasses.dataclass(frozen=True)
class Table:
    title: str
    anchor: str
    intro: str
    keys: tuple[Key, ...]


# ---- the watchdog's keys -------------------------------------------------------------------

def _seconds(value: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if value >= size and value % size == 0:
            return f"{int(value // size)}{unit}"
    return f"{value:g}s"


def _kind(kind: Any) -> str:
    from watchdogs.config.options import kind_name

    name = kind_name(kind)
    if name == "choice":
        return "one of " + ", ".join(f'`"{a}"`' for a in kind.allowed)
    if name == "limit":
        return f"{kind_name(kind.absolute)} or percentage"
    if name == "integer":
        low, high = kind.minimum, kind.maximum
        return f"integer ≥ {low}" + (f", ≤ {high}" if high is not None else "")
    if name == "duration":
        minimum = getattr(kind, "minimum", 0.0)
        return "duration" + (f" ≥ {_seconds(minimum)}" if minimum >= 1 else "")
    words = {"string_list": "string or list of strings", "notify_route": "route (list, or table by severity)",
             "slurm_name": "Slurm job name", "name": "name", "http_url": "http(s) URL"}
    return words.get(name, name.replace("_", " "))


def _default(option: Any) -> str:
    from watchdogs.config.options import Limit, kind_name

    value = option.default
    if option.required:
        return "required"
    if value is None or value == ():
        return "—"
    if isinstance(value, Limit):
        return f'`"{value.percent:g}%"`' if value.percent is not None else f"`{value.amount:g}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if kind_name(option.kind) == "duration" and isinstance(value, (int, float)):
        return f'`"{_seconds(float(value))}"`'
    if kind_name(option.kind) == "percent":
        return f'`"{value:g}%"`'
    if isinstance(value, (tuple, list, frozenset, set)):
        return "`[" + ", ".join(f'"{v}"' for v in sorted(value)) + "]`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _keys(options: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> tuple[Key, ...]:
    keys = []
    for name, option in options.items():
        if defaults and name in defaults:
            option = dataclasses.replace(option, default=defaults[name])
        keys.append(Key(name, _kind(option.kind), _default(option), " ".join(option.help.split())))
    return tuple(keys)


def _plugin(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def watchdog_tables() -> Iterator[Table]:
    from watchdogs.config import sections
    from watchdogs.plugins import BUILTIN, CHECKS_GROUP, NOTIFIERS_GROUP

    yield Table("`[scheduler]`", "scheduler", "The scheduler job: where state lives, how often it ticks, "
                "timeouts, the chain's job name and its dead man's switch.", _keys(sections.SCHEDULER))
    yield Table("`[cron]`", "cron", "The periods of `cron.d/cron.hourly/`, `cron.daily/` and `cron.weekly/`.",
                _keys(sections.CRON))
    yield Table("`[alerts]`", "alerts", "Defaults for every check's alerts.", _keys(sections.ALERTS))
    yield Table("`[[check]]`: keys of every check", "check", "Every `[[check]]` table has these; the keys "
                "of its `type` follow in its own table below.", _keys(sections.CHECK_COMMON))
    for type_name, target in BUILTIN[CHECKS_GROUP].items():
        cls = _plugin(target)
        own = dict(getattr(cls, "common_defaults", {}))
        intro = f"`type = \"{type_name}\"`" + (
            "; its own defaults for common keys: " + ", ".join(
                f"`{k}` = {_default(dataclasses.replace(sections.CHECK_COMMON[k], default=v))}"
                for k, v in own.items()) if own else "") + "."
        yield Table(f"check type `{type_name}`", f"check-{type_name}", intro, _keys(cls.options))
    yield Table("`[[notify]]`: keys of every channel", "notify", "Every `[[notify]]` table has these; the "
                "keys of its `type` follow.", _keys(sections.NOTIFY_COMMON))
    for type_name, target in BUILTIN[NOTIFIERS_GROUP].items():
        cls = _plugin(target)
        yield Table(f"channel type `{type_name}`", f"notify-{type_name}", f'`type = "{type_name}"`.',
                    _keys(cls.options))


# ---- trainguard's settings -------------------------------------------------------------------

def _field_comments(cls: type) -> dict[str, str]:
    """The comment beside each field of a dataclass's source (what the field means), and the
    `# --- section ---` comment it sits under when it has none of its own."""
    source = inspect.getsource(cls)
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    found, section = {}, ""
    for number, line in enumerate(source.splitlines(), start=1):
        heading = re.match(r"\s*# ---\s*(.*?)\s*---", line)
        if heading:
            section = heading.group(1)
            continue
        match = re.match(r"\s{4}(\w+): [^=]+=", line)
        if match:
            found[match.group(1)] = comments.get(number, "") or f"({section})"
    return found


def trainguard_table() -> Table:
    from trainguard import config as tg

    comments = _field_comments(tg.GuardConfig)
    groups = (("_PATHS", "path"), ("_DURATIONS", 'duration (s or "5m")'),
              ("_SIZES", 'size (bytes or "12GiB")'), ("_INTS", "integer"), ("_BOOLS", "boolean"),
              ("_FLOATS", "number"))
    kinds = {name: kind for attr, kind in groups for name in getattr(tg, attr)}
    kinds["signals"] = "signal names (`USR1 TERM`)"
    keys = []
    for f in dataclasses.fields(tg.GuardConfig):
        value = f.default if f.default is not dataclasses.MISSING else None
        if f.name == "policy":
            kind, default, env = "Policy (Python only)", "the policy table", "—"
        else:
            kind, env = kinds.get(f.name, "string"), f"`{tg.ENV_PREFIX}{f.name.upper()}`"
            if f.name == "signals":
                default = "`" + " ".join(s.name.removeprefix("SIG") for s in value) + "`"
            elif value is None:
                default = "—"
            elif isinstance(value, bool):
                default = f"`{str(value).lower()}`"
            else:
                default = f"`{value:g}`" if isinstance(value, float) else f"`{value}`"
        keys.append(Key(f.name, kind, default, comments.get(f.name, ""), env))
    return Table("trainguard settings", "trainguard", "Keyword arguments of `config_from(...)` (and of "
                 "the integrations' callbacks), or environment variables `TRAINGUARD_<NAME>`.", tuple(keys))


# ---- the page ---------------------------------------------------------------------------------

HEADER = """# Configuration reference

*Generated from the option declarations when this site is built (`docs/hooks/reference.py`):
every key that `watchdogs validate` accepts, with its type, default and meaning.* How to use
them is on the task pages; how values are written (durations `"90s"`, `"5m"`, `"1h30m"`; sizes
with their unit `"500GiB"`; percentages `"80%"`; relative paths from the config's folder) is
in [Getting started](getting-started.md#configuration).

Check types and channels from other packages (entry points `watchdogs.checks`,
`watchdogs.notifiers`) declare their keys the same way; `watchdogs validate` checks them, but
they are not listed here.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def render(tables: list[Table]) -> str:
    out = [HEADER]
    out.append("\n".join(f"- [{t.title}](#{t.anchor})" for t in tables) + "\n")
    for table in tables:
        out.append(f"## {table.title} {{#{table.anchor}}}\n\n{table.intro}\n")
        if any(key.env for key in table.keys):
            out.append("| setting | environment | type | default | meaning |\n"
                       "| --- | --- | --- | --- | --- |")
            for key in table.keys:
                out.append(f"| `{key.name}` | {key.env} | {_cell(key.kind)} | {key.default} "
                           f"| {_cell(key.help)} |")
        else:
            out.append("| key | type | default | meaning |\n| --- | --- | --- | --- |")
            for key in table.keys:
                out.append(f"| `{key.name}` | {_cell(key.kind)} | {key.default} | {_cell(key.help)} |")
        out.append("")
    return "\n".join(out) + "\n"


def tables() -> list[Table]:
    return [*watchdog_tables(), trainguard_table()]


def page() -> str:
    return render(tables())


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated page (it exists only in the built site)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=page()))
    return files


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    print(page())
