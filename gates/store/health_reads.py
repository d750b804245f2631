"""The store's reads for CI health (`gate-report health`, the report's footer:
`gates.report.query.load_health_input` selects with them, `gates.report.health` judges):
a suite's newest runs and their confirm reruns, every attempt's test rows, the planned
est_times, and every test file a suite ever ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from gates.store.report_reads import chains_of, rows_in
from gates.store.rows import HealthRunRow, PlanFileRow, TestRow

__all__ = ["HealthReads"]

_RUN_COLUMNS = ("run_id, suite, status, commit_sha, started_at, confirm_of, shard_index, "
                "shard_count, fingerprint, trusted")


class HealthReads:
    """``History.health_reads``: CI health's reads (one of the history's parts: its row
    reads)."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self._rows: Callable[..., list[dict]] = store._rows

    def runs(self, suite: str, *, window: int, until: str | None = None) -> list[HealthRunRow]:
        """The newest ``window`` top-level runs of ``suite`` (started at or before
        ``until``), newest first."""
        params: list[Any] = [suite]
        bound = ""
        if until:
            bound = " AND started_at <= ?"
            params.append(until)
        return cast(list[HealthRunRow], self._rows(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE suite = ?{bound} "
            "AND confirm_of IS NULL ORDER BY started_at DESC, run_id LIMIT ?",
            [*params, window]))

    def confirm_runs(self, run_ids: Sequence[str]) -> list[HealthRunRow]:
        """Every confirm rerun of ``run_ids`` (reruns of reruns too), with the columns
        health reads."""
        return cast(list[HealthRunRow], chains_of(self._rows, run_ids, _RUN_COLUMNS))

    def test_rows_of(self, run_ids: Sequence[str]) -> list[TestRow]:
        """Every attempt's test rows of ``run_ids`` (no error text)."""
        return cast(list[TestRow], rows_in(
            self._rows, "SELECT run_id, attempt, nodeid, path, outcome, duration, skip_reason "
            "FROM tests WHERE run_id IN ({in})", run_ids))

    def planned_est_times(self, run_ids: Sequence[str]) -> list[PlanFileRow]:
        """(run_id, path, line, est_time, expected) of the planned files of ``run_ids``."""
        return cast(list[PlanFileRow], rows_in(
            self._rows, "SELECT run_id, path, line, est_time, expected FROM plan_files "
            "WHERE run_id IN ({in})", run_ids))

    def paths_ever_run(self, suite: str) -> set[str]:
        """Every test file path any run of ``suite`` ever recorded."""
        return {r["path"] for r in self._rows(
            "SELECT DISTINCT t.path FROM tests t JOIN runs r ON r.run_id = t.run_id "
            "WHERE r.suite = ? AND t.path IS NOT NULL", [suite])}
