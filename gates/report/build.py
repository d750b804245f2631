"""The report model: what changed, how sure we are, where CI time goes. Pure, no I/O.

`build_report` turns rows read from the history (see `gates.report.query`) into a
`Report` that every renderer (text, Markdown, JSON, HTML) draws from, so all
formats say the same thing in the same order: runs first, then every verdict
with failing ones on top, the commit range where a metric changed, its trend,
and (optionally) the CI health sections of `gates.report.health`.

Verdict vocabulary belongs to the gates engine (`gates.gate`); this module only
classifies it: a `regression` or `threshold-fail` in `enforce` mode fails the
report (exit 1), the same in `warn` mode is a warning, `improvement` and
`insufficient-history` are shown but never fail.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ci_register.running.redact import mask_secrets
from gates.model.verdicts import (
    FAILING,
    attempt_exit,
    chain_outcome,
    fails,
    gate_exit,
    interval_contradicts,
    never_judged,
    session_exit,
    shown_verdict,
)

__all__ = [
    "CHANGE_P",
    "FAILING",
    "Change",
    "FailedTest",
    "Point",
    "Report",
    "ReportInput",
    "RunInfo",
    "Trend",
    "VerdictRow",
    "build_report",
    "classify",
    "describe_hardware",
    "find_change",
    "own_change",
    "report_to_json",
    "series_columns",
]

CHANGE_P = 0.05  # Pettitt p below which a trend's change point is reported
# Display order of verdict classes: what fails the build first, then what needs a look.
_CLASS_ORDER = {"fail": 0, "warn": 1, "improved": 2, "info": 3, "pass": 4}


def classify(verdict: str | None, mode: str | None) -> str:
    """fail | warn | improved | info | pass for a stored verdict and its gate mode.

    fail: a FAILING verdict in enforce mode (or with no mode stored); warn: the same
    in warn/off mode, or ``error`` (the gate could not judge: look at it); improved;
    pass; info: insufficient-history, suspect (a first attempt whose rerun decides; the
    rerun's verdict replaces it), unguarded (the noise model cannot tell a change from
    a machine: ``gates.model.machines``), not-judged and anything newer than this code.
    """
    v = (verdict or "").lower()
    if v in FAILING:
        return "fail" if fails(v, mode) else "warn"
    if v == "error":
        return "warn"
    if v == "improvement":
        return "improved"
    if v == "pass":
        return "pass"
    return "info"


@dataclass
class Point:
    run_id: str
    commit: str | None
    started_at: str
    value: float
    trusted: bool = True


@dataclass
class Change:
    """Where a metric's series moved (Pettitt's change point)."""

    index: int  # first point of the new regime
    p: float
    before: float  # median before
    after: float  # median after
    rel: float | None  # (after - before) / |before|
    last_before: str | None  # commit of the last point before the change
    first_after: str | None  # commit of the first point after
    run_id: str  # run of the first point after

    @property
    def commit_range(self) -> str:
        a = (self.last_before or "?")[:10]
        b = (self.first_after or "?")[:10]
        return f"{a}..{b}"


@dataclass
class Trend:
    """One metric's series, oldest first, stored as columns (a 10,000-metric report
    holds a million points; `points` builds objects only when asked)."""

    suite: str
    fingerprint: str
    key: str
    values: list[float]
    run_ids: list[str]
    commits: list[str | None]
    started_at: list[str]
    trusted: list[bool]
    change: Change | None = None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def points(self) -> list[Point]:
        return [Point(*row) for row in zip(self.run_ids, self.commits, self.started_at,
                                           self.values, self.trusted, strict=True)]

    def columns(self) -> dict[str, list[Any]]:
        return {"run_id": self.run_ids, "commit": self.commits,
                "started_at": self.started_at, "value": self.values,
                "trusted": self.trusted}


@dataclass(frozen=True)
class FailedTest:
    """A test of a run's first attempt that failed or errored: what every surface names
    (2 of 3 launch variants failing read "2 test(s) failed" and no more)."""

    nodeid: str
    outcome: str  # failed or error
    error: str  # the first line of its stored error, secrets masked ("" when none)

    @property
    def name(self) -> str:
        """The test's name within its file: the parametrized variant's id included."""
        return self.nodeid.split("::", 1)[-1]


# Of an error, the line every surface shows (the whole text stays in the history).
_ERROR_CHARS = 300


def _failed_test(row: Mapping[str, Any]) -> FailedTest:
    lines = [ln.rstrip() for ln in str(row.get("error") or "").splitlines() if ln.strip()]
    # pytest's long text ends with the exception ("E   VariantsFailed: 2 of 3 variants
    # failed: ..."): the first line of its last block of "E" lines, else the text's first.
    marked = [i for i, ln in enumerate(lines) if ln.startswith("E ")]
    first = marked[-1] if marked else None
    while first is not None and first - 1 in marked:
        first -= 1
    line = lines[first][1:].strip() if first is not None else lines[0].strip() if lines else ""
    line = mask_secrets(line)
    return FailedTest(str(row.get("nodeid") or "?"), str(row.get("outcome") or "failed"),
                      line if len(line) <= _ERROR_CHARS else line[:_ERROR_CHARS - 3] + "...")


@dataclass
class RunInfo:
    run_id: str
    suite: str
    shard: str  # "1/2"
    status: str
    commit: str | None
    branch: str | None
    started_at: str
    finished_at: str | None
    host: str | None
    fingerprint: str
    hardware: str
    trusted: bool
    trust_reason: str | None
    ci_url: str | None
    counts: dict[str, int]  # first attempt outcomes
    wall_s: float | None  # finished - started
    test_s: float  # sum of test durations (first attempt)
    est_s: float | None  # summed est_time of the planned files
    expected_s: float | None  # summed planned expectation (history or est_time)
    planned_files: int
    confirm_runs: list[str] = field(default_factory=list)  # the chain's reruns, in order
    confirm_statuses: list[str] = field(default_factory=list)  # their run statuses, same order
    gate_note: str | None = None  # why the gate did not judge it (gate-error, gate-unfinished)
    # Attempts of its chain recorded with the gate on whose gate saved no result.
    never_judged: list[str] = field(default_factory=list)
    exit_code: int = 0  # the session's (``verdicts.session_exit`` of the whole chain)
    failed_tests: list[FailedTest] = field(default_factory=list)  # first attempt's
    # A machine model new to its suite (``new_model``): what the headline says of it
    new_model: str = ""

    @property
    def est_delta(self) -> float | None:
        """Wall time relative to the summed est_time (+0.1 = 10% slower than declared)."""
        if self.wall_s is None or not self.est_s:
            return None
        return self.wall_s / self.est_s - 1.0


@dataclass
class VerdictRow:
    run_id: str
    suite: str
    fingerprint: str
    key: str
    nodeid: str | None
    verdict: str
    cls: str  # classify(verdict, mode)
    mode: str | None
    baseline: float | None
    new: float | None
    unit: str | None
    better: str | None
    rel_change: float | None
    ci_low: float | None
    ci_high: float | None
    statistic: float | None
    p_value: float | None
    q_value: float | None
    floor: float | None
    attempt: int
    confirmed_by: str | None = None  # confirm run whose verdict replaced the first one
    method: str | None = None
    trend: Trend | None = None
    change_point: dict[str, Any] | None = None  # the gate's localisation, if it stored one
    owner: str | None = None  # gates.report.owners.assign: register_ci_gate(owner=), else CODEOWNERS
    accept_hint: str | None = None  # the `gate-report accept` command for a change that held
    bisect: str | None = None  # the newest stored bisection of the key (gate-report bisect)
    ci_conf: float | None = None  # the interval's confidence: the level that decided (None:
    # a verdict stored before intervals carried it, a 95% t-interval)
    # The level the deciding test's p (BH q at a first attempt) was held to (None: not a
    # change, or stored before rows carried it). p_value, q_value, rel_change, ci_* and
    # method are that test's: one statement a row (``render_text.change_parts``)
    level: float | None = None

    @property
    def path(self) -> str | None:
        return self.nodeid.split("::", 1)[0] if self.nodeid else None

    @property
    def test(self) -> str:
        """The test that decided, by name: the method after its family or stage
        ("robust-t/quantile-7" and "rerun/quantile-7" -> "quantile-7")."""
        return (self.method or "").rpartition("/")[2]

    @property
    def own_change(self) -> float | None:
        """The new value against the baseline shown beside it."""
        return own_change(self.new, self.baseline)

    @property
    def change(self) -> Change | None:
        return self.trend.change if self.trend else None


def own_change(new: float | None, baseline: float | None) -> float | None:
    """A row's own change: its new value against the baseline shown beside it."""
    return None if new is None or not baseline else (new - baseline) / abs(baseline)


