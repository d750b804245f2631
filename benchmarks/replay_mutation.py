"""Mutation replay: plant a fault in every function a commit changed and check that every
test that then fails is in the selection computed for that commit.

A replay of unchanged history cannot catch a miss when no test changes its outcome. Here
each change (parent -> commit) of the newest ``--commits`` first-parent commits gets faults:
in the commit's tree, every function (``def``, a unit of :mod:`ci_register.planning.units`:
a module's functions and class methods) whose source differs from the parent's, or that the
commit added, starts with ``raise RuntimeError("planted fault")``. All of a commit's faults
are planted at once (one run per commit). The planted tree runs as
``benchmarks/replay_selection.py`` runs a commit: each CPU suite through the tree's own
runner, the GPU suites' files (they skip on a CPU host, but a fault at import fails them)
under one pytest. A test that fails there and did not fail in the record's run is *caused by
the change*; each must be in the selection for its suite (a failure outside a registered
file, or a suite run that produced no outcomes, needs the whole suite kept).

The selection is this checkout's, decided as CI decides it from records of main: an
unplanted run (each CPU suite traced: executed functions, import maps, runner map) is
recorded at every ``--record-every``-th commit, and each change is selected with its nearest
recorded ancestor's run, judged on the whole change since that commit
(:func:`ci_register.planning.evidence.gather`, :func:`ci_register.planning.select.select_by_suite`);
a suite without a usable record (the GPU suites: their tests skip here) is judged by the
static graph on the change alone. A planted run is made only where it can find a miss: a
change with no planted fault needs none, nor one whose selection keeps every (suite, file).
The share of est_time kept is reported for all changes and with the changes to declared CI
configuration apart.

    nohup nice timeout 5400 python benchmarks/replay_mutation.py --rev main --commits 62 \
        --record-every 4 --json /tmp/mut.json --out benchmarks/results/replay_mutation.md &

Workers that run apart (``--worker N/M``, each with its own ``--json``; ``--records-only``
makes the records alone) are joined by ``--runs-from`` and a last ``--no-new-runs`` pass.
``--runs-from`` reuses the runs of an earlier ``--json`` (an interrupted replay resumes; the
selection is always decided afresh).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "benchmarks"))
sys.path.insert(0, str(HERE))

import replay_selection as rs  # noqa: E402
from bench_selection import registrations  # noqa: E402

from ci_register.planning.evidence import ExecutedRecord, change_since, gather  # noqa: E402
from ci_register.planning.imports import scan  # noqa: E402
from ci_register.planning.select import (  # noqa: E402
    RunnerMap,
    _match,
    parse_select,
    select_by_suite,
)
from ci_register.planning.units import _walk_units  # noqa: E402
from ci_register.registered.catalog import load_catalog  # noqa: E402
from ci_register.running.executed import incomplete_reason  # noqa: E402

FAULT = "planted fault"
_FAILED = ("failed", "error", "collect-error")


# ---------------------------------------------------------------------- the faults (pure)

def _units(source: bytes | str) -> dict[str, list[ast.AST]] | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out: dict[str, list[ast.AST]] = {}
    for name, node in _walk_units(tree.body, ""):
        out.setdefault(name, []).append(node)
    return out


def changed_units(old: bytes | str | None, new: bytes | str) -> list[str]:
    """Qualnames of the units of ``new`` whose source (decorators, arguments, body) differs
    from ``old``'s, or that ``old`` lacks; [] when ``new`` does not parse."""
    nu = _units(new)
    if nu is None:
        return []
    ou = (_units(old) if old is not None else None) or {}
    return sorted(q for q, nodes in nu.items()
                  if [ast.dump(n) for n in nodes] != [ast.dump(n) for n in ou.get(q, [])])


