"""Secrets come from the environment or a private file, and never show up anywhere."""
from __future__ import annotations

from pathlib import Path

import pytest

from notifiers.base import TransportError
from notifiers.secrets import Secret, load_secret, scrub
from tests.notifiers.support import channel, config, render
from watchdogs.errors import ConfigError, SecretError


def secret_file(folder: Path, mode: int, value: str = "hunter2-the-password") -> Path:
    path = folder / "password"
    path.write_text(value + "\n")
    path.chmod(mode)
    return path


def test_a_group_readable_secret_file_is_refused_naming_file_and_mode_not_content(tmp_path: Path) -> None:
    path = secret_file(tmp_path, 0o644)
    with pytest.raises(SecretError) as caught:
        load_secret(None, path, {}, 'channel "mail": SMTP password')
    text = str(caught.value)
    assert str(path) in text and "0644" in text and "chmod 600" in text
    assert "hunter2" not in text


def test_a_private_secret_file_is_read_without_its_newline(tmp_path: Path) -> None:
    secret = load_secret(None, secret_file(tmp_path, 0o600), {}, "x")
    assert secret is not None and secret.reveal() == "hunter2-the-password"
    assert "hunter2" not in repr(secret) and "hunter2" not in f"{secret}"


def test_a_missing_environment_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match=r"\$SLACK_HOOK is not set"):
        load_secret("SLACK_HOOK", None, {}, "slack")


def test_the_config_loader_names_an_unsafe_absolute_secret_file(tmp_path: Path) -> None:
    path = secret_file(tmp_path, 0o640)
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, f"""
        [[notify]]
        name = "mail"
        type = "email"
        sender = "w@example.org"
        to = "ops@example.org"
        username = "bot"
        password_file = "{path}"
        """)
    text = str(caught.value)
    assert 'notify "mail": key \'password_file\'' in text and "mode 0640" in text
    assert "hunter2" not in text


MAIL_WITH_RELATIVE_SECRET = """
    [[notify]]
    name = "mail"
    type = "email"
    port = 1
    sender = "w@example.org"
    to = "ops@example.org"
    username = "bot"
    password_file = "password"
    """


def test_the_config_loader_names_an_unsafe_relative_secret_file(tmp_path: Path) -> None:
    secret_file(tmp_path, 0o604)
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, MAIL_WITH_RELATIVE_SECRET)
    text = str(caught.value)
    assert f"key 'password_file' = '{tmp_path / 'password'}'" in text and "mode 0604" in text
    assert "hunter2" not in text


def test_a_secret_file_made_unsafe_after_loading_is_refused_at_send_time(tmp_path: Path) -> None:
    path = secret_file(tmp_path, 0o600)
    notifier = channel(tmp_path, MAIL_WITH_RELATIVE_SECRET)
    path.chmod(0o604)
    with pytest.raises(TransportError) as caught:
        notifier.notify(render(notifier))
    assert caught.value.permanent and "mode 0604" in caught.value.message
    assert "hunter2" not in caught.value.message


def test_contradicting_channel_keys_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, """
        [[notify]]
        name = "mail"
        type = "email"
        sender = "w@example.org"
        to = ["not-an-address"]
        ssl = true
        starttls = true

        [[notify]]
        name = "chat"
        type = "slack"
        token_env = "T"
        """)
    text = str(caught.value)
    assert "key 'starttls' = True: expected not both ssl and starttls" in text
    assert "key 'to' = 'not-an-address': expected one email address such as oncall@example.org" in text
    assert "notify \"chat\": key 'channel' = None: expected the channel to post to" in text


def test_scrub_masks_known_secrets_their_url_paths_and_token_shapes() -> None:
    hook = Secret("https://relay.example.org/services/T01/B02/AbCdEfGhIjKl", "$HOOK")
    text = ("POST /services/T01/B02/AbCdEfGhIjKl failed; also https://hooks.slack.com/services/X/Y/Z "
            "xoxb-123-456-abcdef and https://user:pa55word@host/x and Authorization: Bearer abc.def")
    clean = scrub(text, [hook])
    for leaked in ("AbCdEfGhIjKl", "services/X/Y/Z", "xoxb-123", "pa55word", "abc.def"):
        assert leaked not in clean
    assert "failed" in clean and "host/x" in clean
