"""Partitioning test files across shards: longest processing time first.

Graham's LPT rule (R. L. Graham, "Bounds on multiprocessing timing anomalies",
SIAM J. Appl. Math. 17(2), 1969): sort jobs longest first, put each on the
currently lightest shard. Its makespan is at most 4/3 - 1/(3m) of the optimum.
Pure: durations in, shards out; ties break on path so every runner computes the
same plan.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_SHARDS",
    "PartitionError",
    "Shard",
    "assign",
    "lpt",
    "parse_partition",
    "lower_bound",
    "shard_count",
]


MAX_SHARDS = 256  # a GitHub Actions matrix runs at most 256 jobs


class PartitionError(ValueError):
    """Bad partition spec or impossible plan; the message names the fix."""


@dataclass
class Shard:
    index: int  # 1-based, as users write it (`--partition 2/3`)
    items: list[tuple[str, float]]

    @property
    def total(self) -> float:
        return sum(d for _, d in self.items)


def lpt(items: Sequence[tuple[str, float]], n: int) -> list[Shard]:
    """Split ``(path, seconds)`` items into ``n`` shards, longest first onto the lightest."""
    if n < 1:
        raise PartitionError(f"shard count must be >= 1, got {n}")
    shards = [Shard(i + 1, []) for i in range(n)]
    heap = [(0.0, i) for i in range(n)]  # (load, index): ties go to the lowest index
    for path, dur in sorted(items, key=lambda x: (-x[1], x[0])):
        load, i = heapq.heappop(heap)
        shards[i].items.append((path, dur))
        heapq.heappush(heap, (load + dur, i))
    return shards


def assign(items: Sequence[tuple[str, float]], n: int) -> list[Shard]:
    """The plan every runner computes: LPT, improved by an exact search on suites of up to
    ``EXACT_MAX_FILES`` files (:mod:`ci_register.planning.exact`; never worse than LPT, and the
    same on every machine)."""
    from ci_register.planning.exact import EXACT_MAX_FILES, best_assignment  # noqa: PLC0415

    shards = lpt(items, n)
    if n < 2 or len(items) > EXACT_MAX_FILES or len(items) <= n:
        return shards
    order = sorted(items, key=lambda x: (-x[1], x[0]))
    where = {path: s.index - 1 for s in shards for path, _ in s.items}
    incumbent = [where[p] for p, _ in order]
    found, makespan, _ = best_assignment([d for _, d in order], n, incumbent)
    if makespan >= max(s.total for s in shards) - 1e-9:
        return shards
    out = [Shard(i + 1, []) for i in range(n)]
    for (path, dur), s in zip(order, found, strict=True):
        out[s].items.append((path, dur))
    return out


def lower_bound(durations: Sequence[float], n: int) -> float:
    """No plan on ``n`` shards can finish before max(total / n, longest job)."""
    if not durations:
        return 0.0
    return max(sum(durations) / n, max(durations))


_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_partition(spec: str) -> tuple[int, int]:
    """``"2/3"`` -> (2, 3); 1-based index, 1 <= i <= n."""
    m = _SPEC.match(spec or "")
    if not m:
        raise PartitionError(f"--partition {spec!r}: expected I/N such as 2/3 (shard I of N, counting from 1)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1:
        raise PartitionError(f"--partition {spec!r}: the shard count N must be at least 1 (I/N such as 1/1)")
    if not 1 <= i <= n:
        raise PartitionError(f"--partition {spec!r}: shard index must be between 1 and {max(n, 1)}")
    if n > MAX_SHARDS:
        raise PartitionError(f"--partition {spec!r}: at most {MAX_SHARDS} shards (a GitHub Actions matrix runs at most {MAX_SHARDS} jobs)")
    return i, n


def shard_count(durations: Sequence[float], budget_s: float, fixed: int | None = None, margin: float = 0.75) -> int:
    """Shards needed so each fits the budget: ceil(total / (margin * budget)).

    The 0.75 margin leaves room for LPT's worst case (4/3 of the optimum). A fixed
    count from the catalog wins. A single file longer than the budget cannot fit
    any shard and is an error.
    """
    if fixed is not None:
        return fixed
    if budget_s <= 0:
        raise PartitionError(f"shard budget must be > 0 s, got {budget_s}")
    total = sum(durations)
    return max(1, math.ceil(total / (margin * budget_s)))
