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

A thin skin that only dispatches: each subcommand is a module of `gates.commands`
(`report`, `health`, `trim`, `merge`, `ingest`, `check`, `untrust`, `trust`, `compare`,
`notify`, `bisect`, `accept`, `snapshot`, `prune`) with its own arguments
(`add_parser`) and `run(args)`, which calls one library.
Exit codes: 0 nothing regressed in what is reported, 1 a
gate failed in it, 2 usage or input errors (one line, ``error: ...``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ci_register.running.redact import guarded_output
from gates.commands import (
    accept,
    bisect,
    check,
    compare,
    health,
    ingest,
    merge,
    notify,
    prune,
    report,
    snapshot,
    trim,
    trust,
    untrust,
)
from gates.commands.common import FORMATS, LOCAL_HISTORY, Parser, UsageError, default_history

__all__ = ["COMMANDS", "FORMATS", "MODULES", "build_parser", "main"]

_DEFAULT_COMMAND = "report"


# One module per subcommand, in `gate-report --help`'s order: each has NAME,
# add_parser(sub) and run(args).
MODULES = (report, health, trim, merge, ingest, check, untrust, trust, compare, notify,
           bisect, accept, snapshot, prune)
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {m.NAME: m.run for m in MODULES}


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
    for module in MODULES:
        module.add_parser(sub)
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
