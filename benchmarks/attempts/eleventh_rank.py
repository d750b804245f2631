"""Eleventh round, second part: a re-confirm that asks the next rerun only to lean bad.

On heavy-tailed baselines (``heavy``), where the one-rerun confirm holds a trip but
that rerun lies beyond every baseline run (``extras["beyond"]``: a power-cap dip
looks like that), the next rerun is taken too and the regression holds only if it
ranks among the worst R of the baseline runs (rank p = (1 + #{baseline >= it}) /
(n + 1) <= R). Tenth round's re-confirm judged that rerun alone at the confirm
level and lost bimodal step-20% series whose second rerun sat in the baseline's
slow-mode range. The rest of the gate as in ``bench_gates.gate_alarms``.
python benchmarks/attempts/eleventh_rank.py SEED REPS MODELS EFFECTS RS  (R = 0: shipped)
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
rs = [float(r) for r in sys.argv[5].split(",")]


def alarms(s, ts, R, first_only=False):
    P = stats.DEFAULTS
    x = s.summaries.copy()
    tw, more = s.twin_summaries, s.more_twin_summaries
    out = np.zeros(len(ts), dtype=bool)
    names = s.hosts
    unheld = {}
    w = max(P.windows)
    for i, t in enumerate(ts):
        kw = {"hosts": names[:t], "host": names[t]} if names else {}
        j = stats.judge_summaries(x[:t], float(x[t]), sign=1, **kw)
        level = stats.level_for(j, P.level)
        v = stats.decide(j, j.p_worse, level=level)
        suspect = v == "pass" and stats.is_suspect(j, j.p_worse, level=level)
        if v == "regression" or suspect:
            jc, v = stats.confirm(x[:t], float(tw[t]), sign=1, first=float(x[t]),
                                  suspect=suspect, another=True, **kw)
            if R > 0 and v == "regression" and jc.extras.get("beyond") and jc.extras.get("heavy"):
                base = x[:t][-P.window:]
                r2 = float(more[0][t])
                p_rank = (1 + np.sum(base >= r2)) / (base.size + 1)
                if p_rank > R:
                    v = "pass"
            reruns = [float(tw[t])]
            carried = [r for u in range(t - w, t) for r in unheld.get(u, ())]
            for tk in more:
                if v != "suspect":
                    break
                reruns.append(float(tk[t]))
                _, v = stats.confirm_reruns(x[:t], reruns, sign=1, final=len(reruns) > len(more),
                                            carried=carried, **kw)
            if len(reruns) >= 2 and v != "regression":
                unheld[t] = reruns
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
    for R in rs:
        for e in effects:
            ss = ser[e]
            if e in ("null", "spike"):
                out[(R, e)] = float(np.mean([alarms(s, bg.GATED, R).any() for s in ss]))
            else:
                f = [bg._first(alarms(s, bg.AFTER, R, first_only=True)) for s in ss]
                out[(R, e)] = bg._detect_stats(f)[2]
    return model, m, out


t0 = time.time()
with ProcessPoolExecutor(2) as ex:
    for model, m, out in ex.map(cell, [(mo, m) for mo in models for m in (1, 5)]):
        print(model, m, "  ".join(f"{e}:" + "/".join(f"{100 * out[(R, e)]:.1f}" for R in rs)
                                 for e in effects), flush=True)
print(f"{time.time() - t0:.0f} s")
