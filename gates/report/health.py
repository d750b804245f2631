"""CI health from the history: stale est_time, flaky and always-skipped tests,
registered files that never ran, the slowest files and what fresh estimates
would save a shard. Pure: `analyse` takes rows (see
`gates.report.query.load_health_input`) and returns a `HealthReport`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ci_register.planning.durations import MIN_RUNS, QUANTILE, WINDOW, choose
from ci_register.planning.est_time import drifted, suggest
from ci_register.planning.partition import lpt
from ci_register.running.redact import mask_secrets

__all__ = [
    "FlakyTest",
    "HealthReport",
    "NeverRan",
    "ShardGain",
    "SkippedTest",
    "SlowFile",
    "StaleEstimate",
    "analyse",
    "quantile",
    "shard_gain",
]

FLAKY_FLIPS = 3  # pass<->fail alternations over the window that call a test flaky
MIN_SKIPPED_RUNS = 3  # a test skipped in every one of at least this many runs
SLOWEST = 10


@dataclass
class StaleEstimate:
    path: str
    line: int | None
    est_time: float
    p90: float
    runs: int
    suggested: int

    @property
    def ratio(self) -> float:
        return self.p90 / self.est_time if self.est_time else math.inf


@dataclass
class FlakyTest:
    nodeid: str
    passes: int
    fails: int
    flips: int
    commits: list[str]  # commits on which it both passed and failed
    why: str


@dataclass
class SkippedTest:
    nodeid: str
    runs: int
    reason: str | None


@dataclass
class NeverRan:
    path: str
    line: int | None
    why: str


@dataclass
class SlowFile:
    path: str
    median: float
    expected: float  # the planner's figure (ci_register.planning.durations.expected): what plan,
    source: str      # matrix and rerun show for this file; "history" or "est_time"
    est_time: float | None
    runs: int


@dataclass
class ShardGain:
    shards: int
    files: int
    makespan_est: float  # slowest shard, measured, when planned by est_time
    makespan_fresh: float  # slowest shard, measured, when planned by measured medians
    per_shard_est: list[float] = field(default_factory=list)
    per_shard_fresh: list[float] = field(default_factory=list)

    @property
    def drop_s(self) -> float:
        return self.makespan_est - self.makespan_fresh

    @property
    def drop_pct(self) -> float:
        return 100.0 * self.drop_s / self.makespan_est if self.makespan_est else 0.0


@dataclass
class HealthReport:
    suite: str
    fingerprint: str | None
    runs: int
    stale: list[StaleEstimate] = field(default_factory=list)
    flaky: list[FlakyTest] = field(default_factory=list)
    always_skipped: list[SkippedTest] = field(default_factory=list)
    never_ran: list[NeverRan] = field(default_factory=list)
    slowest: list[SlowFile] = field(default_factory=list)
    shard_gain: ShardGain | None = None

    @property
    def empty(self) -> bool:
        return not (self.stale or self.flaky or self.always_skipped or self.never_ran
                    or self.slowest)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for item, row in zip(self.stale, out["stale"], strict=True):
            row["ratio"] = item.ratio
        if self.shard_gain is not None:
            out["shard_gain"]["drop_s"] = self.shard_gain.drop_s
            out["shard_gain"]["drop_pct"] = self.shard_gain.drop_pct
        return out


# ------------------------------------------------------------------ helpers


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method) of a non-empty sequence."""
    s = sorted(values)
    if not s:
        raise ValueError("quantile of no values")
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _lpt(items: Sequence[tuple[str, float]], n: int) -> list[list[str]]:
    # ci_register.planning.partition.lpt is the planner; reuse it so "what the planner does"
    # is what we measure.
    return [[p for p, _ in s.items] for s in lpt(list(items), n)]


# ------------------------------------------------------------------ sections


