"""Read side of the report: select runs and fetch, in a few bulk queries, the rows
that `gates.report.build_report` and `gates.health.analyse` need.

The history store (`gates.history`) owns the schema and the writes; its
per-metric reads are right for a gate (one metric, newest first) but a report
over 10,000 metrics needs one query per table, not one per metric, so those
queries live here, over the same tables.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from gates.history import History
from gates.report import ReportInput

__all__ = [
    "ReportInputError",
    "load_health_input",
    "load_registrations",
    "load_report_input",
    "parse_since",
    "select_runs",
]

_CHUNK = 900  # stay under SQLite's bound-parameter limit on old builds
_SINCE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class ReportInputError(ValueError):
    """The selection names nothing in the history; the message says what exists."""


def parse_since(text: str, now: dt.datetime | None = None) -> str:
    """`30d`, `12h`, `2w`, `90m` or an ISO date/time -> UTC ISO lower bound (sorts as text)."""
    now = now or dt.datetime.now(dt.UTC)
    match = _SINCE.match(text)
    if match:
        try:
            cutoff = now - dt.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
        except OverflowError:  # further back than year 1: every run
            cutoff = dt.datetime.min.replace(tzinfo=dt.UTC)
    else:
        try:
            cutoff = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise ReportInputError(
                f"--since {text!r}: use a span like 30d, 12h, 2w, 90m or a date like "
                "2026-11-01") from None
        if cutoff.tzinfo is None:
            cutoff = cutoff.replace(tzinfo=dt.UTC)
    return cutoff.astimezone(dt.UTC).isoformat(timespec="microseconds")


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


def _query_in(h: History, sql: str, column_values: Sequence[Any],
              params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Run `sql` (with one `{in}` placeholder) over `column_values` in chunks."""
    out: list[dict[str, Any]] = []
    for part in _chunks(list(column_values)):
        marks = ",".join("?" * len(part))
        out.extend(h.db.query(sql.format(**{"in": marks}), [*part, *params]))
    return out


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    hw = row.get("hardware")
    if isinstance(hw, str):
        try:
            row["hardware"] = json.loads(hw) if hw else {}
        except ValueError:
            row["hardware"] = {}
    return row


def _known_suites(h: History) -> str:
    names = [r["suite"] for r in h.db.query("SELECT DISTINCT suite FROM runs ORDER BY suite")]
    return ", ".join(names) or "none (the history is empty; run a suite first)"


