"""Judging one run of one metric against the run-to-run spread of past runs.

``judge_summaries`` is the test (design: ``gates.stats``), in named steps:
the baseline, its serial dependence, the new run alone, the windows, the
quantile test, the headline. ``gates.summaries`` reduces runs of samples to
the summaries it reads. Pure numpy/scipy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import special

from gates.machines import UNGUARDED_CV, MachineModel, labels_of, machine_model
from gates.robust import (
    HALF_PI,
    HUBER_VAR,
    QN_EFF,
    ar1_variance_factor,
    bootstrap_idx,
    center_scale,
    empirical_bound,
    huber_location,
    predictive_z_pvalue,
    quantile_p,
    rho_bounds,
    rho_var,
    robust_scale,
    rolling_idx,
    subset_means,
    tail_bound,
)

__all__ = [
    "PAIR_TAIL",
    "QUANTILE_K",
    "QUANTILE_WEIGHT",
    "GateParams",
    "DEFAULTS",
    "Decider",
    "Judgement",
    "JudgeExtras",
    "judge_summaries",
]

PAIR_TAIL = 2.0  # 3+ baseline runs this many scales on the bad side: a heavy tail or second mode
QUANTILE_K = 7  # runs whose minimum (bad direction) the quantile test judges
QUANTILE_WEIGHT = 0.1  # its share of the level, taken from the windows, where it applies
QUANTILE_RHO = 0.2  # ... on baselines whose cautious lag-1 autocorrelation (rho_lo) is at most
# this (two-mode baselines read as autocorrelated by chance; docs/gates/calibration.md)


@dataclass(frozen=True)
class GateParams:
    """The gate's user-visible settings, by stage; ``level`` and ``min_change`` can be
    declared per metric. The model's other constants: ``gates.decisions`` and
    ``docs/gates/calibration.md``."""

    # First attempt
    level: float = 0.02  # BH false discovery level across a run's metrics
    screen_level: float = 0.05  # new run alone: a suspect (rerun, never fails alone)
    window: int = 40  # baseline runs
    windows: tuple[int, ...] = (1, 3, 10)  # evidence windows (runs, newest last)
    min_history: int = 5  # fewer trusted runs -> insufficient-history
    noise_floor: float = 0.5  # practical floor, in units of run-to-run CV
    min_change: float = 0.0  # declared relative practical floor
    # Confirm reruns
    confirm_level: float = 0.05  # level the first rerun must reach on its own
    confirm_attempts: int = 4  # reruns at most (the runner's --confirm)


DEFAULTS = GateParams()


@dataclass(slots=True)
class JudgeExtras:
    """What the judge's tests found beyond the headline (read by ``gates.decisions``).

    Mutable: the confirm stages add their own findings (``p_split`` onwards) to
    the judgement they return. Defaults are what a judgement that did not run
    the test reads (``insufficient-history``, ``unguarded``).
    """

    p_run_worse: float = 1.0  # the new run alone (k = 1): one-sided p, bad direction
    p_run_better: float = 1.0  # ... good direction
    w_run: float = 1.0  # its Bonferroni weight among the windows
    rho: float = 0.0  # lag-1 autocorrelation (bias-corrected point estimate)
    rho_hi: float = 0.0  # its cautious upper bound (windows use it)
    rho_lo: float = 0.0  # its cautious lower bound (> 0: predicted one step ahead)
    s1: float = 0.0  # run-to-run scale corrected for autocorrelation
    s1c: float = 0.0  # scale of the k = 1 prediction (conditional; of a mean of mean_of)
    mu1: float = float("nan")  # the k = 1 prediction of the new run
    n_base: int = 0  # baseline runs
    heavy: bool = False  # 3+ baseline runs beyond PAIR_TAIL scales on the bad side
    machines: int = 0  # machines the baseline names (0: runs carry no machine)
    beyond: bool = False  # the value lies beyond every baseline run (bad side)
    rank_worse: float = 1.0  # its rank p among them: (1 + #{as bad or worse}) / (n + 1)
    p_window_worse: dict[int, float] = field(default_factory=dict)  # k-run window -> its p, bad side
    quantile: bool = False  # the quantile test ran (the three p_q below are its)
    p_q_worse: float = 1.0  # quantile test, bad direction
    p_q_better: float = 1.0  # ... good direction
    p_q_pair: float = 1.0  # ... of the first attempt and this rerun together
    new_host: bool = False  # the run's machine has no run in the baseline
    host_var: float = 0.0  # between-machine variance allowed for it
    host_var_known: bool = False  # ... known (the baseline names 2+ machines)
    p_split: float = 1.0  # confirm: p that the first attempt is a transient against its reruns
    chain_transient: bool = False  # ... and that turned a hold into a pass (_chain_check)
    corroborate: bool = False  # a held rerun beyond every baseline run: the next rerun decides
    carried: int = 0  # confirm_reruns: reruns carried from earlier unheld confirms
    rerun_level: float | None = None  # ... the level the reruns were held to, where they decided


@dataclass(frozen=True, slots=True)
class Decider:
    """The deciding test's evidence, enough to show its interval at any level.

    Its p-values already carry the rank and tail bounds, so its interval is the
    t-interval of the relative change widened to agree with them: the standard
    error is at least ``|rel| / z_side``, where z_side is the t-quantile of the
    bounded p of the side the change lies on. The interval then excludes 0
    exactly where that p is below the level (test inversion under a location
    shift; Lehmann & Romano, *Testing Statistical Hypotheses*, 3rd ed., 2005,
    sec. 3.5).
    """

    rel: float  # relative change of the deciding window (as ``Judgement.rel_change``)
    se_rel: float  # its t standard error, relative to the same centre
    df: float  # t degrees of freedom
    weight: float  # its Bonferroni share of the level
    p_up: float  # its bounded one-sided p of a rise (unweighted)
    p_down: float  # ... of a fall

    def interval(self, level: float) -> tuple[float, float] | None:
        """The two-sided interval at one-sided ``level`` on the weighted-p scale (what
        the metric's p is compared with); None where unbounded (its side's p >= 1/2)."""
        alpha = min(max(level * self.weight, 1e-300), 0.5)
        p_side = self.p_up if self.rel >= 0 else self.p_down
        z_side = float(special.stdtrit(self.df, 1.0 - p_side)) if p_side < 0.5 else 0.0
        if not z_side > 0.0:
            return None
        se = max(self.se_rel, abs(self.rel) / z_side)
        t = float(special.stdtrit(self.df, 1.0 - alpha))
        return self.rel - t * se, self.rel + t * se

    def confidence(self, level: float) -> float:
        """The two-sided confidence of ``interval(level)``."""
        return 1.0 - 2.0 * min(max(level * self.weight, 0.0), 0.5)


@dataclass(frozen=True)
class Judgement:
    """What the statistics say about one metric of one run (before BH)."""

    status: str  # "ok" (judged) or "insufficient-history"
    baseline: float | None
    value: float
    rel_change: float | None  # (value - baseline) / |baseline| of the deciding window
    ci: tuple[float, float] | None  # 95% CI of rel_change
    z: float  # signed: > 0 means worse
    p_worse: float  # one-sided p of a change in the bad direction (Bonferroni over windows)
    p_better: float  # one-sided p of a change in the good direction
    floor: float  # relative practical floor used
    window: int  # runs in the deciding evidence window
    n_baseline: int
    own_change: float | None  # the new run's own relative change
    sign: int = 1  # +1: an increase is bad (lower is better); -1: a decrease is bad
    statistic: str = "robust-t"
    scale: float = float("nan")  # run-to-run scale (absolute units)
    extras: JudgeExtras = field(default_factory=JudgeExtras)
    reason: str = ""  # why the model could not judge (status ``unguarded``)
    decider: Decider | None = None  # the deciding test (status "ok"): its interval at a level

    @property
    def p(self) -> float:
        """The p-value of the observed direction."""
        return self.p_worse if (self.z >= 0) else self.p_better


def judge_summaries(
    history: np.ndarray,
    value: float,
    *,
    sign: int,
    params: GateParams = DEFAULTS,
    n_trials: float | None = None,
    extra_var: float = 0.0,
    min_change: float | None = None,
    hosts: Sequence[str | None] | None = None,
    host: str | None = None,
    mean_of: int = 1,
    first: float | None = None,
    standin_last: bool = False,
) -> Judgement:
    """Judge a new run summary ``value`` against past run summaries (oldest first).

    ``sign`` is +1 when an increase is bad (lower is better), -1 otherwise.
    ``extra_var`` is added to the new run's variance (fewer samples than usual).
    ``hosts`` (aligned with ``history``) and ``host`` name the machine of each
    run (``provenance.host_key``); when the new run's machine has no run in the
    baseline, its prediction variance gains the between-host component
    (``host_variance``), so a machine a little slower than the ones seen
    before is not a regression of the code.

    Tests: robust predictive t-tests (``predictive_z_pvalue``) of the new run
    (k=1, against the last ``window`` runs) and of the Huber location of the
    last 3 and 10 runs (against the ``window`` runs before the last 10),
    Bonferroni combined (Holm, Scand. J. Stat. 6 (1979) 65-70). Centre =
    median, scale = Qn, t degrees of freedom = 0.82 (n - 1) (Qn's efficiency).
    Each p-value is bounded below by an empirical rank p when the baseline
    already produced a value (or rolling k-run location) as extreme: a level
    the noise has produced before (a second mode, an old spike) is not
    evidence. Window variances are inflated for lag-1 autocorrelation, read
    from the windows' baseline and the runs between it and the new one, each
    segment about its own centre (``lag1_autocorr(tail=...)``): on a short
    history (runs 30-38 of a series have a 21-29-run baseline) that is 9 more
    runs to tell autocorrelated from independent, and a change among the
    recent runs does not read as autocorrelation. The
    k = 1 test, where a cautious lower bound of the lag-1 autocorrelation is
    above 0 (``rho_lower``; iid-looking baselines keep the plain test),
    predicts the new run one step ahead, c + rho (x_prev - c) with the
    bias-corrected rho and x_prev clipped to c +/- 3 scales; its scale is the
    Qn of the baseline's one-step residuals, at least the conditional scale
    s1 sqrt(1 - rho^2), with 0.82 (n - 2) degrees of freedom, and its
    empirical and tail bounds use those residuals (Box, Jenkins & Reinsel,
    *Time Series Analysis*, 4th ed., 2008, sec. 5.2: AR(1) forecast and its
    error variance).
    Assumptions: baseline runs exchangeable up to AR(1) dependence; the
    change of interest is a shift in location.

    ``mean_of``: ``value`` is the mean of that many attempts of one run (a
    first attempt and its confirm rerun, or confirm reruns). The attempts share
    what the previous run predicts beyond rho_lo (cautious rho_hi), the rest of
    their noise is divided by ``mean_of``; the k = 1 rank and tail bounds use
    the means of ``mean_of``-subsets of baseline runs (``subset_means``), unless
    the baseline's bad-side tail is heavier than Gaussian (3 or more runs
    beyond ``PAIR_TAIL`` scales), where a pair of slow runs is ordinary and
    single runs stay the reference.

    Heavy-tailed or two-mode baselines (3 or more runs beyond ``PAIR_TAIL``
    scales on the bad side) with at most mild signs of autocorrelation
    (rho_lo <= ``QUANTILE_RHO``) add a quantile test (``quantile_p``): the
    least bad of the last ``QUANTILE_K`` runs against the baseline, exact
    under exchangeability. (rho_lo is a cautious lower bound, above 0 by
    chance in a quarter of independent Gaussian 40-run baselines and, as
    skew reads as autocorrelation to ``lag1_autocorr``, in most two-mode
    ones; strong AR(1), where an excursion keeps several runs high
    together, stays out.) A slow second
    mode moves a window's robust location but not its minimum, so a shifted
    main mode shows there; it takes ``QUANTILE_WEIGHT`` of the level from the
    windows (weights depend on the baseline only). ``first``: the first
    attempt of the run ``value`` reruns; the judgement then also carries
    ``p_q_pair``, the quantile p of the two attempts (``confirm``).

    ``standin_last``: the newest history value is a confirm rerun standing in
    for a transient first attempt (``gates.baselines``). Under AR(1) the
    rerun and the run it replaces are two draws given the state before (two
    independent innovations), so the one-step prediction from it gains
    rho^2 * 2 s1c^2 of variance (a glitch's clean rerun, lower than the state
    it hides, would make the next run look high).
    """
    h, hl, standin_last = _finite_runs(history, hosts, host, standin_last)
    min_change = params.min_change if min_change is None else min_change
    if h.size < params.min_history:
        return Judgement(
            "insufficient-history", float(np.median(h)) if h.size else None, value,
            None, None, 0.0, 1.0, 1.0, min_change, 1, int(h.size), None, sign,
        )
    b = _baseline(h, value, params, n_trials, hl, host)
    why = _unguarded_reason(b)
    if why:
        return _unguarded(h, value, b.c, sign, min_change, why)
    sr = _serial(b)
    r = _run_test(b, sr, value, sign=sign, extra_var=extra_var, mean_of=mean_of,
                  standin_last=standin_last)
    w, quant = _test_weights(b, sr, r.heavy)
    # (the candidates' order breaks ties: the new run, then the windows, then the quantile)
    cands = [_Candidate(min(r.pw, r.pb) / w[0], r.pw / w[0], r.pb / w[0], 1, b.c, value,
                        r.se, r.z, r.df, "run", w[0])]
    p_win: dict[int, float] = {}
    for i, k in enumerate(b.ks, start=1):
        cand, p_win[k] = _window_test(b, sr, k, w[i], sign)
        cands.append(cand)
    pq_w = pq_b = pq_pair = 1.0
    if quant:
        cand, pq_w, pq_b, pq_pair = _quantile_test(b, sr, sign, value, first)
        cands.append(cand)
    best = min(cands, key=lambda t: t.p)
    rel, own, ci, floor = _headline(best, b, value, min_change, params)
    new_host = b.mm is not None and host is not None and host not in b.mm.known
    return Judgement(
        "ok", b.c, value, _nan_none(rel), None if rel != rel else ci, float(best.z),
        min(1.0, min(x.pw for x in cands)), min(1.0, min(x.pb for x in cands)), float(floor),
        best.k, int(h.size), _nan_none(own), sign, statistic=f"robust-t/{best.method}",
        decider=_decider(best, rel, sign),
        scale=b.s, extras=JudgeExtras(
            p_run_worse=r.pw, p_run_better=r.pb, w_run=w[0], rho=sr.rho, rho_hi=sr.rho_hi,
            rho_lo=sr.rho_lo, s1=sr.s1, s1c=r.s1c, mu1=r.mu1, n_base=int(b.n), heavy=r.heavy,
            machines=b.mm.groups if b.mm is not None else 0,
            # The value beyond every baseline run: on a heavy-tailed baseline
            # a confirm rerun this far out is corroborated (decisions.corroborate).
            beyond=r.worse == 0,
            # ... and its rank among them: (1 + #{as bad or worse}) / (n + 1).
            rank_worse=(r.worse + 1) / (r.n_ref + 1),
            p_window_worse=p_win, quantile=bool(quant), p_q_worse=pq_w, p_q_better=pq_b,
            p_q_pair=pq_pair, new_host=new_host,
            host_var=b.mm.run_var(b.lab_new) - b.mm.within2 if new_host else 0.0,
            host_var_known=new_host),
    )


class _Candidate(NamedTuple):
    """One test's evidence: its weighted p (both directions' smaller), what it estimates."""

    p: float  # min(pw, pb): the candidate with the smallest decides the headline
    pw: float  # weighted one-sided p, bad direction
    pb: float  # ... good direction
    k: int  # runs in its window
    centre: float  # what the estimate is compared with
    est: float  # the window's estimate (the new run, a Huber location, a least-bad run)
    se: float  # the estimate's standard error about ``centre``
    z: float  # signed: > 0 means worse
    df: float  # t degrees of freedom for the CI
    method: str  # "run", "huber-k", "quantile-k"
    weight: float  # its Bonferroni share of the level (p = unweighted p / weight)


@dataclass(frozen=True, slots=True)
class _Baseline:
    """The runs every test reads: one baseline for all windows, and its machines."""

    h: np.ndarray  # finite past run summaries, oldest first
    full: np.ndarray  # ... and the new run
    base: np.ndarray  # the baseline: the ``window`` runs before the last kmax
    base_end: int  # index in ``h`` just past the baseline
    tail: np.ndarray | None  # the runs between the baseline and the new one
    ks: list[int]  # evidence windows beyond the new run alone
    n: int  # baseline runs
    c: float  # its centre (median)
    s: float  # its run-to-run scale (Qn)
    lab: list[str] | None  # every run's machine label (the new run last); None: unnamed
    mm: MachineModel | None  # the machine model over the baseline and the runs after it
    lab_new: str  # the new run's machine label


def _finite_runs(history: np.ndarray, hosts: Sequence[str | None] | None, host: str | None,
                 standin_last: bool) -> tuple[np.ndarray, list[str | None] | None, bool]:
    """The finite past run summaries, their machines (None: no run names one) and
    whether the newest stands in for a transient first attempt."""
    h = np.asarray(history, dtype=float)
    finite = np.isfinite(h)
    standin_last = standin_last and finite.size > 0 and bool(finite[-1])
    h = h[finite]
    hl = None
    if hosts is not None and len(hosts) == finite.size and (
            host is not None or any(x is not None for x in hosts)):
        hl = (list(hosts) if finite.all()
              else [x for x, f in zip(hosts, finite, strict=True) if f])
    return h, hl, standin_last


def _baseline(h: np.ndarray, value: float, params: GateParams, n_trials: float | None,
              hl: list[str | None] | None, host: str | None) -> _Baseline:
    """One baseline for every window: the W runs before the last kmax, so that the
    first runs of a sustained change never dilute the reference they are judged
    against (short histories fall back to the last W runs)."""
    W = params.window
    ks = [k for k in params.windows if k > 1]
    kmax = max(ks, default=1)
    full = np.append(h, value)
    if ks and h.size - (kmax - 1) >= params.min_history:
        base = full[-kmax - W : -kmax]
        base_end = h.size + 1 - kmax
        tail = full[-kmax:-1]
    else:
        base, ks = h[-W:], []
        base_end = h.size
        tail = None
    n = base.size
    c, s = center_scale(base, n_trials)
    # Machines (a history whose runs name theirs): every run's offset is unknown about
    # the baseline's centre (``gates.machines``).
    lab = labels_of([*hl, host]) if hl is not None else None
    # Estimated over the baseline and the runs after it (every run before the new one):
    # the recent runs are where a growing pool shows its new machines.
    mm = (machine_model(h[base_end - n :], lab[base_end - n : h.size], s, n)
          if lab is not None else None)
    return _Baseline(h, full, base, base_end, tail, ks, n, c, s, lab, mm,
                     lab[-1] if lab is not None else "")


def _unguarded_reason(b: _Baseline) -> str | None:
    """Why the machine model says the metric cannot be guarded on this run, if it does."""
    mm, lab, c = b.mm, b.lab, b.c
    if mm is None or lab is None:
        return None
    if mm.tau2 is None and any(x != b.lab_new for x in lab[b.base_end - b.n:]):
        return ("machine spread unknown: the runs before name fewer than two machines, "
                "and not all are this run's")
    # (A spread relative to the level means something on a ratio scale only: every run
    # on the centre's side of 0.)
    if (math.sqrt(mm.run_var(b.lab_new)) > UNGUARDED_CV * abs(c)
            and bool(np.all(b.base * c > 0))):
        return ("run-to-run spread across machines "
                f"{100 * math.sqrt(mm.run_var(b.lab_new)) / abs(c):.0f}% of the "
                "metric: no change worth guarding stands out of it")
    return None


@dataclass(frozen=True, slots=True)
class _Serial:
    """The baseline's serial dependence and the scales it implies."""

    rho: float  # lag-1 autocorrelation, bias-corrected
    rho_hi: float  # cautious upper bound (the windows use it)
    rho_lo: float  # cautious lower bound (> 0: the new run is predicted one step ahead)
    s1: float  # run-to-run scale, corrected for autocorrelation
    cvar: float  # variance of the centre
    df: float  # t degrees of freedom of the scale
    s_w: float  # ... the same three with the cautious rho_hi, for the windows
    cvar_w: float
    df_w: float


