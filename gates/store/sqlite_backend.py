"""A history file's connection, transactions and schema guard: the part of a
`gates.store.history.History` that is SQLite's (`gates.store.pg.PgBackend` is PostgreSQL's),
and the checks a path must pass before SQLite opens it (`check_file`): a URL or a
connection string given for a path, a directory, a FIFO, a file that is not SQLite.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ci_register.planning.history_value import is_conninfo
from gates.store.records import BUSY_TIMEOUT_S, HISTORY_OPTION, HistoryError
from gates.store.schema import (
    KNOWN_MIGRATIONS,
    MIGRATION_SET,
    SCHEMA_VERSION,
    MigrationRefused,
    migrations,
)

if TYPE_CHECKING:
    from gates.store.sqlite_lib import Database

__all__ = ["SqliteBackend", "check_file", "connect", "corrupt"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_T = TypeVar("_T")


class SqliteBackend:
    """A history file's connection, transactions and schema guard (the part of a
    `History` that is SQLite's; `gates.store.pg.PgBackend` is PostgreSQL's).

    `create=False` refuses a missing file; `readonly=True` opens without writing
    (no WAL switch, no migration; an older schema is then an error).
    `busy_timeout_s`: how long to wait on another process's lock (a planner that
    can fall back to est_time waits seconds, not a minute).
    """

    dialect = "sqlite"
    _db_errors: tuple[type[BaseException], ...] = (sqlite3.DatabaseError,)

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 readonly: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.busy_timeout_s = busy_timeout_s
        check_file(self.path, create=create and not readonly)
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        if not readonly and self.path.parent.exists() and \
                not os.access(self.path.parent, os.W_OK | os.X_OK):
            raise HistoryError(
                f"{self.path}: its folder is read-only, and a history is written with "
                "SQLite's write-ahead log (files beside it); copy it to a writable folder "
                f"or give a history path there ({HISTORY_OPTION}); reports read it as it is")
        try:
            conn = connect(self.path, readonly, busy_timeout_s)
        except sqlite3.Error as exc:
            raise HistoryError(f"{self.path}: cannot open ({exc}); check the path and "
                               "its permissions") from exc
        self.conn = conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            # In WAL mode NORMAL loses nothing on a process crash (only the last commits
            # on power loss) and spares an fsync per commit: the plugin commits per test.
            # (Not for readers: an immutable open refuses the pragma as a write.)
            if not readonly:
                conn.execute("PRAGMA synchronous = NORMAL")
            self._db: Database | None = None
            self._retry(self._prepare)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise corrupt(self.path, exc) from exc
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        self.conn.close()

    @property
    def db(self) -> Database:
        """sqlite-utils' view of the file, made on first use (migrations, tools): opening
        and reading an up-to-date file needs only the standard library's sqlite3."""
        if self._db is None:
            from gates.store.sqlite_lib import Database  # noqa: PLC0415 - ~0.1 s to load

            self._db = Database(self.conn, execute_plugins=False)
        return self._db

    def _applied(self) -> list[str]:
        """Names of the migrations applied to this file, in order (sqlite-utils' record)."""
        if not self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                 "name = '_sqlite_migrations'").fetchone():
            return []
        return [r[0] for r in self.conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid",
            (MIGRATION_SET,))]

    def _prepare(self) -> None:
        # First read: fails here on a damaged file, before anything is written; a
        # foreign or newer file is refused before the WAL switch, so it stays untouched.
        self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        self._check_and_migrate(migrate=False)
        # Migrate before the WAL switch: a migration that refuses leaves the file as it was.
        self._check_and_migrate()
        if not self.readonly:
            mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode.lower() != "wal":
                self.conn.execute("PRAGMA journal_mode = wal")

    def _check_and_migrate(self, migrate: bool = True) -> None:
        applied = set(self._applied())
        unknown = sorted(applied - set(KNOWN_MIGRATIONS))
        if unknown:
            raise HistoryError(
                f"{self.path}: written by a newer gates (schema migrations {', '.join(unknown)}); "
                "update this checkout (git pull, pip install -e .) or give another history "
                f"file ({HISTORY_OPTION})"
            )
        if not applied:
            tables = [r[0] for r in self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
                      if not r[0].startswith(("sqlite_", "_sqlite_migrations"))]
            if tables:
                raise HistoryError(
                    f"{self.path}: an SQLite database but not a gates history (tables: "
                    f"{', '.join(tables[:5])}); give another history file ({HISTORY_OPTION})"
                )
        if len(applied) == SCHEMA_VERSION or not migrate:
            return
        if self.readonly:
            raise HistoryError(f"{self.path}: schema is older than this code's; open it "
                               "once read-write (e.g. gate-report) to migrate it")
        try:
            self._write(lambda: migrations().apply(self.db))
        except MigrationRefused as exc:
            raise HistoryError(f"{self.path}: cannot migrate to this code's schema: {exc}; "
                               "the file is unchanged") from None

    def _retry(self, fn: Callable[[], _T]) -> _T:
        # busy_timeout already waits inside SQLite; this outer loop covers the cases
        # where SQLite returns BUSY without calling the handler (lock upgrades in WAL).
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                message = str(exc).lower()
                if "locked" not in message and "busy" not in message:
                    raise
                if time.monotonic() > deadline:
                    raise HistoryError(f"{self.path}: {exc}; another process holds the "
                                       "file for too long, retry later") from exc
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.5)

    def _write(self, fn: Callable[[], _T]) -> _T:
        """Run `fn` in one BEGIN IMMEDIATE transaction, retried while the file is locked."""
        if self.readonly:
            raise HistoryError(f"{self.path}: opened read-only; open it without readonly "
                               "to write")

        def attempt() -> _T:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn()
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            return result

        try:
            return self._retry(attempt)
        except sqlite3.DatabaseError as exc:
            raise corrupt(self.path, exc) from exc

    def _fail(self, exc: BaseException) -> HistoryError:
        """The `HistoryError` (naming the file and the fix) for a database error."""
        return corrupt(self.path, exc)

    @property
    def schema_version(self) -> int:
        """Number of schema migrations applied to this file."""
        return len(self._applied())

    def check(self) -> None:
        """Run SQLite's integrity check; raise `HistoryError` if the file is damaged."""
        result = [r[0] for r in self.conn.execute("PRAGMA quick_check").fetchall()]
        if result != ["ok"]:
            raise HistoryError(f"{self.path}: integrity check failed ({result[0]}); restore "
                               "it from a backup or CI artifact")