def select_runs(h: History, *, run: str | None = None, suite: str | None = None,
                since: str | None = None, limit: int = 200,
                anchor: Mapping[str, str | None] | None = None,
                now: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """The runs a report covers, newest first, and the scope ("run" or "range").

    `run`: one run id (or a unique prefix of at least 6 characters). `since`: every
    top-level run (not a confirm-on-trip rerun) started at or after that UTC ISO
    time. Neither: the newest top-level run (of `suite` if given) and the newest run
    of every other suite shard of the same commit, which together are "the latest run".

    "Newest" is anchored, not the largest timestamp (a run merged with a clock a month
    ahead must not stay "latest" for a month): with `anchor` {"ci_url", "commit"}, the
    newest run of this CI run, else of this commit; else the newest run started no
    later than `now` (UTC ISO; default the current time) plus an hour.
    """
    if run:
        if len(run) < 6:
            raise ReportInputError(f"--run {run!r}: give at least 6 characters of the run id")
        rows = list(h.db.query(
            "SELECT * FROM runs WHERE run_id = ? OR run_id LIKE ? ESCAPE '\\' "
            "ORDER BY started_at DESC",
            [run, run.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"]))
        exact = [r for r in rows if r["run_id"] == run]
        rows = exact or rows
        if not rows:
            raise ReportInputError(f"{h.path}: no run {run}; list runs with "
                                   f"sqlite-utils rows {h.path} runs -c run_id -c suite")
        if len(rows) > 1:
            raise ReportInputError(f"--run {run}: matches {len(rows)} runs; give more "
                                   "characters of the run id")
        if suite and rows[0]["suite"] != suite:
            raise ReportInputError(f"run {rows[0]['run_id']} belongs to suite "
                                   f"{rows[0]['suite']!r}, not {suite!r}; drop --suite")
        return [_decode(rows[0])], "run"

    clauses = ["confirm_of IS NULL"]
    params: list[Any] = []
    if suite:
        clauses.append("suite = ?")
        params.append(suite)
    if since:
        clauses.append("started_at >= ?")
        params.append(since)
    where = " AND ".join(clauses)
    if since:
        rows = list(h.db.query(
            f"SELECT * FROM runs WHERE {where} ORDER BY started_at DESC, run_id LIMIT ?",
            [*params, limit]))
        if not rows:
            raise ReportInputError(
                f"{h.path}: no run{' of suite ' + repr(suite) if suite else ''} since "
                f"{since[:19]}; widen --since (suites here: {_known_suites(h)})")
        return [_decode(r) for r in rows], "range"

    rows = []
    for column, value in (("ci_url", (anchor or {}).get("ci_url")),
                          ("commit_sha", (anchor or {}).get("commit"))):
        if value and not rows:
            rows = list(h.db.query(f"SELECT * FROM runs WHERE {where} AND {column} = ? "
                                   "ORDER BY started_at DESC, run_id LIMIT 1", [*params, value]))
    if not rows:
        limit_at = (dt.datetime.fromisoformat(now) if now else dt.datetime.now(dt.UTC)) \
            + dt.timedelta(hours=1)
        rows = list(h.db.query(
            f"SELECT * FROM runs WHERE {where} AND started_at <= ? "
            "ORDER BY started_at DESC, run_id LIMIT 1",
            [*params, limit_at.isoformat(timespec="microseconds")]))
    if not rows:
        rows = list(h.db.query(
            f"SELECT * FROM runs WHERE {where} ORDER BY started_at DESC, run_id LIMIT 1", params))
    if not rows:
        what = f"of suite {suite!r}" if suite else "at all"
        raise ReportInputError(f"{h.path}: no run {what}; suites here: {_known_suites(h)}")
    head = rows[0]
    if not head.get("commit_sha"):
        return [_decode(head)], "run"
    # "The latest run" of a CI workflow is every suite shard of the newest commit
    # (after `gate-report merge`): the newest run per (suite, shard) of that commit.
    newest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in h.db.query(f"SELECT * FROM runs WHERE {where} AND commit_sha = ? "
                        "ORDER BY started_at DESC, run_id", [*params, head["commit_sha"]]):
        newest.setdefault((r["suite"], r.get("shard_index"), r.get("shard_count")), r)
    out = sorted(newest.values(), key=lambda r: (r["suite"], r.get("shard_index") or 1))
    return [_decode(r) for r in out], "run"


def load_report_input(h: History, runs: list[dict[str, Any]], *, scope: str = "run",
                      since: str | None = None, trend_points: int = 30,
                      generated_at: str | None = None) -> ReportInput:
    """Fetch counts, plans, metrics, verdicts, confirm runs and trends of `runs`."""
    ids = [r["run_id"] for r in runs]
    confirms: dict[str, list[dict[str, Any]]] = {}
    for r in _query_in(h, "SELECT * FROM runs WHERE confirm_of IN ({in}) "
                       "ORDER BY started_at, run_id", ids):
        confirms.setdefault(r["confirm_of"], []).append(_decode(r))
    confirm_ids = [c["run_id"] for cs in confirms.values() for c in cs]

    counts: dict[str, dict[str, int]] = {}
    seconds: dict[str, float] = {}
    for r in _query_in(h, "SELECT run_id, outcome, count(*) AS n, sum(duration) AS s FROM tests "
                       "WHERE run_id IN ({in}) AND attempt = 1 GROUP BY run_id, outcome", ids):
        counts.setdefault(r["run_id"], {})[r["outcome"]] = r["n"]
        seconds[r["run_id"]] = seconds.get(r["run_id"], 0.0) + (r["s"] or 0.0)

    plans: dict[str, list[dict[str, Any]]] = {}
    for r in _query_in(h, "SELECT * FROM plan_files WHERE run_id IN ({in}) ORDER BY path", ids):
        plans.setdefault(r["run_id"], []).append(r)

    metrics = _query_in(h, "SELECT run_id, attempt, nodeid, key, unit, better, n, count, median "
                        "FROM metrics WHERE run_id IN ({in})", ids)
    verdicts = _query_in(h, "SELECT * FROM verdicts WHERE run_id IN ({in}) ORDER BY attempt, id",
                         ids + confirm_ids)
    for v in verdicts:
        if isinstance(v.get("detail"), str):
            try:
                v["detail"] = json.loads(v["detail"])
            except ValueError:
                v["detail"] = {"detail": v["detail"]}

    # Trends: two queries per (suite, hardware) group of the reported runs.
    series: dict[tuple[str, str, str], dict[str, list[Any]]] = {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["suite"], r["fingerprint"]), []).append(r)
    keys_by_group: dict[tuple[str, str], set[str]] = {}
    run_group = {r["run_id"]: (r["suite"], r["fingerprint"]) for r in runs}
    for m in metrics:
        keys_by_group.setdefault(run_group[m["run_id"]], set()).add(m["key"])
    for v in verdicts:
        if v["run_id"] in run_group:
            keys_by_group.setdefault(run_group[v["run_id"]], set()).add(v["key"])
    for (suite, fp), group_runs in groups.items():
        wanted = keys_by_group.get((suite, fp))
        if wanted:
            series.update(_series(h, suite, fp, wanted, upper=max(r["started_at"] for r in
                                                                  group_runs),
                                  lower=since or "", points=trend_points,
                                  shards=max(r.get("shard_count") or 1 for r in group_runs)))
    return ReportInput(runs=runs, counts=counts, test_seconds=seconds, plans=plans,
                       metrics=metrics, verdicts=verdicts, confirms=confirms, series=series,
                       scope=scope, since=since, generated_at=generated_at)


def _series(h: History, suite: str, fp: str, keys: set[str], *, upper: str, lower: str,
            points: int, shards: int) -> dict[tuple[str, str, str], dict[str, list[Any]]]:
    """Columns of each key's last `points` values on complete top-level runs.

    The runs first (newest `points x shards`: a sharded suite spreads its metrics
    over its shards' runs), then their metric medians by run id (an index range, no
    sort of the metrics table); raw tuples, not dicts: a report may read a million.
    """
    run_rows = h.conn.execute(
        "SELECT run_id, commit_sha, started_at, trusted FROM runs WHERE suite = ? "
        "AND fingerprint = ? AND status = 'complete' AND confirm_of IS NULL "
        "AND started_at <= ? AND started_at >= ? ORDER BY started_at DESC, run_id LIMIT ?",
        (suite, fp, upper, lower, points * max(1, shards))).fetchall()
    order = {r[0]: i for i, r in enumerate(reversed(run_rows))}  # oldest first
    info = {r[0]: r for r in run_rows}
    per_key: dict[str, list[tuple[int, float]]] = {k: [] for k in keys}
    ids = list(info)
    # No GROUP BY: sorting a million rows in SQLite costs more than folding the rare
    # key recorded by two tests of one run here (their mean, like avg() would).
    for part in _chunks(ids):
        marks = ",".join("?" * len(part))
        for key, run_id, median in h.conn.execute(
                f"SELECT key, run_id, median FROM metrics WHERE run_id IN ({marks}) "
                "AND attempt = 1", part):
            slot = per_key.get(key)
            if slot is not None:
                slot.append((order[run_id], median))
    out: dict[tuple[str, str, str], dict[str, list[Any]]] = {}
    runs_by_order = list(reversed(run_rows))
    for key, pairs in per_key.items():
        if not pairs:
            continue
        pairs.sort()
        if any(a[0] == b[0] for a, b in zip(pairs, pairs[1:], strict=False)):
            merged: dict[int, list[float]] = {}
            for i, v in pairs:
                merged.setdefault(i, []).append(v)
            pairs = [(i, sum(vs) / len(vs)) for i, vs in merged.items()]
        pairs = pairs[-points:]
        rows = [runs_by_order[i] for i, _ in pairs]
        out[(suite, fp, key)] = {
            "run_id": [r[0] for r in rows], "commit": [r[1] for r in rows],
            "started_at": [r[2] for r in rows], "trusted": [bool(r[3]) for r in rows],
            "value": [v for _, v in pairs],
        }
    return out


# -------------------------------------------------------------------- health


def load_registrations(root: Path, suite: str) -> list[dict[str, Any]] | None:
    """The suite's registrations, collected statically from `root` (None without a catalog)."""
    from ci_register.catalog import DEFAULT_CATALOG, CatalogError, load_catalog  # noqa: PLC0415

    catalog_path = root / DEFAULT_CATALOG
    if not catalog_path.is_file():
        return None
    try:
        catalog = load_catalog(catalog_path)
    except CatalogError:
        return None
    if suite not in catalog.suites:
        return None
    col = _collect(str(root.resolve()), catalog_path.stat().st_mtime_ns)
    return [r.to_json() for r in col.registrations if r.suite == suite]


@lru_cache(maxsize=4)
def _collect(root: str, _catalog_mtime: int) -> Any:
    # One static parse of the tree per report, however many suites it covers.
    from ci_register.catalog import DEFAULT_CATALOG, load_catalog  # noqa: PLC0415
    from ci_register.collect import collect  # noqa: PLC0415

    base = Path(root)
    return collect(load_catalog(base / DEFAULT_CATALOG), base=base)


def load_health_input(h: History, suite: str, *, window: int = 20,
                      registrations: list[dict[str, Any]] | None = None,
                      until: str | None = None) -> dict[str, Any]:
    """Rows for `gates.health.analyse` over the last `window` runs of `suite`."""
    params: list[Any] = [suite]
    bound = ""
    if until:
        bound = " AND started_at <= ?"
        params.append(until)
    runs = list(h.db.query(
        "SELECT run_id, suite, status, commit_sha, started_at, confirm_of, shard_index, "
        f"shard_count, fingerprint, trusted FROM runs WHERE suite = ?{bound} AND confirm_of IS NULL "
        "ORDER BY started_at DESC, run_id LIMIT ?", [*params, window]))
    ids = [r["run_id"] for r in runs]
    confirm_runs = _query_in(
        h, "SELECT run_id, suite, status, commit_sha, started_at, confirm_of, shard_index, "
        "shard_count, fingerprint, trusted FROM runs WHERE confirm_of IN ({in})", ids)
    all_runs = runs + confirm_runs
    tests = _query_in(h, "SELECT run_id, attempt, nodeid, path, outcome, duration, skip_reason "
                      "FROM tests WHERE run_id IN ({in})", [r["run_id"] for r in all_runs])
    plan_files = _query_in(h, "SELECT run_id, path, line, est_time, expected FROM plan_files "
                           "WHERE run_id IN ({in})", ids)
    fingerprint = runs[0]["fingerprint"] if runs else None
    durations = h.file_durations(suite, fingerprint, limit=15) if fingerprint else {}
    ever = {r["path"] for r in h.db.query(
        "SELECT DISTINCT t.path FROM tests t JOIN runs r ON r.run_id = t.run_id "
        "WHERE r.suite = ? AND t.path IS NOT NULL", [suite])}
    return {
        "suite": suite, "fingerprint": fingerprint, "runs": all_runs, "tests": tests,
        "plan_files": plan_files, "durations": durations, "registrations": registrations,
        "ever_ran": ever,
    }
