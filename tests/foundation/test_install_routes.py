"""The README's "Install" (docs/getting-started.md shows the same lines), run word for word as
the ordinary user on a fresh copy of the checkout, with pip pointed at no index at all.

Neither `slurm-watchdogs` nor `trainguard` is on any index a user has, so each route must
find both in the clone or in its `dist/`. Here pip gets `--no-index` and, as its only
`--find-links`, a wheelhouse of the dependencies (APScheduler, jinja2, ..., hatchling for the
isolated builds, pip/setuptools/wheel for pipx's shared libraries, apprise) filled once per
session from the machine's own index through pip's cache: our two names can come from nowhere
else, whatever PyPI holds one day, and the first check shows the setup fails as a user's did
(`No matching distribution found for trainguard`).

Routes: pip from the clone; `make wheels`, then pipx (Debian 12's 1.1, which has no
--preinstall) with `--pip-args="--find-links=$PWD/dist"`; pip from the two wheel files. The
training's lines (`'./trainguard[lightning]'`, `--find-links dist 'trainguard[lightning]'`)
need torch and run in test_distributions.py's torch environment. `git clone` is the copy.

No Slurm: the host's pass only. About a minute with pip's cache warm: one wheel build, one
venv per route.
"""
from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.foundation.test_readme import PAGES, README, ROOT, blocks, code_text
from tests.foundation.test_readme_path import GETTING_STARTED, fresh_copy
from trainguard import __version__

VERSIONS = f"watchdogs {__version__} (trainguard {__version__})"
# Extras of slurm-watchdogs that a documented line installs by name (apprise), the build
# backend of the isolated builds, and what pipx puts into its shared libraries.
EXTRA_WHEELS = ["pip", "setuptools", "wheel", "apprise>=2.0"]
OURS = ("slurm_watchdogs-", "slurm-watchdogs-", "trainguard-")
# The training lines name the framework's extra ([lightning]), which brings torch; here the
# `hang` extra (py-spy, one small wheel) stands in for it: the question is whether trainguard
# itself is found, and test_distributions.py installs it beside the CPU torch.
STANDIN_EXTRA = "hang"


def install_blocks(page: Path) -> list[list[str]]:
    """The shell lines of each fenced block of the page's "## Install" section, without
    comments, as a user types them."""
    section = page.read_text().split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    return [[ln for ln in (raw.split("  #", 1)[0].strip() for raw in b.text.splitlines()) if ln]
            for b in blocks(section) if b.lang == "sh"]


def routes() -> dict[str, list[str]]:
    clone, pipx, wheels, training = install_blocks(README)
    return {"clone": clone, "pipx": pipx, "wheels": wheels, "training": training}


def shape(line: str) -> str:
    """A documented install line with the framework extra and torch version left open."""
    line = line.split("  #", 1)[0].strip()
    return re.sub(r"\[[a-z,]+\]", "[EXTRA]", re.sub(r"torch==[^']*", "torch==VERSION", line))


def test_the_getting_started_page_shows_the_readmes_install_lines() -> None:
    assert install_blocks(GETTING_STARTED) == install_blocks(README)


def test_every_install_line_on_every_page_is_one_this_test_runs() -> None:
    """A pip or pipx line written anywhere a user reads (fenced or inline) must be one of the
    README's, which the tests below run: no page can drift to a line that does not work."""
    tested = {shape(line) for lines in routes().values() for line in lines}
    documented = {(page.relative_to(ROOT).as_posix(), shape(m.group(0)))
                  for page in PAGES if page.name not in ("benchmarks.md", "changelog.md")
                  for m in re.finditer(r"(?:~/wd/bin/)?(?:pipx|pip) (?:install|inject|wheel)[^\n`]*",
                                       code_text(page.read_text()))}
    # Each part of a documented `A && B` line is a line of its own for this comparison.
    parts = {part.strip() for line in tested for part in line.split("&&")}
    untested = sorted((page, line) for page, line in documented
                      if line not in tested and line not in parts)
    assert untested == []
    assert len(documented) >= 8


def real_home() -> Path:
    return Path(pwd.getpwuid(os.getuid()).pw_dir)


