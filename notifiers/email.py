"""`email`: stdlib smtplib/email. Plain SMTP, STARTTLS or SMTP over TLS, optional login;
multipart text + HTML; several recipients in one SMTP transaction. Or, with
`transport = "sendmail"`, the host's sendmail program (notifiers/sendmail.py), for compute
nodes with no SMTP server in reach but a site mail relay behind /usr/sbin/sendmail.

The outbox key becomes the Message-ID, so a message re-sent after a crash in the window
between the server's "250 OK" and our bookkeeping carries the same Message-ID as the first
(mail stores and clients that de-duplicate by Message-ID show it once).
"""
from __future__ import annotations

import logging
import smtplib
import socket
import ssl
from collections.abc import Mapping
from email.message import EmailMessage
from email.utils import formatdate
from typing import TYPE_CHECKING, Any, ClassVar

from notifiers.base import Message, Notifier, TransportError
from notifiers.common import secret_pair_problems
from notifiers.sendmail import hand_over
from watchdogs.config.options import Option, boolean, choice, integer, path, string, string_list, timeout
from watchdogs.errors import SecretError

if TYPE_CHECKING:
    from notifiers.render import Templates
    from watchdogs.alerts.events import Batch

LOG = logging.getLogger("notifiers.email")


class EmailNotifier(Notifier):
    type_name = "email"
    options: ClassVar[Mapping[str, Option]] = {
        "transport": Option(choice("smtp", "sendmail"), default="smtp",
                            help='"sendmail": hand the message to the sendmail program instead of SMTP'),
        "sendmail": Option(path, default="/usr/sbin/sendmail",
                           help="the sendmail program (transport = sendmail)"),
        "host": Option(string, default="localhost", help="SMTP server"),
        "port": Option(integer(0, 65535), default=0, help="0: 465 with ssl, 587 with starttls, else 25"),
        "sender": Option(string, required=True, help="From address"),
        "to": Option(string_list, required=True, help="recipient addresses"),
        "starttls": Option(boolean, default=False),
        "ssl": Option(boolean, default=False, help="SMTP over TLS from the first byte (port 465)"),
        "username": Option(string, default=None),
        "password_env": Option(string, default=None, help="environment variable holding the password"),
        "password_file": Option(path, default=None, help="file (mode 0600) holding the password"),
        "timeout": Option(timeout, default=10.0),
        "ca_file": Option(path, default=None, help="CA certificates to verify the server with"),
        "html": Option(boolean, default=True, help="add an HTML alternative"),
    }
    secret_keys = (("password_env", "password_file"),)

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        problems = secret_pair_problems(values, "password_env", "password_file")
        if values["ssl"] and values["starttls"]:
            problems.append(("starttls", True, "not both ssl and starttls (ssl: TLS from the first "
                                               "byte, port 465; starttls: upgrade, port 587)"))
        has_password = values["password_env"] or values["password_file"]
        if values["username"] and not has_password:
            problems.append(("username", values["username"], "also password_env or password_file"))
        if has_password and not values["username"]:
            problems.append(("username", None, "a login name, since a password is configured"))
        problems += [("to", addr, "an email address") for addr in values["to"] if "@" not in addr]
        if values["transport"] == "sendmail":
            # The program's own configuration decides the relay, TLS and login.
            problems += [(key, values[key], "no SMTP setting with transport = \"sendmail\" (the "
                                            "program's own configuration chooses the relay)")
                         for key in ("starttls", "ssl", "username", "port", "ca_file") if values[key]]
        return problems

    @property
    def uses_sendmail(self) -> bool:
        return bool(self.opts["transport"] == "sendmail")

    @property
    def port(self) -> int:
        return self.opts["port"] or (465 if self.opts["ssl"] else 587 if self.opts["starttls"] else 25)

    def describe(self) -> str:
        if self.uses_sendmail:
            return f"email to {', '.join(self.opts['to'])} via {self.opts['sendmail']}"
        scheme = "smtps" if self.opts["ssl"] else "smtp"
        how = " with STARTTLS" if self.opts["starttls"] else ""
        login = f", login as {self.opts['username']}" if self.opts["username"] else ""
        return (f"email to {', '.join(self.opts['to'])} via {scheme}://{self.opts['host']}:{self.port}"
                f"{how}{login}")

    def endpoints(self) -> tuple[str, ...]:
        return () if self.uses_sendmail else (f"smtp://{self.opts['host']}:{self.port}",)

    def render(self, batch: Batch, templates: Templates) -> Message:
        return templates.message(batch, self.type_name, html=self.opts["html"])

    def notify(self, message: Message) -> None:
        try:
            password = self.secret("password_env", "password_file", "SMTP password")
        except SecretError as exc:
            raise TransportError(str(exc), permanent=True) from None
        mail = self.build(message)
        if self.uses_sendmail:
            hand_over(self.opts["sendmail"], mail.as_bytes(), self.opts["sender"], self.opts["to"],
                      self.opts["timeout"])
            return
        try:
            self._deliver(mail, password.reveal() if password else None)
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            raise TransportError(self.scrub(f"every recipient refused: {exc.recipients}"),
                                 permanent=all(c >= 500 for c in codes)) from None
        except smtplib.SMTPResponseException as exc:
            text = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) \
                else str(exc.smtp_error)
            raise TransportError(self.scrub(f"{self._where()}: SMTP {exc.smtp_code} {text}"),
                                 permanent=exc.smtp_code >= 500) from None
        except smtplib.SMTPNotSupportedError as exc:
            raise TransportError(f"{self._where()}: {exc}", permanent=True) from None
        except ssl.SSLCertVerificationError as exc:
            raise TransportError(f"{self._where()}: TLS certificate refused: {exc.verify_message}",
                                 permanent=True) from None
        except (smtplib.SMTPException, OSError) as exc:
            reason = exc.strerror or str(exc)  # SMTPException is an OSError too
            raise TransportError(self.scrub(
                f"{self._where()}: {type(exc).__name__}: {reason or 'timed out'}")) from None

    def _where(self) -> str:
        return f"{self.opts['host']}:{self.port}"

    def build(self, message: Message) -> EmailMessage:
        mail = EmailMessage()
        mail["Subject"] = message.subject
        mail["From"] = self.opts["sender"]
        mail["To"] = ", ".join(self.opts["to"])
        mail["Date"] = formatdate(localtime=True)
        domain = self.opts["sender"].rpartition("@")[2] or "watchdogs"
        if message.key:
            mail["Message-ID"] = f"<{message.key}@{domain}>"
            mail["X-Watchdogs-Key"] = message.key
        mail["X-Watchdogs-Severity"] = message.severity
        mail["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation auto-replies
        mail.set_content(message.text)
        if message.html:
            mail.add_alternative(message.html, subtype="html")
        return mail

    def _deliver(self, mail: EmailMessage, password: str | None) -> None:
        smtp = self._connect()
        try:
            if self.opts["username"] and password is not None:
                smtp.login(self.opts["username"], password)
            refused = smtp.send_message(mail, from_addr=self.opts["sender"], to_addrs=list(self.opts["to"]))
            if refused:
                # The others got it: re-sending would duplicate for them. Say who missed out.
                LOG.warning(
                    "channel %s: recipients refused: %s", self.name, ", ".join(sorted(refused)))
        finally:
            self._close(smtp)

    def _connect(self) -> smtplib.SMTP:
        """Every socket operation is bounded by `timeout`; the local name is given so smtplib
        does not ask DNS for our FQDN (which can hang on a badly configured node)."""
        local = socket.gethostname()
        timeout = self.opts["timeout"]
        if self.opts["ssl"]:
            return smtplib.SMTP_SSL(self.opts["host"], self.port, local_hostname=local, timeout=timeout,
                                    context=self._tls_context())
        smtp = smtplib.SMTP(self.opts["host"], self.port, local_hostname=local, timeout=timeout)
        if self.opts["starttls"]:
            try:
                smtp.starttls(context=self._tls_context())
            except BaseException:
                self._close(smtp)
                raise
        return smtp

    def _tls_context(self) -> ssl.SSLContext:
        """Only built when TLS is used: loading the system CA store costs ~50 ms."""
        ca_file = self.opts["ca_file"]
        return ssl.create_default_context(cafile=str(ca_file) if ca_file else None)

    @staticmethod
    def _close(smtp: smtplib.SMTP) -> None:
        """QUIT politely but never let its failure turn an accepted message into an error
        (smtplib's context manager would raise after the server said 250, and we would
        send it again)."""
        try:
            smtp.quit()
        except (smtplib.SMTPException, OSError):
            smtp.close()
