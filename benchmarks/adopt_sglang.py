"""Our collector on SGLang's test tree, unchanged, against SGLang's own reading of it.

    python benchmarks/adopt_sglang.py --tree ../sglang             # a checkout of SGLang
    python benchmarks/adopt_sglang.py --mirror GITDIR [--commit REV]  # `git archive` of test/ + python/
    python benchmarks/adopt_sglang.py --synthetic 0                # a generated SGLang-shaped tree

SGLang's side: when the tree has ``python/sglang/test/ci/ci_register.py`` (stdlib only),
its own ``collect_tests`` and ``auto_partition`` are loaded from the tree and run; the
suite filter of ``test/run_suite.py`` (which imports GPU-side modules, so it is not
loaded) is restated in :func:`sglang_filter`: a suite's files are the registrations of
one backend whose effective suite and nightly flag match, split into enabled and
disabled. Without that module, :func:`restated_registrations` reads the calls by the
same published rule (top-level ``register_*_ci(...)`` literal calls; ``stage`` +
``runner_config`` give ``{stage}-test-{runner_config}``).

Our side: ``ci_register.registered.collect`` with ``examples/sglang/catalog.toml``. The table has
one row per (backend, suite, nightly): enabled files, their est_time total, disabled
files, on both sides, and a final line with any difference, the registrations whose
suite the catalog does not declare, and our collection time. ``--shards 2,4,8``
compares LPT makespans (SGLang's auto_partition vs our planner) at those counts; the
exit status is 0 only when every row is equal, nothing errs and no makespan is longer.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from ci_register.planning.partition import lpt  # noqa: E402
from ci_register.registered.catalog import load_catalog  # noqa: E402
from ci_register.registered.collect import collect  # noqa: E402

CATALOG = HERE / "examples" / "sglang" / "catalog.toml"
MARKERS = {"register_cpu_ci": "cpu", "register_cuda_ci": "cuda", "register_amd_ci": "amd",
           "register_npu_ci": "npu", "register_xpu_ci": "xpu", "register_musa_ci": "musa",
           "register_mlx_ci": "mlx"}
_ORDER = ("est_time", "suite", "nightly", "disabled")
_EXCLUDED = ("/conftest.py", "/__init__.py", "/cpu/utils.py")


def sglang_files(tree: Path) -> list[str]:
    """The files SGLang's runner reads: test/registered/**/*.py less three kinds."""
    return sorted(str(p) for p in (tree / "test" / "registered").rglob("*.py")
                  if not str(p).endswith(_EXCLUDED))


def restated_registrations(files: list[str]) -> list[dict]:
    """(backend, suite, nightly, disabled, est_time, filename) per call, by SGLang's rule."""
    out = []
    for f in files:
        tree = ast.parse(Path(f).read_text(encoding="utf-8"))
        for stmt in tree.body:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in MARKERS):
                continue
            args = {n: a.value for n, a in zip(_ORDER, call.args, strict=False) if isinstance(a, ast.Constant)}
            args.update({k.arg: k.value.value for k in call.keywords if isinstance(k.value, ast.Constant)})
            stage, runner = args.get("stage"), args.get("runner_config")
            suite = f"{stage}-test-{runner}" if stage is not None and runner is not None else args.get("suite")
            out.append({"backend": MARKERS[call.func.id], "suite": suite, "nightly": bool(args.get("nightly", False)),
                        "disabled": args.get("disabled"), "est_time": float(args["est_time"]), "filename": f})
    return out


def load_sglang_module(tree: Path):
    path = tree / "python" / "sglang" / "test" / "ci" / "ci_register.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("sglang_ci_register", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sglang_side(tree: Path) -> tuple[list[dict], str, object]:
    files = sglang_files(tree)
    mod = load_sglang_module(tree)
    if mod is None:
        return restated_registrations(files), "restated rule (no ci_register.py in the tree)", None
    regs = mod.collect_tests(files, sanity_check=False)
    rows = [{"backend": r.backend.name.lower(), "suite": r.effective_suite, "nightly": r.nightly,
             "disabled": r.disabled, "est_time": float(r.est_time), "filename": r.filename, "obj": r} for r in regs]
    return rows, "SGLang's own ci_register.collect_tests", mod


