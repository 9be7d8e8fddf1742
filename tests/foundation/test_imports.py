"""`watchdogs` and `notifiers` are also names of unrelated projects on the package index:
make sure the ones imported are this distribution's."""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

import notifiers
import trainguard
import watchdogs

REPO = Path(__file__).resolve().parents[2]


def test_top_level_packages_come_from_this_distribution() -> None:
    for module in (watchdogs, notifiers, trainguard):
        assert Path(module.__file__).resolve().parent.parent == REPO, module.__file__
    dist = metadata.distribution("slurm-watchdogs")
    assert dist.metadata["Name"] == "slurm-watchdogs"
    top = {Path(f.parts[0]).name for f in dist.files or [] if f.parts}
    assert "watchdogs" in {ep.name for ep in metadata.entry_points(group="console_scripts")
                           if ep.value.startswith("watchdogs.")} or top


def test_entry_point_groups_name_this_projects_classes() -> None:
    for group in ("watchdogs.checks", "watchdogs.notifiers"):
        eps = metadata.entry_points(group=group)
        assert eps, group
        for ep in eps:
            if ep.dist is not None and ep.dist.metadata["Name"] == "slurm-watchdogs":
                assert ep.value.split(".")[0] in ("watchdogs", "notifiers"), ep


def test_trainguard_imports_without_torch(tmp_path: Path) -> None:
    import subprocess
    import sys
    code = "import sys, trainguard; assert 'torch' not in sys.modules, 'torch imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
