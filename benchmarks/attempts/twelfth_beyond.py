"""Twelfth round, second part: no immediate hold for a rerun beyond every baseline run.

The sequential confirm's first stage holds a rerun at once when its own p is <= 0.0005
(``rerun_hold_level``). On a baseline that looks light-tailed, that p rests on the
parametric tail alone when the rerun lies beyond every run seen, and Student-t (t3)
reruns get there far more often than 0.0005 (paired spike series: 6 of 7 extra Student-t
m=1 alarms were such holds). Variant: such a rerun is ``suspect``; another rerun follows
and the clipped mean of the reruns decides (``confirm_reruns``). Monkeypatches
``gates.decisions.confirm`` at commit 2a5bd5f (the code it measured, which still held
such a rerun at once); runs the benchmark's ``gate_alarms`` against that.
python benchmarks/attempts/twelfth_beyond.py SEEDS REPS MODELS EFFECTS [MS]
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
ms = [int(x) for x in (sys.argv[5] if len(sys.argv) > 5 else "1,5").split(",")]
SHIPPED = decisions.confirm
HOLD = 0.0005  # the rerun_hold_level this round took out: run this at commit 2a5bd5f


def variant(*a, **k):
    j, v = SHIPPED(*a, **k)
    if (v == "regression" and k.get("another") and not k.get("suspect")
            and decisions.independent(j) and j.extras.get("beyond")
            and j.extras["p_run_worse"] <= HOLD):
        return j, "suspect"
    return j, v


def cell(args):
    model, m = args
    out = {}
    for mode, fn in (("shipped", SHIPPED), ("variant", variant)):
        bg.stats.confirm = fn
        acc = {e: [] for e in effects}
        for seed in seeds:
            ser = bg._cell_series(model, m, reps, seed)
            for e in effects:
                ss = ser[e]
                if e in ("null", "spike"):
                    acc[e].append(np.mean([bg.gate_alarms(s, bg.GATED, first_only=True).any()
                                           for s in ss]))
                else:
                    f = [bg._first(bg.gate_alarms(s, bg.AFTER, first_only=True)) for s in ss]
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
