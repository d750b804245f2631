"""Retention: which runs of a history may go, and going.

`plan_prune` lists the runs older than the kept span (or beyond each suite's newest
N) that nothing still reads: a run stays while a gate of a new run would read it
(``History.gate_read_runs`` for every suite and fingerprint: baselines, durations,
confirm reruns, acceptance dates), while it is still ``incomplete`` (a writer may be
recording it), while it carries an acceptance entry, has a trust
log entry, or ran a commit a stored bisection names; a confirm chain stays or goes
whole. `apply_prune` deletes the planned runs with all their rows and compacts the
file (VACUUM). Acceptances, the trust log of kept runs, bisections and notifications
are never deleted.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gates.store.baselines import SERIES_LIMIT
from gates.store.history import History
from gates.store.snapshot import PER_FILE

__all__ = ["PrunePlan", "apply_prune", "plan_prune"]


@dataclass
class PrunePlan:
    """What a prune deletes and why the other old runs stay."""

    path: str
    total: int
    old: int  # runs outside the kept span / count
    delete: list[int] = field(default_factory=list)  # runs.num
    kept_because: dict[str, int] = field(default_factory=dict)  # reason -> old runs kept

    def summary(self) -> str:
        why = ", ".join(f"{n} {reason}" for reason, n in self.kept_because.items() if n)
        return (f"{self.path}: {self.total} run(s), {self.old} outside what --keep keeps; "
                f"{len(self.delete)} to delete"
                + (f"; kept though old: {why}" if why else ""))


def plan_prune(history: History, *, before: str | None = None,
               keep_runs: int | None = None) -> PrunePlan:
    """Runs to delete: started before ``before`` (UTC ISO), or beyond each suite's
    newest ``keep_runs``, that nothing still reads (see the module docstring)."""
    if (before is None) == (keep_runs is None):
        raise ValueError("give one of before or keep_runs")
    runs = history.fleet_sql.runs_for_prune()  # newest first
    seen: dict[str, int] = defaultdict(int)
    old: list[int] = []
    for num, suite, started, _fp, _commit in runs:
        seen[suite] += 1
        if (before is not None and started < before) or \
                (keep_runs is not None and seen[suite] > keep_runs):
            old.append(num)
    reasons: dict[str, set[int]] = {
        "read by a gate (baselines, durations, confirms, acceptance dates)": set(),
        # A live writer's run (a long suite started before the cut-off): deleting its
        # rows mid-run left it `complete` with its first tests and metrics gone. A dead
        # writer's run is closed as crashed by the next writer, then may go.
        "still being written (incomplete)": history.fleet_sql.runs_incomplete(),
        "carrying an acceptance entry": history.fleet_sql.runs_carrying_acceptances(),
        "in the trust log": history.fleet_sql.runs_in_trust_log(),
        "of a bisected commit": history.fleet_sql.runs_of_bisects(),
    }
    gate = next(iter(reasons))
    for suite, fp in history.fleet_sql.suite_fingerprints():
        reasons[gate] |= history.fleet_sql.gate_read_runs(suite, fp, rows_per_key=SERIES_LIMIT,
                                                per_file=PER_FILE)
    old_set = set(old)
    plan = PrunePlan(str(history.path), len(runs), len(old))
    kept: set[int] = set()
    for reason, nums in reasons.items():
        hit = (nums & old_set) - kept
        plan.kept_because[reason] = len(hit)
        kept |= hit
    # A confirm chain stays or goes whole: a kept run keeps its whole family.
    staying = kept | ({r[0] for r in runs} - old_set)
    family_kept: set[int] = set()
    for fam in history.fleet_sql.confirm_families():
        if fam & staying:
            family_kept |= fam & old_set
    family_kept -= kept
    plan.kept_because["in a confirm chain with a kept run"] = len(family_kept)
    kept |= family_kept
    plan.delete = sorted(old_set - kept)
    return plan


def apply_prune(history: History, plan: PrunePlan, *, vacuum: bool = True) -> dict[str, int]:
    """Delete the planned runs (one transaction) and compact the file; rows deleted."""
    counts = history.fleet_sql.delete_runs(plan.delete) if plan.delete else {}
    if vacuum:
        history.fleet_sql.vacuum()
    return counts
