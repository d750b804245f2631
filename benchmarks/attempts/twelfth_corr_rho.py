"""Twelfth round, fourth part: corroboration where rho_lo is small but above 0.

After the second part the on-spike Student-t m=1 alarms left are one-rerun holds of a
rerun beyond every baseline run on baselines with rho_lo 0.03-0.05 (no sequential
confirm there). Variant: ``_outlier_check`` also asks for corroboration on baselines
that are not heavy but have 0 < rho_lo <= ``QUANTILE_RHO`` (0.2). Monkeypatches
``gates.decisions._outlier_check``; the benchmark's ``gate_alarms`` against the shipped.
python benchmarks/attempts/twelfth_corr_rho.py SEEDS REPS MODELS EFFECTS [MS]
"""
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, "benchmarks")
sys.path.insert(0, ".")
import bench_gates as bg  # noqa: E402

from gates import decisions  # noqa: E402
from gates.judge import QUANTILE_RHO  # noqa: E402

seeds = [int(x) for x in sys.argv[1].split(",")]
reps = int(sys.argv[2])
models = sys.argv[3].split(",")
effects = sys.argv[4].split(",")
ms = [int(x) for x in (sys.argv[5] if len(sys.argv) > 5 else "1,5").split(",")]
SHIPPED = decisions._outlier_check


def variant(j, v, another):
    rho_lo = j.extras.get("rho_lo", 0.0)
    if (another and v == "regression" and j.extras.get("beyond")
            and (j.extras.get("heavy") or 0.0 < rho_lo <= QUANTILE_RHO)):
        j.extras["corroborate"] = 1.0
        return "suspect"
    return v


def cell(args):
    model, m = args
    out = {}
    for mode, fn in (("shipped", SHIPPED), ("variant", variant)):
        decisions._outlier_check = fn
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
            out[(mode, e)] = float(np.mean(acc[e]))
    return model, m, out


t0 = time.time()
with ProcessPoolExecutor(2) as ex:
    for model, m, out in ex.map(cell, [(mo, m) for mo in models for m in ms]):
        print(f"{model:9s} m={m}", "  ".join(f"{e}:" + "/".join(f"{100 * out[(k, e)]:.2f}"
                                                   for k in ("shipped", "variant"))
                                            for e in effects), flush=True)
print(f"{time.time() - t0:.0f} s")
