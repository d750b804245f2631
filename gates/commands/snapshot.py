"""`gate-report snapshot`: the baseline snapshot shards gate against (``gates.store.snapshot``).
"""

from __future__ import annotations

import argparse

from gates.commands.common import (
    add_history,
    existing_history,
)

__all__ = ["NAME", "add_parser", "run"]

NAME = "snapshot"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report snapshot`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "snapshot", help="write the baseline snapshot shards gate against (small)",
        description="Copy what a gate of a new run of the suite reads (each metric's "
                    "baseline window, confirm reruns, acceptances) and the file durations the "
                    "planner reads into a new history file. A shard run with "
                    "`nox -s SUITE -- --baseline snap.db` gates against it and keeps only its "
                    "own runs; its verdicts are those the whole history gives.")
    add_history(p)
    p.add_argument("--suite", action="append", required=True, metavar="S",
                   help="suite (repeatable)")
    p.add_argument("--fingerprint", metavar="FP",
                   help="only this hardware fingerprint (default: every one of the suite)")
    p.add_argument("--out", required=True, metavar="PATH", help="the new snapshot file")
    return p


def run(args: argparse.Namespace) -> int:
    from gates.store.snapshot import make_snapshot  # noqa: PLC0415

    print(make_snapshot(existing_history(args), args.out, args.suite, args.fingerprint))
    return 0
