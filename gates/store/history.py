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

`History` is one class built from parts: a backend (`gates.store.sqlite_backend.
SqliteBackend`, or `gates.store.pg.PgBackend` for `open_history("postgresql://...")`)
holds the connection, transactions and schema guard; `History` opens and closes it,
holds the writer lock and runs transactions. Every statement lives in a part named for
whom it serves: the writes `RunWrites` and `AfterWrites`; the reads `BaselineReads` (the
gate's inputs), `ReportReads` (reports and the commands that look at one run or metric),
`HealthReads` (CI health), `PlanningReads`, `MergeReads` and `FleetSQL`. SQL is written to run on both
backends (see `gates.store.pg.translate` for the few rewrites).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from gates.store.after_writes import AfterWrites
from gates.store.baseline_reads import BaselineReads
from gates.store.dialect import DIALECTS, Dialect
from gates.store.fleet_sql import FleetSQL
from gates.store.health_reads import HealthReads
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
from gates.store.run_writes import RunWrites
from gates.store.schema import (
    SCHEMA_VERSION,
    VERDICT_COLUMNS,
)
from gates.store.sqlite_backend import SqliteBackend

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
    "History",
    "HistoryError",
    "RunRecord",
    "TestResult",
]

_T = TypeVar("_T")


# ------------------------------------------------------------------ the store


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


class History:
    """A history: its runs, tests, metrics and verdicts. Use as a context manager or call
    `close()`. `gates.store.open.open_history` opens one on a file or a database URL.

    Built from parts, not inherited: ``backend`` holds the connection, transactions and
    schema guard (`SqliteBackend` by default; `gates.store.pg.PgBackend`); this class
    opens and closes it, holds the writer lock and runs transactions. Each other part
    owns its SQL and is named for what it serves: ``run_writes`` (`RunWrites`: runs,
    tests, trust, verdicts), ``after_writes`` (`AfterWrites`: acceptances, bisects,
    notifications, import maps), ``baseline_reads`` (the gate's inputs),
    ``report_reads`` (reports, and one run or metric for the commands: its row, tests,
    metrics, verdicts, trust log ...), ``health_reads`` (CI health),
    ``planning_reads`` (durations, plans, units),
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
        self.health_reads = HealthReads(self)
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