# A location that is no file path, reaching the store without the entry points' check
# (`ci_register.planning.history_value.history_problem`): a URL of another scheme (Path
# folds its "//"), or a libpq key=value string. Taken as a path, it became an SQLite file
# (or folders) named after it, password included, and nothing reached the database meant.
_URL_LIKE = re.compile(r"(?i)^([a-z][a-z0-9+.-]+):/")


def _not_a_path(text: str) -> str | None:

    url = _URL_LIKE.match(text)
    if url:
        return (f"a {url.group(1)}: URL, not a history file path; a history is a file path or "
                f"a postgresql:// URL ({HISTORY_OPTION})")
    if is_conninfo(text):
        return ("a key=value connection string, not a history file path; write it as a URL: "
                f"postgresql://USER:PASSWORD@HOST:PORT/DBNAME ({HISTORY_OPTION})")
    return None


def check_file(path: Path, *, create: bool) -> None:
    """Raise ``HistoryError`` (naming the fix) unless ``path`` can be a history file:
    a URL or connection string given for one, missing (unless ``create``), a directory,
    a FIFO or device, unreadable, or not SQLite."""
    problem = _not_a_path(os.fspath(path))
    if problem:
        raise HistoryError(f"history location: {problem}")
    if not path.exists():
        if not create:
            raise HistoryError(f"{path}: no such history; check the path ({HISTORY_OPTION}) "
                               "or run a suite to create it")
        return
    if path.is_dir():
        raise HistoryError(f"{path}: is a directory; give a file path ({HISTORY_OPTION})")
    if not path.is_file():
        # Opening a FIFO to read its header blocks until a writer comes: forever.
        raise HistoryError(f"{path}: not a regular file (a FIFO, socket or device); give a "
                           f"history file path ({HISTORY_OPTION})")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise HistoryError(f"{path}: cannot read ({exc}); check its permissions") from exc
    if header and header != _SQLITE_MAGIC:
        raise HistoryError(f"{path}: not an SQLite database; move it away or give another "
                           f"history file ({HISTORY_OPTION})")


def connect(path: Path, readonly: bool,
             timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    if not readonly:
        return sqlite3.connect(path, timeout=timeout)
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        # SQLite says "unable to open" or, for a WAL file whose -shm it cannot create
        # (SQLITE_READONLY_CANTINIT), "attempt to write a readonly database".
        if "unable to open" not in str(exc) and "readonly" not in str(exc):
            return conn  # locked, busy: the caller's retries and messages handle it
        conn.close()
        # A WAL file in a read-only folder: SQLite cannot create its -shm index. With
        # no -wal file beside it, every write is in the file itself, and reading it as
        # immutable is exact.
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size:
            raise HistoryError(
                f"{path}: in a read-only folder with an unmerged write-ahead log ({wal.name}); "
                "copy both files to a writable folder and read the copy") from None
        return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, timeout=timeout)
    except sqlite3.DatabaseError:
        return conn  # not a database: the first read in History says so, with the fix


def corrupt(path: Path, exc: BaseException) -> HistoryError:
    if isinstance(exc, HistoryError):
        return exc
    if any(word in str(exc).lower() for word in ("locked", "busy")):
        return HistoryError(f"{path}: {exc}; another process holds the file for too long, "
                            "retry later")
    text = str(exc).lower()
    if "disk is full" in text:
        return HistoryError(f"{path}: {exc}; free space on its filesystem (or give another "
                            f"history file, {HISTORY_OPTION}), then run again")
    if "disk i/o error" in text:
        return HistoryError(f"{path}: {exc}; the disk refused a read or write (full, failing "
                            "or gone): check its filesystem, then run again")
    if "readonly database" in text or "read-only file system" in text:
        return HistoryError(f"{path}: {exc}; the file or its folder cannot be written: make "
                            f"it writable, or give another history file ({HISTORY_OPTION})")
    if isinstance(exc, (sqlite3.OperationalError, sqlite3.ProgrammingError,
                        sqlite3.IntegrityError)):
        # A bad query or constraint, not a damaged file.
        return HistoryError(f"{path}: {exc}")
    return HistoryError(f"{path}: unreadable or corrupt SQLite file ({exc}); restore it from "
                        "a backup or CI artifact, or move it away to start a new history")
