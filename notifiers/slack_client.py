"""What the `slack` channel uses of slack_sdk. notifiers.slack imports this module when it
sends, so building the channel (as `watchdogs status` does) does not load the client library."""
from __future__ import annotations

from typing import Any

from slack_sdk import WebClient, WebhookClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler, RetryHandler
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator

__all__ = ["BoundedRateLimitHandler", "SlackApiError", "SlackClientError", "WebClient", "WebhookClient",
           "retry_handlers"]


class BoundedRateLimitHandler(RateLimitErrorRetryHandler):
    """slack_sdk's 429 handler, but only when the server asks for a short enough wait."""

    def __init__(self, max_retry_count: int, max_wait: float) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.max_wait = max_wait

    def _can_retry(self, *, state: Any, request: Any, response: Any = None, error: Any = None) -> bool:
        if not super()._can_retry(state=state, request=request, response=response, error=error):
            return False
        values = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), ["1"])
        try:
            return float(values[0]) <= self.max_wait
        except (TypeError, ValueError):
            return False


def retry_handlers(retries: int, max_wait: float) -> list[RetryHandler]:
    """Connection errors with back-off; 429s only when the server asks for a short wait."""
    return [ConnectionErrorRetryHandler(max_retry_count=retries,
                                        interval_calculator=BackoffRetryIntervalCalculator(0.5)),
            BoundedRateLimitHandler(retries, max_wait)]
