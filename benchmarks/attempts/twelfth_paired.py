"""Twelfth round: the spike target measured on paired series.

Each null series of the benchmark and the same series with its run 40 raised by the
spike (+20%, its reruns clean, as ``series.make_series`` draws a spike): what the
spike itself adds, free of the sampling noise between two independent draws.
python benchmarks/attempts/twelfth_paired.py SEEDS REPS MODELS [MS]
Prints per cell: null FA, paired-spike FA, series alarmed only with the spike
(by where the first extra alarm fell: on the spike run, after it), only without.
"""
import dataclasses
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, "benchmarks")
sys.path.insert(0, ".")
import bench_gates as bg  # noqa: E402
from series import SPIKE  # noqa: E402

seeds = [int(x) for x in sys.argv[1].split(",")]
reps = int(sys.argv[2])
models = sys.argv[3].split(",")
ms = [int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "1,5").split(",")]


def spiked(s):
    runs = s.runs.copy()
    runs[bg.TAU] *= 1.0 + SPIKE
    return dataclasses.replace(s, runs=runs, tau=bg.TAU, effect="spike")


def cell(args):
    model, m = args
    c = dict(n=0, null=0, spike=0, on=0, after=0, lost=0, pos=[], lpos=[])
    for seed in seeds:
        ser = bg._cell_series(model, m, reps, seed, effects=("null",))
        for s in ser["null"]:
            a0 = bg._first(bg.gate_alarms(s, bg.GATED, first_only=True))
            a1 = bg._first(bg.gate_alarms(spiked(s), bg.GATED, first_only=True))
            c["n"] += 1
            c["null"] += a0 is not None
            c["spike"] += a1 is not None
            if a1 is not None and a0 is None:
                c["on" if bg.GATED[a1] == bg.TAU else "after"] += 1
                c["pos"].append(bg.GATED[a1])
            if a0 is not None and a1 is None:
                c["lost"] += 1
                c["lpos"].append(bg.GATED[a0])
    return model, m, c


t0 = time.time()
with ProcessPoolExecutor(2) as ex:
    for model, m, c in ex.map(cell, [(mo, m) for mo in models for m in ms]):
        n = c["n"]
        d = c["on"] + c["after"] - c["lost"]
        se = np.sqrt(c["on"] + c["after"] + c["lost"]) / n
        print(f"{model:9s} m={m} n={n} null {100*c['null']/n:.2f}% spike {100*c['spike']/n:.2f}%"
              f"  extra: on-spike {c['on']} after {c['after']} lost {c['lost']}"
              f"  diff {100*d/n:+.2f} (paired se {100*se:.2f})"
              f"  extra at {sorted(c['pos'])} lost at {sorted(c['lpos'])}", flush=True)
print(f"{time.time() - t0:.0f} s")
