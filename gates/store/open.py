"""Open a history by its location: a SQLite file, or a PostgreSQL database URL.

The one place that picks the backend, so that `gates.store.history` (SQLite) never
imports `gates.store.pg` (whose backend it is given) and psycopg loads only when asked.
"""

from __future__ import annotations

import os

from gates.store.backend import is_database_url
from gates.store.history import BUSY_TIMEOUT_S, History

__all__ = ["open_history"]


def open_history(path: str | os.PathLike[str], *, create: bool = True,
                 readonly: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S) -> History:
    """Open (and create or migrate, unless `readonly`) the history at `path`."""
    if is_database_url(path):
        from gates.store.pg import PgBackend  # noqa: PLC0415 - psycopg only when asked

        return History(path, backend=PgBackend(path, create=create, readonly=readonly,
                                               busy_timeout_s=busy_timeout_s))
    return History(path, create=create, readonly=readonly, busy_timeout_s=busy_timeout_s)
