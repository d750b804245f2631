"""Our collector on miles' test tree, unchanged, against miles' own reading of it.

    python benchmarks/adopt_miles.py --mirror miles.git   # git clone --bare https://github.com/radixark/miles miles.git
    python benchmarks/adopt_miles.py --tree ../miles

miles' side runs its own code from the tree (stdlib only): ``tests.ci.ci_register``'s
``discover_ci_files`` and ``collect_tests`` (explicit registrations plus the implicit
``tests/fast/`` ones) and ``tests.ci.metric_history.register.parse_ci_gate_specs``.
Our side: ``ci_register.registered.collect`` with ``examples/miles/catalog.toml``. One row per
(backend, suite, nightly): enabled files, est_time total, disabled files, then the
registration and gate totals (with how many gates enforce) and our collection time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from ci_register.registered.catalog import load_catalog  # noqa: E402
from ci_register.registered.collect import collect  # noqa: E402

CATALOG = HERE / "examples" / "miles" / "catalog.toml"


def _cell() -> dict:
    return {"enabled": 0, "est": 0.0, "disabled": 0}


def miles_side(tree: Path) -> tuple[dict, int, int, list[tuple[str, str]], int]:
    """(table, registrations, implicit ones, gates as (file, key), enforcing gates)."""
    import os  # noqa: PLC0415

    sys.path.insert(0, str(tree))
    before = set(sys.modules)
    old = os.getcwd()
    os.chdir(tree)  # miles' discovery globs are repository-relative
    try:
        from tests.ci.ci_register import collect_tests, discover_ci_files  # noqa: PLC0415
        from tests.ci.metric_history.register import parse_ci_gate_specs  # noqa: PLC0415

        files = discover_ci_files()
        regs = collect_tests(files, sanity_check=False)
        specs = [(f, s) for f in files for s in parse_ci_gate_specs(f)]
    finally:
        os.chdir(old)
        sys.path.remove(str(tree))
        for name in set(sys.modules) - before:  # miles' "tests" package must not shadow another
            del sys.modules[name]
    table: dict = defaultdict(_cell)
    for r in regs:
        cell = table[(r.backend.name.lower(), r.suite, r.nightly)]
        if r.disabled is None:
            cell["enabled"] += 1
            cell["est"] += r.est_time
        else:
            cell["disabled"] += 1
    gates = sorted((f, s.metric_key) for f, s in specs)
    return table, len(regs), sum(r.implicit for r in regs), gates, sum(bool(s.enforce) for _, s in specs)


def our_side(tree: Path) -> tuple[dict, int, int, list[tuple[str, str]], int, list[str], float]:
    catalog = load_catalog(CATALOG)
    start = time.perf_counter()
    col = collect(catalog, base=tree)
    elapsed = time.perf_counter() - start
    table: dict = defaultdict(_cell)
    for r in col.registrations:
        cell = table[(r.backend, r.declared, r.nightly)]
        if r.disabled is None:
            cell["enabled"] += 1
            cell["est"] += r.est_time
        else:
            cell["disabled"] += 1
    gates = sorted((g.path, g.metric_key) for g in col.gates)
    implicit = sum(r.marker == "[implicit]" for r in col.registrations)
    enforcing = sum(g.options.get("mode") == "enforce" for g in col.gates)
    return table, len(col.registrations), implicit, gates, enforcing, [str(i) for i in col.issues], elapsed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tree", help="a miles checkout")
    src.add_argument("--mirror", help="a miles git directory")
    p.add_argument("--commit", default="HEAD")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tree:
            tree, what = Path(args.tree).resolve(), f"tree {args.tree}"
        else:
            tree = Path(tmp)
            rev = subprocess.run(["git", "--git-dir", args.mirror, "rev-parse", args.commit], capture_output=True,
                                 text=True, check=True).stdout.strip()
            archive = subprocess.run(["git", "--git-dir", args.mirror, "archive", rev, "tests"], capture_output=True,
                                     check=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            what = f"miles {rev}"
        theirs, t_regs, t_implicit, t_gates, t_enforce = miles_side(tree)
        ours, o_regs, o_implicit, o_gates, o_enforce, issues, elapsed = our_side(tree)
    print(f"{what}")
    print(f"{'backend':7} {'suite':30} {'nightly':7} {'enabled':>11} {'est_time s':>15} {'disabled':>9}  (miles / ours)")
    diffs = 0
    for key in sorted(set(theirs) | set(ours)):
        t, o = theirs.get(key, _cell()), ours.get(key, _cell())
        same = (t["enabled"], round(t["est"], 6), t["disabled"]) == (o["enabled"], round(o["est"], 6), o["disabled"])
        diffs += not same
        print(f"{key[0]:7} {key[1]:30} {str(key[2]):7} {t['enabled']:>5}/{o['enabled']:<5} "
              f"{t['est']:>7.0f}/{o['est']:<7.0f} {t['disabled']:>4}/{o['disabled']:<4}{'' if same else '  DIFFERS'}")
    print(f"registrations: miles {t_regs} ({t_implicit} implicit), ours {o_regs} ({o_implicit} implicit); "
          f"suites differing: {diffs}")
    print(f"register_ci_gate: miles {len(t_gates)} ({t_enforce} enforcing), ours {len(o_gates)} ({o_enforce} enforcing); "
          f"same (file, metric) list: {t_gates == o_gates}")
    print(f"our collection {elapsed * 1000:.0f} ms; our errors: {len(issues)}")
    for line in issues[:20]:
        print(f"  {line}")
    ok = diffs == 0 and (t_regs, t_implicit, t_enforce) == (o_regs, o_implicit, o_enforce) and t_gates == o_gates
    return 0 if ok and not issues else 1


if __name__ == "__main__":
    raise SystemExit(main())
