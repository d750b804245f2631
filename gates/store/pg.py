"""The history on PostgreSQL: a connection that speaks the store's SQL, and its plumbing.

`gates.store.history.History` holds every read and write once; opening it on a
``postgresql://`` URL gives a `History` whose backend is a `PgBackend`, which differs only in what SQLite
and PostgreSQL do differently:

- SQL: the store's statements are one text for both engines; where they cannot be,
  the text comes from the backend's `gates.store.dialect.Dialect`. `PgConnection`
  only numbers the ``?`` parameters (``$1, $2, ...``) and turns ``:name`` ones
  positional.
- Writes: one transaction each, serialized by a transaction-scoped advisory lock
  per schema (what ``BEGIN IMMEDIATE`` is on SQLite): run-id checks, attempt
  numbers and metric ids are decided under it, so concurrent shards insert
  directly and a run id written twice is still one run. Reads never wait (MVCC).
  A lock held longer than ``busy_timeout_s`` raises `HistoryError`; serialization
  failures and deadlocks are retried.
- Schema: `gates.store.pg_schema`'s migrations, recorded in ``gates_migrations``.
  A schema holding other tables and no ``gates_migrations`` (foreign), or naming
  a migration this code lacks (newer), is refused before anything is written.

psycopg 3 is an optional dependency (the package's ``postgres`` extra: ``pip install
'psycopg[binary]==3.2.13'`` beside it).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import socket
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from gates.store.backend import display_location, hide_url_secrets, history_location
from gates.store.history import BUSY_TIMEOUT_S, History, HistoryError
from gates.store.pg_schema import (
    MIGRATIONS_TABLE,
    PACK_SAMPLES,
    PG_KNOWN_MIGRATIONS,
    PG_MIGRATIONS,
)
from gates.store.provenance import utc_now
from gates.store.records import HISTORY_OPTION
from gates.store.schema import BY_NUM, BY_RUN_ID, TEXT_REFS, pack_samples

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.conninfo import conninfo_to_dict
except ImportError:  # pragma: no cover - exercised where the extra is not installed
    psycopg = None  # type: ignore[assignment]

__all__ = ["PgBackend", "PgConnection", "translate"]

_T = TypeVar("_T")
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('gates-history:' || current_schema()))"
_CONNECT_TIMEOUT_S = 10
# A deadline on every exchange after the connect: a server that vanishes mid-query (a
# network partition, a host powered off: no reset ever arrives) ended a blocking recv
# only after the kernel gave up, ~15 minutes for unacknowledged data and never for an
# idle wait. TCP keepalives (probes after 30 s idle, every 10 s, 3 misses) and
# tcp_user_timeout (data unacknowledged for 60 s) end it with an error within ~60 s.
# Waiting on another writer stays bounded by lock_timeout. The URL's own values win.
# On the server's side (`_SESSION_DEADLINES`): a statement ends after statement_timeout,
# and a session that sits idle inside its transaction past the busy timeout (its
# process frozen, its host gone before the server's keepalives notice, ~2 hours) is
# ended by the server, which rolls it back and frees the write lock it held: without it
# every other writer of the fleet failed on the lock until then. A value set for the
# URL (options=-c...), the role or the database is kept.
_STATEMENT_TIMEOUT_MS = 600_000
# And on this side: a server, or a proxy before it, that keeps the connection and its
# keepalives alive but answers nothing (a proxy whose server died, a wedged backend)
# held a read forever. Each exchange has a client deadline, the session's statement
# timeout plus `_CLIENT_SLACK_S`: past it the socket is shut down and the call fails
# (`PgConnection`). A statement_timeout of 0 (no limit) counts as unset: 10 minutes.
_CLIENT_SLACK_S = 60.0
_WATCH_S = 0.5
_TCP_DEADLINES = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10",
                  "keepalives_count": "3", "tcp_user_timeout": "60000"}
_IGNORE = " ON CONFLICT DO NOTHING"
# INSERT INTO table (columns) VALUES (?, ...) [ON CONFLICT DO NOTHING], no RETURNING.
_INSERT_VALUES = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)\s*\(([^)]*)\)\s*"
                            r"VALUES\s*\((?:\?\s*,\s*)*\?\)\s*(ON CONFLICT DO NOTHING)?\s*$",
                            re.IGNORECASE)


@lru_cache(maxsize=1024)
def translate(sql: str, has_params: bool) -> str:
    """The store's statement with its ``?`` parameters numbered ``$1, $2, ...`` (psycopg's
    raw cursor binds them as they are, with no client-side parse of the query); the
    store's SQL holds no ``?`` but its parameters. Nothing else differs
    (`gates.store.dialect`)."""
    if not has_params:
        return sql
    parts = sql.split("?")
    return "".join(p + f"${i}" for i, p in enumerate(parts[:-1], 1)) + parts[-1]


@lru_cache(maxsize=256)
def _positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """``:name`` parameters as ``?`` and the names in order (``::type`` casts left alone)."""
    names: list[str] = []

    def mark(match: re.Match[str]) -> str:
        names.append(match.group(1))
        return "?"

    return _NAMED.sub(mark, sql), tuple(names)


class PgConnection:
    """The slice of `sqlite3.Connection` the store uses, over a psycopg connection in
    autocommit mode (transactions are explicit: `PgBackend._write`)."""

    def __init__(self, raw: Any, deadline_s: float | None = None) -> None:
        self.raw = raw
        self.deadline_s = deadline_s  # each exchange's client deadline (None: none)
        self.cut = False  # a deadline passed and the socket was shut down
        self._until: float | None = None  # when the exchange under way must have ended
        self._watching = False

    @contextlib.contextmanager
    def bounded(self) -> Any:
        """The exchange inside ends within `deadline_s`: past it the socket is shut down,
        which ends the wait on it with an error (a blocked read gets end of file). One
        watcher thread per connection looks twice a second (a timer per statement cost
        0.5 ms each on a loaded machine; this costs a clock read)."""
        if self.deadline_s is None:
            yield
            return
        if not self._watching:
            self._watching = True
            threading.Thread(target=_watch, args=(weakref.ref(self),), daemon=True,
                             name="gates-pg-deadline").start()
        self._until = time.monotonic() + self.deadline_s
        try:
            yield
        finally:
            self._until = None

    def _cut(self) -> None:
        self.cut = True
        try:
            with socket.socket(fileno=os.dup(self.raw.pgconn.socket)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except (OSError, psycopg.Error):
            pass  # closed meanwhile: nothing left to end

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        cursor = psycopg.RawCursor(self.raw)
        if isinstance(params, Mapping):  # SQLite's :name parameters
            sql, names = _positional(sql)
            params = [params[name] for name in names]
        with self.bounded():  # a client-side cursor: the rows are here when it returns
            cursor.execute(translate(sql, bool(params)), params or None)
        return cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        with self.bounded():
            return self._executemany(sql, rows)

    def _executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        cursor = psycopg.RawCursor(self.raw)
        rows = list(rows)
        if not rows:
            return cursor
        insert = _INSERT_VALUES.match(sql)
        if insert is None:
            cursor.executemany(translate(sql, True), rows)
        elif not insert.group(3):
            # A plain INSERT: COPY streams the rows in one round trip (executemany would
            # pay a pipeline step per row).
            with cursor.copy(f"COPY {insert.group(1)} ({insert.group(2)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            # ON CONFLICT DO NOTHING: multi-row VALUES, in batches.
            width = len(rows[0])
            group = "(" + ", ".join("?" * width) + ")"
            per = max(1, min(1000, 30000 // width))
            for start in range(0, len(rows), per):
                part = rows[start:start + per]
                batch = (f"INSERT INTO {insert.group(1)} ({insert.group(2)}) VALUES "
                         + ", ".join([group] * len(part)) + _IGNORE)
                cursor.execute(translate(batch, True), [v for row in part for v in row])
        return cursor

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def close(self) -> None:
        self.raw.close()


def _watch(ref: Any) -> None:
    """`PgConnection.bounded`'s watcher: ends when its connection is closed or gone."""
    while True:
        time.sleep(_WATCH_S)
        conn = ref()
        if conn is None or conn.raw.closed:
            return
        until = conn._until
        if until is not None and time.monotonic() > until:
            conn._until = None
            conn._cut()
        del conn


