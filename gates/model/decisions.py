"""From a judgement to a verdict: the level, the practical floor, confirm on trip.

``Stage`` and ``next_stage``: the confirm protocol as a state machine.
``decide`` (evidence and a practical effect), ``level_for`` and ``is_suspect``
(what a first attempt is held to, and when it earns a rerun without failing);
``confirm``, ``corroborate`` and ``confirm_reruns`` judge the rerun stages, and
``sequential_step`` is the one rule that says hold / pass / rerun again.
Pure; the model on one page: ``docs/gates/design.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from scipy import special

from gates.model.judge import (
    DEFAULTS,
    QUANTILE_RHO,
    QUANTILE_WEIGHT,
    Decided,
    GateParams,
    Judgement,
    judge_summaries,
)
from gates.model.robust import (
    QN_EFF,
    empirical_bound,
    predictive_z_pvalue,
    quantile_p,
    subset_means,
)
from gates.model.verdicts import FAILING

__all__ = [
    "OpenRegression",
    "Stage",
    "next_stage",
    "stage_of",
    "decide",
    "independent",
    "level_for",
    "is_suspect",
    "confirm",
    "confirm_reruns",
    "corroborate",
    "mixture_hold_p",
    "sequential_step",
    "still_red",
    "split_p",
]

RERUN_VERDICTS = (*FAILING, "suspect")  # a first attempt's verdicts an enforced gate reruns

# The confirm model's constants, by stage (values and the measurements behind them:
# docs/gates/calibration.md). Not per-metric knobs: each follows from the model.
# First attempt, where the sequential confirm follows:
INDEPENDENT_FACTOR = 4.0  # level x this: the sequential confirm holds ~2% of null trips, not 5%
SEQUENTIAL_MIN_BASE = 30  # baseline runs it needs (shorter AR(1) ones read as independent)
# ... and the first rerun's sequential step: the reruns' mean is ranked among the means of
# as many baseline runs, and a pair's can reach FINAL_PAIR (1 / (C(n, 2) + 1) <= 0.02)
# only from 11 runs (on 6, a 7.5-SD change's pair passed at p 0.065, the rank bound)
SEQUENTIAL_CONFIRM_MIN_BASE = 11
# First rerun (RERUN):
CONSISTENCY_LEVEL = 0.01  # split p of first vs its rerun at or below this: a transient
TRANSIENT_LEVEL = 0.001  # ... at or below this: later baselines take the rerun's value
WINDOW_RUN_LEVEL = 0.05  # a window trip: the pair's mean against single runs (confirm level)
PAIR_LEVEL = 0.01  # ... or against the baseline's pair means (iid baselines)
SUSPECT_PAIR_LEVEL = 0.002  # a suspect: its pair's mean against pair means (level / 10)
CORROBORATE_RANK = 0.1  # CORROBORATE: the next rerun among the worst 0.1 of baseline runs
# The sequential rule (``sequential_step``), reruns of an independent baseline:
MIXTURE_TAU = 1.0  # mixture SPRT prior SD of the shift, in run SDs (one rerun's early hold)
EARLY_HOLD = 0.00135  # two or more reruns: Haybittle-Peto z = 3
FUTILITY_FIRST = 0.46  # one rerun this weak keeps the one-rerun verdict
FUTILITY = 0.5  # a mean of reruns not on the bad side: pass
FINAL_PAIR = 0.01  # the last look, two reruns: half the first attempt's level
FINAL_MEAN = 0.0075  # ... three or more (reruns share the previous run's AR(1) state)
RERUN_CLIP = 3.0  # each rerun counts at most this many run scales from the centre


class Stage(StrEnum):
    """Where a metric stands in the confirm protocol (stored in ``verdicts.stage``).

    FIRST: the run as recorded, judged with its run's other metrics (BH), at the
    level ``level_for`` gives. RERUN: the first confirm rerun of a tripped or
    suspect metric, the first attempt left out of the baseline (``confirm``).
    CORROBORATE: the rerun after a held rerun that lay beyond every run of a
    heavy-tailed baseline (``corroborate``). RERUNS: the second rerun on, the
    mean of the chain's reruns decides (``confirm_reruns``).
    """

    FIRST = "first"
    RERUN = "rerun"
    CORROBORATE = "corroborate"
    RERUNS = "reruns"


def next_stage(stage: Stage, verdict: str, *, enforced: bool = True,
               corroborate: bool = False, attempts_left: int = 1) -> Stage | None:
    """The stage of the next attempt at a metric, given this attempt's stage and
    verdict, or None where the verdict is final.

    An enforced first attempt that failed or is suspect is rerun (RERUN); a rerun
    that says ``suspect`` asks for one more: the next corroborates it where it lay
    beyond every run of a heavy-tailed baseline (``corroborate``: its evidence),
    else the reruns' mean decides (RERUNS). Nothing follows without attempts left,
    in warn mode, or after a corroborating rerun.
    """
    if attempts_left < 1 or not enforced:
        return None
    if stage is Stage.FIRST:
        return Stage.RERUN if verdict in RERUN_VERDICTS else None
    if verdict != "suspect" or stage is Stage.CORROBORATE:
        return None
    return Stage.CORROBORATE if stage is Stage.RERUN and corroborate else Stage.RERUNS


def stage_of(row: Mapping[str, Any], previous: Mapping[str, Any] | None = None) -> Stage:
    """A stored verdict row's stage: its ``stage`` column, or, for a row saved without
    one, what its attempt and the previous attempt's row imply (as migration m005)."""
    if row.get("stage"):
        return Stage(row["stage"])
    attempt = int(row.get("attempt") or 1)
    if attempt <= 1:
        return Stage.FIRST
    if attempt == 2:
        return Stage.RERUN
    asked = previous is not None and bool((previous.get("detail") or {}).get("corroborate"))
    return Stage.CORROBORATE if asked else Stage.RERUNS


