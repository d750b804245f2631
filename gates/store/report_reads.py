"""The store's reads for reports and CI health (`gates.report.query` selects with them).

A report over 10,000 metrics needs one query per table, not one per metric,
so each method reads the rows of many runs at once (``IN`` lists in chunks).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, cast

from gates.store.rows import (
    FailedTestRow,
    HealthRunRow,
    MetricSummaryRow,
    OutcomeTotal,
    PlanFileRow,
    RunRow,
    TestRow,
    TrendRun,
    TrendValue,
    VerdictRow,
)

__all__ = ["ReportReads"]

_CHUNK = 900  # stay under SQLite's bound-parameter limit on old builds
MAX_CHAIN = 16  # attempts a confirm chain is read to (the runner takes 5 at most;
# ``gates.attempts`` refuses longer chains as loops)
_HEALTH_RUN_COLUMNS = ("run_id, suite, status, commit_sha, started_at, confirm_of, shard_index, "
                       "shard_count, fingerprint, trusted")


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


def _run(row: dict[str, Any]) -> RunRow:
    hw = row.get("hardware")
    if isinstance(hw, str):
        try:
            row["hardware"] = json.loads(hw) if hw else {}
        except ValueError:
            row["hardware"] = {}
    return cast(RunRow, row)


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class ReportReads:
    """Report and health reads of `gates.store.history.History` (one of its parts: its
    connection, its row reads)."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self.conn: sqlite3.Connection = store.conn
        self.path: Path = store.path
        self._rows: Callable[..., list[dict]] = store._rows

    def _rows_in(self, sql: str, values: Sequence[Any],
                 params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of ``sql`` (one ``{in}`` placeholder) over ``values``, in chunks."""
        out: list[dict[str, Any]] = []
        for part in _chunks(list(values)):
            out.extend(self._rows(sql.format(**{"in": ",".join("?" * len(part))}),
                                  [*part, *params]))
        return out

    # ------------------------------------------------------------- run selection

    def suite_names(self) -> list[str]:
        """Every suite with a run, sorted."""
        return [r["suite"] for r in self._rows("SELECT DISTINCT suite FROM runs ORDER BY suite")]

    def runs_by_id_prefix(self, prefix: str) -> list[RunRow]:
        """Runs whose id is ``prefix`` or starts with it, newest first."""
        return [_run(r) for r in self._rows(
            "SELECT * FROM runs WHERE run_id = ? OR run_id LIKE ? ESCAPE '\\' "
            "ORDER BY started_at DESC", [prefix, _like_prefix(prefix)])]

    def top_level_runs(self, *, suite: str | None = None, since: str | None = None,
                       commit: str | None = None, ci_url: str | None = None,
                       until: str | None = None, limit: int | None = None) -> list[RunRow]:
        """Runs that are not confirm reruns, newest first, optionally of one suite,
        started at or after ``since`` and at or before ``until`` (UTC ISO), of one
        commit, of one CI run (``ci_url``), at most ``limit``."""
        clauses = ["confirm_of IS NULL"]
        params: list[Any] = []
        for clause, value in (("suite = ?", suite), ("started_at >= ?", since),
                              ("commit_sha = ?", commit), ("ci_url = ?", ci_url),
                              ("started_at <= ?", until)):
            if value:
                clauses.append(clause)
                params.append(value)
        sql = f"SELECT * FROM runs WHERE {' AND '.join(clauses)} ORDER BY started_at DESC, run_id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_run(r) for r in self._rows(sql, params)]

    # ------------------------------------------------------------ report rows

    def confirm_runs_of(self, run_ids: Sequence[str]) -> list[RunRow]:
        """Every confirm rerun of ``run_ids`` (every status), in chain order: the reruns
        of reruns too (the runner links each rerun to the attempt before it, not to
        the first), a shallower attempt before a deeper one, then oldest first."""
        return [_run(r) for r in self._chains_of(run_ids, "*")]

    def _chains_of(self, run_ids: Sequence[str], columns: str) -> list[dict[str, Any]]:
        """Rows of the confirm reruns descending from ``run_ids``, level by level (at most
        ``MAX_CHAIN`` levels: a looping ``confirm_of`` column must not loop here)."""
        out: list[dict[str, Any]] = []
        seen = set(run_ids)
        level = list(run_ids)
        for _ in range(MAX_CHAIN):
            rows = [r for r in self._rows_in(
                f"SELECT {columns} FROM runs WHERE confirm_of IN ({{in}}) "
                "ORDER BY started_at, run_id", level) if r["run_id"] not in seen]
            if not rows:
                break
            seen.update(r["run_id"] for r in rows)
            out += rows
            level = [r["run_id"] for r in rows]
        return out

    def first_attempt_totals(self, run_ids: Sequence[str]) -> list[OutcomeTotal]:
        """Per run and outcome: first-attempt tests and their seconds."""
        return cast(list[OutcomeTotal], self._rows_in(
            "SELECT run_id, outcome, count(*) AS n, sum(duration) AS s FROM tests "
            "WHERE run_id IN ({in}) AND attempt = 1 GROUP BY run_id, outcome", run_ids))

    def failed_tests_of(self, run_ids: Sequence[str]) -> list[FailedTestRow]:
        """First-attempt tests of ``run_ids`` that failed or errored, with their error."""
        return cast(list[FailedTestRow], self._rows_in(
            "SELECT run_id, nodeid, outcome, error FROM tests WHERE run_id IN ({in}) "
            "AND attempt = 1 AND outcome IN ('failed', 'error') ORDER BY run_id, nodeid",
            run_ids))

    def plan_files_of(self, run_ids: Sequence[str]) -> list[PlanFileRow]:
        """The planned files of ``run_ids``, by path (labels as stored)."""
        return cast(list[PlanFileRow], self._rows_in(
            "SELECT * FROM plan_files WHERE run_id IN ({in}) ORDER BY path", run_ids))

    def model_runs(self, suite: str, until: str, *, few: int = 16
                   ) -> dict[str, tuple[int, list[str]]]:
        """{fingerprint: (how many of ``suite``'s complete, trusted first attempts ran on it
        up to ``until``, their start times oldest first where at most ``few``)}: what a
        report says of a machine model new to a suite (two statements)."""
        counts = {str(fp): int(n) for fp, n in self.conn.execute(
            "SELECT fingerprint, count(*) FROM runs WHERE suite = ? AND confirm_of IS NULL "
            "AND status = 'complete' AND trusted = 1 AND started_at <= ? "
            "GROUP BY fingerprint", (suite, until)) if fp is not None}
        out: dict[str, tuple[int, list[str]]] = {fp: (n, []) for fp, n in counts.items()}
        small = sorted(fp for fp, n in counts.items() if n <= few)
        if small:
            for fp, st in self.conn.execute(
                    "SELECT fingerprint, started_at FROM runs WHERE suite = ? "
                    "AND confirm_of IS NULL AND status = 'complete' AND trusted = 1 "
                    f"AND started_at <= ? AND fingerprint IN ({','.join('?' * len(small))}) "
                    "ORDER BY started_at", (suite, until, *small)):
                out[str(fp)][1].append(str(st))
        return out

    def metric_summaries(self, run_ids: Sequence[str]) -> list[MetricSummaryRow]:
        """The metric rows of ``run_ids`` (every attempt), without their samples."""
        return cast(list[MetricSummaryRow], self._rows_in(
            "SELECT run_id, attempt, nodeid, key, unit, better, n, count, median "
            "FROM metrics WHERE run_id IN ({in})", run_ids))

    def verdicts_of(self, run_ids: Sequence[str]) -> list[VerdictRow]:
        """The saved verdicts of ``run_ids``, by attempt then insertion (detail decoded;
        text that is not JSON comes back as ``{"detail": text}``)."""
        rows = self._rows_in("SELECT * FROM verdicts WHERE run_id IN ({in}) "
                             "ORDER BY attempt, id", run_ids)
        for v in rows:
            if isinstance(v.get("detail"), str):
                try:
                    v["detail"] = json.loads(v["detail"])
                except ValueError:
                    v["detail"] = {"detail": v["detail"]}
        return cast(list[VerdictRow], rows)

    def trend_runs(self, suite: str, fingerprint: str, *, upper: str, lower: str,
                   limit: int) -> list[TrendRun]:
        """Complete top-level runs of a suite and hardware started in [lower, upper],
        newest first, at most ``limit``."""
        return [TrendRun._make(r) for r in self.conn.execute(
            "SELECT run_id, commit_sha, started_at, trusted FROM runs WHERE suite = ? "
            "AND fingerprint = ? AND status = 'complete' AND confirm_of IS NULL "
            "AND started_at <= ? AND started_at >= ? ORDER BY started_at DESC, run_id LIMIT ?",
            (suite, fingerprint, upper, lower, limit))]

    def first_attempt_medians(self, run_ids: Sequence[str]) -> list[TrendValue]:
        """(key, run_id, median) of the first-attempt metric rows of ``run_ids``.

        No GROUP BY: sorting a million rows in SQLite costs more than folding the rare
        key recorded by two tests of one run in the caller.
        """
        out: list[TrendValue] = []
        for part in _chunks(list(run_ids)):
            out.extend(map(TrendValue._make, self.conn.execute(
                f"SELECT key, run_id, median FROM metrics WHERE run_id IN "
                f"({','.join('?' * len(part))}) AND attempt = 1", part)))
        return out

    # ------------------------------------------------------------------ health

    def health_runs(self, suite: str, *, window: int,
                    until: str | None = None) -> list[HealthRunRow]:
        """The newest ``window`` top-level runs of ``suite`` (started at or before
        ``until``), newest first."""
        params: list[Any] = [suite]
        bound = ""
        if until:
            bound = " AND started_at <= ?"
            params.append(until)
        return cast(list[HealthRunRow], self._rows(
            f"SELECT {_HEALTH_RUN_COLUMNS} FROM runs WHERE suite = ?{bound} "
            "AND confirm_of IS NULL ORDER BY started_at DESC, run_id LIMIT ?",
            [*params, window]))

    def health_confirm_runs(self, run_ids: Sequence[str]) -> list[HealthRunRow]:
        """Every confirm rerun of ``run_ids`` (reruns of reruns too), with the columns
        health reads."""
        return cast(list[HealthRunRow], self._chains_of(run_ids, _HEALTH_RUN_COLUMNS))

    def test_rows_of(self, run_ids: Sequence[str]) -> list[TestRow]:
        """Every attempt's test rows of ``run_ids`` (no error text)."""
        return cast(list[TestRow], self._rows_in(
            "SELECT run_id, attempt, nodeid, path, outcome, duration, skip_reason "
            "FROM tests WHERE run_id IN ({in})", run_ids))

    def planned_est_times(self, run_ids: Sequence[str]) -> list[PlanFileRow]:
        """(run_id, path, line, est_time, expected) of the planned files of ``run_ids``."""
        return cast(list[PlanFileRow], self._rows_in(
            "SELECT run_id, path, line, est_time, expected FROM plan_files "
            "WHERE run_id IN ({in})", run_ids))

    def paths_ever_run(self, suite: str) -> set[str]:
        """Every test file path any run of ``suite`` ever recorded."""
        return {r["path"] for r in self._rows(
            "SELECT DISTINCT t.path FROM tests t JOIN runs r ON r.run_id = t.run_id "
            "WHERE r.suite = ? AND t.path IS NOT NULL", [suite])}

    def latest_trusted_fingerprint(self, suite: str) -> str | None:
        """The hardware fingerprint of the suite's newest complete, trusted run."""
        rows = self._rows(
            "SELECT fingerprint FROM runs WHERE suite = ? AND status = 'complete' "
            "AND trusted = 1 ORDER BY started_at DESC, run_id LIMIT 1", (suite,))
        return rows[0]["fingerprint"] if rows else None

    def trim_rows(self, suite: str | None = None, since: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """What ``gates.report.trim`` reads, over complete trusted runs (of `suite`, started at or
        after `since`): ``metrics`` (suite, fingerprint, run_id, nodeid, key, median of the
        first attempt), ``verdicts`` (suite, fingerprint, key, verdict, n over every
        attempt), ``tests`` (suite, fingerprint, nodeid, mean seconds of passing first
        attempts) and ``runs`` (suite, fingerprint, run_id, started_at)."""
        where = "r.status = 'complete' AND r.trusted = 1"
        params: list[Any] = []
        if suite is not None:
            where += " AND r.suite = ?"
            params.append(suite)
        if since is not None:
            where += " AND r.started_at >= ?"
            params.append(since)
        return {
            "metrics": self._rows(
                "SELECT r.suite, r.fingerprint, m.run_id, m.nodeid, m.key, m.median "
                f"FROM metrics m JOIN runs r ON r.run_id = m.run_id WHERE {where} AND m.attempt = 1 "
                "ORDER BY r.started_at, m.run_id, m.nodeid, m.key", params),
            "verdicts": self._rows(
                "SELECT r.suite, r.fingerprint, v.key, v.verdict, count(*) AS n "
                f"FROM verdicts v JOIN runs r ON r.run_id = v.run_id WHERE {where} "
                "GROUP BY r.suite, r.fingerprint, v.key, v.verdict", params),
            "tests": self._rows(
                "SELECT r.suite, r.fingerprint, t.nodeid, avg(t.duration) AS seconds "
                f"FROM tests t JOIN runs r ON r.run_id = t.run_id WHERE {where} AND t.attempt = 1 "
                "AND t.outcome = 'passed' GROUP BY r.suite, r.fingerprint, t.nodeid", params),
            "runs": self._rows(
                f"SELECT r.suite, r.fingerprint, r.run_id, r.started_at FROM runs r WHERE {where} "
                "ORDER BY r.started_at", params),
        }
