"""Twelfth round, third part: the sequential confirm on baselines with a small rho_lo.

``decisions.independent`` asks rho_lo == 0; rho_lo, a cautious lower bound, is above 0
by chance in about a quarter of independent Gaussian 40-run baselines, whose trips then
get the one-rerun confirm and the gate's plain level. Variant: rho_lo <= R counts as
independent. Monkeypatches ``gates.decisions.independent``; runs the benchmark's
``gate_alarms`` at R = 0 (shipped) and the given values.
python benchmarks/attempts/twelfth_rho.py SEEDS REPS MODELS EFFECTS R1,R2 [MS]
"""
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, "benchmarks")
sys.path.insert(0, ".")
import bench_gates as bg  # noqa: E402

from gates import decisions  # noqa: E402

seeds = [int(x) for x in sys.argv[1].split(",")]
reps = int(sys.argv[2])
models = sys.argv[3].split(",")
effects = sys.argv[4].split(",")
rs = [0.0] + [float(x) for x in sys.argv[5].split(",")]
ms = [int(x) for x in (sys.argv[6] if len(sys.argv) > 6 else "1,5").split(",")]


def independent_at(r):
    def independent(j):
        return (j.status == "ok" and j.extras.get("rho_lo", 0.0) <= r
                and not j.extras.get("heavy", 0.0) and j.extras.get("machines", 0.0) <= 1)
    return independent


def cell(args):
    model, m = args
    out = {}
    for r in rs:
        decisions.independent = independent_at(r)
        acc = {e: [] for e in effects}
        for seed in seeds:
            ser = bg._cell_series(model, m, reps, seed)
            for e in effects:
                if e in ("null", "spike"):
                    acc[e].append(np.mean([bg.gate_alarms(s, bg.GATED, first_only=True).any()
                                           for s in ser[e]]))
                else:
                    f = [bg._first(bg.gate_alarms(s, bg.AFTER, first_only=True)) for s in ser[e]]
                    acc[e].append(bg._detect_stats(f)[2])
        for e in effects:
            out[(r, e)] = float(np.mean(acc[e]))
    return model, m, out


t0 = time.time()
with ProcessPoolExecutor(2) as ex:
    for model, m, out in ex.map(cell, [(mo, m) for mo in models for m in ms]):
        print(f"{model:9s} m={m}", "  ".join(f"{e}:" + "/".join(f"{100 * out[(r, e)]:.2f}"
                                                   for r in rs) for e in effects), flush=True)
print(f"{time.time() - t0:.0f} s")