def _session_deadlines(busy_timeout_s: float) -> str:
    """The statement that bounds a session's waits on the server (`_STATEMENT_TIMEOUT_MS`):
    lock_timeout is the busy timeout; statement_timeout and
    idle_in_transaction_session_timeout are set where nothing set them (0)."""
    busy_ms = max(1, int(busy_timeout_s * 1000))

    def unless_set(name: str, ms: int) -> str:
        return (f"set_config('{name}', CASE current_setting('{name}') WHEN '0' THEN '{ms}' "
                f"ELSE current_setting('{name}') END, false)")

    return (f"SELECT set_config('lock_timeout', '{busy_ms}', false), "
            f"{unless_set('statement_timeout', _STATEMENT_TIMEOUT_MS)}, "
            f"{unless_set('idle_in_transaction_session_timeout', busy_ms)}")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PgBackend:
    """A `History`'s PostgreSQL database (``postgresql://user@host:port/db``): its
    connection, transactions and schema guard (`gates.store.history.Backend`); the
    tables live in the connection's current schema (set it with
    ``?options=-csearch_path%3Dname``)."""

    dialect = "postgresql"

    def __init__(self, path: Any, *, create: bool = True, readonly: bool = False,
                 busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        if psycopg is None:
            raise HistoryError(f"{display_location(path)}: a PostgreSQL history needs psycopg; "
                               "pip install 'psycopg[binary]==3.2.13' (the postgres extra)")
        url = str(history_location(path))
        self.path = display_location(url)  # type: ignore[assignment]
        self._url = url  # for hide_url_secrets: errors never echo its password
        self.readonly = readonly
        self.busy_timeout_s = busy_timeout_s
        self.db = None  # type: ignore[assignment]
        self._db_errors = (psycopg.Error,)
        try:
            given = conninfo_to_dict(url)
            deadlines = {k: v for k, v in _TCP_DEADLINES.items() if k not in given}
            raw = psycopg.connect(url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S,
                                  **deadlines)
        except (psycopg.Error, UnicodeError) as exc:
            # UnicodeError: a host name IDNA cannot encode (an empty label, as in the docs'
            # placeholder `postgresql://...`), raised while resolving it, before any server.
            why = hide_url_secrets(_first_line(exc) if isinstance(exc, psycopg.Error)
                                   else f"bad host name in the URL: {exc}", url)
            raise HistoryError(
                f"{self.path}: cannot connect ({why}); check the URL and that "
                "this host reaches the server, or write a history file here and load it "
                "with gate-report ingest (docs/fleet.md)") from None
        self.conn = PgConnection(raw, _STATEMENT_TIMEOUT_MS / 1000 + _CLIENT_SLACK_S)  # type: ignore[assignment]
        try:
            try:
                with self.conn.bounded():
                    raw.execute(_session_deadlines(busy_timeout_s))
                    limit_ms = int(raw.execute("SELECT setting FROM pg_settings "
                                               "WHERE name = 'statement_timeout'").fetchone()[0])
                    if readonly:
                        raw.execute("SET default_transaction_read_only = on")
            except psycopg.Error as exc:
                raise self._fail(exc) from None
            self.conn.deadline_s = limit_ms / 1000 + _CLIENT_SLACK_S if limit_ms > 0 else None
            self._refuse_temporary_schema()
            self._prepare_pg(create)
        except BaseException:
            raw.close()
            raise

    def close(self) -> None:
        self.conn.close()

    # ----------------------------------------------------------------- schema

    def _refuse_temporary_schema(self) -> None:
        """A history whose tables would live in the session's temporary schema (a
        ``search_path`` of ``pg_temp``) vanishes when the connection closes, after every
        write said "recorded": refused before anything is written."""
        try:
            schema, path = self.conn.execute(
                "SELECT current_schema(), current_setting('search_path')").fetchone()
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        first = (path or "").split(",")[0].strip().strip('"').lower()
        if first.startswith("pg_temp") or str(schema or "").lower().startswith("pg_temp"):
            raise HistoryError(
                f"{self.path}: its search_path puts the tables in a temporary schema "
                f"({first or schema}), dropped when the connection closes; name a real "
                "schema (?options=-csearch_path%3Dname)")
        if schema is None:
            raise HistoryError(
                f"{self.path}: no schema of its search_path ({path}) exists to hold the "
                "history; create it or name another (?options=-csearch_path%3Dname)")

    def _tables(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() ORDER BY table_name").fetchall()]

    def _applied(self) -> list[str]:
        return [r[0] for r in self.conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")]

    def _prepare_pg(self, create: bool) -> None:
        try:
            tables = self._tables()  # one snapshot: a migration commits all or nothing
            applied = self._applied() if MIGRATIONS_TABLE in tables else None
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        if applied is None:
            if tables:
                raise HistoryError(
                    f"{self.path}: a PostgreSQL schema holding other tables and no gates "
                    f"history (tables: {', '.join(tables[:5])}); give another database or "
                    f"schema ({HISTORY_OPTION})")
            if not create or self.readonly:
                raise HistoryError(f"{self.path}: no gates history in this database yet; "
                                   "run a suite or gate-report ingest into it first")
        unknown = sorted(set(applied or ()) - set(PG_KNOWN_MIGRATIONS))
        if unknown:
            raise HistoryError(
                f"{self.path}: written by a newer gates (schema migrations "
                f"{', '.join(unknown)}); update this checkout (git pull, pip install -e .) "
                f"or give another database ({HISTORY_OPTION})")
        if applied is not None and len(applied) == len(PG_KNOWN_MIGRATIONS):
            return
        if self.readonly:
            raise HistoryError(f"{self.path}: schema is older than this code's; open it "
                               "once read-write (e.g. gate-report) to migrate it")
        self._write(self._migrate)

    def _migrate(self) -> None:
        # Under the write lock: another process may have migrated while we waited.
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
                          "(name text PRIMARY KEY, applied_at text NOT NULL)")
        done = set(self._applied())
        for name, statements in PG_MIGRATIONS:
            if name in done:
                continue
            for statement in statements:
                if statement == PACK_SAMPLES:
                    self._pack_samples()
                else:
                    self.conn.execute(statement)
            self.conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) "
                              "VALUES (?, ?)", (name, utc_now()))

    def _pack_samples(self) -> None:
        """m003: the ``samples`` rows of each metric become its ``metric_rows.samples``."""
        rows = self.conn.execute("SELECT metric_id, value FROM samples "
                                 "ORDER BY metric_id, seq").fetchall()
        self.conn.executemany("UPDATE metric_rows SET samples = ? WHERE id = ?", [
            (pack_samples([v for _, v in group]), metric_id)
            for metric_id, group in itertools.groupby(rows, key=lambda r: r[0])])

    @property
    def schema_version(self) -> int:
        """Number of schema migrations applied to this database."""
        return len(self._applied())

    def check(self) -> None:
        """Check that every table of the schema is there and readable."""
        want = {"runs", "texts", "metric_rows", "test_rows", "verdict_rows", "acceptances"}
        missing = sorted(want - set(self._tables()))
        if missing:
            raise HistoryError(f"{self.path}: tables missing ({', '.join(missing)}); restore "
                               "the database from a backup")
        try:
            self.conn.execute("SELECT count(*) AS n FROM runs").fetchall()
        except psycopg.Error as exc:
            raise self._fail(exc) from exc

    # ----------------------------------------------------------- transactions

    def _fail(self, exc: BaseException) -> HistoryError:
        if isinstance(exc, HistoryError):
            return exc
        if isinstance(exc, pg_errors.LockNotAvailable):
            return HistoryError(f"{self.path}: {self._why(exc)}; another process holds the "
                                "history's write lock for too long, retry later")
        if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
            return HistoryError(f"{self.path}: opened read-only; open it without readonly "
                                "to write")
        return HistoryError(f"{self.path}: {self._why(exc)}")

    def _why(self, exc: BaseException) -> str:
        if self.conn.cut:
            return (f"no answer from the server within {self.conn.deadline_s:g} s (a proxy "
                    "whose server is gone, or a server that hangs); check the server")
        return hide_url_secrets(_first_line(exc), self._url)

    def _retry(self, fn: Callable[[], _T]) -> _T:
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                return fn()
            except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected) as exc:
                if time.monotonic() > deadline:
                    raise self._fail(exc) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _write(self, fn: Callable[[], _T]) -> _T:
        """Run `fn` in one transaction under the history's write lock, retried as a whole
        on a serialization failure or deadlock."""
        if self.readonly:
            raise HistoryError(f"{self.path}: opened read-only; open it without readonly "
                               "to write")

        def attempt() -> _T:
            self.conn.execute("BEGIN")
            try:
                self.conn.execute(_LOCK)
                result = fn()
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction and not self.raw_closed:
                    self.conn.execute("ROLLBACK")
                raise
            return result

        try:
            return self._retry(attempt)
        except (psycopg.Error, sqlite3.Error) as exc:  # sqlite3's: the store's row checks
            raise self._fail(exc) from None

    @property
    def raw_closed(self) -> bool:
        return bool(self.conn.raw.closed)