@dataclass
class ReportInput:
    """Rows from the history, already selected: everything `build_report` needs."""

    runs: list[Mapping[str, Any]]  # `runs` rows (hardware decoded), the reported runs
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # run -> outcome -> n
    test_seconds: Mapping[str, float] = field(default_factory=dict)  # run -> summed durations
    # run -> its first attempt's failed or errored tests (nodeid, outcome, error)
    failures: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    plans: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)  # run -> files
    metrics: Sequence[Mapping[str, Any]] = ()  # metric rows of the runs (no samples needed)
    verdicts: Sequence[Mapping[str, Any]] = ()  # verdict rows of the runs and their confirms
    confirms: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    # (suite, fingerprint, key) -> columns run_id, commit, started_at, trusted, value;
    # oldest first (see `series_columns`)
    series: Mapping[tuple[str, str, str], Mapping[str, Sequence[Any]]] = field(
        default_factory=dict)
    scope: str = "run"  # "run" or "range"
    since: str | None = None
    generated_at: str | None = None
    # suite -> {fingerprint: (its complete trusted first attempts up to the newest
    # reported run, their start times where few)}: `History.report_reads.model_runs`
    models: Mapping[str, Mapping[str, tuple[int, Sequence[str]]]] = field(default_factory=dict)


@dataclass
class Report:
    title: str
    scope: str
    runs: list[RunInfo]
    verdicts: list[VerdictRow]  # failing first
    summary: dict[str, int]  # verdict class -> count (of the listed rows)
    since: str | None = None
    generated_at: str | None = None
    omitted: int = 0  # pass rows left out of a range report (older duplicates)
    health: list[Any] = field(default_factory=list)  # gates.report.health.HealthReport per suite

    @property
    def failing(self) -> list[VerdictRow]:
        return [v for v in self.verdicts if v.cls == "fail"]

    @property
    def changes(self) -> list[VerdictRow]:
        return [v for v in self.verdicts if v.change is not None]

    @property
    def exit_code(self) -> int:
        """The worst session exit code of the reported runs (each run's chain of confirm
        reruns read as the runner read it: ``verdicts.session_exit``), so every surface
        built from this report agrees with the sessions it reports."""
        return max((r.exit_code for r in self.runs), default=0)


