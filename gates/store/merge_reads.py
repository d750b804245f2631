"""The store's reads of whole runs, for merging shards, snapshots and a file's health: a run
with all its rows (`export_run`), which runs there are, rows that belong to no run, and how
many samples the file holds. Each owns its SQL, on the history's connection.
"""

from __future__ import annotations

from typing import Any

from gates.store.records import HistoryError
from gates.store.run_writes import _drop
from gates.store.schema import with_samples

__all__ = ["MergeReads"]


class MergeReads:
    """``History.merge_reads``: whole runs for merges and snapshots, and a file's health."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self._h = store

    def export_run(self, run_id: str) -> dict[str, Any]:
        """A run with all its rows, ids dropped (for merging and comparing)."""
        runs = self._h._rows("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        if not runs:
            raise HistoryError(f"{self._h.path}: no run {run_id}")
        metrics = with_samples(self._h.conn, self._h._rows(
            "SELECT * FROM metrics WHERE run_id = ? ORDER BY attempt, nodeid, key", (run_id,)))
        return {
            "run": _drop(runs[0], "num"),
            "tests": [_drop(r, "id") for r in self._h._rows(
                "SELECT * FROM tests WHERE run_id = ? ORDER BY attempt, nodeid", (run_id,))],
            "metrics": [_drop(r, "id") for r in metrics],
            "plan_files": self._h._rows("SELECT * FROM plan_files WHERE run_id = ? ORDER BY path",
                                     (run_id,)),
            "plan_gates": [_drop(r, "id") for r in self._h._rows(
                "SELECT * FROM plan_gates WHERE run_id = ? ORDER BY id", (run_id,))],
            "verdicts": [_drop(r, "id") for r in self._h._rows(
                "SELECT * FROM verdicts WHERE run_id = ? ORDER BY attempt, id", (run_id,))],
            "trust_log": [_drop(r, "id") for r in self._h._rows(
                "SELECT * FROM trust_log WHERE run_id = ? ORDER BY id", (run_id,))],
            # The repo file's acceptance entries the run carried (gates.record.accept).
            "acceptances": [_drop(r, "id") for r in self._h._rows(
                "SELECT a.* FROM acceptances a JOIN run_acceptances ra ON ra.acceptance_id = "
                "a.id WHERE ra.run_id = ? ORDER BY a.id", (run_id,))],
            # The import maps this run recorded (still the newest of their files).
            "import_maps": self._h._rows(
                "SELECT suite, path, commit_sha, run_id, recorded_at, files FROM import_maps "
                "WHERE run_id = ? ORDER BY suite, path", (run_id,)),
        }

    def has_run(self, run_id: str) -> bool:
        return self._h.conn.execute("SELECT 1 FROM runs WHERE run_id = ?",
                                    (run_id,)).fetchone() is not None

    def run_ids(self) -> list[str]:
        return [r[0] for r in self._h.conn.execute("SELECT run_id FROM runs ORDER BY started_at")]

    def orphan_rows(self) -> list[str]:
        """Rows that belong to no run (or no metric): what a broken or forged file holds."""
        checks = (
            ("tests", "SELECT count(*) FROM test_rows WHERE run_num NOT IN "
                      "(SELECT num FROM runs WHERE num IS NOT NULL)"),
            ("metrics", "SELECT count(*) FROM metric_rows WHERE run_num NOT IN "
                        "(SELECT num FROM runs WHERE num IS NOT NULL)"),
            ("verdicts", "SELECT count(*) FROM verdict_rows WHERE run_num NOT IN "
                         "(SELECT num FROM runs WHERE num IS NOT NULL)"),
            ("run_acceptances", "SELECT count(*) FROM run_acceptances WHERE run_id NOT IN "
                                "(SELECT run_id FROM runs) OR acceptance_id NOT IN "
                                "(SELECT id FROM acceptances)"),
        )
        out = []
        for table, sql in checks:
            n = self._h.conn.execute(sql).fetchone()[0]
            if n:
                out.append(f"{n} row(s) of {table} belong to no run")
        return out

    def sample_count(self) -> int:
        """How many metric samples the file holds (8 bytes each in ``metric_rows.samples``)."""
        return int(self._h.conn.execute("SELECT coalesce(sum(length(samples)), 0) / 8 "
                                     "FROM metric_rows").fetchone()[0])