def plant(source: str, qualnames: list[str], label: str) -> str:
    """``source`` with ``raise RuntimeError(...)`` as the first statement (after a
    docstring) of each unit named in ``qualnames``."""
    tree = ast.parse(source)
    lines = [ln.encode("utf-8") for ln in source.splitlines(keepends=True)]
    edits: list[tuple[int, int, bytes, bool]] = []  # (0-based line, byte col, text, as a new line)
    want = set(qualnames)
    for name, node in _walk_units(tree.body, ""):
        if name not in want:
            continue
        stmt = f'raise RuntimeError("{FAULT}: {label}::{name}")'.encode()
        body = node.body
        doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
        if doc and len(body) == 1:  # only a docstring: the fault goes after it
            d = body[0]
            if not lines[d.lineno - 1][:d.col_offset].strip():
                edits.append((d.end_lineno, d.col_offset, stmt, True))
            else:
                edits.append((d.end_lineno - 1, d.end_col_offset, b"; " + stmt, False))
            continue
        first = body[1] if doc else body[0]
        if not lines[first.lineno - 1][:first.col_offset].strip():  # the statement starts its line
            edits.append((first.lineno - 1, first.col_offset, stmt, True))
        else:  # `def f(): return 1`, or `x; y`
            edits.append((first.lineno - 1, first.col_offset, stmt + b"; ", False))
    for line, col, text, new_line in sorted(edits, reverse=True):
        if new_line:
            lines.insert(line, b" " * col + text + b"\n")
        else:
            lines[line] = lines[line][:col] + text + lines[line][col:]
    out = b"".join(lines).decode("utf-8")
    ast.parse(out)  # a planted file that does not parse would be a fault of this tool, not the change
    return out


def fault_plan(repo: Path, parent: str, commit: str, changed: list[str]) -> dict[str, list[str]]:
    """{path: changed units} for the commit's Python files."""
    plan = {}
    for p in changed:
        if not p.endswith(".py"):
            continue
        new = rs._show(repo, commit, p)
        if new is None:
            continue
        units = changed_units(rs._show(repo, parent, p), new)
        if units:
            plan[p] = units
    return plan


# ---------------------------------------------------------------------- runs

def planted_run(repo: str, commit: str, i: int, plan: dict[str, list[str]], catalog_path: str, timeout_s: float,
                work_root: str) -> dict:
    """The commit's tree with every planted fault, its suites run: per suite, the failing
    test ids (``*`` when the suite's run produced no outcomes) and the exit."""
    work = Path(work_root) / f"m{i}"
    tree = work / "tree"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rs.export(Path(repo), commit, tree)
    planted = 0
    for path, units in plan.items():
        f = tree / path
        f.write_text(plant(f.read_text(encoding="utf-8"), units, path), encoding="utf-8")
        planted += len(units)
    catalog = load_catalog(Path(catalog_path))
    regs, _ = registrations(tree, catalog)
    by_suite: dict[str, set[str]] = {}
    for s_, p_, _ in regs:
        by_suite.setdefault(s_, set()).add(p_)
    out: dict = {"commit": commit, "planted": planted, "suites": {}, "seconds": 0.0}
    t0 = time.perf_counter()
    for suite in sorted(s_ for s_ in by_suite if not catalog.suites[s_].is_gpu):
        try:
            got = rs.run_traced_suite(tree, suite, work, timeout_s)
            failed = sorted(n for n, o in got["outcomes"].items() if o in _FAILED)
            if got["exit"] not in (0, 5) and not failed:
                failed = ["*"]
            out["suites"][suite] = {"failed": failed, "exit": got["exit"]}
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            out["suites"][suite] = {"failed": ["*"], "exit": None, "why": str(exc)[:300]}
    gpu_files = sorted({p for s_, ps in by_suite.items() if catalog.suites[s_].is_gpu for p in ps})
    if gpu_files:
        try:
            got = rs.run_commit(tree, gpu_files, work, timeout_s)
            failed = sorted(n for n, o in got["outcomes"].items() if o in _FAILED)
            if got["exit"] not in (0, 5) and not failed:
                failed = ["*"]
        except (RuntimeError, subprocess.TimeoutExpired):
            failed, got = ["*"], {"exit": None}
        out["suites"]["<gpu>"] = {"failed": failed, "exit": got["exit"],
                                  "files": {p: sorted(s_ for s_, ps in by_suite.items() if p in ps) for p in gpu_files}}
    out["seconds"] = time.perf_counter() - t0
    out["by_suite"] = {s_: sorted(ps) for s_, ps in by_suite.items()}
    shutil.rmtree(work, ignore_errors=True)
    return out


