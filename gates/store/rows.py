"""Typed rows the store's reads return.

NamedTuples for small fixed rows (numpy columns for the one read that returns
tens of thousands, `BaselineRows`); TypedDicts where
callers treat a row as a record with many columns (a `runs` row in a report),
so a row stays a dict at run time and its keys are still named.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple, TypedDict

__all__ = [
    "MAX_SHARDS",
    "planned_shards",
    "BaselineFar",
    "BaselineNear",
    "BaselineRows",
    "BaselineRun",
    "ConfirmLink",
    "HealthRunRow",
    "KeyVerdict",
    "MetricMedian",
    "MetricSummaryRow",
    "OutcomeTotal",
    "PlanFileRow",
    "RunRow",
    "TestRow",
    "TrendRun",
    "TrendValue",
    "VerdictRow",
]


class BaselineRun(NamedTuple):
    """A complete, trusted run of the judged run's suite and hardware (newest first)."""

    num: int  # runs.num: what `BaselineRows.run_nums` refer to
    run_id: str
    started_at: str
    confirm_of: str | None
    hardware: str | None  # JSON text; read only where the run's rows were read and may serve
    commit: str | None = None  # commit_sha; read where hardware is


# One metric row's stored median (``metrics.median``, the median of its samples):
# (id, run_id, key, median); a transient's rerun rows that stand in for its first attempt.
MetricMedian = tuple[int, str, str, float | None]


class BaselineRows(NamedTuple):
    """Metric rows of the keys asked for, as columns (one entry per row, in no order):
    a gate's ~50,000 baseline rows read as integers and floats, no per-row tuple kept."""

    ids: Any  # np.ndarray[int64]: metric row ids
    run_nums: Any  # np.ndarray[int64]: the row's run (``BaselineRun.num``)
    keys: Any  # np.ndarray[intp]: position of the row's key in the key names asked for
    medians: Any  # np.ndarray[float64]: NaN where none is stored
    units: list[str]


class BaselineNear(NamedTuple):
    """A judged run's baselines in one read (``History.baseline_near``)."""

    runs: list[BaselineRun]  # the candidate runs from ``edge`` on (the window, not the history)
    edge: str  # ``rows`` hold every row of runs started at or after it ('': of every run)
    rows: BaselineRows
    samples: dict[int, Any]  # {row id: samples} of the newest runs' rows (np.ndarray)
    transients: dict[tuple[str, str], str]  # {(first attempt, key): rerun standing in}
    standins: list[MetricMedian]  # the rows of those reruns (samples in ``samples``)


class BaselineFar(NamedTuple):
    """What a first read left out (``History.baseline_far``)."""

    runs: list[BaselineRun]  # the runs of ``rows`` (`BaselineNear.runs` holds the newer)
    rows: BaselineRows  # older rows of the keys asked for, with their samples
    samples: dict[int, Any]  # {row id: samples}
    hardware: dict[int, str | None]  # {runs.num: hardware} of the runs of ``rows``
    commits: dict[int, str | None]  # {runs.num: commit_sha} of those runs


class ConfirmLink(NamedTuple):
    """A complete confirm rerun and the run it re-checks."""

    run_id: str
    confirm_of: str


class FailedChain(NamedTuple):
    """A confirm chain whose last word on a key is a failure (``BaselineReads.failed_chains``)."""

    root: str  # its first attempt's run id
    key: str
    started_at: str  # the first attempt's
    at: str  # when the failing verdict was saved
    verdict: str  # regression or threshold-fail
    baseline: float | None  # the failing row's baseline centre
    values: tuple[float, ...]  # every attempt's value of the key in the chain, first first
    open_of: str | None = None  # a still-red run's: the first attempt of the regression it kept


class KeyVerdict(NamedTuple):
    """One run's saved verdict on one key (``detail`` as stored JSON text)."""

    run_id: str
    verdict: str
    detail: str | None


class TrendRun(NamedTuple):
    """A complete top-level run of a trend chart."""

    run_id: str
    commit_sha: str | None
    started_at: str
    trusted: int


