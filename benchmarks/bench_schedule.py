"""Scheduling benchmark: LPT makespan against the lower bound, and planning time.

A generated registry of 2,000 test files with heavy-tailed durations: most under a
minute (log-normal), a Pareto tail of slow files, and a few files near the shard
budget. For 4 to 32 shards it prints the makespan, the lower bound
max(total / shards, longest file) and the gap; then the time to plan the whole
registry from scratch (static collection of the 2,000 generated files, p90
durations from 15 samples each, shard count from the budget, LPT).

    python benchmarks/bench_schedule.py [--files 2000] [--budget 3600] [--seed 7] [--markdown]

Targets (issue 6): gap within 5% for 4 to 32 shards; planning under 1 s.

``--small N`` measures small suites instead (issue 32): N SGLang-shaped suites of 4-30
files (log-normal est_time, median ~150 s, in 10 s steps) on 2-8 shards, LPT against
the plan the runners use (:func:`ci_register.planning.partition.assign`: exact branch and
bound under a node budget) and against the optimum, from an ILP (scipy's HiGHS,
``scipy.optimize.milp``, ``--ilp-seconds`` per suite; where it is not proven, its best
bound rounded up to the durations' gcd).
Targets: makespan <= 1.01 x the optimum, never worse than LPT, planning < 1 s CPU.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ci_register.planning.durations import choose  # noqa: E402
from ci_register.planning.partition import lower_bound, lpt  # noqa: E402
from ci_register.planning.schedule import plan_schedule  # noqa: E402
from ci_register.registered.catalog import parse_catalog  # noqa: E402
from ci_register.registered.collect import collect  # noqa: E402

SHARDS = (4, 6, 8, 12, 16, 20, 24, 28, 32)


def durations(n: int, budget: float, rng: random.Random) -> list[float]:
    """Heavy-tailed file durations in seconds."""
    near = 4  # a few files close to the budget
    tail = n // 10  # slow files: Pareto from 60 s, capped below the near-budget ones
    out = [rng.uniform(0.80, 0.97) * budget for _ in range(near)]
    out += [min(60.0 * rng.paretovariate(1.3), 0.6 * budget) for _ in range(tail)]
    out += [min(rng.lognormvariate(2.8, 0.8), 59.0) for _ in range(n - near - tail)]  # median ~16 s
    return [round(max(d, 0.5), 1) for d in out]


def write_tree(root: Path, durs: list[float], budget: float) -> None:
    suites = root / "suites"
    suites.mkdir(parents=True)
    (suites / "catalog.toml").write_text(
        f'[suites.bench]\nbackend = "cuda"\ndescription = "bench"\nschedule = "per-commit"\n'
        f'shard_budget_s = {budget}\n[suites.bench.hardware]\ngpu_count = 1\n')
    for i, d in enumerate(durs):
        folder = suites / f"area{i % 20:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"test_f{i:04d}.py").write_text(
            f'from ci_register import register_cuda_ci\n\nregister_cuda_ci(est_time={d}, suite="bench")\n\n\n'
            "def test_one():\n    assert True\n")


def plan_once(root: Path, budget: float, samples: dict[str, list[float]]) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, wall seconds after collection, shard count)."""
    started, cpu = time.perf_counter(), time.process_time()
    catalog = parse_catalog((root / "suites" / "catalog.toml").read_text(), root / "suites" / "catalog.toml")
    col = collect(catalog, base=root)
    assert not col.issues, col.issues[:3]
    regs = col.for_suite("bench")
    collected = time.perf_counter()
    figs = choose([r.path for r in regs], samples)
    items = [(r.path, figs[r.path].seconds if r.path in figs else r.est_time) for r in regs]
    sched = plan_schedule(items, budget, suite="bench")
    done = time.perf_counter()
    return done - started, time.process_time() - cpu, done - collected, sched.count


