"""How many confirm reruns a large change costs: a step of K run-to-run SDs.

    python benchmarks/bench_confirm_paths.py --seeds 400,401,402 --reps 200 [--sds 10] \
        [--step 0.05] [--models bimodal,h200:fi_decode] [--jobs N] \
        [--out benchmarks/results/bench_confirm_paths.md]

Per noise model of ``benchmarks/series.py`` (``h200`` split by benchmark: the GEMM,
FlashInfer decode and SDPA decode samples; ``suite`` by the decode suite's fa2 shapes) and
1 or 5 samples a run, the gate of
``bench_gates.py`` (first attempt, confirm reruns as a suite session takes them) on
series whose runs from 40 on are K SDs of a null run summary slower (the SD measured
by simulation, ``series.null_summary_stats``). Reported: the share detected within 10
runs, and of the detections, how many reruns the chain that held took (1: the first
rerun decided); reds turned green: after a series' first detection, the runs of the
changed code (to run 59, never accepted) that passed. The null series' false alarms
(30 gated runs) beside them.
``--step X``: a relative step of X instead (a +5% change: within-10 detection).
``--models``: cells to run (a noise model, or ``h200:BENCH``, ``suite:BENCH``). ``--jobs N``: a cell's
seeds in N processes (one task a cell and seed).
Seeds: 100-104 are tuning seeds (the rules were chosen on them); 400-405 verify.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gates import AFTER, GATED, TAU, _rerun_rngs, gate_alarms_many  # noqa: E402
from series import NOISE_MODELS, bench_index, benches, make_series, null_summary_stats  # noqa: E402

PERSIST = list(range(TAU, 60))  # every run of the changed code in a series (60 runs)
# A measured model is split by benchmark: h200 (GEMM, FlashInfer, SDPA decode) and suite
# (the decode suite's recorded fa2 shapes).
CELLS = [(m, "") for m in NOISE_MODELS if not benches(m)] + [
    (m, b) for m in NOISE_MODELS for b in benches(m)]


def _shifted(s, d: float):
    f = np.ones(s.runs.shape[0])
    f[TAU:] += d
    return dataclasses.replace(s, runs=s.runs * f[:, None], twins=s.twins * f[:, None],
                               more_twins=tuple(t * f[:, None] for t in s.more_twins),
                               tau=TAU, effect=f"step{d:.3f}")


def _reruns(path: str) -> int:
    return {"one-rerun": 1, "corroborate": 2}.get(path) or int(path.rsplit("-", 1)[1])


def _task(model: str, bench: str, m: int, seed: int, reps: int, d: float) -> dict:
    """One cell's series of one seed: null false alarms, detections of a step ``d``
    (relative) and the reruns each detection's holding chain took."""
    key = [seed, NOISE_MODELS.index(model), m, bench_index(model, bench)]
    rng = np.random.default_rng(key)
    ss = [make_series(model, "null", rng, m=m, bench=bench, rerun_rngs=_rerun_rngs(key))
          for _ in range(reps)]
    fa = sum(int(a.any()) for a in gate_alarms_many(ss, GATED))
    traces: list[list[dict]] = [[] for _ in ss]
    # Every run of the changed code to the series' end (the change persists, nobody
    # accepts it): detection within 10 runs, and after the first detection, the runs that
    # passed (reds turned green; a held run serves no later baseline).
    al = gate_alarms_many([_shifted(s, d) for s in ss], PERSIST, traces=traces)
    det, paths, green, red_series, after = 0, collections.Counter(), 0, 0, 0
    for a, tr in zip(al, traces, strict=True):
        if a.any():
            first = int(np.argmax(a))
            later = a[first + 1:]
            after += later.size
            green += int((~later).sum())
            red_series += int((~later).any())
        if a[:len(AFTER)].any():
            det += 1
            held = [x for x in tr if x["verdict"] == "regression"][0]
            paths[_reruns(held["path"])] += 1
    return {"fa": fa, "det": det, "n": reps, "paths": dict(paths), "green": green,
            "green_series": red_series, "after": after}


def _merge(sd: float, parts: list[dict]) -> dict:
    paths: collections.Counter = collections.Counter()
    for p in parts:
        paths.update(p["paths"])
    n = sum(p["n"] for p in parts)
    return {"sd": sd, "n": n, "fa": sum(p["fa"] for p in parts) / n,
            "det": sum(p["det"] for p in parts) / n, "paths": dict(paths),
            **{k: sum(p[k] for p in parts) for k in ("green", "green_series", "after")}}


