"""`gate-report compare`: B's runs judged against A's, metric by metric (``gates.report.compare``).
"""

from __future__ import annotations

import argparse
import os

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

NAME = "compare"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report compare`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "compare", help="compare two commits, branches, runs or fingerprints metric by metric",
        description="Judge every metric of B's runs against A's runs with the gate's "
                    "statistics: the change, its 95%% interval, p/q and a verdict per metric "
                    "(regressions first). A and B: a run id, a commit, a branch or a hardware "
                    "fingerprint. In a PR job they default to $GITHUB_BASE_REF and "
                    "$GITHUB_SHA (this PR against its base branch). Exit 1 when something "
                    "regressed.")
    add_history(p)
    p.add_argument("a", nargs="?", metavar="A", help="the reference (e.g. main)")
    p.add_argument("b", nargs="?", metavar="B", help="what is compared with it")
    p.add_argument("--suite", help="only this suite")
    p.add_argument("--format", choices=("text", "md", "json"), default="text",
                   help="output format (default text)")
    add_out(p)
    p.add_argument("--runs-b", type=count(1), default=10, metavar="N",
                   help="B's newest runs judged together (default 10)")
    return p


def run(args: argparse.Namespace) -> int:
    from gates.model import stats  # noqa: PLC0415
    from gates.report.compare import compare, load_side, render_compare  # noqa: PLC0415

    a = args.a or os.environ.get("GITHUB_BASE_REF")
    b = args.b or (os.environ.get("GITHUB_SHA") if os.environ.get("GITHUB_BASE_REF") else None)
    if not a or not b:
        raise UsageError("give A and B (commits, branches, run ids or fingerprints); in a "
                         "PR job they default to $GITHUB_BASE_REF and $GITHUB_SHA")
    check_out(args)
    with open_history_arg(args.history) as history:
        kind_b, side_b = load_side(history, b, suite=args.suite, limit=args.runs_b)
        skip = {r["run_id"] for r in history.report_reads.runs_by_ref(b, suite=args.suite,
                                                         limit=args.runs_b)[1]}
        kind_a, side_a = load_side(history, a, suite=args.suite,
                                   limit=stats.DEFAULTS.window + max(stats.DEFAULTS.windows),
                                   skip=skip, trusted_only=True)
    rows = compare(side_a, side_b, by_fingerprint="fingerprint" not in (kind_a, kind_b))
    emit(render_compare(rows, f"{kind_a} {a}", f"{kind_b} {b}", args.format), args.out)
    return 1 if any(r.verdict == "regression" for r in rows) else 0
