"""Cache the gate's alarms and its baseline centre/scale/independence per judged run."""
import sys, pickle, os
sys.path[:0] = [str(__import__("pathlib").Path(__file__).resolve().parents[1]), str(__import__("pathlib").Path(__file__).resolve().parents[2])]
import numpy as np
import bench_gates as B
from gates import stats
OUT = os.environ.get("GATE_ATTEMPTS_CACHE", "/tmp/gate-attempts") + "/ninth"; os.makedirs(OUT, exist_ok=True)

def run(s, ts, first_only):
    P = stats.DEFAULTS
    x = s.summaries.copy(); tw, tw2 = s.twin_summaries, s.twin2_summaries
    al = np.zeros(len(ts), bool); c = np.full(len(ts), np.nan); sc = np.full(len(ts), np.nan); ind = np.zeros(len(ts), bool); rr = np.zeros(len(ts), bool); win = np.zeros(len(ts), int)
    for i, t in enumerate(ts):
        j = stats.judge_summaries(x[:t], float(x[t]), sign=1)
        c[i], sc[i], ind[i] = (j.baseline if j.baseline is not None else np.nan), j.extras.get('s1', j.scale), stats.independent(j)
        level = stats.level_for(j, P.level)
        v = stats.decide(j, j.p_worse, level=level)
        suspect = v == "pass" and stats.is_suspect(j, j.p_worse, level=level)
        if v == "regression" or suspect:
            jc, v = stats.confirm(x[:t], float(tw[t]), sign=1, first=float(x[t]), suspect=suspect, another=True)
            if v == "suspect":
                _, v = stats.confirm_pair(x[:t], float(tw[t]), float(tw2[t]), sign=1)
            rr[i] = v != "regression"
            if v != "regression" and jc.extras.get("p_split", 1.0) <= P.transient_level:
                x[t] = tw[t]
        al[i] = v == "regression"
        win[i] = j.window
        if al[i] and first_only:
            # keep filling centre/scale for the CUSUM path after the gate's alarm
            first_only = False; stop_after = True
    return al, c, sc, ind, rr, win

def cell(args):
    model, m, seed, reps = args
    ser = B._cell_series(model, m, reps, seed)
    out = {}
    for e, ss in ser.items():
        ts = B.GATED if e in ("null", "spike") else B.AFTER
        out[e] = [(s.summaries, s.twin_summaries, *run(s, ts, e not in ("null", "spike"))) for s in ss]
    pickle.dump(out, open(f"{OUT}/{model}_{m}_{seed}.pkl", "wb"))
    return model, m

if __name__ == "__main__":
    from multiprocessing import Pool
    seed = int(sys.argv[1]); reps = int(sys.argv[2])
    models = sys.argv[3].split(",") if len(sys.argv) > 3 else list(B.NOISE_MODELS)
    jobs = [(mo, m, seed, reps) for mo in models for m in (1, 5)]
    with Pool(2) as p:
        for r in p.imap_unordered(cell, jobs): print(r, flush=True)
