"""Thirteenth round: a stricter first level or confirm where the baseline reads
autocorrelated (rho_lo > 0).

On such baselines a trip gets one rerun (reruns share the AR state), so a null run's
chance to alarm is about level x confirm_level, 30 times a series: AR(1) m=5 sits at
5.54% over seeds 0-11, 63 of its 133 alarms on this route (44 decided by k = 1).
Modes: ``level`` (first level x LEVEL_FACTOR there), ``confirm`` (the rerun's
confirm level CONFIRM there).
python benchmarks/attempts/thirteenth_ar_level.py SEEDS REPS MODELS EFFECTS [MS]
Measured at fb373e9 (the gate before this round).
"""
import dataclasses
import os
import sys

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

import bench_gates as bg  # noqa: E402
from gates import decisions  # noqa: E402

LEVEL_FACTOR = float(os.environ.get("LEVEL_FACTOR", "0.75"))
CONFIRM = float(os.environ.get("CONFIRM", "0.035"))
SHIPPED_LEVEL, SHIPPED_CONFIRM = decisions.level_for, decisions.confirm


def level_ar(j, level, params=decisions.DEFAULTS):
    if j.status == "ok" and j.extras.get("rho_lo", 0.0) > 0.0:
        return level * LEVEL_FACTOR
    return SHIPPED_LEVEL(j, level, params)


def confirm_ar(history, rerun, *, params=decisions.DEFAULTS, **kw):
    j = decisions.judge_summaries(history, rerun, sign=kw["sign"])
    if j.status == "ok" and j.extras.get("rho_lo", 0.0) > 0.0:
        params = dataclasses.replace(params, confirm_level=CONFIRM)
    return SHIPPED_CONFIRM(history, rerun, params=params, **kw)


def _install(lv, cf):
    decisions.level_for = bg.stats.level_for = lv
    decisions.confirm = bg.stats.confirm = cf


def shipped():
    _install(SHIPPED_LEVEL, SHIPPED_CONFIRM)


def level():
    _install(level_ar, SHIPPED_CONFIRM)


def confirm():
    _install(SHIPPED_LEVEL, confirm_ar)


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    variants.compare([("shipped", shipped), ("level", level), ("confirm", confirm)],
                     seeds, reps, models, effects, ms)
