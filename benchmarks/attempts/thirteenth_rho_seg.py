"""Thirteenth round: lag-1 autocorrelation read from the baseline and the runs after it,
each segment about its own centre.

``thirteenth_rho_runs.py`` read rho from the last 40 runs: AR(1) m=5 null FA 5.54 ->
3.25% (seeds 0-11), but a change in the last 9 runs then reads as autocorrelation
(seed 0 within 10 runs: gauss1 step 1% 48.5 -> 40%, AR(1) m=5 step 5% 38 -> 28%).
Variant: the lag-1 products of the windows' baseline about its centre and of the 9
runs between it and the new run about their own median, pooled (a level shift
between the two segments adds nothing); bias correction and se with n = all runs
less one (the second centre). Clipping at +/- 3 baseline scales, as shipped.
python benchmarks/attempts/thirteenth_rho_seg.py SEEDS REPS MODELS EFFECTS [MS]
(MODE=iid: only the independence reading, rho_lo, uses it; rho and rho_hi as shipped)
Run at fb373e9 (the gate before this round: rho_corrected without ``tail``).
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates import judge  # noqa: E402
from gates.robust import RHO_CAUTION, rho_var  # noqa: E402

SHIPPED_JS = judge.judge_summaries
SHIPPED_RC, SHIPPED_RL = judge.rho_corrected, judge.rho_lower
ONLY_IID = os.environ.get("MODE") == "iid"
STASH = variants.HISTORY


def _segments(x, c, s):
    """(pooled lag-1 r, n) or None when x is not the windows' baseline of the stashed history."""
    h = STASH.get("h")
    if h is None or s <= 0 or x.size < 8:
        return None
    h = np.asarray(h, dtype=float)
    h = h[np.isfinite(h)]
    if h.size < x.size + 9 or not np.array_equal(h[:-9][-x.size:], x):
        return None
    rec = h[-9:]
    a = np.clip(x, c - 3 * s, c + 3 * s) - c
    cr = float(np.median(rec))
    b = np.clip(rec, cr - 3 * s, cr + 3 * s) - cr
    d = float(a @ a + b @ b)
    if d <= 0:
        return None
    r = float(a[1:] @ a[:-1] + b[1:] @ b[:-1]) / d
    return min(max(r, 0.0), 0.9), x.size + rec.size - 1


def _corrected(r, n):
    if r <= 0:
        return 0.0, 0.0
    r = min(0.9, r + (1 + 3 * r) / n)
    return r, min(0.9, r + RHO_CAUTION * math.sqrt(rho_var(r, n)))


def rc(x, c, s):
    seg = None if ONLY_IID else _segments(x, c, s)
    return SHIPPED_RC(x, c, s) if seg is None else _corrected(*seg)


def rl(x, c, s):
    seg = _segments(x, c, s)
    if seg is None:
        return SHIPPED_RL(x, c, s)
    r, _ = _corrected(*seg)
    return 0.0 if r <= 0 else max(0.0, r - 0.84 * math.sqrt(rho_var(r, seg[1])))


def shipped():
    variants.install_judge(SHIPPED_JS)
    judge.rho_corrected, judge.rho_lower = SHIPPED_RC, SHIPPED_RL


def variant():
    variants.install_judge(variants.history_judge(SHIPPED_JS))
    judge.rho_corrected, judge.rho_lower = rc, rl


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    variants.compare([("shipped", shipped), ("rho-seg", variant)],
                     seeds, reps, models, effects, ms)