class TrendValue(NamedTuple):
    """A first-attempt metric median of a trend run."""

    key: str
    run_id: str
    median: float | None


class RunRow(TypedDict, total=False):
    """A ``runs`` row (``hardware`` decoded from JSON)."""

    run_id: str
    suite: str
    shard_index: int | None
    shard_count: int | None
    status: str
    exit_status: int | None
    confirm_of: str | None
    commit_sha: str | None
    branch: str | None
    ci_url: str | None
    started_at: str
    finished_at: str | None
    host: str | None
    python: str | None
    fingerprint: str | None
    hardware: dict[str, Any]
    trusted: int
    trust_reason: str | None
    trust_changed_at: str | None
    gate_note: str | None  # m009: why the gate did not judge it
    gate_mode: str | None  # m010: the session's --gate; None: unknown
    gated_at: str | None  # m010: when its gate saved its verdicts
    planned_shards: str | None  # m011: JSON list of the shards its plan gave files


class HealthRunRow(TypedDict):
    """The ``runs`` columns CI health reads."""

    run_id: str
    suite: str
    status: str
    commit_sha: str | None
    started_at: str
    confirm_of: str | None
    shard_index: int | None
    shard_count: int | None
    fingerprint: str | None
    trusted: int


class OutcomeTotal(TypedDict):
    """Tests of one outcome in a run's first attempt: how many, and their seconds."""

    run_id: str
    outcome: str
    n: int
    s: float | None


class PlanFileRow(TypedDict, total=False):
    """A ``plan_files`` row: a file the runner planned, with its est_time / expected s."""

    id: int
    run_id: str
    path: str
    line: int | None
    est_time: float | None
    expected: float | None
    marker: str | None
    labels: str | None


class MetricSummaryRow(TypedDict):
    """A metric row without its samples (what a report shows)."""

    run_id: str
    attempt: int
    nodeid: str
    key: str
    unit: str | None
    better: str | None
    n: int | None
    count: int | None
    median: float | None


class FailedTestRow(TypedDict):
    """A first-attempt test that failed or errored, with its stored error text."""

    run_id: str
    nodeid: str
    outcome: str
    error: str | None


class TestRow(TypedDict):
    """A ``tests`` row as CI health reads it."""

    run_id: str
    attempt: int
    nodeid: str
    path: str | None
    outcome: str
    duration: float | None
    skip_reason: str | None


class VerdictRow(TypedDict, total=False):
    """A ``verdicts`` row (``detail`` decoded from JSON); columns: ``gates.store.schema``."""

    id: int
    run_id: str
    attempt: int
    key: str
    nodeid: str | None
    verdict: str
    detail: Any


MAX_SHARDS = 1024  # shards of one suite a plan may name (a bound on a row's list)


def planned_shards(value: object) -> list[int] | None:
    """``runs.planned_shards`` decoded: the shard numbers (1..MAX_SHARDS) the run's plan
    gave files, or None where the value is absent or not such a JSON list."""
    if not isinstance(value, str) or len(value) > 8 * MAX_SHARDS:
        return None
    try:
        got = json.loads(value)
    except ValueError:
        return None
    if not isinstance(got, list) or len(got) > MAX_SHARDS or not all(
            isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= MAX_SHARDS
            for i in got):
        return None
    return got


def decode_run(row: dict[str, Any]) -> dict[str, Any]:
    """A runs row with ``hardware`` decoded; a text no writer of ours makes (not JSON, or
    nested past the decoder's depth: RecursionError) is a ValueError naming the run."""
    try:
        row["hardware"] = json.loads(row["hardware"]) if row.get("hardware") else {}
    except (ValueError, RecursionError) as e:
        why = ("JSON nested past the decoder's depth" if isinstance(e, RecursionError)
               else f"not JSON ({e})")
        raise ValueError(f"run {row.get('run_id')}: its runs.hardware is {why}") from None
    return row
