"""`gate-report report` (the default command): a run or a range of runs, on every surface.

Library: ``gates.report.query`` selects and loads, ``gates.report.build`` builds the
report, ``gates.report.render_*`` render it; in GitHub Actions the Markdown also goes to
the step summary and failing gates become annotations (``gates.report.ghactions``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ci_register.running.redact import mask_secrets, raw_stream
from gates.commands.common import (
    FORMATS,
    UsageError,
    add_history,
    add_out,
    assign_owners,
    check_out,
    count,
    emit,
    health_for,
    now,
    open_history_arg,
    report_anchor,
)

__all__ = ["NAME", "add_parser", "run"]

NAME = "report"


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``gate-report report`` to ``sub`` (``gates.commands.cli``)."""
    p = sub.add_parser(
        "report", help="report a run or a range of runs (the default command)",
        description="Report one run (default: the latest, with its other shards) or every "
                    "run in a time range: runs, verdicts (failing first) with baseline, "
                    "change and confidence interval, statistic, p/q value and floor, where "
                    "each metric changed, trends, and CI health.")
    add_history(p)
    p.add_argument("--suite", help="only runs of this suite")
    p.add_argument("--run", metavar="ID", help="this run (id or a unique prefix, >= 6 chars)")
    p.add_argument("--since", metavar="SPAN",
                   help="every run since: 30d, 12h, 2w, 90m or an ISO date (2026-11-01)")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text (terminal), md (GitHub Markdown), json, html (self-contained "
                        "page)")
    add_out(p)
    p.add_argument("--all", action="store_true",
                   help="in a range, list every passing verdict, not only the newest")
    p.add_argument("--points", type=count(2), default=30, metavar="N",
                   help="trend length in runs (default 30)")
    p.add_argument("--limit", type=count(1), default=200, metavar="N",
                   help="at most this many runs in a range (default 200)")
    p.add_argument("--no-health", action="store_true", help="leave out the CI health sections")
    p.add_argument("--window", type=count(1), default=20, metavar="N",
                   help="runs the CI health sections look back over (default 20)")
    p.add_argument("--root", default=".", metavar="PATH",
                   help="repository root, for registrations and annotation lines (default .)")
    return p


def _render(report, fmt: str) -> str:
    if fmt == "json":
        from gates.report.build import report_to_json  # noqa: PLC0415

        # Compact: json's C encoder only runs without indent (a 10,000-metric report
        # holds a million trend values); pretty-print with `| python -m json.tool`.
        return json.dumps(report_to_json(report), separators=(",", ":")) + "\n"
    if fmt == "md":
        from gates.report.render_md import render_md  # noqa: PLC0415

        return render_md(report)
    if fmt == "html":
        from gates.report.render_html import render_html  # noqa: PLC0415

        return render_html(report)
    from gates.report.render_text import render_text  # noqa: PLC0415

    return render_text(report)


def run(args: argparse.Namespace) -> int:
    from gates.report.build import build_report  # noqa: PLC0415
    from gates.report.query import load_report_input, parse_since, select_runs  # noqa: PLC0415

    if args.run and args.since:
        raise UsageError("--run and --since exclude each other; give one")
    since = parse_since(args.since) if args.since else None
    check_out(args)
    with open_history_arg(args.history) as history:
        anchor = report_anchor(Path(args.root))
        # In CI, "the latest run" is this CI run's or its commit's, never another's.
        runs, scope = select_runs(history, run=args.run, suite=args.suite, since=since,
                                  limit=args.limit, anchor=anchor,
                                  fall_back=not anchor["ci_url"])
        data = load_report_input(history, runs, scope=scope, since=since,
                                 trend_points=args.points, generated_at=now())
        report = build_report(data, all_rows=args.all)
        assign_owners(history, report, Path(args.root))
        if not args.no_health:
            until: dict[str, str] = {}
            for r in runs:
                until[r["suite"]] = max(until.get(r["suite"], ""), r["started_at"])
            report.health = health_for(history, until, Path(args.root), args.window)
    text = _render(report, args.format)
    from gates.report import ghactions  # noqa: PLC0415

    if not ghactions.on_github():
        emit(text, args.out)
        return report.exit_code
    # `gate-report --format md >> "$GITHUB_STEP_SUMMARY"` already writes the summary:
    # cut that output to the cap and do not append a second copy.
    room = ghactions.summary_room() if args.out is None else None
    if room is not None and args.format == "md":
        text = ghactions.fit_summary(text, room)
    emit(text, args.out)
    _github(report, Path(args.root), append=room is None)
    return report.exit_code


def _github(report, root: Path, *, append: bool) -> None:
    from gates.report import ghactions  # noqa: PLC0415
    from gates.report.render_md import render_md  # noqa: PLC0415

    note = (ghactions.append_step_summary(render_md(report)) if append
            else "stdout is the step summary; not appended twice")
    commands = raw_stream(sys.stderr)  # on purpose: past the guard (escaped by ghactions)
    for line in ghactions.annotations(report, lambda n: ghactions.locate_test(n, root)):
        print(mask_secrets(line), file=commands)  # the runner reads commands on stderr too
    print(f"gate-report: {note}", file=sys.stderr)
