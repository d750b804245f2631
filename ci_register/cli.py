"""Command line of ci_register: a thin skin over the library.

    python -m ci_register list [--root PATH] [--catalog FILE] [--suite NAME] [--json]
    python -m ci_register run SUITE [--partition I/N] [--dry-run] [pytest args...]
    python -m ci_register plan [SUITE...] [--event E] [--history PATH]
    python -m ci_register matrix [--event pull_request|push|schedule] [--output FILE]
        [--changed-files FILE... | --base REF]   (only what the change can affect)
    python -m ci_register rerun SPEC [--suite NAME] [--run] [pytest args...]
    python -m ci_register est-time --check|--write [--suite NAME]
    python -m ci_register sglang-catalog /path/to/sglang --out ci/catalog.toml
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ci_register.registered.catalog import DEFAULT_CATALOG, CatalogError, load_catalog
from ci_register.registered.collect import collect
from ci_register.running.redact import guarded_output

if TYPE_CHECKING:
    from ci_register.planning.durations import DurationsReader

__all__ = ["main", "COMMANDS"]


def catalog_path(root: Path, catalog: str | None) -> Path:
    """--catalog: relative to --root (an adopter keeps it anywhere in their tree); a path
    that exists only relative to the current directory is taken from there."""
    if not catalog:
        return root / DEFAULT_CATALOG
    path = Path(catalog)
    if path.is_absolute() or (root / path).exists() or not path.exists():
        return path if path.is_absolute() else root / path
    return path


def _notes(col) -> None:
    for note in col.notes:
        print(f"note: {note}", file=sys.stderr)


def _list(args: argparse.Namespace) -> int:
    root = Path(args.root)
    try:
        catalog = load_catalog(catalog_path(root, args.catalog))
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.suite and args.suite not in catalog.suites:
        print(f"error: unknown suite {args.suite!r}; {catalog.session_suggest(args.suite)}", file=sys.stderr)
        return 2
    col = collect(catalog, root=Path(args.tests) if args.tests else None, base=root)
    regs = [r for r in col.registrations if not args.suite or r.suite == args.suite]
    if args.json:
        print(json.dumps({
            "suites": {
                name: {
                    "backend": s.backend, "description": s.description, "schedule": s.schedule,
                    "hardware": s.hardware.describe(), "runner_labels": list(s.runner_labels),
                    "shard_budget_s": s.shard_budget_s,
                    "files": [r.to_json() for r in regs if r.suite == name],
                }
                for name, s in catalog.suites.items() if not args.suite or name == args.suite
            },
            # As the text listing's "(no session ...)" block: suite="" or an undeclared
            # suite of an unchecked backend. Leaving them out hid them from tools.
            "no_session": [r.to_json() for r in sorted(
                (r for r in regs if not r.suite), key=lambda r: (r.backend, r.declared, r.path))]
                if not args.suite else [],
            "gates": [g.to_json() for g in col.gates],
            "errors": [str(i) for i in col.issues],
        }, indent=1))
    else:
        for name, s in sorted(catalog.suites.items()):
            if args.suite and name != args.suite:
                continue
            mine = sorted((r for r in regs if r.suite == name), key=lambda r: r.path)
            total = sum(r.est_time for r in mine if not r.disabled)
            print(f"{name} [{s.backend}, {s.hardware.describe()}, {s.schedule}]: {len(mine)} files, est {total:g} s")
            for r in mine:
                flags = (" nightly" if r.nightly else "") + (f" DISABLED: {r.disabled}" if r.disabled else "")
                print(f"  {r.path}:{r.line}  est_time {r.est_time:g} s{flags}")
        for g in col.gates:
            print(f"gate {g.metric_key}  ({g.path}:{g.line}) {g.options}")
        unassigned = sorted((r for r in regs if not r.suite), key=lambda r: (r.backend, r.declared, r.path))
        if unassigned and not args.suite:
            print(f"(no session: suite=\"\" or an undeclared suite of an unchecked backend): {len(unassigned)} files")
            for r in unassigned:
                flags = (" nightly" if r.nightly else "") + (f" DISABLED: {r.disabled}" if r.disabled else "")
                print(f"  {r.backend} {r.declared or '(none)'}: {r.path}:{r.line}  est_time {r.est_time:g} s{flags}")
    _notes(col)
    for issue in col.issues:
        print(f"error: {issue}", file=sys.stderr)
    return 2 if col.issues else 0


def _run(args: argparse.Namespace) -> int:
    from ci_register.running.runner import main_run  # noqa: PLC0415 - keeps `list` light

    return main_run(args.suite, args.rest)


def _load(args: argparse.Namespace):
    """(catalog, collection) for the planning commands, or an exit code."""
    root = Path(args.root)
    try:
        catalog = load_catalog(catalog_path(root, args.catalog))
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    col = collect(catalog, base=root)
    _notes(col)
    if col.issues:
        for issue in col.issues:
            print(f"error: {issue}", file=sys.stderr)
        print(f"error: {len(col.issues)} registration problem(s); fix them first", file=sys.stderr)
        return 2
    return catalog, col


def _fingerprint(value: str | None) -> str | None:
    from ci_register.planning.durations import LATEST  # noqa: PLC0415

    return {None: LATEST, "latest": LATEST, "this": None}.get(value, value)


def default_event(env: dict[str, str] | os._Environ[str], *, changed: bool) -> str | None:
    """The matrix's event when --event is not given: GitHub Actions' own
    (``GITHUB_EVENT_NAME``), else ``pull_request`` where a change is named (the files
    of a diff are a pull request's question), else None (the caller must say)."""
    return env.get("GITHUB_EVENT_NAME") or ("pull_request" if changed else None)


def _matrix(args: argparse.Namespace, *, as_text: bool = False) -> int:
    from ci_register.planning.matrix import (  # noqa: PLC0415
        MatrixError,
        build,
        chunk,
        is_matrix,
        summary,
        write_output,
    )
    from ci_register.planning.outfile import OutputError, check_output  # noqa: PLC0415
    from ci_register.planning.select import SelectError  # noqa: PLC0415

    if getattr(args, "output", None) == "-":
        args.output = None  # stdout, as in every Unix tool (it wrote a file named "-")
    if getattr(args, "output", None):
        root = Path(args.root)
        from ci_register.planning.durations import history_path  # noqa: PLC0415

        inputs = [Path(args.catalog) if args.catalog else root / DEFAULT_CATALOG,
                  history_path(args.history, root)]
        try:
            check_output(Path(args.output), inputs=inputs, option="--output", ours=is_matrix,
                         force=args.force)
        except OutputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.event is None:
        args.event = default_event(os.environ, changed=bool(args.changed_files or args.base))
        if args.event is None:
            print("error: the matrix needs --event pull_request|push|schedule (or "
                  "--changed-files/--base: a pull request's change)", file=sys.stderr)
            return 2
    loaded = _load(args)
    if isinstance(loaded, int):
        return loaded
    catalog, col = loaded
    labels = [x for x in args.labels.split(",") if x] if args.labels is not None else None
    try:
        selection = _selection(args, catalog, col)
        matrix, plans = build(catalog, col, args.event, args.history, only=args.suites, root=Path(args.root),
                              fingerprint=_fingerprint(args.fingerprint), labels=labels, selection=selection,
                              read_durations=getattr(args, "read_durations", None))
        if not plans and (selection is None or selection.everything):
            # An empty matrix would pass CI having run nothing.
            raise MatrixError(f"no registered file runs for --event {args.event}"
                              + (f" with --labels {args.labels}" if labels is not None else "")
                              + "; check the suites' registrations and schedules")
        if not as_text:
            matrix = chunk(matrix, args.chunk)
    except (MatrixError, SelectError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if as_text:
        print("\n".join(sp.text() for sp in plans) or f"no suite runs for --event {args.event}: the change affects no registered file")
        return 0
    try:
        write_output(matrix, Path(args.output) if args.output else None)
    except OutputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(plans) or f"no suite runs for --event {args.event}", file=sys.stderr)
    if selection is not None:
        print(selection.summary(), file=sys.stderr)
    return 0


def _selection(args: argparse.Namespace, catalog, col):
    """The change's selection for --changed-files / --base, or None (run everything)."""
    from ci_register.planning.select import SelectError, changed_since, select_in_tree  # noqa: PLC0415

    if args.changed_files is None and args.base is None:
        return None
    if args.changed_files is not None and args.base is not None:
        raise SelectError("pass --changed-files or --base, not both")
    root = Path(args.root)
    changed = args.changed_files if args.changed_files is not None else changed_since(args.base, root)
    suites: dict[str, set[str]] = {}
    for r in col.registrations:
        suites.setdefault(r.suite, set()).add(r.path)
    return select_in_tree(root, catalog, [r.path for r in col.registrations], changed, args.history,
                          suites=suites, base=args.base)


def _rerun(args: argparse.Namespace, rest: list[str]) -> int:
    from ci_register.running.rerun import main_rerun  # noqa: PLC0415

    root = Path(args.root)
    return main_rerun(args.spec, root, catalog_path(root, args.catalog),
                      suite=args.suite, history=args.history, run=args.run, via_nox=not args.no_nox, extra=rest)


def _est_time(args: argparse.Namespace) -> int:
    from ci_register.planning.durations import history_path  # noqa: PLC0415
    from ci_register.planning.est_time import EstTimeError, find_drifts, write_drifts  # noqa: PLC0415

    if args.check == args.write:
        print("error: pass exactly one of --check or --write", file=sys.stderr)
        return 2
    loaded = _load(args)
    if isinstance(loaded, int):
        return loaded
    catalog, col = loaded
    unknown = [s for s in args.suites if s not in catalog.suites]
    if unknown:
        print(f"error: unknown suite {unknown[0]!r}; {catalog.session_suggest(unknown[0])}", file=sys.stderr)
        return 2
    # The history is this command's input (planners fall back to est_time without one).
    path = history_path(args.history, Path(args.root))
    if not path.exists():
        print(f"error: {path}: no such history; pass --history PATH or set GATES_HISTORY, or run a suite to record durations", file=sys.stderr)
        return 2
    drifts, problems, measured = find_drifts(catalog, col, args.history, suites=args.suites, fingerprint=_fingerprint(args.fingerprint), root=Path(args.root))
    if problems:
        print(f"error: {problems[0]}", file=sys.stderr)
        return 2
    if args.check:
        for d in drifts:
            print(d)
        if drifts:
            print(f"{len(drifts)} est_time literal(s) off by more than 30 s and 30%; `python -m ci_register est-time --write` updates them")
        else:
            print(f"{measured} measured registration(s), each within 30 s or 30% of its figure" if measured
                  else "no registration has 3 or more measured runs yet; nothing to compare")
        return 1 if drifts else 0
    try:
        for line in write_drifts(drifts, Path(args.root)):
            print(f"updated {line}")
    except (EstTimeError, SyntaxError, OSError, UnicodeDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not drifts:
        print("nothing to update")
    return 0


COMMANDS = {
    "list": _list,
    "run": _run,
    "plan": lambda a: _matrix(a, as_text=True),
    "matrix": _matrix,
    "est-time": _est_time,
}


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default=".", help="repository root; paths are shown relative to it")
    p.add_argument("--catalog", default=None, help="catalog TOML (default ROOT/suites/catalog.toml)")
    p.add_argument("--history", default=None, help="history file for durations (default $GATES_HISTORY or ROOT/history.db)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ci_register", description="Registered CI tests: list them, run a suite.")
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="list suites and their registered files (static; nothing imported)")
    ls.add_argument("--root", default=".", help="repository root; paths are shown relative to it")
    ls.add_argument("--catalog", default=None, help="catalog TOML (default ROOT/suites/catalog.toml)")
    ls.add_argument("--tests", default=None, help="folder to search (default: the catalog's folder)")
    ls.add_argument("--suite", default=None, help="only this suite")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    run = sub.add_parser("run", help="run one suite (what `nox -s SUITE` calls)", add_help=False)
    run.add_argument("suite")
    run.add_argument("rest", nargs=argparse.REMAINDER)
    sg = sub.add_parser("sglang-catalog", add_help=False,
                        help="write a catalog of SGLang's suites from a checkout's test/run_suite.py")
    sg.add_argument("rest", nargs=argparse.REMAINDER)
    fp_help = "hardware fingerprint of the durations: latest (the suite's newest trusted run), this (this machine) or a key"
    for name, hlp in (("plan", "show each suite's budget-derived shards, files and makespan (nothing run)"),
                      ("matrix", "print the GitHub Actions matrix JSON for an event")):
        m = sub.add_parser(name, help=hlp)
        _common(m)
        if name == "plan":
            m.add_argument("suites", nargs="*", metavar="SUITE", help="only these suites (default: all the event runs)")
            m.add_argument("--event", default="schedule", help="which suites: schedule (all, default), pull_request, push")
        else:
            m.add_argument("--event", default=None, help="pull_request, push or schedule (nightly suites only for schedule); "
                           "default $GITHUB_EVENT_NAME, else pull_request with --changed-files/--base")
            m.add_argument("--suite", dest="suites", action="append", default=[], help="only this suite (repeatable)")
            m.add_argument("--output", default=None, help="write the JSON here instead of stdout (- is stdout; never over a history or an input; over another file only with --force)")
            m.add_argument("--force", action="store_true", help="let --output replace an existing file that is not a matrix")
            m.add_argument("--chunk", type=int, default=None, help="part I (1-based) of a matrix over GitHub's 256 jobs")
        m.add_argument("--fingerprint", default=None, help=fp_help)
        m.add_argument("--labels", default=None, help="comma-separated: only files without labels or with one of these (miles' PR gating)")
        m.add_argument("--changed-files", nargs="+", default=None, metavar="FILE",
                       help="run only the registered files these changed paths can affect (static import graph)")
        m.add_argument("--base", default=None, metavar="REF", help="like --changed-files, with the paths `git diff REF...HEAD` names")
    rr = sub.add_parser("rerun", help="the suite command(s) that rerun exactly the files a SPEC names")
    _common(rr)
    rr.add_argument("spec", help="path, bare file name, glob or folder under suites/, optionally ::test")
    rr.add_argument("--suite", default=None, help="pick one suite when the file is registered to several")
    rr.add_argument("--run", action="store_true", help="run the command(s), not just print them")
    rr.add_argument("--no-nox", action="store_true", help="with --run: run `python -m ci_register run` in this Python instead of the nox session")
    et = sub.add_parser("est-time", help="list (--check) or rewrite (--write) est_time literals that drifted from history")
    _common(et)
    et.add_argument("--check", action="store_true", help="list drifted literals; exit 1 if any")
    et.add_argument("--write", action="store_true", help="rewrite the drifted literals in place")
    et.add_argument("--suite", dest="suites", action="append", default=[], help="only this suite (repeatable)")
    et.add_argument("--fingerprint", default=None, help=fp_help)
    return p