def sglang_filter(rows: list[dict]) -> dict[tuple[str, str, bool], dict]:
    """run_suite.filter_tests for every (backend, suite, nightly) at once."""
    table: dict[tuple[str, str, bool], dict] = defaultdict(lambda: {"enabled": 0, "est": 0.0, "disabled": 0, "files": []})
    for r in rows:
        cell = table[(r["backend"], r["suite"] or "", r["nightly"])]
        if r["disabled"] is None:
            cell["enabled"] += 1
            cell["est"] += r["est_time"]
            cell["files"].append(r)
        else:
            cell["disabled"] += 1
    return table


def our_side(tree: Path) -> tuple[dict[tuple[str, str, bool], dict], list[str], float]:
    catalog = load_catalog(CATALOG)
    start = time.perf_counter()
    col = collect(catalog, base=tree)
    elapsed = time.perf_counter() - start
    table: dict[tuple[str, str, bool], dict] = defaultdict(lambda: {"enabled": 0, "est": 0.0, "disabled": 0, "files": []})
    for r in col.registrations:
        cell = table[(r.backend, r.declared, r.nightly)]
        if r.disabled is None:
            cell["enabled"] += 1
            cell["est"] += r.est_time
            cell["files"].append(r)
        else:
            cell["disabled"] += 1
    return table, [str(i) for i in col.issues], elapsed


def makespans(theirs: dict, ours: dict, mod, shard_counts: list[int]) -> tuple[list[str], int, int]:
    """Rows of SGLang's / our makespans, and the cells where ours is longer / shorter."""
    lines, longer, shorter = [], 0, 0
    for key in sorted(k for k in theirs if theirs[k]["enabled"] >= 2):
        t_files, o_files = theirs[key]["files"], ours.get(key, {"files": []})["files"]
        cells = []
        for n in shard_counts:
            if mod is not None:
                parts = [mod.auto_partition([r["obj"] for r in t_files], i, n) for i in range(n)]
                t_span = max(sum(getattr(u, "est_time", 0.0) for u in p) for p in parts)
            else:
                t_span = max(s.total for s in lpt([(r["filename"], r["est_time"]) for r in t_files], n))
            o_span = max(s.total for s in lpt([(r.path, r.est_time) for r in o_files], n)) if o_files else 0.0
            cells.append(f"{n}: {t_span:.0f}/{o_span:.0f}")
            longer += o_span > t_span + 1e-9
            shorter += o_span < t_span - 1e-9
        lines.append(f"  {key[0]:5} {key[1]:48} " + "  ".join(cells))
    return lines, longer, shorter