def decide(j: Judgement, q_worse: float, *, level: float, q_better: float | None = None,
           better_level: float | None = None) -> str:
    """Verdict from a judgement and its BH q-value: both evidence and a practical effect.

    regression: q <= level, and both the deciding window's change and the new
    run's own change are beyond the floor in the bad direction.
    improvement: the mirror image, on ``q_better`` (BH across the run's
    metrics too, so a nightly does not announce noise as progress) or on the
    raw p when no q is given, at ``better_level`` when given (a first attempt
    screened at a looser level than its confirm: ``level_for``), else ``level``.
    """
    if j.status != "ok":
        return j.status
    pb = j.extras.p_better_sustained if q_better is None else q_better
    blevel = level if better_level is None else better_level
    if j.rel_change is None or j.own_change is None:
        # Baseline centred on zero: no relative floor, judge on evidence alone.
        if q_worse <= level and j.z > 0:
            return "regression"
        if pb <= blevel and j.z < 0:
            return "improvement"
        return "pass"
    bad_rel = j.sign * j.rel_change
    bad_own = j.sign * j.own_change
    if j.z > 0 and q_worse <= level and bad_rel > j.floor and bad_own > j.floor:
        return "regression"
    if j.z < 0 and pb <= blevel and -bad_rel > j.floor and -bad_own > j.floor:
        return "improvement"
    return "pass"


def independent(j: Judgement) -> bool:
    """The baseline looks serially independent (``rho_lo`` = 0), light-tailed
    (fewer than 3 runs beyond ``PAIR_TAIL`` scales on the bad side) and names at
    most one machine: reruns on the judged run's machine share its offset (as
    AR(1) reruns share the previous state), so across several machines two
    reruns are not two independent draws of what the baseline varies over."""
    return (j.status == "ok" and j.extras.rho_lo == 0.0
            and not j.extras.heavy and j.extras.machines <= 1)


