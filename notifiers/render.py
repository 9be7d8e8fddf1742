"""What a channel renders: alert events grouped into a batch (`watchdogs.alerts.events`),
through jinja2 templates.

Templates are looked up as `<channel type>.<part>.j2`, then `default.<part>.j2` (parts:
`subject`, `txt`, `html`), first in the user's folder (`[alerts] templates`), then in the
package. HTML templates are autoescaped. A broken user template never loses an alert: the
built-in template is used instead and the error is logged.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2

from notifiers import wording
from notifiers.base import Message
from watchdogs import humanize
from watchdogs.alerts.events import Batch

LOG = logging.getLogger("notifiers.render")
BUILTIN = Path(__file__).resolve().parent / "templates"


def when(value: datetime) -> str:
    """"2026-11-23 03:15:07 UTC": the date, the time and the zone (watchdogs.humanize)."""
    return humanize.moment_seconds(value)


def age(value: timedelta | float) -> str:
    """timedelta or seconds -> "3 d 04 h", "6 h 02 min", "4 min 10 s", "12 s"."""
    return humanize.duration(value)


def mrkdwn(text: str) -> str:
    """Escape for Slack mrkdwn: only &, < and > are special."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=loader, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False,
                                            default_for_string=False))
    env.filters.update(when=when, age=age, where=wording.where, mrkdwn=mrkdwn,
                       newest=wording.newest, log_end=wording.log_end, headline=wording.headline,
                       next_step=wording.next_step)
    return env


class Templates:
    """The template lookup for every channel: the user's folder first, then the package's."""

    def __init__(self, user_dir: Path | None = None) -> None:
        self.user_dir = user_dir
        self.builtin = _environment(jinja2.FileSystemLoader(str(BUILTIN)))
        self.env = self.builtin if user_dir is None else _environment(jinja2.ChoiceLoader(
            [jinja2.FileSystemLoader(str(user_dir)), jinja2.FileSystemLoader(str(BUILTIN))]))

    def render(self, part: str, channel_type: str, **context: Any) -> str:
        names = [f"{channel_type}.{part}.j2", f"default.{part}.j2"]
        try:
            return self.env.select_template(names).render(**context)
        except jinja2.TemplateError as exc:
            if self.env is self.builtin:
                raise
            LOG.error("template %s for %s in %s is broken (%s); using the built-in one",
                      part, channel_type, self.user_dir, exc)
            return self.builtin.select_template(names).render(**context)

    def message(self, batch: Batch, channel_type: str, html: bool = False,
                limit: int | None = None, extra: Mapping[str, Any] | None = None) -> Message:
        """Subject, text (and HTML) for `batch`; `limit` caps how many events are listed."""
        shown = batch.events if limit is None else batch.events[:limit]
        context = {"batch": batch, "events": shown, "more": len(batch.events) - len(shown)}
        subject = " ".join(self.render("subject", channel_type, **context).split())
        return Message(
            subject=subject[:200], text=self.render("txt", channel_type, **context).strip() + "\n",
            html=self.render("html", channel_type, **context) if html else None,
            severity=batch.severity, key=batch.key, extra=dict(extra or {}))


def plain_message(batch: Batch) -> Message:
    """The last resort when a template or a channel's renderer fails: no jinja, no HTML."""
    lines = [f"{batch.headline} on cluster {batch.cluster} (watchdogs on {batch.host})"]
    lines += [f"{e.label}: {e.item}: {e.summary}" for e in batch.events]
    return Message(subject=f"[watchdogs {batch.cluster}] {batch.headline}", text="\n".join(lines) + "\n",
                   severity=batch.severity, key=batch.key)
