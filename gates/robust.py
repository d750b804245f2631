"""Robust building blocks of the gate's statistics: pure numpy/scipy, no I/O.

Run summaries, location and scale (median, Qn, Huber), lag-1 autocorrelation
and the AR(1) variance factor, the predictive t p-value, the rank and tail
bounds that keep a level the baseline already produced from counting as
evidence, the exact quantile test, Benjamini-Hochberg q-values and Pettitt's
change-point test. ``gates.stats`` says how ``gates.judge`` puts them together.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import special

from gates.changepoint import ChangePoint, pettitt  # re-exported: one implementation

__all__ = [
    "MAD_K",
    "QN_K",
    "QN_EFF",
    "HUBER_C",
    "HUBER_VAR",
    "HALF_PI",
    "RHO_CAUTION",
    "ChangePoint",
    "run_summary",
    "robust_scale",
    "triu_pairs",
    "median",
    "row_medians",
    "lag1_autocorr",
    "ar1_variance_factor",
    "binomial_se",
    "predictive_z_pvalue",
    "center_scale",
    "huber_location",
    "quantile_p",
    "subset_means",
    "tail_bound",
    "rolling_idx",
    "bootstrap_idx",
    "empirical_bound",
    "rho_corrected",
    "rho_var",
    "rho_bounds",
    "bh_qvalues",
    "pettitt",
]

MAD_K = 1.482602218505602  # 1 / Phi^-1(3/4): MAD -> sigma for a normal
QN_K = 2.2219  # Qn -> sigma for a normal (Rousseeuw & Croux 1993)
QN_EFF = 0.82  # Gaussian efficiency of Qn: its scale is worth ~0.82 (n - 1) degrees of freedom
HUBER_C = 1.5  # Huber's clipping constant, in scales (95% efficient at the normal)
HUBER_VAR = 1.037  # asymptotic variance of the Huber location (c = 1.5) over sigma^2 / k
HALF_PI = math.pi / 2  # variance of a median of k normals ~ (pi/2) sigma^2 / k
RHO_CAUTION = 1.0  # window tests: lag-1 autocorrelation r + RHO_CAUTION * se(r)


def run_summary(samples: Sequence[float] | np.ndarray | float) -> float:
    """Median of a run's samples: robust to the slow first iterations (GPU-NOTES)."""
    return median(np.asarray(samples, dtype=float))


def robust_scale(x: np.ndarray) -> float:
    """Run-to-run scale: the Qn estimator of Rousseeuw & Croux.

    Test: none, an estimator. Qn = 2.2219 * d * {|x_i - x_j|; i < j}_(k), the
    k-th order statistic of pairwise distances with k = C(h, 2), h = n//2 + 1,
    and d a small-sample correction. It has a 50% breakdown point (spikes
    and a minority mode of slow runs do not inflate it; the empirical guards
    in ``judge_summaries`` handle such modes) and 82% Gaussian efficiency
    (the MAD: 37%). Reference: Rousseeuw & Croux, JASA 88 (1993) 1273-1283;
    small-sample factors from Croux & Rousseeuw, Comput. Stat. (1992).
    """
    n = x.size
    if n < 2:
        return 0.0
    d = np.abs(np.subtract.outer(x, x))[triu_pairs(n)]
    h = n // 2 + 1
    k = h * (h - 1) // 2
    q = float(np.partition(d, k - 1)[k - 1])
    if n <= 9:
        dn = (0.399, 0.994, 0.512, 0.844, 0.611, 0.857, 0.669, 0.872)[n - 2]
    elif n % 2:
        dn = n / (n + 1.4)
    else:
        dn = n / (n + 3.8)
    return QN_K * dn * q


@lru_cache(maxsize=512)
def triu_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, 1)