def level_for(j: Judgement, level: float, params: GateParams = DEFAULTS) -> float:
    """The first attempt's level: ``level`` x ``INDEPENDENT_FACTOR`` where a trip earns
    the sequential confirm (``independent`` baseline of ``SEQUENTIAL_MIN_BASE`` runs or
    more), which holds about 2% of null trips instead of one rerun's 5%; ``level``
    elsewhere. Improvements keep ``level``. Two-stage design: the pair's false-alarm
    rate is the product of the stages' (Bauer & Koehne, Biometrics 50 (1994) 1029)."""
    if independent(j) and j.extras.n_base >= SEQUENTIAL_MIN_BASE:
        return min(1.0, level * INDEPENDENT_FACTOR)
    return level


def is_suspect(j: Judgement, q_worse: float, *, params: GateParams = DEFAULTS,
               level: float | None = None) -> bool:
    """A first attempt short of a regression that still earns a confirm rerun.

    The new run alone (k = 1) reaches ``params.screen_level`` after the same
    Bonferroni weight and BH adjustment as the full test (its p is scaled by
    q / p of the metric), its change is beyond the practical floor, and the
    baseline looks serially independent (``rho_lo`` = 0: with autocorrelated
    runs a rerun shares the first attempt's state and is weak evidence). A
    suspect never fails alone; it holds only when its rerun confirms
    (``confirm(suspect=True)``).
    """
    level = params.level if level is None else level
    if j.status != "ok" or j.z <= 0 or j.extras.rho_lo > 0.0:
        return False
    if decide(j, q_worse, level=level) != "pass":
        return False
    scale = q_worse / j.p_worse if j.p_worse > 0 else 1.0
    p_run = j.extras.p_run_worse / j.extras.w_run * max(scale, 1.0)
    own = j.own_change
    return p_run <= params.screen_level and (own is None or j.sign * own > j.floor)


@dataclass(frozen=True)
class OpenRegression:
    """A metric's newest judged run failed and nobody accepted it: what the next run is
    judged against (``still_red``). ``centre``: the baseline's centre when it held;
    ``held``: the mean of the attempts of the chain that held it."""

    root: str  # the failed chain's first attempt
    centre: float
    held: float


def still_red(o: OpenRegression, value: float, sign: int) -> bool:
    """A run of a metric with an open regression stays red until the change is accepted,
    whatever its value: the held chain is the evidence of the change (its two stages), and
    no one run can say the code changed back where the change is within the noise (a +5%
    change on 3% noise: 1.7 SDs; 5% of such runs fell to the baseline's lower quartile
    and turned green, docs/gates/calibration.md). After a revert, or a false alarm,
    ``gate-report accept`` says so."""
    if not all(math.isfinite(x) for x in (o.centre, o.held, value)):
        return False
    return sign * (o.held - o.centre) > 0  # else not a regression of this direction


def mixture_hold_p(alpha: float, tau: float = MIXTURE_TAU) -> float:
    """One-sided p at which one standardised rerun alone ends the sequential confirm.

    The normal-mixture SPRT (Robbins, Ann. Math. Stat. 41 (1970) 1397; the mSPRT of
    Johari et al., Oper. Res. 70 (2022) 1806) with effect prior N(0, tau^2) in run SDs
    rejects when the likelihood ratio (1 + tau^2)^-1/2 exp(z^2 tau^2 / (2 (1 + tau^2)))
    reaches 1 / alpha; any stopping rule then keeps the false-alarm rate <= alpha.
    alpha 0.02, tau 1: z 4.13, p 1.8e-5.
    """
    t2 = tau * tau
    z = math.sqrt(2.0 * (1.0 + t2) / t2 * math.log(math.sqrt(1.0 + t2) / alpha))
    return float(special.ndtr(-z))


