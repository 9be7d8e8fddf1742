"""Where the config comes from (--config, $WATCHDOGS_CONFIG, ./watchdogs.toml) and its
TOML, with a syntax or encoding error given as line, column and the offending line."""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from watchdogs.errors import ConfigError, ConfigProblem, WatchdogsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

ENV_VAR = "WATCHDOGS_CONFIG"
DEFAULT_NAME = "watchdogs.toml"


def find_config_path(explicit: str | os.PathLike[str] | None = None,
                     env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """--config, then $WATCHDOGS_CONFIG, then ./watchdogs.toml."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit).expanduser()
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR]).expanduser()
    candidate = (cwd or Path.cwd()) / DEFAULT_NAME
    if candidate.exists():
        return candidate
    raise WatchdogsError(f"no config: pass --config FILE, set ${ENV_VAR}, "
                         f"or create {DEFAULT_NAME} in {cwd or Path.cwd()}")


def parse_toml(source: bytes, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(source.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError([ConfigProblem(str(path), "", "", None, f"valid TOML ({exc})")]) from None


def read_toml(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WatchdogsError(f"{path}: config file not found") from None
    except OSError as exc:
        raise WatchdogsError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(data, exc.start)
        raise _syntax(path, f"line {line}, column {column}: not UTF-8 text (byte "
                            f"0x{data[exc.start]:02x}); TOML files are UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax(path, _toml_problem(str(exc), text)) from None
    except RecursionError:
        raise _syntax(path, "TOML syntax error: arrays or tables nested too deeply") from None


def _syntax(path: Path, text: str) -> ConfigError:
    return ConfigError([ConfigProblem(str(path), "", "", None, text)])


_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$|\s*\(at end of document\)$")


def _toml_problem(message: str, text: str) -> str:
    """tomllib's "Invalid value (at line 3, column 7)" as "line 3, column 7: TOML syntax
    error: invalid value, in: tick = 10s"."""
    match = _AT.search(message)
    what = message[:match.start()] if match else message
    what = what[:1].lower() + what[1:]
    if match and match.group(1):
        line_no = int(match.group(1))
        lines = text.splitlines()
        shown = lines[line_no - 1].strip() if 0 < line_no <= len(lines) else ""
        where = f"line {line_no}, column {match.group(2)}: "
        return f"{where}TOML syntax error: {what}" + (f", in: {shown[:120]}" if shown else "")
    if match:
        return f"at the end of the file: TOML syntax error: {what}"
    return f"TOML syntax error: {what}"


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1