def _serial(b: _Baseline) -> _Serial:
    """Serial dependence read from the baseline and the runs after it, each about its
    own centre: 9 more runs (on runs 30-38 the baseline has only 21-29), and a change
    among the recent runs does not read as dependence (``lag1_autocorr``).
    Autocorrelated runs: the sample scale is biased low by about AR(rho, n) / n and
    worth fewer degrees of freedom (Bayley & Hammersley, JRSS B 8 (1946) 184-197)."""
    n, s = b.n, b.s
    rho, rho_hi, rho_lo = rho_bounds(b.base, b.c, s, b.tail)
    f = ar1_variance_factor(rho, n)
    s1 = s / math.sqrt(max(0.3, 1.0 - f / n))
    cvar = HALF_PI * s1 * s1 / n * f
    df = max(QN_EFF * (n - 1) * (1 - rho) / (1 + rho), 2.0)
    # Windows sum runs, so under-estimated autocorrelation makes them over-confident:
    # they use the cautious rho throughout.
    f_w = ar1_variance_factor(rho_hi, n)
    s_w = s / math.sqrt(max(0.3, 1.0 - f_w / n))
    cvar_w = HALF_PI * s_w * s_w / n * f_w
    df_w = max(QN_EFF * (n - 1) * (1 - rho_hi) / (1 + rho_hi), 2.0)
    return _Serial(rho, rho_hi, rho_lo, s1, cvar, df, s_w, cvar_w, df_w)


