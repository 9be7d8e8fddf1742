"""Dependencies flow one way, down the layers written in docs/design.md ("Layers").

Every import in watchdogs/, notifiers/ and trainguard/ is read with `ast` (lazy imports inside
functions and `if TYPE_CHECKING:` imports count too: they are dependencies all the same), then:
no module imports a module of a higher layer, the units of the table import each other without
cycles, and trainguard imports nothing from watchdogs or notifiers.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("watchdogs", "notifiers", "trainguard")

LAYERS: tuple[tuple[str, ...], ...] = (
    # 0 core: result, errors, units, the config option system, alert and schedule types.
    ("watchdogs", "watchdogs.result", "watchdogs.errors", "watchdogs.units", "watchdogs.config",
     "watchdogs.configured", "watchdogs.plugins", "watchdogs.sink", "watchdogs.schedules",
     "watchdogs.alerts.events", "watchdogs.trust",
     "watchdogs.userregex"),
    # 1 talking to the world: Slurm, filesystems, the state database.
    ("watchdogs.slurmctl", "watchdogs.fsprobe", "watchdogs.state"),
    # 2 what is checked, and how people are told.
    ("watchdogs.checks", "watchdogs.alerts", "notifiers"),
    # 3 what runs when.
    ("watchdogs.dropins", "watchdogs.scheduler", "watchdogs.report"),
    # 4 what a user asks for.
    ("watchdogs.commands",),
    # 5 the command line.
    ("watchdogs.cli", "watchdogs.__main__"),
)
"""Each unit is a module or a package (longest prefix wins); a unit may import its own layer
or lower ones. "watchdogs" itself is core, so a new module nobody placed is held to core's rules."""

APART = ("trainguard",)
"""A library of its own for training scripts: imports nothing from watchdogs or notifiers. The
watchdog may read its heartbeat format (`trainguard.heartbeat`), as it would a third-party
library's."""

def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The project modules `name` imports (`from a import b` names module a.b when it is one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        yield from (t for t in targets if t.split(".")[0] in PACKAGES)


def unit_of(module: str) -> str:
    units = [u for layer in LAYERS for u in layer] + list(APART)
    matches = [u for u in units if module == u or module.startswith(u + ".")]
    assert matches, f"{module} is in no layer: add it to LAYERS (and docs/design.md)"
    return max(matches, key=len)


def layer_of(unit: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if unit in layer), None)


def edges() -> set[tuple[str, str]]:
    modules = all_modules()
    known = set(modules)
    return {(name, target) for name, path in modules.items()
            for target in imports_of(name, path, known) if target != name}


def upward_imports(graph: set[tuple[str, str]]) -> list[str]:
    found = []
    for source, target in sorted(graph):
        low, high = layer_of(unit_of(source)), layer_of(unit_of(target))
        if low is not None and high is not None and high > low:
            found.append(f"{source} (layer {low}) imports {target} (layer {high})")
    return found


def unit_cycles(graph: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected groups of more than one unit (Tarjan's algorithm)."""
    succ: dict[str, set[str]] = {}
    for source, target in graph:
        a, b = unit_of(source), unit_of(target)
        if a != b:
            succ.setdefault(a, set()).add(b)
            succ.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(succ[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(succ):
        if node not in index:
            visit(node)
    return groups


def test_every_module_is_in_a_layer() -> None:
    for name in all_modules():
        assert unit_of(name)


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports(edges()) == []


def test_no_import_cycles_between_packages() -> None:
    assert unit_cycles(edges()) == []


def test_notifiers_depend_only_on_core() -> None:
    beyond = sorted(f"{s} imports {t}" for s, t in edges()
                    if unit_of(s) == "notifiers" and unit_of(t) != "notifiers" and layer_of(unit_of(t)) != 0)
    assert beyond == []


def test_trainguard_imports_nothing_from_the_watchdog() -> None:
    leaks = {(s, t) for s, t in edges()
             if unit_of(s) in APART and t.split(".")[0] in ("watchdogs", "notifiers")}
    assert leaks == set(), sorted(leaks)


def test_the_checker_sees_an_upward_import_and_a_cycle() -> None:
    graph = {("watchdogs.slurmctl.snapshot", "watchdogs.checks.context"),
             ("watchdogs.dropins.crontab", "watchdogs.scheduler.loop"),
             ("watchdogs.scheduler.items", "watchdogs.dropins.discovery")}
    assert upward_imports(graph) == [
        "watchdogs.slurmctl.snapshot (layer 1) imports watchdogs.checks.context (layer 2)"]
    assert unit_cycles(graph) == [["watchdogs.dropins", "watchdogs.scheduler"]]


def test_the_layers_in_docs_design_md_are_the_ones_checked() -> None:
    text = (REPO / "docs" / "design.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    for unit in [u for layer in LAYERS for u in layer] + list(APART):
        assert f"`{unit}`" in section, f"docs/design.md, Layers: {unit} is not named"