def base_run(repo: str, commit: str, i: int, catalog_path: str, timeout_s: float, work_root: str) -> dict:
    """The parent's unplanted run, as ``replay_selection.do_commit`` makes it but for the GPU
    suites' files (they skip on this host; without their maps they use the static graph,
    which keeps at least as much): each CPU suite traced through the tree's runner, and the
    runner map."""
    work = Path(work_root) / f"b{i}"
    tree = work / "tree"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rs.export(Path(repo), commit, tree)
    catalog = load_catalog(Path(catalog_path))
    regs, _ = registrations(tree, catalog)
    by_suite: dict[str, set[str]] = {}
    for s_, p_, _ in regs:
        by_suite.setdefault(s_, set()).add(p_)
    run: dict = {"commit": commit, "outcomes": {}, "metrics": {}, "maps": {}, "suites": {}, "seconds": 0.0}
    for suite in sorted(s_ for s_ in by_suite if not catalog.suites[s_].is_gpu):
        got = rs.run_traced_suite(tree, suite, work, timeout_s)
        run["suites"][suite] = {"executed": got["executed"], "probe": got["probe"], "seconds": got["seconds"],
                                "files": sorted(by_suite[suite])}
        run["seconds"] += got["seconds"]
        for k in ("outcomes", "metrics", "maps"):
            run[k].update(got[k])
    run["runner"] = rs.runner_probe(tree)
    shutil.rmtree(work, ignore_errors=True)
    return run


def record_plan(recorded: set[int], n: int, every: int) -> list[int]:
    """Where records are made: commits are indexed 0..n (oldest first), change i's parent is
    i - 1. Walking oldest first, a change whose nearest recorded ancestor is ``every`` or more
    commits before its parent (or absent) gets a record at its parent: post-merge runs of main
    at most ``every`` commits apart. ``recorded``: indexes already recorded. Pure."""
    have = set(recorded)
    new = []
    for i in range(1, n + 1):
        below = [j for j in have if j <= i - 1]
        if not below or (i - 1) - max(below) >= every:
            have.add(i - 1)
            new.append(i - 1)
    return new


def nearest_record(recorded: set[int], i: int) -> int | None:
    """The nearest recorded ancestor of change i's parent (an index <= i - 1), by the commit
    graph (first-parent order), never by when it was recorded."""
    below = [j for j in recorded if j <= i - 1]
    return max(below) if below else None


def selection_from_record(repo: Path, commits: list[str], i: int, j: int, run: dict, catalog, config, tmp: Path
                          ) -> dict:
    """Change i (commits[i-1] -> commits[i]) selected as CI would with the run recorded at
    commits[j] (j <= i - 1, an ancestor): each CPU suite with a complete executed-functions
    record is judged by the library (:func:`ci_register.planning.evidence.gather`) on the
    whole change since commits[j] with that run's maps and runner map, and so is a suite
    without a usable record (the GPU suites) by the file-level rules; where commits[j] is
    before the parent, a test runs only where the static graph on the change itself keeps
    it too (:func:`ci_register.planning.select.select_by_suite`)."""
    c, parent, at = commits[i], commits[i - 1], commits[j]
    tree = tmp / f"a{i}"
    rs.export(repo, c, tree)
    regs, _ = registrations(tree, catalog)
    changed = [p for p in rs.git(repo, "diff-tree", "--no-commit-id", "-r", "--name-only", "--no-renames", parent,
                                 c).split("\n") if p]
    est = {(s_, p): e for s_, p, e in regs}
    suites: dict[str, set[str]] = {}
    for s_, p, _ in regs:
        suites.setdefault(s_, set()).add(p)
    graph = scan(tree, config.package_roots, cache=rs._SCAN_CACHE)
    maps = {p: set(f) for p, f in run["maps"].items()}
    runner = RunnerMap(frozenset(run["runner"]["files"]), f"runner map at {at[:10]}")
    records = {s_: ExecutedRecord(s_, frozenset(d["executed"]), at) for s_, d in run["suites"].items()
               if incomplete_reason(d["executed"]) is None}
    evidence = gather(repo, parent, c, changed, records)
    if j != i - 1:  # the maps and runner map describe commits[j]: their suites judge the change since it
        got = evidence.since.get(at) or change_since(repo, at, c, parent)
        if isinstance(got, str):
            raise RuntimeError(f"change {c[:10]}: {got}")
        evidence.maps_since = got
    sel = select_by_suite(graph, suites, changed, config, maps, runner, evidence)
    shutil.rmtree(tree, ignore_errors=True)
    total = sum(est.values())
    kept = sum(e for (s_, p), e in est.items() if sel.keeps(s_, p))
    everything = {s_: (sel.by_suite[s_].everything if s_ in sel.by_suite else sel.everything) for s_ in suites}
    return {"share": kept / total if total else 1.0, "left": {k for k in est if not sel.keeps(*k)},
            "everything": "; ".join(sorted({w[:100] for w in everything.values() if w}))[:300],
            "usable": sorted(evidence.records), "since": len(evidence.since.get(at).changed) if at in evidence.since else
            len(changed), "notes": [n for n in evidence.notes if "not used" in n]}


