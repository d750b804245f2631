"""`gate-report check`: rows reports and gates cannot read (merge's rules, ``gates.store.merge``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gates.commands.common import (
    UsageError,
    add_history,
    default_history,
)

__all__ = ["NAME", "add_parser", "run"]

NAME = "check"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report check`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "check", help="list rows reports and gates cannot read (what merge refuses)",
        description="Check every run of a history with the rules merge applies to a shard: "
                    "types, ranges, medians against samples, units and keys, runs dated in "
                    "the future, rows of no run. Exit 2 when anything is wrong.")
    add_history(p)
    return p


def run(args: argparse.Namespace) -> int:
    from gates.store.backend import history_location  # noqa: PLC0415
    from gates.store.merge import check_history  # noqa: PLC0415

    target = history_location(args.history or default_history())
    if isinstance(target, Path) and not target.exists():
        raise UsageError(f"{target}: no such history; pass --history PATH")
    problems = check_history(target)
    for line in problems:
        print(f"error: {line}")
    if problems:
        print(f"{len(problems)} problem(s); reports and gates cannot read these rows: restore "
              "the file from a backup or CI artifact (merge refuses such rows in shards)")
        return 2
    print(f"{target}: every row is sound")
    return 0
