"""A local SMTP mailbox for the demo and for trying channels: every message received is
stored as one .eml file in a folder.

    python -m notifiers.devmailbox --port 8025 --dir /tmp/mailbox

Listens on 127.0.0.1 only; stops on SIGTERM/SIGINT. aiosmtpd (a test dependency) is
imported only when this runs.
"""
from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
import threading
import time
from email import message_from_bytes
from email.policy import default as default_policy
from pathlib import Path
from typing import Any

from watchdogs import ownfiles


class MailboxHandler:
    """aiosmtpd handler: write each message atomically (temp file, then rename), so a reader
    polling the folder never sees half a message."""

    def __init__(self, folder: Path, quiet: bool = False) -> None:
        self.folder = folder
        self.quiet = quiet
        self._numbers = itertools.count(1)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd calls this
        data = envelope.original_content or envelope.content
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{next(self._numbers):05d}.eml"
        raw = data if isinstance(data, bytes) else data.encode()
        ownfiles.write_atomic(self.folder / name, raw, 0o644)
        if not self.quiet:
            subject = message_from_bytes(raw, policy=default_policy)["Subject"]
            print(f"devmailbox: {envelope.mail_from} -> {', '.join(envelope.rcpt_tos)}: {subject} [{name}]",
                  flush=True)
        return "250 Message accepted for delivery"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m notifiers.devmailbox", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="folder for the .eml files")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    from aiosmtpd.controller import Controller  # lazily: a test/demo dependency only

    ownfiles.make_dirs(args.dir, 0o755)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())  # only set a flag in the handler
    # server_hostname: else aiosmtpd asks DNS for its FQDN on every connection.
    controller = Controller(MailboxHandler(args.dir, args.quiet), hostname=args.host, port=args.port,
                            server_hostname="localhost")
    controller.start()
    print(f"devmailbox: listening on {args.host}:{args.port}, storing in {args.dir}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