# What a baseline snapshot copies (`gates.store.fleet_sql.FleetSQL.copy_runs_from`, which
# ATTACHes an SQLite source): per-run tables keyed by runs.num, by run_id, and whole.
# (`gates.store.schema`'s BY_NUM, BY_RUN_ID and TEXT_REFS.)


def copy_runs_into(src: History, snap: History, nums: Iterable[int], *, mark: bool) -> int:
    """Copy the runs ``nums`` of a PostgreSQL history into the new SQLite history ``snap``
    with every id kept (runs.num, row ids, texts ids) and every acceptance, as
    ``copy_runs_from`` does from a file; ``mark`` lists them in ``snapshot_runs``."""
    wanted = sorted(set(nums))

    def rows(sql: str, *params: Any) -> tuple[list[str], list[tuple]]:
        cursor = src.conn.execute(sql, params)
        return [d[0] for d in cursor.description], cursor.fetchall()

    def put(table: str, got: tuple[list[str], list[tuple]]) -> None:
        columns, values = got
        if values:
            snap.conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                f"({', '.join('?' * len(columns))})", values)

    def copy() -> int:
        if snap.conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone():
            raise HistoryError(f"{snap.path}: already holds runs; a snapshot is written into "
                               "a new file")
        runs = rows("SELECT * FROM runs WHERE num = ANY(?::bigint[])", wanted)
        put("runs", runs)
        refs = " UNION ".join(f"SELECT {c} FROM {t} WHERE run_num = ANY(?::bigint[])"
                              for t, c in TEXT_REFS)
        put("texts", rows(f"SELECT * FROM texts WHERE id IN ({refs})",
                          *[wanted] * len(TEXT_REFS)))
        for table in BY_NUM:
            put(table, rows(f"SELECT * FROM {table} WHERE run_num = ANY(?::bigint[])", wanted))
        put("acceptances", rows("SELECT * FROM acceptances"))
        ids = [r[runs[0].index("run_id")] for r in runs[1]]
        for table in BY_RUN_ID:
            put(table, rows(f"SELECT * FROM {table} WHERE run_id = ANY(?::text[])", ids))
        if mark:
            snap.conn.execute("INSERT OR IGNORE INTO snapshot_runs SELECT run_id FROM runs")
        return len(wanted)

    return snap.in_transaction(copy)
