"""Which HTTP proxy a request to a URL goes through: the channel's own `proxy` key, else
the environment (`https_proxy`/`http_proxy`/`no_proxy`, upper or lower case), read with the
same rules as `requests` uses (lower case first, `no_proxy` host suffixes and CIDR ranges).

Compute nodes often reach the internet only through a site proxy; the scheduler job
inherits the environment it was submitted from (`sbatch --export=ALL`), so the variables a
user sets on the login node usually reach it. The `proxy` key is for a channel that needs
a different one (or when the job's environment is scrubbed).
"""
from __future__ import annotations

from urllib.parse import urlsplit

from watchdogs.config.options import Option
from watchdogs.config.sections import proxy_url

PROXY_OPTION = Option(proxy_url, default=None,
                      help="HTTP proxy for this channel (default: https_proxy/http_proxy/no_proxy "
                           "from the environment)")


def proxy_for(url: str, configured: str | None) -> str | None:
    """The proxy a request to `url` goes through: `configured`, else what the environment
    says for this URL (None: straight to the server)."""
    if configured:
        return configured
    # requests' own helpers, so the channels on requests and those on urllib (slack_sdk)
    # agree on no_proxy; imported here: building a channel must stay cheap.
    from requests.utils import get_environ_proxies, select_proxy

    return select_proxy(url, get_environ_proxies(url))


def requests_proxies(configured: str | None) -> dict[str, str] | None:
    """`proxies=` for requests: the configured proxy for both schemes, else None (requests
    then reads the environment itself, `trust_env`)."""
    return {"http": configured, "https": configured} if configured else None


def shown(proxy: str | None) -> str:
    """A proxy URL for people: no user name or password."""
    if not proxy:
        return "direct"
    parts = urlsplit(proxy)
    return f"{parts.scheme}://{parts.hostname}:{parts.port}" if parts.hostname else "a proxy"
