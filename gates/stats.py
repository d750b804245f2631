"""Statistics of the regression gates: pure numpy/scipy, no I/O.

The gate judges one new run of one metric against the *run-to-run* spread of
past trusted runs. Each past run contributes one number, its median (the
summary); the new run contributes its own median, plus extra variance when it
carries fewer samples than usual. Within-run samples never stand in for the
run-to-run spread: two processes 0.06% apart with 60 samples each are one
run-level draw each, not 60.

Everything here works in the "bad direction": ``sign = +1`` when lower is
better (latency: an increase is bad), ``-1`` when higher is better.

Design, in short (see ``judge``):

1. Baseline: the last ``window`` trusted run summaries (default 30). Centre =
   median, scale = max(1.4826 * MAD, 10%-winsorized SD / 0.8238) so that one
   spike in the baseline does not move either, while a real second mode (the
   FlashInfer slow runs of GPU-NOTES) widens the scale.
2. Three evidence windows, each a robust predictive z-test with Student-t
   tails: the new run alone (k=1), the median of the last 3 runs and of the
   last 10 runs (each against the ``window`` runs before them, variance
   inflated for lag-1 autocorrelation). Bonferroni over the three. The k=1
   test is also bounded below by the empirical rank p of the new value among
   the baseline runs when a baseline run was as bad or worse ("seen before").
3. Practical floor: max(declared ``min_change``, 0.5 * run-to-run CV); both
   the evidence window's change and the new run's own change must pass it, so
   a run that recovered after a spike is never a regression.
4. Accuracy with ``n`` questions: the scale is at least the binomial
   sqrt(p(1-p)/n).
5. Benjamini-Hochberg q-values across a run's metrics; Pettitt's rank test
   localises the change point for reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special

__all__ = [
    "DEFAULTS",
    "GateParams",
    "Judgement",
    "ChangePoint",
    "run_summary",
    "robust_scale",
    "lag1_autocorr",
    "ar1_variance_factor",
    "predictive_z_pvalue",
    "binomial_se",
    "judge",
    "judge_summaries",
    "decide",
    "bh_qvalues",
    "pettitt",
    "confirm",
]

MAD_K = 1.482602218505602  # 1 / Phi^-1(3/4): MAD -> sigma for a normal
# SD of a standard normal winsorized at its 10% / 90% quantiles (closed form:
# sqrt((2*Phi(q)-1) - 2*q*phi(q) + 2*0.1*q^2), q = 1.28155).
WINSOR_K = 0.8238
HALF_PI = math.pi / 2  # variance of a median of k normals ~ (pi/2) sigma^2 / k


@dataclass(frozen=True)
class GateParams:
    """Default settings of the gate; every field can be overridden per metric."""

    level: float = 0.01  # BH false discovery level across a run's metrics (first attempt)
    confirm_level: float = 0.05  # level the confirm attempt must reach on its own
    confirm_attempts: int = 1  # reruns of tripped tests before a regression holds
    window: int = 30  # baseline runs
    min_history: int = 5  # fewer trusted runs -> insufficient-history
    windows: tuple[int, ...] = (1, 3, 10)  # evidence windows (runs, newest last)
    noise_floor: float = 0.5  # practical floor, in units of run-to-run CV
    min_change: float = 0.0  # declared relative practical floor


DEFAULTS = GateParams()


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
    extras: dict[str, float] = field(default_factory=dict)

    @property
    def p(self) -> float:
        """The p-value of the observed direction."""
        return self.p_worse if (self.z >= 0) else self.p_better


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first index of the new regime
    p: float
    before: float  # median before
    after: float  # median after


def run_summary(samples: Sequence[float] | np.ndarray | float) -> float:
    """Median of a run's samples: robust to the slow first iterations (GPU-NOTES)."""
    a = np.asarray(samples, dtype=float).ravel()
    return float(np.median(a))


def robust_scale(x: np.ndarray) -> float:
    """Run-to-run scale: max of the normal-consistent MAD and the 10% winsorized SD.

    Test: none, an estimator. Assumptions: most values come from the noise
    distribution. The MAD has a 50% breakdown point (one spike cannot inflate
    it); the winsorized SD keeps a genuine minority mode (30% slow runs) in the
    scale so that such runs are not flagged. Reference: Huber & Ronchetti,
    *Robust Statistics*, 2nd ed. (2009), ch. 5; Wilcox, *Introduction to Robust
    Estimation and Hypothesis Testing*, 4th ed. (2017), sec. 3.3 (winsorized
    variance).
    """
    n = x.size
    med = np.median(x)
    mad = MAD_K * float(np.median(np.abs(x - med)))
    g = int(0.1 * n)
    if g > 0 and n >= 5:
        s = np.sort(x)
        w = np.clip(s, s[g], s[n - 1 - g])
        wsd = float(np.std(w, ddof=1)) / WINSOR_K
    else:
        wsd = float(np.std(x, ddof=1)) if n > 1 else 0.0
    return max(mad, wsd)