@dataclass(frozen=True, slots=True)
class _RunTest:
    """The k = 1 test: the new run alone against its one-step prediction."""

    mu1: float  # the prediction
    s1c: float  # its scale (conditional under AR(1); of a mean of ``mean_of``)
    se: float  # the prediction error's standard error
    z: float  # signed: > 0 means worse
    df: float  # t degrees of freedom
    pw: float  # one-sided p, bad direction (after the rank and tail bounds)
    pb: float  # ... good direction
    worse: int  # reference runs as bad as the new run or worse
    n_ref: int  # reference runs (baseline runs, residuals or subset means)
    heavy: bool  # 3+ reference runs beyond PAIR_TAIL scales on the bad side


def _run_test(b: _Baseline, sr: _Serial, value: float, *, sign: int, extra_var: float,
              mean_of: int, standin_last: bool) -> _RunTest:
    """Predict the new run one step ahead under AR(1) where the baseline is clearly
    autocorrelated (rho_lo > 0; iid-looking runs keep the plain test) and test it."""
    c, s, n, s1, rho = b.c, b.s, b.n, sr.s1, sr.rho
    df1, cvar1 = sr.df, sr.cvar
    if sr.rho_lo > 0 and b.h.size >= 1:
        # Predict with the point estimate: a lower bound under-predicts after a high
        # run, and a rerun shares that error with its first attempt. The scale is
        # the one-step residuals' own (at least what the marginal scale implies),
        # worth n - 2 degrees of freedom: residuals are nearly independent, unlike
        # the runs whose AR-reduced df the windows use.
        lo, hi = c - 3.0 * s, c + 3.0 * s
        xp = min(max(float(b.h[-1]), lo), hi) - c
        mu1 = c + rho * xp
        res = (b.base[1:] - c) - rho * (np.clip(b.base[:-1], lo, hi) - c)
        s1c = max(robust_scale(res), s1 * math.sqrt(1.0 - rho * rho))
        dev_1 = sign * res
        df1 = max(QN_EFF * (n - 2), 2.0)
        # Prediction error beyond the residuals: the centre enters with weight
        # 1 - rho, and rho's own error (se^2 ~ (1 - rho^2) / n) scales with x_prev - c.
        cvar1 = sr.cvar * (1.0 - rho) ** 2 + xp * xp * rho_var(rho, n)
        if standin_last:  # x_prev is a rerun standing in for the run: another innovation
            cvar1 += 2.0 * rho * rho * s1c * s1c
    else:
        mu1, s1c, dev_1 = c, s1, sign * (b.base - c)
    u1 = 3.0 * s1c  # where the exponential tail bound starts
    # A heavy bad-side tail or second mode: pairs of slow runs are ordinary (no pair
    # means), and a window's minimum says more than its location (quantile test).
    heavy = int(np.count_nonzero(dev_1 > PAIR_TAIL * s1c)) >= 3
    # The run's machine offset beyond what the one-run scale holds; attempts of one run
    # share it (a rerun runs on the same machine), so it is not divided by ``mean_of``.
    m_var1 = max(0.0, b.mm.run_var(b.lab_new) - s1c * s1c) if b.mm is not None else 0.0
    if mean_of > 1:
        s1c = s1 * math.sqrt(max(sr.rho_hi - sr.rho_lo, 0.0) ** 2
                             + (1.0 - sr.rho_hi * sr.rho_hi) / mean_of)
        if not heavy:
            dev_1, u1 = subset_means(dev_1, mean_of), 3.0 * s1c
    se1 = math.sqrt(max(s1c * s1c + cvar1 + extra_var + m_var1, 1e-300))
    d1 = sign * (value - mu1)
    z1 = d1 / se1
    pw1, pb1 = predictive_z_pvalue(z1, df1), predictive_z_pvalue(-z1, df1)
    pw1, pb1 = empirical_bound(dev_1, d1, pw1, pb1)
    pw1, pb1 = tail_bound(dev_1, d1, u1, pw1, pb1)
    return _RunTest(mu1, s1c, se1, z1, df1, pw1, pb1, int(np.count_nonzero(dev_1 >= d1)),
                    int(dev_1.size), heavy)


