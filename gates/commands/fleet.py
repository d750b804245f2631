"""`gate-report snapshot` and `gate-report prune`: the history's chores for a fleet.

Registered by ``gates.commands.cli`` (``COMMANDS``, ``add_parsers``); the library is
``gates.store.snapshot`` and ``gates.store.prune``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from gates.commands.common import UsageError, add_history, count, default_history

__all__ = ["COMMANDS", "add_parsers"]


def _history(args: argparse.Namespace) -> Path | str:
    from gates.store.backend import history_location  # noqa: PLC0415

    target = history_location(args.history or default_history())
    if isinstance(target, Path) and not target.exists():
        raise UsageError(f"{target}: no such history; pass --history PATH or set "
                         "GATES_HISTORY")
    return target


def _snapshot(args: argparse.Namespace) -> int:
    from gates.store.snapshot import make_snapshot  # noqa: PLC0415

    print(make_snapshot(_history(args), args.out, args.suite, args.fingerprint))
    return 0


def _prune(args: argparse.Namespace) -> int:
    from gates.report.query import parse_since  # noqa: PLC0415
    from gates.store.history import open_for_reading  # noqa: PLC0415
    from gates.store.open import open_history  # noqa: PLC0415
    from gates.store.prune import apply_prune, plan_prune  # noqa: PLC0415

    if (args.keep is None) == (args.keep_runs is None):
        raise UsageError("give --keep SPAN (e.g. 90d) or --keep-runs N")
    target = _history(args)
    before = parse_since(args.keep, option="--keep") if args.keep is not None else None
    on_disk = isinstance(target, Path)  # a database's size is the server's business
    size = target.stat().st_size if on_disk else 0
    # A dry run writes nothing: a file of an older schema is planned over a migrated
    # temporary copy (the rows the apply would see after it migrates the file).
    opened = (open_for_reading(target) if not args.apply and isinstance(target, Path)
              else open_history(target, create=False))
    with opened as history:
        plan = plan_prune(history, before=before, keep_runs=args.keep_runs)
        print(plan.summary())
        if not args.apply:
            print("dry run: nothing deleted; add --apply to delete them and compact the file")
            return 0
        counts = apply_prune(history, plan)
    rows = sum(n for t, n in counts.items() if t != "texts")
    if not on_disk:
        print(f"deleted {len(plan.delete)} run(s) ({rows} rows) from the database")
        return 0
    print(f"deleted {len(plan.delete)} run(s) ({rows} rows); {target}: "
          f"{size / 1e6:.2f} MB -> {target.stat().st_size / 1e6:.2f} MB")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "snapshot": _snapshot,
    "prune": _prune,
}


def add_parsers(sub) -> None:
    """Add ``snapshot`` and ``prune`` to ``gate-report``'s parser."""
    sn = sub.add_parser(
        "snapshot", help="write the baseline snapshot shards gate against (small)",
        description="Copy what a gate of a new run of the suite reads (each metric's "
                    "baseline window, confirm reruns, acceptances) and the file durations the "
                    "planner reads into a new history file. A shard run with "
                    "`nox -s SUITE -- --baseline snap.db` gates against it and keeps only its "
                    "own runs; its verdicts are those the whole history gives.")
    add_history(sn)
    sn.add_argument("--suite", action="append", required=True, metavar="S",
                    help="suite (repeatable)")
    sn.add_argument("--fingerprint", metavar="FP",
                    help="only this hardware fingerprint (default: every one of the suite)")
    sn.add_argument("--out", required=True, metavar="PATH", help="the new snapshot file")

    pr = sub.add_parser(
        "prune", help="delete old runs nothing reads any more, and compact (dry run first)",
        description="Delete runs older than --keep (or beyond each suite's newest "
                    "--keep-runs) unless a gate still reads them (baselines, durations, "
                    "confirm reruns, acceptance dates), they carry an acceptance, are in the "
                    "trust log or ran a bisected commit; then VACUUM. Prints the plan and "
                    "deletes nothing without --apply.")
    add_history(pr)
    pr.add_argument("--keep", metavar="SPAN",
                    help="keep runs started within this span: 90d, 12w, or a date")
    pr.add_argument("--keep-runs", type=count(1), metavar="N",
                    help="keep each suite's newest N runs")
    pr.add_argument("--apply", action="store_true", help="delete (default: a dry run)")
