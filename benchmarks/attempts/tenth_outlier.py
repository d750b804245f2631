"""Tenth round, second part: a first rerun beyond every baseline run is re-confirmed.

Where the one-rerun confirm holds a trip but the rerun lies beyond every baseline run
(``extras["beyond"]``), the confirm is taken again with the next rerun in its place
(``stats.confirm(first=...)``), once; its verdict stands. Monkeypatches
``bench_gates.gate_alarms``.
python benchmarks/attempts/tenth_outlier.py SEED REPS MODELS EFFECTS [heavy [LEVEL_FACTOR]]
"""
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, "benchmarks")
sys.path.insert(0, ".")
import bench_gates as bg  # noqa: E402
from gates import stats  # noqa: E402

seed, reps = int(sys.argv[1]), int(sys.argv[2])
HEAVY_ONLY = len(sys.argv) > 5 and sys.argv[5] == "heavy"  # only on heavy-tailed baselines
HEAVY_LEVEL = float(sys.argv[6]) if len(sys.argv) > 6 else 1.0  # their first-attempt level x this
models = sys.argv[3].split(",")
effects = sys.argv[4].split(",")


def gate_alarms(s, ts, *, first_only=False, reconfirm=True):
    P = stats.DEFAULTS
    x = s.summaries.copy()
    tw, more = s.twin_summaries, s.more_twin_summaries
    out = np.zeros(len(ts), dtype=bool)
    for i, t in enumerate(ts):
        j = stats.judge_summaries(x[:t], float(x[t]), sign=1)
        level = stats.level_for(j, P.level)
        if reconfirm and HEAVY_LEVEL != 1.0 and j.extras.get("heavy"):
            level = min(1.0, level * HEAVY_LEVEL)  # spend the budget the re-confirm frees
        v = stats.decide(j, j.p_worse, level=level)
        suspect = v == "pass" and stats.is_suspect(j, j.p_worse, level=level)
        if v == "regression" or suspect:
            jc, v = stats.confirm(x[:t], float(tw[t]), sign=1, first=float(x[t]),
                                  suspect=suspect, another=True)
            if (reconfirm and v == "regression" and jc.extras.get("beyond")
                    and (not HEAVY_ONLY or jc.extras.get("heavy"))):
                jc2, v = stats.confirm(x[:t], float(more[0][t]), sign=1, first=float(x[t]),
                                       suspect=suspect, another=False)
            reruns = [float(tw[t])]
            for tk in more:
                if v != "suspect":
                    break
                reruns.append(float(tk[t]))
                _, v = stats.confirm_reruns(x[:t], reruns, sign=1, final=len(reruns) > len(more))
            if v != "regression" and jc.extras.get("p_split", 1.0) <= P.transient_level:
                x[t] = tw[t]
        out[i] = v == "regression"
        if out[i] and first_only:
            break
    return out


def cell(args):
    model, m = args
    ser = bg._cell_series(model, m, reps, seed)
    out = {}
    for rc in (False, True):
        for e in effects:
            ss = ser[e]
            if e in ("null", "spike"):
                out[(rc, e)] = float(np.mean([gate_alarms(s, bg.GATED, reconfirm=rc).any()
                                              for s in ss]))
            else:
                f = [bg._first(gate_alarms(s, bg.AFTER, first_only=True, reconfirm=rc))
                     for s in ss]
                out[(rc, e)] = bg._detect_stats(f)[2]
    return model, m, out


t0 = time.time()
with ProcessPoolExecutor(2) as ex:
    for model, m, out in ex.map(cell, [(mo, m) for mo in models for m in (1, 5)]):
        print(model, m, "  ".join(f"{e}:" + "/".join(f"{100 * out[(rc, e)]:.1f}"
                                                      for rc in (False, True))
                                 for e in effects), flush=True)
print(f"{time.time() - t0:.0f} s")
