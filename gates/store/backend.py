"""Where a history lives: an SQLite file path or a PostgreSQL URL.

Every place that takes a history (``--history``, ``--gates-history``,
``GATES_HISTORY``, ``gate-report merge --into``) passes the value through
`history_location`, which keeps a ``postgresql://`` URL a string (a `Path`
would fold its ``//``) and makes anything else a `Path`. `gates.store.history.History`
opens either: the store's methods are one implementation, and the PostgreSQL
connection (`gates.store.pg`) adapts the SQL they write.

Stdlib only (and `ci_register.running.redact`): the CLI and the pytest plugin import it before
anything heavy.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from ci_register.running.redact import mask_secrets

__all__ = ["PG_SCHEMES", "display_location", "hide_url_secrets", "history_location",
           "is_database_url", "mask_secrets"]


PG_SCHEMES = ("postgresql://", "postgres://")
_FOLDED = re.compile(r"^postgres(ql)?:/(?!/)")  # what Path() leaves of a URL


def is_database_url(value: object) -> bool:
    """True for a ``postgresql://`` (or ``postgres://``) URL, as given or folded by Path."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str):
        return False
    return text.lower().startswith(PG_SCHEMES) or bool(_FOLDED.match(text.lower()))


def history_location(value: str | os.PathLike[str]) -> str | Path:
    """A PostgreSQL URL as a string (its ``//`` restored if a Path folded it), else a Path."""
    text = os.fspath(value)
    if not is_database_url(text):
        return Path(text)
    match = _FOLDED.match(text.lower())
    if match:
        text = text[:match.end()] + "/" + text[match.end():]
    return text


def _userinfo_end(rest: str) -> int:
    """Where the userinfo of a URL's part after ``://`` ends (its last ``@`` before the
    query, else its last ``@``), or -1: a password may hold ``@ / ? #``, spaces or
    quotes unencoded, and libpq and Python split such a URL differently."""
    at = rest.rfind("@", 0, len(rest.partition("?")[0]))
    return at if at >= 0 else rest.rfind("@")


def display_location(location: str | os.PathLike[str]) -> str:
    """The location for messages: a URL without its credentials, a path as it is."""
    text = os.fspath(location)
    if is_database_url(text) and "://" in text:
        scheme, rest = text.split("://", 1)
        at = _userinfo_end(rest)
        if at >= 0 and ":" in rest[:at]:
            text = f"{scheme}://{rest[:rest.index(':')]}:***{rest[at:]}"
    return mask_secrets(text)


def url_secrets(url: str) -> list[str]:
    """Every piece of a database URL that is or may be part of its password, as written
    and percent-decoded, longest first: the password as Python splits the URL, its parts
    between ``: @ /`` (where libpq splits it: it reads a password with an ``@`` as part
    host), and ``password=`` values of the query."""
    rest = url.split("://", 1)[-1]
    pieces: list[str] = []
    at = _userinfo_end(rest)
    if at >= 0:
        password = rest[:at].partition(":")[2]
        pieces += [rest[:at], password, *re.split(r"[:@/?#\s\"']", password)]
    pieces += re.findall(r"(?i)(?:[?&]|^)(?:ssl)?password=([^&]*)", rest)
    out = {p for piece in pieces if len(piece) >= 2 for p in (piece, unquote(piece))}
    return sorted(out, key=len, reverse=True)


def hide_url_secrets(text: str, url: str) -> str:
    """`text` (a driver's error about `url`) with every piece of the URL's password in it
    replaced by ``***``, then `mask_secrets`: libpq echoes a malformed URL or part of it
    (``invalid percent-encoded token: "p%zzPASSWORD"``)."""
    for piece in url_secrets(url):
        text = text.replace(piece, "***")
    return mask_secrets(text)