# ------------------------------------------------------------------ helpers


def describe_hardware(hw: Mapping[str, Any] | None, fingerprint: str | None = None) -> str:
    """One line: "8x NVIDIA H200 (sm 9.0, 141 GiB), driver 570.86, CUDA 12.8, torch 2.8"."""
    hw = hw or {}
    parts: list[str] = []
    gpus = hw.get("gpus") or []
    if gpus:
        names: dict[str, int] = {}
        for g in gpus:
            names[str(g.get("name") or "GPU")] = names.get(str(g.get("name") or "GPU"), 0) + 1
        first = gpus[0]
        extra = []
        if first.get("capability"):
            extra.append(f"sm {first['capability']}")
        if first.get("memory_mib"):
            extra.append(f"{round(first['memory_mib'] / 1024)} GiB")
        gpu_text = " + ".join(f"{n}x {name}" for name, n in names.items())
        parts.append(gpu_text + (f" ({', '.join(extra)})" if extra else ""))
    else:
        parts.append("CPU" + (f" {hw['machine']}" if hw.get("machine") else ""))
    for label, key in (("driver", "driver"), ("CUDA", "cuda"), ("HIP", "hip"),
                       ("torch", "torch"), ("flashinfer", "flashinfer"), ("Python", "python")):
        if hw.get(key):
            parts.append(f"{label} {hw[key]}")
    if fingerprint and not gpus and fingerprint != "cpu":
        parts.append(f"[{fingerprint}]")
    return ", ".join(parts)


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        a = dt.datetime.fromisoformat(start)
        b = dt.datetime.fromisoformat(end)
    except ValueError:
        return None
    return max(0.0, (b - a).total_seconds())