def _stale(est: Mapping[str, tuple[float, int | None]],
           durations: Mapping[str, Sequence[float]]) -> list[StaleEstimate]:
    # The planner's figure (ci_register.planning.durations: p90 of the newest runs, at least
    # MIN_RUNS of them) against the literal, by est-time --check's rule (est_time.drifted).
    figures = choose([p for p, (declared, _) in est.items() if declared], durations,
                     min_runs=MIN_RUNS, window=WINDOW, q=QUANTILE)
    out = []
    for path, fig in figures.items():
        declared, line = est[path]
        if drifted(declared, fig.seconds):
            out.append(StaleEstimate(path, line, declared, fig.seconds, fig.runs,
                                     suggest(fig.seconds)))
    return sorted(out, key=lambda s: (-abs(s.p90 - s.est_time), s.path))


def _flaky(tests: Iterable[Mapping[str, Any]],
           runs: Mapping[str, Mapping[str, Any]]) -> list[FlakyTest]:
    # Outcomes per test in time order (confirm reruns included: a test that fails
    # and then passes on a rerun of the same commit is the textbook flake).
    seq: dict[str, list[tuple[str, int, str, bool]]] = {}
    for t in tests:
        run = runs.get(t["run_id"])
        if run is None or t["outcome"] not in ("passed", "failed", "error"):
            continue
        ok = t["outcome"] == "passed"
        seq.setdefault(t["nodeid"], []).append(
            (str(run.get("started_at") or ""), int(t.get("attempt") or 1),
             str(run.get("commit_sha") or ""), ok))
    out = []
    for nodeid, items in seq.items():
        items.sort()
        oks = [ok for *_, ok in items]
        passes, fails = sum(oks), len(oks) - sum(oks)
        if not passes or not fails:
            continue
        by_commit: dict[str, set[bool]] = {}
        for _, _, commit, ok in items:
            if commit:
                by_commit.setdefault(commit, set()).add(ok)
        both = sorted(c for c, s in by_commit.items() if len(s) == 2)
        flips = sum(1 for a, b in zip(oks, oks[1:], strict=False) if a != b)
        if both:
            why = f"passed and failed on {', '.join(c[:10] for c in both[:3])}"
        elif flips >= FLAKY_FLIPS:
            why = f"alternated {flips} times in {len(oks)} runs"
        else:
            continue
        out.append(FlakyTest(nodeid, passes, fails, flips, both, why))
    return sorted(out, key=lambda f: (-f.fails, -f.flips, f.nodeid))


def _always_skipped(tests: Iterable[Mapping[str, Any]], registered: set[str],
                    first_runs: set[str]) -> list[SkippedTest]:
    outcomes: dict[str, list[Mapping[str, Any]]] = {}
    for t in tests:
        if t["run_id"] in first_runs and int(t.get("attempt") or 1) == 1:
            outcomes.setdefault(t["nodeid"], []).append(t)
    out = []
    for nodeid, rows in outcomes.items():
        path = rows[0].get("path") or nodeid.split("::", 1)[0]
        if registered and path not in registered:
            continue
        if len(rows) >= MIN_SKIPPED_RUNS and all(r["outcome"] == "skipped" for r in rows):
            reasons = [r.get("skip_reason") for r in rows if r.get("skip_reason")]
            # Masked here too: rows written before the store masked them on write.
            out.append(SkippedTest(nodeid, len(rows), mask_secrets(reasons[0]) if reasons else None))
    return sorted(out, key=lambda s: s.nodeid)


