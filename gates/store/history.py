"""The metric history: runs, test outcomes, metric samples and verdicts in SQLite.

One file (default `history.db` at the repository root) holds every suite run.
The schema is versioned with sqlite-utils migrations (`gates.store.schema`; set
``gates-history`` in ``_sqlite_migrations``); a file written by a newer version,
a corrupt file or a file that is not SQLite raises `HistoryError` and is never
modified.

Writes are short ``BEGIN IMMEDIATE`` transactions on a WAL database with a busy
timeout, retried on "database is locked", so parallel suite processes can share
one file. A run is written in steps: `RunWrites.start_run` inserts its provenance
with ``status = 'incomplete'``; `RunWrites.record_tests` writes each test as it
starts (an ``error`` row whose error begins "did not finish") and again as it
finishes (its outcome, metrics and samples), one short transaction each;
`RunWrites.record_run` writes what is left and flips the status to ``'complete'``
(``'interrupted'`` when pytest was interrupted). A process killed in between leaves
an ``incomplete`` run with every finished test; the suite runner then marks it
``crashed`` or ``interrupted`` (`RunWrites.close_unfinished`, naming the test that
was running and the signal). Only complete runs serve as baselines.

Tables (browse them with ``sqlite-utils tables history.db --counts``):

- ``runs``: one row per run id: suite, shard_index/shard_count, status
  (incomplete: started, never finished; complete; interrupted: pytest exit 2-4 or
  a signal to the run; crashed: pytest died, exited early or hung and was killed;
  gate-unfinished: recorded complete, then its gate was killed, crashed or ran past
  GATES_STEP_TIMEOUT_S, so its verdicts are missing and its session failed;
  gate-error: recorded complete, then its gate refused its input (exit 2: a bad
  register_ci_gate value, an unreadable plan) and judged nothing; its session exited 2),
  exit_status (pytest's), confirm_of (the run a confirm-on-trip rerun re-checks),
  commit_sha, branch, ci_url, started_at/finished_at (UTC ISO), host, python,
  fingerprint (hardware key that baselines match on), hardware (JSON),
  trusted (1/0), trust_reason, trust_changed_at, num (the run's integer in this
  file; a merged or copied run may get another), gate_note (m009: why the gate did
  not judge a gate-error or gate-unfinished run), gate_mode (m010: the session's --gate,
  written as pytest starts; NULL: unknown) and gated_at (m010: when its gate saved its
  verdicts, in their transaction; a complete run with gate_mode enforce or warn and no
  gated_at was never judged and reads as failed), planned_shards (m011: JSON list of
  the suite's shards its plan gave files; a commit's report names one with no run).
- ``tests``: one row per test and attempt: run_id, attempt, nodeid, path (relative
  to the rootdir, posix), outcome (passed/failed/skipped/error/xfailed/xpassed),
  duration (setup + call + teardown, seconds), skip_reason, error (trimmed).
- ``metrics``: one row per (run, attempt, test, key): unit, better, n, min_value,
  max_value, count, median, and the run's suite, fingerprint and started_at.
- ``verdicts``: written by the gates engine, see `RunWrites.save_verdicts`.

  These three are views (schema m003) over compact tables, so every read and
  ``datasette`` sees the columns above: ``test_rows``, ``metric_rows`` and
  ``verdict_rows`` refer to their run by ``runs.num`` (an integer the file assigns)
  and to repeated text (keys, nodeids, paths, verdict details, save times) by
  ``texts.id``; ``metric_rows.samples`` holds a metric's samples in recording order
  as little-endian float64 (`gates.store.schema.pack_samples`). Writes go to the tables.
- ``plan_files`` / ``plan_gates``: the runner's plan (what was registered and
  planned for the run, with est_time / expected seconds; declared gates).
  ``plan_files`` is a view (schema m008) over ``plan_file_rows``, which names the run by
  ``runs.num`` and the path, marker and labels by ``texts.id``; a verdict's verdict, mode
  and stage are ``texts`` ids in ``verdict_rows`` too (the ``verdicts`` view gives the words).
- ``trust_log``: every trust change with its reason.
- ``acceptances`` / ``run_acceptances``: re-baselines (``gates.record.accept``) and the repo
  file entries each run carried; ``bisects``: bisections with their evidence;
  ``notifications``: what was told to whom (dedupe), see ``gates.report.notify``.
- ``snapshot_runs``: in a baseline snapshot (``gates.store.snapshot``) and a shard seeded
  from one, the runs copied from the main history (dropped when the shard is done,
  never re-checked by a merge).
- ``import_maps``: per (suite, test file), the project files its newest recorded run
  loaded (``files``, a JSON list of paths), with commit_sha, run_id and recorded_at
  (``gates.record.import_map``); test selection adds them to the static import graph.

Merging shard files into one history is `gates.store.merge`.

`History` is one class built from parts: a backend (`SqliteBackend` here) holds the
connection, transactions and schema guard; the bulk reads are `BaselineReads`,
`ReportReads` and `FleetSQL`, which it holds and hands on. The same class runs on
PostgreSQL: `open_history("postgresql://...")` (`gates.store.open`; or
``GATES_HISTORY=postgresql://...``) gives it a `gates.store.pg.PgBackend`, which
replaces only the connection, transactions and schema guard. SQL here is written to run on both (see `gates.store.pg.translate`
for the few rewrites).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ci_register.planning.history_value import is_conninfo
from gates.store.after_writes import AfterWrites
from gates.store.baseline_reads import BaselineReads
from gates.store.dialect import DIALECTS, Dialect
from gates.store.fleet_sql import FleetSQL
from gates.store.merge_reads import MergeReads
from gates.store.planning_reads import PlanningReads
from gates.store.records import (
    BUSY_TIMEOUT_S,
    FAILING,
    GATE_ERROR,
    GATE_UNFINISHED,
    NOTIFY_CLAIM_STALE_S,
    OUTCOMES,
    PENDING,
    STALE_NOTE,
    STATUSES,
    UNFINISHED,
    HistoryError,
    RunRecord,
    TestResult,
)
from gates.store.report_reads import ReportReads
from gates.store.rows import (
    decode_run,
)
from gates.store.run_writes import RunWrites
from gates.store.schema import (
    KNOWN_MIGRATIONS,
    MIGRATION_SET,
    SCHEMA_VERSION,
    VERDICT_COLUMNS,
    MigrationRefused,
    like_prefix,
    migrations,
    with_samples,
)

if TYPE_CHECKING:
    from gates.store.sqlite_lib import Database

__all__ = [
    "BUSY_TIMEOUT_S",
    "FAILING",
    "GATE_ERROR",
    "GATE_UNFINISHED",
    "NOTIFY_CLAIM_STALE_S",
    "OUTCOMES",
    "PENDING",
    "SCHEMA_VERSION",
    "STALE_NOTE",
    "STATUSES",
    "UNFINISHED",
    "VERDICT_COLUMNS",
    "check_file",
    "History",
    "HistoryError",
    "RunRecord",
    "TestResult",
    "open_for_reading",
]

_SQLITE_MAGIC = b"SQLite format 3\x00"
# Where a history path comes from, as users give it: `nox -s SUITE -- --history PATH` and
# `gate-report --history PATH`, pytest's own `--gates-history PATH`, or the environment.
HISTORY_OPTION = "--history PATH, pytest's --gates-history PATH, or GATES_HISTORY"
_T = TypeVar("_T")


# ------------------------------------------------------------------ the store


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
        src = _connect(source, True, busy_timeout_s)
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


class Backend(Protocol):
    """What `History` needs of a database: `SqliteBackend`, `gates.store.pg.PgBackend`."""

    dialect: str  # "sqlite" or "postgresql": where a statement differs
    path: Any
    readonly: bool
    busy_timeout_s: float
    conn: Any  # sqlite3.Connection, or gates.store.pg.PgConnection (the same slice of it)
    db: Database | None  # sqlite-utils' view of the file (SQLite only)
    _db_errors: tuple[type[BaseException], ...]

    def close(self) -> None: ...
    def _retry(self, fn: Callable[[], _T]) -> _T: ...
    def _write(self, fn: Callable[[], _T]) -> _T: ...
    def _fail(self, exc: BaseException) -> HistoryError: ...
    @property
    def schema_version(self) -> int: ...
    def check(self) -> None: ...


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
            conn = _connect(self.path, readonly, busy_timeout_s)
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
            raise _corrupt(self.path, exc) from exc
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
            raise _corrupt(self.path, exc) from exc

    def _fail(self, exc: BaseException) -> HistoryError:
        """The `HistoryError` (naming the file and the fix) for a database error."""
        return _corrupt(self.path, exc)

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


class History:
    """A history: its runs, tests, metrics and verdicts. Use as a context manager or call
    `close()`. `gates.store.open.open_history` opens one on a file or a database URL.

    Built from parts, not inherited: ``backend`` holds the connection, transactions and
    schema guard (`SqliteBackend` by default; `gates.store.pg.PgBackend`); this class
    opens and closes it, holds the writer lock and keeps the per-run reads. Each other
    part owns its SQL and is named for what it serves: ``run_writes`` (`RunWrites`:
    runs, tests, trust, verdicts), ``after_writes`` (`AfterWrites`: acceptances,
    bisects, notifications, import maps), ``baseline_reads`` (the gate's inputs),
    ``report_reads`` (reports, health), ``planning_reads`` (durations, plans, units),
    ``merge_reads`` (whole runs for merges and snapshots) and ``fleet_sql``. Callers
    call the part (``h.run_writes.record_run(...)``); nothing here hands a call on.
    Every part runs its SQL on the one connection.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 readonly: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S,
                 backend: Backend | None = None) -> None:
        self.backend: Backend = backend if backend is not None else SqliteBackend(
            path, create=create, readonly=readonly, busy_timeout_s=busy_timeout_s)
        self.path = self.backend.path
        self.data_file = self.backend.path  # the file read (a migrated copy's: open_for_reading)
        self.readonly = self.backend.readonly
        self.busy_timeout_s = self.backend.busy_timeout_s
        self.dialect = self.backend.dialect
        self.sql: Dialect = DIALECTS[self.dialect]  # where the SQL differs (gates.store.dialect)
        self.conn = self.backend.conn
        self.baseline_reads = BaselineReads(self)
        self.report_reads = ReportReads(self)
        self.fleet_sql = FleetSQL(self)
        self.run_writes = RunWrites(self)
        self.after_writes = AfterWrites(self)
        self.planning_reads = PlanningReads(self)
        self.merge_reads = MergeReads(self)
        # Is the history whole (SQLite's integrity check; PostgreSQL's tables)? Raises
        # `HistoryError` if it is damaged.
        self.check: Callable[[], None] = self.backend.check
        # Run `fn` (which calls this store's writes) in one transaction, retried as a whole
        # while the file is locked: `fn` must be safe to run again.
        self.in_transaction: Callable[[Callable[[], _T]], _T] = self.backend._write

    # -------------------------------------------------------------- plumbing

    def close(self) -> None:
        self.backend.close()
        lock = getattr(self, "_writer_lock", None)
        if lock is not None:
            self._writer_lock = None
            os.close(lock)

    def hold_writer_lock(self) -> list[str]:
        """Mark this process a live writer of the file until `close` (or its death); first,
        when no other writer is alive, close this host's runs still ``incomplete`` as
        ``crashed``: their writers died without a word (SIGKILL of pytest and its runner,
        a machine reset) and nothing else would ever close them.

        Liveness is an advisory lock on ``<history>-writers``: every writer holds it
        shared while its run is open, the kernel drops it when the process dies, and only
        a process that gets it exclusively (no live writer) closes stale runs. Runs of
        other hosts are left alone (their writers' locks are not visible here). Returns
        the run ids closed. A database (PostgreSQL) has no such file: nothing is closed.
        """
        if self.dialect != "sqlite" or getattr(self, "_writer_lock", None) is not None:
            return []
        import fcntl  # noqa: PLC0415 - POSIX; only writers need it
        import socket  # noqa: PLC0415

        try:
            fd = os.open(f"{self.path}-writers", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return []  # a read-only folder: this process cannot write runs anyway
        closed: list[str] = []
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # another writer is alive: its run may be the incomplete one
        else:
            host = socket.gethostname()
            stale = [r[0] for r in self.conn.execute(
                "SELECT run_id FROM runs WHERE status = 'incomplete' AND host = ? "
                "ORDER BY started_at LIMIT 10000", (host,))]
            for run_id in stale:
                if self.run_writes.close_unfinished(run_id, "crashed", None, STALE_NOTE) is not None:
                    closed.append(run_id)
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._writer_lock = fd
        return closed

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<History {self.path}>"

    def _rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict]:
        try:
            cursor = self.conn.execute(sql, params)
        except self.backend._db_errors as exc:
            raise self.backend._fail(exc) from exc
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # ------------------------------------------------------------------ reads

    def _run_suite(self, run_id: str) -> str | None:
        row = self.conn.execute("SELECT suite FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else row[0]

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The `runs` row of `run_id` with `hardware` decoded, or None."""
        rows = self._rows("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return decode_run(rows[0]) if rows else None

    def runs(self, suite: str | None = None, *, limit: int = 100,
             status: str | None = None) -> list[dict[str, Any]]:
        """Runs newest first, optionally of one suite and/or status."""
        clauses, params = [], []
        if suite is not None:
            clauses.append("suite = ?")
            params.append(suite)
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._rows(f"SELECT * FROM runs {where} ORDER BY started_at DESC, run_id "
                          "LIMIT ?", [*params, limit])
        return [decode_run(r) for r in rows]

    def tests(self, run_id: str) -> list[dict[str, Any]]:
        """The run's test rows, by attempt then nodeid."""
        return self._rows("SELECT * FROM tests WHERE run_id = ? ORDER BY attempt, nodeid",
                          (run_id,))

    def outcome_counts(self, run_id: str, attempt: int | None = None) -> dict[str, int]:
        """{outcome: count} of a run (all attempts unless one is given)."""
        sql = "SELECT outcome, count(*) FROM tests WHERE run_id = ?"
        params: list[Any] = [run_id]
        if attempt is not None:
            sql += " AND attempt = ?"
            params.append(attempt)
        return dict(self.conn.execute(sql + " GROUP BY outcome", params).fetchall())

    def metrics(self, run_id: str) -> list[dict[str, Any]]:
        """The run's metric rows, each with its ``samples`` list, by attempt, nodeid, key."""
        rows = self._rows("SELECT * FROM metrics WHERE run_id = ? "
                          "ORDER BY attempt, nodeid, key", (run_id,))
        return with_samples(self.conn, rows)

    def verdicts(self, run_id: str, attempt: int | None = None) -> list[dict[str, Any]]:
        """Saved verdict rows of a run (``detail`` decoded), by attempt then insertion."""
        sql = "SELECT * FROM verdicts WHERE run_id = ?"
        params: list[Any] = [run_id]
        if attempt is not None:
            sql += " AND attempt = ?"
            params.append(attempt)
        rows = self._rows(sql + " ORDER BY attempt, id", params)
        for row in rows:
            row["detail"] = json.loads(row["detail"]) if row["detail"] else None
        return rows

    def trust_log(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Trust changes, oldest first (of one run, or all)."""
        if run_id is None:
            return self._rows("SELECT * FROM trust_log ORDER BY id")
        return self._rows("SELECT * FROM trust_log WHERE run_id = ? ORDER BY id", (run_id,))

    # ------------------------------------------------------- after the verdict

    def acceptances(self, suite: str | None = None) -> list[dict[str, Any]]:
        """Acceptances oldest first: all, or those that may apply to ``suite``."""
        if suite is None:
            return self._rows("SELECT * FROM acceptances ORDER BY id")
        return self._rows("SELECT * FROM acceptances WHERE suite IS NULL OR suite = ? "
                          "ORDER BY id", (suite,))

    def commit_start(self, commit: str) -> str | None:
        """The earliest start time of a run of ``commit`` (sha or prefix), or None."""
        return self.conn.execute(
            "SELECT min(started_at) FROM runs WHERE commit_sha LIKE ? ESCAPE '\\'",
            (like_prefix(commit),)).fetchone()[0]

    def metric_keys(self, suite: str | None = None) -> list[str]:
        """Every metric key recorded (in ``suite``), sorted."""
        if suite is None:
            rows = self.conn.execute("SELECT DISTINCT key FROM metrics ORDER BY key")
        else:
            rows = self.conn.execute("SELECT DISTINCT key FROM metrics WHERE suite = ? "
                                     "ORDER BY key", (suite,))
        return [r[0] for r in rows]

    def key_tests(self, key: str, suite: str | None = None) -> list[dict[str, Any]]:
        """The tests that recorded ``key`` (nodeid, path, suite, better, runs), most runs
        first."""
        sql = ("SELECT m.nodeid, max(t.path) AS path, m.suite, max(m.better) AS better, "
               "count(DISTINCT m.run_id) AS runs "
               "FROM metrics m LEFT JOIN tests t ON t.run_id = m.run_id "
               "AND t.attempt = m.attempt AND t.nodeid = m.nodeid WHERE m.key = ?")
        params: list[Any] = [key]
        if suite is not None:
            sql += " AND m.suite = ?"
            params.append(suite)
        return self._rows(sql + " GROUP BY m.nodeid, m.suite ORDER BY runs DESC, m.nodeid",
                          params)

    def key_verdicts(self, suite: str, key: str, fingerprint: str | None, *,
                     until: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """Verdict rows of ``key`` in complete runs of ``suite`` (confirm reruns too),
        newest run first: run_id, confirm_of, commit, started_at, verdict, id."""
        sql = ("SELECT r.run_id, r.confirm_of, r.commit_sha AS \"commit\", r.started_at, "
               "v.verdict, v.id FROM verdicts v JOIN runs r ON r.run_id = v.run_id "
               "WHERE r.suite = ? AND v.key = ? AND r.status = 'complete'")
        params: list[Any] = [suite, key]
        if fingerprint is not None:
            sql += " AND r.fingerprint = ?"
            params.append(fingerprint)
        if until is not None:
            sql += " AND r.started_at <= ?"
            params.append(until)
        return self._rows(sql + " ORDER BY r.started_at DESC, v.id DESC LIMIT ?",
                          [*params, limit])

    def runs_by_ref(self, ref: str, *, suite: str | None = None, limit: int = 40,
                    trusted_only: bool = False) -> tuple[str, list[dict[str, Any]]]:
        """(what ``ref`` named, its complete top-level runs newest first): a run id (or a
        prefix of >= 6 characters), else a commit (prefix >= 7), a branch, a fingerprint.
        Confirm reruns are left out (one value per CI run); ``suite`` narrows;
        ``trusted_only`` keeps trusted runs (a baseline)."""
        base = "status = 'complete' AND confirm_of IS NULL"
        if trusted_only:
            base += " AND trusted = 1"
        params: list[Any] = []
        if suite is not None:
            base += " AND suite = ?"
            params.append(suite)
        tries: list[tuple[str, str, list[Any]]] = [("run", "run_id = ?", [ref])]
        if len(ref) >= 6:
            tries.append(("run", "run_id LIKE ? ESCAPE '\\'", [like_prefix(ref)]))
        if len(ref) >= 7:
            tries.append(("commit", "commit_sha LIKE ? ESCAPE '\\'", [like_prefix(ref)]))
        tries += [("branch", "branch = ?", [ref]), ("fingerprint", "fingerprint = ?", [ref])]
        for kind, clause, extra in tries:
            rows = self._rows(f"SELECT * FROM runs WHERE {base} AND {clause} "
                              "ORDER BY started_at DESC, run_id LIMIT ?",
                              [*params, *extra, limit])
            if rows:
                if kind == "run" and len({r["run_id"] for r in rows}) > 1:
                    raise HistoryError(f"{ref!r} matches {len(rows)} run ids; give more "
                                       "characters")
                return kind, [decode_run(r) for r in rows]
        return "", []

    def bisects(self, key: str | None = None) -> list[dict[str, Any]]:
        """Stored bisections, newest first (of one key, or all), evidence decoded."""
        sql, params = "SELECT * FROM bisects", []
        if key is not None:
            sql += " WHERE key = ?"
            params.append(key)
        rows = self._rows(sql + " ORDER BY id DESC", params)
        for r in rows:
            r["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
        return rows

    def notifications(self, channel: str) -> list[dict[str, Any]]:
        """The notifications of ``channel`` marked sent, oldest first."""
        return self._rows("SELECT channel, dedupe, run_id, at FROM notifications WHERE "
                          "channel = ? ORDER BY id", [channel])

    # ------------------------------------------------------------ import maps

    # ---------------------------------------------------------------- bundles

# ------------------------------------------------------------------- helpers


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


def _connect(path: Path, readonly: bool,
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


def _corrupt(path: Path, exc: BaseException) -> HistoryError:
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


class _ReadCopy(History):
    """A migrated temporary copy of an older history (``open_for_reading``): its
    folder goes on close."""

    folder: Path

    def close(self) -> None:
        try:
            super().close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