def _confidence(x: Any) -> float | None:
    """A stored interval confidence, when it is one (a hostile shard's is not shown)."""
    f = _finite(x)
    return f if f is not None and 0.0 < f < 1.0 else None


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def find_change(values: Sequence[float], commits: Sequence[str | None] | None = None,
                run_ids: Sequence[str] | None = None,
                max_p: float = CHANGE_P) -> Change | None:
    """The most likely single change point of a series, or None if not significant.

    Pettitt's rank test (`gates.model.changepoint.pettitt`, the one the gate localises with).
    """
    if len(values) < 4:  # pettitt's own minimum, decided before numpy loads (a short trend)
        return None
    from gates.model.changepoint import pettitt  # noqa: PLC0415 - numpy only when a trend is drawn

    cp = pettitt(values)
    if cp is None or cp.p >= max_p:
        return None
    T = len(values)
    idx, p, before, after = cp.index, cp.p, cp.before, cp.after
    rel = (after - before) / abs(before) if before else None
    commits = commits if commits is not None else [None] * T
    run = run_ids[idx] if run_ids is not None else str(idx)
    return Change(idx, p, before, after, rel, commits[idx - 1], commits[idx], run)


def series_columns(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Row dicts (run_id, commit, started_at, trusted, value) -> the columnar series
    `ReportInput.series` holds."""
    cols: dict[str, list[Any]] = {"run_id": [], "commit": [], "started_at": [],
                                  "trusted": [], "value": []}
    for r in rows:
        for name, col in cols.items():
            col.append(r.get(name))
    return cols


def _trend(suite: str, fingerprint: str, key: str, cols: Mapping[str, Sequence[Any]],
           want_change: bool) -> Trend:
    # The columns are taken as they come (the loader builds them; a million points
    # must not be copied one by one); only non-finite values force a filtered copy.
    values = list(cols["value"])
    run_ids, commits = list(cols["run_id"]), list(cols["commit"])
    started, trusted = list(cols["started_at"]), list(cols["trusted"])
    if not all(map(math.isfinite, values)):
        keep = [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]
        values, run_ids, commits, started, trusted = (
            [col[i] for i in keep] for col in (values, run_ids, commits, started, trusted))
    trend = Trend(suite, fingerprint, key, values, run_ids, commits, started, trusted)
    if want_change:
        trend.change = find_change(values, commits, run_ids)
    return trend


def _row_change(trend: Trend, row: VerdictRow) -> Change | None:
    """Where the series moved the way ``row`` says, as that row's run saw it.

    Only the runs up to the row's own run count (in a range report the trend runs
    on past it, and a later step is not what this verdict is about), the step must
    lean the verdict's way, and it begins at the first run of its commit: a split
    between two runs of one commit names no change.
    """
    end = trend.run_ids.index(row.run_id) + 1 if row.run_id in trend.run_ids else len(trend)
    values, commits, run_ids = trend.values[:end], trend.commits[:end], trend.run_ids[:end]
    change = find_change(values, commits, run_ids)
    if change is None:
        return None
    if row.rel_change and change.rel and (row.rel_change > 0) != (change.rel > 0):
        return None
    idx = _commit_start(commits, change.index)
    if idx == 0:
        return None
    if idx == change.index:
        return change
    before, after = _median(values[:idx]), _median(values[idx:])
    return Change(idx, change.p, before, after, (after - before) / abs(before) if before else None,
                  commits[idx - 1], commits[idx], run_ids[idx])


def _commit_start(commits: Sequence[str | None], idx: int) -> int:
    """The first index of the run of equal commits ``idx`` lies in."""
    while idx > 0 and commits[idx] is not None and commits[idx - 1] == commits[idx]:
        idx -= 1
    return idx


def _with_change(trend: Trend, change: Change) -> Trend:
    return Trend(trend.suite, trend.fingerprint, trend.key, trend.values, trend.run_ids,
                 trend.commits, trend.started_at, trend.trusted, change)


def _with_gate_change(trend: Trend, row: VerdictRow) -> Trend:
    """A copy of `trend` with the change the gate localised (detail.change_point) in
    the verdict ``row``; ``runs_ago = 0`` is that run itself (the gate judged it under
    the id of its first attempt or of a confirm rerun): its medians either side are then
    the row's own baseline and new value (the runs before it in the trend may hold
    runs the baseline left out, a change that went unseen until this run)."""
    cp, run_id = row.change_point, row.run_id
    if not cp:
        return trend
    at = run_id if cp.get("runs_ago") == 0 else cp.get("run_id")
    if at not in trend.run_ids:
        return trend
    idx = _commit_start(trend.commits, trend.run_ids.index(at))
    end = trend.run_ids.index(run_id) + 1 if run_id in trend.run_ids else len(trend)
    if idx == 0 or idx >= end:
        return trend
    before = _finite(cp.get("before"))
    if before is None:
        before = _median(trend.values[:idx])
    after = _finite(cp.get("after"))
    if after is None:
        after = _median(trend.values[idx:end])
    p = _finite(cp.get("p"))
    if cp.get("runs_ago") == 0:
        # The run itself is the change: the change-point test found no split before it,
        # and its p says only that (1 read as "no change" beside a confirmed FAIL).
        p = None
        if row.baseline is not None and row.new is not None:
            before, after = row.baseline, row.new
    return _with_change(trend, Change(idx, p if p is not None else math.nan, before, after,
                                      (after - before) / abs(before) if before else None,
                                      trend.commits[idx - 1], trend.commits[idx],
                                      trend.run_ids[idx]))


def _run_info(row: Mapping[str, Any], data: ReportInput) -> RunInfo:
    run_id = str(row["run_id"])
    plan = data.plans.get(run_id) or ()
    est = [_finite(f.get("est_time")) for f in plan]
    exp = [_finite(f.get("expected")) for f in plan]
    hw = row.get("hardware")
    return RunInfo(
        run_id=run_id,
        suite=str(row.get("suite")),
        shard=f"{row.get('shard_index') or 1}/{row.get('shard_count') or 1}",
        status=str(row.get("status")),
        commit=row.get("commit_sha"),
        branch=row.get("branch"),
        started_at=str(row.get("started_at") or ""),
        finished_at=row.get("finished_at"),
        host=row.get("host"),
        fingerprint=str(row.get("fingerprint") or ""),
        hardware=describe_hardware(hw if isinstance(hw, Mapping) else {},
                                   row.get("fingerprint")),
        trusted=bool(row.get("trusted", 1)),
        trust_reason=row.get("trust_reason"),
        # Masked here too: a run stored by an older version, or merged from one, may hold
        # a credential, and this value reaches PR comments and webhooks.
        ci_url=mask_secrets(str(row["ci_url"])) if row.get("ci_url") else None,
        counts=dict(data.counts.get(run_id) or {}),
        wall_s=_seconds_between(row.get("started_at"), row.get("finished_at")),
        test_s=float(data.test_seconds.get(run_id) or 0.0),
        est_s=sum(e for e in est if e is not None) if plan else None,
        expected_s=sum(e for e in exp if e is not None) if plan else None,
        planned_files=len(plan),
        confirm_runs=[str(c["run_id"]) for c in data.confirms.get(run_id) or ()],
        confirm_statuses=[str(c.get("status") or "complete")
                          for c in data.confirms.get(run_id) or ()],
        gate_note=mask_secrets(str(row["gate_note"])) if row.get("gate_note") else None,
        failed_tests=[_failed_test(f) for f in data.failures.get(run_id) or ()],
        new_model=new_model(row, data.models.get(str(row.get("suite"))) or {}),
    )


# Runs a machine model needs in a suite before the gate judges it (``GateParams.min_history``;
# each run's baseline holds its own fingerprint only), and this many more are still named
NEW_MODEL_RUNS = 5


def new_model(row: Mapping[str, Any], models: Mapping[str, tuple[int, Sequence[str]]]) -> str:
    """What a run on a machine model new to its suite says in the headline: the model
    (fingerprint), the run's place among its runs so far, and the runs of the suite's
    other models its baselines set aside (a baseline holds one fingerprint); "" where the
    model has had more than ``2 * NEW_MODEL_RUNS`` runs, or is the suite's only one."""
    fp = str(row.get("fingerprint") or "")
    n, starts = models.get(fp, (0, ()))
    started = str(row.get("started_at") or "")
    k = sum(1 for st in starts if st <= started) if starts else n
    others = {f: m for f, (m, _) in models.items() if f != fp and m}
    if not fp or not others or not 0 < k <= 2 * NEW_MODEL_RUNS:
        return ""
    aside = ", ".join(f"{m} on {f}" for f, m in sorted(others.items(), key=lambda t: -t[1])[:3])
    more = "" if len(others) <= 3 else f" and {len(others) - 3} more model(s)"
    judged = (f"the gate judges it from its run {NEW_MODEL_RUNS + 1}" if k <= NEW_MODEL_RUNS
              else "judged against its own runs only")
    return (f"new machine model {fp} in {row.get('suite')}: run {k} of it ({judged}); "
            f"runs set aside: {aside}{more}")


