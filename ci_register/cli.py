"""Command line of ci_register: a thin skin over the library.

    python -m ci_register list [--root PATH] [--catalog FILE] [--suite NAME] [--json]
    python -m ci_register run SUITE [--partition I/N] [--dry-run] [pytest args...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ci_register.catalog import DEFAULT_CATALOG, CatalogError, load_catalog
from ci_register.collect import collect

__all__ = ["main", "COMMANDS"]


def _list(args: argparse.Namespace) -> int:
    root = Path(args.root)
    catalog_path = Path(args.catalog) if args.catalog else root / DEFAULT_CATALOG
    try:
        catalog = load_catalog(catalog_path)
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.suite and args.suite not in catalog.suites:
        print(f"error: unknown suite {args.suite!r}; known: {catalog.known()}", file=sys.stderr)
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
    for issue in col.issues:
        print(f"error: {issue}", file=sys.stderr)
    return 2 if col.issues else 0


def _run(args: argparse.Namespace) -> int:
    from ci_register.runner import main_run  # noqa: PLC0415 - keeps `list` light

    return main_run(args.suite, args.rest)


COMMANDS = {"list": _list, "run": _run}


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
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # `run` passes everything after the suite through; argparse must not eat -k/-x.
    if len(argv) >= 2 and argv[0] == "run":
        from ci_register.runner import main_run  # noqa: PLC0415

        return main_run(argv[1], argv[2:])
    parser = build_parser()
    args = parser.parse_args(argv)
    return COMMANDS[args.command](args)