def ilp_optimum(durs: list[float], n: int, seconds: float = 30.0) -> tuple[float, bool]:
    """(optimal makespan or the solver's lower bound, proven) of P||Cmax by an ILP."""
    import numpy as np  # noqa: PLC0415
    from scipy.optimize import Bounds, LinearConstraint, milp  # noqa: PLC0415

    m = len(durs)
    nv = m * n + 1  # x[i, j] (file i on shard j), then the makespan C
    c = np.zeros(nv)
    c[-1] = 1.0
    one = np.zeros((m, nv))
    for i in range(m):
        one[i, i * n:(i + 1) * n] = 1.0
    load = np.zeros((n, nv))
    for j in range(n):
        load[j, j:m * n:n] = durs
        load[j, -1] = -1.0
    # Symmetry: the longest file on shard 0.
    first = np.zeros((1, nv))
    first[0, 0] = 1.0
    cons = [LinearConstraint(one, 1, 1), LinearConstraint(load, -np.inf, 0), LinearConstraint(first, 1, 1)]
    integrality = np.ones(nv)
    integrality[-1] = 0
    res = milp(c, constraints=cons, integrality=integrality, bounds=Bounds(0, [1] * (m * n) + [np.inf]),
               options={"time_limit": seconds, "mip_rel_gap": 0})
    from ci_register.planning.exact import granularity  # noqa: PLC0415

    proven = res.status == 0
    bound = getattr(res, "mip_dual_bound", None)
    value = float(res.fun) if proven else float(bound if bound is not None else res.fun)
    g = granularity(durs)  # whole seconds: the optimum is a multiple of their gcd
    return (float(np.ceil(value / g - 1e-6) * g) if g else value), proven


