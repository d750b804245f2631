"""Audit a catalog's ``[select]`` declarations against what a tree's code loads.

For one commit of a git repository (a bare mirror is enough), the tree is exported and
scanned; the report lists every file that imports or loads a file by a computed name
(an *open* file: ``import_module(x)``, ``spec_from_file_location(name, path)``, ...) with
the line and whether ``[select.dynamic]`` declares it, then, for each path given with
``--probe``, what a one-file change to it selects (registered files kept and share of
registered est_time). A declaration is right when every file its computed load can reach
is in its globs or named by a string edge; a probe of such a file then keeps the tests
that load it.

    python benchmarks/audit_declarations.py --repo /work/.mirror/radixark+miles/repo \
        --catalog benchmarks/catalogs/miles.toml --probe tests/manual/compact_split_generate.py ...
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_selection import export, registrations  # noqa: E402

from ci_register.planning.imports import scan  # noqa: E402
from ci_register.planning.select import parse_select, select_tests  # noqa: E402
from ci_register.registered.catalog import load_catalog  # noqa: E402


def audit(tree: Path, catalog_path: Path, probes: list[str]) -> list[str]:
    catalog = load_catalog(catalog_path)
    config = parse_select(catalog.select, str(catalog_path), suites=catalog.suites)
    regs, _ = registrations(tree, catalog)
    tests = sorted({p for _, p, _ in regs})
    est: dict[str, float] = {}
    for _, p, e in regs:
        est[p] = est.get(p, 0.0) + e
    total = sum(est.values()) or 1.0
    cache: dict = {}  # parsed files, shared by the scans (selection closes a graph's declared nodes)
    graph = scan(tree, config.package_roots, cache=cache)
    declared = dict(config.dynamic)
    lines = ["| open file | line | declared |", "| --- | ---: | --- |"]
    for path, node in sorted(graph.files.items()):
        if node.open_import:
            lines.append(f"| {path} | {node.open_import} | "
                         f"{declared[path] if path in declared else 'no (any Python change reaches its tests)'} |")
    lines += ["", "| changed file | files kept | share of est_time | why (first) |", "| --- | ---: | ---: | --- |"]
    for probe in probes:
        sel = select_tests(scan(tree, config.package_roots, cache=cache), tests, [probe], config)
        kept = total if sel.everything else sum(est[p] for p in sel.files)
        why = sel.everything or (next(iter(sorted(sel.files.values())), "") if sel.files else "nothing")
        lines.append(f"| {probe} | {len(sel.files)} | {kept / total:.1%} | {why[:140].replace('|', '/')} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="a git repository (a bare mirror is enough)")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--catalog", type=Path, required=True)
    ap.add_argument("--probe", nargs="*", default=[], help="paths whose one-file change is selected")
    a = ap.parse_args(argv)
    sha = subprocess.run(["git", "--git-dir", str(a.repo), "rev-parse", a.commit], capture_output=True, text=True,
                         check=False)
    if sha.returncode != 0:
        print(f"error: --repo {a.repo} --commit {a.commit}: {sha.stderr.strip()[:200]}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        export(a.repo, sha.stdout.strip(), tree)
        lines = audit(tree, a.catalog, a.probe)
    print(f"{a.repo} at {sha.stdout.strip()[:10]}, catalog {a.catalog}\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
