"""Runs of samples reduced to the run summaries ``gates.model.judge`` reads.

``judge`` judges a new run's samples against past runs' samples; ``summarize``
is its reduction (each run to its median, plus the new run's extra within-run
variance). Pure numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gates.model.judge import DEFAULTS, GateParams, Judgement, judge_summaries
from gates.model.robust import HALF_PI, MAD_K, row_medians, run_summary

__all__ = ["WITHIN_RUNS", "Summarized", "judge", "summarize", "summarize_many"]


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
    """(past run summaries, new run summary, extra variance of the new run) for judging:
    ``summarize_many`` of one metric."""
    return summarize_many([(history, new)], params)[0]


def summarize_many(items: Sequence[tuple[Any, Any]], params: GateParams = DEFAULTS,
                   ) -> list[tuple[np.ndarray, float, float]]:
    """``summarize`` of each (history, new samples) pair, the metrics of a run together.

    The extra variance is the new run's within-run variance of its median beyond the
    typical one of the newest ``WITHIN_RUNS`` baseline runs (fewer or noisier samples
    than usual).
    """
    # Only the runs the windows can reach matter (keeps 200-run histories cheap).
    reach = params.window + max(params.windows)
    out, recents, news = [], [], []
    for history, new in items:
        news.append(np.asarray(new, dtype=float).ravel())
        if isinstance(history, Summarized):
            out.append(np.asarray(history.summaries, dtype=float)[-reach:])
            recents.append(history.recent[-WITHIN_RUNS:])
        elif isinstance(history, np.ndarray) and history.ndim == 2:  # (runs x samples)
            a = history[-reach:].astype(float, copy=False)
            out.append(row_medians(a))
            recents.append(a[-WITHIN_RUNS:])
        else:
            runs = list(history)[-reach:]
            out.append(_summaries(runs))
            recents.append(runs[-WITHIN_RUNS:])
    return list(zip(out, [run_summary(x) for x in news], _extra_within_vars(recents, news),
                    strict=True))


def _summaries(runs: Sequence) -> np.ndarray:
    try:
        return row_medians(np.asarray(runs, dtype=float).reshape(len(runs), -1))
    except ValueError:  # ragged: runs with different sample counts
        return np.array([run_summary(r) for r in runs], dtype=float)


def _within_se2(a: np.ndarray) -> np.ndarray:
    """Each row's within-run variance of its median (MAD-based)."""
    s = MAD_K * row_medians(np.abs(a - row_medians(a)[..., None]))
    return HALF_PI * s * s / a.shape[-1]


def _extra_within_vars(recents: list, news: list[np.ndarray]) -> list[float]:
    """Each new run's within-run variance beyond its baseline's typical one; baselines
    of as many runs and samples, and new runs of as many samples, stacked."""
    out = [0.0] * len(news)
    groups: dict[tuple, list[tuple[int, np.ndarray]]] = {}
    for i, (recent, new) in enumerate(zip(recents, news, strict=True)):
        if new.size < 3:
            continue
        try:
            a = np.asarray(recent, dtype=float).reshape(len(recent), -1)
        except ValueError:  # ragged (or no runs): run by run
            past = [_within_se2(r) for r in (np.asarray(x, dtype=float).ravel()
                                              for x in recent) if r.size >= 3]
            out[i] = max(0.0, float(_within_se2(new)) - (float(np.median(past)) if past
                                                          else 0.0))
            continue
        if a.shape[1] >= 3:
            groups.setdefault((a.shape, new.size), []).append((i, a))
    for members in groups.values():
        a = np.stack([x for _, x in members])
        se_new = _within_se2(np.stack([news[i] for i, _ in members]))
        typical = row_medians(_within_se2(a))
        for (i, _), v in zip(members, np.maximum(0.0, se_new - typical).tolist(), strict=True):
            out[i] = v
    return out
