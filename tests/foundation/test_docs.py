"""The documentation site builds strictly, and its configuration reference names every key the
code declares: the top-level tables, the keys common to checks and channels, every built-in
check type's and channel's own keys, and every trainguard setting with its TRAINGUARD_* name.

The declarations are read here from the code itself, not from the generator
(docs/hooks/reference.py), so a key the generator skipped fails. A key table on a task page
may only name keys that exist (a renamed key fails there too)."""
from __future__ import annotations

import dataclasses
import html
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from trainguard.config import ENV_PREFIX, GuardConfig
from watchdogs.config import sections
from watchdogs.plugins import BUILTIN, CHECKS_GROUP, NOTIFIERS_GROUP

ROOT = Path(__file__).resolve().parents[2]


def _plugin(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def declared() -> dict[str, Mapping[str, Any]]:
    """Section anchor -> the keys declared for it."""
    found: dict[str, Mapping[str, Any]] = {
        "scheduler": sections.SCHEDULER, "cron": sections.CRON, "alerts": sections.ALERTS,
        "check": sections.CHECK_COMMON, "notify": sections.NOTIFY_COMMON}
    for type_name, target in BUILTIN[CHECKS_GROUP].items():
        found[f"check-{type_name}"] = _plugin(target).options
    for type_name, target in BUILTIN[NOTIFIERS_GROUP].items():
        found[f"notify-{type_name}"] = _plugin(target).options
    found["trainguard"] = {f.name: f for f in dataclasses.fields(GuardConfig)}
    return found


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return (site / "reference" / "index.html").read_text()


def section(page: str, anchor: str) -> str:
    """The HTML of one `## ... {#anchor}` section of the built page, up to the next one."""
    start = page.find(f'id="{anchor}"')
    assert start >= 0, f"the reference has no section #{anchor}"
    end = page.find("<h2", start)
    return page[start:end if end >= 0 else len(page)]


def keys_shown(page: str, anchor: str) -> set[str]:
    """The names in the first column of the section's table."""
    rows = re.findall(r"<tr>\s*<td><code>([^<]+)</code></td>", section(page, anchor))
    return {html.unescape(m) for m in rows}


@pytest.mark.parametrize("anchor", list(declared()))
def test_every_declared_key_is_in_the_built_reference(reference: str, anchor: str) -> None:
    missing = set(declared()[anchor]) - keys_shown(reference, anchor)
    assert missing == set(), f"declared but not in the reference's #{anchor}: {sorted(missing)}"


def test_the_reference_gives_each_trainguard_setting_its_environment_variable(reference: str) -> None:
    text = section(reference, "trainguard")
    for name in declared()["trainguard"]:
        if name != "policy":  # a Python object, not read from the environment (config_from)
            assert f"<code>{ENV_PREFIX}{name.upper()}</code>" in text


def test_a_key_left_out_of_the_reference_would_be_caught(reference: str) -> None:
    assert "no_such_key" not in keys_shown(reference, "check-disk")
    assert {"path", "warn", "crit"} <= keys_shown(reference, "check-disk")


def test_the_reference_shows_defaults_as_written_in_a_config(reference: str) -> None:
    row = re.search(r"<td><code>tick</code></td>(.*?)</tr>", section(reference, "scheduler"), re.S)
    assert row is not None and "<code>\"10s\"</code>" in row.group(1)


# ---- hand-written key tables on the task pages ----------------------------------------------

PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)


def table_keys(markdown: str) -> set[str]:
    """Backticked names in the first column of tables whose header's first cell is `key`,
    `setting` or `variable`-less (`| key | ...`)."""
    names: set[str] = set()
    in_table = False
    for line in markdown.splitlines():
        if re.match(r"^\|\s*(key|setting)\s*\|", line):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            in_table = False
        if in_table and not line.startswith("| ---"):
            first = line.split("|")[1]
            names |= {re.sub(r"^\[\w+\]\s*", "", n) for n in re.findall(r"`([^`]+)`", first)}
    return names


def every_key() -> set[str]:
    return {key for keys in declared().values() for key in keys}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_a_key_table_on_a_page_names_only_declared_keys(page: Path) -> None:
    unknown = {n for n in table_keys(page.read_text()) if n.split()[0] not in every_key()}
    assert unknown == set(), f"{page.name} documents keys the code does not declare: {sorted(unknown)}"


def test_a_renamed_key_in_a_page_table_would_be_caught() -> None:
    table = "| key | meaning |\n| --- | --- |\n| `max_pendng` | x |\n"
    assert table_keys(table) - every_key() == {"max_pendng"}
