"""`gate-report untrust`: mark runs untrusted: never a baseline, never deleted.
"""

from __future__ import annotations

import argparse

from gates.commands.common import add_history
from gates.commands.trust import set_trust

__all__ = ["NAME", "add_parser", "run"]

NAME = "untrust"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report untrust`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        NAME, help="mark runs untrusted",
        description="Mark runs untrusted (never a baseline, never deleted), by run id or "
                    "commit, with a reason kept in the trust log.")
    add_history(p)
    p.add_argument("--run", action="append", default=[], metavar="ID", help="run id (repeatable)")
    p.add_argument("--commit", metavar="SHA",
                   help="every run of this commit (full sha or >= 7 characters)")
    p.add_argument("--reason", required=True,
                   help='why, e.g. "broken runner gpu-17" (kept in the trust log)')
    return p


def run(args: argparse.Namespace) -> int:
    return set_trust(args, trusted=False)
