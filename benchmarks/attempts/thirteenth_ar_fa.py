"""Thirteenth round: where the AR(1) null false alarms come from.

Seeds 6-11 put AR(1) m=5 null FA at 6.17% (seeds 0-5: 4.92%). For every null
series that alarms, this records the alarm's run, the first attempt's deciding
window, rho / rho_lo / rho_hi of its baseline, how the confirm decided (reruns
used) and the true AR state, then tabulates them.
python benchmarks/attempts/thirteenth_ar_fa.py SEEDS REPS MODEL M
Measured at fb373e9 (the gate before this round), with a copy of the gate loop; it
reads ``gate_alarms(trace=...)`` since (the same tables at 3d784f1).
"""
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, "benchmarks")
sys.path.insert(0, ".")
import bench_gates as bg  # noqa: E402



def first_alarm(s):
    """The first alarm of ``bench_gates.gate_alarms`` on the gated runs, with what
    decided it (its ``trace``), or None."""
    trace = []
    if not bg.gate_alarms(s, bg.GATED, first_only=True, trace=trace).any():
        return None
    r = trace[-1]
    j, e = r["judgement"], r["judgement"].extras
    return {"t": r["t"], "window": j.window, "suspect": r["suspect"], "path": r["path"],
            "rho": e.get("rho"), "rho_lo": e.get("rho_lo"), "rho_hi": e.get("rho_hi"),
            "p": j.p_worse, "level": r["level"]}


def _task(a):
    model, m, reps, seed = a
    ser = bg._cell_series(model, m, reps, seed)
    return [r for r in (first_alarm(s) for s in ser["null"]) if r]


def crosstab(rows):
    """Alarms by gated-run range and route (the independent route: level x4)."""
    c = Counter(("30-39" if r["t"] < 40 else "40-59", "iid" if r["level"] > 0.02 else "other")
                for r in rows)
    return dict(sorted(c.items()))


def route_window(rows):
    """Alarms by route and the first attempt's deciding window."""
    c = Counter(("iid" if r["level"] > 0.02 else "other", r["window"]) for r in rows)
    return dict(sorted(c.items()))


def main():
    seeds = [int(x) for x in sys.argv[1].split(",")]
    reps, model, m = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    with ProcessPoolExecutor(2) as ex:
        rows = [r for rs in ex.map(_task, [(model, m, reps, s) for s in seeds]) for r in rs]
    n = reps * len(seeds)
    print(f"{model} m={m}: {len(rows)} alarms of {n} null series ({100 * len(rows) / n:.2f}%)")
    print("  by run range and route:", crosstab(rows))
    print("  by route and window:", route_window(rows))
    for key in ("window", "path", "suspect"):
        print(f"  by {key}:", dict(Counter(r[key] for r in rows)))
    print("  by run:", dict(sorted(Counter(r["t"] // 5 * 5 for r in rows).items())))
    lo = np.array([r["rho_lo"] for r in rows])
    print("  rho_lo: =0 %d, (0,0.2] %d, >0.2 %d" % ((lo == 0).sum(), ((lo > 0) & (lo <= 0.2)).sum(),
                                                  (lo > 0.2).sum()))
    print("  rho median %.2f, rho_hi median %.2f" % (np.median([r["rho"] for r in rows]),
                                                    np.median([r["rho_hi"] for r in rows])))
    for r in rows[:40]:
        print("   ", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})


if __name__ == "__main__":
    main()

