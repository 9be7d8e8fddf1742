"""Dependencies flow one way, down the layers of docs/architecture.md ("Layers").

The contracts themselves are import-linter's, in pyproject.toml ([tool.importlinter]), and
`make lint` checks them with `lint-imports`: no module imports a higher layer, notifiers
depend only on core, trainguard imports nothing of the watchdog, and sibling modules and
packages of all three import each other without a circle. This file reads the
same configuration (import-linter's own reader), so the table exists once, and adds what
import-linter does not say: every module is placed in a layer (an unplaced one would be
held to nothing), the documented table is the checked one, and no two modules of the three
packages import each other in a circle, trainguard's included (grimp's graph, module by
module: lazy imports inside functions count, `if TYPE_CHECKING:` imports do not).
"""
from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import grimp
from importlinter.api import read_configuration

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
ARCHITECTURE = REPO / "docs" / "architecture.md"


@functools.cache
def contracts() -> dict[str, dict[str, Any]]:
    """import-linter's contracts by id, as its own reader reads pyproject.toml."""
    options = read_configuration(str(PYPROJECT))["contracts_options"]
    return {c["id"]: c for c in options}


def units(field: object) -> tuple[str, ...]:
    """The module names of a contract field: a list, or one layer's `a : b` / `a | b`."""
    items = field if isinstance(field, list) else [field]
    return tuple(u.strip() for item in items for u in re.split(r"[:|]", str(item)) if u.strip())


@functools.cache
def layers() -> tuple[tuple[str, ...], ...]:
    """The layers, core first. The alert types are core inside the alerts package (a layers
    contract cannot nest them), held to core by a contract of their own."""
    listed = tuple(units(layer) for layer in reversed(contracts()["layers"]["layers"]))
    core_inside = units(contracts()["core-alert-types"]["source_modules"])
    return ((*listed[0], *core_inside), *listed[1:])


@functools.cache
def apart() -> tuple[str, ...]:
    return units(contracts()["trainguard"]["source_modules"])


@functools.cache
def graph() -> grimp.ImportGraph:
    options = read_configuration(str(PYPROJECT))["session_options"]
    return grimp.build_graph(*options["root_packages"], cache_dir=None,
                             exclude_type_checking_imports=True)


def unit_of(module: str) -> str | None:
    """The unit a module falls in (the longest name that is it or a package above it)."""
    matches = [u for layer in layers() for u in (*layer, *apart())
               if module == u or module.startswith(u + ".")]
    return max(matches, key=len, default=None)


def cycles(g: grimp.ImportGraph) -> list[str]:
    """Each circle of imports once, written `a -> b -> a`: for every import a -> b, the
    shortest chain back from b to a."""
    found: dict[frozenset[str], str] = {}
    for importer in sorted(g.modules):
        for imported in sorted(g.find_modules_directly_imported_by(importer)):
            back = g.find_shortest_chain(importer=imported, imported=importer)
            if back is not None and frozenset(back) not in found:
                found[frozenset(back)] = " -> ".join((importer, *back))
    return sorted(found.values())


def test_the_import_contracts_are_kept() -> None:
    """What `make lint` runs, so that the test suite alone also holds the layers."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), str(PYPROJECT), "--no-cache", "--no-logo"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_module_is_in_a_layer() -> None:
    roots = {m for m in graph().modules if "." not in m}
    unplaced = sorted(m for m in graph().modules - roots if unit_of(m) is None)
    assert unplaced == [], ("not in any layer of pyproject.toml's [tool.importlinter] layers "
                            "contract (and docs/architecture.md): an unplaced module is held to "
                            f"no layer at all: {unplaced}")


def test_no_module_imports_another_in_a_circle() -> None:
    found = cycles(graph())
    assert found == [], "imports in a circle (move what both need to where its concept lives):\n" + \
        "\n".join(found)


def test_the_circle_finder_names_each_circle_once() -> None:
    g = grimp.ImportGraph()
    for importer, imported in [("p.job", "p.jobgone"), ("p.jobgone", "p.joblifecycle"),
                               ("p.joblifecycle", "p.job"), ("p.base", "p.context"),
                               ("p.job", "p.base")]:
        g.add_import(importer=importer, imported=imported)
    assert cycles(g) == ["p.job -> p.jobgone -> p.joblifecycle -> p.job"]


def test_the_layers_in_docs_architecture_md_are_the_ones_checked() -> None:
    """Every unit is named in the `## Layers` table, the units of one layer on one row, and
    the rows in the order of the layers, core first."""
    section = ARCHITECTURE.read_text().split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    row_of: dict[str, int] = {}
    for unit in [u for layer in layers() for u in layer] + list(apart()):
        where = [i for i, row in enumerate(rows) if f"`{unit}`" in row]
        assert where, f"docs/architecture.md, Layers: {unit} is not named in the table"
        row_of[unit] = where[0]
    layer_rows = [sorted({row_of[u] for u in layer}) for layer in layers()]
    assert all(len(r) == 1 for r in layer_rows), f"a layer spread over rows: {layer_rows}"
    assert [r[0] for r in layer_rows] == sorted(r[0] for r in layer_rows), "rows out of order"
