"""Thirteenth round: the bias correction of the pooled lag-1 (baseline + tail).

Shipped with the tail: r + (1 + 3 r) / n with n = all runs less one. Each segment's
own centre biases its lag-1 products low (Marriott & Pope 1954, per segment), so
variant ``per-segment``: r + ((1 + r) k + 2 r) / N, k = 2 segments, N = all runs
(k = 1 gives the shipped (1 + 3 r) / n).
python benchmarks/attempts/thirteenth_rho_bias.py SEEDS REPS MODELS EFFECTS [MS]
Run at 3d784f1 (this round's gate).
"""
import math
import sys

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates import judge, robust  # noqa: E402

SHIPPED_RC, SHIPPED_RL = judge.rho_corrected, judge.rho_lower


def rc(x, c, s, tail=None):
    if tail is None or tail.size < 2:
        return SHIPPED_RC(x, c, s, tail)
    r = robust.lag1_autocorr(x, c, s, tail)
    if r <= 0:
        return 0.0, 0.0
    n = x.size + tail.size
    r = min(0.9, r + ((1 + r) * 2 + 2 * r) / n)
    return r, min(0.9, r + robust.RHO_CAUTION * math.sqrt(robust.rho_var(r, n)))


def rl(x, c, s, tail=None):
    if tail is None or tail.size < 2:
        return SHIPPED_RL(x, c, s, tail)
    r, _ = rc(x, c, s, tail)
    return 0.0 if r <= 0 else max(0.0, r - 0.84 * math.sqrt(robust.rho_var(r, x.size + tail.size)))


def shipped():
    judge.rho_corrected, judge.rho_lower = SHIPPED_RC, SHIPPED_RL


def variant():
    judge.rho_corrected, judge.rho_lower = rc, rl


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    variants.compare([("shipped", shipped), ("per-segment", variant)],
                     seeds, reps, models, effects, ms)