def lag1_autocorr(x: np.ndarray, center: float, scale: float) -> float:
    """Lag-1 autocorrelation of run summaries after clipping at centre +/- 3 scale, in [0, 0.9].

    Test: none, an estimator (Box, Jenkins & Reinsel, *Time Series Analysis*,
    4th ed., 2008, sec. 2.1.5). Clipped so that one spike does not set it;
    negative values are treated as 0 (conservative for sums).
    """
    if x.size < 8 or scale <= 0:
        return 0.0
    c = np.clip(x, center - 3 * scale, center + 3 * scale) - center
    d = float(np.dot(c, c))
    if d <= 0:
        return 0.0
    r = float(np.dot(c[1:], c[:-1])) / d
    return min(max(r, 0.0), 0.9)


def ar1_variance_factor(rho: float, k: int) -> float:
    """Variance of a mean of k AR(1) values over that of k independent ones.

    1 + 2 * sum_{j<k} (1 - j/k) rho^j (Box, Jenkins & Reinsel 2008, eq. 2.1.13).
    """
    if k <= 1 or rho <= 0:
        return 1.0
    j = np.arange(1, k)
    return float(1.0 + 2.0 * np.sum((1.0 - j / k) * rho**j))


def binomial_se(p: float, n: float) -> float:
    """Standard error of a proportion from n trials, sqrt(p(1-p)/n) (Agresti 2013, sec. 1.3)."""
    p = min(max(p, 0.5 / n), 1 - 0.5 / n)  # keep it > 0 at 0% / 100%
    return math.sqrt(p * (1 - p) / n)


def predictive_z_pvalue(z: float, df: float) -> float:
    """One-sided upper-tail p of a Student-t predictive statistic.

    Test: prediction-interval test of a new observation against a sample of
    n past ones, T = (x - centre) / (s * sqrt(1 + c/n)) ~ t(n-1) under
    normality (Hahn & Meeker, *Statistical Intervals*, 1991, sec. 4.7); here
    centre and s are robust estimates, which keeps the test valid to first
    order under outliers at a small cost in power.
    """
    return float(special.stdtr(df, -z))


def _center_scale(base: np.ndarray, n_trials: float | None) -> tuple[float, float]:
    c = float(np.median(base))
    s = robust_scale(base)
    if n_trials:
        s = max(s, binomial_se(c, n_trials))
    # Identical values (counts, deterministic metrics): keep the scale finite.
    s = max(s, 1e-9 * abs(c), 1e-15)
    return c, s


def _rolling_medians(x: np.ndarray, k: int) -> np.ndarray:
    return np.median(np.lib.stride_tricks.sliding_window_view(x, k), axis=1)


