"""Exact shard partitions for small suites: branch and bound with LPT as the incumbent.

Minimising the makespan of ``n`` shards is NP-hard, but a suite of up to
:data:`EXACT_MAX_FILES` files is small enough to search: files go longest first onto
shards, trying the lightest first; shards with equal loads are one choice (symmetry);
a branch dies when a shard would reach the best makespan so far, or when the room
left under it on all shards cannot hold the files still to place. The search starts
from LPT's plan improved by local moves and swaps (:func:`polish`) and stops at a lower bound (max of total / n, the longest file, and
the two smallest of the n + 1 longest files, one shard must hold two of them), so a
proven-optimal LPT plan costs nothing.

The search is capped by a node budget, not a clock: every CI shard plans the same
partition on its own, so the plan must not depend on how fast a runner is. The budget
(:data:`NODE_BUDGET`) keeps a search under about a second on a slow runner; a plan is
used only when it beats LPT. Pure and deterministic: ties break on the path order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["EXACT_MAX_FILES", "NODE_BUDGET", "Search", "best_assignment", "granularity", "lower_bound2", "polish"]

EXACT_MAX_FILES = 30
NODE_BUDGET = 150_000
_EPS = 1e-9


class _Stop(Exception):
    pass


def granularity(durs: Sequence[float]) -> int:
    """The gcd of the durations when all are whole seconds (est_time literals), else 0:
    every makespan is then a multiple of it, and so is the optimum."""
    if not durs or any(d != int(d) or d <= 0 for d in durs):
        return 0
    return math.gcd(*(int(d) for d in durs))


def lower_bound2(durs: Sequence[float], n: int) -> float:
    """max(total / n, longest, d[n - 1] + d[n]) over durations sorted longest first,
    rounded up to the durations' granularity."""
    if not durs:
        return 0.0
    d = sorted(durs, reverse=True)
    lb = max(sum(d) / n, d[0])
    if len(d) > n:
        lb = max(lb, d[n - 1] + d[n])
    g = granularity(d)
    return float(math.ceil(lb / g - 1e-9) * g) if g else lb


class Search:
    """One branch-and-bound run; ``assignment[i]`` is the shard of the i-th longest file."""

    def __init__(self, durs: Sequence[float], n: int, incumbent: list[int], budget: int = NODE_BUDGET) -> None:
        self.d = list(durs)  # longest first
        self.n = n
        self.budget = budget
        self.nodes = 0
        loads = [0.0] * n
        for i, s in enumerate(incumbent):
            loads[s] += self.d[i]
        self.best = max(loads)
        self.assignment = list(incumbent)
        self.bound = lower_bound2(self.d, n)
        self.rest = [0.0] * (len(self.d) + 1)
        for i in range(len(self.d) - 1, -1, -1):
            self.rest[i] = self.rest[i + 1] + self.d[i]
        self.proven = False

    def run(self) -> bool:
        """Search; True when the result is proven optimal (not cut by the budget)."""
        if self.best <= self.bound + _EPS:
            self.proven = True
            return True
        try:
            self._dfs(0, [0.0] * self.n, [0] * len(self.d))
            self.proven = True
        except _Stop:  # the budget ran out, or the bound was reached (then optimal)
            self.proven = self.best <= self.bound + _EPS
        return self.proven

    def _dfs(self, i: int, loads: list[float], cur: list[int]) -> None:
        if i == len(self.d):
            top = max(loads)
            if top < self.best - _EPS:
                self.best, self.assignment = top, list(cur)
                if self.best <= self.bound + _EPS:
                    raise _Stop  # optimal: nothing can beat the bound
            return
        self.nodes += 1
        if self.nodes > self.budget:
            raise _Stop
        limit = self.best - _EPS
        # Room left under the best makespan on every shard must hold what is left.
        if sum(max(0.0, limit - x) for x in loads) < self.rest[i] - _EPS:
            return
        d = self.d[i]
        tried: set[float] = set()
        for s in sorted(range(self.n), key=lambda k: (loads[k], k)):
            load = loads[s]
            if load in tried:
                continue  # same load, same subtree
            tried.add(load)
            if load + d > self.best - _EPS:
                break  # shards come lightest first: the rest are no better
            loads[s] = load + d
            cur[i] = s
            self._dfs(i + 1, loads, cur)
            loads[s] = load
            if self.best <= self.bound + _EPS:
                return


def polish(durs: Sequence[float], n: int, assignment: list[int], rounds: int = 1000) -> list[int]:
    """Local search: move a file off the fullest shard, or swap it for a shorter one,
    while that lowers the fullest shard (each step lowers the sum of squared loads, so
    it ends). A tighter incumbent prunes more of the search."""
    a = list(assignment)
    loads = [0.0] * n
    for i, s in enumerate(a):
        loads[s] += durs[i]
    for _ in range(rounds):
        top = max(range(n), key=lambda k: (loads[k], -k))
        mine = [i for i in range(len(a)) if a[i] == top]
        step = None
        for i in mine:
            for t in range(n):
                if t != top and loads[t] + durs[i] < loads[top] - _EPS:
                    step = (i, t, None)
                    break
            if step:
                break
        if step is None:
            for i in mine:
                for j in range(len(a)):
                    t = a[j]
                    if t != top and durs[j] < durs[i] - _EPS and loads[t] - durs[j] + durs[i] < loads[top] - _EPS:
                        step = (i, t, j)
                        break
                if step:
                    break
        if step is None:
            break
        i, t, j = step
        loads[top] -= durs[i]
        loads[t] += durs[i]
        a[i] = t
        if j is not None:
            loads[t] -= durs[j]
            loads[top] += durs[j]
            a[j] = top
    return a


def best_assignment(durs: Sequence[float], n: int, incumbent: list[int], budget: int = NODE_BUDGET) -> tuple[list[int], float, bool]:
    """(shard per file, makespan, proven optimal) for durations sorted longest first,
    starting from ``incumbent`` (LPT's shard per file) polished by local search."""
    s = Search(durs, n, polish(durs, n, incumbent), budget)
    s.run()
    return s.assignment, s.best, s.proven
