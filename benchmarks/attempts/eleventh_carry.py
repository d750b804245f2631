"""Eleventh round: the reruns of an unheld sequential confirm carried into the next one.

Reruns are never selected (only first attempts are), so under the null the
reruns of an earlier trip that did not hold are as good a sample of the
current regime as fresh ones; under a sustained shift they add its evidence.
Variant: when a sequential confirm (``confirm_reruns``) runs at gated run t,
the reruns of every unheld sequential chain at runs t-W..t-1 join its mean.

python benchmarks/attempts/eleventh_carry.py SEED REPS MODELS EFFECTS WS
(W = 0: the shipped gate)
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
models = sys.argv[3].split(",")
effects = sys.argv[4].split(",")
ws = sys.argv[5].split(",")  # W[:mode], mode: seq (default), all, first (all + pooled first
# stage), seq30 (seq, carried only into baselines of sequential_min_base runs)
CAP = int(sys.argv[6]) if len(sys.argv) > 6 else 99


def alarms(s, ts, wm, first_only=False):
    W, _, mode = wm.partition(":")
    W, mode = int(W), mode or "seq"
    P = stats.DEFAULTS
    x = s.summaries.copy()
    tw, more = s.twin_summaries, s.more_twin_summaries
    out = np.zeros(len(ts), dtype=bool)
    names = s.hosts
    carried = {}  # run index -> reruns of its unheld sequential chain
    for i, t in enumerate(ts):
        kw = {"hosts": names[:t], "host": names[t]} if names else {}
        j = stats.judge_summaries(x[:t], float(x[t]), sign=1, **kw)
        level = stats.level_for(j, P.level)
        v = stats.decide(j, j.p_worse, level=level)
        suspect = v == "pass" and stats.is_suspect(j, j.p_worse, level=level)
        if v == "regression" or suspect:
            jc, v = stats.confirm(x[:t], float(tw[t]), sign=1, first=float(x[t]),
                                  suspect=suspect, another=True, **kw)
            reruns = [float(tw[t])]
            old = [r for u in range(t - W, t) for r in carried.get(u, [])][-CAP:]
            if mode == "seq30" and jc.extras.get("n_base", 0.0) < P.sequential_min_base:
                old = []
            seq = False
            if mode == "first" and old and v in ("pass", "suspect") and not suspect \
                    and stats.independent(jc):
                _, vp = stats.confirm_reruns(x[:t], old + reruns, sign=1, final=False, **kw)
                if vp == "regression" or (vp == "suspect" and v == "pass"):
                    v = vp
            for tk in more:
                if v != "suspect":
                    break
                seq = True
                reruns.append(float(tk[t]))
                final = len(reruns) > len(more)
                _, v = stats.confirm_reruns(x[:t], old + reruns, sign=1, final=final, **kw)
            if (seq or (mode != "seq" and stats.independent(jc))) and v != "regression":
                carried[t] = reruns
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
    for W in ws:
        for e in effects:
            ss = ser[e]
            if e in ("null", "spike"):
                out[(W, e)] = float(np.mean([alarms(s, bg.GATED, W).any() for s in ss]))
            else:
                f = [bg._first(alarms(s, bg.AFTER, W, first_only=True)) for s in ss]
                out[(W, e)] = bg._detect_stats(f)[2]
    return model, m, out


t0 = time.time()
with ProcessPoolExecutor(2) as ex:
    for model, m, out in ex.map(cell, [(mo, m) for mo in models for m in (1, 5)]):
        print(model, m, "  ".join(f"{e}:" + "/".join(f"{100 * out[(W, e)]:.1f}" for W in ws)
                                 for e in effects), flush=True)
print(f"{time.time() - t0:.0f} s")
