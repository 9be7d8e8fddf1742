"""The top-level tables of watchdogs.toml and the keys common to every [[check]]/[[notify]].

Each check type and channel adds its own keys through its class's `options`.
"""
from __future__ import annotations

from watchdogs.config.options import (
    Option,
    boolean,
    duration,
    integer,
    notify_route,
    path,
    period,
    string,
    string_list,
    timeout,
)
from watchdogs.config.paths import DIR, DIR_OR_NEW, name, slurm_name


def http_url(value: object) -> str:
    """An http(s) URL (the dead man's switch)."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")) or len(value) < 10:
        raise ValueError("an http:// or https:// URL")
    return value


SCHEDULER = {
    "state_dir": Option(path, default="~/.local/state/watchdogs",
                        help="SQLite state and run logs", exists=DIR_OR_NEW),
    "cron_dir": Option(path, default=None, help="default: cron.d beside the config",
                       exists=DIR_OR_NEW),
    "tick": Option(period, default=10.0, help="how often due items are gathered and run"),
    "dropin_timeout": Option(timeout, default=600.0, help="default timeout of a drop-in run"),
    "check_timeout": Option(timeout, default=120.0, help="default timeout of a built-in check"),
    "log_retention": Option(duration, default=7 * 86400.0, help="run logs older are pruned"),
    "stop_file": Option(path, default=None, help="default: STOP in the state dir"),
    "job_name": Option(slurm_name, default="watchdogs-cron", help="the scheduler's own job name"),
    "heartbeat_stale": Option(duration, default=300.0, help="heartbeat age said loudly"),
    "heartbeat_url": Option(http_url, default=None,
                            help="dead man's switch: pinged while the scheduler runs "
                                 "(healthchecks.io style)"),
    "heartbeat_every": Option(duration, default=300.0, help="how often the dead man's switch is pinged"),
    "heartbeat_suffixes": Option(boolean, default=True,
                                 help="also ping <url>/start and <url>/fail (healthchecks.io); "
                                      "false: only plain pings (Uptime Kuma push)"),
    "mail_user": Option(string, default=None,
                        help="Slurm mails this address when the scheduler's own job fails"),
    "metrics_dir": Option(path, default=None, exists=DIR_OR_NEW,
                          help="node_exporter's textfile folder: watchdogs.prom is rewritten there "
                               "each tick (Prometheus text format)"),
}

CRON = {
    "hourly": Option(period, default=3600.0),
    "daily": Option(period, default=86400.0),
    "weekly": Option(period, default=7 * 86400.0),
}

ALERTS = {
    "notify": Option(notify_route, default=None, help="default route for checks naming none"),
    "repeat_every": Option(duration, default=4 * 3600.0),
    "after": Option(integer(1), default=1),
    "channel_down_after": Option(duration, default=1800.0),
    "templates": Option(path, default=None, help="folder of user templates", exists=DIR),
    "cluster": Option(string, default=None, help="cluster name shown in messages"),
}

CHECK_COMMON = {
    "name": Option(name, required=True),
    "type": Option(string, required=True),
    "every": Option(period, default=300.0),
    "timeout": Option(timeout, default=None),
    "notify": Option(notify_route, default=None),
    "runbook": Option(string, default=None),
    "after": Option(integer(1), default=None),
    "repeat_every": Option(duration, default=None),
    "enabled": Option(boolean, default=True),
    "tags": Option(string_list, default=()),
}

NOTIFY_COMMON = {
    "name": Option(name, required=True),
    "type": Option(string, required=True),
    "enabled": Option(boolean, default=True),
}

TOP_LEVEL = ("scheduler", "cron", "alerts", "check", "notify")