def main(argv: list[str] | None = None, *, read_durations: DurationsReader | None = None) -> int:
    """``python -m ci_register``. ``read_durations``: how plan and matrix read the history's
    durations (`ci_register.planning.durations.DurationsReader`); by default one
    ``python -m gates.store.durations`` process, since ci_register never imports gates.
    ``python -m gates.commands.planner`` passes gates' reader, in process."""
    with guarded_output():  # no credential, no workflow command from a file name or an error
        return _guarded_main(argv, read_durations)


def _guarded_main(argv: list[str] | None, read_durations: DurationsReader | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv, read_durations)
    except BrokenPipeError:  # `list --json | head`: the reader left; not our error
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter flushes it at exit
        except OSError:
            pass
        return 0
    except CatalogError as exc:  # a catalog reached by another way than _load
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str], read_durations: DurationsReader | None = None) -> int:
    # `run` passes everything after the suite through; argparse must not eat -k/-x.
    if argv and argv[0] == "run" and (len(argv) < 2 or argv[1] in ("-h", "--help")):
        from ci_register.running.runner import RUN_HELP  # noqa: PLC0415

        print(RUN_HELP)
        return 0 if len(argv) >= 2 else 2
    if len(argv) >= 2 and argv[0] == "run":
        from ci_register.running.runner import main_run  # noqa: PLC0415

        return main_run(argv[1], argv[2:])
    if argv and argv[0] == "sglang-catalog":
        from ci_register.registered.sglang_catalog import main as sglang_catalog  # noqa: PLC0415

        return sglang_catalog(argv[1:])
    parser = build_parser()
    if argv and argv[0] == "rerun":
        # Unknown options after the spec go to pytest (-x, -k EXPR, ...).
        args, rest = parser.parse_known_args(argv)
        return _rerun(args, rest)
    args = parser.parse_args(argv)
    args.read_durations = read_durations
    return COMMANDS[args.command](args)
