"""The store's reads for reports (`gates.report.query` selects with them), and for the
`gate-report` commands that look at one run or one metric (compare, accept, notify,
bisect): a run, its tests, metrics and verdicts, its trust log, acceptances, bisections
and notifications.

A report over 10,000 metrics needs one query per table, not one per metric,
so each method reads the rows of many runs at once (``IN`` lists in chunks).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, cast

from gates.store.records import HistoryError
from gates.store.rows import (
    FailedTestRow,
    MetricSummaryRow,
    OutcomeTotal,
    PlanFileRow,
    RunRow,
    TrendRun,
    TrendValue,
    VerdictRow,
    decode_run,
)
from gates.store.schema import like_prefix, with_samples

__all__ = ["ReportReads", "chains_of", "rows_in"]

_CHUNK = 900  # stay under SQLite's bound-parameter limit on old builds
MAX_CHAIN = 16  # attempts a confirm chain is read to (the runner takes 5 at most;
# ``gates.attempts`` refuses longer chains as loops)


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


def rows_in(rows: Callable[..., list[dict]], sql: str, values: Sequence[Any],
            params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Rows of ``sql`` (one ``{in}`` placeholder) over ``values``, in chunks, through
    ``rows`` (a history's row read)."""
    out: list[dict[str, Any]] = []
    for part in _chunks(list(values)):
        out.extend(rows(sql.format(**{"in": ",".join("?" * len(part))}), [*part, *params]))
    return out


def chains_of(rows: Callable[..., list[dict]], run_ids: Sequence[str],
              columns: str) -> list[dict[str, Any]]:
    """Rows of the confirm reruns descending from ``run_ids``, level by level (at most
    ``MAX_CHAIN`` levels: a looping ``confirm_of`` column must not loop here)."""
    out: list[dict[str, Any]] = []
    seen = set(run_ids)
    level = list(run_ids)
    for _ in range(MAX_CHAIN):
        found = [r for r in rows_in(
            rows, f"SELECT {columns} FROM runs WHERE confirm_of IN ({{in}}) "
            "ORDER BY started_at, run_id", level) if r["run_id"] not in seen]
        if not found:
            break
        seen.update(r["run_id"] for r in found)
        out += found
        level = [r["run_id"] for r in found]
    return out


def _run(row: dict[str, Any]) -> RunRow:
    hw = row.get("hardware")
    if isinstance(hw, str):
        try:
            row["hardware"] = json.loads(hw) if hw else {}
        except ValueError:
            row["hardware"] = {}
    return cast(RunRow, row)


class ReportReads:
    """``History.report_reads``: report reads, and one run or metric for the commands (one
    of the history's parts: its connection, its row reads). CI health reads its own
    (`gates.store.health_reads`)."""

    def __init__(self, store: Any) -> None:  # the History it is part of (no import: a cycle)
        self.conn: sqlite3.Connection = store.conn
        self.path: Path = store.path
        self._rows: Callable[..., list[dict]] = store._rows

    # ------------------------------------------------------------- run selection

    def suite_names(self) -> list[str]:
        """Every suite with a run, sorted."""
        return [r["suite"] for r in self._rows("SELECT DISTINCT suite FROM runs ORDER BY suite")]

    def runs_by_id_prefix(self, prefix: str) -> list[RunRow]:
        """Runs whose id is ``prefix`` or starts with it, newest first."""
        return [_run(r) for r in self._rows(
            "SELECT * FROM runs WHERE run_id = ? OR run_id LIKE ? ESCAPE '\\' "
            "ORDER BY started_at DESC", [prefix, like_prefix(prefix)])]

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
        return [_run(r) for r in chains_of(self._rows, run_ids, "*")]

    def first_attempt_totals(self, run_ids: Sequence[str]) -> list[OutcomeTotal]:
        """Per run and outcome: first-attempt tests and their seconds."""
        return cast(list[OutcomeTotal], rows_in(
            self._rows, "SELECT run_id, outcome, count(*) AS n, sum(duration) AS s FROM tests "
            "WHERE run_id IN ({in}) AND attempt = 1 GROUP BY run_id, outcome", run_ids))

    def failed_tests_of(self, run_ids: Sequence[str]) -> list[FailedTestRow]:
        """First-attempt tests of ``run_ids`` that failed or errored, with their error."""
        return cast(list[FailedTestRow], rows_in(
            self._rows, "SELECT run_id, nodeid, outcome, error FROM tests WHERE run_id IN ({in}) "
            "AND attempt = 1 AND outcome IN ('failed', 'error') ORDER BY run_id, nodeid",
            run_ids))

    def plan_files_of(self, run_ids: Sequence[str]) -> list[PlanFileRow]:
        """The planned files of ``run_ids``, by path (labels as stored)."""
        return cast(list[PlanFileRow], rows_in(
            self._rows, "SELECT * FROM plan_files WHERE run_id IN ({in}) ORDER BY path", run_ids))

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
        return cast(list[MetricSummaryRow], rows_in(
            self._rows, "SELECT run_id, attempt, nodeid, key, unit, better, n, count, median "
            "FROM metrics WHERE run_id IN ({in})", run_ids))

    def verdicts_of(self, run_ids: Sequence[str]) -> list[VerdictRow]:
        """The saved verdicts of ``run_ids``, by attempt then insertion (detail decoded;
        text that is not JSON comes back as ``{"detail": text}``)."""
        rows = rows_in(self._rows, "SELECT * FROM verdicts WHERE run_id IN ({in}) "
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

    # -------------------------------------------- one run, and what was said of it

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

    # ----------------------------------------------------- after the verdict

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
