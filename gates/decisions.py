"""From a judgement to a verdict: the level, the practical floor, confirm on trip.

``decide`` (evidence and a practical effect), ``level_for`` and
``is_suspect`` (what a first attempt is held to, and when it earns a rerun
without failing), ``confirm`` and ``confirm_reruns`` (the first and the later
stages of the sequential confirm of a tripped metric). Pure; design in ``gates.stats``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from gates.judge import (
    DEFAULTS,
    QUANTILE_RHO,
    QUANTILE_WEIGHT,
    GateParams,
    Judgement,
    judge_summaries,
)
from gates.robust import QN_EFF, empirical_bound, predictive_z_pvalue, subset_means

__all__ = [
    "decide",
    "independent",
    "level_for",
    "is_suspect",
    "confirm",
    "confirm_reruns",
    "corroborate",
    "split_p",
]


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
    pb = j.p_better if q_better is None else q_better
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
    """The first attempt's level for this judgement: ``level`` times
    ``params.independent_factor`` where the baseline looks independent and
    light-tailed (``independent``), where a trip earns the sequential confirm
    (``confirm`` with ``another``), which holds about 2% of null trips instead
    of 5%; ``level`` elsewhere, and on baselines shorter than
    ``params.sequential_min_base`` runs (a short autocorrelated baseline reads as
    independent by chance: AR(1) with 5 samples per run, whose run summaries are
    AR(1) plus noise, read so in 6% of 30-run baselines and 2.5% of 40-run ones,
    and about half of its null alarms over twelve benchmark seeds came from such
    baselines taking this level and the sequential confirm). Improvements keep
    ``level``."""
    if independent(j) and j.extras.n_base >= params.sequential_min_base:
        return min(1.0, level * params.independent_factor)
    return level


def is_suspect(j: Judgement, q_worse: float, *, params: GateParams = DEFAULTS,
               level: float | None = None) -> bool:
    """A first attempt short of a regression that still earns a confirm rerun.

    The new run alone (k = 1) reaches ``params.screen_level`` after the same
    Bonferroni weight and BH adjustment as the full test (its p is scaled by
    q / p of the metric), its change is beyond the practical floor, and the
    baseline looks serially independent (``rho_lo`` = 0: with autocorrelated
    runs a rerun shares the first attempt's state and is weak evidence). A
    suspect never fails a session by itself; it holds as a regression only
    when its rerun confirms (``confirm`` with ``suspect=True``). This raises
    first-bad-run detection without raising the level every run is held to.
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


def confirm(
    history: np.ndarray,
    rerun: float,
    *,
    sign: int,
    first: float | None = None,
    params: GateParams = DEFAULTS,
    n_trials: float | None = None,
    min_change: float | None = None,
    extra_var: float = 0.0,
    hosts: Sequence[str | None] | None = None,
    host: str | None = None,
    suspect: bool = False,
    another: bool = False,
    standin_last: bool = False,
) -> tuple[Judgement, str]:
    """Judge a confirm attempt: the rerun of a tripped metric, the first attempt excluded.

    ``history`` must not contain the first (tripped) attempt; ``first`` is its
    run summary. The rerun is judged like any run and must itself reach
    ``regression`` at ``params.confirm_level``: a one-sided test of the
    hypothesis the first attempt raised, so for independent run-level noise
    the pair's false-alarm rate is about level * confirm_level (sequential
    two-stage testing; Bauer & Koehne, Biometrics 50 (1994) 1029-1041). When
    the baseline looks serially independent (``rho_lo`` = 0), that hypothesis
    is the evidence window that decided the first attempt, and the rerun's p
    for that window is used as it is (the weights spread the first attempt's
    level over windows it had not chosen yet).

    A first attempt far above its rerun is a transient (a runner glitch), not
    a regime: the two attempts are two draws of one regime, so their
    difference has variance 2 (s1c^2 + extra_var); when the one-sided
    predictive-t p of first - rerun is <= ``params.consistency_level`` (0.01)
    the regression does not hold (a real change then trips again on the next
    run: about 1-2% of real changes, more under heavy tails, wait one run).
    Test: two-sample predictive t (Hahn & Meeker 1991, sec. 4.7) with the
    baseline's degrees of freedom. Its p is returned as ``extras.p_split``;
    at or below ``params.transient_level`` (0.001) the caller lets later
    baselines take the rerun's value for that run, so a glitch does not feed
    the windows of the runs after it.
    Assumptions: a real change affects both attempts alike; a rerun is an
    independent draw given the regime (and, under AR(1), the previous run).

    When the deciding evidence is a multi-run window, that window shares all
    its other runs with the first attempt, so the two attempts' own values
    must also lean the bad way: the mean of the first attempt and the rerun
    must have one-sided p <= ``params.confirm_run_level`` against single
    baseline runs, or (serially independent baselines) p <= ``params.pair_level``
    against the baseline's pair means (``judge_summaries(pair=True)``); the
    rerun alone when ``first`` is not given. When the first attempt's quantile
    test tripped (heavy-tailed or two-mode baselines), the rerun's quantile test
    must reach ``params.confirm_level`` and both attempts must lie beyond a
    point at most ``params.quantile_pair_level`` of baseline pairs reach
    (``quantile_p`` of the two). A ``suspect`` (``is_suspect``)
    holds only when that pair's mean (or, without ``first``, the rerun alone)
    reaches ``params.suspect_pair_level``.

    ``another``: another rerun may follow (sequential confirm). For a level
    trip (not a suspect, not a quantile trip, not a transient) of an
    independent, light-tailed baseline (``independent``), the rerun's own
    one-run p decides: above ``params.rerun_stop_level`` the rules above
    decide; at or below it the verdict is ``suspect``: rerun again and decide
    with ``confirm_reruns``. No first rerun holds alone: one clear enough to
    hold alone (p <= 0.0005 until the twelfth benchmark round) lies beyond
    every baseline run, where its p comes from the fitted tail alone, and t3
    reruns got there far more often than it said (six benchmark seeds:
    Student-t m=1 null FA 2.92 -> 1.92%); the second rerun costs a clear
    regression one more rerun (400 Gaussian draws, two reruns allowed: 1.16
    -> 1.73 reruns on average at a 5 SD shift, 1.56 -> 1.72 at 3 SD) and no
    power. For Gaussian noise this holds about 2% of null trips instead of
    5%, with more power at every shift (0.39 / 0.78 / 0.99 at 1.25 / 2 / 3
    SD, against 0.35 / 0.64 / 0.91 for one rerun at 0.05, known SD): a
    group-sequential design (Jennison & Turnbull, *Group Sequential Methods*,
    2000, ch. 2). Autocorrelated baselines keep one rerun (two
    reruns share the previous run's state), as do heavy-tailed ones (two
    reruns in a slow mode are ordinary there), except that there, and on
    baselines with 0 < ``rho_lo`` <= ``QUANTILE_RHO``, a held rerun beyond
    every baseline run is ``suspect`` with ``extras.corroborate`` and the
    next rerun decides (``corroborate``).
    ``standin_last`` (here and in ``corroborate``, ``confirm_reruns``): as
    ``judge_summaries``, the newest baseline run stands in for a transient.
    Returns (judgement, verdict of the rerun).
    """
    kw = dict(sign=sign, params=params, n_trials=n_trials, extra_var=extra_var,
              min_change=min_change, hosts=hosts, host=host, standin_last=standin_last)
    j = judge_summaries(history, rerun, first=first, **kw)
    rho_lo = j.extras.rho_lo
    iid = rho_lo == 0.0
    p_conf = j.p_worse
    s1c = j.extras.s1c
    p_split = 1.0
    if first is not None and j.status == "ok":
        # Same regime? The first attempt far worse than its rerun is a transient.
        p_split = split_p(first, [rerun], sign=sign, scale=s1c, extra_var=extra_var,
                          n_baseline=j.n_baseline, reference=_reference(history, params))
        j.extras.p_split = p_split
    # The first attempt is judged again where its quantile test may have run (the same
    # baseline, so the same rho_lo guard as ``judge_summaries``) or its window matters.
    if first is not None and rho_lo <= QUANTILE_RHO and j.status == "ok":
        jf = judge_summaries(history, first, **kw)
        if jf.extras.p_q_worse / QUANTILE_WEIGHT <= params.level:
            # The quantile test tripped: the rerun's own quantile test at the confirm
            # level, and both attempts beyond a point few baseline pairs reach.
            own = j.own_change
            held = (j.extras.p_q_worse <= params.confirm_level
                    and j.extras.p_q_pair <= params.quantile_pair_level
                    and (own is None or j.sign * own > j.floor))
            return j, _outlier_check(j, "regression" if held else "pass", another)
        if iid:
            k = jf.window
            p_conf = min(p_conf, (j.extras.p_run_worse if k == 1
                                 else j.extras.p_window_worse.get(k, 1.0)))
    v = decide(j, p_conf, level=params.confirm_level)
    consistent = not (params.consistency_level > 0 and p_split <= params.consistency_level)
    if v == "regression" and not consistent:
        v = "pass"
    if v == "regression" and (j.window > 1 or suspect):
        if first is None:
            hold = j.extras.p_run_worse <= (params.suspect_pair_level if suspect
                                               else params.confirm_run_level)
        else:
            mean = 0.5 * (first + rerun)

            def p_pair() -> float:  # against the baseline's pair means (iid baselines only)
                return (judge_summaries(history, mean, mean_of=2, **kw).extras.p_run_worse
                        if iid else 1.0)

            if suspect:
                hold = p_pair() <= params.suspect_pair_level
            else:
                single = judge_summaries(history, mean, **{**kw, "extra_var":
                                                             extra_var - 0.5 * s1c * s1c})
                hold = (single.extras.p_run_worse <= params.confirm_run_level
                        or p_pair() <= params.pair_level)
        if not hold:
            v = "pass"
    if another and not suspect and consistent and independent(j):
        # Sequential confirm, first stage (quantile trips returned above).
        # No rerun holds alone here: one clear enough lies beyond every baseline run,
        # where its p rests on the fitted tail (Student-t reruns got there far more often
        # than it said), so another rerun follows and the clipped mean decides.
        if j.extras.p_run_worse <= params.rerun_stop_level:
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
                 sign: int, scale: float, extra_var: float, params: GateParams,
                 reference: np.ndarray | None = None) -> str:
    """A chain of reruns that would hold only at a borderline p, while its first
    attempt is a transient against their mean, does not hold.

    ``confirm`` tells a glitch from a regime by the first rerun alone
    (``consistency_level``); a chain of two to four reruns pins the regime far
    better, and where its mean holds only at the last stage (p above
    ``rerun_mean_hold_level``) the first attempt, which selected the metric, must
    also be one draw of that regime: split p of first against the mean of all n
    reruns above ``consistency_level``. Why: a glitch makes a trip certain and
    its clean reruns, high by chance, then held as often as a null trip's
    (gauss3, 5 samples a run: +0.38 points of spike false alarms over twelve
    benchmark seeds; fifteenth round). Reruns clear on their own hold whatever
    the first attempt was (a 20% step at 1% noise holds its two reruns' mean at
    p ~ 2e-4: no first-bad-run detection is lost there), and heavy-tailed
    baselines are left out (a gap between a slow-mode first attempt and
    fast-mode reruns is ordinary there: H200 5 samples 20% step, first bad run
    71.5 -> 70.0% with them). ``extras.p_split`` gets the split p and
    ``extras.chain_transient`` set where it turned a hold into a pass.
    """
    if (v != "regression" or first is None or j.status != "ok" or j.extras.heavy
            or params.consistency_level <= 0
            or j.extras.p_run_worse <= params.rerun_mean_hold_level):
        return v
    p = split_p(first, reruns, sign=sign, scale=scale, extra_var=extra_var,
                n_baseline=j.n_baseline, reference=reference)
    j.extras.p_split = p
    if p <= params.consistency_level:
        j.extras.chain_transient = True
        return "pass"
    return v


