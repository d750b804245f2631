"""Statistics of the regression gates: pure numpy/scipy, no I/O.

The gate judges one new run of one metric against the *run-to-run* spread of
past trusted runs: each run contributes one number, its median (the summary),
and within-run samples never stand in for the run-to-run spread (two processes
0.06% apart with 60 samples each are one run-level draw each, not 60).
Everything works in the "bad direction": ``sign = +1`` when lower is better
(latency), ``-1`` when higher is better.

The model on one page (noise model, the confirm protocol's stages, the
sequential rule, verdicts): ``docs/gates/design.md``; every constant and the
measurement behind it: ``docs/gates/calibration.md``. The statistics live in
four small modules: ``gates.model.robust`` (estimators and bounds), ``gates.model.machines``
(between-machine variance), ``gates.model.judge`` (the test of one run) and
``gates.model.decisions`` (stages, verdicts and the confirm reruns). This module is
their public face.
"""

from __future__ import annotations

from gates.model.decisions import (
    TRANSIENT_LEVEL,
    OpenRegression,
    confirm,
    confirm_reruns,
    corroborate,
    decide,
    independent,
    is_suspect,
    level_for,
    split_p,
    still_red,
)
from gates.model.judge import (
    DEFAULTS,
    Case,
    GateParams,
    JudgeExtras,
    Judgement,
    judge_many,
    judge_summaries,
)
from gates.model.machines import host_variance
from gates.model.robust import (
    ar1_variance_factor,
    bh_qvalues,
    huber_location,
    pettitt,
    quantile_p,
    robust_scale,
    run_summary,
)
from gates.model.summaries import WITHIN_RUNS, Summarized, judge, summarize, summarize_many

__all__ = [
    "DEFAULTS", "GateParams", "Judgement", "JudgeExtras", "run_summary", "robust_scale",
    "ar1_variance_factor", "judge", "judge_summaries", "judge_many", "Case", "host_variance",
    "quantile_p", "summarize", "summarize_many", "Summarized", "WITHIN_RUNS", "huber_location",
    "decide", "is_suspect", "bh_qvalues", "pettitt", "confirm", "corroborate", "confirm_reruns",
    "independent", "level_for", "split_p", "TRANSIENT_LEVEL", "OpenRegression", "still_red",
]