def _sort_key(v: VerdictRow) -> tuple:
    # Failing first; within a class the biggest relative change first, then by key.
    mag = abs(v.rel_change) if v.rel_change is not None else -1.0
    return (_CLASS_ORDER.get(v.cls, 3), -mag, v.suite, v.key, v.nodeid or "", v.run_id)


# --------------------------------------------------------------------- build


def build_report(data: ReportInput, *, title: str | None = None,
                 all_rows: bool = False) -> Report:
    """Assemble the report model. Deterministic for equal input.

    One row per metric of each reported run: its verdict when the gate judged it
    (a confirm run's verdict replaces the first one's), else ``not-judged``.
    A range report lists every non-passing row but only the newest passing row
    of each metric (``all_rows`` lists them all); the rest are counted in
    `Report.omitted`.
    """
    runs = [_run_info(r, data) for r in data.runs]
    rows = _verdict_rows(data, runs)
    omitted = 0
    if data.scope == "range" and not all_rows:
        kept = _newest_passes_only(rows, {str(r["run_id"]): r for r in data.runs})
        omitted = len(rows) - len(kept)
        rows = kept
    _attach_trends(rows, data)
    rows.sort(key=_sort_key)
    summary: dict[str, int] = {}
    for r in rows:
        summary[r.cls] = summary.get(r.cls, 0) + 1
    return Report(title=title if title is not None else _title(data, runs), scope=data.scope,
                  runs=runs, verdicts=rows, summary=summary, since=data.since,
                  generated_at=data.generated_at, omitted=omitted)


