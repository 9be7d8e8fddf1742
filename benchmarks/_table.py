#!/usr/bin/env python3
"""Rebuild the table in docs/benchmarks.md from benchmarks/results/*.json (written by each
benchmark's `record`), in place between its two marker lines; the rest of the file stays.

    .venv/bin/python benchmarks/_table.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from _stats import RESULTS

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
START, END = "<!-- table: made by benchmarks/_table.py from benchmarks/results/ -->", "<!-- end of table -->"
HEADER = ("| measure | goal | baseline (same run) | today (median (min–max, n)) | date | command |\n"
          "|---|---|---|---|---|---|\n")


def table(results: Path) -> str:
    lines = []
    for path in sorted(results.glob("*.json")):
        data = json.loads(path.read_text())
        for row in data["rows"]:
            cells = (row["measure"], row["goal"], row["baseline"], row["figure"], data["date"],
                     f"`{row['command']}`")
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n")
    return HEADER + "".join(lines)


def main() -> int:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if START not in text or END not in text:  # first run: the table goes under the title
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{START}\n{END}\n\n{rest.lstrip(chr(10))}"
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{table(RESULTS)}{END}{tail}")
    print(f"wrote the table of {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