def sequential_step(p: float, n: int, *, final: bool, level: float) -> str:
    """The sequential confirm's rule after ``n`` reruns whose (clipped) mean has
    one-sided p ``p`` against means of n baseline runs: ``regression`` (hold),
    ``pass`` (stop) or ``suspect`` (rerun again).

    Early hold: one rerun at the mixture-SPRT boundary (``mixture_hold_p`` at
    ``level``: a clear case costs one rerun); two or more at the Haybittle-Peto
    boundary z = 3 (their clipped mean rests less on the fitted tail than one
    rerun beyond every baseline run). Stop above ``FUTILITY`` (the mean is not on
    the bad side). The last rerun: the fixed-sample level of a pair, or of a
    longer mean. Group-sequential design with early stopping on both sides
    (Jennison & Turnbull, *Group Sequential Methods*, 2000, ch. 2 and 4).
    """
    if final:
        return "regression" if p <= (FINAL_PAIR if n <= 2 else FINAL_MEAN) else "pass"
    if p <= (mixture_hold_p(level) if n == 1 else EARLY_HOLD):
        return "regression"
    return "pass" if p > (FUTILITY_FIRST if n == 1 else FUTILITY) else "suspect"


def _split_step(j: Judgement, history: np.ndarray, first: float | None, rerun: float,
                extra_var: float) -> bool:
    """Same regime? False where the first attempt is a transient against its rerun
    (split p <= ``CONSISTENCY_LEVEL``); the p goes to ``extras.p_split``."""
    if first is None or j.status != "ok":
        return True
    j.extras.p_split = split_p(first, [rerun], sign=j.sign, scale=j.extras.s1c,
                               extra_var=extra_var, n_baseline=j.n_baseline,
                               reference=_reference(history))
    return j.extras.p_split > CONSISTENCY_LEVEL


def _quantile_decided(jf: Judgement, params: GateParams) -> bool:
    """The quantile test decided the first attempt ``jf`` (judged again on the history that
    holds neither attempt): a change where its least bad run is one (``decide``'s floor)."""
    return (jf.extras.p_q_worse / QUANTILE_WEIGHT <= params.level
            and not jf.extras.q_change <= jf.floor)


def _quantile_reruns(history: np.ndarray, reruns: Sequence[float], j: Judgement,
                     params: GateParams, final: bool) -> str:
    """A quantile trip's confirm: the reruns' own quantile test, the least bad of the
    reruns alone against the runs the first attempt's test took as its baseline (the
    window it read is left out: it holds the first attempt's evidence). Reruns are fresh
    draws, so under no change the test is exact whatever the first stage saw: the pair
    holds ``confirm_level`` of the quantile test's trips (docs/gates/calibration.md).
    All ``confirm_attempts`` reruns (N) decide, at ``confirm_level``: one rerun's rank is
    weak evidence against a slow mode (a +5% shift of the fast mode ranks ~0.28), N such
    runs are not. The chain stops as soon as the reruns so far are off the track that
    reaches the level (their least bad's p above confirm_level^(k/N) after k reruns)."""
    h = np.asarray(history, dtype=float)
    h = h[np.isfinite(h)]
    kmax = max(params.windows, default=1)
    ref = (h[-(kmax - 1) - params.window : len(h) - (kmax - 1)]
           if h.size - (kmax - 1) >= params.min_history else h[-params.window:])
    c, sign = float(np.median(ref)), j.sign
    x = sign * (np.asarray(reruns, dtype=float) - c)
    p = float(quantile_p(sign * (ref - c), x))
    k, a, n_max = len(reruns), params.confirm_level, params.confirm_attempts
    j.extras.q_reruns, j.extras.p_q_reruns = k, p
    least = float(x.min()) / abs(c) if c else None
    if k >= n_max or final:
        held = p <= a and (least is None or least > j.floor)
        if held:  # a rank test: its p and level, no interval
            j.extras.decided = Decided(f"quantile of {k} reruns", p, a, least)
        return "regression" if held else "pass"
    return "suspect" if p <= a ** (k / n_max) else "pass"


def _headline(j: Judgement) -> str:
    """The name of the test that heads a judgement ("run", "huber-10", "quantile-7")."""
    return j.statistic.rpartition("/")[2]


