"""The top-level tables of watchdogs.toml and the keys common to every [[check]]/[[notify]].

Each check type and channel adds its own keys through its class's `options`.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from watchdogs.config.options import (
    Option,
    boolean,
    duration,
    integer,
    named_kind,
    notify_route,
    path,
    period,
    string,
    string_list,
    timeout,
)
from watchdogs.config.paths import DIR_OR_NEW, DIR_OR_NEW_TRUSTED, DIR_TRUSTED, name, slurm_name


def http_url(value: object) -> str:
    """An http(s) URL (the dead man's switch)."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")) or len(value) < 10:
        raise ValueError("an http:// or https:// URL")
    return value


def proxy_url(value: Any) -> str:
    """`http://host:port` (or https://). No password: a config file is read by many, and
    a proxy's credentials belong in the environment (`https_proxy`) like every secret."""
    expected = "a proxy URL such as http://proxy.example.org:3128"
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError(expected)
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise ValueError(expected) from None
    if not parts.hostname or port is None:
        raise ValueError(f"{expected} (with the port)")
    if parts.password:
        raise ValueError(f"{expected}, without a password (give credentials in https_proxy "
                         "in the scheduler's environment)")
    return value


named_kind("proxy_url", proxy_url)


SCHEDULER = {
    "state_dir": Option(path, default="~/.local/state/watchdogs",
                        help="SQLite state (run records, instances, heartbeat) and run logs, mode 0700",
                        exists=DIR_OR_NEW_TRUSTED),
    "cron_dir": Option(path, default=None, help="default: cron.d beside the config",
                       exists=DIR_OR_NEW),
    "tick": Option(period, default=10.0,
                   help="how often due items are gathered and run; also the heartbeat, the cron.d "
                        "rescan and the alert flush"),
    "dropin_timeout": Option(timeout, default=600.0,
                             help="default timeout of a drop-in run; per file `# watchdogs: timeout=...`, "
                                  "per crontab line `timeout=...`"),
    "check_timeout": Option(timeout, default=120.0,
                            help="default timeout of a built-in check; per check: `timeout`"),
    "log_retention": Option(duration, default=7 * 86400.0,
                            help="run logs, the scheduler's logs and run history older than this are pruned"),
    "stop_file": Option(path, default=None, help="default: STOP in the state dir"),
    "job_name": Option(slurm_name, default="watchdogs-cron",
                       help="the chain's Slurm job name (its queued successors carry it too)"),
    "heartbeat_stale": Option(duration, default=300.0,
                              help="an older heartbeat: status says HEARTBEAT STALE and exits 2"),
    "heartbeat_url": Option(http_url, default=None,
                            help="dead man's switch: pinged while the scheduler runs "
                                 "(healthchecks.io style)"),
    "heartbeat_proxy": Option(proxy_url, default=None,
                              help="HTTP proxy for the dead man's switch (default: https_proxy/"
                                   "http_proxy/no_proxy from the environment)"),
    "heartbeat_every": Option(duration, default=300.0, help="how often the dead man's switch is pinged"),
    "heartbeat_suffixes": Option(boolean, default=True,
                                 help="also ping <url>/start and <url>/fail (healthchecks.io); "
                                      "false: only plain pings (Uptime Kuma push)"),
    "mail_user": Option(string, default=None,
                        help="Slurm mails this address when the scheduler's own job fails "
                             "(`--mail-type=FAIL,INVALID_DEPEND`)"),
    # -- issue 34: the overlapping handover (watchdogs.scheduler.chain, .successor) --------
    "handover_lead": Option(duration, default=3600.0,
                            help="the next instance is eligible this long before the running one's "
                                 "time limit, so it can start (backfill) while this one still watches; "
                                 "capped at half the job's life"),
    "handover_warn": Option(duration, default=900.0,
                            help="WARNING when the next instance has not started this long before "
                                 "watching stops (capped at handover_lead)"),
    "metrics_dir": Option(path, default=None, exists=DIR_OR_NEW,
                          help="node_exporter's textfile folder: watchdogs.prom is rewritten there "
                               "each tick (Prometheus text format)"),
}

CRON = {
    "hourly": Option(period, default=3600.0, help="period of cron.d/cron.hourly/"),
    "daily": Option(period, default=86400.0, help="period of cron.d/cron.daily/"),
    "weekly": Option(period, default=7 * 86400.0, help="period of cron.d/cron.weekly/"),
}

ALERTS = {
    "notify": Option(notify_route, default=None, help="default route for checks naming none"),
    "repeat_every": Option(duration, default=4 * 3600.0, help="remind while still failing"),
    "after": Option(integer(1), default=1, help="consecutive bad readings before the first alert"),
    "channel_down_after": Option(duration, default=1800.0,
                                 help="then the other channels say that a channel is failing"),
    "templates": Option(path, default=None, help="folder of user templates", exists=DIR_TRUSTED),
    "cluster": Option(string, default=None, help="cluster name shown in messages"),
}

CHECK_COMMON = {
    "name": Option(name, required=True, help="unique among the checks; the item's name in alerts"),
    "type": Option(string, required=True, help="the check type (job, log_stale, disk, nodes or a plugin's)"),
    "every": Option(period, default=300.0, help="how often it runs (some types default to less)"),
    "timeout": Option(timeout, default=None, help="default: [scheduler] check_timeout"),
    "notify": Option(notify_route, default=None, help="its route; default: [alerts] notify, else all"),
    "runbook": Option(string, default=None, help="what to do next, shown in its alerts"),
    "after": Option(integer(1), default=None, help="default: [alerts] after"),
    "repeat_every": Option(duration, default=None, help="default: [alerts] repeat_every"),
    "enabled": Option(boolean, default=True, help="false: validated, but not run"),
    "tags": Option(string_list, default=(), help="labels for your tools (unused by the watchdog)"),
}

NOTIFY_COMMON = {
    "name": Option(name, required=True, help="unique among the channels; routes name it"),
    "type": Option(string, required=True, help="the channel type (email, slack, sms, webhook, ...)"),
    "enabled": Option(boolean, default=True, help="false: alerts skip it (notify-test says so)"),
}

TOP_LEVEL = ("scheduler", "cron", "alerts", "check", "notify")
