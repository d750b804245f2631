"""The store's SQL for the fleet flow: baseline snapshots, shard files and pruning.

Mixed into `gates.store.history.History` (uses its connection). ``gates.store.snapshot``
and ``gates.store.prune`` decide what to copy, strip or delete; the rows move here.
Runs are named by ``runs.num`` inside one file; a copy keeps every id (runs.num,
metric, test and verdict row ids, ``texts`` ids), so a snapshot reads exactly as
the history it came from.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from gates.store.schema import BY_NUM as _BY_NUM
from gates.store.schema import BY_RUN_ID as _BY_RUN_ID
from gates.store.schema import CLEAN_DURATION, DURATION_TALLIES, JUDGED
from gates.store.schema import TEXT_REFS as _TEXT_REFS

__all__ = ["BISECT_COLUMNS", "FleetSQL"]

_T = TypeVar("_T")
_CHUNK = 500
# Tables copied whole into a snapshot (small: what gates and reports look up by id).
_WHOLE = ("acceptances",)
# Per-run tables keyed by run_id text and the compact ones keyed by runs.num, and every
# reference to a ``texts`` id (what a copy brings, what a delete keeps): `gates.store.schema`.
# A bisection's content: what a merge compares (its id is the file's own).
BISECT_COLUMNS = ("suite", "key", "good", "bad", "outcome", "culprit", "executions",
                  "evidence", "at")


def _marks(part: Sequence[object]) -> str:
    return ",".join("?" * len(part))


class FleetSQL:
    """Snapshot, strip and prune statements of `gates.store.history.History` (one of its
    parts: its connection, its write transactions)."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self.conn: sqlite3.Connection = store.conn
        self.path: Path = store.path
        self.dialect = store.dialect
        self.sql = store.sql
        self._write: Callable[[Callable[[], _T]], _T] = store.backend._write

    # ------------------------------------------------------------ selection

    def gate_read_runs(self, suite: str, fingerprint: str | None, *, rows_per_key: int,
                       per_file: int) -> set[int]:
        """``runs.num`` of every run a gate of a new run of ``suite`` on ``fingerprint``
        (None: each fingerprint of the suite) and the planner's durations read.

        The newest ``rows_per_key`` metric rows of each key among complete trusted runs
        that may serve as baselines (``gates.store.baselines``, ``schema.JUDGED``), the
        newest ``per_file`` clean first attempts of each file (`PlanningReads.file_durations`),
        the suite's newest trusted run (``--fingerprint latest``), the confirm reruns of
        all of those (transient stand-ins, sequential confirms), and the runs that date
        each acceptance that may apply (the first run of a ``from_commit``, the first run
        carrying a file entry).
        """
        fp_clause = "" if fingerprint is None else " AND r.fingerprint = :fp"
        params = {"suite": suite, "fp": fingerprint, "rows": rows_per_key, "files": per_file}
        picked: set[int] = set()
        picked.update(r[0] for r in self.conn.execute(
            "SELECT DISTINCT run_num FROM (SELECT m.run_num, row_number() OVER (PARTITION BY "
            "r.fingerprint, m.key_id ORDER BY r.started_at DESC, m.id DESC) AS rn "
            "FROM metric_rows m JOIN runs r ON r.num = m.run_num WHERE r.suite = :suite "
            f"AND r.status = 'complete' AND r.trusted = 1 AND {JUDGED.format(r='r.')}{fp_clause}) "
            "AS ranked WHERE rn <= :rows",
            params))
        picked.update(r[0] for r in self.conn.execute(
            "WITH per AS (SELECT r.num, r.fingerprint, r.started_at, r.run_id, t.path_id, "
            f"{DURATION_TALLIES} FROM runs r JOIN test_rows t "
            "ON t.run_num = r.num AND t.attempt = 1 WHERE r.suite = :suite "
            f"AND r.status = 'complete' AND r.trusted = 1 AND t.path_id IS NOT NULL{fp_clause} "
            "GROUP BY r.run_id, t.path_id), ranked AS (SELECT num, row_number() OVER ("
            "PARTITION BY fingerprint, path_id ORDER BY started_at DESC, run_id) AS rn "
            f"FROM per WHERE {CLEAN_DURATION}) SELECT DISTINCT num FROM ranked WHERE rn <= :files",
            params))
        picked.update(r[0] for r in self.conn.execute(
            "SELECT num FROM runs WHERE suite = :suite AND status = 'complete' AND trusted = 1 "
            "ORDER BY started_at DESC, run_id LIMIT 1", params))
        picked.update(self._acceptance_dating_runs(suite))
        return picked | self._confirm_descendants(picked)

    def _acceptance_dating_runs(self, suite: str) -> set[int]:
        out: set[int] = set()
        for (commit,) in self.conn.execute(
                "SELECT DISTINCT from_commit FROM acceptances WHERE from_commit IS NOT NULL "
                "AND (suite IS NULL OR suite = ?)", (suite,)):
            row = self.conn.execute(
                "SELECT num FROM runs WHERE commit_sha LIKE ? ESCAPE '\\' "
                "ORDER BY started_at, run_id LIMIT 1",
                (commit.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",)
            ).fetchone()
            if row:
                out.add(row[0])
        out.update(r[0] for r in self.conn.execute(
            "SELECT (SELECT r.num FROM run_acceptances ra JOIN runs r ON r.run_id = ra.run_id "
            "WHERE ra.acceptance_id = a.id ORDER BY r.started_at, r.run_id LIMIT 1) "
            "FROM acceptances a WHERE a.entry_id IS NOT NULL AND (a.suite IS NULL OR "
            "a.suite = ?)", (suite,)) if r[0] is not None)
        return out

    def _confirm_descendants(self, nums: Iterable[int]) -> set[int]:
        """The confirm reruns (any depth, any status) of the runs ``nums``."""
        out: set[int] = set()
        frontier = sorted(set(nums))
        for _ in range(32):  # confirm chains are at most a few long; a loop ends here
            if not frontier:
                break
            found: list[int] = []
            for c in range(0, len(frontier), _CHUNK):
                part = frontier[c:c + _CHUNK]
                found += [r[0] for r in self.conn.execute(
                    "SELECT c.num FROM runs c JOIN runs p ON p.run_id = c.confirm_of "
                    f"WHERE p.num IN ({_marks(part)})", part)]
            frontier = sorted(set(found) - out)
            out.update(frontier)
        return out

    def run_nums(self, run_ids: Iterable[str]) -> dict[str, int]:
        """{run id: runs.num} of the ``run_ids`` in this file."""
        wanted = sorted(set(run_ids))
        out: dict[str, int] = {}
        for c in range(0, len(wanted), _CHUNK):
            part = wanted[c:c + _CHUNK]
            out.update(self.conn.execute(
                f"SELECT run_id, num FROM runs WHERE run_id IN ({_marks(part)})", part))
        return out

    # ------------------------------------------------------------ snapshots

    def copy_runs_from(self, source: Path, nums: Iterable[int], *, mark: bool) -> int:
        """Copy the runs ``nums`` of the history at ``source`` (same schema) into this one,
        every id kept, with the acceptances; ``mark`` lists them in ``snapshot_runs``.
        Returns the runs copied. This file must hold no runs yet (ids would collide)."""
        wanted = sorted(set(nums))
        self.conn.execute("ATTACH DATABASE ? AS src", (str(source),))  # only read
        try:
            def copy() -> int:
                if self.conn.execute("SELECT 1 FROM main.runs LIMIT 1").fetchone():
                    raise sqlite3.IntegrityError(f"{self.path}: already holds runs; a snapshot "
                                                 "is written into a new file")
                self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS pick "
                                  "(num INTEGER PRIMARY KEY)")
                self.conn.execute("DELETE FROM temp.pick")
                self.conn.executemany("INSERT INTO temp.pick VALUES (?)", [(n,) for n in wanted])
                self.conn.execute("INSERT INTO main.runs SELECT * FROM src.runs "
                                  "WHERE num IN (SELECT num FROM temp.pick)")
                refs = " UNION ".join(f"SELECT {c} FROM src.{t} WHERE run_num IN temp.pick"
                                      for t, c in _TEXT_REFS)
                self.conn.execute(
                    f"INSERT INTO main.texts SELECT * FROM src.texts WHERE id IN ({refs})")
                for table in _BY_NUM:
                    self.conn.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table} "
                                      "WHERE run_num IN temp.pick")
                for table in _WHOLE:
                    self.conn.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table}")
                for table in _BY_RUN_ID:
                    self.conn.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table} "
                                      "WHERE run_id IN (SELECT run_id FROM main.runs)")
                if mark:
                    self.conn.execute("INSERT OR IGNORE INTO main.snapshot_runs "
                                      "SELECT run_id FROM main.runs")
                return len(wanted)

            return self._write(copy)
        finally:
            self.conn.execute("DETACH DATABASE src")

    def snapshot_run_ids(self) -> set[str]:
        """Run ids this file holds as copies from a main history (``snapshot_runs``)."""
        return {r[0] for r in self.conn.execute("SELECT run_id FROM snapshot_runs")}

    def own_run_ids(self) -> list[str]:
        """Run ids that are not snapshot copies, oldest first."""
        return [r[0] for r in self.conn.execute(
            "SELECT run_id FROM runs WHERE run_id NOT IN (SELECT run_id FROM snapshot_runs) "
            "ORDER BY started_at, run_id")]

    def bisect_rows(self) -> list[tuple[Any, ...]]:
        """Every stored bisection as its content (``BISECT_COLUMNS``), oldest first."""
        return [tuple(r) for r in self.conn.execute(
            f"SELECT {', '.join(BISECT_COLUMNS)} FROM bisects ORDER BY id")]

    def add_bisects(self, rows: Iterable[Sequence[Any]]) -> int:
        """Store the bisections of ``rows`` (``BISECT_COLUMNS``) this history lacks: the same
        content is the same bisection, so adding a file's twice adds nothing. Run inside a
        write (`History.in_transaction`); how many were new."""
        have = {tuple(r) for r in self.conn.execute(
            f"SELECT {', '.join(BISECT_COLUMNS)} FROM bisects")}
        new = [r for r in dict.fromkeys(tuple(r) for r in rows) if r not in have]
        if new:
            self.conn.executemany(
                f"INSERT INTO bisects ({', '.join(BISECT_COLUMNS)}) VALUES "
                f"({', '.join('?' * len(BISECT_COLUMNS))})", new)
        return len(new)

    # ------------------------------------------------------------- deleting

    def delete_runs(self, nums: Iterable[int]) -> dict[str, int]:
        """Delete the runs ``nums`` with every row of theirs (one transaction), then the
        ``texts`` no row refers to; {table: rows deleted}."""
        wanted = sorted(set(nums))
        if self.dialect == "postgresql":
            return self._write(lambda: self._delete_runs_pg(wanted))

        def delete() -> dict[str, int]:
            counts: dict[str, int] = {}
            self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS doomed (num INTEGER PRIMARY KEY)")
            self.conn.execute("DELETE FROM temp.doomed")
            self.conn.executemany("INSERT INTO temp.doomed VALUES (?)", [(n,) for n in wanted])
            for table in _BY_NUM:
                counts[table] = self.conn.execute(
                    f"DELETE FROM {table} WHERE run_num IN temp.doomed").rowcount
            for table in _BY_RUN_ID:
                counts[table] = self.conn.execute(
                    f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM runs "
                    "WHERE num IN temp.doomed)").rowcount
            counts["runs"] = self.conn.execute(
                "DELETE FROM runs WHERE num IN temp.doomed").rowcount
            refs = " UNION ".join(f"SELECT {c} FROM {t} WHERE {c} IS NOT NULL"
                                  for t, c in _TEXT_REFS)
            counts["texts"] = self.conn.execute(
                f"DELETE FROM texts WHERE id NOT IN ({refs})").rowcount
            return counts

        return self._write(delete)

    def _delete_runs_pg(self, wanted: list[int]) -> dict[str, int]:
        """`delete_runs` on PostgreSQL: an array parameter where SQLite uses a temp table."""
        refs = " UNION ".join(f"SELECT {c} FROM {t} WHERE {c} IS NOT NULL" for t, c in _TEXT_REFS)
        counts: dict[str, int] = {}
        for table in _BY_NUM:
            counts[table] = self.conn.execute(
                f"DELETE FROM {table} WHERE run_num = ANY(?::bigint[])", (wanted,)).rowcount
        for table in _BY_RUN_ID:
            counts[table] = self.conn.execute(
                f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM runs "
                "WHERE num = ANY(?::bigint[]))", (wanted,)).rowcount
        counts["runs"] = self.conn.execute(
            "DELETE FROM runs WHERE num = ANY(?::bigint[])", (wanted,)).rowcount
        counts["texts"] = self.conn.execute(f"DELETE FROM texts WHERE id NOT IN ({refs})").rowcount
        return counts

    def vacuum(self) -> None:
        """Give deleted pages back to the file system (and fold the WAL in); on PostgreSQL
        let the server reuse the deleted rows' space (plain VACUUM; no table lock)."""
        for statement in self.sql.vacuum:
            self.conn.execute(statement)

    # -------------------------------------------------------------- pruning

    def runs_for_prune(self) -> list[tuple[int, str, str, str | None, str | None]]:
        """(num, suite, started_at, fingerprint, commit_sha) of every run, newest first."""
        return self.conn.execute(
            "SELECT num, suite, started_at, fingerprint, commit_sha FROM runs "
            "ORDER BY started_at DESC, run_id").fetchall()

    def suite_fingerprints(self) -> list[tuple[str, str | None]]:
        """Every (suite, fingerprint) with a run."""
        return self.conn.execute("SELECT DISTINCT suite, fingerprint FROM runs "
                                 "ORDER BY suite, fingerprint").fetchall()

    def runs_incomplete(self) -> set[int]:
        """Runs still ``incomplete``: a writer may be recording them now."""
        return {r[0] for r in self.conn.execute(
            "SELECT num FROM runs WHERE status = 'incomplete'")}

    def runs_in_trust_log(self) -> set[int]:
        return {r[0] for r in self.conn.execute(
            "SELECT DISTINCT r.num FROM trust_log t JOIN runs r ON r.run_id = t.run_id")}

    def runs_carrying_acceptances(self) -> set[int]:
        return {r[0] for r in self.conn.execute(
            "SELECT DISTINCT r.num FROM run_acceptances a JOIN runs r ON r.run_id = a.run_id")}

    def runs_of_bisects(self) -> set[int]:
        """Runs of the good, bad and culprit commits of every stored bisection (its
        evidence, and the commit it names)."""
        out: set[int] = set()
        commits = {c for row in self.conn.execute("SELECT good, bad, culprit FROM bisects")
                   for c in row if c}
        for commit in sorted(commits):
            out.update(r[0] for r in self.conn.execute(
                "SELECT num FROM runs WHERE commit_sha = ?", (commit,)))
        return out

    def confirm_families(self) -> list[set[int]]:
        """The runs.num of each confirm chain (a first attempt and its reruns), of the
        runs that have any confirm rerun."""
        parent = dict(self.conn.execute(
            "SELECT c.num, p.num FROM runs c JOIN runs p ON p.run_id = c.confirm_of"))
        groups: dict[int, set[int]] = {}
        for child in parent:
            root, seen = child, set()
            while root in parent and root not in seen:
                seen.add(root)
                root = parent[root]
            groups.setdefault(root, {root}).add(child)
        return list(groups.values())

    def counts(self) -> dict[str, Any]:
        """Rows per table (runs, metric, test and verdict rows), for summaries."""
        return {t: self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "metric_rows", "test_rows", "verdict_rows")}