def _test_weights(b: _Baseline, sr: _Serial, heavy: bool) -> tuple[tuple[float, ...], bool]:
    """The Bonferroni weights of the new run and the windows, and whether the quantile
    test runs: where the baseline has a heavy tail or a second mode (and looks at most
    mildly autocorrelated: under AR(1) an excursion keeps several runs high), and every
    run it reads is on a machine the baseline knows (a rank test has no room for a
    machine offset)."""
    w = _weights(len(b.ks) + 1)
    new_m = b.mm is not None and b.lab is not None and any(
        x not in b.mm.known for x in b.lab[-QUANTILE_K:])
    quant = bool(b.ks) and sr.rho_lo <= QUANTILE_RHO and not new_m and heavy
    if quant:
        w = (w[0], *[x * (1.0 - QUANTILE_WEIGHT / (1.0 - w[0])) for x in w[1:]])
    return w, quant


def _window_test(b: _Baseline, sr: _Serial, k: int, weight: float,
                 sign: int) -> tuple[_Candidate, float]:
    """The Huber location of the last ``k`` runs against the baseline's bootstrap of it:
    its candidate and its unweighted p, bad direction (the cautious rho_hi throughout)."""
    n, c, s, mm, rho_hi = b.n, b.c, b.s, b.mm, sr.rho_hi
    s_w, cvar_w, df_w = sr.s_w, sr.cvar_w, sr.df_w
    # One Huber pass over the window, its bootstrap draws and the baseline's
    # rolling k-run stretches (rows are independent; stacked for speed).
    boot_idx = bootstrap_idx(n, k)
    rolled = n >= k + 4
    rows = [b.full[-k:][None, :], b.base[boot_idx]]
    if rolled:
        rows.append(b.base[rolling_idx(n, k)])
    locs = huber_location(np.concatenate(rows), c, s)
    est = float(locs[0])
    # Bootstrap the window estimator over the baseline's own distribution: its
    # mean and variance under second modes and heavy tails (iid), then inflate
    # the variance for AR(1) dependence.
    boot = locs[1 : 1 + boot_idx.shape[0]]
    # (mean and variance as ndarray.mean / .var compute them, without their ~30 us of
    # argument handling a call)
    ck = float(np.add.reduce(boot)) / boot.size
    dev = boot - ck
    var_iid = max(s_w * s_w * HUBER_VAR / k, float(np.add.reduce(dev * dev)) / boot.size,
                  HUBER_VAR * mm.total / k if mm is not None else 0.0)
    se = math.sqrt(var_iid * ar1_variance_factor(rho_hi, k) + cvar_w
                   + (mm.window_extra(b.lab[-k:]) if mm is not None and b.lab is not None
                      else 0.0))
    z = sign * (est - ck) / se
    pw, pb = predictive_z_pvalue(z, df_w), predictive_z_pvalue(-z, df_w)
    pw, pb = tail_bound(sign * (boot - ck), sign * (est - ck), 3.0 * math.sqrt(var_iid),
                        pw, pb)
    if rolled:
        # Rolling k-run stretches of the baseline: a level it already produced.
        roll = locs[1 + boot_idx.shape[0] :]
        pw, pb = empirical_bound(sign * (roll - ck), sign * (est - ck), pw, pb)
    return _Candidate(min(pw, pb) / weight, pw / weight, pb / weight, k, ck, est, se, z,
                      df_w, f"huber-{k}", weight), pw


