"""Whether a value given as a history location can be one (stdlib only).

The runner (`--history`, ``GATES_HISTORY``), the gates pytest plugin (``--gates-history``)
and ``gate-report merge --into`` write the history they are given, creating the file when
it is missing. A value that only looks like a location made a file nobody meant: a blank
or space-padded CI variable made a file named " " in the checkout, ``sqlite:///x.db`` a
folder ``sqlite:`` holding ``x.db``, ``host=db password=...`` a file named after it, a newline a file name with a line break in it. Each
is refused before anything is written, with what to give instead. ci_register never
imports gates, so the rule lives here and gates imports it.
"""

from __future__ import annotations

import re

__all__ = ["HISTORY_ENV", "history_argv", "history_problem", "is_conninfo", "is_database_url"]

HISTORY_ENV = "GATES_HISTORY"

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_DATABASE_SCHEMES = ("postgresql", "postgres")
# libpq's keyword/value form (``host=db password=... dbname=gates``): taken as a path it
# became an SQLite file named after it, password included, on the children's command line.
_CONNINFO = re.compile(r"(?i)(?:^|\s)(?:host|hostaddr|dbname|user|password|port|sslmode|"
                       r"service|options|connect_timeout)\s*=")


def history_problem(value: str) -> str | None:
    """Why ``value`` cannot be a history location, in words that name the fix; or None."""
    if not value.strip():
        return "is blank: give a history file path or a postgresql:// URL"
    if value != value.strip():
        return ("starts or ends with a space (a padded CI variable?): give the path "
                "without it")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "holds a control character (a newline?): give the path alone"
    scheme = _URL.match(value)
    if scheme and scheme.group(1).lower() not in _DATABASE_SCHEMES:
        return (f"is a {scheme.group(1)}:// URL, and only postgresql:// URLs name a "
                "database: give an SQLite history as a plain file path (x.db, not "
                "sqlite:///x.db)")
    if is_conninfo(value):
        return ("is a key=value connection string, not a file path: write it as a URL, "
                "postgresql://USER:PASSWORD@HOST:PORT/DBNAME")
    return None


def is_conninfo(value: str) -> bool:
    """A libpq keyword/value connection string (``host=db dbname=gates ...``)."""
    return bool(_CONNINFO.search(value))


def is_database_url(value: str) -> bool:
    """A ``postgresql://`` (or ``postgres://``) URL: a database, not a file."""
    return value.lower().startswith(tuple(f"{s}://" for s in _DATABASE_SCHEMES))


def history_argv(flag: str, value: str) -> tuple[list[str], dict[str, str]]:
    """How a child process gets the history ``value``: (its arguments, its environment).

    A file path goes on the command line (``[flag, value]``). A database URL, which may
    carry a password, goes in ``GATES_HISTORY`` instead: a command line is readable by
    every user of the host (``ps``, ``/proc/PID/cmdline``), an environment only by the
    process's owner. Every child that takes ``--history`` falls back to ``GATES_HISTORY``."""
    if is_database_url(value):
        return [], {HISTORY_ENV: value}
    return [flag, value], {}
