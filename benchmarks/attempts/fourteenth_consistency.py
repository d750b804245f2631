"""Fourteenth round: the consistency level of the confirm, read for the spike excess.

After the thirteenth round the spike alarms beyond their nulls (gauss3 m=5, Student-t
m=1, +0.46 points each over twelve seeds) are mostly on the spike run itself: the
clean rerun is high by chance (1.5-3 run scales), close enough to the +20% first
attempt that the consistency check (``GateParams.consistency_level``, one-sided p of
first - rerun for two draws of one regime, 0.01 since the ninth round) lets the pair
stand, and it then holds on its own. Modes: that level at 0.01 (shipped) and LEVELS.
The gate's parameters are one frozen ``GateParams`` shared by every module (the
default argument of ``confirm`` and the judge), so each mode sets the field on it.
python benchmarks/attempts/fourteenth_consistency.py SEEDS REPS MODELS EFFECTS [MS]
(LEVELS=0.02,0.03 by default)
"""
import functools
import os
import sys

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates.judge import DEFAULTS  # noqa: E402

SHIPPED = DEFAULTS.consistency_level
LEVELS = [float(x) for x in os.environ.get("LEVELS", "0.02,0.03").split(",")]


def at(level):
    object.__setattr__(DEFAULTS, "consistency_level", level)


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    modes = [("shipped", functools.partial(at, SHIPPED))]
    modes += [(f"consistency {lv}", functools.partial(at, lv)) for lv in LEVELS]
    variants.compare(modes, seeds, reps, models, effects, ms)
