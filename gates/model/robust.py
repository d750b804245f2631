"""Robust building blocks of the gate's statistics: pure numpy/scipy, no I/O.

Run summaries, location and scale (median, Qn, Huber), lag-1 autocorrelation
and the AR(1) variance factor, the predictive t p-value, the rank and tail
bounds that keep a level the baseline already produced from counting as
evidence, the exact quantile test, Benjamini-Hochberg q-values and Pettitt's
change-point test. ``gates.model.stats`` says how ``gates.model.judge`` puts them together.

Row-wise: a function of runs works along the last axis (one metric a row, so a
run's metrics are judged together); its per-row arguments (centres, scales,
deviations, p-values) have the leading shape. A 1-D input gives numpy scalars.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import special

from gates.model.changepoint import ChangePoint, pettitt  # re-exported: one implementation

__all__ = [
    "MAD_K", "QN_K", "QN_EFF", "HUBER_C", "HUBER_VAR", "HALF_PI", "RHO_CAUTION", "ChangePoint",
    "run_summary", "robust_scale", "triu_pairs", "median", "row_medians", "lag1_autocorr",
    "ar1_variance_factor", "predictive_z_pvalue", "center_scale", "huber_location", "quantile_p",
    "quantile_bound",
    "subset_means", "tail_bound", "rolling_idx",
    "bootstrap_idx", "empirical_bound", "rho_var",
    "rho_bounds", "bh_qvalues", "pettitt",
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


def robust_scale(x: np.ndarray) -> np.ndarray:
    """Run-to-run scale: the Qn estimator of Rousseeuw & Croux.

    Test: none, an estimator. Qn = 2.2219 * d * {|x_i - x_j|; i < j}_(k), the
    k-th order statistic of pairwise distances with k = C(h, 2), h = n//2 + 1,
    and d a small-sample correction. It has a 50% breakdown point (spikes
    and a minority mode of slow runs do not inflate it; the empirical guards
    in ``gates.model.judge`` handle such modes) and 82% Gaussian efficiency
    (the MAD: 37%). Reference: Rousseeuw & Croux, JASA 88 (1993) 1273-1283;
    small-sample factors from Croux & Rousseeuw, Comput. Stat. (1992).
    """
    n = x.shape[-1]
    if n < 2:
        return np.zeros(x.shape[:-1])[()]
    i, j = triu_pairs(n)
    d = np.abs(x[..., i] - x[..., j])
    h = n // 2 + 1
    k = h * (h - 1) // 2
    q = np.partition(d, k - 1, axis=-1)[..., k - 1]
    if n <= 9:
        dn = (0.399, 0.994, 0.512, 0.844, 0.611, 0.857, 0.669, 0.872)[n - 2]
    elif n % 2:
        dn = n / (n + 1.4)
    else:
        dn = n / (n + 3.8)
    return (QN_K * dn * q)[()]


@lru_cache(maxsize=512)
def triu_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, 1)


def median(x: np.ndarray) -> float:
    return float(row_medians(np.ravel(x)))


def row_medians(a: np.ndarray) -> np.ndarray:
    # np.median carries ~50 us of overhead per call; a sort is cheaper for short rows.
    # Odd counts take the middle value itself, so medians equal the stored ones
    # (``metrics.median``) bit for bit, even near the float range's end.
    s = np.sort(a, axis=-1)
    k = s.shape[-1]
    return s[..., k // 2] if k % 2 else 0.5 * (s[..., k // 2 - 1] + s[..., k // 2])


def lag1_autocorr(x: np.ndarray, center: np.ndarray | float, scale: np.ndarray | float,
                  tail: np.ndarray | None = None, demean: bool = False) -> np.ndarray:
    """Lag-1 autocorrelation of run summaries after clipping at centre +/- 3 scale, in [0, 0.9].

    ``tail``: the runs after ``x`` (the windows' runs before the new one), pooled in
    about their own median, so that a level shift between ``x`` and the tail (a
    change the windows are there to judge) adds nothing while serial dependence
    within either adds its lag-1 products.

    Test: none, an estimator (Box, Jenkins & Reinsel, *Time Series Analysis*,
    4th ed., 2008, sec. 2.1.5). Clipped so that one spike does not set it;
    negative values are treated as 0 (conservative for sums). About the median
    (``demean`` False) it reads a skewed baseline as dependent: with iid runs
    E[(x_t - m)(x_t-1 - m)] = (mean - m)^2 > 0, about 0.25 of the variance for a
    30% slow mode. ``demean``: each part about the mean of its clipped runs
    instead, as the estimator is defined, which reads iid runs of any shape as 0.
    """
    center, scale = np.asarray(center, float)[..., None], np.asarray(scale, float)[..., None]
    if x.shape[-1] < 8:
        return np.zeros(x.shape[:-1])[()]
    c = _clipped(x, center, scale, demean)
    num, d = _dot(c[..., 1:], c[..., :-1]), _dot(c, c)
    if tail is not None and tail.shape[-1] >= 2:
        b = _clipped(tail, row_medians(tail)[..., None], scale, demean)
        num, d = num + _dot(b[..., 1:], b[..., :-1]), d + _dot(b, b)
    ok = (d > 0) & (scale[..., 0] > 0)
    return np.where(ok, np.clip(num / np.where(ok, d, 1.0), 0.0, 0.9), 0.0)[()]


def _clipped(x: np.ndarray, centre: np.ndarray, scale: np.ndarray, demean: bool) -> np.ndarray:
    """Runs clipped at centre +/- 3 scale, about the centre (``demean``: their mean)."""
    c = np.clip(x, centre - 3 * scale, centre + 3 * scale) - centre
    return c - c.mean(axis=-1, keepdims=True) if demean else c


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", a, b)


def _rho_n(x: np.ndarray, tail: np.ndarray | None) -> int:
    """Runs behind a lag-1 estimate: the tail's own centre costs one."""
    t = tail.shape[-1] if tail is not None else 0
    return x.shape[-1] + (t - 1 if t >= 2 else 0)


def ar1_variance_factor(rho: np.ndarray | float, k: int) -> np.ndarray:
    """Variance of a mean of k AR(1) values over that of k independent ones.

    1 + 2 * sum_{j<k} (1 - j/k) rho^j (Box, Jenkins & Reinsel 2008, eq. 2.1.13);
    1 where rho <= 0.
    """
    rho = np.asarray(rho, float)
    pos = rho > 0
    if k <= 1 or not pos.any():
        return np.ones_like(rho)[()]
    j = np.arange(1, k)
    f = 1.0 + 2.0 * np.add.reduce((1.0 - j / k) * np.maximum(rho, 0.0)[..., None] ** j, axis=-1)
    return np.where(pos, f, 1.0)[()]


def predictive_z_pvalue(z: np.ndarray | float, df: np.ndarray | float) -> np.ndarray:
    """One-sided upper-tail p of a Student-t predictive statistic.

    Test: prediction-interval test of a new observation against a sample of
    n past ones, T = (x - centre) / (s * sqrt(1 + c/n)) ~ t(n-1) under
    normality (Hahn & Meeker, *Statistical Intervals*, 1991, sec. 4.7); here
    centre and s are robust estimates, which keeps the test valid to first
    order under outliers at a small cost in power.
    """
    return special.stdtr(df, -z)


def center_scale(base: np.ndarray, n_trials: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's median and Qn scale; ``n_trials`` > 0: a rate's binomial floor, the
    standard error sqrt(p(1-p)/n) of a proportion (Agresti 2013, sec. 1.3)."""
    c = row_medians(base)
    s = robust_scale(base)
    has = n_trials > 0
    if has.any():
        n = np.where(has, n_trials, 1.0)
        p = np.minimum(np.maximum(c, 0.5 / n), 1 - 0.5 / n)  # keep it > 0 at 0% / 100%
        s = np.where(has, np.maximum(s, np.sqrt(p * (1 - p) / n)), s)
    # Identical values (counts, deterministic metrics): keep the scale finite, relative
    # to the values' own magnitude (an absolute floor would swamp metrics near 1e-15).
    # (1e-150: its square, a variance, stays a normal float.)
    s = np.maximum(np.maximum(s, 1e-9 * np.maximum.reduce(np.abs(base), axis=-1)), 1e-150)
    return c, s


def huber_location(x: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """Huber M-estimate of location along the last axis, with a known scale (one per
    row of ``x`` without its last axis, or one for all).

    Test: none, an estimator: mu solves sum psi((x_i - mu) / scale) = 0 with
    psi(u) = clip(u, -1.5, 1.5); five fixed-point steps from the median. Near
    the mean's efficiency (95%) on Gaussian noise, while one spike in a window
    moves it by at most 1.5 scales / k. Reference: Huber, Ann. Math. Stat. 35
    (1964) 73-101; Huber & Ronchetti (2009) ch. 3.
    """
    k = x.shape[-1]
    x = np.ascontiguousarray(x, dtype=float)  # (rows gathered by fancy indexing may not be)
    mu = row_medians(x)
    c = HUBER_C * np.broadcast_to(np.asarray(scale, float), mu.shape).ravel()
    out = mu.ravel().copy()
    rows = np.reshape(x, (-1, k))
    # Blocks of rows laid out value-major (k x rows), so that each step is a few
    # passes over arrays that stay in cache; the sum over a row is then sequential.
    for a in range(0, out.size, HUBER_BLOCK):
        xs = rows[a : a + HUBER_BLOCK].T.copy()
        m, cc = out[a : a + HUBER_BLOCK], c[a : a + HUBER_BLOCK]
        d = np.empty_like(xs)
        for _ in range(5):
            np.subtract(xs, m, out=d)
            np.maximum(d, -cc, out=d)
            np.minimum(d, cc, out=d)
            m = m + np.add.reduce(d, axis=0) / k
        out[a : a + HUBER_BLOCK] = m
    return out.reshape(mu.shape)[()]


HUBER_BLOCK = 8192  # rows a block (k x 8192 doubles: within a core's L2 cache for k <= 16)


def quantile_p(base_dev: np.ndarray, new_dev: Sequence[float] | np.ndarray) -> np.ndarray:
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
    lo = new.min(axis=-1)
    k, n = new.shape[-1], base_dev.shape[-1]
    m = np.add.reduce(base_dev >= lo[..., None], axis=-1)
    p = np.array([math.comb(mi + k, k) / math.comb(n + k, k) for mi in np.ravel(m).tolist()])
    return np.where(lo > 0, p.reshape(np.shape(m)), 1.0)[()]


def quantile_bound(base_dev: Sequence[float], least: float, k: int, alpha: float) -> float | None:
    """The one-sided confidence bound of the shift ``quantile_p`` tests, at ``alpha``: the
    least shift of the k new values beyond the baseline that the test still finds.

    Test inversion (Lehmann & Romano, *Testing Statistical Hypotheses*, 3rd ed., 2005,
    sec. 3.5): shifted back by d, the k values' least one is ``least - d``, and the test
    rejects while fewer than m* + 1 baseline deviations lie at or beyond it, m* the largest
    m with C(m + k, k) / C(n + k, k) <= alpha (and while it is beyond the centre, 0). The
    shifts it does not reject, d >= ``least`` - max(the (m* + 1)-th largest deviation, 0),
    are the confidence set; its bound is above 0 exactly where ``quantile_p`` <= alpha.
    ``base_dev`` and ``least``: deviations from the centre, in the change's direction.
    None where no m reaches ``alpha`` (the test cannot reject there: no bound)."""
    x = sorted((float(v) for v in base_dev), reverse=True)
    n = len(x)
    limit = alpha * math.comb(n + k, k)
    m = -1
    while m < n and math.comb(m + 1 + k, k) <= limit:
        m += 1
    if m < 0:
        return None
    return float(least) - max(x[m] if m < n else -math.inf, 0.0)


SUBSETS_MAX = 20_000  # n-subsets of a baseline: all of them up to this many, else a fixed sample


def subset_means(x: np.ndarray, k: int) -> np.ndarray:
    """Means of k-subsets of the values: the baseline's counterpart of a mean of k reruns.

    Every subset when there are at most ``SUBSETS_MAX`` (k = 2: every pair, in
    ``triu_pairs`` order), else ``SUBSETS_MAX`` subsets drawn once with a fixed seed, so a
    verdict does not depend on a random state.
    """
    if k == 2:
        i, j = triu_pairs(x.shape[-1])
        return 0.5 * (x[..., i] + x[..., j])
    return x[..., _subsets(x.shape[-1], k)].mean(axis=-1)


@lru_cache(maxsize=32)
def _subsets(n: int, k: int) -> np.ndarray:
    if math.comb(n, k) <= SUBSETS_MAX:
        return np.array(list(itertools.combinations(range(n), k)), dtype=np.intp).reshape(-1, k)
    rng = np.random.default_rng(k)
    return np.argsort(rng.random((SUBSETS_MAX, n)), axis=1)[:, :k]


def tail_bound(
    base_dev: np.ndarray, dev: np.ndarray | float, u: np.ndarray | float,
    pw: np.ndarray | float, pb: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray]:
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
    n = base_dev.shape[-1]
    dev, u = np.asarray(dev, float), np.asarray(u, float)
    out = []
    for side, p in ((1, pw), (-1, pb)):
        if not (side * dev > u).any():
            out.append(p)
            continue
        e = side * base_dev - u[..., None]
        beyond = e > 0
        m = np.add.reduce(beyond, axis=-1)
        fit = (side * dev > u) & (m >= 3)
        mean = np.add.reduce(np.where(beyond, e, 0.0), axis=-1) / np.where(fit, m, 1)
        q = m / (n + 1) * np.exp(-np.where(fit, side * dev - u, 0.0) / np.where(fit, mean, 1.0))
        out.append(np.where(fit, np.maximum(p, q), p)[()])
    return out[0], out[1]


@lru_cache(maxsize=256)
def rolling_idx(n: int, k: int) -> np.ndarray:
    """Indices of the n - k + 1 rolling k-run stretches of an n-run baseline."""
    return np.arange(n - k + 1)[:, None] + np.arange(k)[None, :]


@lru_cache(maxsize=256)
def bootstrap_idx(n: int, k: int, draws: int = 256) -> np.ndarray:
    """Fixed bootstrap resampling indices (reproducible verdicts, no per-call RNG)."""
    return np.random.default_rng(n * 1000 + k).integers(0, n, (draws, k))


def empirical_bound(
    base_dev: np.ndarray, dev: np.ndarray | float, pw: np.ndarray | float,
    pb: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray]:
    """Bound p below by the rank p (count + 1) / (n + 1) when the baseline was as extreme.

    Test: the exact rank (permutation) test of one new value among n
    exchangeable ones (Good, *Permutation Tests*, 2nd ed., 2000, sec. 3.1),
    used only as a lower bound: it cannot reach small p by itself.
    """
    n = base_dev.shape[-1]
    dev = np.asarray(dev, float)[..., None]
    worse = np.add.reduce(base_dev >= dev, axis=-1)
    better = np.add.reduce(base_dev <= dev, axis=-1)
    pw = np.where(worse > 0, np.maximum(pw, (worse + 1) / (n + 1)), pw)[()]
    pb = np.where(better > 0, np.maximum(pb, (better + 1) / (n + 1)), pb)[()]
    return pw, pb


def rho_var(r: np.ndarray | float, n: int) -> np.ndarray:
    """Sampling variance of a lag-1 autocorrelation from n runs, (1 - r^2) / n (Bartlett 1946)."""
    return np.maximum(1.0 - r * r, 0.0) / n


def rho_bounds(x: np.ndarray, c: np.ndarray | float, s: np.ndarray | float,
               tail: np.ndarray | None = None,
               demean: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lag-1 autocorrelation, bias-corrected, and a cautious upper and lower value.

    E[r] ~ rho - (1 + 3 rho) / n (Marriott & Pope, Biometrika 41 (1954)
    390-402) and se(r) ~ sqrt((1 - rho^2) / n) (Bartlett 1946). With 30-40 runs
    r is noisy; window tests use the one-sided 84% upper bound (r + 1.0 se):
    an AR(1) run offset seen through within-run noise (ARMA(1, 1)) decays
    more slowly than its lag-1 value implies (``RHO_CAUTION`` in
    ``docs/gates/calibration.md``). The lower bound, r - 0.84 se floored at 0,
    is one-sided 80%: iid baselines of 30-40 runs give 0 most of the time, so
    their k = 1 test is unchanged. ``tail``: as ``lag1_autocorr``, n then
    counts its runs less one. ``demean``: as ``lag1_autocorr`` (read about the
    mean, so a skewed iid baseline reads as independent).
    """
    r0 = lag1_autocorr(x, c, s, tail, demean)
    if not (r0 > 0).any():
        return r0, r0, r0
    n = _rho_n(x, tail)
    r = np.minimum(0.9, r0 + (1 + 3 * r0) / n)
    se = np.sqrt(rho_var(r, n))
    hi, lo = np.minimum(0.9, r + RHO_CAUTION * se), np.maximum(0.0, r - 0.84 * se)
    keep = r0 > 0
    return np.where(keep, r, 0.0)[()], np.where(keep, hi, 0.0)[()], np.where(keep, lo, 0.0)[()]


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

