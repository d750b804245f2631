"""`gate-report ingest`: load per-run history files into the fleet's history.

The fold is merge's (``gates.commands.merge.fold``); the target defaults to
$GATES_HISTORY.
"""

from __future__ import annotations

import argparse

from gates.commands.merge import fold

__all__ = ["NAME", "add_parser", "run"]

NAME = "ingest"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report ingest`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "ingest", help="load per-run history files into the fleet's history (idempotent)",
        description="What a host without a route to the fleet's PostgreSQL history uploads: "
                    "its run's history file, loaded here by run id with merge's checks. "
                    "Loading a file twice changes nothing.")
    p.add_argument("shards", nargs="+", metavar="RUN.db", help="per-run history files")
    p.add_argument("--into", default=None, metavar="URL",
                   help="target history (default: $GATES_HISTORY)")
    return p


run = fold