def analyse(data: Mapping[str, Any]) -> HealthReport:
    """Health of one suite from `load_health_input`'s rows."""
    suite = data["suite"]
    runs = {r["run_id"]: r for r in data.get("runs") or ()}
    first_runs = {rid for rid, r in runs.items() if not r.get("confirm_of")}
    tests = list(data.get("tests") or ())
    plan_files = list(data.get("plan_files") or ())
    durations: Mapping[str, Sequence[float]] = data.get("durations") or {}
    regs = data.get("registrations")
    report = HealthReport(suite, data.get("fingerprint"), len(first_runs))

    # est_time: registrations are what the next plan will use; plans are the fallback.
    est: dict[str, tuple[float, int | None]] = {}
    newest_plan: dict[str, str] = {}
    for f in plan_files:
        start = str(runs.get(f["run_id"], {}).get("started_at") or "")
        if f.get("est_time") is not None and start >= newest_plan.get(f["path"], ""):
            newest_plan[f["path"]] = start
            est[f["path"]] = (float(f["est_time"]), f.get("line"))
    enabled: list[Mapping[str, Any]] = []
    if regs is not None:
        enabled = [r for r in regs if not r.get("disabled")]
        est = {r["path"]: (float(r["est_time"]), r.get("line")) for r in enabled}
    report.stale = _stale(est, durations)

    report.flaky = _flaky(tests, runs)
    registered = {r["path"] for r in enabled} if regs is not None else {
        f["path"] for f in plan_files}
    report.always_skipped = _always_skipped(tests, registered, first_runs)

    # Never ran: registered (or planned) but no test of the file in any run of the
    # suite; and planned into a run that then recorded no test of it.
    ran_in: dict[str, set[str]] = {}
    for t in tests:
        if t.get("path"):
            ran_in.setdefault(t["path"], set()).add(t["run_id"])
    ever = set(data.get("ever_ran") or ()) | set(ran_in)
    lines = {f["path"]: f.get("line") for f in plan_files}
    lines.update({p: line for p, (_, line) in est.items() if line is not None})
    if regs is not None:
        for r in sorted(enabled, key=lambda r: r["path"]):
            if r["path"] not in ever:
                report.never_ran.append(NeverRan(r["path"], r.get("line"),
                                                 "registered, never ran in this suite's history"))
    silent: dict[str, int] = {}
    for f in plan_files:
        run = runs.get(f["run_id"], {})
        if run.get("status") == "complete" and f["run_id"] not in ran_in.get(f["path"], set()):
            silent[f["path"]] = silent.get(f["path"], 0) + 1
    listed = {n.path for n in report.never_ran}
    for path, n in sorted(silent.items()):
        if path not in listed:
            report.never_ran.append(NeverRan(path, lines.get(path),
                                             f"planned in {n} complete run(s), no test recorded"))

    slow = []
    figures = choose(list(durations), durations, min_runs=MIN_RUNS, window=WINDOW, q=QUANTILE)
    for path, values in durations.items():
        if values:
            declared = est.get(path, (None, None))[0]
            fig = figures.get(path)
            if fig is None and declared is None:
                continue  # neither measured enough nor declared: no figure to show
            slow.append(SlowFile(path, quantile(values, 0.5),
                                 fig.seconds if fig else float(declared or 0.0),
                                 "history" if fig else "est_time", declared, len(values)))
    slow.sort(key=lambda s: (-s.median, s.path))
    report.slowest = slow[:SLOWEST]

    shards = max((int(r.get("shard_count") or 1) for r in runs.values()), default=1)
    report.shard_gain = shard_gain(est, durations, shards)
    return report


def shard_gain(est: Mapping[str, tuple[float, int | None]],
               durations: Mapping[str, Sequence[float]], shards: int) -> ShardGain | None:
    """Slowest shard (in measured seconds) when planned by est_time vs by measured medians."""
    measured = {p: quantile(v, 0.5) for p, v in durations.items() if v and p in est}
    if not measured or shards < 1:
        return None
    # Files never measured keep their est_time in both plans.
    actual = {p: measured.get(p, e) for p, (e, _) in est.items()}
    old = _lpt([(p, e) for p, (e, _) in est.items()], shards)
    new = _lpt(list(actual.items()), shards)
    per_old = [sum(actual[p] for p in s) for s in old]
    per_new = [sum(actual[p] for p in s) for s in new]
    return ShardGain(shards, len(est), max(per_old, default=0.0), max(per_new, default=0.0),
                     per_old, per_new)