def median(x: np.ndarray) -> float:
    s = np.sort(x, axis=None)
    n = s.size
    return float(s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


def row_medians(a: np.ndarray) -> np.ndarray:
    # np.median carries ~50 us of overhead per call; a sort is cheaper for short rows.
    # Odd counts take the middle value itself, so medians equal the stored ones
    # (``metrics.median``) bit for bit, even near the float range's end.
    s = np.sort(a, axis=-1)
    k = s.shape[-1]
    return s[..., k // 2] if k % 2 else 0.5 * (s[..., k // 2 - 1] + s[..., k // 2])


def lag1_autocorr(x: np.ndarray, center: float, scale: float,
                  tail: np.ndarray | None = None) -> float:
    """Lag-1 autocorrelation of run summaries after clipping at centre +/- 3 scale, in [0, 0.9].

    ``tail``: the runs after ``x`` (the windows' runs before the new one), pooled in
    about their own median, so that a level shift between ``x`` and the tail (a
    change the windows are there to judge) adds nothing while serial dependence
    within either adds its lag-1 products.

    Test: none, an estimator (Box, Jenkins & Reinsel, *Time Series Analysis*,
    4th ed., 2008, sec. 2.1.5). Clipped so that one spike does not set it;
    negative values are treated as 0 (conservative for sums).
    """
    if x.size < 8 or scale <= 0:
        return 0.0
    c = np.clip(x, center - 3 * scale, center + 3 * scale) - center
    num, d = float(np.dot(c[1:], c[:-1])), float(np.dot(c, c))
    if tail is not None and tail.size >= 2:
        ct = median(tail)  # (np.median: the same value, ~50 us more a call)
        b = np.clip(tail, ct - 3 * scale, ct + 3 * scale) - ct
        num, d = num + float(np.dot(b[1:], b[:-1])), d + float(np.dot(b, b))
    if d <= 0:
        return 0.0
    return min(max(num / d, 0.0), 0.9)


def _rho_n(x: np.ndarray, tail: np.ndarray | None) -> int:
    """Runs behind a lag-1 estimate: the tail's own centre costs one."""
    return x.size + (tail.size - 1 if tail is not None and tail.size >= 2 else 0)


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


def center_scale(base: np.ndarray, n_trials: float | None) -> tuple[float, float]:
    c = median(base)
    s = robust_scale(base)
    if n_trials:
        s = max(s, binomial_se(c, n_trials))
    # Identical values (counts, deterministic metrics): keep the scale finite, relative
    # to the values' own magnitude (an absolute floor would swamp metrics near 1e-15).
    # (1e-150: its square, a variance, stays a normal float.)
    s = max(s, 1e-9 * float(np.max(np.abs(base))), 1e-150)  # max |x| >= |median|
    return c, s


def huber_location(x: np.ndarray, center: np.ndarray | float, scale: float) -> np.ndarray:
    """Huber M-estimate of location along the last axis, with a known scale.

    Test: none, an estimator: mu solves sum psi((x_i - mu) / scale) = 0 with
    psi(u) = clip(u, -1.5, 1.5); five fixed-point steps from the median. Near
    the mean's efficiency (95%) on Gaussian noise, while one spike in a window
    moves it by at most 1.5 scales / k. Reference: Huber, Ann. Math. Stat. 35
    (1964) 73-101; Huber & Ronchetti (2009) ch. 3.
    """
    k = x.shape[-1]
    mu = row_medians(x)
    c = HUBER_C * scale
    d = np.empty_like(x, dtype=float)
    for _ in range(5):
        np.subtract(x, mu[..., None], out=d)
        np.maximum(d, -c, out=d)
        np.minimum(d, c, out=d)
        mu = mu + np.add.reduce(d, axis=-1) / k
    return mu


def quantile_p(base_dev: np.ndarray, new_dev: Sequence[float] | np.ndarray) -> float:
    """One-sided p that k new values all reach their minimum, among n baseline values.

    Test: exact rank test of an order statistic. With m baseline values at or
    beyond the least of the k new ones, and all n + k exchangeable, the chance
    that the k new values are all among the top m + k is C(m + k, k) /
    C(n + k, k). 1 when the new minimum is not beyond the centre (0).
    Assumptions: exchangeable runs (no autocorrelation; the caller checks).
    Reference: David & Nagaraja, *Order Statistics*, 3rd ed. (2003), sec. 2.5
    (exceedances); Good, *Permutation Tests* (2000), sec. 3.1.
    """
    new = np.asarray(new_dev, dtype=float)
    lo = float(new.min())
    if not lo > 0:
        return 1.0
    k, n = new.size, base_dev.size
    m = int(np.count_nonzero(base_dev >= lo))
    return math.comb(m + k, k) / math.comb(n + k, k)


SUBSETS_MAX = 20_000  # n-subsets of a baseline: all of them up to this many, else a fixed sample


def subset_means(x: np.ndarray, k: int) -> np.ndarray:
    """Means of k-subsets of the values: the baseline's counterpart of a mean of k reruns.

    Every subset when there are at most ``SUBSETS_MAX`` (k = 2: every pair, in
    ``triu_pairs`` order), else ``SUBSETS_MAX`` subsets drawn once with a fixed seed, so a
    verdict does not depend on a random state.
    """
    if k == 2:
        i, j = triu_pairs(x.size)
        return 0.5 * (x[i] + x[j])
    return x[_subsets(x.size, k)].mean(axis=1)


@lru_cache(maxsize=32)
def _subsets(n: int, k: int) -> np.ndarray:
    if math.comb(n, k) <= SUBSETS_MAX:
        return np.array(list(itertools.combinations(range(n), k)), dtype=np.intp).reshape(-1, k)
    rng = np.random.default_rng(k)
    return np.argsort(rng.random((SUBSETS_MAX, n)), axis=1)[:, :k]


def tail_bound(
    base_dev: np.ndarray, dev: float, u: float, pw: float, pb: float
) -> tuple[float, float]:
    """Bound p below by an exponential tail fitted to the baseline's exceedances of u.

    Test: peaks over threshold. When at least 3 baseline deviations exceed u
    (3 run-to-run scales), the tail beyond u is modelled as exponential
    (a generalised Pareto with shape 0), mean excess fitted by maximum
    likelihood, P(dev > d) = (exceedances / (n + 1)) * exp(-(d - u) / beta).
    A heavy tail or a second mode the baseline has shown thus keeps a value
    beyond the baseline's maximum from looking impossible. Assumptions:
    exceedances iid, tail no heavier than exponential at this scale.
    Reference: Pickands, Ann. Stat. 3 (1975) 119-131; Coles, *An Introduction
    to Statistical Modeling of Extreme Values* (2001), ch. 4.
    """
    n = base_dev.size
    for side in (1, -1):
        if side * dev <= u:
            continue
        e = side * base_dev - u
        e = e[e > 0]
        if e.size < 3:
            continue
        p = e.size / (n + 1) * math.exp(-(side * dev - u) / float(e.mean()))
        if side == 1:
            pw = max(pw, p)
        else:
            pb = max(pb, p)
    return pw, pb


@lru_cache(maxsize=256)
def rolling_idx(n: int, k: int) -> np.ndarray:
    """Indices of the n - k + 1 rolling k-run stretches of an n-run baseline."""
    return np.arange(n - k + 1)[:, None] + np.arange(k)[None, :]


@lru_cache(maxsize=256)
def bootstrap_idx(n: int, k: int, draws: int = 256) -> np.ndarray:
    """Fixed bootstrap resampling indices (reproducible verdicts, no per-call RNG)."""
    return np.random.default_rng(n * 1000 + k).integers(0, n, (draws, k))


def empirical_bound(
    base_dev: np.ndarray, dev: float, pw: float, pb: float
) -> tuple[float, float]:
    """Bound p below by the rank p (count + 1) / (n + 1) when the baseline was as extreme.

    Test: the exact rank (permutation) test of one new value among n
    exchangeable ones (Good, *Permutation Tests*, 2nd ed., 2000, sec. 3.1),
    used only as a lower bound: it cannot reach small p by itself.
    """
    n = base_dev.size
    worse = int(np.count_nonzero(base_dev >= dev))
    better = int(np.count_nonzero(base_dev <= dev))
    if worse:
        pw = max(pw, (worse + 1) / (n + 1))
    if better:
        pb = max(pb, (better + 1) / (n + 1))
    return pw, pb


def rho_corrected(x: np.ndarray, c: float, s: float,
                  tail: np.ndarray | None = None) -> tuple[float, float]:
    """Lag-1 autocorrelation, bias-corrected, and a cautious upper value.

    E[r] ~ rho - (1 + 3 rho) / n (Marriott & Pope, Biometrika 41 (1954)
    390-402) and se(r) ~ sqrt((1 - rho^2) / n) (Bartlett 1946). With 30-40 runs
    r is noisy; window tests use the one-sided 84% upper bound (r + 1.0 se):
    an AR(1) run offset seen through within-run noise (ARMA(1, 1)) decays
    more slowly than its lag-1 value implies (``RHO_CAUTION`` in
    ``docs/gates/calibration.md``). ``tail``: as ``lag1_autocorr``, n then
    counts its runs less one.
    """
    r = lag1_autocorr(x, c, s, tail)
    if r <= 0:
        return 0.0, 0.0
    n = _rho_n(x, tail)
    r = min(0.9, r + (1 + 3 * r) / n)
    return r, min(0.9, r + RHO_CAUTION * math.sqrt(rho_var(r, n)))


def rho_var(r: float, n: int) -> float:
    """Sampling variance of a lag-1 autocorrelation from n runs, (1 - r^2) / n (Bartlett 1946)."""
    return max(1.0 - r * r, 0.0) / n


def rho_bounds(x: np.ndarray, c: float, s: float,
               tail: np.ndarray | None = None) -> tuple[float, float, float]:
    """(r, upper, lower): ``rho_corrected`` and a cautious lower bound, r - 0.84 se(r)
    floored at 0: a one-sided 80% bound with se(r) ~ sqrt((1 - r^2) / n) (Bartlett
    1946); iid baselines of 30-40 runs give 0 most of the time, so their k = 1 test
    is unchanged."""
    r, hi = rho_corrected(x, c, s, tail)
    if r <= 0:
        return r, hi, 0.0
    return r, hi, max(0.0, r - 0.84 * math.sqrt(rho_var(r, _rho_n(x, tail))))


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

