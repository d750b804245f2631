"""Sixth round (2026-12-01): a second confirm rerun when the first is borderline.

Exploration harness, not part of the product (see ../results/bench_gates.md,
"Sixth round"). It replays the benchmark's own series (``bench_gates._cell_series``)
through a variant of ``bench_gates.gate_alarms``:

- every series gets a second twin (``twins2``): a second independent rerun of
  each run, same regime, drawn from its own generator so that the benchmark's
  series are unchanged (AR(1): it shares the run's previous state, as the
  first twin does);
- two-stage confirm (``TWO=1``) for level trips (not suspects, not quantile
  trips, not transients, not heavy-tailed baselines with ``HG=1``): the first
  rerun's own one-run p decides at once when it is strong (regression held at
  p <= ``HOLD_P``, 0.0005, z ~ 3.4); when it is hopeless (p > ``STOP_P``, 0.46,
  z < 0.1) the one-rerun confirm's verdict stands (a window decision can still
  hold there); in between a second rerun is taken and the
  regression holds when the mean of the two reruns (``judge_summaries(pair=True)``)
  reaches ``B_LEVEL`` (0.02) and both it and the second rerun clear the floor.
  For Gaussian noise this holds 2% of null trips instead of 5%, with more
  power at every shift (computed: 0.39 / 0.78 / 0.99 at 1.25 / 2 / 3 SD,
  against 0.35 / 0.64 / 0.91 for one rerun at 0.05);
- ``LIID``: the first-attempt level where the baseline looks independent
  (rho_lo = 0) and light-tailed (fewer than 3 of the baseline's runs beyond 2
  scales on the bad side); 0 keeps ``DEFAULTS.level`` everywhere;
- ``GUARD=1``: no two-stage confirm where the baseline looks autocorrelated
  (the confirm's rho_lo > 0): two reruns share the previous run's state.

``TWO=0 LIID=0`` is the shipped gate. Usage (2 cores; 3 seeds x 8 effects x 14
cells in about 4 min)::

    python benchmarks/attempts/two_stage_confirm.py 0,1,2 all 200 /tmp/base.json      # TWO=0
    LIID=0.1 python benchmarks/attempts/two_stage_confirm.py 0,1,2 all 200 /tmp/v.json
    python benchmarks/attempts/two_stage_confirm.py --compare /tmp/base.json /tmp/v.json
"""
import collections
import json
import os
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]
import bench_gates as B  # noqa: E402
import series as S  # noqa: E402
from gates import stats  # noqa: E402

TWO = int(os.environ.get("TWO", "1"))
LIID = float(os.environ.get("LIID", "0"))
HG = int(os.environ.get("HG", "1"))
GUARD = int(os.environ.get("GUARD", "1"))
HOLD_P = float(os.environ.get("HOLD_P", "0.0005"))
STOP_P = float(os.environ.get("STOP_P", "0.46"))
B_LEVEL = float(os.environ.get("B_LEVEL", "0.02"))

_offsets = S._offsets
_last: dict = {}


def _offsets_kept(model, rng, n, bench):
    r = _offsets(model, rng, n, bench)
    _last["x"] = r[0]  # the run offsets: an AR(1) second twin shares their previous state
    return r


S._offsets = _offsets_kept
_make = S.make_series


def make_series(model, effect, rng, *, n_runs=60, tau=40, m=1, bench=""):
    state = rng.bit_generator.state["state"]["state"]  # read, not drawn: series unchanged
    s = _make(model, effect, rng, n_runs=n_runs, tau=tau, m=m, bench=bench)
    r2 = np.random.default_rng([state % (2**63), 77])
    if model == "ar1":
        phi, sd = 0.7, 0.03
        prev = np.r_[r2.normal(0, sd), _last["x"][:-1]]
        lv2 = phi * prev + r2.normal(0, sd * np.sqrt(1 - phi**2), n_runs)
    else:
        lv2 = _offsets(model, r2, n_runs, s.bench)[1]
    t = np.arange(n_runs)
    f = np.ones(n_runs)
    if effect.startswith("step"):
        f[t >= tau] += S.effect_size(effect)
    elif effect == "drift":
        f = 1.0 + S.DRIFT_PER_RUN * np.clip(t - tau + 1, 0, None)
    object.__setattr__(s, "twins2", (1.0 + lv2[:, None] + S._within(model, r2, n_runs, m, s.bench))
                       * f[:, None])
    return s


B.make_series = make_series


