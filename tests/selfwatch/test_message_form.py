"""What a tired reader copies out of a mail works as written (issue 36 item 6): a long
subject is cut at a word and says so with "…", and the footer's commands carry `--config`
with the config's absolute path, so they work from any folder (the scheduler's cwd is not
the reader's). Asserted on the mail a real SMTP server received, then by running the
footer's silence command as printed, from another folder."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.notifiers.fakes import SmtpServer
from tests.scheduler.conftest import Site, script
from tests.selfwatch.conftest import mail_config

WORDS = ("the nightly export will not run: writing the manifest of every shard failed because "
         "the destination bucket refused the credentials rotated this afternoon by the platform team")


NAME = "nightly-export-of-the-training-shards-to-the-archive-bucket-for-the-evaluation-team-v2"


def test_a_long_subject_is_cut_at_a_word_and_the_footer_commands_work_from_any_folder(
        site: Site, smtp: SmtpServer, tmp_path: Path) -> None:
    mail_config(site, smtp)
    # A long drop-in name: the template's own cut of the summary (at a word) is not enough,
    # and the subject as a whole is past the 200 characters a channel keeps.
    site.dropin(NAME, script(f"echo '{WORDS}'\nexit 2"))
    env = {k: v for k, v in site.env().items() if k != "WATCHDOGS_CONFIG"}
    done = subprocess.run([sys.executable, "-m", "watchdogs", "--config", str(site.config), "run", "--once"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=site.root)
    assert done.returncode == 2, done.stderr
    (received,) = smtp.received
    subject = " ".join(str(received.message["Subject"]).split())
    body = received.message.get_body(("plain",)).get_content()
    assert len(subject) <= 200 and subject.endswith(" …"), subject
    kept = subject.removesuffix(" …").split()[-1]
    assert re.search(rf"(^|\s){re.escape(kept)}(\s|[;:,.]|$)", WORDS), f"cut inside a word: {subject}"

    footer = next(line for line in body.splitlines() if line.startswith("Silence: "))
    config = os.path.abspath(site.config)
    assert f"watchdogs --config {shlex.quote(config)} silence ITEM" in footer, footer
    command = footer.removeprefix("Silence: ").split("    Acknowledge:")[0]
    argv = shlex.split(command.replace("ITEM", f"cron.hourly/{NAME}").replace('"..."', "'planned'"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60,
                         env=env, cwd=elsewhere)
    assert ran.returncode == 0, ran.stdout + ran.stderr
