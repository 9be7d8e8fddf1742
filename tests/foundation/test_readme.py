"""The README and every page of the docs site show only what exists: each `watchdogs <command>`
they show is a command, each `make <target>` a Makefile target, and each ```toml block a
config that validates. The README stays a front page: at most 20 KB.

A ```toml block validates as it stands, after a minimal base is added for what it leaves
out (a state_dir, a channel). A block that is deliberately a fragment says so in an HTML
comment on the line before it: `<!-- partial: why -->`; it must still parse as TOML.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from watchdogs.commands import COMMANDS
from watchdogs.config import load_config
from watchdogs.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# Every page a user reads: the README, trainguard's (its PyPI page) and the site's Markdown
# (docs/hooks holds code).
PAGES = [README, ROOT / "trainguard" / "README.md",
         *sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)]


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    text: str
    partial: bool


def blocks(markdown: str) -> list[Block]:
    """The fenced code blocks, with their language and whether a `<!-- partial` comment precedes."""
    found, lines, i = [], markdown.splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)", lines[i])
        if fence is None:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][len(fence.group(1)):])
            i += 1
        before = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        partial = before.startswith("<!-- partial")
        found.append(Block(start + 1, fence.group(2), "\n".join(body) + "\n", partial))
        i += 1
    return found


def code_text(markdown: str) -> str:
    """Everything a user might type: fenced blocks and `inline code`."""
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", markdown, flags=re.S))
    return "\n".join([b.text for b in blocks(markdown)] + inline)


def subcommands() -> set[str]:
    """Every command the parser lists: the command table it is built from (test_cli_imports
    checks that each command's module registers what the table names)."""
    return set(COMMANDS)


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for line in re.findall(r"^([\w./ -]+):(?!=)", text, flags=re.M) for t in line.split()}


# `watchdogs <word>` at a command's start: after a prompt, a path, a pipe, `$`, or a line start.
_COMMAND = re.compile(r"(?:^|[\s/$(|;&])watchdogs[ \t]+([a-z][a-z-]*)\b", re.M)
_MAKE = re.compile(r"(?:^|[\s$(|;&])make[ \t]+([a-z][\w-]*)", re.M)
# Words after "watchdogs" in code that are not commands: messages the watchdog sends.
_NOT_COMMANDS = {"cannot"}


def readme_commands(markdown: str) -> set[str]:
    return {m for m in _COMMAND.findall(code_text(markdown)) if m not in _NOT_COMMANDS}


def test_the_readme_shows_commands_and_make_targets() -> None:
    text = README.read_text()
    assert {"validate", "start", "status", "run"} <= readme_commands(text)
    assert {"demo", "test", "install"} <= set(_MAKE.findall(code_text(text)))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_watchdogs_command_a_page_shows_exists(page: Path) -> None:
    missing = readme_commands(page.read_text()) - subcommands()
    assert missing == set(), f"{page.name} shows `watchdogs {sorted(missing)}`, not commands of the CLI"


def test_the_readme_is_a_front_page_of_at_most_20_kb() -> None:
    assert len(README.read_bytes()) <= 20 * 1024


def test_a_made_up_command_would_be_caught() -> None:
    assert readme_commands("run `watchdogs frobnicate --now`\n") - subcommands() == {"frobnicate"}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_make_target_a_page_shows_exists(page: Path) -> None:
    shown = set(_MAKE.findall(code_text(page.read_text())))
    assert shown - make_targets() == set()


def base_for(snippet: str, tmp_path: Path) -> str:
    """The minimal rest of a config that a snippet leaves out."""
    parsed = tomllib.loads(snippet)
    base = []
    if "scheduler" not in parsed:
        base.append(f'[scheduler]\nstate_dir = "{tmp_path / "state"}"\n')
    if "notify" not in parsed:
        base.append('[[notify]]\nname = "console"\ntype = "console"\n')
    return "\n".join(base)


TOML_BLOCKS = [(page.relative_to(ROOT), b) for page in PAGES for b in blocks(page.read_text())
               if b.lang == "toml"]


@pytest.mark.parametrize(("page", "block"), TOML_BLOCKS, ids=[f"{p}:{b.line}" for p, b in TOML_BLOCKS])
def test_every_toml_snippet_on_every_page_validates(page: Path, block: Block, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tomllib.loads(block.text)  # every block parses, fragments included
    if block.partial:
        return
    home = tmp_path / "home"
    for secret in re.findall(r'"~/([^"]+)"', block.text):  # the secret files a snippet names, 0600
        (home / secret).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        (home / secret).write_text("secret\n")
        (home / secret).chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    config = tmp_path / "watchdogs.toml"
    config.write_text(block.text + "\n" + base_for(block.text, tmp_path))
    try:
        load_config(config)
    except ConfigError as exc:
        pytest.fail(f"{page}:{block.line}: the ```toml block does not validate "
                    f"(mark a deliberate fragment with <!-- partial: why -->):\n{exc}")


def test_a_snippet_with_a_bad_key_fails_validation(tmp_path: Path) -> None:
    snippet = '[[check]]\nname = "d"\ntype = "disk"\npath = "/tmp"\nwarn = "lots"\n'
    config = tmp_path / "watchdogs.toml"
    config.write_text(snippet + "\n" + base_for(snippet, tmp_path))
    with pytest.raises(ConfigError, match="warn"):
        load_config(config)
