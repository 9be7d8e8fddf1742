"""Real Slurm accounting for slurm/dev-cluster: a private MariaDB and a slurmdbd.

Everything lives under the cluster folder (datadir, socket, logs, slurmdbd.conf) and
listens on 127.0.0.1 only, on ports picked free at `up`, so several dev clusters run side
by side. The MariaDB system tables are built once per MariaDB version into a cache folder
(mariadb-install-db takes ~10 s on a loaded 2-core machine) and copied for each cluster
(milliseconds), so `up` stays within seconds.
Only the standard library is used: this runs before the project is installed.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

DB_NAME = "slurm_acct_db"
DB_USER = "slurm"
ACCOUNT = "wddev"
READY_TIMEOUT_S = 60
# Small InnoDB files and pool: a throwaway database for a few thousand jobs, and up to 8
# dev clusters on one machine.
INNODB_ARGS = ("--innodb-buffer-pool-size=16M", "--innodb-log-file-size=4M")


class AccountingError(Exception):
    """MariaDB or slurmdbd did not come up; the message says where the logs are."""


def template_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "watchdogs-dev-cluster"


def mariadb_version() -> str:
    out = subprocess.run(["mariadbd", "--version"], capture_output=True, text=True, timeout=30)
    words = out.stdout.split()
    return words[2] if len(words) > 2 else "unknown"


def mariadb_template() -> Path:
    """A pristine datadir with the system tables, built once per MariaDB version."""
    cache = template_cache()
    final = cache / f"mariadb-{mariadb_version()}"
    if (final / "mysql").is_dir():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    # Built beside the final place and renamed: two clusters starting at once never see a
    # half-built template.
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
    datadir = work / "db"
    with open(work / "install.log", "wb") as out:
        rc = subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
             "--skip-test-db", "--skip-name-resolve", "--auth-root-authentication-method=socket",
             *INNODB_ARGS], stdout=out, stderr=subprocess.STDOUT, timeout=300).returncode
    if rc != 0:
        raise AccountingError(f"mariadb-install-db failed (exit {rc}); see {work}/install.log")
    try:
        datadir.rename(final)
    except OSError:
        if not (final / "mysql").is_dir():
            raise
    shutil.rmtree(work, ignore_errors=True)
    return final


def mariadb_argv(d: Path, port: int) -> list[str]:
    return ["mariadbd", "--no-defaults", f"--datadir={d / 'db'}", f"--socket={socket_path(d)}",
            f"--port={port}", "--bind-address=127.0.0.1", "--user=root", "--skip-name-resolve",
            f"--pid-file={d / 'run' / 'mariadb.pid'}", f"--log-error={d / 'log' / 'mariadb.log'}",
            *INNODB_ARGS]


def socket_path(d: Path) -> Path:
    return d / "run" / "mariadb.sock"


def prepare_datadir(d: Path) -> None:
    shutil.copytree(mariadb_template(), d / "db", symlinks=True)


def sql(d: Path, statements: str) -> subprocess.CompletedProcess[str]:
    # As root over the private socket (unix_socket authentication); statements on stdin.
    return subprocess.run(["mariadb", "--no-defaults", f"--socket={socket_path(d)}", "-uroot",
                           "--batch"], input=statements, capture_output=True, text=True, timeout=20)


def wait_until(ok: Callable[[], bool], what: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.2)
    raise AccountingError(f"{what} not ready after {READY_TIMEOUT_S}s; see {log}")


def create_db_user(d: Path) -> str:
    """A per-cluster password for slurmdbd's TCP login (root is socket-only)."""
    password = secrets.token_hex(16)
    res = sql(d, f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{password}';\n"
                 f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';\n")
    if res.returncode != 0:
        raise AccountingError(f"creating the database user failed: {res.stderr.strip()}")
    return password


def slurmdbd_conf(d: Path, host: str, dbd_port: int, db_port: int, password: str) -> str:
    return f"""# written by slurm/dev-cluster; slurmdbd for the throwaway cluster
AuthType=auth/munge
DbdAddr=127.0.0.1
DbdHost={host}
DbdPort={dbd_port}
SlurmUser=root
LogFile={d}/log/slurmdbd.log
PidFile={d}/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser={DB_USER}
StoragePass={password}
StorageLoc={DB_NAME}
"""


def write_slurmdbd_conf(d: Path, text: str) -> None:
    # slurmdbd refuses a config others can read (it holds the database password).
    path = d / "slurmdbd.conf"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def sacctmgr(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, env=env,
                          timeout=20)


def register(env: dict[str, str], cluster: str, users: list[str], log: Path) -> None:
    """Cluster, account and users in the database, so every job is recorded against an
    association (as on a real site)."""
    wait_until(lambda: sacctmgr(env, "add", "cluster", cluster).returncode == 0,
               "slurmdbd (sacctmgr add cluster)", log)
    steps = (("add", "account", ACCOUNT, f"Cluster={cluster}", "Description=dev cluster",
              "Organization=watchdogs"),
             ("add", "user", ",".join(users), f"Account={ACCOUNT}", f"Cluster={cluster}"))
    for step in steps:
        res = sacctmgr(env, *step)
        if res.returncode != 0:
            raise AccountingError(f"sacctmgr {' '.join(step)} failed: "
                                  f"{(res.stderr or res.stdout).strip()}")


def local_users() -> list[str]:
    """root (the dev cluster's daemons and tests) and whoever called sudo, if anyone."""
    users = ["root"]
    for var in ("SUDO_USER", "USER"):
        name = os.environ.get(var)
        if name and name not in users:
            users.append(name)
    return users