def synthetic(root: Path, seed: int, n: int = 900) -> None:
    """An SGLang-shaped tree (calls in every shape the published rule reads); not SGLang's."""
    rng = random.Random(seed)
    catalog = load_catalog(CATALOG)
    suites = [s for s in catalog.suites.values()]
    for i in range(n):
        s = rng.choice(suites)
        marker = next(m for m, b in MARKERS.items() if b == s.backend)
        name = s.key[1]
        est = rng.choice([0, 5, 30, 60, 120, 300, 600, 1200])
        nightly = s.nightly
        where = [f'suite="{name}"']
        if name.count("-test-") == 1 and rng.random() < 0.5:
            stage, runner = name.split("-test-")
            where = [f'stage="{stage}"', f'runner_config="{runner}"']
        if s.backend in ("amd", "npu") and rng.random() < 0.2:
            where = [f'suite="{name}-undeclared"']  # SGLang checks no AMD/NPU suite name
        extra = ["nightly=True"] if nightly else []
        if s.backend == "amd" and rng.random() < 0.1:
            where, extra = ['suite=""'], [*extra, 'disabled="not on ROCm yet"']
        elif rng.random() < 0.1:
            extra.append('disabled="flaky"')
        if s.backend == "cuda" and rng.random() < 0.05:
            extra.append(f'in_process_group="g{i % 3}"')
        pieces = [f"est_time={est}", *where, *extra]
        body = f"from sglang.test.ci.ci_register import {marker}\n\n{marker}({', '.join(pieces)})\n"
        body += "\nimport unittest\n\nclass TestX(unittest.TestCase):\n    def test_a(self):\n        pass\n\n"
        body += 'if __name__ == "__main__":\n    unittest.main()\n'
        stem = f"test_case_{i}" if rng.random() < 0.9 else f"case_{i}"  # not every file is test_*
        path = root / "test" / "registered" / f"area{i % 17}" / f"{stem}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tree", help="an SGLang checkout")
    src.add_argument("--mirror", help="an SGLang git directory (bare is fine)")
    src.add_argument("--synthetic", type=int, metavar="SEED", help="a generated SGLang-shaped tree")
    p.add_argument("--commit", default="HEAD", help="with --mirror: the revision to read")
    p.add_argument("--shards", default="2,4,8", help="shard counts for the makespan comparison")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tree:
            tree, what = Path(args.tree).resolve(), f"tree {args.tree}"
        elif args.mirror:
            tree = Path(tmp)
            rev = subprocess.run(["git", "--git-dir", args.mirror, "rev-parse", args.commit], capture_output=True,
                                 text=True, check=True).stdout.strip()
            archive = subprocess.run(["git", "--git-dir", args.mirror, "archive", rev, "test/registered",
                                      "python/sglang/test/ci/ci_register.py"], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            what = f"SGLang {rev}"
        else:
            tree = Path(tmp)
            synthetic(tree, args.synthetic)
            what = f"synthetic SGLang-shaped tree, seed {args.synthetic} (not SGLang's tree)"
        rows, how, mod = sglang_side(tree)
        theirs = sglang_filter(rows)
        ours, issues, elapsed = our_side(tree)
        print(f"{what}; SGLang side: {how}; {len(rows)} registration calls in {len(sglang_files(tree))} files")
        print(f"{'backend':7} {'suite':48} {'nightly':7} {'enabled':>13} {'est_time s':>17} {'disabled':>9}  (SGLang / ours)")
        diffs = 0
        for key in sorted(set(theirs) | set(ours)):
            t, o = theirs.get(key), ours.get(key)
            t = t or {"enabled": 0, "est": 0.0, "disabled": 0}
            o = o or {"enabled": 0, "est": 0.0, "disabled": 0}
            same = (t["enabled"], round(t["est"], 6), t["disabled"]) == (o["enabled"], round(o["est"], 6), o["disabled"])
            diffs += not same
            print(f"{key[0]:7} {key[1] or '(none)':48} {str(key[2]):7} {t['enabled']:>6}/{o['enabled']:<6} "
                  f"{t['est']:>8.0f}/{o['est']:<8.0f} {t['disabled']:>4}/{o['disabled']:<4}{'' if same else '  DIFFERS'}")
        ours_n = sum(c["enabled"] + c["disabled"] for c in ours.values())
        print(f"registrations: SGLang {len(rows)}, ours {ours_n}; suites differing: {diffs}; "
              f"our collection {elapsed * 1000:.0f} ms; our errors: {len(issues)}")
        for line in issues[:20]:
            print(f"  {line}")
        shard_counts = [int(x) for x in args.shards.split(",") if x]
        longer = 0
        if shard_counts:
            lines, longer, shorter = makespans(theirs, ours, mod, shard_counts)
            print("makespans in s, SGLang's auto_partition / ours, at each shard count:")
            print("\n".join(lines))
            print(f"makespan cells: {len(lines) * len(shard_counts)}, ours longer {longer}, ours shorter {shorter}")
    return 0 if diffs == 0 and ours_n == len(rows) and not issues and not longer else 1


if __name__ == "__main__":
    raise SystemExit(main())
