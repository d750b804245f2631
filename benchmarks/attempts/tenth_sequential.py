"""Tenth round: the sequential confirm (up to K reruns) against the two-rerun one.

Same series (the benchmark's, seed SEED), the gate with its reruns cut to K.
python benchmarks/attempts/tenth_sequential.py SEED REPS MODELS EFFECTS KS
"""
import dataclasses
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, "benchmarks")
sys.path.insert(0, ".")
import bench_gates as bg  # noqa: E402

seed, reps = int(sys.argv[1]), int(sys.argv[2])
models = sys.argv[3].split(",")
effects = sys.argv[4].split(",")
ks = [int(k) for k in sys.argv[5].split(",")]


def cell(args):
    model, m = args
    ser = bg._cell_series(model, m, reps, seed)
    out = {}
    for K in ks:
        for e in effects:
            ss = [dataclasses.replace(s, more_twins=s.more_twins[:K - 1]) for s in ser[e]]
            if e in ("null", "spike"):
                out[(K, e)] = float(np.mean([bg.gate_alarms(s, bg.GATED).any() for s in ss]))
            else:
                f = [bg._first(bg.gate_alarms(s, bg.AFTER, first_only=True)) for s in ss]
                out[(K, e)] = bg._detect_stats(f)[2]
    return model, m, out


t0 = time.time()
with ProcessPoolExecutor(2) as ex:
    for model, m, out in ex.map(cell, [(mo, m) for mo in models for m in (1, 5)]):
        print(model, m, "  ".join(f"{e}:" + "/".join(f"{100 * out[(K, e)]:.1f}" for K in ks)
                                 for e in effects), flush=True)
print(f"{time.time() - t0:.0f} s")
