"""What the package's modules share: the release number, the API's default address, the
error that calls raise and the record type. Only the standard library."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

#: A step record as vllmstat returns it: ``{"step": 3, "metrics": {...}, "phases": {...}, ...}``.
Record = Dict[str, Any]

# The API's address when neither the caller nor VLLMSTAT_URL names one (vllmstat's default listen).
DEFAULT_URL = "http://127.0.0.1:9400"

_HERE = os.path.dirname(os.path.abspath(__file__))


def _read_version() -> str:
    """The release number from the VERSION file beside this module (the Go binary embeds the
    same file); "unknown" for a copy of the package without it."""
    try:
        with open(os.path.join(_HERE, "VERSION"), encoding="utf-8") as f:
            return f.read().strip() or "unknown"
    except OSError:
        return "unknown"


#: This client's release number; ``vllmstat --version`` of the bundled binary says the same.
__version__ = _read_version()


def _base_url(url: Optional[str]) -> str:
    """The API's base URL: ``url``, else ``VLLMSTAT_URL``, else the default; ``host:port`` gets http://."""
    url = url or os.environ.get("VLLMSTAT_URL") or DEFAULT_URL
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/")


class VllmstatError(Exception):
    """A call to vllmstat failed: no connection, or an error answer.

    ``status`` is the HTTP status code (``None`` when there was no answer).
    """

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status


class _NoAnswer(VllmstatError):
    """vllmstat took the request and did not answer in time."""


def _url_host(addr: str) -> str:
    """addr as the host part of a URL: an IPv6 address in brackets."""
    return "[%s]" % addr if ":" in addr else addr

