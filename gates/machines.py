"""Runs on several machines: the between-machine variance a new machine adds.

Pure numpy/scipy. ``gates.judge`` adds it to a run's prediction when its
machine has no run in the baseline (``host_variance``, ``new_machine_var``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import special

from gates.robust import HALF_PI, MAD_K, median

__all__ = [
    "host_variance",
    "chi2_median_factor",
    "new_machine_var",
]


def host_variance(x: Sequence[float] | np.ndarray, hosts: Sequence[str | None] | None,
                  ) -> float | None:
    """Between-host variance component of run summaries, or None when not estimable.

    Test: none, an estimator. One-way random-effects model x = mu + h_host +
    e_run (Searle, Casella & McCulloch, *Variance Components*, 1992, sec. 3.5,
    the ANOVA estimator), made robust: host centres are medians, the
    within-host scale is the MAD of runs about their host's median, and
    tau^2 = max(0, var(host medians) - within^2 * mean(pi / (2 n_host))),
    the second term being what a median of n_host runs scatters by itself.
    Needs at least 2 hosts with 2 runs each; runs without a host are left out.
    Assumptions: host offsets independent of run noise; one level per host.
    """
    if hosts is None:
        return None
    x = np.asarray(x, dtype=float)
    groups = _machine_groups(tuple(hosts))
    groups = [g[np.isfinite(x[g])] for g in groups]
    rep = [g for g in groups if g.size >= 2]
    if len(rep) < 2:
        return None
    meds = [median(x[g]) for g in rep]
    resid = np.concatenate([x[g] - m for g, m in zip(rep, meds, strict=True)])
    within2 = (MAD_K * median(np.abs(resid))) ** 2  # about group medians: MAD suffices
    noise = within2 * float(np.mean([HALF_PI / g.size for g in rep]))
    return max(0.0, float(np.var(meds, ddof=1)) - noise)


@lru_cache(maxsize=64)
def chi2_median_factor(df: int) -> float:
    """df / median of chi^2(df): scales a variance estimated with df degrees of freedom
    to a median-unbiased value (2.2 for 1 df, 1.44 for 2, 1.19 for 4); with few
    machines the between-machine variance is mostly unknown."""
    if df <= 0:
        return 1.0
    return df / (2.0 * float(special.gammaincinv(df / 2.0, 0.5)))


def new_machine_var(win: Sequence[str | None], known: set, tau2: float) -> float:
    """Variance a window's runs on machines the baseline has not seen add to its mean.

    Runs of one new machine share its offset: sum over new machines of
    tau^2 (n_machine / k)^2.
    """
    if tau2 <= 0 or not win:
        return 0.0
    counts: dict[str, int] = {}
    for x in win:
        if x is not None and x not in known:
            counts[x] = counts.get(x, 0) + 1
    k = len(win)
    return tau2 * sum((c / k) ** 2 for c in counts.values())


@lru_cache(maxsize=256)
def _machine_groups(hosts: tuple[str | None, ...]) -> list[np.ndarray]:
    """Run indices per named machine (the same for every metric of a run: cached)."""
    idx: dict[str, list[int]] = {}
    for i, hk in enumerate(hosts):
        if hk is not None:
            idx.setdefault(hk, []).append(i)
    return [np.array(v, dtype=np.intp) for v in idx.values()]
