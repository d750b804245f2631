"""Eleventh round, third part: corroboration on every baseline, not only heavy-tailed ones.

Monkeypatches ``gates.decisions._outlier_check`` to drop its ``heavy`` condition and
runs the benchmark's own ``gate_alarms`` (shipped gate otherwise), against the shipped.
python benchmarks/attempts/eleventh_all.py SEED REPS MODELS EFFECTS
"""
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, "benchmarks")
sys.path.insert(0, ".")
import bench_gates as bg  # noqa: E402

from gates import decisions  # noqa: E402

seed, reps = int(sys.argv[1]), int(sys.argv[2])
models = sys.argv[3].split(",")
effects = sys.argv[4].split(",")
SHIPPED = decisions._outlier_check


def everywhere(j, v, another):
    if another and v == "regression" and j.extras.get("beyond"):
        j.extras["corroborate"] = 1.0
        return "suspect"
    return v


def cell(args):
    model, m = args
    ser = bg._cell_series(model, m, reps, seed)
    out = {}
    for mode, fn in (("shipped", SHIPPED), ("all", everywhere)):
        decisions._outlier_check = fn
        for e in effects:
            ss = ser[e]
            if e in ("null", "spike"):
                out[(mode, e)] = float(np.mean([bg.gate_alarms(s, bg.GATED).any() for s in ss]))
            else:
                f = [bg._first(bg.gate_alarms(s, bg.AFTER, first_only=True)) for s in ss]
                out[(mode, e)] = bg._detect_stats(f)[2]
    return model, m, out


t0 = time.time()
with ProcessPoolExecutor(2) as ex:
    for model, m, out in ex.map(cell, [(mo, m) for mo in models for m in (1, 5)]):
        print(model, m, "  ".join(f"{e}:" + "/".join(f"{100 * out[(k, e)]:.1f}"
                                                      for k in ("shipped", "all"))
                                 for e in effects), flush=True)
print(f"{time.time() - t0:.0f} s")