def _window_hold(j: Judgement, history: np.ndarray, first: float | None, rerun: float,
                 suspect: bool, kw: dict[str, Any]) -> bool:
    """A window trip's (or a suspect's) rerun: the two attempts' own values must lean
    the bad way too, as the window shares all its other runs with the first attempt."""
    iid = j.extras.rho_lo == 0.0
    if first is None:
        return j.extras.p_run_worse <= (SUSPECT_PAIR_LEVEL if suspect else WINDOW_RUN_LEVEL)
    mean = 0.5 * (first + rerun)

    def p_pair() -> float:  # against the baseline's pair means (iid baselines only)
        return (judge_summaries(history, mean, mean_of=2, **kw).extras.p_run_worse
                if iid else 1.0)

    if suspect:
        return p_pair() <= SUSPECT_PAIR_LEVEL
    s1c = j.extras.s1c
    single = judge_summaries(history, mean, **{**kw, "extra_var":
                                                 kw.get("extra_var", 0.0) - 0.5 * s1c * s1c})
    return single.extras.p_run_worse <= WINDOW_RUN_LEVEL or p_pair() <= PAIR_LEVEL


def confirm(history: np.ndarray, rerun: float, *, sign: int, first: float | None = None,
            params: GateParams = DEFAULTS, suspect: bool = False, another: bool = False,
            **judge_kw: Any) -> tuple[Judgement, str]:
    """Judge the first confirm rerun of a tripped metric (stage RERUN).

    ``history`` holds neither attempt; ``first`` is the first attempt's summary.
    The rerun is judged like any run and must reach ``regression`` at
    ``params.confirm_level`` on its own: a one-sided test of the hypothesis the
    first attempt raised (on iid baselines, of the window that decided it), so
    the pair's false-alarm rate is about level x confirm level (Bauer & Koehne
    1994). Then, in turn: a first attempt far beyond its rerun is a transient
    (``split_p``: two draws of one regime; assumes a real change moves both
    alike), and the regression does not hold; a quantile trip is confirmed by
    the reruns' own quantile test (``_quantile_reruns``); a window trip or a suspect
    needs the pair's own values to lean bad (``_window_hold``).
    ``another`` (another rerun may follow) on an ``independent`` baseline, for a
    level trip that is not a transient: the sequential rule decides
    (``sequential_step`` with n = 1). Heavy-tailed and slightly autocorrelated
    baselines keep one rerun, except that a held rerun beyond every baseline
    run asks the next to corroborate it (``_outlier_check``).
    A rerun never says ``improvement``: it clears the trip (``pass``) or holds it.
    ``judge_kw``: ``judge_summaries``' settings (n_trials, min_change,
    extra_var, hosts, host, standin_last). Returns (judgement, verdict).
    """
    kw = dict(sign=sign, params=params, **judge_kw)
    j = judge_summaries(history, rerun, **kw)
    consistent = _split_step(j, history, first, rerun, judge_kw.get("extra_var", 0.0))
    p_conf = j.p_worse
    # The first attempt is judged again where its quantile test may have run (the same
    # baseline, so the same guard as ``judge_summaries``) or its window matters.
    jf = (judge_summaries(history, first, **kw) if first is not None and j.status == "ok"
          and min(j.extras.rho_q, j.extras.rho_lo) <= QUANTILE_RHO else None)
    if jf is not None and _quantile_decided(jf, params):
        return j, _quantile_reruns(history, [rerun], j, params, final=not another)
    if jf is not None and j.extras.rho_lo == 0.0:
        p_conf = min(p_conf, (j.extras.p_run_worse if jf.window == 1
                              else j.extras.p_window_worse.get(jf.window, 1.0)))
    v = decide(j, p_conf, level=params.confirm_level)
    if j.status == "ok":
        # What the row states: the headline, or the first attempt's window read on the
        # rerun (its p alone: unweighted, so the headline's interval is not its statement).
        own = p_conf >= j.p_worse
        k = jf.window if jf is not None else 1
        lv = params.confirm_level
        j.extras.decided = Decided(
            _headline(j) if own else "run" if k == 1 else f"huber-{k}", p_conf, lv,
            j.rel_change if own else j.own_change if k == 1 else None,
            lv if own else lv / j.extras.w_run if k == 1 and _headline(j) == "run" else None)
    if v == "improvement":
        # A rerun re-tests the hypothesis its first attempt raised (worse), nothing
        # else: read as a test of "better" it would be one picked after seeing a
        # trip the other way. It clears the trip; it announces nothing.
        v = "pass"
    if v == "regression" and not consistent and not (
            independent(j) and j.extras.p_run_worse <= mixture_hold_p(params.level)):
        # A transient first attempt: a glitch whose rerun is back. Not where the rerun
        # alone reaches the one-rerun boundary on a light-tailed baseline (where the
        # sequential rule holds one rerun there): both attempts are then far out, the
        # first further (two draws of a +20% change 3 SDs apart turned a red run green).
        # On a heavy or two-mode baseline that p rests on a fitted tail: a glitch whose
        # rerun lands just past the largest run held 1 of 200 times.
        v = "pass"
    if v == "regression" and (j.window > 1 or suspect) and not _window_hold(
            j, history, first, rerun, suspect, kw):
        v = "pass"
    if (another and not suspect and consistent and independent(j)
            and j.extras.n_base >= SEQUENTIAL_CONFIRM_MIN_BASE):
        step = sequential_step(j.extras.p_run_worse, 1, final=False, level=params.level)
        if step == "suspect" or (step == "regression" and v != "regression"):
            v = "suspect"
    return j, _outlier_check(j, v, another)