def pip_cache() -> str:
    """The user's own pip cache (the routes run with HOME in a temporary folder, which would
    otherwise start them with an empty one)."""
    if os.environ.get("PIP_CACHE_DIR"):
        return os.environ["PIP_CACHE_DIR"]
    return str(Path(os.environ.get("XDG_CACHE_HOME") or real_home() / ".cache") / "pip")


def no_index_env(home: Path, wheelhouse: Path) -> dict[str, str]:
    """The user's environment with pip and pipx pointed at nothing but the wheelhouse: no
    config file (the machine's extra indexes and find-links), no index, HOME in tmp."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "PIPX_", "VIRTUAL_ENV", "PYTHONPATH"))}
    home.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(wheelhouse), PIP_CACHE_DIR=pip_cache(),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIPX_HOME=str(home / "pipx"),
               PIPX_BIN_DIR=str(home / "bin"))
    return env


def sh(line: str, cwd: Path, env: dict[str, str]) -> str:
    """One documented line, as the user's shell runs it; its output."""
    done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, f"{line!r} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def dependencies() -> list[str]:
    """What the two distributions need from an index, read from their project files: their
    dependencies (our own names left out) and their build backend."""
    wanted: list[str] = []
    for project in (ROOT / "pyproject.toml", ROOT / "trainguard" / "pyproject.toml"):
        data = tomllib.loads(project.read_text())
        wanted += [r for r in data["project"]["dependencies"] if not r.startswith("trainguard")]
        wanted += data["build-system"]["requires"]
        wanted += data["project"].get("optional-dependencies", {}).get(STANDIN_EXTRA, [])
    return sorted(set(wanted)) + EXTRA_WHEELS


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every dependency as a wheel, from the machine's index through pip's cache; none of ours."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
                           "-d", str(folder), *dependencies()],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [p.name for p in folder.iterdir() if p.name.lower().startswith(OURS)]
    return folder


