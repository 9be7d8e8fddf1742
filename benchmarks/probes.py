"""The probe table: bad inputs and faults, each tried on the real `watchdogs` command line
in a throwaway site, classified as handled well / traceback / hang / wrong.

    .venv/bin/python benchmarks/probes.py                     # this checkout
    .venv/bin/python benchmarks/probes.py --code /path/to/other/checkout   # e.g. main, to compare
    SLURM_CONF=... adds the probes that need Slurm (sbatch races, a dead controller)

"handled" means: it finished within its bound, printed no traceback, and the probe's own
rule held (a bad value refused with one line per problem naming the file; a secret not
printed anywhere; a drop-in's flood capped; its leftovers gone; an item run once).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe_cases import PROBES, Outcome, Probe
from probe_cases_adversary import PROBES as ADVERSARY_PROBES
from probe_cases_state import PROBES as STATE_PROBES

PROBES = PROBES + STATE_PROBES + ADVERSARY_PROBES

VERDICTS = ("handled", "traceback", "hang", "wrong")


def _start(code: Path | None, root: Path, argv: Sequence[str], extra: Sequence[tuple[str, str]]
           ) -> subprocess.Popen[str]:
    env = {**os.environ, "WATCHDOGS_CONFIG": str(root / "watchdogs.toml")}
    env.update({k: v.replace("{root}", str(root)) for k, v in extra})
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return subprocess.Popen([sys.executable, "-m", "watchdogs", *argv], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            errors="replace")


def _cli(code: Path | None, root: Path, argv: list[str], timeout: float,
         extra: Sequence[tuple[str, str]] = ()) -> Outcome:
    proc = _start(code, root, argv, extra)
    try:
        out, err = proc.communicate(timeout=timeout)
        return Outcome(proc.returncode, out, err, hung=False)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        return Outcome(None, out, err, hung=True)


def run_probe(probe: Probe, code: Path | None) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="wd-probe-") as tmp:
        root = Path(tmp)
        (root / "cron.d").mkdir(mode=0o700)
        for period in ("hourly", "daily", "weekly"):
            (root / "cron.d" / f"cron.{period}").mkdir(mode=0o700)
        config = root / "watchdogs.toml"
        config.write_text(probe.config.replace("{root}", str(root)))
        if probe.setup is not None:
            probe.setup(root)
        try:
            outcomes = _run_all(probe, code, root)
            if any(o.hung for o in outcomes):
                return "hang", "no answer within the bound"
            if any("Traceback (most recent call last)" in o.out + o.err for o in outcomes):
                return "traceback", next(o.err for o in outcomes if "Traceback" in o.out + o.err
                                         ).strip().splitlines()[-1][:100]
            why = probe.check(root, outcomes)
            return ("wrong", why) if why else ("handled", "")
        finally:
            if probe.cleanup is not None:
                probe.cleanup(root)


def _run_all(probe: Probe, code: Path | None, root: Path) -> list[Outcome]:
    outcomes: list[Outcome] = []
    background = _start(code, root, probe.background, probe.env) if probe.background else None
    if background is not None and probe.wait_for:
        deadline = time.monotonic() + probe.timeout
        while not (root / probe.wait_for).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    try:
        for step in probe.steps:
            with concurrent.futures.ThreadPoolExecutor(len(step)) as pool:  # at the same moment
                outcomes += list(pool.map(lambda a: _cli(code, root, a, probe.timeout, probe.env), step))
    finally:
        if background is not None:
            background.terminate()
            try:
                out, err = background.communicate(timeout=probe.timeout)
                outcomes.append(Outcome(background.returncode, out, err, hung=False))
            except subprocess.TimeoutExpired:
                os.killpg(background.pid, 9)
                outcomes.append(Outcome(None, *background.communicate(), hung=True))
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", type=Path, help="run the probes against this checkout's code")
    parser.add_argument("--only", help="only probes whose category or name contains this")
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per probe")
    args = parser.parse_args()
    slurm = bool(os.environ.get("SLURM_CONF"))
    chosen = [p for p in PROBES if (slurm or not p.needs_slurm)
              and (not args.only or args.only in p.category or args.only in p.name)]
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    started = time.monotonic()
    for probe in chosen:
        verdict, why = run_probe(probe, args.code)
        table[probe.category][verdict] += 1
        if args.verbose or verdict != "handled":
            print(f"  {verdict:<9} {probe.category:<11} {probe.name}" + (f": {why}" if why else ""))
    print(f"\n{'category':<12} {'tried':>5} {'handled':>8} {'traceback':>10} {'hang':>5} {'wrong':>6}")
    total: collections.Counter[str] = collections.Counter()
    for category in sorted(table):
        row = table[category]
        total.update(row)
        print(f"{category:<12} {sum(row.values()):>5} " + " ".join(
            f"{row[v]:>{w}}" for v, w in zip(VERDICTS, (8, 10, 5, 6), strict=True)))
    print(f"{'all':<12} {sum(total.values()):>5} " + " ".join(
        f"{total[v]:>{w}}" for v, w in zip(VERDICTS, (8, 10, 5, 6), strict=True)))
    skipped = len(PROBES) - len(chosen)
    print(f"\n{len(chosen)} probes in {time.monotonic() - started:.0f}s"
          + (f"; {skipped} skipped (no SLURM_CONF or --only)" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