def split_p(first: float, reruns: Sequence[float], *, sign: int, scale: float,
            extra_var: float = 0.0, n_baseline: int,
            reference: np.ndarray | None = None) -> float:
    """One-sided p that the first attempt is a transient against its reruns.

    The first attempt and its ``n`` reruns are draws of one regime, each with
    variance ``scale^2 + extra_var`` (``scale``: the judge's one-run scale,
    the one-step residuals' under AR(1)), so first - mean(reruns) has variance
    (scale^2 + extra_var)(1 + 1/n); a small p says the first attempt lies far
    beyond what its reruns put the regime at. Test: two-sample predictive t
    (Hahn & Meeker 1991, sec. 4.7) with the baseline's degrees of freedom,
    QN_EFF (n_baseline - 1).
    ``reference``: the baseline runs. A shift moves both attempts alike, so
    under one regime first - mean(reruns) is distributed as a baseline run
    minus the mean of n others whatever the noise's shape; p is bounded below
    by its rank among those differences (``robust.empirical_bound``), so a
    gap the baseline's own runs show (a slow mode against a fast one) is
    never read as a transient, however large the shift both attempts share.
    """
    n = len(reruns)
    if n < 1:
        raise ValueError("split_p needs at least one rerun")
    se = math.sqrt(max((scale * scale + max(extra_var, 0.0)) * (1.0 + 1.0 / n), 1e-300))
    df = max(QN_EFF * (n_baseline - 1), 2.0)
    d = sign * (first - float(np.mean(reruns)))
    p = predictive_z_pvalue(d / se, df)
    if reference is not None:
        x = sign * np.asarray(reference, dtype=float)
        x = x[np.isfinite(x)]
        if x.size >= 3:
            gaps = (x[:, None] - (x[None, :] if n == 1 else subset_means(x, n)[None, :])).ravel()
            if n == 1:
                gaps = gaps[gaps != 0.0]  # a run against itself
            p, _ = empirical_bound(gaps, d, p, 1.0)
    return p


