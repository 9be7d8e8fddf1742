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
    (script,) = [ep for ep in metadata.entry_points(group="console_scripts") if ep.name == "watchdogs"]
    assert script.value == "watchdogs.cli:main"
    assert script.dist is not None and script.dist.metadata["Name"] == "slurm-watchdogs"


EXPECTED_PLUGINS = {
    "watchdogs.checks": {"job", "log_stale", "disk", "nodes", "training"},
    "watchdogs.notifiers": {"console", "logfile", "email", "slack", "sms", "webhook", "apprise"},
}


def test_entry_point_groups_load_this_projects_classes() -> None:
    for group, names in EXPECTED_PLUGINS.items():
        ours = {ep.name: ep for ep in metadata.entry_points(group=group)
                if ep.dist is not None and ep.dist.metadata["Name"] == "slurm-watchdogs"}
        assert set(ours) == names, group
        for ep in ours.values():
            cls = ep.load()
            assert cls.__module__.split(".")[0] in ("watchdogs", "notifiers"), ep
            assert cls.type_name == ep.name, ep


def test_trainguard_imports_without_torch(tmp_path: Path) -> None:
    import subprocess
    import sys
    code = "import sys, trainguard; assert 'torch' not in sys.modules, 'torch imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
