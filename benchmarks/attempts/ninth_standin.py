"""Gate alarms with a broader stand-in rule: an unheld rerun replaces its first attempt."""
import sys, time
sys.path[:0] = [str(__import__("pathlib").Path(__file__).resolve().parents[1]), str(__import__("pathlib").Path(__file__).resolve().parents[2])]
import numpy as np
import bench_gates as B
from gates import stats

WINMIN = {'winhold': 3, 'winhold10': 10}
def alarms(s, ts, rule, first_only=False):
    P = stats.DEFAULTS
    x = s.summaries.copy(); tw, tw2 = s.twin_summaries, s.twin2_summaries
    out = np.zeros(len(ts), bool)
    for i, t in enumerate(ts):
        j = stats.judge_summaries(x[:t], float(x[t]), sign=1)
        level = stats.level_for(j, P.level)
        v = stats.decide(j, j.p_worse, level=level)
        suspect = v == "pass" and stats.is_suspect(j, j.p_worse, level=level)
        if v == "regression" or suspect:
            jc, v = stats.confirm(x[:t], float(tw[t]), sign=1, first=float(x[t]), suspect=suspect, another=True)
            if rule.startswith("winhold") and v == "suspect" and j.window >= WINMIN[rule] and not suspect:
                _, v1 = stats.confirm(x[:t], float(tw[t]), sign=1, first=float(x[t]), suspect=False, another=False)
                if v1 == "regression":
                    v = "regression"
            if v == "suspect":
                _, v = stats.confirm_pair(x[:t], float(tw[t]), float(tw2[t]), sign=1)
            ps = jc.extras.get("p_split", 1.0)
            if v != "regression":
                if ps <= P.transient_level or rule == "all" or (rule == "iid" and j.extras.get("rho_lo", 0.0) == 0.0) \
                   or (rule == "indep" and stats.independent(j)) or (rule == "split05" and ps <= 0.05 and j.extras.get("rho_lo", 0.0) == 0.0):
                    x[t] = tw[t]
        out[i] = v == "regression"
        if out[i] and first_only: break
    return out

if __name__ == "__main__":
    rules = sys.argv[1].split(","); seeds = [int(x) for x in sys.argv[2].split(",")]
    models = sys.argv[3].split(",") if len(sys.argv) > 3 else list(B.NOISE_MODELS)
    det = len(sys.argv) > 4
    for model in models:
        for m in (1, 5):
            res = {r: {"null": [], "spike": [], **({e: [] for e in B.DETECT_EFFECTS} if det else {})} for r in rules}
            for seed in seeds:
                ser = B._cell_series(model, m, 200, seed, effects=B.EFFECTS if det else ("null",))
                if not det:
                    ser = B._cell_series(model, m, 200, seed)  # need spikes (last effect): full draw
                for r in rules:
                    res[r]["null"].append(np.mean([alarms(s, B.GATED, r).any() for s in ser["null"]]))
                    res[r]["spike"].append(np.mean([alarms(s, B.GATED, r).any() for s in ser["spike"]]))
                    if det:
                        for e in B.DETECT_EFFECTS:
                            res[r][e].append(np.mean([alarms(s, B.AFTER, r, True).any() for s in ser[e]]))
            for r in rules:
                line = f"{model:9s} m={m} {r:6s} null {np.mean(res[r]['null'])*100:.2f} spike {np.mean(res[r]['spike'])*100:.2f}"
                if det: line += " | " + " ".join(f"{e} {np.mean(res[r][e])*100:.0f}" for e in B.DETECT_EFFECTS)
                print(line, flush=True)
