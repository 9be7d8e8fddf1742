from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "watchdogs", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60)


def test_validate_prints_every_problem_and_exits_non_zero(tmp_path: Path) -> None:
    cfg = tmp_path / "w.toml"
    cfg.write_text('[scheduler]\ntick = "x"\nlog_retention = "y"\n')
    proc = run_cli("validate", "--config", str(cfg), cwd=tmp_path)
    assert proc.returncode == 2
    assert "2 problems in config" in proc.stdout
    assert "key 'tick'" in proc.stdout and "key 'log_retention'" in proc.stdout


def test_validate_summarises_a_valid_config_in_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "w.toml"
    cfg.write_text('[scheduler]\nstate_dir = "st"\n')
    proc = run_cli("--config", str(cfg), "validate", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.strip().splitlines()) == 1
    assert "valid: 0 checks" in proc.stdout


def test_validate_speaks_json(tmp_path: Path) -> None:
    cfg = tmp_path / "w.toml"
    cfg.write_text('[cron]\nhourly = 5\n')
    proc = run_cli("--json", "--config", str(cfg), "validate", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert data["valid"] is False and "key 'hourly' = 5" in data["problems"][0]


def test_missing_config_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    proc = run_cli("--config", str(tmp_path / "absent.toml"), "validate", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"watchdogs: error: {tmp_path / 'absent.toml'}: config file not found"


def test_the_example_config_shipped_in_the_repo_is_valid(tmp_path: Path) -> None:
    """As a user's own clone holds it: the example beside its cron.d, in a folder they own."""
    repo = Path(__file__).resolve().parents[2]
    shutil.copytree(repo / "cron.d", tmp_path / "cron.d")
    example = Path(shutil.copy(repo / "watchdogs.example.toml", tmp_path / "watchdogs.example.toml"))
    proc = run_cli("--config", str(example), "validate", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_json_output_stays_parseable_when_a_console_channel_prints_on_stdout(tmp_path: Path) -> None:
    """Anything a command prints while it runs (a console channel on stdout, here) goes to
    stderr under --json, so stdout is the JSON document alone."""
    cfg = tmp_path / "w.toml"
    cfg.write_text(f'[scheduler]\nstate_dir = "{tmp_path / "state"}"\n[alerts]\nnotify = ["con"]\n'
                   '[[notify]]\nname = "con"\ntype = "console"\nstream = "stdout"\n'
                   f'[[check]]\nname = "scratch"\ntype = "disk"\npath = "{tmp_path}"\n'
                   'warn = "1B"\ncrit = "2B"\n')
    proc = run_cli("--json", "--config", str(cfg), "run", "--once", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert proc.returncode == 2, proc.stderr
    assert "scratch" in json.dumps(data)
    assert "[CRITICAL] [watchdogs" in proc.stderr  # the console channel's message, not lost
