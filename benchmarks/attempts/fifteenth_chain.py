"""Fifteenth round: the first attempt against the mean of all its reruns (chain consistency).

After the fourteenth round the one spike cell short (gauss3 m=5, +0.38 points over
twelve seeds) alarms mostly on the spike run itself: a certain trip whose clean reruns
are high by chance (1-2.5 run scales each), held by the sequential reruns' mean, by
corroboration or by one rerun. The confirm asks the first attempt and its *first*
rerun to be two draws of one regime (``consistency_level`` 0.01); a chain of two to
four reruns never asks it again, though their mean tells a +20% first attempt from the
regime far better than one rerun does. Variant: where a chain of reruns (sequential
confirm or corroboration) would hold, the first attempt must also be consistent with
the mean of all n reruns: one-sided predictive p of first - mean with variance
s1c^2 (1 + 1/n) (the judge's own scale, df as ``confirm``'s split test) above LEVEL.
Monkeypatches ``gates.stats.confirm`` / ``confirm_reruns`` / ``corroborate`` as the
benchmark's gate calls them.
Adopted in the fifteenth round as LEVELS=0.01 LIGHT=1 CLEAR=1 (``decisions._chain_check``):
from 814a29a on the shipped gate does this itself, and both modes run it.
python benchmarks/attempts/fifteenth_chain.py SEEDS REPS MODELS EFFECTS [MS]
(LEVELS=0.01,0.001 by default; LIGHT=1: not on heavy-tailed baselines;
CLEAR=1: not where the reruns' p <= rerun_mean_hold_level)
"""
import functools
import math
import os
import sys

import numpy as np

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates import stats  # noqa: E402
from gates.robust import QN_EFF, predictive_z_pvalue  # noqa: E402

SHIP = (stats.confirm, stats.confirm_reruns, stats.corroborate)
LEVELS = [float(x) for x in os.environ.get("LEVELS", "0.01,0.001").split(",")]
LIGHT = os.environ.get("LIGHT", "") == "1"  # only on baselines that are not heavy-tailed
# CLEAR=1: not where the reruns are clear on their own (p <= rerun_mean_hold_level)
CLEAR = os.environ.get("CLEAR", "") == "1"


def _clear(j):
    return CLEAR and j.extras.get("p_run_worse", 1.0) <= stats.DEFAULTS.rerun_mean_hold_level
STATE: dict = {}


def shipped():
    stats.confirm, stats.confirm_reruns, stats.corroborate = SHIP


def _consistent(reruns, level):
    first, s1c, n_base, ev, sign = (STATE.get(k) for k in ("first", "s1c", "n", "ev", "sign"))
    if first is None or not s1c or (LIGHT and STATE.get("heavy")):
        return True
    n = len(reruns)
    se = math.sqrt(max((s1c * s1c + max(ev, 0.0)) * (1.0 + 1.0 / n), 1e-300))
    df = max(QN_EFF * (n_base - 1), 2.0)
    return predictive_z_pvalue(sign * (first - float(np.mean(reruns))) / se, df) > level


def variant(level):
    c0, cr0, co0 = SHIP

    def confirm(history, rerun, *, first=None, **kw):
        j, v = c0(history, rerun, first=first, **kw)
        STATE.clear()
        STATE.update(first=first, rerun=rerun, s1c=j.extras.get("s1c", j.extras.get("s1")),
                     n=j.n_baseline, ev=kw.get("extra_var", 0.0), sign=kw["sign"],
                     heavy=j.extras.get("heavy", 0.0))
        return j, v

    def confirm_reruns(history, reruns, **kw):
        j, v = cr0(history, reruns, **kw)
        if v == "regression" and not _clear(j) and not _consistent(list(reruns), level):
            v = "pass"
        return j, v

    def corroborate(history, rerun, **kw):
        j, v = co0(history, rerun, **kw)
        if (v == "regression" and not _clear(j)
                and not _consistent([STATE.get("rerun"), rerun], level)):
            v = "pass"
        return j, v

    stats.confirm, stats.confirm_reruns, stats.corroborate = confirm, confirm_reruns, corroborate


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    modes = [("shipped", shipped)]
    modes += [(f"chain {lv}", functools.partial(variant, lv)) for lv in LEVELS]
    variants.compare(modes, seeds, reps, models, effects, ms)
