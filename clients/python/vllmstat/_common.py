"""What the package's modules share: the release number, the API's default address, the
error that calls raise and the record type. Only the standard library."""

from __future__ import annotations

import numbers
import operator
import os
import re
import sys
import warnings
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
        super().__init__(_redact(message))
        self.status = status


class _NoAnswer(VllmstatError):
    """vllmstat took the request and did not answer in time."""


def _url_host(addr: str) -> str:
    """addr as the host part of a URL: an IPv6 address in brackets."""
    return "[%s]" % addr if ":" in addr else addr



# The user info of a URL ("user:password@"), in any text: up to the last "@" before a space,
# since a password may hold a raw "@". Hiding more than the user info is the safe mistake.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)\S*@")


def _redact(text: str) -> str:
    """text with the user info of every URL in it replaced, as vllmstat writes it (<secret>)."""
    return _USERINFO.sub(r"\1<secret>@", text)


def _warn(msg: str, stacklevel: int) -> None:
    """warnings.warn(msg, RuntimeWarning, stacklevel) with URL user info hidden, and shown
    again when the same text comes from the same line: the client limits its warnings itself
    (per kind, with counts), and Python's "default" action, once per line and text, would
    hide a refusal told again. The user's filters ("ignore", "error") still apply."""
    try:
        frame = sys._getframe(stacklevel)
    except ValueError:
        filename, lineno, module, globs = "sys", 1, "sys", None
    else:
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        globs = frame.f_globals
        module = globs.get("__name__", "<string>")
    warnings.warn_explicit(_redact(msg), RuntimeWarning, filename, lineno, module=module, registry={},
                           module_globals=globs)


_DECIMAL = re.compile(r"[0-9]+")

# The largest step number or policy version: JSON numbers are exact up to 2**53.
MAX_NUMBER = 2 ** 53


def _whole(value: Any, what: str, top: int = MAX_NUMBER, top_text: str = "2**53", strings: bool = False) -> int:
    """value as an int when it is a whole number from 0 to top: an int or another integer type
    (numpy's, through operator.index), a float with no fraction and, with strings, a string of
    decimal digits ("010" is 10). Anything else, bools and other bases among them, is a
    ValueError naming what."""
    n = None
    if isinstance(value, str):
        if strings and _DECIMAL.fullmatch(value):
            n = int(value, 10)
    elif not isinstance(value, bool):
        try:
            n = operator.index(value)
        except TypeError:
            if isinstance(value, numbers.Real):  # float, and numpy's floats
                f = float(value)
                if f.is_integer():
                    n = int(f)
    if n is None or not 0 <= n <= top:
        raise ValueError("%s must be a whole number from 0 to %s%s, got %r" % (
            what, top_text, " (an int, or decimal digits)" if strings else "", value))
    return n