def run(cells: list[tuple[str, str]], seeds: list[int], reps: int, *, sds: float = 10.0,
        step: float | None = None, jobs: int = 1, log=print) -> dict:
    """Every cell (noise model, H200 benchmark) at 1 and 5 samples over ``seeds``: the
    step is ``sds`` SDs of a null run summary, or ``step`` (relative) where given.
    ``jobs``: the (cell, seed) tasks in that many processes."""
    keys = [(model, bench, m) for model, bench in cells for m in (1, 5)]
    sd = {k: null_summary_stats(k[0], k[2], k[1])[1] for k in keys}
    tasks = [(*k, seed, reps, step if step is not None else sds * sd[k])
             for k in keys for seed in seeds]
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

        with ProcessPoolExecutor(jobs) as ex:
            parts = list(ex.map(_task, *zip(*tasks, strict=True)))
    else:
        parts = [_task(*t) for t in tasks]
    res = {}
    for i, k in enumerate(keys):
        res[k] = _merge(sd[k], parts[i * len(seeds) : (i + 1) * len(seeds)])
        log(*k, res[k], flush=True)
    return res


TUNING = set(range(100, 105))


def render(res: dict, seeds: list[int], reps: int, sds: float, elapsed: float,
           step: float | None = None, models: str | None = None, jobs: int = 1) -> str:
    from tabulate import tabulate

    rows = []
    for (model, bench, m), c in res.items():
        d = sum(c["paths"].values()) or 1
        rows.append([model + (f" {bench}" if bench else ""), m, f"{100 * c['sd']:.2f}%",
                     f"{100 * c['det']:.1f}%",
                     " / ".join(f"{100 * c['paths'].get(k, 0) / d:.0f}%" for k in (1, 2, 3, 4)),
                     f"{c['green']} of {c['after']} ({c['green_series']} series)",
                     f"{100 * c['fa']:.1f}%"])
    what = f"+{100 * step:g}% change" if step is not None else f"change of {sds:g} run-to-run SDs"
    opts = (f" --step {step:g}" if step is not None else f" --sds {sds:g}") + (
        f" --models {models}" if models else "") + (f" --jobs {jobs}" if jobs > 1 else "")
    kind = ("tuning" if set(seeds) <= TUNING else
            "verification" if not set(seeds) & TUNING else "tuning and verification")
    return "\n".join([
        f"# Confirm reruns a {what} costs\n",
        f"Command: `python benchmarks/bench_confirm_paths.py --seeds "
        f"{','.join(map(str, seeds))} --reps {reps}{opts}`; {elapsed:.0f} s"
        f"{f' in {jobs} processes' if jobs > 1 else ''}; "
        f"{reps} series a seed and cell; {kind} seeds (tuning: 100-104).\n",
        "SD: of a null run summary. Detected: within 10 runs of the change. Reruns: of the "
        "detections, the share whose holding chain took 1 / 2 / 3 / 4 confirm reruns. "
        "Reds turned green: of the runs after a series' first detection (to run 59; the "
        "change persists and is never accepted), those that passed, and in how many series. "
        "Null FA/series: the same cell's null series (30 gated runs).\n",
        tabulate(rows, headers=["noise model", "samples", "SD", "detected",
                                "reruns 1 / 2 / 3 / 4", "reds turned green",
                                "null FA/series"],
                 tablefmt="github"), ""])


def _cells(spec: str | None) -> list[tuple[str, str]]:
    if not spec:
        return list(CELLS)
    out = []
    for x in spec.split(","):
        model, _, bench = x.strip().partition(":")
        if (model, bench) not in CELLS:
            known = ", ".join(m + (f":{b}" if b else "") for m, b in CELLS)
            raise ValueError(f"--models: unknown cell {x.strip()!r}; known: {known}")
        out.append((model, bench))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="400,401,402")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--sds", type=float, default=10.0)
    ap.add_argument("--step", type=float, default=None,
                    help="a relative step (0.05: +5%%) instead of --sds")
    ap.add_argument("--models", default=None,
                    help="cells, comma-separated: a noise model or h200:BENCH (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="processes (one task a cell and seed)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in a.seeds.split(",")]
    except ValueError:
        print(f"error: --seeds {a.seeds!r}: give comma-separated integers", file=sys.stderr)
        return 2
    try:
        cells = _cells(a.models)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.reps < 1 or a.sds <= 0 or a.jobs < 1 or (a.step is not None and a.step <= 0):
        print("error: --reps and --jobs must be >= 1, --sds and --step > 0", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    res = run(cells, seeds, a.reps, sds=a.sds, step=a.step, jobs=a.jobs)
    md = render(res, seeds, a.reps, a.sds, time.perf_counter() - t0, a.step, a.models, a.jobs)
    print(md)
    if a.out:
        Path(a.out).write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
