"""Statistics of the regression gates: pure numpy/scipy, no I/O.

The gate judges one new run of one metric against the *run-to-run* spread of
past trusted runs. Each past run contributes one number, its median (the
summary); the new run contributes its own median, plus extra variance when it
carries fewer samples than usual. Within-run samples never stand in for the
run-to-run spread: two processes 0.06% apart with 60 samples each are one
run-level draw each, not 60.

Everything here works in the "bad direction": ``sign = +1`` when lower is
better (latency: an increase is bad), ``-1`` when higher is better.

Design, in short (see ``judge_summaries`` and ``confirm``):

1. Baseline: the ``window`` (40) trusted run summaries before the last 10
   runs (the last 40 while history is short), so the first runs of a change
   never dilute the reference. Centre = median; scale = Qn (50% breakdown,
   82% efficient), corrected for lag-1 autocorrelation.
2. Evidence: robust predictive t-tests of the new run alone (k = 1) and of
   the Huber location of the last 3 and 10 runs (variance from a bootstrap
   of the baseline, inflated for AR(1)); weighted Bonferroni (1/2 to k = 1).
   When the baseline is clearly autocorrelated (a cautious lower bound of
   lag-1 rho above 0), the new run is judged against its one-step AR(1)
   prediction from the previous run, on the scale of the baseline's one-step
   residuals (Box, Jenkins & Reinsel 2008, ch. 5); iid-looking baselines keep
   the plain test. rho is read from the baseline and the runs after it, each
   about its own centre, so a recent change does not read as dependence.
   Each p is bounded below by the empirical rank of the value among the
   baseline runs (or rolling k-run stretches) and by an exponential tail
   fitted to the baseline's exceedances: a level the noise already produced
   (a second mode, heavy tails, an old spike) is not evidence. Where the
   baseline has such a tail and at most mild autocorrelation, an exact rank test of the
   least bad of the last 7 runs (``quantile_p``) takes 0.1 of the level from
   the windows: a shifted main mode shows in it through a slow mode.
3. Practical floor: max(declared ``min_change``, 0.5 * run-to-run CV); both
   the deciding window's change and the new run's own change must pass it,
   so a run that recovered after a spike is never a regression.
4. Accuracy with ``n`` questions: the scale is at least sqrt(p(1-p)/n).
   A run on a machine the baseline has not seen adds the between-machine
   variance (``host_variance``) to its prediction.
5. Benjamini-Hochberg q-values across a run's metrics (``bh_qvalues``) at
   ``level`` = 0.02; confirm on trip (``confirm``) re-judges a rerun with the
   first attempt left out of the baseline at 0.05, treats a first attempt far
   above its rerun as a transient (two draws of one regime, one-sided
   p <= 0.01), and, when a window decided, asks the pair's mean to lean the
   bad way; a first attempt whose new run alone reaches the 0.05 screen but
   not the level is a suspect (``is_suspect``): rerun, and held only when the
   pair's mean is clear (p <= 0.002); a first attempt far above its rerun
   (p <= 0.001) is reported as a transient, whose rerun stands in for it in
   later baselines (``gates.gate``), the next run's AR(1) prediction widened
   for it (``standin_last``); Pettitt's rank test localises the change.
6. Sequential confirm, where two or more reruns may follow (4 by default) and
   the baseline looks independent and light-tailed on at most one machine
   (``independent``): the first attempt's level is 4x (``level_for``, on
   baselines of ``sequential_min_base`` runs or more); a
   rerun whose own p is > 0.46 is judged by the one-rerun rules, any other
   gets another rerun (none holds alone: one that clear lies beyond every
   baseline run, on the fitted tail alone) and the mean of the reruns
   (each clipped to 3 run scales) decides: held at p <= 0.00135, passed at
   p > 0.5, else one more rerun, and at the last p <= 0.02 (two reruns) or
   0.015 (more) (``confirm(another=True)``, ``confirm_reruns``). A third
   rerun or later needs a baseline of 30 runs. A mean that holds short of
   the early 0.00135 also needs the first attempt to be one draw of the
   reruns' regime (``split_p`` of first against the mean of all of them
   above 0.01): a glitch's clean reruns, high by chance, do not hold on a
   borderline mean. The reruns of this metric's
   sequential confirms that did not hold at the last 10 baseline runs join
   that mean (``carried``, same 30-run rule): reruns are not selected for
   being high, and a sustained shift's evidence then carries from one trip
   to the next instead of starting again at each.
7. Heavy-tailed baselines keep one rerun, but a rerun that holds while lying
   beyond every baseline run (a power-cap dip looks like that) asks for one
   more where one may follow, which holds the regression only if it ranks
   among the worst 0.4 of the baseline runs (``corroborate``); on the
   slightly autocorrelated ones, one not clear on its own (p > 0.00135) also
   needs the first attempt to be one draw of the two reruns' regime.

Defaults are set on the detection benchmark (``benchmarks/bench_gates.py``):
the level is the largest that keeps the worst noise model (AR(1), the H200
slow mode) at <= 5% false alarms per 30-run null series, with no
per-metric tuning.
"""

# The statistics live in four small modules: gates.robust (estimators and bounds),
# gates.machines (between-machine variance), gates.judge (the test of one run) and
# gates.decisions (verdicts and confirm on trip). This module is their public face.
from __future__ import annotations

from gates.decisions import (
    confirm,
    confirm_reruns,
    corroborate,
    decide,
    independent,
    is_suspect,
    level_for,
    split_p,
)
from gates.judge import (
    DEFAULTS,
    Decider,
    GateParams,
    JudgeExtras,
    Judgement,
    judge_summaries,
)
from gates.machines import host_variance
from gates.robust import (
    ChangePoint,
    ar1_variance_factor,
    bh_qvalues,
    binomial_se,
    huber_location,
    lag1_autocorr,
    pettitt,
    predictive_z_pvalue,
    quantile_p,
    robust_scale,
    run_summary,
)
from gates.summaries import WITHIN_RUNS, Summarized, judge, summarize

__all__ = [
    "DEFAULTS",
    "GateParams",
    "Decider",
    "Judgement",
    "JudgeExtras",
    "ChangePoint",
    "run_summary",
    "robust_scale",
    "lag1_autocorr",
    "ar1_variance_factor",
    "predictive_z_pvalue",
    "binomial_se",
    "judge",
    "judge_summaries",
    "host_variance",
    "quantile_p",
    "summarize",
    "Summarized",
    "WITHIN_RUNS",
    "huber_location",
    "decide",
    "is_suspect",
    "bh_qvalues",
    "pettitt",
    "confirm",
    "corroborate",
    "confirm_reruns",
    "independent",
    "level_for",
    "split_p",
]