def _verdict_rows(data: ReportInput, runs: Sequence[RunInfo]) -> list[VerdictRow]:
    """One row per metric of each run: its final verdict (a confirm run's replaces the
    first one's), or ``not-judged`` for a metric the gate did not judge."""
    by_id = {str(r["run_id"]): r
             for r in [*data.runs, *(c for cs in data.confirms.values() for c in cs)]}
    verdicts_by_run: dict[str, list[Mapping[str, Any]]] = {}
    for v in data.verdicts:
        verdicts_by_run.setdefault(str(v["run_id"]), []).append(v)
    metric_by_run: dict[str, dict[tuple[str, str], Mapping[str, Any]]] = {}
    for m in data.metrics:
        slot = metric_by_run.setdefault(str(m["run_id"]), {})
        k = (str(m["key"]), str(m.get("nodeid") or ""))
        if k not in slot or int(m.get("attempt") or 1) >= int(slot[k].get("attempt") or 1):
            slot[k] = m
    rows: list[VerdictRow] = []
    for run in runs:
        chain = [run.run_id, *run.confirm_runs]
        outcome = chain_outcome([verdicts_by_run.get(rid, ()) for rid in chain])
        metrics = metric_by_run.get(run.run_id, {})
        for k in dict.fromkeys([*outcome, *metrics]):
            v, i = outcome.get(k, ({}, 0))
            rows.append(_verdict_row(run, k, v, metrics.get(k) or {}, chain[i] if i else None))
        failed_tests = run.counts.get("failed", 0) + run.counts.get("error", 0)
        run.never_judged = [rid for rid in chain if never_judged(by_id.get(rid) or {})]
        run.exit_code = session_exit(gate_exit([v for v, _ in outcome.values()]),
                                     [int(failed_tests > 0)]
                                     + [attempt_exit(by_id.get(rid) or {}) for rid in chain])
    return rows


