"""`gate-report bisect`: the commit that moved a metric, by repeated runs in git worktrees (``gates.bisect_git``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gates.commands.common import (
    UsageError,
    add_history,
    add_out,
    check_out,
    count,
    emit,
    open_history_arg,
)

__all__ = ["NAME", "add_parser", "run"]

NAME = "bisect"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report bisect`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "bisect", help="find the commit that moved a metric (git worktrees, repeated runs)",
        description="Check candidate commits between --good and --bad out in git worktrees, "
                    "run only the tests that recorded KEY (known from the history), repeat "
                    "them interleaved with good and bad on this machine and classify each "
                    "candidate like good or like bad with the gate's statistics; stop at one "
                    "commit, or say the change is not isolable (noise, gradual drift). The "
                    "culprit and the evidence go to the history (bisects table) and stdout.")
    add_history(p)
    p.add_argument("key", metavar="KEY", help="metric key")
    p.add_argument("--good", required=True, metavar="COMMIT", help="a commit at the old level")
    p.add_argument("--bad", required=True, metavar="COMMIT", help="a commit at the new level")
    p.add_argument("--suite", help="the suite whose tests recorded KEY (default: any)")
    p.add_argument("--repo", default=".", metavar="PATH", help="git repository (default .)")
    p.add_argument("--calib", type=count(5), default=10, metavar="N",
                   help="runs of good and of bad before halving (default 10)")
    p.add_argument("--reps", type=count(1), default=3, metavar="N",
                   help="runs of a candidate per round (default 3)")
    p.add_argument("--max-reps", type=count(1), default=15, metavar="N",
                   help="runs of a candidate at most (default 15)")
    p.add_argument("--verify", type=count(5), default=8, metavar="N",
                   help="runs of the last good and first bad candidate compared at the end "
                        "(default 8)")
    p.add_argument("--format", choices=("text", "md"), default="text",
                   help="output format (default text)")
    add_out(p)
    return p


def run(args: argparse.Namespace) -> int:
    from gates.bisect_git import BisectInputError, render_bisect, run_bisect  # noqa: PLC0415

    check_out(args)
    with open_history_arg(args.history, write=True) as history:
        try:
            result, tests = run_bisect(Path(args.repo), history, args.key, args.good, args.bad,
                                       suite=args.suite, calib=args.calib, reps=args.reps,
                                       max_reps=args.max_reps, verify=args.verify,
                                       log=sys.stderr)
        except BisectInputError as exc:
            raise UsageError(str(exc)) from None
    emit(render_bisect(result, args.key, tests, args.format), args.out)
    return 0
