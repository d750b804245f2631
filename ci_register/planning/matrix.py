"""GitHub Actions matrix: one entry per shard of every suite the event runs.

``python -m ci_register matrix --event pull_request`` prints ``{"include": [...]}``
for ``strategy.matrix: ${{ fromJSON(needs.matrix.outputs.matrix) }}``. Each entry
carries the suite, its shard index and count, the ``runs-on`` labels, a
``timeout-minutes`` derived from the shard's expected time, the shard's history
file, the fingerprint whose durations planned it (the workflow exports it as
``CI_REGISTER_FINGERPRINT`` so every shard computes the same partition) and the
exact nox command, so the workflow holds no logic of its own.

Nightly suites (and nightly-only files) run only for ``--event schedule``.
:func:`entries` is pure; :func:`build` reads the tree and the history.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ci_register.planning.schedule import Schedule, ScheduleError, plan_schedule
from ci_register.planning.select import Selection
from ci_register.registered.catalog import Catalog, Suite
from ci_register.registered.collect import Collection

if TYPE_CHECKING:
    from ci_register.planning.durations import DurationsReader

__all__ = [
    "EVENTS",
    "SETUP_S",
    "MatrixError",
    "SuitePlan",
    "MAX_JOBS",
    "build",
    "chunk",
    "entries",
    "history_file",
    "select_suites",
    "summary",
    "timeout_minutes",
    "write_output",
]

EVENTS = ("pull_request", "push", "schedule", "workflow_dispatch", "merge_group")
MAX_JOBS = 256  # GitHub Actions' limit on the jobs one matrix may generate
SETUP_S = 900.0  # checkout, venv and model downloads before the first test starts


class MatrixError(ValueError):
    """The matrix cannot be built; the message names the file or suite and the fix."""


@dataclass
class SuitePlan:
    suite: Suite
    schedule: Schedule
    nightly: bool  # run nightly-only files too (passes --nightly)
    where: dict[str, str] = field(default_factory=dict)  # path -> "path:line"
    sources: dict[str, str] = field(default_factory=dict)  # path -> "history" | "est_time"
    fingerprint: str | None = None
    labels: tuple[str, ...] | None = None  # --labels the plan was made with (every shard passes them)
    only: tuple[str, ...] = ()  # the files a change selected, when fewer than the suite's (--file)
    why: dict[str, str] = field(default_factory=dict)  # path -> why it runs (with a selection)

    def text(self) -> str:
        """The plan as a person reads it: shards, files, times, makespan vs bound."""
        sch = self.schedule
        lines = [f"suite {self.suite.name}: {sch.describe()}; history fingerprint {self.fingerprint or '- (est_time only)'}"]
        for shard in sch.shards:
            lines.append(f"  shard {shard.index}/{sch.count}: {len(shard.items)} files, expected {shard.total:.0f} s")
            for path, d in shard.items:
                lines.append(f"    {self.where.get(path, path)}  expected {d:.0f} s ({self.sources.get(path, 'est_time')})")
                if self.why.get(path):
                    lines.append(f"      why: {self.why[path]}")
        lines.append(f"  makespan {sch.makespan:.0f} s; lower bound max(total/shards, longest) {sch.bound:.0f} s (+{sch.gap * 100:.1f}%)")
        return "\n".join(lines)


def timeout_minutes(expected_s: float, budget_s: float) -> int:
    """Job limit: twice the shard's expected time (the runner's per-file rule), at least
    the budget, plus setup. Generous on purpose: per-file limits catch a hang first."""
    return math.ceil((max(2.0 * expected_s, budget_s) + SETUP_S) / 60.0)


def history_file(suite: str, index: int, count: int) -> str:
    return f"shard-{suite}-{index}-of-{count}.db"


def entries(plans: Sequence[SuitePlan]) -> dict[str, list[dict[str, object]]]:
    """The matrix JSON object for planned suites (pure)."""
    include: list[dict[str, object]] = []
    for sp in plans:
        n = sp.schedule.count
        for shard in sp.schedule.shards:
            hist = history_file(sp.suite.name, shard.index, n)
            args = ["--partition", f"{shard.index}/{n}", "--history", hist]
            if sp.nightly and not sp.suite.nightly:
                args.append("--nightly")
            if sp.labels is not None:
                args += ["--labels", ",".join(sp.labels)]
            for path in sp.only:  # every shard gets the same list, so all plan one partition
                args += ["--file", path]
            extra = {}
            if sp.why:
                extra["why"] = "; ".join(dict.fromkeys(sp.why[p] for p, _ in shard.items if sp.why.get(p)))
            include.append({
                "name": f"{sp.suite.name} {shard.index}/{n}",
                "suite": sp.suite.name,
                "shard": shard.index,
                "shards": n,
                "runs-on": list(sp.suite.runner_labels) or ["ubuntu-latest"],
                "timeout-minutes": timeout_minutes(shard.total, sp.suite.shard_budget_s),
                "expected-s": round(shard.total, 1),
                "files": len(shard.items),
                "history": hist,
                # Every shard must plan the same partition: pin the durations' hardware key
                # (CI_REGISTER_FINGERPRINT) rather than trust each runner's own GPU count.
                "fingerprint": sp.fingerprint or "",
                "command": shlex.join(["nox", "-s", sp.suite.name, "--", *args]),
                **extra,
            })
    return {"include": include}


def select_suites(catalog: Catalog, event: str, only: Sequence[str] = ()) -> list[Suite]:
    if event not in EVENTS:
        raise MatrixError(f"--event {event!r}: use one of {', '.join(EVENTS)}")
    unknown = [s for s in only if s not in catalog.suites]
    if unknown:
        raise MatrixError(f"unknown suite {unknown[0]!r}; {catalog.session_suggest(unknown[0])}")
    nightly_run = event == "schedule"
    return [s for name, s in sorted(catalog.suites.items()) if (not only or name in only) and (nightly_run or not s.nightly)]


def build(
    catalog: Catalog,
    collection: Collection,
    event: str,
    history: str | None,
    *,
    only: Sequence[str] = (),
    fingerprint: str | None = None,
    labels: Sequence[str] | None = None,
    selection: Selection | None = None,
    root: Path | None = None,
    read_durations: DurationsReader | None = None,
) -> tuple[dict[str, list[dict[str, object]]], list[SuitePlan]]:
    """Plan every suite the event runs and return (matrix, plans).

    Durations come from the history at the fingerprint of each suite's newest trusted
    run (the matrix job itself runs on a CPU runner), unless ``fingerprint`` is given.
    With a ``selection`` (:mod:`ci_register.planning.select`), only the files a change can affect
    run, and each entry says why. ``read_durations``: how the history is read
    (`ci_register.planning.durations.DurationsReader`; default: one reader process).
    """
    from ci_register.planning import durations  # noqa: PLC0415 - reads the history

    nightly_run = event == "schedule"
    plans: list[SuitePlan] = []
    warned: set[str] = set()
    todo = []
    for suite in select_suites(catalog, event, only):
        regs = collection.for_suite(suite.name, nightly=nightly_run or suite.nightly, labels=labels)
        n_all = len(regs)
        if selection is not None:
            regs = [r for r in regs if selection.keeps(suite.name, r.path)]
        if regs:  # else nothing registered (or nothing the change affects): no runner to start
            todo.append((suite, regs, n_all))
    # Every suite's durations in one read of the tree's history (ROOT/history.db unless
    # --history or GATES_HISTORY), not one reader process per suite.
    found_all = durations.lookup_all([(s, r) for s, r, _ in todo], history, root=root,
                                     fingerprint=fingerprint or durations.LATEST,
                                     read=read_durations)
    for suite, regs, n_all in todo:
        found = found_all[suite.name]
        if found.warning and found.warning not in warned:  # one history, one warning
            warned.add(found.warning)
            print(f"warning: {found.warning}", file=sys.stderr)
        expected, sources = durations.expected(regs, found.figures)
        where = {r.path: f"{r.path}:{r.line}" for r in regs}
        try:
            sched = plan_schedule(
                [(r.path, expected[r.path]) for r in regs], suite.shard_budget_s, suite.shards,
                where=where, suite=suite.name,
            )
        except ScheduleError as exc:
            raise MatrixError(str(exc)) from None
        only = tuple(r.path for r in regs) if len(regs) < n_all else ()
        why = {r.path: selection.why(suite.name, r.path) for r in regs} if selection is not None else {}
        plans.append(SuitePlan(suite, sched, nightly_run, where, sources, found.fingerprint,
                               tuple(labels) if labels is not None else None, only, why))
    return entries(plans), plans


def chunk(matrix: dict[str, list[dict[str, object]]], index: int | None) -> dict[str, list[dict[str, object]]]:
    """Part ``index`` (1-based) of a matrix cut into runs of at most :data:`MAX_JOBS` jobs.

    GitHub rejects a matrix of more than 256 jobs; a workflow with K matrix jobs asks
    for ``--chunk 1`` .. ``--chunk K``. Without ``index`` an oversized matrix is an error.
    """
    jobs = matrix["include"]
    count = max(1, math.ceil(len(jobs) / MAX_JOBS))
    if index is None:
        if count > 1:
            raise MatrixError(f"{len(jobs)} jobs exceed GitHub's {MAX_JOBS} per matrix; generate {count} matrices "
                              f"with --chunk 1 .. --chunk {count}")
        return matrix
    if not 1 <= index <= count:
        raise MatrixError(f"--chunk {index}: the matrix has {len(jobs)} jobs, {count} chunk(s) of at most {MAX_JOBS}; use 1..{count}")
    return {"include": jobs[(index - 1) * MAX_JOBS:index * MAX_JOBS]}


def summary(plans: Sequence[SuitePlan]) -> str:
    """One line per suite, for stderr next to the JSON."""
    return "\n".join(
        f"{sp.suite.name}: {sp.schedule.describe()}; makespan {sp.schedule.makespan:.0f} s, "
        f"lower bound {sp.schedule.bound:.0f} s (+{sp.schedule.gap * 100:.1f}%)"
        for sp in plans
    )


def is_matrix(head: bytes) -> bool:
    """Whether a file's first bytes are an earlier matrix output (safe to replace)."""
    return head.lstrip().startswith(b'{"include":')


def write_output(matrix: dict[str, object], path: Path | None) -> None:
    text = json.dumps(matrix, separators=(",", ":"))
    if path is None:
        print(text)
    else:
        from ci_register.planning.outfile import write_output as write_file  # noqa: PLC0415

        write_file(path, text + "\n", option="--output")