def _verdict_row(run: RunInfo, k: tuple[str, str], v: Mapping[str, Any],
                 m: Mapping[str, Any], confirmed_by: str | None) -> VerdictRow:
    """The row of metric ``k`` (key, nodeid) of ``run``: verdict row ``v``, metric row ``m``."""
    detail = v.get("detail") if isinstance(v.get("detail"), Mapping) else {}
    verdict = shown_verdict(v) or "not-judged"
    mode = v.get("mode")
    new = _finite(v.get("new"))
    # A stored interval that does not agree with its verdict (written before the gate
    # showed only the deciding test's) is not shown: it did not decide.
    contradicts = interval_contradicts(verdict, m.get("better") or (detail or {}).get("better"),
                                       _finite(v.get("ci_low")), _finite(v.get("ci_high")))
    p, q = _finite(v.get("p_value")), _finite(v.get("q_value"))
    if verdict == "improvement" and p is not None and p >= 0.5:
        # Stored before an improvement kept its own p: the bad side's (p=1 q=1 beside an
        # improvement), no evidence of it. Not shown; its interval is the evidence.
        p = q = None
    return VerdictRow(
        run_id=run.run_id, suite=run.suite, fingerprint=run.fingerprint,
        key=k[0], nodeid=k[1] or None, verdict=verdict, cls=classify(verdict, mode),
        mode=mode, baseline=_finite(v.get("baseline")),
        new=new if new is not None else _finite(m.get("median")),
        unit=m.get("unit") or (detail or {}).get("unit"),
        better=m.get("better") or (detail or {}).get("better"),
        rel_change=_finite(v.get("rel_change")),
        ci_low=None if contradicts else _finite(v.get("ci_low")),
        ci_high=None if contradicts else _finite(v.get("ci_high")),
        statistic=_finite(v.get("statistic")),
        p_value=p, q_value=q,
        floor=_finite(v.get("floor")), attempt=int(v.get("attempt") or 1),
        confirmed_by=confirmed_by,
        method=(detail or {}).get("method") or (detail or {}).get("statistic"),
        ci_conf=None if contradicts else _confidence(
            v["ci_conf"] if v.get("ci_conf") is not None
            else (detail or {}).get("ci_conf")),  # before m007: in detail
        change_point=(detail or {}).get("change_point")
        if isinstance((detail or {}).get("change_point"), Mapping) else None,
        level=_confidence((detail or {}).get("level")),  # a level is in (0, 1) too
    )


def _newest_passes_only(rows: list[VerdictRow],
                        run_rows: Mapping[str, Mapping[str, Any]]) -> list[VerdictRow]:
    """Every non-passing row, and only the newest passing row of each metric."""
    newest: dict[tuple[str, str, str, str], VerdictRow] = {}
    for r in rows:
        ident = (r.suite, r.fingerprint, r.key, r.nodeid or "")
        cur = newest.get(ident)
        if cur is None or run_rows[r.run_id].get("started_at", "") >= \
                run_rows[cur.run_id].get("started_at", ""):
            newest[ident] = r
    keep_newest = {id(r) for r in newest.values()}
    return [r for r in rows if r.cls not in ("pass", "info") or id(r) in keep_newest]