def failures_outside(planted: dict, base: dict, left: set[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(failures caused by the change outside the selection, pre-existing ones outside it):
    ``suite file: test id``."""
    before = {n for n, o in base.get("outcomes", {}).items() if o in _FAILED}
    by_suite = planted["by_suite"]
    new, old = [], []
    for suite, got in planted["suites"].items():
        for nodeid in got["failed"]:
            path = nodeid.split("::")[0]
            if suite == "<gpu>":
                owners = got["files"].get(path)
                pairs = [(s_, path) for s_ in owners] if owners else [(s_, p) for s_, ps in by_suite.items() for p in ps
                                                                      if s_ not in planted["suites"]]
            elif path in by_suite.get(suite, ()):
                pairs = [(suite, path)]
            else:  # outside a registered file (a conftest, the session, no outcomes): the whole suite
                pairs = [(suite, p) for p in by_suite.get(suite, ())]
            miss = sorted(f"{s_} {p}" for s_, p in pairs if (s_, p) in left)
            if miss:
                (old if nodeid in before else new).append(f"{miss[0]}: {nodeid}")
    return new, old


# ---------------------------------------------------------------------- the replay

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=HERE)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--commits", type=int, default=62)
    ap.add_argument("--catalog", type=Path, default=HERE / "suites" / "catalog.toml")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--runs-from", type=Path, nargs="*", default=None)
    ap.add_argument("--record-every", type=int, default=4,
                    help="records (the unplanted runs selection reads) at most this many commits apart: each change "
                         "is selected with its nearest recorded ancestor's run (1: every parent)")
    ap.add_argument("--records-only", action="store_true", help="make the records the plan needs and stop")
    ap.add_argument("--worker", default="1/1", help="N/M: make only every M-th of the runs to make, from the N-th "
                    "(workers that run apart, each with its own --json; --runs-from joins them)")
    ap.add_argument("--plan-only", action="store_true", help="print which runs each change needs and stop")
    ap.add_argument("--control", type=int, default=0,
                    help="planted runs for this many changes whose selection keeps every file (the faults bite)")
    ap.add_argument("--reverse", action="store_true", help="newest first (a second worker on another --json)")
    ap.add_argument("--no-new-runs", action="store_true",
                    help="make no run: report the changes whose runs --runs-from holds, list the others as not replayed")
    a = ap.parse_args(argv)
    if a.record_every < 1:
        ap.error("--record-every must be 1 or more")
    try:
        nth, of = (int(x) for x in a.worker.split("/"))
        assert 1 <= nth <= of
    except (ValueError, AssertionError):
        ap.error(f"--worker {a.worker!r}: give N/M with 1 <= N <= M")
    where = a.repo.parent if a.repo.name == ".git" else a.repo
    got_dir = subprocess.run(["git", "-C", str(where), "rev-parse", "--git-common-dir"], capture_output=True, text=True,
                             check=False)
    if got_dir.returncode != 0:
        ap.error(f"--repo {a.repo}: not a git repository")
    repo = Path(got_dir.stdout.strip())
    repo = repo if repo.is_absolute() else (where / repo).resolve()
    commits = rs.git(repo, "rev-list", "--first-parent", f"-n{a.commits + 1}", a.rev).split()[::-1]
    catalog = load_catalog(a.catalog)
    config = parse_select(catalog.select, str(a.catalog), catalog_path="suites/catalog.toml", suites=catalog.suites)
    store: dict = {"base": {}, "planted": {}}
    for src in a.runs_from or ():
        if src.exists():  # several: the stores of workers that ran apart
            got = json.loads(src.read_text())
            store["base"].update(got.get("base", {}))
            store["planted"].update(got.get("planted", {}))

    def save() -> None:
        if a.json:
            a.json.write_text(json.dumps(store, default=str))

    changes = []
    for i in range(1, len(commits)):
        c, parent = commits[i], commits[i - 1]
        changed = [p for p in rs.git(repo, "diff-tree", "--no-commit-id", "-r", "--name-only", "--no-renames", parent,
                                     c).split("\n") if p]
        declared = next((p for p in changed if _match(p, config.declared_always) or _match(p, config.always)), None)
        plan = fault_plan(repo, parent, c, changed)
        changes.append({"i": i, "commit": c, "parent": parent, "changed": changed, "declared": declared, "plan": plan})
    held = {k for k, c in enumerate(commits[:-1]) if c in store["base"]}
    to_record = [k for k in record_plan(held, len(commits) - 1, a.record_every) if k not in held]
    print(f"records held at {len(held)} commits; to make at {len(to_record)}: {[commits[k][:10] for k in to_record]}",
          file=sys.stderr)
    for ch in changes:
        need = "planted faults" if ch["plan"] and not ch["declared"] else ("declared: " + ch["declared"] if ch["declared"]
                                                                           else "no fault to plant")
        print(f"{ch['commit'][:10]} {len(ch['changed'])} paths, {sum(map(len, ch['plan'].values()))} faults: {need}",
              file=sys.stderr)
    if a.plan_only:
        return 0
    rows = []
    controls = 0
    with tempfile.TemporaryDirectory() as tmp:
        if not a.no_new_runs:
            for k in to_record[nth - 1::of]:
                if commits[k] in store["base"]:
                    continue
                t0 = time.perf_counter()
                store["base"][commits[k]] = base_run(str(repo), commits[k], k, str(a.catalog), a.timeout, tmp)
                save()
                print(f"record {commits[k][:10]} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if a.records_only:
            return 0
        recorded = {k for k, c in enumerate(commits[:-1]) if c in store["base"]}
        for ch in (changes[::-1] if a.reverse else changes):
            i, c = ch["i"], ch["commit"]
            if of > 1 and (i - 1) % of != nth - 1:
                continue  # another worker's change
            row = {"commit": c[:10], "subject": rs.git(repo, "log", "-1", "--format=%s", c).strip()[:60],
                   "changed": len(ch["changed"]), "faults": sum(map(len, ch["plan"].values())),
                   "declared": ch["declared"] or "", "new_outside": [], "old_outside": [], "planted_run": ""}
            j = nearest_record(recorded, i)
            if j is None:
                row.update(share=None, planted_run="not replayed: no recorded ancestor in --runs-from")
                rows.append(row)
                continue
            base = store["base"][commits[j]]
            got_sel = selection_from_record(repo, commits, i, j, base, catalog, config, Path(tmp))
            left = got_sel["left"]
            row.update(share=got_sel["share"], everything=got_sel["everything"], record=commits[j][:10],
                       behind=i - 1 - j, since=got_sel["since"], usable=got_sel["usable"], notes=got_sel["notes"])
            if not ch["plan"]:
                row["planted_run"] = "not needed: no fault"
            elif not left and controls < a.control and (c in store["planted"] or not a.no_new_runs):
                # A control: the selection keeps everything, so no failure can be outside it;
                # the planted run shows the faults do make tests fail.
                controls += 1
                if c not in store["planted"]:
                    store["planted"][c] = planted_run(str(repo), c, i, ch["plan"], str(a.catalog), a.timeout, tmp)
                    save()
                got = store["planted"][c]
                row["failing"] = sum(len(v["failed"]) for v in got["suites"].values())
                row["control"] = True
                row["planted_run"] = f"control (every file kept): {got['planted']} faults, " + ", ".join(
                    f"{s_}: {len(v['failed'])} failing" for s_, v in sorted(got["suites"].items()))
            elif not left:
                row["planted_run"] = "not needed: every (suite, file) kept"
            elif a.no_new_runs and c not in store["planted"]:
                row.update(planted_run="not replayed: no planted run in --runs-from", unreplayed=True)
            else:
                if c not in store["planted"]:
                    store["planted"][c] = planted_run(str(repo), c, i, ch["plan"], str(a.catalog), a.timeout, tmp)
                    save()
                got = store["planted"][c]
                row["planted_run"] = f"{got['planted']} faults, {got['seconds']:.0f} s, " + ", ".join(
                    f"{s_}: {len(v['failed'])} failing" for s_, v in sorted(got["suites"].items()))
                row["new_outside"], row["old_outside"] = failures_outside(got, base, left)
                row["failing"] = sum(len(v["failed"]) for v in got["suites"].values())
            print(f"{c[:10]} share {row['share']:.0%} record -{row['behind']} {row['planted_run'][:80]} "
                  f"outside: {row['new_outside'][:3]}", file=sys.stderr)
            rows.append(row)
    rows.sort(key=lambda r: next(k for k, ch in enumerate(changes) if ch["commit"].startswith(r["commit"])))
    store["rows"] = rows
    save()
    text = report(rows, commits, argv, a.record_every)
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


def report(rows: list[dict], commits: list[str], argv: list[str], every: int) -> str:
    missing = [r for r in rows if r["share"] is None or r.get("unreplayed")]
    rows = [r for r in rows if r["share"] is not None]
    shares = [r["share"] for r in rows]
    apart = [r["share"] for r in rows if not r["declared"]]
    new = [(r["commit"], x) for r in rows for x in r["new_outside"]]
    old = [(r["commit"], x) for r in rows for x in r["old_outside"]]
    ran = [r for r in rows if r["planted_run"] and not r["planted_run"].startswith(("not needed", "control", "not replayed"))]
    controls = [r for r in rows if r.get("control")]
    behind = [r["behind"] for r in rows]
    records = sorted({r["record"] for r in rows})
    lines = [
        "# Mutation replay: planted faults against the selection",
        "",
        f"Commits `{commits[1][:10]}`..`{commits[-1][:10]}` (first-parent; {len(rows)} changes).",
        f"Command: `python benchmarks/replay_mutation.py {' '.join(argv)}`",
        f"Machine: {os.cpu_count()} CPU cores, no GPU (GPU files skip, as on a CPU runner), Python {sys.version.split()[0]}.",
        "",
        f"Records as CI gets them: unplanted runs of main (each CPU suite traced: executed functions, import maps, "
        f"runner map) at every {every}th commit ({len(records)} commits), each serving the later commits: a change is "
        f"selected with its nearest recorded ancestor's run, judged on the whole change since that commit "
        f"(`ci_register.planning.evidence.gather`). The record was {statistics.fmean(behind):.1f} commits before the "
        f"change's parent on average (0: the parent itself, in {sum(b == 0 for b in behind)} changes; at most "
        f"{max(behind)}). Suites without a usable record (the GPU suites) use the static graph on the change alone.",
        "",
        f"- faults planted: {sum(r['faults'] for r in rows)} functions in {sum(bool(r['faults']) for r in rows)} changes; "
        f"planted runs read: {len(ran)} (the others could not leave a failure out: no fault, or every (suite, file) kept)",
        f"- **failing tests outside the selection, caused by the change: {len(new)}**"
        + (f" ({'; '.join(f'{c} {x}' for c, x in new[:8])})" if new else ""),
        f"- failing outside the selection that failed in the record's run too: {len(old)}"
        + (f" (e.g. {'; '.join(f'{c} {x}' for c, x in old[:3])})" if old else ""),
        f"- failing tests in the planted runs: {sum(r.get('failing', 0) for r in ran)} (16 serving-cpu tests fail on "
        "this host in every run, planted or not: vllm is not installed; they fail in the record's run too)",
        "- controls (changes whose selection keeps every file, planted anyway, to show the faults make tests fail): "
        + ("; ".join(f"{r['commit']}: {r['planted_run'][27:140]}" for r in controls) or "none"),
        f"- **mean share of est_time kept: {statistics.fmean(shares):.1%}** over all {len(rows)} changes; "
        f"**{statistics.fmean(apart):.1%} over the {len(apart)} changes that touch no declared CI configuration** "
        f"({len(rows) - len(apart)} do: they run everything)",
        *([f"- **not replayed** (their runs were not made in the time given): {len(missing)} changes "
           f"({', '.join(r['commit'] for r in missing)})"] if missing else []),
        "",
        "| commit | subject | paths | record (commits back) | faults | kept | planted run | outside |",
        "| --- | --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r['commit']} | {r['subject'].replace('|', '/')} | {r['changed']} | {r['record']} ({r['behind']}) | "
                     f"{r['faults']} | {r['share']:.0%} | {r['planted_run'].replace('|', '/')[:90]} | "
                     f"{len(r['new_outside'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