def _reference(history: np.ndarray, params: GateParams) -> np.ndarray:
    """The baseline runs a transient test ranks its gap among (the newest ``window``)."""
    h = np.asarray(history, dtype=float)
    return h[np.isfinite(h)][-params.window:]


def _outlier_check(j: Judgement, v: str, another: bool) -> str:
    """A held rerun beyond every baseline run, where another rerun may follow, is
    ``suspect`` with ``extras.corroborate`` (the next rerun decides, ``corroborate``)
    on a heavy-tailed baseline, or on one with a small positive lag-1 bound
    (0 < ``rho_lo`` <= ``QUANTILE_RHO``), which keeps one rerun (no sequential
    confirm): there the clean rerun after a +20% spike, high by chance, held alone
    (twelve benchmark seeds, 2,400 series a cell: Student-t m=1 spikes 2.25 -> 1.79%,
    gauss3 m=5 1.96 -> 1.83%; fourteenth round)."""
    rho_lo = j.extras.rho_lo
    if (another and v == "regression" and j.extras.beyond
            and (j.extras.heavy or 0.0 < rho_lo <= QUANTILE_RHO)):
        j.extras.corroborate = True
        return "suspect"
    return v


def corroborate(
    history: np.ndarray,
    rerun: float,
    *,
    sign: int,
    params: GateParams = DEFAULTS,
    n_trials: float | None = None,
    min_change: float | None = None,
    extra_var: float = 0.0,
    hosts: Sequence[str | None] | None = None,
    host: str | None = None,
    standin_last: bool = False,
    first: float | None = None,
    previous: float | None = None,
) -> tuple[Judgement, str]:
    """The rerun after a first rerun that ``confirm`` held but found beyond every run
    of a heavy-tailed baseline (``extras.corroborate``).

    On such a baseline one draw beyond every run seen is what its tail does about
    once in n + 1 draws, and the confirm's p for it comes from the rank and tail
    bounds, which are least sure exactly there (on the resampled H200 noise, a
    power-cap dip of one sample a run 3-10 run scales out: 11 of 12 H200 m=1
    false alarms on the spike run itself, tenth round). So the next rerun, an
    independent draw of the regime, must lean the same way: the regression holds
    only if it ranks among the worst ``params.corroborate_rank`` of the
    baseline runs its k = 1 test is judged against (rank p = (1 + #{runs at
    least as bad}) / (n + 1), ``extras.rank_worse``; the AR(1) residuals
    where the judge predicts one step ahead). Under no change the rank p is uniform, so this holds
    ``corroborate_rank`` of such trips; a shifted regime leans bad even from its
    fast mode (bimodal step 20%: judged alone at the confirm level, that
    second rerun passed too often, tenth round). ``history`` holds neither the
    first attempt nor the earlier rerun. ``first`` and ``previous`` (the first
    attempt and the earlier rerun), when given: on a baseline that is not
    heavy-tailed (0 < ``rho_lo`` <= ``QUANTILE_RHO``), a hold this rerun is not
    clear on its own about also needs the first attempt to be one draw of the
    regime of the two reruns (``_chain_check``). Returns (judgement of the
    rerun, verdict).
    """
    j = judge_summaries(history, rerun, sign=sign, params=params, n_trials=n_trials,
                        min_change=min_change, extra_var=extra_var, hosts=hosts, host=host,
                        standin_last=standin_last)
    if j.status != "ok":
        return j, j.status
    p_rank = j.extras.rank_worse
    v = "regression" if p_rank <= params.corroborate_rank else "pass"
    if previous is not None:
        v = _chain_check(j, v, first, [previous, rerun], sign=sign,
                         reference=_reference(history, params),
                         scale=j.extras.s1c, extra_var=extra_var,
                         params=params)
    return j, v