def judge_summaries(
    history: np.ndarray,
    value: float,
    *,
    sign: int,
    params: GateParams = DEFAULTS,
    n_trials: float | None = None,
    extra_var: float = 0.0,
    min_change: float | None = None,
) -> Judgement:
    """Judge a new run summary ``value`` against past run summaries (oldest first).

    ``sign`` is +1 when an increase is bad (lower is better), -1 otherwise.
    ``extra_var`` is added to the new run's variance (fewer samples than usual).

    Tests: robust predictive t-tests (``predictive_z_pvalue``) of the new run
    (k=1, against the last ``window`` runs) and of the medians of the last 3
    and 10 runs (against the ``window`` runs before the last 10), Bonferroni
    combined (Holm, Scand. J. Stat. 6 (1979) 65-70). Each test's p-value is
    bounded below by an empirical rank p: the share of baseline runs (or
    rolling k-medians) that were as extreme, so that a level the noise has
    already produced (a second mode, an old spike) is not evidence.
    Variances of window medians are inflated for lag-1 autocorrelation.
    Assumptions: baseline runs exchangeable up to AR(1) dependence; a
    shift, not a change in shape, is what matters.
    """
    h = np.asarray(history, dtype=float)
    h = h[np.isfinite(h)]
    min_change = params.min_change if min_change is None else min_change
    W = params.window
    if h.size < params.min_history:
        return Judgement(
            "insufficient-history", float(np.median(h)) if h.size else None, value,
            None, None, 0.0, 1.0, 1.0, min_change, 1, int(h.size), None, sign,
        )
    # k = 1: the new run against the last W runs.
    b1 = h[-W:]
    n1 = b1.size
    c1, s1 = _center_scale(b1, n_trials)
    rho = _rho_corrected(b1, c1, s1)
    var1 = s1 * s1 * (1.0 + HALF_PI / n1 * ar1_variance_factor(rho, n1)) + extra_var
    se1 = math.sqrt(max(var1, 1e-300))
    z1 = sign * (value - c1) / se1
    df1 = max(n1 - 1, 2)
    pw1 = predictive_z_pvalue(z1, df1)
    pb1 = predictive_z_pvalue(-z1, df1)
    d = sign * (b1 - c1)
    dv = sign * (value - c1)
    worse = int(np.count_nonzero(d >= dv))
    better = int(np.count_nonzero(d <= dv))
    if worse:
        pw1 = max(pw1, (worse + 1) / (n1 + 1))
    if better:
        pb1 = max(pb1, (better + 1) / (n1 + 1))
    cands = [(min(pw1, pb1), 1, c1, value, se1, z1, df1)]
    pws = [pw1]
    pbs = [pb1]
    # k > 1: medians of the last k runs against the W runs before the last kmax.
    ks = [k for k in params.windows if k > 1]
    kmax = max(ks, default=1)
    if ks and h.size - (kmax - 1) >= params.min_history:
        full = np.append(h, value)
        base = full[-kmax - W : -kmax]
        n = base.size
        c, s = _center_scale(base, n_trials)
        rho_b = max(rho, _rho_corrected(base, c, s))
        cvar = HALF_PI * s * s / n * ar1_variance_factor(rho_b, n)
        df = max(n - 1, 2)
        for k in ks:
            est = float(np.median(full[-k:]))
            se = math.sqrt(s * s * HALF_PI / k * ar1_variance_factor(rho_b, k) + cvar)
            z = sign * (est - c) / se
            pw = predictive_z_pvalue(z, df)
            pb = predictive_z_pvalue(-z, df)
            if n >= k + 2:
                rm = sign * (_rolling_medians(base, k) - c)
                dz = sign * (est - c)
                nw = int(np.count_nonzero(rm >= dz))
                nb = int(np.count_nonzero(rm <= dz))
                if nw:
                    pw = max(pw, (nw + 1) / (rm.size + 1))
                if nb:
                    pb = max(pb, (nb + 1) / (rm.size + 1))
            cands.append((min(pw, pb), k, c, est, se, z, df))
            pws.append(pw)
            pbs.append(pb)
    m = len(cands)
    _, k, c, est, se, z, df = min(cands, key=lambda t: t[0])
    denom = abs(c) if abs(c) > 0 else float("nan")
    rel = (est - c) / denom
    d1 = abs(c1) if abs(c1) > 0 else float("nan")
    own = (value - c1) / d1
    tq = float(special.stdtrit(df, 0.975))
    ci = ((est - c - tq * se) / denom, (est - c + tq * se) / denom)
    floor = max(min_change, params.noise_floor * s1 / d1) if d1 == d1 else min_change
    return Judgement(
        "ok", c1, value, _nan_none(rel), None if rel != rel else ci, float(z),
        min(1.0, min(pws) * m), min(1.0, min(pbs) * m), float(floor), k, int(h.size),
        _nan_none(own), sign, statistic=f"robust-t/median-of-{k}", scale=s1,
    )


def _rho_corrected(x: np.ndarray, c: float, s: float) -> float:
    """Lag-1 autocorrelation with the first-order small-sample bias added back.

    E[r] ~ rho - (1 + 3 rho) / n (Marriott & Pope, Biometrika 41 (1954) 390-402).
    """
    r = lag1_autocorr(x, c, s)
    if r <= 0:
        return 0.0
    return min(0.9, r + (1 + 3 * r) / x.size)


def _nan_none(x: float) -> float | None:
    return None if x != x else float(x)


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
    summaries = np.array([run_summary(r) for r in history], dtype=float)
    new_a = np.asarray(new, dtype=float).ravel()
    extra = _extra_within_var(history, new_a)
    return judge_summaries(
        summaries, run_summary(new_a), sign=sign, params=params, n_trials=n_trials,
        extra_var=extra, min_change=min_change,
    )


def _within_se2(a: np.ndarray) -> float | None:
    if a.size < 3:
        return None
    s = MAD_K * float(np.median(np.abs(a - np.median(a))))
    return HALF_PI * s * s / a.size


def _extra_within_var(history: Sequence, new: np.ndarray) -> float:
    se_new = _within_se2(new)
    if se_new is None:
        return 0.0
    past = [_within_se2(np.asarray(r, dtype=float).ravel()) for r in list(history)[-30:]]
    past_v = [v for v in past if v is not None]
    typical = float(np.median(past_v)) if past_v else 0.0
    return max(0.0, se_new - typical)


