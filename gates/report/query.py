"""Read side of the report: select runs and fetch, in a few bulk queries, the rows
that `gates.report.build.build_report` and `gates.report.health.analyse` need.

Every read is a method of the store's report reader (`gates.store.report_reads.
ReportReads`, ``History.report_reads``); this module chooses what to read and
shapes it for the report.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from gates.report.build import ReportInput
from gates.store.history import History
from gates.store.rows import planned_shards

__all__ = [
    "NOT_RECORDED",
    "not_recorded_shards",
    "ReportInputError",
    "load_health_input",
    "load_registrations",
    "load_report_input",
    "parse_since",
    "select_runs",
]

_SINCE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_NEGATIVE_SPAN = re.compile(r"^\s*-\s*(\d+\s*[mhdw])\s*$")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class ReportInputError(ValueError):
    """The selection names nothing in the history; the message says what exists."""


def parse_since(text: str, now: dt.datetime | None = None, option: str = "--since") -> str:
    """`30d`, `12h`, `2w`, `90m` or an ISO date/time -> UTC ISO lower bound (sorts as text).
    ``option``: the command-line option the text came from, for the error line."""
    now = now or dt.datetime.now(dt.UTC)
    match = _SINCE.match(text)
    if match:
        try:
            cutoff = now - dt.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
        except OverflowError:  # further back than year 1: every run
            cutoff = dt.datetime.min.replace(tzinfo=dt.UTC)
    elif _NEGATIVE_SPAN.match(text):
        raise ReportInputError(
            f"{option} {text!r}: a span counts back from now and is never negative; "
            f"write {option} {_NEGATIVE_SPAN.match(text).group(1).replace(' ', '')}")
    else:
        try:
            cutoff = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise ReportInputError(
                f"{option} {text!r}: use a span like 30d, 12h, 2w, 90m or a date like "
                "2026-11-01") from None
        if cutoff.tzinfo is None:
            cutoff = cutoff.replace(tzinfo=dt.UTC)
    return cutoff.astimezone(dt.UTC).isoformat(timespec="microseconds")


def _known_suites(h: History) -> str:
    return ", ".join(h.report_reads.suite_names()) or "none (the history is empty; run a suite first)"


def select_runs(h: History, *, run: str | None = None, suite: str | None = None,
                since: str | None = None, limit: int = 200,
                anchor: Mapping[str, str | None] | None = None,
                now: str | None = None, fall_back: bool = True,
                ) -> tuple[list[dict[str, Any]], str]:
    """The runs a report covers, newest first, and the scope ("run" or "range").

    `run`: one run id (or a unique prefix of at least 6 characters). `since`: every
    top-level run (not a confirm-on-trip rerun) started at or after that UTC ISO
    time. Neither: the newest top-level run (of `suite` if given) and the newest run
    of every other suite shard of the same commit, which together are "the latest run".

    "Newest" is anchored, not the largest timestamp (a run merged with a clock a month
    ahead must not stay "latest" for a month): with `anchor` {"ci_url", "commit"}, the
    newest run of this CI run, else of this commit; else the newest run started no
    later than `now` (UTC ISO; default the current time) plus an hour. ``fall_back=False``
    (in CI): no run of the anchor's CI run or commit is `ReportInputError`, never
    another commit's runs read as this one's (its shards recorded nothing: a hardware
    mismatch, runners lost).
    """
    if run:
        if len(run) < 6:
            raise ReportInputError(f"--run {run!r}: give at least 6 characters of the run id")
        rows = h.report_reads.runs_by_id_prefix(run)
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
        return [dict(rows[0])], "run"

    if since:
        found = h.report_reads.top_level_runs(suite=suite, since=since, limit=limit)
        if not found:
            raise ReportInputError(
                f"{h.path}: no run{' of suite ' + repr(suite) if suite else ''} since "
                f"{since[:19]}; widen --since (suites here: {_known_suites(h)})")
        return [dict(r) for r in found], "range"

    newest_run: list[Any] = []
    for column, value in (("ci_url", (anchor or {}).get("ci_url")),
                          ("commit", (anchor or {}).get("commit"))):
        if value and not newest_run:
            newest_run = h.report_reads.top_level_runs(suite=suite, limit=1, **{column: value})
    if not newest_run and anchor and not fall_back:
        where = " or ".join(f"{name} {str(value)[:80]}" for name, value in
                            (("CI run", anchor.get("ci_url")),
                             ("commit", (anchor.get("commit") or "")[:10] or None)) if value)
        raise ReportInputError(
            f"{h.path}: no run of {where}{' of suite ' + repr(suite) if suite else ''}: "
            "its suite jobs recorded none (see their logs), so nothing here can be "
            "reported as passed; merge their shard files first, or give --run RUN_ID")
    if not newest_run:
        limit_at = (dt.datetime.fromisoformat(now) if now else dt.datetime.now(dt.UTC)) \
            + dt.timedelta(hours=1)
        newest_run = h.report_reads.top_level_runs(suite=suite, limit=1,
                                      until=limit_at.isoformat(timespec="microseconds"))
    if not newest_run:
        newest_run = h.report_reads.top_level_runs(suite=suite, limit=1)
    if not newest_run:
        what = f"of suite {suite!r}" if suite else "at all"
        raise ReportInputError(f"{h.path}: no run {what}; suites here: {_known_suites(h)}")
    head = newest_run[0]
    if not head.get("commit_sha"):
        return [dict(head)], "run"
    # "The latest run" of a CI workflow is every suite shard of the newest commit
    # (after `gate-report merge`): the newest run per (suite, shard) of that commit.
    newest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in h.report_reads.top_level_runs(suite=suite, commit=head["commit_sha"]):
        newest.setdefault((r["suite"], r.get("shard_index"), r.get("shard_count")), dict(r))
    out = sorted(newest.values(), key=lambda r: (r["suite"], r.get("shard_index") or 1))
    return out + not_recorded_shards(out), "run"


NOT_RECORDED = "not-recorded"  # the status of a planned shard's stand-in (no such run)


def not_recorded_shards(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A stand-in run (status ``not-recorded``) for each shard that the plans of a
    commit's runs gave files (``runs.planned_shards``) but that recorded no run: its job
    died before pytest began, or its history never reached the merge. Every surface
    then reads the commit as failed, never as passed on the shards that did report.
    A shard its plan gave no files records no run and is not one of these. Only runs a
    CI run made (``ci_url``) promise their siblings: outside CI a shard is run by
    choice (``--partition 1/2`` to try one), and the others are not missing."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in runs:
        if r.get("ci_url"):
            groups.setdefault((str(r["suite"]), int(r.get("shard_count") or 1)), []).append(r)
    out: list[dict[str, Any]] = []
    for (suite, n), group in sorted(groups.items()):
        planned = {i for r in group for i in planned_shards(r.get("planned_shards")) or ()
                   if i <= n}
        present = {int(r.get("shard_index") or 1) for r in group}
        like = group[0]
        for i in sorted(planned - present):
            out.append({
                "run_id": f"{NOT_RECORDED}-{suite}-{i}-of-{n}", "suite": suite,
                "shard_index": i, "shard_count": n, "status": NOT_RECORDED,
                "exit_status": None, "confirm_of": None, "commit_sha": like.get("commit_sha"),
                "branch": like.get("branch"), "ci_url": like.get("ci_url"),
                "started_at": like["started_at"], "finished_at": None, "host": None,
                "python": None, "fingerprint": like.get("fingerprint") or "",
                "hardware": like.get("hardware") or {}, "trusted": 1, "trust_reason": None,
                "gate_note": (f"shard {i}/{n} of {suite} was planned with files, but no run "
                              "of it is recorded for this commit"),
            })
    return out


def load_report_input(h: History, runs: list[dict[str, Any]], *, scope: str = "run",
                      since: str | None = None, trend_points: int = 30,
                      generated_at: str | None = None) -> ReportInput:
    """Fetch counts, plans, metrics, verdicts, confirm runs and trends of `runs`."""
    ids = [r["run_id"] for r in runs]
    # Each reported run's whole chain: the runner links a rerun to the attempt before
    # it, so the second rerun is a rerun of the first (chain order: parents first).
    confirms: dict[str, list[dict[str, Any]]] = {}
    root = {rid: rid for rid in ids}
    for r in h.report_reads.confirm_runs_of(ids):
        top = root.get(r["confirm_of"] or "")
        if top is not None:
            root[r["run_id"]] = top
            confirms.setdefault(top, []).append(dict(r))
    confirm_ids = [c["run_id"] for cs in confirms.values() for c in cs]

    counts: dict[str, dict[str, int]] = {}
    seconds: dict[str, float] = {}
    for r in h.report_reads.first_attempt_totals(ids):
        counts.setdefault(r["run_id"], {})[r["outcome"]] = r["n"]
        seconds[r["run_id"]] = seconds.get(r["run_id"], 0.0) + (r["s"] or 0.0)

    failures: dict[str, list[dict[str, Any]]] = {}
    for f in h.report_reads.failed_tests_of(ids):
        failures.setdefault(f["run_id"], []).append(dict(f))

    plans: dict[str, list[dict[str, Any]]] = {}
    for p in h.report_reads.plan_files_of(ids):
        plans.setdefault(p["run_id"], []).append(dict(p))

    metrics: list[dict[str, Any]] = [dict(m) for m in h.report_reads.metric_summaries(ids)]
    verdicts: list[dict[str, Any]] = [dict(v) for v in h.report_reads.verdicts_of(ids + confirm_ids)]

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
                                  shards=max(int(r.get("shard_count") or 1) for r in group_runs)))
    # Machine models per suite, up to the newest reported run (a model new to a suite is
    # named in the headline: gates.report.build.new_model).
    newest: dict[str, str] = {}
    for r in runs:
        newest[r["suite"]] = max(newest.get(r["suite"], ""), r["started_at"] or "")
    models = {suite: h.report_reads.model_runs(suite, until) for suite, until in newest.items()}
    return ReportInput(runs=runs, counts=counts, test_seconds=seconds, failures=failures,
                       plans=plans,
                       metrics=metrics, verdicts=verdicts, confirms=confirms, series=series,
                       scope=scope, since=since, generated_at=generated_at, models=models)


def _series(h: History, suite: str, fp: str, keys: set[str], *, upper: str, lower: str,
            points: int, shards: int) -> dict[tuple[str, str, str], dict[str, list[Any]]]:
    """Columns of each key's last `points` values on complete top-level runs.

    The runs first (newest `points x shards`: a sharded suite spreads its metrics
    over its shards' runs), then their metric medians by run id (an index range, no
    sort of the metrics table); raw tuples, not dicts: a report may read a million.
    """
    run_rows = h.report_reads.trend_runs(suite, fp, upper=upper, lower=lower, limit=points * max(1, shards))
    order = {r[0]: i for i, r in enumerate(reversed(run_rows))}  # oldest first
    info = {r[0]: r for r in run_rows}
    per_key: dict[str, list[tuple[int, float]]] = {k: [] for k in keys}
    # A key recorded by two tests of one run is folded below (their mean, like avg()).
    for key, run_id, median in h.report_reads.first_attempt_medians(list(info)):
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
    from ci_register.registered.catalog import DEFAULT_CATALOG, CatalogError, load_catalog  # noqa: PLC0415

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
    from ci_register.registered.catalog import DEFAULT_CATALOG, load_catalog  # noqa: PLC0415
    from ci_register.registered.collect import collect  # noqa: PLC0415

    base = Path(root)
    return collect(load_catalog(base / DEFAULT_CATALOG), base=base)


def load_health_input(h: History, suite: str, *, window: int = 20,
                      registrations: list[dict[str, Any]] | None = None,
                      until: str | None = None) -> dict[str, Any]:
    """Rows for `gates.report.health.analyse` over the last `window` runs of `suite`."""
    runs = h.health_reads.runs(suite, window=window, until=until)
    ids = [r["run_id"] for r in runs]
    all_runs = runs + h.health_reads.confirm_runs(ids)
    tests = h.health_reads.test_rows_of([r["run_id"] for r in all_runs])
    plan_files = h.health_reads.planned_est_times(ids)
    fingerprint = runs[0]["fingerprint"] if runs else None
    durations = h.planning_reads.file_durations(suite, fingerprint, limit=15) if fingerprint else {}
    ever = h.health_reads.paths_ever_run(suite)
    return {
        "suite": suite, "fingerprint": fingerprint, "runs": all_runs, "tests": tests,
        "plan_files": plan_files, "durations": durations, "registrations": registrations,
        "ever_ran": ever,
    }
