"""`gate-report`: reports over the metric history, and the history's chores.

    gate-report [report] [--suite S] [--run ID | --since 30d] [--format text|md|json|html]
                         [--out FILE] [--history PATH]
    gate-report health   [--suite S] [--format text|md|json]
    gate-report trim     [--suite S] [--since 30d] [--format text|md|json]
    gate-report merge    SHARD.db ... --into history.db
    gate-report ingest   RUN.db ... [--into postgresql://...]   (default $GATES_HISTORY)
    gate-report check    [--history PATH]
    gate-report untrust  (--run ID ... | --commit SHA) --reason "..."
    gate-report trust    (--run ID ... | --commit SHA) --reason "..."
    gate-report compare  A B [--suite S] [--format text|md|json]
    gate-report notify   [--pr-comment] [--webhook] [--run ID]
    gate-report bisect   KEY --good C1 --bad C2 [--suite S] [--repo PATH]
    gate-report accept   KEY-or-glob --from COMMIT --reason "..." [--suite S] [--test GLOB]
    gate-report snapshot --suite S [--fingerprint FP] --out snap.db
    gate-report prune    (--keep 90d | --keep-runs N) [--apply]

A thin skin: each command parses its arguments and calls the library
(`gates.report.query`, `gates.report.build`, `gates.render_*`, `gates.report.health`, `gates.report.trim`,
`gates.store.history`); accept, compare, notify and bisect live in `gates.commands.after`.
Exit codes: 0 nothing regressed in what is reported, 1 a
gate failed in it, 2 usage or input errors (one line, ``error: ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ci_register.planning.history_value import history_problem
from ci_register.running.redact import guarded_output, mask_secrets, raw_stream
from gates.commands import after, fleet
from gates.commands.common import (
    LOCAL_HISTORY,
    Parser,
    UsageError,
    add_history,
    add_out,
    check_out,
    count,
    default_history,
    emit,
    now,
    open_history_arg,
    report_anchor,
)

__all__ = ["COMMANDS", "FORMATS", "build_parser", "main"]

FORMATS = ("text", "md", "json", "html")
_DEFAULT_COMMAND = "report"


# ------------------------------------------------------------------ commands


def _health_for(history, suites: dict[str, str | None], root: Path, window: int) -> list:
    from gates.report.health import analyse  # noqa: PLC0415
    from gates.report.query import load_health_input, load_registrations  # noqa: PLC0415

    out = []
    for suite, until in sorted(suites.items()):  # until: newest reported start, or None
        regs = load_registrations(root, suite)
        out.append(analyse(load_health_input(history, suite, window=window,
                                             registrations=regs, until=until)))
    return out


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


def _report(args: argparse.Namespace) -> int:
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
        after.assign_owners(history, report, Path(args.root))
        if not args.no_health:
            until: dict[str, str] = {}
            for r in runs:
                until[r["suite"]] = max(until.get(r["suite"], ""), r["started_at"])
            report.health = _health_for(history, until, Path(args.root), args.window)
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


def _health(args: argparse.Namespace) -> int:
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
        health = _health_for(history, until, Path(args.root), args.window)
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


def _trim(args: argparse.Namespace) -> int:
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


def _merge(args: argparse.Namespace) -> int:
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


def _check(args: argparse.Namespace) -> int:
    from gates.store.backend import history_location  # noqa: PLC0415
    from gates.store.merge import check_history  # noqa: PLC0415

    target = history_location(args.history or default_history())
    if isinstance(target, Path) and not target.exists():
        raise UsageError(f"{target}: no such history; pass --history PATH")
    problems = check_history(target)
    for line in problems:
        print(f"error: {line}")
    if problems:
        print(f"{len(problems)} problem(s); reports and gates cannot read these rows: restore "
              "the file from a backup or CI artifact (merge refuses such rows in shards)")
        return 2
    print(f"{target}: every row is sound")
    return 0


def _trust(trusted: bool) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:

        if not args.run and not args.commit:
            raise UsageError("give --run ID (repeatable) or --commit SHA")
        with open_history_arg(args.history, write=True) as history:
            changed = history.set_trust(args.run, commit=args.commit, trusted=trusted,
                                        reason=args.reason)
        verb = "trusted" if trusted else "untrusted"
        print(f"{verb} {len(changed)} run(s): {', '.join(changed)}")
        return 0

    return command


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "report": _report,
    "health": _health,
    "merge": _merge,
    "ingest": _merge,
    "trim": _trim,
    "check": _check,
    "trust": _trust(True),
    "untrust": _trust(False),
    **after.COMMANDS,
    **fleet.COMMANDS,
}


# -------------------------------------------------------------------- parser

_EXAMPLES = """examples (each runs on this repository's committed history.db):
  gate-report                                   latest run: every suite shard of the newest commit
  gate-report --suite base-b-1gpu --since 2026-11-01 --format md > summary.md    or --since 30d
  gate-report --run 2b5001d66847 --format json  a run id, or a unique prefix of >= 6 chars
  gate-report --suite base-b-1gpu --format html --out report.html
  gate-report health --suite base-b-1gpu
  gate-report merge shard-*.db --into history.db    the shard histories CI uploaded
  gate-report check                             rows reports and gates cannot read
  gate-report untrust --commit 1467c42 --reason "broken runner gpu-17"
  gate-report compare 5ddb66a 53ac0d3 --format md    commits, branches, run ids or fingerprints
  gate-report accept 'attn/decode/fa2/*' --from 53ac0d3 --reason "new kernel, #1234"
  gate-report snapshot --suite base-b-1gpu --out snap.db    what a shard gates against
  gate-report prune --keep 90d                  what would go; --apply deletes and compacts

exit codes: the worst exit code of the reported sessions, as their runners exited
(0 passed; 1 a test or an enforced gate failed, or a run did not finish; 128+N a run
interrupted by signal N), or 2: a usage or input error, or a reported run that was
refused as bad input. With GITHUB_ACTIONS=true the Markdown also goes to
$GITHUB_STEP_SUMMARY and failing gates become ::error annotations (at most 10)."""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="gate-report",
                description="Reports over the metric history: what changed, how sure we are, "
                            "and where CI time goes. Without a command, runs `report`.",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog=_EXAMPLES)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    rep = sub.add_parser(
        "report", help="report a run or a range of runs (the default command)",
        description="Report one run (default: the latest, with its other shards) or every "
                    "run in a time range: runs, verdicts (failing first) with baseline, "
                    "change and confidence interval, statistic, p/q value and floor, where "
                    "each metric changed, trends, and CI health.")
    add_history(rep)
    rep.add_argument("--suite", help="only runs of this suite")
    rep.add_argument("--run", metavar="ID", help="this run (id or a unique prefix, >= 6 chars)")
    rep.add_argument("--since", metavar="SPAN",
                     help="every run since: 30d, 12h, 2w, 90m or an ISO date (2026-11-01)")
    rep.add_argument("--format", choices=FORMATS, default="text",
                     help="text (terminal), md (GitHub Markdown), json, html (self-contained "
                          "page)")
    add_out(rep)
    rep.add_argument("--all", action="store_true",
                     help="in a range, list every passing verdict, not only the newest")
    rep.add_argument("--points", type=count(2), default=30, metavar="N",
                     help="trend length in runs (default 30)")
    rep.add_argument("--limit", type=count(1), default=200, metavar="N",
                     help="at most this many runs in a range (default 200)")
    rep.add_argument("--no-health", action="store_true", help="leave out the CI health sections")
    rep.add_argument("--window", type=count(1), default=20, metavar="N",
                     help="runs the CI health sections look back over (default 20)")
    rep.add_argument("--root", default=".", metavar="PATH",
                     help="repository root, for registrations and annotation lines (default .)")

    hl = sub.add_parser(
        "health", help="CI health only: stale est_time, flaky, skipped, never-run, slow files",
        description="CI health of one suite from history: est_time stale against the p90 of "
                    "recent passing runs (with a suggested value), flaky tests, tests always "
                    "skipped, registered files that never ran, the slowest files and what "
                    "fresh estimates would save the slowest shard.")
    add_history(hl)
    hl.add_argument("--suite", help="suite (default: the suite of the newest run)")
    hl.add_argument("--format", choices=("text", "md", "json"), default="text",
                    help="output format (default text)")
    add_out(hl)
    hl.add_argument("--window", type=count(1), default=20, metavar="N",
                    help="runs to look back over (default 20)")
    hl.add_argument("--root", default=".", metavar="PATH",
                    help="repository root with suites/catalog.toml (default .)")

    tr = sub.add_parser(
        "trim", help="suggest metrics and tests history shows are redundant (never edits)",
        description="From history: metrics that move together (Spearman |rho| >= 0.98), "
                    "metrics too noisy to detect a realistic change that never failed, and "
                    "variants/tests whose every metric is covered by a cheaper one, each with "
                    "the GPU-minutes per week it would save and the detection lost.")
    add_history(tr)
    tr.add_argument("--suite", help="only this suite")
    tr.add_argument("--since", metavar="SPAN", default="30d",
                    help="runs since: 30d (default), 12h, 2w or an ISO date; per-commit suites' "
                         "runs per week are counted over this window")
    tr.add_argument("--format", choices=("text", "md", "json"), default="text", help="output format (default text)")
    add_out(tr)
    tr.add_argument("--rho", type=float, default=0.98, help="twin threshold on |Spearman rho| (default 0.98)")
    tr.add_argument("--realistic", type=float, default=0.20,
                    help="relative shift a metric must be able to detect to stay (default 0.20)")
    tr.add_argument("--min-runs", type=count(4), default=8, metavar="N",
                    help="runs a metric needs before it is judged (default 8)")
    tr.add_argument("--root", default=".", metavar="PATH",
                    help="repository root with suites/catalog.toml, for GPU counts and schedules")

    mg = sub.add_parser(
        "merge", help="fold shard history files into one history (idempotent)",
        description="Fold the history files written by parallel CI shards into one history. "
                    "Merging a file twice changes nothing; a run id present with different "
                    "content is an error and nothing is written.")
    mg.add_argument("shards", nargs="+", metavar="SHARD.db", help="shard history files")
    mg.add_argument("--into", required=True, metavar="PATH",
                    help="target history: a file or a postgresql:// URL (created if missing)")
    ig = sub.add_parser(
        "ingest", help="load per-run history files into the fleet's history (idempotent)",
        description="What a host without a route to the fleet's PostgreSQL history uploads: "
                    "its run's history file, loaded here by run id with merge's checks. "
                    "Loading a file twice changes nothing.")
    ig.add_argument("shards", nargs="+", metavar="RUN.db", help="per-run history files")
    ig.add_argument("--into", default=None, metavar="URL",
                    help="target history (default: $GATES_HISTORY)")

    ck = sub.add_parser(
        "check", help="list rows reports and gates cannot read (what merge refuses)",
        description="Check every run of a history with the rules merge applies to a shard: "
                    "types, ranges, medians against samples, units and keys, runs dated in "
                    "the future, rows of no run. Exit 2 when anything is wrong.")
    add_history(ck)

    for name, trusted in (("untrust", False), ("trust", True)):
        what = "trusted again" if trusted else "untrusted (never a baseline, never deleted)"
        tp = sub.add_parser(
            name, help=f"mark runs {'trusted again' if trusted else 'untrusted'}",
            description=f"Mark runs {what}, by run id or commit, with a reason kept in the "
                        "trust log.")
        add_history(tp)
        tp.add_argument("--run", action="append", default=[], metavar="ID",
                        help="run id (repeatable)")
        tp.add_argument("--commit", metavar="SHA",
                        help="every run of this commit (full sha or >= 7 characters)")
        if trusted:
            tp.add_argument("--reason", default="trusted again (gate-report trust)",
                            help="why (kept in the trust log; default: a plain note)")
        else:
            tp.add_argument("--reason", required=True,
                            help='why, e.g. "broken runner gpu-17" (kept in the trust log)')
    after.add_parsers(sub)
    fleet.add_parsers(sub)
    return p


def _with_default_command(argv: Sequence[str]) -> list[str]:
    argv = list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        return [_DEFAULT_COMMAND, *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Every line this command prints (reports, errors, --help) has its credentials
    # masked and cannot be a GitHub workflow command; annotations are the one exception
    # (`_github` writes them under the guard).
    with guarded_output():
        return _main(argv)


# The library's bad-input errors (exit 2, one line). Looked up among the modules this
# command loaded, never imported for it: an error whose module never loaded cannot have
# been raised, and importing them all cost `--help` 0.5 s (numpy, scipy, sqlite-utils).
_INPUT_ERRORS = (("gates.report.compare", "CompareInputError"), ("gates.store.history", "HistoryError"),
                 ("gates.report.query", "ReportInputError"))


def _input_errors() -> tuple[type[BaseException], ...]:
    return tuple(getattr(sys.modules[mod], name) for mod, name in _INPUT_ERRORS
                 if mod in sys.modules)


# Options that pick what a command reads or changes. Given empty (`--run "$RUN_ID"` with
# the variable unset) argparse stored "" and the command fell back to its default: the
# latest run, every suite. A CI summary or PR comment then showed another run's verdict.
_SELECTORS = ("--run", "--suite", "--since", "--commit", "--from", "--fingerprint", "--test",
              "--good", "--bad", "--keep")


def _blank_selector(argv: Sequence[str]) -> str | None:
    """One line for a selector option given a blank value, else None."""
    for i, tok in enumerate(argv):
        if tok == "--":
            return None
        name, eq, value = tok.partition("=")
        if name not in _SELECTORS:
            continue
        if not eq:
            if i + 1 >= len(argv):
                continue  # argparse says "expected one argument"
            value = argv[i + 1]
        if not value.strip():
            return (f"{name} {value!r}: empty (an unset variable?); give a value, or leave "
                    f"{name} out for the default")
    return None


def _undecodable_argument(argv: Sequence[str], text: str) -> str | None:
    """One line for an argument holding bytes that are not UTF-8 (Python keeps them as
    lone surrogates; a file name may hold them, a stored or matched text cannot), else
    None: the one whose value is in `text`, what failed to encode. Without it, `--reason`
    or `--suite` given such a byte read as a broken history row, and `gate-report check`
    then found every row sound."""
    for i, tok in enumerate(argv):
        name, eq, value = tok.partition("=")
        value = value if eq and name.startswith("--") else tok
        bad = [c for c in value if "\udc80" <= c <= "\udcff"]
        if not bad or value not in text:
            continue
        shown = f"{name} {value!r}" if eq and name.startswith("--") else (
            f"{argv[i - 1]} {tok!r}" if i and argv[i - 1].startswith("--") else repr(tok))
        return (f"{shown}: not UTF-8 text (byte 0x{ord(bad[0]) - 0xDC00:02x}); give it as "
                "UTF-8 (check the terminal's or the script's encoding)")
    return None


def _main(argv: Sequence[str]) -> int:
    parser = build_parser()
    try:
        if problem := _blank_selector(argv):
            raise UsageError(problem)
        args = parser.parse_args(_with_default_command(argv))
        if getattr(args, "history", "") is None:
            args.history = default_history()
            if args.history == str(LOCAL_HISTORY):  # say so: the committed history is another file
                print(f"note: reading {LOCAL_HISTORY} (this checkout's runs outside CI); "
                      "--history history.db reads the committed history", file=sys.stderr)
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:  # a write is one transaction: nothing is half-done
        print("interrupted; nothing half-written (each write is one transaction)",
              file=sys.stderr)
        return 130
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `gate-report | head`: the reader left; not our error
        sys.stderr.close()
        return 0
    except Exception as exc:
        if isinstance(exc, _input_errors()):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if isinstance(exc, UnicodeEncodeError) and \
                (problem := _undecodable_argument(argv, exc.object)):
            print(f"error: {problem}", file=sys.stderr)
            return 2
        # A row no writer of ours makes (RecursionError: JSON nested past the decoder's depth).
        if isinstance(exc, (TypeError, ValueError, ArithmeticError, RecursionError)):
            print(f"error: the history holds a row this report cannot read ({type(exc).__name__}: "
                  f"{exc}); `gate-report check` names the runs", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
