"""What every `gate-report` command shares: the usage error, the parser class,
``--history`` and ``--out``/``--force`` arguments, opening the history, and
writing an output file without destroying anything (`ci_register.planning.outfile`).

Every subcommand module builds on it, so a rule (a missing history is a
usage error, ``--out`` never replaces the history or an input) holds for every command.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

__all__ = ["FORMATS", "LOCAL_HISTORY", "assign_owners", "existing_history", "health_for",
            "MAX_COUNT", "Parser", "UsageError", "add_history", "add_out", "check_out", "count",
           "default_history", "emit", "is_report", "now", "open_history_arg"]


class UsageError(Exception):
    """A usage or input error: `gate-report` prints it on one line and exits 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors that name the fix, exit 2."""

    _argv: list[str] = []

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN202 - argparse's
        self._argv = list(sys.argv[1:] if args is None else args)  # for error() to quote
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        # argparse reads the value of `--keep -5d` as an option; say how to pass it.
        dashed = re.fullmatch(r"argument (--[\w-]+)(?:/[^:]*)?: expected one argument", message)
        if dashed:
            option = dashed.group(1)
            after = [self._argv[i + 1] for i, word in enumerate(self._argv[:-1])
                     if word == option and self._argv[i + 1].startswith("-")]
            if after:
                message = (f"argument {option}: {after[0]!r} was read as an option; a value "
                           f"that starts with '-' is written {option}={after[0]}")
        raise UsageError(f"{message}; see {self.prog} --help")


MAX_COUNT = 1_000_000  # beyond any history; SQLite's integers stop at 2**63


def count(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum`` (a trend of 0 points or
    a look-back of -1 runs would otherwise report nothing and exit 0), at most a million."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not minimum <= value <= MAX_COUNT:
            raise argparse.ArgumentTypeError(
                f"{text!r}: give a whole number from {minimum} to {MAX_COUNT}")
        return value

    parse.__name__ = "count"  # argparse names the type in its messages
    return parse


# Where a suite run outside CI records (ci_register.running.nox_sessions.LOCAL_HISTORY):
# a laptop's run never becomes the committed history.db's baseline by accident.
LOCAL_HISTORY = Path(".gates") / "local-history.db"


def default_history() -> str:
    """The history a command reads without --history: $GATES_HISTORY; else, outside CI,
    the one this checkout's suite runs record into once a run made it (so a report after
    `nox -s cpu` shows that run, not the committed history's newest); else history.db."""
    if env := os.environ.get("GATES_HISTORY"):
        return env
    if not os.environ.get("CI") and LOCAL_HISTORY.is_file():
        return str(LOCAL_HISTORY)
    return "history.db"


def add_history(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", default=None, metavar="PATH",
                   help="history file or postgresql:// URL (default: $GATES_HISTORY; else, "
                        f"outside CI, {LOCAL_HISTORY} where a suite run made it; else ./history.db)")


def add_out(p: argparse.ArgumentParser) -> None:
    """``--out FILE`` and ``--force``; a command that has them calls :func:`check_out`."""
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout (- is stdout; never over "
                   "a history or an input; over another file only with --force)")
    p.add_argument("--force", action="store_true",
                   help="let --out replace an existing file that is not a gate-report output")


def open_history_arg(path: str | None, *, write: bool = False):
    """The history, read-only for reports; a missing file is a usage error naming the fix."""
    from gates.store.backend import history_location  # noqa: PLC0415
    from gates.store.history import HistoryError  # noqa: PLC0415
    from gates.store.open import open_for_reading, open_history  # noqa: PLC0415

    target = history_location(path or default_history())
    if isinstance(target, Path) and not target.exists():
        raise UsageError(f"{target}: no such history; pass --history PATH or set "
                         "GATES_HISTORY, or run a suite to create it")
    if write:
        return open_history(target, create=False)
    if isinstance(target, Path):
        # Reads never write: an older file is read through a migrated temporary copy.
        return open_for_reading(target)
    try:
        return open_history(target, create=False, readonly=True)
    except HistoryError as exc:
        if "schema is older" not in str(exc):
            raise
        # A database of an older schema: migrating it is what opening read-write does.
        return open_history(target, create=False)


def report_anchor(root: Path) -> dict[str, str | None]:
    """What "the latest run" means here: this CI run's (``ci_url``, set in CI), else this
    checkout's commit's (``gates.report.query.select_runs``)."""
    from gates.store.provenance import ProvenanceError, ci_from_env, git_info  # noqa: PLC0415

    try:
        ci = ci_from_env(os.environ)
    except ProvenanceError as exc:
        raise UsageError(str(exc)) from None
    return {"ci_url": ci["ci_url"], "commit": ci["commit"] or git_info(root)["commit"]}


def now() -> str:
    import datetime as dt  # noqa: PLC0415

    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# The first characters of each output `gate-report` writes: such a file is safe to replace.