def _chain_check(j: Judgement, v: str, first: float | None, reruns: Sequence[float], *,
                 scale: float, extra_var: float, reference: np.ndarray) -> str:
    """A chain of reruns that holds only short of the early boundary does not hold
    where its first attempt is a transient against their mean (``split_p`` <=
    ``CONSISTENCY_LEVEL``): a glitch makes a trip certain, and its clean reruns,
    high by chance, would then hold as often as a null trip's. Reruns clear on
    their own (p <= ``EARLY_HOLD``) hold whatever the first attempt was;
    heavy-tailed baselines are left out (a slow-mode first attempt against
    fast-mode reruns is ordinary there). Sets ``extras.p_split`` and, where it
    turned a hold into a pass, ``extras.chain_transient``."""
    if (v != "regression" or first is None or j.status != "ok" or j.extras.heavy
            or j.extras.p_run_worse <= EARLY_HOLD):
        return v
    j.extras.p_split = split_p(first, reruns, sign=j.sign, scale=scale, extra_var=extra_var,
                               n_baseline=j.n_baseline, reference=reference)
    if j.extras.p_split <= CONSISTENCY_LEVEL:
        j.extras.chain_transient = True
        return "pass"
    return v


def _reference(history: np.ndarray, window: int = DEFAULTS.window) -> np.ndarray:
    """The baseline runs a transient test ranks its gap among (the newest ``window``)."""
    h = np.asarray(history, dtype=float)
    return h[np.isfinite(h)][-window:]


def _outlier_check(j: Judgement, v: str, another: bool) -> str:
    """A held rerun beyond every baseline run, where another rerun may follow, is
    ``suspect`` with ``extras.corroborate`` (the next rerun decides, ``corroborate``)
    on a heavy-tailed baseline, or on one with 0 < ``rho_lo`` <= ``QUANTILE_RHO``
    (no sequential confirm there): its p rests on the fitted tail alone, and a tail
    fitted over a few outliers (a GEMM's power-cap dips) understates it far out (null
    pairs of real H200 GEMM samples reach p 1e-12 both)."""
    rho_lo = j.extras.rho_lo
    if (another and v == "regression" and j.extras.beyond
            and (j.extras.heavy or 0.0 < rho_lo <= QUANTILE_RHO)):
        j.extras.corroborate = True
        return "suspect"
    return v


def corroborate(history: np.ndarray, rerun: float, *, sign: int, params: GateParams = DEFAULTS,
                first: float | None = None, previous: float | None = None,
                **judge_kw: Any) -> tuple[Judgement, str]:
    """The rerun after a held first rerun beyond every run of a heavy-tailed (or
    slightly autocorrelated) baseline (stage CORROBORATE).

    One draw beyond every run is what such a tail does about once in n + 1, and
    the p there rests on the fitted tail; so this independent draw of the regime
    must lean the same way: it holds only if it ranks among the worst
    ``CORROBORATE_RANK`` of the baseline runs (rank p = (1 + #{as bad or worse})
    / (n + 1), ``extras.rank_worse``; uniform under no change, so this holds
    that share of such trips). ``history`` holds neither the first attempt nor
    the earlier rerun; given ``first`` and ``previous``, a hold not clear on its
    own also needs the first attempt to be one draw of the two reruns' regime
    (``_chain_check``). Returns (judgement of the rerun, verdict).
    """
    j = judge_summaries(history, rerun, sign=sign, params=params, **judge_kw)
    if j.status != "ok":
        return j, j.status
    v = "regression" if j.extras.rank_worse <= CORROBORATE_RANK else "pass"
    j.extras.decided = Decided("rank", j.extras.rank_worse, CORROBORATE_RANK, j.own_change)
    if previous is not None:
        v = _chain_check(j, v, first, [previous, rerun], reference=_reference(history),
                         scale=j.extras.s1c, extra_var=judge_kw.get("extra_var", 0.0))
    return j, v


