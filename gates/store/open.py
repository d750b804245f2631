"""Open a history by its location: a SQLite file, or a PostgreSQL database URL
(`open_history`); or a history file to read it, never writing it (`open_for_reading`).

The one place that picks the backend, so that `gates.store.history` (SQLite) never
imports `gates.store.pg` (whose backend it is given) and psycopg loads only when asked.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from gates.store.backend import is_database_url
from gates.store.history import BUSY_TIMEOUT_S, History, HistoryError
from gates.store.sqlite_backend import connect

__all__ = ["open_for_reading", "open_history"]


def open_history(path: str | os.PathLike[str], *, create: bool = True,
                 readonly: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S) -> History:
    """Open (and create or migrate, unless `readonly`) the history at `path`."""
    if is_database_url(path):
        from gates.store.pg import PgBackend  # noqa: PLC0415 - psycopg only when asked

        return History(path, backend=PgBackend(path, create=create, readonly=readonly,
                                               busy_timeout_s=busy_timeout_s))
    return History(path, create=create, readonly=readonly, busy_timeout_s=busy_timeout_s)


def open_for_reading(path: str | os.PathLike[str], *,
                     busy_timeout_s: float = BUSY_TIMEOUT_S) -> History:
    """Open a history file to read it, never writing it.

    Read-only; a file of an older schema is read through a migrated temporary copy
    (SQLite's backup of it, migrated, deleted on close), so a report, a dry run or a
    planner reading a committed history leaves it byte for byte as it was. The file
    itself migrates on its next write (a suite run, ``gate-report accept``).
    Messages name the file, not the copy.
    """
    source = Path(path)
    try:
        return History(source, create=False, readonly=True, busy_timeout_s=busy_timeout_s)
    except HistoryError as exc:
        if "schema is older" not in str(exc):
            raise
    folder = Path(tempfile.mkdtemp(prefix="gates-read-"))
    try:
        src = connect(source, True, busy_timeout_s)
        try:
            dst = sqlite3.connect(folder / source.name)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
        History(folder / source.name, create=False).close()  # migrates the copy
        copy = _ReadCopy(folder / source.name, create=False, readonly=True,
                         busy_timeout_s=busy_timeout_s)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    copy.folder, copy.path = folder, source
    return copy


class _ReadCopy(History):
    """A migrated temporary copy of an older history (``open_for_reading``): its
    folder goes on close."""

    folder: Path

    def close(self) -> None:
        try:
            super().close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