_OUTPUT_STARTS = (
    "## \u2705 ", "## \u274c ", "## \u26a0\ufe0f ", "{\"title\":", "[\n {\n  \"suite\":",  # report, health
    "Trim suggestions (nothing is edited", "## Trim suggestions (nothing is edited",
    "{\n \"params\":",  # trim
    "## Compare `", "{\n \"a\":",  # compare as Markdown, JSON
    "CI health: ", "CI health of ",  # health as text
)


def is_report(head: bytes) -> bool:
    """Whether a file's first bytes are an earlier gate-report output (safe to replace)."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if text.startswith("<!doctype html>"):
        return "<title>gate-report:" in text
    first = text.split("\n", 1)[0]
    return (text.startswith(_OUTPUT_STARTS)
            or "\nRuns\n" in text  # a text report: a headline, then the runs table
            or re.match(r"compare .+ -> .+: ", first) is not None
            or re.match(r"(### )?bisect \S+: .+ test executions of ", first) is not None)


def check_out(args: argparse.Namespace) -> None:
    """Refuse an --out that would overwrite the history, an input or a foreign file.
    ``--out -`` is stdout, as in every Unix tool (it wrote a file named ``-``)."""
    if getattr(args, "out", None) == "-":
        args.out = None
    if getattr(args, "out", None) is None:
        return
    from ci_register.planning.outfile import OutputError, check_output  # noqa: PLC0415

    root = Path(getattr(args, "root", "."))
    inputs = [Path(args.history or default_history()), root / "suites" / "catalog.toml"]
    try:
        check_output(Path(args.out), inputs=inputs, ours=is_report, force=args.force)
    except OutputError as exc:
        raise UsageError(str(exc)) from None


def emit(text: str, out: str | None) -> None:
    """Write ``text`` to stdout, or to ``out`` (checked first with :func:`check_out`)."""
    if out is None:
        sys.stdout.write(text)
        return
    from ci_register.planning.outfile import OutputError, write_output  # noqa: PLC0415
    from ci_register.running.redact import clean_text  # noqa: PLC0415

    path = Path(out)
    try:
        # A file is a surface too: the console's rule (secrets masked, invisibles shown;
        # a line never a workflow command), as stdout's GuardedStream applies it.
        write_output(path, clean_text(text))
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path} ({len(text.encode())} bytes)", file=sys.stderr)


FORMATS = ("text", "md", "json", "html")  # gate-report report's --format


def health_for(history, suites: dict[str, str | None], root: Path, window: int) -> list:
    """Each suite's CI health up to its newest reported start (``gates.report.health``)."""
    from gates.report.health import analyse  # noqa: PLC0415
    from gates.report.query import load_health_input, load_registrations  # noqa: PLC0415

    out = []
    for suite, until in sorted(suites.items()):  # until: newest reported start, or None
        regs = load_registrations(root, suite)
        out.append(analyse(load_health_input(history, suite, window=window,
                                             registrations=regs, until=until)))
    return out


def assign_owners(history, report, root: Path) -> None:
    """Owners (register_ci_gate(owner=), else CODEOWNERS) and accept hints on the rows."""
    if not any(v.cls != "pass" or v.verdict == "improvement" for v in report.verdicts):
        return  # nothing to own (every row passed): no CODEOWNERS read, no matcher loaded
    from gates.record.accept import held_since  # noqa: PLC0415
    from gates.report.owners import assign, read_codeowners  # noqa: PLC0415

    declared: dict[tuple[str, str], str] = {}
    for rid in {v.run_id for v in report.verdicts if v.cls != "pass"}:
        for g in history.planning_reads.plan_gates(rid):
            owner = (g.get("options") or {}).get("owner")
            if owner:
                declared[(rid, g["metric_key"])] = owner
    started = {r.run_id: r.started_at for r in report.runs}

    def streak(v) -> tuple[int, str | None]:
        rows = history.report_reads.key_verdicts(v.suite, v.key, v.fingerprint,
                                                 until=started.get(v.run_id))
        return held_since(rows, v.verdict)

    try:
        rules = read_codeowners(root)
    except ImportError as exc:  # a host with the gate's needs only (a GPU image's Python)
        print(f"warning: CODEOWNERS not read ({exc}); pip install pathspec google-re2",
              file=sys.stderr)
        rules = []
    assign(report, declared, rules, streak)
    for v in report.verdicts:
        if v.cls == "pass":
            continue
        done = [b for b in history.report_reads.bisects(v.key) if b["suite"] in (None, v.suite)]
        if done:
            b = done[0]
            v.bisect = (f"{b['outcome']} {b['culprit'][:12]}" if b.get("culprit")
                        else b["outcome"]) + f" ({b['executions']} runs)"


def existing_history(args: argparse.Namespace) -> Path | str:
    """The history a fleet chore works on: --history, else the default; it must exist."""
    from gates.store.backend import history_location  # noqa: PLC0415

    target = history_location(args.history or default_history())
    if isinstance(target, Path) and not target.exists():
        raise UsageError(f"{target}: no such history; pass --history PATH or set "
                         "GATES_HISTORY")
    return target