def small_suites(count: int, seed: int, ilp_seconds: float = 30.0, measured: bool = False) -> int:
    from ci_register.planning.exact import lower_bound2  # noqa: PLC0415
    from ci_register.planning.partition import assign  # noqa: PLC0415

    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        files = rng.randint(4, 30)
        n = rng.randint(2, min(8, files - 1))
        durs = [float(max(10, round(rng.lognormvariate(5.0, 0.8) / 10) * 10)) for _ in range(files)]
        if measured:  # durations from history are not whole seconds: no gcd to round bounds to
            durs = [round(d * rng.uniform(0.9, 1.1), 2) for d in durs]
        items = [(f"suites/test_{i:02d}.py", d) for i, d in enumerate(durs)]
        lpt_ms = max(s.total for s in lpt(items, n))
        cpu = time.process_time()
        plan = assign(items, n)
        cpu = time.process_time() - cpu
        ours = max(s.total for s in plan)
        assert sorted(p for s in plan for p, _ in s.items) == sorted(p for p, _ in items)
        opt, proven = (ours, True) if ours <= lower_bound2(durs, n) + 1e-9 else ilp_optimum(durs, n, ilp_seconds)
        rows.append((files, n, lpt_ms, ours, opt, proven, cpu))
    print(f"{count} SGLang-shaped suites, 4-30 files on 2-8 shards (seed {seed}"
          f"{'; measured durations, +-10% off whole seconds' if measured else ''})")
    print()
    print("| files | suites | LPT / optimum, worst | ours / optimum, worst | improved by the search | best gain over LPT | CPU s, max |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    worst, worse_than_lpt, cpu_max = 1.0, 0, 0.0
    for lo, hi in ((4, 10), (11, 20), (21, 30), (4, 30)):
        sel = [r for r in rows if lo <= r[0] <= hi]
        if not sel:
            continue
        lr = max(r[2] / r[4] for r in sel)
        ours = max(r[3] / r[4] for r in sel)
        gain = max(1 - r[3] / r[2] for r in sel)
        cpu = max(r[6] for r in sel)
        print(f"| {lo}-{hi} | {len(sel)} | {lr:.4f} | {ours:.4f} | {sum(r[3] < r[2] for r in sel)} | {gain:.2%} | {cpu:.2f} |")
        if (lo, hi) == (4, 30):
            worst, cpu_max = ours, cpu
            worse_than_lpt = sum(r[3] > r[2] + 1e-9 for r in sel)
    unproven = sum(not r[5] for r in rows)
    print()
    print(f"optimum proven for {len(rows) - unproven} of {len(rows)} suites (else the ILP's lower bound, so the ratio is an upper bound)")
    ok = worst <= 1.01 and worse_than_lpt == 0 and cpu_max < 1.0
    print(f"worst makespan / optimum {worst:.4f} (target <= 1.01); worse than LPT: {worse_than_lpt}; "
          f"max planning CPU {cpu_max:.2f} s (target < 1 s): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--budget", type=float, default=3600.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--small", type=int, default=0, metavar="N", help="N small SGLang-shaped suites instead")
    p.add_argument("--ilp-seconds", type=float, default=30.0, help="with --small: the ILP's time limit per suite")
    p.add_argument("--measured", action="store_true", help="with --small: durations off whole seconds, as history gives")
    args = p.parse_args(argv)
    if args.small:
        return small_suites(args.small, args.seed, args.ilp_seconds, args.measured)
    rng = random.Random(args.seed)
    durs = durations(args.files, args.budget, rng)
    items = [(f"suites/test_f{i:04d}.py", d) for i, d in enumerate(durs)]
    total = sum(durs)
    print(f"{args.files} files, total {total:.0f} s, median {statistics.median(durs):.1f} s, "
          f"p99 {sorted(durs)[int(0.99 * len(durs))]:.0f} s, longest {max(durs):.0f} s, "
          f"under 60 s: {sum(d < 60 for d in durs) / len(durs):.0%}; budget {args.budget:g} s, seed {args.seed}")
    print()
    # The same generator over 20 other seeds: the worst gap per shard count.
    others = [durations(args.files, args.budget, random.Random(1000 + k)) for k in range(20)]
    print("| shards | makespan s | lower bound s | gap | worst gap, 20 other seeds | LPT time ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    derived = plan_schedule(items, args.budget)
    for n in sorted(set(SHARDS) | {derived.count}):
        t0 = time.perf_counter()
        shards = lpt(items, n)
        ms = (time.perf_counter() - t0) * 1000
        makespan = max(s.total for s in shards)
        bound = lower_bound(durs, n)
        gap = makespan / bound - 1
        other = max(max(s.total for s in lpt([(str(i), d) for i, d in enumerate(o)], n)) / lower_bound(o, n) - 1
                    for o in others)
        if 4 <= n <= 32:
            worst = max(worst, gap, other)
        tag = " (from budget)" if n == derived.count else ""
        print(f"| {n}{tag} | {makespan:.0f} | {bound:.0f} | {gap:+.2%} | {other:+.2%} | {ms:.1f} |")
    print()
    # Planning from scratch: collection of real files + history figures + schedule.
    samples = {f"suites/area{i % 20:02d}/test_f{i:04d}.py": [d * rng.uniform(0.85, 1.05) for _ in range(15)]
               for i, d in enumerate(durs) if i % 3}  # two thirds measured, one third est_time
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_tree(root, durs, args.budget)
        times, cpu_times, sched_times = [], [], []
        for _ in range(args.repeat):
            secs, cpu, after, count = plan_once(root, args.budget, samples)
            times.append(secs)
            cpu_times.append(cpu)
            sched_times.append(after)
    print(f"planning {args.files} files from scratch (collect + p90 figures + shard count + LPT), "
          f"{args.repeat} runs: wall median {statistics.median(times):.3f} s (max {max(times):.3f} s), "
          f"CPU median {statistics.median(cpu_times):.3f} s; "
          f"{count} shards from the {args.budget:g} s budget; of which figures + schedule: "
          f"median {statistics.median(sched_times) * 1000:.0f} ms (the rest is static collection)")
    # CPU time, not wall: this runs on 2 cores shared with other jobs, whose load is not the planner's.
    ok = worst <= 0.05 and statistics.median(cpu_times) < 1.0
    print(f"worst gap for 4-32 shards {worst:+.2%} (target <= 5%); planning CPU median {statistics.median(cpu_times):.3f} s "
          f"(target < 1 s): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