def confirm_reruns(history: np.ndarray, reruns: Sequence[float], *, sign: int,
                   final: bool = True, params: GateParams = DEFAULTS,
                   carried: Sequence[float] = (), first: float | None = None,
                   **judge_kw: Any) -> tuple[Judgement, str]:
    """The sequential confirm from its second rerun on (stage RERUNS).

    ``reruns`` (2 or more, oldest first) are independent draws of the run's
    regime; ``history`` holds none of them nor the first attempt (selected for
    being high). Their mean, each rerun clipped to ``RERUN_CLIP`` run scales
    from the baseline's centre (one rerun in a power-cap dip must not carry
    it), is judged against means of as many baseline runs
    (``judge_summaries(mean_of=n)``) and ``sequential_step`` decides; ``final``
    (no rerun left) or a baseline shorter than ``SEQUENTIAL_MIN_BASE`` runs
    takes the last look's level (``extras.rerun_level``). A hold also needs the
    mean and the newest rerun beyond the practical floor, and one short of the
    early boundary a first attempt that is one draw of the reruns' regime
    (``_chain_check``, given ``first``).
    ``carried``: the reruns of this metric's unheld sequential confirms at the
    last ``max(params.windows)`` baseline runs (oldest first). Not selected for
    being high, they join the mean as further reruns, so a sustained shift's
    evidence carries from one trip to the next, as a CUSUM's sum does; only on
    baselines of ``SEQUENTIAL_MIN_BASE`` runs (``extras.carried``: how many).
    Assumptions: independent, light-tailed baseline (what the first rerun's
    stage checked); reruns share nothing but the regime.
    """
    if len(reruns) < 2:
        raise ValueError("confirm_reruns needs at least two reruns; use confirm for one")
    kw = dict(sign=sign, params=params, **judge_kw)
    if first is not None:
        jf = judge_summaries(history, first, **kw)
        if (jf.status == "ok" and min(jf.extras.rho_q, jf.extras.rho_lo) <= QUANTILE_RHO
                and _quantile_decided(jf, params)):
            j = judge_summaries(history, float(reruns[-1]), **kw)
            return j, _quantile_reruns(history, reruns, j, params, final)
    x = np.asarray([*carried, *reruns], dtype=float)
    j = judge_summaries(history, float(x.mean()), mean_of=x.size, **kw)
    if carried and j.extras.n_base < SEQUENTIAL_MIN_BASE:
        carried, x = (), np.asarray(reruns, dtype=float)  # a short baseline: own reruns only
        j = judge_summaries(history, float(x.mean()), mean_of=x.size, **kw)
    if j.status != "ok":
        return j, j.status
    mu, lim = j.extras.mu1, RERUN_CLIP * j.extras.s1
    xc = np.clip(x, mu - lim, mu + lim)
    if not np.array_equal(xc, x):
        j = judge_summaries(history, float(xc.mean()), mean_of=x.size, **kw)
    own_last = ((float(reruns[-1]) - j.baseline) / abs(j.baseline)
                if j.baseline is not None and j.baseline != 0 else None)
    floor_ok = all(c is None or sign * c > j.floor for c in (j.own_change, own_last))
    j.extras.carried = len(carried)
    final = final or j.extras.n_base < SEQUENTIAL_MIN_BASE
    v = sequential_step(j.extras.p_run_worse, x.size, final=final, level=params.level)
    if final:
        j.extras.rerun_level = FINAL_PAIR if x.size <= 2 else FINAL_MEAN
    held_at = j.extras.rerun_level if final else EARLY_HOLD
    # The mean's own test (unweighted p): the headline's interval states it where the
    # headline is that test, at the level over its weight
    j.extras.decided = Decided(f"mean of {x.size}", j.extras.p_run_worse, held_at, j.own_change,
                               held_at / j.extras.w_run if _headline(j) == "run" else None)
    if v == "suspect" or (v == "pass" and not final):
        return j, v
    if not floor_ok:  # an early hold short of the floor: rerun again; the last look passes
        return j, "pass" if final else "suspect"
    # The sequential confirm's baselines look independent (rho_lo = 0): the one-run
    # scale is s1 (s1c here is the scale of a mean of n).
    return j, _chain_check(j, v, first, reruns, scale=j.extras.s1, reference=_reference(history),
                           extra_var=judge_kw.get("extra_var", 0.0))
