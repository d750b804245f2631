"""Where a series of run summaries changed: Pettitt's test, the one implementation.

The gate localises the run a regression began in (``gates.gate``) and the
report names the commit range a trend moved in (``gates.report.build.find_change``);
both call :func:`pettitt`. Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ChangePoint", "pettitt"]


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first index of the new regime
    p: float
    before: float  # median before
    after: float  # median after


def pettitt(x: Sequence[float] | np.ndarray) -> ChangePoint | None:
    """Localise one change point in a series of run summaries (Pettitt's test).

    Test: rank-based Mann-Whitney CUSUM, U_t = sum_{i<=t} sum_{j>t} sgn(x_j - x_i);
    the change is after argmax |U_t|, p ~ 2 exp(-6 K^2 / (T^3 + T^2)).
    Assumptions: independent values, at most one change in location; robust
    to outliers and non-normal noise. Reference: Pettitt, Applied Statistics
    28 (1979) 126-135. None for fewer than 4 values.

    Computed in O(T^2) numpy without a Python loop (a report runs it on 10,000
    trends): with V_i = sum_j sgn(x_j - x_i), U_t = V_0 + ... + V_t, since the
    pairs inside the prefix cancel.
    """
    a = np.asarray(x, dtype=float)
    T = a.size
    if T < 4:
        return None
    v = np.sign(a[None, :] - a[:, None]).sum(axis=1)  # V_i
    u = np.cumsum(v)[:-1]  # U_t for a split after index t = 0..T-2
    t = int(np.argmax(np.abs(u)))
    k = float(abs(u[t]))
    p = min(1.0, 2.0 * math.exp(-6.0 * k * k / (T**3 + T**2)))
    return ChangePoint(t + 1, p, float(np.median(a[: t + 1])), float(np.median(a[t + 1:])))