def _attach_trends(rows: list[VerdictRow], data: ReportInput) -> None:
    """One trend per (suite, fingerprint, key); the change point only where it matters
    to a reader (not a plain pass), which keeps 10,000-metric reports fast."""
    trends: dict[tuple[str, str, str], Trend] = {}
    for r in rows:
        ident = (r.suite, r.fingerprint, r.key)
        series = data.series.get(ident)
        if series is None:
            continue
        t = trends.get(ident)
        if t is None:
            t = trends[ident] = _trend(*ident, series, False)
        if r.cls != "pass":
            change = _row_change(t, r)
            # None: no split the trend alone can prove (often: only the newest run
            # moved); the gate's own localisation, when it stored one, says where.
            t = (_with_change(t, change) if change
                 else _with_gate_change(t, r))
        r.trend = t


def _title(data: ReportInput, runs: Sequence[RunInfo]) -> str:
    suites = sorted({r.suite for r in runs})
    if data.scope == "run" and runs:
        commit = runs[0].commit[:10] if runs[0].commit else "no commit"  # a repository without one
        return f"{', '.join(suites)} @ {commit}"
    since = f" since {data.since[:16].replace('T', ' ')} UTC" if data.since else ""
    return f"{', '.join(suites) or 'no runs'}{since}"


# ---------------------------------------------------------------------- JSON


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


_VERDICT_FIELDS = ("run_id", "suite", "fingerprint", "key", "nodeid", "verdict", "cls", "mode",
                   "baseline", "new", "unit", "better", "rel_change", "ci_low", "ci_high",
                   "statistic", "p_value", "q_value", "floor", "attempt", "confirmed_by",
                   "method", "change_point", "owner", "accept_hint", "bisect", "ci_conf",
                   "level")


def report_to_json(report: Report) -> dict[str, Any]:
    """A JSON-ready dict (NaN/inf -> null).

    Trends are listed once each, as two columns: ``run`` (indexes into
    ``trend_runs``, which holds each run's id, commit, start and trust once) and
    ``value``; rows refer to their trend by "suite|fingerprint|key".
    """
    trends: dict[str, Any] = {}
    run_index: dict[str, int] = {}
    trend_runs: list[dict[str, Any]] = []
    seen: dict[tuple[str, ...], list[int]] = {}
    verdicts = []
    for v in report.verdicts:
        d = {name: getattr(v, name) for name in _VERDICT_FIELDS}
        d["path"] = v.path
        d["test"], d["own_change"] = v.test, v.own_change
        d["trend"] = None
        d["change"] = None
        t = v.trend
        if t is not None:
            tid = f"{t.suite}|{t.fingerprint}|{t.key}"
            d["trend"] = tid
            if v.change is not None:
                d["change"] = _clean(dict(asdict(v.change),
                                          commit_range=v.change.commit_range))
            if tid not in trends:
                seq = tuple(t.run_ids)  # metrics of one suite mostly share their runs
                idx = seen.get(seq)
                if idx is None:
                    idx = []
                    for rid, commit, started, trusted in zip(
                            t.run_ids, t.commits, t.started_at, t.trusted, strict=True):
                        i = run_index.get(rid)
                        if i is None:
                            i = run_index[rid] = len(trend_runs)
                            trend_runs.append({"run_id": rid, "commit": commit,
                                               "started_at": started,
                                               "trusted": bool(trusted)})
                        idx.append(i)
                    seen[seq] = idx
                trends[tid] = {"suite": t.suite, "fingerprint": t.fingerprint, "key": t.key,
                               "run": idx, "value": t.values}
        verdicts.append(d)
    runs = []
    for r in report.runs:
        d = asdict(r)
        d["est_delta"] = r.est_delta
        runs.append(d)
    out = _clean({
        "title": report.title, "scope": report.scope, "since": report.since,
        "generated_at": report.generated_at, "exit_code": report.exit_code,
        "summary": report.summary, "omitted": report.omitted, "runs": runs,
        "health": [h.to_json() if hasattr(h, "to_json") else asdict(h) for h in report.health],
    })
    # Flat rows, cleaned in place; trend values are finite already (`_trend` drops
    # the rest), so the million-value columns skip `_clean`.
    for d in verdicts:
        for name, value in d.items():
            if isinstance(value, float) and not math.isfinite(value):
                d[name] = None
    out["verdicts"] = verdicts
    out["trend_runs"] = trend_runs
    out["trends"] = trends
    return out