def _heavy(h: np.ndarray) -> bool:
    b = h[-50:-10] if h.size >= 15 else h[-40:]
    c = np.median(b)
    return int(np.count_nonzero(b - c > 2.0 * stats.robust_scale(b))) >= 3


def gate_alarms(s, ts, *, confirm=True, first_only=False, machines=True):
    P = stats.DEFAULTS
    x = s.summaries.copy()
    tw, tw2 = s.twin_summaries, np.median(s.twins2, axis=1)
    out = np.zeros(len(ts), dtype=bool)
    for i, t in enumerate(ts):
        j = stats.judge_summaries(x[:t], float(x[t]), sign=1)
        heavy = _heavy(x[:t])
        lev = LIID if (LIID and j.extras.get("rho_lo", 0.0) == 0.0 and not heavy) else P.level
        v = stats.decide(j, j.p_worse, level=lev)
        sus = v == "pass" and stats.is_suspect(j, j.p_worse, params=P, level=lev)
        if (v == "regression" or sus) and confirm:
            jc, v = stats.confirm(x[:t], float(tw[t]), sign=1, first=float(x[t]), suspect=sus)
            ps = jc.extras.get("p_split", 1.0)
            quant = j.statistic.startswith("robust-t/quantile")
            ar = jc.extras.get("rho_lo", 0.0) > 0.0
            if (TWO and jc.status == "ok" and not sus and not quant and not (HG and heavy)
                    and not (GUARD and ar)
                    and ps > P.consistency_level):
                pr = jc.extras["p_run_worse"]
                # Strong: held at once; hopeless (p > STOP_P): the first rerun's verdict
                # stands; in between, the second rerun and the mean of the two decide.
                if not (v == "regression" and pr <= HOLD_P) and pr <= STOP_P:
                    jp = stats.judge_summaries(x[:t], 0.5 * (tw[t] + tw2[t]), sign=1, pair=True)
                    own2 = (tw2[t] - jp.baseline) / abs(jp.baseline)
                    v = ("regression" if (jp.extras["p_run_worse"] <= B_LEVEL
                                          and jp.own_change is not None
                                          and jp.own_change > jp.floor and own2 > jp.floor)
                         else "pass")
            if v != "regression" and ps <= P.transient_level:
                x[t] = tw[t]
        out[i] = v == "regression"
        if out[i] and first_only:
            break
    return out


def cell(args):
    model, m, seed, reps, effects = args
    ser = B._cell_series(model, m, reps, seed,
                         effects=B.EFFECTS[: B.EFFECTS.index(effects[-1]) + 1])
    out = {}
    for e in effects:
        if e == "null":
            out["fa"] = float(np.mean([gate_alarms(s, B.GATED).any() for s in ser[e]]))
        elif e == "spike":
            out["spike"] = float(np.mean([gate_alarms(s, B.GATED, first_only=True).any()
                                          for s in ser[e]]))
        else:
            f = [B._first(gate_alarms(s, B.AFTER, first_only=True)) for s in ser[e]]
            out[e] = B._detect_stats(f)[2]  # within 10 runs
    return f"{model}/{m}/{seed}", out


def compare(a_path: str, b_path: str) -> None:
    a, b = (json.loads(Path(p).read_text()) for p in (a_path, b_path))
    agg = collections.defaultdict(lambda: collections.defaultdict(list))
    for tag, d in (("a", a), ("b", b)):
        for k, v in d.items():
            model, m, _ = k.split("/")
            for e, val in v.items():
                agg[(model, m)][(tag, e)].append(val)
    for (model, m), d in agg.items():
        row = [f"{model}/{m}".ljust(12)]
        for e in ("fa", "spike", *B.DETECT_EFFECTS):
            if ("a", e) in d and ("b", e) in d:
                row.append(f"{e} {100 * np.mean(d[('a', e)]):4.1f}->{100 * np.mean(d[('b', e)]):4.1f}")
        print("  ".join(row))


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
        sys.exit(0)
    seeds = [int(x) for x in sys.argv[1].split(",")]
    effects = list(B.EFFECTS) if sys.argv[2] == "all" else sys.argv[2].split(",")
    reps, out_path = int(sys.argv[3]), sys.argv[4]
    models = os.environ.get("MODELS", ",".join(S.NOISE_MODELS)).split(",")
    jobs = [(mo, m, sd, reps, effects) for mo in models for m in (1, 5) for sd in seeds]
    t0 = time.time()
    with Pool(2) as p:
        res = dict(p.map(cell, jobs))
    Path(out_path).write_text(json.dumps(res, indent=0))
    print(f"{time.time() - t0:.0f} s -> {out_path}")
