"""`gate-report trim`: metrics and tests the history shows are redundant (``gates.report.trim``).
"""

from __future__ import annotations

import argparse
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

NAME = "trim"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report trim`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "trim", help="suggest metrics and tests history shows are redundant (never edits)",
        description="From history: metrics that move together (Spearman |rho| >= 0.98), "
                    "metrics too noisy to detect a realistic change that never failed, and "
                    "variants/tests whose every metric is covered by a cheaper one, each with "
                    "the GPU-minutes per week it would save and the detection lost.")
    add_history(p)
    p.add_argument("--suite", help="only this suite")
    p.add_argument("--since", metavar="SPAN", default="30d",
                   help="runs since: 30d (default), 12h, 2w or an ISO date; per-commit suites' "
                        "runs per week are counted over this window")
    p.add_argument("--format", choices=("text", "md", "json"), default="text", help="output format (default text)")
    add_out(p)
    p.add_argument("--rho", type=float, default=0.98, help="twin threshold on |Spearman rho| (default 0.98)")
    p.add_argument("--realistic", type=float, default=0.20,
                   help="relative shift a metric must be able to detect to stay (default 0.20)")
    p.add_argument("--min-runs", type=count(4), default=8, metavar="N",
                   help="runs a metric needs before it is judged (default 8)")
    p.add_argument("--root", default=".", metavar="PATH",
                   help="repository root with suites/catalog.toml, for GPU counts and schedules")
    return p


def run(args: argparse.Namespace) -> int:
    import datetime as dt  # noqa: PLC0415
    import json  # noqa: PLC0415

    from gates.report.query import parse_since  # noqa: PLC0415
    from gates.report.trim import analyse, build_input, render  # noqa: PLC0415

    if not 0 < args.rho <= 1 or not 0 < args.realistic:
        raise UsageError("--rho must be in (0, 1] and --realistic > 0")
    check_out(args)
    since = parse_since(args.since)
    weeks = max((dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(since)).total_seconds() / (7 * 86400), 1 / 7)
    gpus, nightly = {}, []
    try:
        from ci_register.registered.catalog import load_catalog  # noqa: PLC0415

        catalog = load_catalog(Path(args.root) / "suites" / "catalog.toml")
        gpus = {n: s.hardware.gpu_count or 1 for n, s in catalog.suites.items()}
        nightly = [n for n, s in catalog.suites.items() if s.nightly]
    except (ImportError, ValueError):
        pass  # no catalog here: GPU counts from the fingerprint, rates from the runs
    with open_history_arg(args.history) as h:
        rows = h.report_reads.trim_rows(args.suite, since)
    if not rows["runs"]:
        raise UsageError(f"no trusted complete run{' of suite ' + repr(args.suite) if args.suite else ''} "
                          f"since {since[:19]}; widen --since")
    rep = analyse(build_input(rows, gpus=gpus, nightly=nightly, weeks=weeks),
                  rho_min=args.rho, realistic=args.realistic, min_runs=args.min_runs)
    text = json.dumps(rep.to_json(), indent=1) + "\n" if args.format == "json" else render(rep, args.format)
    emit(text, args.out)
    return 0