def decide(j: Judgement, q_worse: float, *, level: float) -> str:
    """Verdict from a judgement and its BH q-value: both evidence and a practical effect.

    regression: q <= level, and both the deciding window's change and the new
    run's own change are beyond the floor in the bad direction.
    improvement: the mirror image (its p against the same level, no BH: an
    improvement never fails a build).
    """
    if j.status != "ok":
        return j.status
    if j.rel_change is None or j.own_change is None:
        # Baseline centred on zero: no relative floor, judge on evidence alone.
        if q_worse <= level and j.z > 0:
            return "regression"
        if j.p_better <= level and j.z < 0:
            return "improvement"
        return "pass"
    bad_rel = j.sign * j.rel_change
    bad_own = j.sign * j.own_change
    if j.z > 0 and q_worse <= level and bad_rel > j.floor and bad_own > j.floor:
        return "regression"
    if j.z < 0 and j.p_better <= level and -bad_rel > j.floor and -bad_own > j.floor:
        return "improvement"
    return "pass"


def bh_qvalues(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values) for a family of tests.

    Test: step-up FDR control. Assumptions: independent or positively
    dependent (PRDS) p-values. Reference: Benjamini & Hochberg, JRSS B 57
    (1995) 289-300; Benjamini & Yekutieli, Ann. Stat. 29 (2001) 1165-1188.
    """
    p = np.asarray(p, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


def pettitt(x: Sequence[float] | np.ndarray) -> ChangePoint | None:
    """Localise one change point in a series of run summaries (Pettitt's test).

    Test: rank-based Mann-Whitney CUSUM, U_t = sum_{i<=t} sum_{j>t} sgn(x_j - x_i);
    the change is after argmax |U_t|, p ~ 2 exp(-6 K^2 / (T^3 + T^2)).
    Assumptions: independent values, at most one change in location; robust
    to outliers and non-normal noise. Reference: Pettitt, Applied Statistics
    28 (1979) 126-135.
    """
    a = np.asarray(x, dtype=float)
    T = a.size
    if T < 4:
        return None
    sg = np.sign(a[None, :] - a[:, None])  # sg[i, j] = sgn(x_j - x_i)
    # U_t for t = 0..T-2 (split after index t): sum over i <= t, j > t.
    upper = np.triu(sg, 1)
    col = np.cumsum(upper, axis=0)  # rows i <= t accumulated
    U = np.array([col[t, t + 1 :].sum() for t in range(T - 1)])
    t = int(np.argmax(np.abs(U)))
    K = float(abs(U[t]))
    p = min(1.0, 2.0 * math.exp(-6.0 * K * K / (T**3 + T**2)))
    return ChangePoint(t + 1, p, float(np.median(a[: t + 1])), float(np.median(a[t + 1 :])))


def confirm(
    history: np.ndarray,
    first: float,
    second: float,
    *,
    sign: int,
    params: GateParams = DEFAULTS,
    n_trials: float | None = None,
    min_change: float | None = None,
) -> tuple[Judgement, Judgement]:
    """Judge a confirm attempt: the rerun alone and the pooled (first, rerun) pair.

    ``history`` must exclude the first attempt. The rerun must trip on its own
    at ``params.confirm_level`` (a pre-registered one-sided test of the
    hypothesis the first attempt raised), and the mean of the two run summaries
    (variance halved: two independent processes) must be significant at
    ``params.level``. Sequential two-stage testing; reference: Armitage,
    McPherson & Rowe, JRSS A 132 (1969) 235-244 on repeated testing, and
    Bauer & Koehne, Biometrics 50 (1994) 1029-1041 on combining stages.
    Returns (rerun judgement, pooled judgement); use ``decide`` on each.
    """
    jb = judge_summaries(
        history, second, sign=sign, params=params, n_trials=n_trials, min_change=min_change
    )
    pooled_params = GateParams(**{**params.__dict__, "windows": (1,)})
    pooled = 0.5 * (first + second)
    # Half the new-run variance for a mean of two runs: pass it as negative extra variance.
    h = np.asarray(history, dtype=float)
    if h.size >= params.min_history:
        base = h[-params.window :]
        _, s = _center_scale(base, n_trials)
        extra = -0.5 * s * s
    else:
        extra = 0.0
    jp = judge_summaries(
        history, pooled, sign=sign, params=pooled_params, n_trials=n_trials,
        extra_var=extra, min_change=min_change,
    )
    return jb, jp
