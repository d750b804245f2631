"""Exact partitions of small suites: never worse than LPT, optimal where it can prove it,
the same plan on every machine."""

from __future__ import annotations

import itertools
import random

from ci_register.planning.exact import NODE_BUDGET, Search, granularity, lower_bound2, polish
from ci_register.planning.partition import assign, lpt
from ci_register.planning.schedule import plan_schedule


def makespan(shards) -> float:
    return max(s.total for s in shards)


def brute(durs, n) -> float:
    best = float("inf")
    for combo in itertools.product(range(n), repeat=len(durs)):
        loads = [0.0] * n
        for d, s in zip(durs, combo, strict=True):
            loads[s] += d
        best = min(best, max(loads))
    return best


def test_beats_lpt_where_lpt_is_not_optimal():
    items = [(f"t{i}.py", d) for i, d in enumerate([3.0, 3.0, 2.0, 2.0, 2.0])]
    assert makespan(lpt(items, 2)) == 7.0
    shards = assign(items, 2)
    assert makespan(shards) == 6.0
    assert sorted(p for s in shards for p, _ in s.items) == sorted(p for p, _ in items)


def test_optimal_on_small_random_suites_and_never_worse_than_lpt():
    rng = random.Random(5)
    for _ in range(60):
        files, n = rng.randint(3, 8), rng.randint(2, 3)
        durs = [float(rng.choice([10, 20, 30, 45, 60, 90, 120, 300])) * rng.choice([1, 1.1]) for _ in range(files)]
        items = [(f"f{i}.py", d) for i, d in enumerate(durs)]
        got = makespan(assign(items, n))
        assert got <= makespan(lpt(items, n)) + 1e-9
        assert abs(got - brute(durs, n)) < 1e-6


def test_same_plan_whatever_the_input_order():
    rng = random.Random(9)
    items = [(f"suites/test_{i:02d}.py", float(rng.randrange(10, 600, 10))) for i in range(22)]
    first = [(s.index, s.items) for s in assign(items, 4)]
    for _ in range(3):
        rng.shuffle(items)
        assert [(s.index, s.items) for s in assign(items, 4)] == first


def test_node_budget_bounds_the_search_and_large_suites_use_lpt():
    rng = random.Random(2)
    durs = sorted((float(rng.randrange(10, 900, 10)) for _ in range(30)), reverse=True)
    s = Search(durs, 7, polish(durs, 7, [i % 7 for i in range(30)]), budget=500)
    s.run()
    assert s.nodes <= 501
    big = [(f"f{i}.py", float(rng.randrange(10, 900, 10))) for i in range(31)]
    assert [x.items for x in assign(big, 4)] == [x.items for x in lpt(big, 4)]
    assert NODE_BUDGET > 0


def test_bounds_and_granularity():
    assert granularity([30.0, 45.0, 60.0]) == 15 and granularity([30.5, 45.0]) == 0
    assert lower_bound2([30.0, 45.0, 60.0], 2) == 75.0  # total/2 = 67.5 -> 75 (multiples of 15)
    assert lower_bound2([5.0, 4.0, 4.0], 2) == 8.0  # two of the three longest share a shard


def test_runner_and_matrix_plan_the_same_shards():
    items = [(f"t{i}.py", d) for i, d in enumerate([3.0, 3.0, 2.0, 2.0, 2.0])]
    sched = plan_schedule(items, 10.0, 2)
    assert [s.items for s in sched.shards] == [s.items for s in assign(items, 2)]
    assert sched.makespan == 6.0
