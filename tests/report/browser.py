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

from tests.helpers import wait_for

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


class DevTools:
    """Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
    messages ending in NUL, commands on fd 3, answers and events on fd 4), one page attached:
    what `--window-size` cannot do, device emulation (a phone's viewport, its pixel ratio and
    the page's viewport meta honoured), measuring in the page, and screenshots of a region."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        import os

        to_browser, self._out = os.pipe()
        self._in, from_browser = os.pipe()

        def fds() -> None:  # the child's fds 3 and 4, as Chromium expects them
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        argv = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, preexec_fn=fds,
                                      # 3 and 4 kept too: the fds are closed after preexec_fn runs
                                      pass_fds=(3, 4, to_browser, from_browser))
        os.close(to_browser)
        os.close(from_browser)
        self._reader = os.fdopen(self._in, "rb")
        self._writer = os.fdopen(self._out, "wb")
        self._next = 0
        self._session: str | None = None
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable")

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *_: object) -> None:
        self._writer.close()
        self._proc.terminate()
        self._proc.wait(timeout=30)
        self._reader.close()

    def _message(self) -> dict[str, Any]:
        raw = bytearray()
        while (byte := self._reader.read(1)) != b"\0":
            if not byte:
                raise AssertionError("chromium closed its DevTools pipe")
            raw += byte
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """The command's result (events that arrive meanwhile are dropped)."""
        self._next += 1
        command: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if self._session is not None:
            command["sessionId"] = self._session
        self._writer.write(json.dumps(command).encode() + b"\0")
        self._writer.flush()
        while (answer := self._message()).get("id") != self._next:
            continue
        if "error" in answer:
            raise AssertionError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer["result"]
        return result

    def open(self, page: Path, width: int, height: int, scale: float, mobile: bool) -> None:
        """Load `page` in a viewport of that size, as a phone (`mobile`) or a desktop shows it."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=scale, mobile=mobile)
        self.send("Page.navigate", url=page.as_uri())
        loaded = f"location.href === {json.dumps(page.as_uri())} && document.readyState === 'complete'"
        wait_for(lambda: self.evaluate(loaded), 30, 0.05, f"{page} loaded")

    def evaluate(self, expression: str) -> Any:
        answer = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression[:80]}...: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, out: Path, x: float, y: float, width: float, height: float) -> Path:
        """A region of the page (CSS pixels, at the device's pixel ratio) as a PNG."""
        import base64

        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": x, "y": y, "width": width, "height": height, "scale": 1})
        out.write_bytes(base64.b64decode(shot["data"]))
        return out