def _quantile_test(b: _Baseline, sr: _Serial, sign: int, value: float,
                   first: float | None) -> tuple[_Candidate, float, float, float]:
    """The least bad of the last ``QUANTILE_K`` runs against the baseline (exact under
    exchangeability): its candidate, its p both ways, and the p of ``first`` and
    ``value`` together (1 without ``first``)."""
    c, kq = b.c, QUANTILE_K
    dev_base = sign * (b.base - c)
    last = b.full[-kq:]
    pw = quantile_p(dev_base, sign * (last - c))
    pb = quantile_p(-dev_base, -sign * (last - c))
    pair = (quantile_p(dev_base, sign * (np.array([first, value]) - c))
            if first is not None else 1.0)
    # Reported as the least bad run of the window against the centre, with the
    # spread of one run.
    least = float(c + sign * np.min(sign * (last - c)) if pw <= pb
                  else c - sign * np.min(-sign * (last - c)))
    cand = _Candidate(min(pw, pb) / QUANTILE_WEIGHT, pw / QUANTILE_WEIGHT,
                      pb / QUANTILE_WEIGHT, kq, c, least, sr.s1,
                      sign * (least - c) / sr.s1, sr.df, f"quantile-{kq}", QUANTILE_WEIGHT)
    return cand, pw, pb, pair


