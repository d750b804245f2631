"""How many shards a suite needs, and which files go on each.

The count comes from the suite's time budget, ``ceil(total / (0.75 * budget))``
(0.75 leaves room for LPT's 4/3 worst case), unless the catalog fixes ``shards``.
If LPT still overfills a shard, the count grows until every shard fits: the
budget is the promise. A single file longer than the budget can never fit and
is an error naming it. Pure: durations in, a :class:`Schedule` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ci_register.planning.partition import MAX_SHARDS, Shard, assign, lower_bound, shard_count

__all__ = ["MARGIN", "Schedule", "ScheduleError", "plan_schedule"]

MARGIN = 0.75


class ScheduleError(ValueError):
    """A suite that cannot be scheduled within its budget; the message names the file."""


@dataclass
class Schedule:
    shards: list[Shard]
    budget_s: float
    fixed: bool  # count fixed by the catalog rather than derived from the budget
    total: float
    bound: float  # max(total / shards, longest file)

    @property
    def count(self) -> int:
        return len(self.shards)

    @property
    def makespan(self) -> float:
        return max((s.total for s in self.shards), default=0.0)

    @property
    def gap(self) -> float:
        """Makespan over the lower bound, as a fraction (0.02 = 2% worse than any plan could be)."""
        return self.makespan / self.bound - 1.0 if self.bound else 0.0

    def describe(self) -> str:
        how = "fixed by the catalog" if self.fixed else f"from budget {self.budget_s:g} s: ceil({self.total:.0f} / ({MARGIN:g} x {self.budget_s:g}))"
        return f"{self.count} shard(s) {how}"


def plan_schedule(
    items: Sequence[tuple[str, float]],
    budget_s: float,
    fixed: int | None = None,
    *,
    where: Mapping[str, str] | None = None,
    suite: str = "",
    margin: float = MARGIN,
) -> Schedule:
    """Shards for ``(path, seconds)`` items within ``budget_s`` (or exactly ``fixed`` shards).

    ``where`` maps a path to ``path:line`` for error messages.
    """
    if budget_s <= 0:
        raise ScheduleError(f"suite {suite!r}: shard budget must be > 0 s, got {budget_s:g}; fix shard_budget_s in the catalog")
    by_path = dict(items)
    over = sorted((p for p, d in items if d > budget_s), key=lambda p: (-by_path[p], p))
    if over:
        p = over[0]
        dur = by_path[p]
        more = f" (and {len(over) - 1} more)" if len(over) > 1 else ""
        raise ScheduleError(
            f"{(where or {}).get(p, p)}: expected {dur:.0f} s exceeds suite {suite!r}'s shard budget of {budget_s:g} s{more}; "
            "split the file or raise the suite's shard_budget_s in the catalog"
        )
    durs = [d for _, d in items]
    total = sum(durs)
    if fixed is not None:
        shards = assign(items, fixed)
        return Schedule(shards, budget_s, True, total, lower_bound(durs, fixed))
    # More shards than files only adds empty runners.
    n = min(shard_count(durs, budget_s, None, margin), max(len(items), 1))
    shards = assign(items, n)
    while max((s.total for s in shards), default=0.0) > budget_s and n < len(items):
        n += 1
        shards = assign(items, n)
    if n > MAX_SHARDS:
        raise ScheduleError(f"suite {suite!r}: {total:.0f} s of files need {n} shards of {budget_s:g} s, more than the {MAX_SHARDS} jobs a GitHub Actions matrix runs; raise shard_budget_s in suites/catalog.toml")
    return Schedule(shards, budget_s, False, total, lower_bound(durs, n))
