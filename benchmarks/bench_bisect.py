"""Benchmark bisection (``gates.model.bisect``) on a simulated measurement model.

64 commits after the last good one; in ``step`` trials one of them (uniform)
makes the metric slower by ``--step`` (3%); in ``null`` trials nothing changes;
in ``drift`` trials every commit adds step/64 (a gradual drift). Each test
execution is one run: a run level with ``--noise`` (1%) run-to-run noise, 5
samples around it with 0.3% within-run noise, as a CPU-timed test behaves.
Real timing runs would take hours on 2 shared cores for hundreds of trials;
``tests/test_bisect_git.py`` runs the same library once end to end on a
generated git repository with real pytest timings.

Targets (issue 28): culprit found in >= 95% of step trials (test executions
reported); "no-isolable-change" in >= 95% of null trials.

    python benchmarks/bench_bisect.py [--trials 200] [--commits 64] [--step 0.03]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from gates.model.bisect import bisect


def trial(seed: int, kind: str, commits: int, step: float, noise: float):
    rng = np.random.default_rng(seed)
    names = [f"c{i:03d}" for i in range(commits + 1)]  # names[0]: the last good commit
    culprit = int(rng.integers(1, commits + 1))

    def level(i: int) -> float:
        if kind == "step":
            return 1.0 + step * (i >= culprit)
        if kind == "drift":
            return 1.0 + step * i / commits
        return 1.0

    def measure(commit: str) -> np.ndarray:
        run = level(int(commit[1:])) * (1 + rng.normal(0, noise))
        return run * (1 + rng.normal(0, 0.003, 5))

    return bisect(names, measure, better="lower"), names[culprit]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--commits", type=int, default=64)
    ap.add_argument("--step", type=float, default=0.03)
    ap.add_argument("--noise", type=float, default=0.01)
    a = ap.parse_args(argv)
    print(f"{a.trials} trials per kind, {a.commits} commits, step {a.step:.0%}, run noise "
          f"{a.noise:.0%}")
    print(f"{'kind':<6} {'right':>7}  {'outcomes':<60} executions mean / p95 / max")
    rates = {}
    for k, kind in enumerate(("step", "null", "drift")):
        t0 = time.perf_counter()
        outcomes: dict[str, int] = {}
        right = 0
        execs = []
        for s in range(a.trials):
            r, culprit = trial(10_000 * k + s, kind, a.commits, a.step, a.noise)
            outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
            execs.append(r.executions)
            right += {"step": r.outcome == "culprit" and r.culprit == culprit,
                      "null": r.outcome == "no-isolable-change",
                      "drift": r.outcome != "culprit"}[kind]
        rates[kind] = right / a.trials
        out = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
        print(f"{kind:<6} {rates[kind]:>6.1%}  {out:<60} {np.mean(execs):.1f} / "
              f"{np.percentile(execs, 95):.0f} / {max(execs)}  ({time.perf_counter() - t0:.1f} s)",
              flush=True)
    print("right: step = the culprit named; null = 'no-isolable-change'; drift = no commit "
          "named")
    ok = rates["step"] >= 0.95 and rates["null"] >= 0.95
    print(f"targets (step >= 95%, null >= 95%): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
