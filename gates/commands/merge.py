"""`gate-report merge`: fold shard history files into one history (``gates.store.merge``).

``fold`` is ``gate-report ingest``'s too: the same checks, a fleet's database as target.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ci_register.planning.history_value import history_problem
from ci_register.running.redact import mask_secrets
from gates.commands.common import UsageError

__all__ = ["NAME", "fold", "add_parser", "run"]

NAME = "merge"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report merge`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "merge", help="fold shard history files into one history (idempotent)",
        description="Fold the history files written by parallel CI shards into one history. "
                    "Merging a file twice changes nothing; a run id present with different "
                    "content is an error and nothing is written.")
    p.add_argument("shards", nargs="+", metavar="SHARD.db", help="shard history files")
    p.add_argument("--into", required=True, metavar="PATH",
                   help="target history: a file or a postgresql:// URL (created if missing)")
    return p


def fold(args: argparse.Namespace) -> int:
    from gates.store.merge import merge_histories  # noqa: PLC0415

    missing = [s for s in args.shards if not Path(s).is_file()]
    if missing:
        what = "is not a regular file" if Path(missing[0]).exists() else "does not exist"
        raise UsageError(f"shard history {missing[0]} {what}; check the path "
                          "(download the shard artifacts first)")
    into = args.into or os.environ.get("GATES_HISTORY")
    if not into:
        raise UsageError("ingest: no target; pass --into postgresql://... or set GATES_HISTORY")
    if problem := history_problem(into):  # merge creates a missing target: refuse a non-path
        source = "--into" if args.into else "GATES_HISTORY"
        raise UsageError(f"{source} {mask_secrets(repr(into))}: {problem}")
    result = merge_histories(args.shards, into)
    print(result)
    for shard, n in result.per_shard.items():
        print(f"  {shard}: {n} new run(s)")
    return 0


run = fold