@pytest.fixture(scope="module")
def clone(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the checkout in which the pipx block's `make wheels` has run (once for
    every route that installs from dist/), with the same index-less pip."""
    folder = fresh_copy(tmp_path_factory.mktemp("clone") / "slurm-watchdogs")
    make = routes()["pipx"][0]
    assert make == "make wheels"
    sh(make, folder, no_index_env(tmp_path_factory.mktemp("home"), wheelhouse))
    assert sorted(p.name for p in (folder / "dist").iterdir()) == [
        f"slurm_watchdogs-{__version__}-py3-none-any.whl", f"trainguard-{__version__}-py3-none-any.whl"]
    return folder


def test_the_index_lacks_our_distributions_as_a_users_does(clone: Path, wheelhouse: Path,
                                                           tmp_path: Path) -> None:
    """The setup reproduces the failure of issue 36: `pip install .` alone finds no trainguard
    (so a route that passed by reaching an index for our names would fail here)."""
    # This environment's hatchling builds the metadata (no isolated build: seconds saved).
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                           "--no-build-isolation", "."],
                          cwd=clone, capture_output=True, text=True, timeout=300,
                          env=no_index_env(tmp_path / "home", wheelhouse), check=False)
    assert done.returncode != 0
    assert "No matching distribution found for trainguard" in done.stderr, done.stderr


def test_pip_from_the_clone_as_the_readme_says(clone: Path, wheelhouse: Path, tmp_path: Path) -> None:
    lines = routes()["clone"]
    assert lines[0].startswith("git clone ") and lines[0].endswith("&& cd slurm-watchdogs")
    env = no_index_env(tmp_path / "home", wheelhouse)
    said = [sh(line, clone, env) for line in lines[1:]]
    assert said[-1] == VERSIONS + "\n"
    assert (tmp_path / "home" / "wd" / "bin" / "watchdogs").exists()


def test_pipx_from_the_wheels_as_the_readme_says(clone: Path, wheelhouse: Path, tmp_path: Path) -> None:
    if shutil.which("pipx") is None:
        pytest.skip("pipx is not installed (make test-tools installs Debian's)")
    env = no_index_env(tmp_path / "home", wheelhouse)
    pipx = sh("pipx --version", clone, env).strip()
    for line in routes()["pipx"][1:]:
        sh(line, clone, env)
    watchdogs = tmp_path / "home" / "bin" / "watchdogs"
    assert sh(shlex.quote(str(watchdogs)) + " --version", tmp_path, env) == VERSIONS + "\n", pipx
    injected = sh("pipx runpip slurm-watchdogs show apprise", clone, env)
    assert "Name: apprise" in injected


def test_pip_from_the_two_wheel_files_as_the_readme_says(clone: Path, wheelhouse: Path,
                                                         tmp_path: Path) -> None:
    env = no_index_env(tmp_path / "home", wheelhouse)
    for line in routes()["wheels"]:
        sh(line, clone, env)
    assert sh("~/wd/bin/watchdogs --version", tmp_path, env) == VERSIONS + "\n"
    # `watchdogs start` finds the scheduler's batch script inside the wheel, not in a checkout.
    where = ("from watchdogs.scheduler.chain import default_script; print(default_script({}))")
    script = Path(sh(f"~/wd/bin/python -c {shlex.quote(where)}", tmp_path, env).strip())
    assert script.is_relative_to(tmp_path / "home" / "wd")
    assert script.read_bytes() == (ROOT / "slurm" / "cron-scheduler.slurm").read_bytes()


def test_trainguard_into_a_training_environment_as_the_readme_says(clone: Path, wheelhouse: Path,
                                                                   tmp_path: Path) -> None:
    """The training block after torch (the user's own build): trainguard from the clone, then,
    once that is uninstalled, from dist/; each time with psutil and the extra's packages, and
    nothing of the watchdog's."""
    torch_first, *lines = routes()["training"]
    assert shape(torch_first) == "pip install 'torch==VERSION'" and len(lines) == 2
    env = no_index_env(tmp_path / "home", wheelhouse)
    sh("python3 -m venv ~/train", tmp_path, env)
    env["PATH"] = f"{tmp_path / 'home' / 'train' / 'bin'}{os.pathsep}{env['PATH']}"
    probe = ("import importlib.metadata as m, trainguard; "
             "print(trainguard.__version__, m.version('py-spy'), m.distribution('trainguard').read_text("
             "'direct_url.json') is not None, sorted(d.metadata['Name'].lower() for d in m.distributions()))")
    seen = []
    for line in lines:
        assert "[lightning]" in line
        sh(line.replace("[lightning]", f"[{STANDIN_EXTRA}]"), clone, env)
        seen.append(sh(f"python -c {shlex.quote(probe)}", tmp_path, env).split(" ", 3))
        sh("pip uninstall -q -y trainguard", tmp_path, env)
    (version, _, from_path, names), (version2, _, from_index_like, names2) = seen
    assert version == version2 == __version__
    assert (from_path, from_index_like) == ("True", "False")  # the clone's folder, then dist/'s wheel
    assert names == names2
    assert "'apscheduler'" not in names and "'psutil'" in names and "'py-spy'" in names, names
    # Importing the public face loads nothing of the watchdog's either.
    foreign = ("import sys, trainguard; from trainguard import Guard, config_from, read_heartbeats; "
               "import trainguard.guard; print(sorted(m for m in sys.modules if m.split('.')[0] in "
               "('watchdogs', 'notifiers', 'apscheduler', 'jinja2', 'requests', 'slack_sdk')))")
    sh(lines[-1].replace("[lightning]", f"[{STANDIN_EXTRA}]"), clone, env)
    assert sh(f"python -c {shlex.quote(foreign)}", tmp_path, env) == "[]\n"


@pytest.mark.parametrize(("target", "extra", "runs"), [
    ("docs", "'.[docs]'", "mkdocs build"), ("dist", "'.[dist]'", "twine check"),
    ("wheels", "-m venv", "pip wheel")])
def test_make_docs_dist_and_wheels_install_what_they_need_and_not_torch(
        target: str, extra: str, runs: str, tmp_path: Path) -> None:
    """On a fresh clone: the venv, the two packages and the target's own tools, and no torch or
    framework extra (1.5 GB that mkdocs, build and pip wheel do not need)."""
    folder = fresh_copy(tmp_path / "slurm-watchdogs")
    planned = subprocess.run(["make", "-n", target], cwd=folder, capture_output=True, text=True,
                             timeout=60, check=True).stdout
    assert extra in planned and runs in planned, planned
    assert not re.search(r"torch|lightning|accelerate|transformers|\[test", planned), planned
