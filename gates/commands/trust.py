"""`gate-report trust`: mark runs trusted again (``RunWrites.set_trust``, logged).
"""

from __future__ import annotations

import argparse

from gates.commands.common import (
    UsageError,
    add_history,
    open_history_arg,
)

__all__ = ["NAME", "set_trust", "add_parser", "run"]

NAME = "trust"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report trust`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        NAME, help="mark runs trusted again",
        description="Mark runs trusted again, by run id or commit, with a reason kept in the "
                    "trust log.")
    add_history(p)
    p.add_argument("--run", action="append", default=[], metavar="ID", help="run id (repeatable)")
    p.add_argument("--commit", metavar="SHA",
                   help="every run of this commit (full sha or >= 7 characters)")
    p.add_argument("--reason", default="trusted again (gate-report trust)",
                   help="why (kept in the trust log; default: a plain note)")
    return p


def set_trust(args: argparse.Namespace, *, trusted: bool) -> int:
    """Mark the runs ``--run``/``--commit`` name trusted or untrusted, with the reason."""
    if not args.run and not args.commit:
        raise UsageError("give --run ID (repeatable) or --commit SHA")
    with open_history_arg(args.history, write=True) as history:
        changed = history.run_writes.set_trust(args.run, commit=args.commit, trusted=trusted,
                                    reason=args.reason)
    verb = "trusted" if trusted else "untrusted"
    print(f"{verb} {len(changed)} run(s): {', '.join(changed)}")
    return 0


def run(args: argparse.Namespace) -> int:
    return set_trust(args, trusted=True)