def confirm_reruns(
    history: np.ndarray,
    reruns: Sequence[float],
    *,
    sign: int,
    final: bool = True,
    params: GateParams = DEFAULTS,
    n_trials: float | None = None,
    min_change: float | None = None,
    extra_var: float = 0.0,
    hosts: Sequence[str | None] | None = None,
    host: str | None = None,
    carried: Sequence[float] = (),
    standin_last: bool = False,
    first: float | None = None,
) -> tuple[Judgement, str]:
    """Later stages of the sequential confirm (``confirm`` with ``another``).

    ``reruns`` (2 or more, oldest first: the first was borderline) are
    independent draws of the run's regime; ``history`` holds none of them nor
    the first attempt, which is left out because it was selected for being
    high. Their mean, each rerun clipped to ``params.rerun_clip`` run scales
    from the baseline's centre (one rerun in a power-cap dip must not carry
    it), is judged against the means of as many baseline runs
    (``judge_summaries(mean_of=len(reruns))``: the variance of a mean of n
    runs, ranks among means of n baseline runs). ``final`` (no rerun left),
    or a baseline shorter than ``params.sequential_min_base`` runs: the
    regression holds at p <= ``params.rerun_pair_level`` for two reruns,
    ``params.rerun_mean_level`` for more. Otherwise it holds at
    p <= ``params.rerun_mean_hold_level``, passes at
    p > ``params.rerun_mean_stop_level`` and is ``suspect`` (rerun again) in
    between. A held regression also needs the mean and the newest rerun
    beyond the practical floor.
    Design: a group-sequential test with early stopping on both sides
    (Jennison & Turnbull, *Group Sequential Methods*, 2000, ch. 2, 4). With
    the first stage of ``confirm`` and at most 4 reruns, for Gaussian noise
    and a known scale, it holds about 2% of null trips, as two reruns do, and
    has power 0.46 / 0.65 / 0.80 / 0.95 at shifts of 1 / 1.25 / 1.5 / 2 run
    SDs against 0.26 / 0.38 / 0.52 / 0.78 for two (300,000 draws); with 40
    estimated baseline runs, the practical floor on the newest rerun and the
    independence checks, less (``tests/test_stats.py``).
    ``carried``: reruns of this metric's sequential confirms that did not hold
    at recent earlier runs (oldest first; ``gates.gate`` reads those of the
    last ``max(params.windows)`` baseline runs). They join the mean as further
    reruns. Only first attempts are selected for being high; a chain that
    went on past its first rerun had that rerun short of clear (p <= 0.46),
    and one that did not hold ended low, so under no change they are about as
    good a sample of the regime as fresh ones (null false alarms over six
    benchmark seeds: the same or lower in every cell); under a sustained
    shift they carry its evidence from one trip to the next, as a CUSUM
    carries its sum. Like a third rerun, they count only on baselines of
    ``params.sequential_min_base`` runs or more (shorter autocorrelated
    baselines read as independent by chance, and reruns of neighbouring runs
    then share their state); ``extras.carried`` is how many counted.
    ``first``: the first attempt's summary, when given: a hold short of
    ``params.rerun_mean_hold_level`` also needs the first attempt to be one
    draw of the regime of this run's reruns (``_chain_check``; carried reruns
    come from other runs and are left out of that test).
    Assumptions: the baseline looks independent and light-tailed (what the
    first stage checked); reruns share nothing but the regime.
    Returns (judgement of the mean, verdict); where the reruns decided
    outright, ``extras.rerun_level`` is the level they were held to.
    """
    if len(reruns) < 2:
        raise ValueError("confirm_reruns needs at least two reruns; use confirm for one")
    kw = dict(sign=sign, params=params, n_trials=n_trials, extra_var=extra_var,
              min_change=min_change, hosts=hosts, host=host, standin_last=standin_last)
    x = np.asarray([*carried, *reruns], dtype=float)
    j = judge_summaries(history, float(x.mean()), mean_of=x.size, **kw)
    if carried and j.extras.n_base < params.sequential_min_base:
        carried = ()  # a short baseline: this run's own reruns only
        x = np.asarray(reruns, dtype=float)
        j = judge_summaries(history, float(x.mean()), mean_of=x.size, **kw)
    n = x.size
    if j.status != "ok":
        return j, j.status
    if params.rerun_clip > 0:
        # One rerun far out (a power-cap dip, a runner glitch) must not carry the mean:
        # each counts at most ``rerun_clip`` run scales from the baseline's centre.
        mu, lim = j.extras.mu1, params.rerun_clip * j.extras.s1
        xc = np.clip(x, mu - lim, mu + lim)
        if not np.array_equal(xc, x):
            j = judge_summaries(history, float(xc.mean()), mean_of=n, **kw)
    last = float(reruns[-1])
    own_last = ((last - j.baseline) / abs(j.baseline)
                if j.baseline is not None and j.baseline != 0 else None)
    floor_ok = ((j.own_change is None or sign * j.own_change > j.floor)
                and (own_last is None or sign * own_last > j.floor))
    j.extras.carried = len(carried)
    p = j.extras.p_run_worse
    if final or j.extras.n_base < params.sequential_min_base:
        lv = params.rerun_pair_level if n == 2 else params.rerun_mean_level
        j.extras.rerun_level = lv  # decided outright, at this level (the gate reports it)
        v = "regression" if p <= lv and floor_ok else "pass"
    elif p <= params.rerun_mean_hold_level and floor_ok:
        v = "regression"
    else:
        return j, "pass" if p > params.rerun_mean_stop_level else "suspect"
    # The sequential confirm's baselines look independent (rho_lo = 0): the one-run
    # scale is s1 (s1c here is the scale of a mean of n).
    return j, _chain_check(j, v, first, reruns, sign=sign, scale=j.extras.s1,
                           reference=_reference(history, params),
                           extra_var=extra_var, params=params)
