"""What a channel renders: alert events grouped into a batch (`watchdogs.alerts.events`),
through jinja2 templates.

Templates are looked up as `<channel type>.<part>.j2`, then `default.<part>.j2` (parts:
`subject`, `txt`, `html`), first in the user's folder (`[alerts] templates`), then in the
package. HTML templates are autoescaped. A broken user template never loses an alert: the
built-in template is used instead and the error is logged.

Templates are code: a user template is read only from a file that only the user (or root)
can change, through a folder only they can change, without following a symlink
(watchdogs.trust), and every template renders in Jinja's sandbox, so even a template that
got through cannot reach `os` through an object's attributes.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox

from notifiers import wording
from notifiers.base import Message
from watchdogs import humanize
from watchdogs.alerts.events import Batch
from watchdogs.trust import UntrustedFile, read_trusted

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


class TrustedLoader(jinja2.BaseLoader):
    """The user's template folder, read through watchdogs.trust: a template someone else
    could have written is refused (logged, and the built-in one is used)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get_source(self, environment: jinja2.Environment, template: str
                   ) -> tuple[str, str, Callable[[], bool]]:
        if "/" in template or template.startswith("."):
            raise jinja2.TemplateNotFound(template)
        path = self.folder / template
        if not os.path.lexists(path):
            raise jinja2.TemplateNotFound(template)
        try:
            source = read_trusted(path).decode("utf-8", errors="replace")
        except UntrustedFile as exc:
            LOG.error("template %s refused: %s; using the built-in one", path, exc)
            raise jinja2.TemplateNotFound(template) from None
        except OSError as exc:
            LOG.error("template %s cannot be read (%s); using the built-in one", path, exc.strerror)
            raise jinja2.TemplateNotFound(template) from None
        return source, str(path), lambda: False   # never cached across a change: read again


def _environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    env = jinja2.sandbox.SandboxedEnvironment(
        loader=loader, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False,
                                            default_for_string=False))
    env.filters.update(when=when, age=age, where=wording.where, mrkdwn=mrkdwn,
                       newest=wording.newest, log_end=wording.log_end, headline=wording.headline,
                       next_step=wording.next_step)
    return env


SUBJECT_LIMIT = 200
"""Longer subjects are cut at a clause or a word, with "…" (wording.headline): never mid-word."""


class Templates:
    """The template lookup for every channel: the user's folder first, then the package's."""

    def __init__(self, user_dir: Path | None = None) -> None:
        self.user_dir = user_dir
        self.builtin = _environment(jinja2.FileSystemLoader(str(BUILTIN)))
        self.env = self.builtin if user_dir is None else _environment(jinja2.ChoiceLoader(
            [TrustedLoader(user_dir), jinja2.FileSystemLoader(str(BUILTIN))]))

    def render(self, part: str, channel_type: str, **context: Any) -> str:
        names = [f"{channel_type}.{part}.j2", f"default.{part}.j2"]
        try:
            return self.env.select_template(names).render(**context)
        except (jinja2.TemplateError, jinja2.sandbox.SecurityError) as exc:
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
            subject=wording.headline(subject, SUBJECT_LIMIT),
            text=self.render("txt", channel_type, **context).strip() + "\n",
            html=self.render("html", channel_type, **context) if html else None,
            severity=batch.severity, key=batch.key, extra=dict(extra or {}))


def plain_message(batch: Batch) -> Message:
    """The last resort when a template or a channel's renderer fails: no jinja, no HTML."""
    lines = [f"{batch.headline} on cluster {batch.cluster} (watchdogs on {batch.host})"]
    lines += [f"{e.label}: {e.item}: {e.summary}" for e in batch.events]
    return Message(subject=f"[watchdogs {batch.cluster}] {batch.headline}", text="\n".join(lines) + "\n",
                   severity=batch.severity, key=batch.key)