def _decider(best: _Candidate, rel: float, sign: int) -> Decider | None:
    """The deciding candidate as a ``Decider`` (None where its change has no scale)."""
    if rel != rel or not best.centre:
        return None
    pw, pb = best.pw * best.weight, best.pb * best.weight
    return Decider(rel, best.se / abs(best.centre), best.df, best.weight,
                   pw if sign > 0 else pb, pb if sign > 0 else pw)


def _headline(best: _Candidate, b: _Baseline, value: float, min_change: float,
              params: GateParams) -> tuple[float, float, tuple[float, float], float]:
    """(relative change of the deciding window, the new run's own change, the 95% CI of
    the first, the practical floor)."""
    denom = abs(best.centre) if abs(best.centre) > 0 else float("nan")
    rel = (best.est - best.centre) / denom
    d1 = abs(b.c) if abs(b.c) > 0 else float("nan")
    own = (value - b.c) / d1
    tq = float(special.stdtrit(best.df, 0.975))
    ci = ((best.est - best.centre - tq * best.se) / denom,
          (best.est - best.centre + tq * best.se) / denom)
    floor = max(min_change, params.noise_floor * b.s / d1) if d1 == d1 else min_change
    return rel, own, ci, floor


def _unguarded(h: np.ndarray, value: float, c: float, sign: int, floor: float,
               why: str) -> Judgement:
    """A metric the noise model says cannot be guarded on this run (verdict ``unguarded``)."""
    return Judgement("unguarded", c, value, None, None, 0.0, 1.0, 1.0, floor, 1, int(h.size),
                     None, sign, reason=why)


def _weights(m: int) -> tuple[float, ...]:
    """Weighted Bonferroni: half the level to the new run alone, the rest to windows.

    Holm, Scand. J. Stat. 6 (1979) 65-70 (weighted form); the new run alone
    carries the first-bad-run detection, the windows sustained and slow changes.
    """
    if m == 1:
        return (1.0,)
    return (0.5, *([0.5 / (m - 1)] * (m - 1)))


def _nan_none(x: float) -> float | None:
    return None if x != x else float(x)
