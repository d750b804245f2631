"""`gate-report prune`: delete old runs nothing reads any more, and compact (``gates.store.prune``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gates.commands.common import (
    UsageError,
    add_history,
    count,
    existing_history,
)

__all__ = ["NAME", "add_parser", "run"]

NAME = "prune"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report prune`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "prune", help="delete old runs nothing reads any more, and compact (dry run first)",
        description="Delete runs older than --keep (or beyond each suite's newest "
                    "--keep-runs) unless a gate still reads them (baselines, durations, "
                    "confirm reruns, acceptance dates), they carry an acceptance, are in the "
                    "trust log or ran a bisected commit; then VACUUM. Prints the plan and "
                    "deletes nothing without --apply.")
    add_history(p)
    p.add_argument("--keep", metavar="SPAN",
                   help="keep runs started within this span: 90d, 12w, or a date")
    p.add_argument("--keep-runs", type=count(1), metavar="N",
                   help="keep each suite's newest N runs")
    p.add_argument("--apply", action="store_true", help="delete (default: a dry run)")
    return p


def run(args: argparse.Namespace) -> int:
    from gates.report.query import parse_since  # noqa: PLC0415
    from gates.store.open import open_for_reading, open_history  # noqa: PLC0415
    from gates.store.prune import apply_prune, plan_prune  # noqa: PLC0415

    if (args.keep is None) == (args.keep_runs is None):
        raise UsageError("give --keep SPAN (e.g. 90d) or --keep-runs N")
    target = existing_history(args)
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
