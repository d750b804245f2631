"""Runs of samples reduced to the run summaries ``gates.judge`` reads.

``judge`` judges a new run's samples against past runs' samples; ``summarize``
is its reduction (each run to its median, plus the new run's extra within-run
variance). Pure numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gates.judge import DEFAULTS, GateParams, Judgement, judge_summaries
from gates.robust import HALF_PI, MAD_K, median, row_medians, run_summary

__all__ = ["WITHIN_RUNS", "Summarized", "judge", "summarize"]


def judge(
    history: Sequence[Sequence[float] | float | np.ndarray],
    new: Sequence[float] | float | np.ndarray,
    *,
    better: str,
    params: GateParams = DEFAULTS,
    n_trials: float | None = None,
    min_change: float | None = None,
) -> Judgement:
    """Judge a new run (its samples) against past runs (each its samples), oldest first.

    Each run is reduced to its median. The new run's own samples add variance
    only when its within-run standard error exceeds the typical one of the
    baseline runs (it carries fewer or noisier samples), so within-run samples
    can lower confidence but never raise it beyond the run-to-run spread.
    """
    sign = 1 if better == "lower" else -1
    summaries, value, extra = summarize(history, new, params)
    return judge_summaries(
        summaries, value, sign=sign, params=params, n_trials=n_trials,
        extra_var=extra, min_change=min_change,
    )


WITHIN_RUNS = 10  # newest baseline runs whose within-run spread is the typical one


@dataclass(frozen=True)
class Summarized:
    """A baseline already reduced: each run's summary, and the samples of the newest runs.

    What ``summarize`` reads from a history, so a caller holding the stored
    medians need not read every sample: ``summaries`` (oldest first) and
    ``recent``, the samples of the newest ``WITHIN_RUNS`` runs or more (a
    (runs x samples) array or a list of 1-D arrays), for the within-run spread.
    """

    summaries: np.ndarray
    recent: np.ndarray | list


def summarize(
    history: Sequence[Sequence[float] | float | np.ndarray] | Summarized,
    new: Sequence[float] | float | np.ndarray,
    params: GateParams = DEFAULTS,
) -> tuple[np.ndarray, float, float]:
    """(past run summaries, new run summary, extra variance of the new run) for judging.

    The extra variance is the new run's within-run variance of its median beyond the
    typical one of the newest ``WITHIN_RUNS`` baseline runs (fewer or noisier samples
    than usual).
    """
    # Only the runs the windows can reach matter (keeps 200-run histories cheap).
    reach = params.window + max(params.windows)
    new_a = np.asarray(new, dtype=float).ravel()
    if isinstance(history, Summarized):
        recent_s = history.recent[-WITHIN_RUNS:]
        return (np.asarray(history.summaries, dtype=float)[-reach:], run_summary(new_a),
                _extra_within_var(recent_s, new_a))
    if isinstance(history, np.ndarray) and history.ndim == 2:  # (runs x samples): no copies
        recent_a = history[-reach:].astype(float, copy=False)
        return (row_medians(recent_a), run_summary(new_a),
                _extra_within_var(recent_a[-WITHIN_RUNS:], new_a))
    recent = list(history)[-reach:]
    return _summaries(recent), run_summary(new_a), _extra_within_var(recent[-WITHIN_RUNS:], new_a)


def _summaries(runs: Sequence) -> np.ndarray:
    try:
        return row_medians(np.asarray(runs, dtype=float).reshape(len(runs), -1))
    except ValueError:  # ragged: runs with different sample counts
        return np.array([run_summary(r) for r in runs], dtype=float)


def _within_se2(a: np.ndarray) -> float | None:
    if a.size < 3:
        return None
    s = MAD_K * median(np.abs(a - median(a)))
    return HALF_PI * s * s / a.size


def _extra_within_var(history: Sequence | np.ndarray, new: np.ndarray) -> float:
    se_new = _within_se2(new)
    if se_new is None:
        return 0.0
    try:
        a = np.asarray(history, dtype=float).reshape(len(history), -1)
        if a.shape[1] < 3:
            return 0.0
        mad = MAD_K * row_medians(np.abs(a - row_medians(a)[:, None]))
        typical = median(HALF_PI * mad * mad / a.shape[1])
    except ValueError:
        past = [_within_se2(np.asarray(r, dtype=float).ravel()) for r in history]
        past_v = [v for v in past if v is not None]
        typical = float(np.median(past_v)) if past_v else 0.0
    return max(0.0, se_new - typical)
