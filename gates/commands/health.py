"""`gate-report health`: CI health of a suite from its history (``gates.report.health``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gates.commands.common import (
    UsageError,
    add_history,
    add_out,
    check_out,
    count,
    emit,
    health_for,
    now,
    open_history_arg,
    report_anchor,
)

__all__ = ["NAME", "add_parser", "run"]

NAME = "health"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report health`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "health", help="CI health only: stale est_time, flaky, skipped, never-run, slow files",
        description="CI health of one suite from history: est_time stale against the p90 of "
                    "recent passing runs (with a suggested value), flaky tests, tests always "
                    "skipped, registered files that never ran, the slowest files and what "
                    "fresh estimates would save the slowest shard.")
    add_history(p)
    p.add_argument("--suite", help="suite (default: the suite of the newest run)")
    p.add_argument("--format", choices=("text", "md", "json"), default="text",
                   help="output format (default text)")
    add_out(p)
    p.add_argument("--window", type=count(1), default=20, metavar="N",
                   help="runs to look back over (default 20)")
    p.add_argument("--root", default=".", metavar="PATH",
                   help="repository root with suites/catalog.toml (default .)")
    return p


def run(args: argparse.Namespace) -> int:
    from gates.report.build import Report  # noqa: PLC0415
    from gates.report.query import select_runs  # noqa: PLC0415

    check_out(args)
    with open_history_arg(args.history) as history:
        # The suites of "the latest run" as the report means it (this CI run's, else this
        # commit's; never a run merged with a clock ahead), each up to that run.
        runs, _ = select_runs(history, suite=args.suite, anchor=report_anchor(Path(args.root)))
        until: dict[str, str] = {}
        for r in runs:
            until[r["suite"]] = max(until.get(r["suite"], ""), r["started_at"])
        health = health_for(history, until, Path(args.root), args.window)
    suite = ", ".join(sorted(until))
    if not any(h.runs for h in health):
        raise UsageError(f"{history.path}: no run of suite {suite!r}; check --suite")
    report = Report(title=f"CI health of {suite}", scope="health", runs=[], verdicts=[],
                    summary={}, health=health, generated_at=now())
    if args.format == "json":
        emit(json.dumps([h.to_json() for h in health], indent=1) + "\n", args.out)
    elif args.format == "md":
        from gates.report.render_md import render_md  # noqa: PLC0415

        emit(render_md(report), args.out)
    else:
        from gates.report.render_text import render_text  # noqa: PLC0415

        emit(render_text(report), args.out)
    return 0
