"""Thirteenth round: lag-1 autocorrelation read from the last 40 runs, not the baseline.

The windows' baseline is the 40 runs before the last 10, so on runs 30-38 it has
21-29 runs, and rho (which decides the independent route and the AR(1) terms) is
read from those alone: AR(1) m=5 null series alarm 44 times on runs 30-34 and 13-19
per five runs later (seeds 0-11). Variant: rho, rho_hi and rho_lo from the last
``RHO_RUNS`` runs before the new one (its k = 1 baseline) when that is longer than
the windows' baseline; centre and scale stay the baseline's. Under a change, the
last 9 runs then carry it into rho (the detection cost to measure).
python benchmarks/attempts/thirteenth_rho_runs.py SEEDS REPS MODELS EFFECTS [MS]
Run at fb373e9 (the gate before this round: rho_corrected without ``tail``).
"""
import os
import sys

import numpy as np

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates import judge  # noqa: E402
from gates.robust import center_scale  # noqa: E402

RHO_RUNS = int(os.environ.get("RHO_RUNS", "40"))
SHIPPED_JS = judge.judge_summaries
SHIPPED_RC, SHIPPED_RL = judge.rho_corrected, judge.rho_lower
STASH = variants.HISTORY


def _longer(x, c, s):
    h = STASH.get("h")
    if h is None:
        return x, c, s
    h = np.asarray(h, dtype=float)
    h = h[np.isfinite(h)][-RHO_RUNS:]
    if h.size <= x.size:
        return x, c, s
    c2, s2 = center_scale(h, None)
    return h, c2, s2


def rc(x, c, s):
    return SHIPPED_RC(*_longer(x, c, s))


def rl(x, c, s):
    return SHIPPED_RL(*_longer(x, c, s))


def shipped():
    variants.install_judge(SHIPPED_JS)
    judge.rho_corrected, judge.rho_lower = SHIPPED_RC, SHIPPED_RL


def variant():
    variants.install_judge(variants.history_judge(SHIPPED_JS))
    judge.rho_corrected, judge.rho_lower = rc, rl


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    variants.compare([("shipped", shipped), ("rho-runs", variant)],
                     seeds, reps, models, effects, ms)
