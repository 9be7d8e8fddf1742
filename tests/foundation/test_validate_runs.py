"""What `validate` accepts, `run` runs: configs generated from the option declarations
either fail with one line per problem, or survive `watchdogs run --once` with no traceback
(and no "internal error" result)."""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, example, given, settings

from tests.foundation.configgen import configs, make_site, to_toml
from tests.foundation.inprocess import cli


def _edge(scheduler: dict[str, Any] | None = None, check: dict[str, Any] | None = None
          ) -> dict[str, Any]:
    """A config with one edge value, tried on every run besides the generated ones."""
    return {"scheduler": scheduler or {"state_dir": "state"}, "cron": {}, "alerts": {},
            "check": [check] if check else [], "notify": []}


def _last_json(out: str) -> dict[str, Any]:
    """The command's --json document: printed last, after whatever a `console` channel with
    stream = "stdout" printed before it."""
    starts = [m.start() for m in re.finditer(r"(?m)^\{$", out)]
    return dict(json.loads(out[starts[-1]:])) if starts else {"items": []}


@pytest.mark.timeout(300)
@settings(max_examples=40, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.generate, Phase.shrink],  # "explain" traces: minutes
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(config=configs())
@example(config=_edge(check={"name": "c0", "type": "disk", "path": ".", "bytes_limit": "9" * 400 + "G"}))
@example(config=_edge(scheduler={"state_dir": "~no-such-user-x/state"}))
def test_a_config_that_validates_runs_and_one_that_does_not_gets_one_line_per_problem(
        slurm_cluster: Path, config: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_site(root)
        path = root / "watchdogs.toml"
        path.write_text(to_toml(config))
        code, out, err, tracebacks = cli("validate", "--json", "--config", str(path))
        verdict = json.loads(out) if out else {"valid": False, "problems": None}
        assert not tracebacks and "Traceback" not in err
        event("valid" if verdict["valid"] else "invalid")
        if not verdict["valid"]:
            assert code == 2
            problems = verdict["problems"]
            assert problems, err
            assert all("\n" not in p and p.startswith(str(path)) for p in problems), problems
            return
        code, out, err, tracebacks = cli("run", "--once", "--json", "--config", str(path))
        assert "Traceback" not in err and not tracebacks, (to_toml(config), err, tracebacks)
        assert code in (0, 1, 2, 3), (to_toml(config), err)
        items = _last_json(out)["items"] if out else []
        assert not [i for i in items if "internal error" in i["summary"]], (to_toml(config), items)
