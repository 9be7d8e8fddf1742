"""Debian's headless `chromium` loading a page from a file, as a user opens the report:
what it printed to its console, which requests the page made (from Chromium's own NetLog),
the DOM after loading, and screenshots."""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         # Any name the page asked for would fail to resolve instead of reaching out.
         "--host-resolver-rules=MAP * ~NOTFOUND")


@dataclass(frozen=True)
class Loaded:
    dom: str
    console: list[str]
    """Lines Chromium logged from the page's console (errors, warnings, messages)."""
    requests: list[str]
    """Every URL the page itself asked for beyond the file (the browser's own update and
    account pings are not the page's and are left out)."""


def _run(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=120, check=True)


def load(page: Path, work: Path) -> Loaded:
    net = work / "netlog.json"
    done = _run(page, work / "profile", "--enable-logging=stderr", "--v=0", f"--log-net-log={net}",
                "--dump-dom")
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Loaded(done.stdout, console, _page_requests(net))


def screenshot(page: Path, out: Path, width: int, height: int) -> Path:
    _run(page, out.parent / f"profile-{width}", f"--screenshot={out}", f"--window-size={width},{height}")
    return out


def _events(netlog: Path) -> list[dict[str, Any]]:
    """The NetLog's events: one JSON object a line after `"events": [`. Read line by line,
    since Chromium may exit before it closes the list."""
    events = []
    for line in netlog.read_text().splitlines()[2:]:
        text = line.strip().rstrip(",").removesuffix("]")
        if text.startswith("{") and not text.startswith('{"constants"'):
            try:
                events.append(json.loads(text))
            except json.JSONDecodeError:
                continue  # the last, half-written line, or the trailing polledData
    return events


def _page_requests(netlog: Path) -> list[str]:
    found = []
    for event in _events(netlog):
        params = event.get("params", {})
        # A request started by a page opened from a file carries the file origin as its
        # network isolation key; the browser's own pings carry "null" or google.com.
        if "url" in params and "file://" in str(params.get("network_isolation_key", "")) \
                and not params["url"].startswith("file:"):
            found.append(params["url"])
    return sorted(set(found))
