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

from ci_register.running.redact import mask_secrets

__all__ = ["PG_SCHEMES", "display_location", "history_location", "is_database_url",
           "mask_secrets"]


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


def display_location(location: str | os.PathLike[str]) -> str:
    """The location for messages: a URL without its credentials, a path as it is."""
    return mask_secrets(os.fspath(location))
