"""Every lint or type suppression names what it suppresses and says why.

`# noqa: CODE - reason` and `# type: ignore[code]  # why: reason` pass; a bare `# noqa`, a
bare `# type: ignore`, or one without a reason after it fails. (ruff's RUF100 finds the
dead `noqa`, mypy's warn_unused_ignores the dead `type: ignore`; this finds the silent ones.)
"""
from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The suppression, its codes, then " - reason" or "  # reason" ("# why: reason"), a few words at least;
# another suppression may stand between them (a type-ignore, then a noqa with the reason).
_NOQA = re.compile(r"#\s*noqa\b(?P<codes>:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?(?P<rest>.*)", re.I)
_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*\])?(?P<rest>.*)")
_REASON = re.compile(r"^\s*(?:-+|#(?:\s*why:)?)\s*(?P<why>\S.{5,})$", re.I)
_BETWEEN = re.compile(r"^\s*#\s*(?:noqa(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?"
                      r"|type:\s*ignore(?:\[[^\]]*\])?)", re.I)


def problems_in(source: str) -> list[tuple[int, str]]:
    """(line, what is wrong) for each suppression comment in `source` lacking codes or a reason."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        for kind, pattern in (("noqa", _NOQA), ("type: ignore", _IGNORE)):
            match = pattern.search(token.string)
            if match is None:
                continue
            if not match.group("codes"):
                found.append((token.start[0], f"a bare `{kind}`: name the codes it suppresses"))
            elif not _REASON.match(_BETWEEN.sub("", match.group("rest"))):
                found.append((token.start[0], f"`{kind}` without a reason after it (` - why` or `# why:`)"))
    return found


def tracked_python_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in out.stdout.split()]


@pytest.mark.parametrize("line", [
    "x = 1  # noqa: E501 - a URL that cannot be wrapped",
    "except Exception:  # noqa: BLE001 - one broken check must not stop the others",
    "y = f()  # type: ignore[arg-type]  # why: typeshed lacks the overload",
    "import a  # noqa: E402, F401 - after the sys.path set-up above",
    "import m  # type: ignore[import-untyped]  # noqa: F401 - only: can it be built here?",
    "import m  # type: ignore[import-untyped]  # ships no type information",
])
def test_a_suppression_with_codes_and_a_reason_passes(line: str) -> None:
    assert problems_in(line + "\n") == []


@pytest.mark.parametrize(("line", "complaint"), [
    ("x = 1  # noqa\n", "bare `noqa`"),
    ("x = 1  # noqa: E501\n", "`noqa` without a reason"),
    ("y = f()  # type: ignore\n", "bare `type: ignore`"),
    ("y = f()  # type: ignore[arg-type]\n", "`type: ignore` without a reason"),
    ("y = f()  # type: ignore[arg-type]  # ok\n", "`type: ignore` without a reason"),
    ("import m  # type: ignore[import-untyped]  # noqa: F401\n", "without a reason"),
])
def test_a_suppression_without_codes_or_reason_is_reported(line: str, complaint: str) -> None:
    found = problems_in(line)
    assert found and all(number == 1 for number, _ in found)
    assert any(complaint in what for _, what in found)


def test_a_suppression_quoted_in_a_string_is_not_a_comment() -> None:
    assert problems_in('text = "# noqa"  # the string mentions it\n') == []


def test_every_suppression_in_the_project_names_its_codes_and_why() -> None:
    files = tracked_python_files()
    assert len(files) > 50  # the walk found the project
    bad = [f"{path.relative_to(ROOT)}:{line}: {what}"
           for path in files for line, what in problems_in(path.read_text())]
    assert bad == []
