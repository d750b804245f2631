"""How often the confirm holds a trip under no change, by the test that tripped.

    python benchmarks/bench_confirm_pairs.py [--seeds 400,...,405] [--reps 50]
        [--models bimodal,h200:fi_decode]

The null series of ``bench_confirm_paths.py`` (30 gated runs each), walked by the gate
of ``bench_gates.py`` up to each series' first alarm: every first attempt that went on
to a confirm (a trip or a suspect), by its deciding test (the run alone, the Huber
location of the last 3 or 10 runs, the quantile test), and how many of them the confirm
held. Two-stage testing promises a held share near the confirm level (0.05) where the
rerun's evidence is independent of the first attempt's; a window whose other runs the
rerun shares holds more.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_confirm_paths import _cells  # noqa: E402
from bench_gates import GATED, _rerun_rngs, gate_alarms_many  # noqa: E402
from series import NOISE_MODELS, bench_index, make_series  # noqa: E402


def held_by_test(model: str, bench: str, m: int, seeds: list[int], reps: int
                 ) -> tuple[collections.Counter, collections.Counter]:
    """(trips, held) by the first attempt's deciding test, over the cell's null series."""
    trips: collections.Counter = collections.Counter()
    held: collections.Counter = collections.Counter()
    for seed in seeds:
        key = [seed, NOISE_MODELS.index(model), m, bench_index(model, bench)]
        rng = np.random.default_rng(key)
        ss = [make_series(model, "null", rng, m=m, bench=bench, rerun_rngs=_rerun_rngs(key))
              for _ in range(reps)]
        traces: list[list[dict]] = [[] for _ in ss]
        gate_alarms_many(ss, GATED, traces=traces, first_only=True)
        for tr in traces:
            for x in tr:
                test = x["judgement"].statistic.rpartition("/")[2]
                test = "quantile" if test.startswith("quantile") else test
                trips[test] += 1
                held[test] += x["verdict"] == "regression"
    return trips, held


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="400,401,402,403,404,405")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--models", default="bimodal,h200:fi_decode")
    a = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in a.seeds.split(",")]
        cells = _cells(a.models)
    except ValueError as e:
        print(f"error: --seeds/--models: {e}", file=sys.stderr)
        return 2
    if a.reps < 1:
        print("error: --reps must be >= 1", file=sys.stderr)
        return 2
    tests = ("run", "huber-3", "huber-10", "quantile")
    total_t: collections.Counter = collections.Counter()
    total_h: collections.Counter = collections.Counter()
    print("| cell | m | " + " | ".join(f"{t}: held / trips" for t in tests) + " |")
    print("|---|---|" + "---|" * len(tests))
    for model, bench in cells:
        for m in (1, 5):
            trips, held = held_by_test(model, bench, m, seeds, a.reps)
            total_t.update(trips)
            total_h.update(held)
            print(f"| {model}{' ' + bench if bench else ''} | {m} | "
                  + " | ".join(f"{held[t]} / {trips[t]}" for t in tests) + " |", flush=True)
    print("| all | | " + " | ".join(
        f"{total_h[t]} / {total_t[t]} ({100 * total_h[t] / max(total_t[t], 1):.1f}%)"
        for t in tests) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
