"""Replay this repository's history: what selection keeps, and whether it ever dropped a
test whose result changed.

For the newest ``--commits`` first-parent commits of a repository (this one by default),
oldest first, each commit's tree is exported (``git archive``) and its registered
per-commit files run once under pytest on this CPU machine (GPU files skip, as they do
on a CPU runner), with:

- the tree's own gates plugin recording outcomes and metrics into a throwaway history
  (``--gates-suite replay``), read back with sqlite3;
- this checkout's import tracker (``gates/record/import_map.py``, loaded by path so that the
  old tree's ``gates`` package stays the tree's) recording each file's import map.

One run per commit serves twice: as the head of its own change and as the base of the
next. For each change (parent -> commit), the selection of the current code decides,
on the commit's tree with this checkout's ``suites/catalog.toml`` ``[select]``, once
with the static graph alone and once with the maps recorded at the parent. Figures:
the share of the registered est_time kept, and **unsafe omissions**: a file left out
although, between the parent's run and the commit's, a test of it changed outcome,
appeared or vanished, or changed a metric (a metric that differs between two runs of
one commit is noisy and compared by key, unit and sample count; the others by value).
A second check, by load evidence: a file left out whose recorded map at the parent or
at the commit holds a changed file.

    python benchmarks/replay_selection.py --commits 62 --out benchmarks/results/replay_selection.md

Economy on a 2-core machine: one pytest process per commit (not per file), all
registered files in it; the maps come from that same process (the tracker notes import
requests, it does not trace lines); graphs are parsed once per file content (cache).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from ci_register.planning.imports import scan  # noqa: E402
from ci_register.planning.select import RunnerMap, parse_select, select_tests  # noqa: E402
from ci_register.registered.catalog import load_catalog  # noqa: E402

sys.path.insert(0, str(HERE / "benchmarks"))
from bench_selection import registrations  # noqa: E402

PLUGIN = '''
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("_replay_import_map", os.environ["REPLAY_TRACKER"])
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
_state = {}

def pytest_configure(config):
    tracker = mod.ImportTracker(config.rootpath)
    tracker.install()
    _state["plugin"] = mod.ImportMapPlugin(tracker)
    _state["outcomes"] = {}
    config.pluginmanager.register(_state["plugin"], "replay-import-maps")

def pytest_runtest_logreport(report):
    out = _state["outcomes"]
    if report.failed:
        out[report.nodeid] = "failed" if report.when == "call" else "error"
    elif report.skipped:
        out.setdefault(report.nodeid, "skipped")
    elif report.when == "call":
        out[report.nodeid] = "passed"

def pytest_collectreport(report):
    if report.failed:
        _state["outcomes"][report.nodeid or "<session>"] = "collect-error"

def pytest_sessionfinish(session, exitstatus):
    p = _state["plugin"]
    with open(os.environ["REPLAY_OUT"], "w") as f:
        json.dump({"maps": p.maps(), "outcomes": _state["outcomes"], "exit": int(exitstatus)}, f)
    p.tracker.uninstall()
'''


# The runner map of an old tree, recorded in one process of that tree: its noxfile imported
# (what nox's process loads), its own `python -m ci_register run cpu --partition 1/1 --dry-run`
# (what a CI shard's runner loads up to starting pytest: its imports, the plan and partition), and
# its pytest plugins imported (what pytest loads before it collects). This checkout's
# ci_register/running/runner_map.py, loaded by path, lists the tree's files that were loaded.
RUNNER_PROBE = '''
import contextlib, importlib, importlib.util, io, json, os, runpy, sys
spec = importlib.util.spec_from_file_location("_replay_runner_map", os.environ["REPLAY_RUNNER_MAP"])
rm = importlib.util.module_from_spec(spec); spec.loader.exec_module(rm)
problems = []
spec = importlib.util.spec_from_file_location("noxfile", "noxfile.py")
try:
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
except BaseException as exc:
    problems.append(f"noxfile: {exc!r}")
sys.argv = ["ci_register", "run", "cpu", "--partition", "1/1", "--dry-run", "--catalog", "suites/catalog.toml", "--root", "."]
try:
    with contextlib.redirect_stdout(io.StringIO()):
        runpy.run_module("ci_register", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    if exc.code not in (0, None):
        problems.append(f"ci_register run --dry-run exit {exc.code}")
for names in (("gates.record.plugin", "gates.plugin"), ("ci_register.running.pytest_plugin", "ci_register.pytest_plugin")):
    for name in names:
        if importlib.util.find_spec(name.rpartition(".")[0]) and importlib.util.find_spec(name):
            importlib.import_module(name)
            break
    else:
        problems.append(f"none of {names}")
print(json.dumps({"files": rm.loaded_files(os.getcwd()), "problems": problems}))
'''


def runner_probe(tree: Path) -> dict:
    """{files, problems}: the runner map of the tree (see RUNNER_PROBE)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "REPLAY_RUNNER_MAP": str(HERE / "ci_register" / "running" / "runner_map.py")}
    env.pop("GATES_HISTORY", None)
    r = subprocess.run([sys.executable, "-c", RUNNER_PROBE], cwd=tree, capture_output=True, text=True, env=env,
                       timeout=300, check=False)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"runner probe in {tree} failed (exit {r.returncode}): {r.stderr[-2000:]}") from None


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True).stdout


def export(repo: Path, commit: str, dest: Path) -> None:
    data = subprocess.run(["git", "--git-dir", str(repo), "archive", "--format=tar", commit], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def run_commit(tree: Path, files: list[str], work: Path, timeout_s: float) -> dict:
    """One pytest process over ``files`` in ``tree``: outcomes, metrics and import maps."""
    out = work / "out.json"
    hist = work / "h.db"
    for p in (out, hist):
        p.unlink(missing_ok=True)
    (work / "replay_plugin.py").write_text(PLUGIN)
    plugin = "gates.record.plugin" if (tree / "gates" / "record" / "plugin.py").exists() else "gates.plugin"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(work)]), "PYTEST_PLUGINS": plugin,
           "REPLAY_TRACKER": str(HERE / "gates" / "record" / "import_map.py"), "REPLAY_OUT": str(out),
           "GATES_IMPORT_MAPS": "0", "GATES_COMMIT": "replay", "CI_REGISTER_FILE_SLACK_S": "60"}
    env.pop("GATES_HISTORY", None)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", "-p", "replay_plugin",
                        "--gates-suite", "replay", "--gates-history", str(hist), "--timeout", "300"],
                       cwd=tree, capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
    secs = time.perf_counter() - t0
    if not out.exists():
        raise RuntimeError(f"pytest in {tree} wrote nothing (exit {r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
    got = json.loads(out.read_text())
    metrics: dict[str, dict[str, tuple]] = {}
    if hist.exists():
        conn = sqlite3.connect(hist)
        try:
            for nodeid, key, unit, count, median in conn.execute("SELECT nodeid, key, unit, count, median FROM metrics"):
                metrics.setdefault(nodeid.split("::")[0], {})[f"{nodeid}|{key}"] = (unit, count, median)
        except sqlite3.Error:
            pass
        conn.close()
    got["metrics"] = metrics
    got["seconds"] = secs
    return got


def file_changes(base: dict, head: dict, noisy: set[str]) -> dict[str, str]:
    """{file: what changed} between two runs: outcomes, test ids, metrics."""
    out: dict[str, str] = {}
    ids = set(base["outcomes"]) | set(head["outcomes"])
    for nodeid in sorted(ids):
        a, b = base["outcomes"].get(nodeid), head["outcomes"].get(nodeid)
        if a != b:
            out.setdefault(nodeid.split("::")[0], f"{nodeid}: {a} -> {b}")
    for path in sorted(set(base["metrics"]) | set(head["metrics"])):
        ma, mb = base["metrics"].get(path, {}), head["metrics"].get(path, {})
        for key in sorted(set(ma) | set(mb)):
            a, b = ma.get(key), mb.get(key)
            if a is None or b is None or a[:2] != b[:2]:
                out.setdefault(path, f"{key}: {a} -> {b}")
            elif key.split("|", 1)[1] not in noisy and a[2] != b[2]:
                out.setdefault(path, f"{key}: {a[2]} -> {b[2]}")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=HERE / ".git", help="git directory (default: this checkout's)")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--commits", type=int, default=62, help="changes to replay (one more run than this)")
    ap.add_argument("--catalog", type=Path, default=HERE / "suites" / "catalog.toml")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="raw per-commit runs (to re-analyse without rerunning)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one commit's pytest may take")
    ap.add_argument("--runs-from", type=Path, default=None,
                    help="reuse the runs of an earlier --json (selection decided afresh, pytest not rerun)")
    ap.add_argument("--reprobe", action="store_true", help="record the runner maps again (with --runs-from)")
    a = ap.parse_args(argv)
    repo = Path(subprocess.run(["git", "-C", str(a.repo.parent if a.repo.name == ".git" else a.repo), "rev-parse",
                                "--git-common-dir"], capture_output=True, text=True, check=True).stdout.strip())
    if not repo.is_absolute():
        repo = (a.repo.parent / repo).resolve()
    commits = git(repo, "rev-list", "--first-parent", f"-n{a.commits + 1}", a.rev).split()[::-1]
    catalog = load_catalog(a.catalog)
    config = parse_select(catalog.select, str(a.catalog), catalog_path="suites/catalog.toml", suites=catalog.suites)
    cache: dict = {}
    runs: list[dict] = []
    rows: list[dict] = []
    noisy: set[str] = set()
    earlier: dict[str, dict] = {}
    if a.runs_from:
        got = json.loads(a.runs_from.read_text())
        earlier = {r["commit"]: r for r in got["runs"]}
        noisy = set(got["noisy"])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i, c in enumerate(commits):
            tree = work / f"t{i}"
            export(repo, c, tree)
            regs, _ = registrations(tree, catalog)
            files = sorted({p for _, p, _ in regs})
            run = earlier.get(c) or run_commit(tree, files, work, a.timeout)
            run["commit"] = c
            if "runner" not in run or a.reprobe:
                run["runner"] = runner_probe(tree)
            if i == len(commits) - 1 and c not in earlier:  # the newest commit twice: which metrics are noise
                again = run_commit(tree, files, work, a.timeout)
                for path in set(run["metrics"]) | set(again["metrics"]):
                    for key, v in run["metrics"].get(path, {}).items():
                        w = again["metrics"].get(path, {}).get(key)
                        if w is None or w[2] != v[2]:
                            noisy.add(key.split("|", 1)[1])
            runs.append(run)
            if a.json:  # after every run: an interrupted replay resumes with --runs-from
                a.json.write_text(json.dumps({"runs": runs, "rows": [], "noisy": sorted(noisy)}, default=str))
            print(f"[{i + 1}/{len(commits)}] {c[:10]} ran {len(files)} files in {run['seconds']:.0f} s, "
                  f"{len(run['maps'])} maps, runner map {len(run['runner']['files'])} files "
                  f"{run['runner']['problems'] or ''}", file=sys.stderr)
            if i > 0:
                changed = [p for p in git(repo, "diff-tree", "--no-commit-id", "-r", "--name-only", "--no-renames",
                                          commits[i - 1], c).split("\n") if p]
                base = runs[i - 1]
                tests = sorted({p for _, p, _ in regs})
                est = {}
                for s, p, e in regs:
                    est[(s, p)] = e
                total = sum(est.values())
                out = {"commit": c[:10], "subject": git(repo, "log", "-1", "--format=%s", c).strip()[:60],
                       "changed": len(changed), "total": total}
                runner = RunnerMap(frozenset(base["runner"]["files"]), f"runner map at {commits[i - 1][:10]}")
                for label, maps, rmap in (("static", None, None), ("maps", {p: set(f) for p, f in base["maps"].items()}, runner)):
                    graph = scan(tree, config.package_roots, cache=cache)
                    sel = select_tests(graph, tests, changed, config, maps, rmap)
                    kept = sum(e for (s, p), e in est.items() if sel.keeps(s, p))
                    out[f"{label}_share"] = kept / total if total else 1.0
                    out[f"{label}_everything"] = sel.everything
                    if label == "maps":
                        out["left"] = [p for p in tests if not any(sel.keeps(s, q) for s, q in est if q == p)]
                        out["selected"] = sorted(sel.files)
                        out["sel_why"] = sel.files
                out["base_i"] = i - 1
                out["changed_paths"] = changed
                rows.append(out)
            if i >= 1:
                shutil.rmtree(work / f"t{i - 1}", ignore_errors=True)
    # Unsafe omissions, now that the noisy metrics are known.
    for r in rows:
        base, head = runs[r["base_i"]], runs[r["base_i"] + 1]
        diffs = file_changes(base, head, noisy)
        r["changed_files"] = diffs
        r["unsafe"] = {p: d for p, d in diffs.items() if p in r["left"]}
        changed = set(r["changed_paths"])
        r["load_unsafe"] = sorted(p for p in r["left"] if changed & set(base["maps"].get(p, ())) or changed & set(head["maps"].get(p, ())))
        # A change the runner map of the parent or the commit holds, not run in full.
        r["runner_unsafe"] = [] if r["maps_everything"] else sorted(
            changed & (set(base["runner"]["files"]) | set(head["runner"]["files"])))
    if a.json:
        a.json.write_text(json.dumps({"runs": runs, "rows": rows, "noisy": sorted(noisy)}, default=str))
    text = report(rows, runs, noisy, commits, argv)
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


def report(rows: list[dict], runs: list[dict], noisy: set[str], commits: list[str], argv: list[str]) -> str:
    static = [r["static_share"] for r in rows]
    maps = [r["maps_share"] for r in rows]
    unsafe = [(r["commit"], p, d) for r in rows for p, d in r["unsafe"].items()]
    load_unsafe = [(r["commit"], p) for r in rows for p in r["load_unsafe"]]
    runner_unsafe = [(r["commit"], p) for r in rows for p in r.get("runner_unsafe", ())]
    changed = [(r["commit"], p, d) for r in rows for p, d in r["changed_files"].items()]
    everything = [r for r in rows if r["maps_everything"]]
    lines = [
        "# Selection replayed over this repository's history",
        "",
        f"Commits `{commits[1][:10]}`..`{commits[-1][:10]}` (first-parent; {len(rows)} changes, {len(runs)} runs).",
        f"Command: `python benchmarks/replay_selection.py {' '.join(argv)}`",
        f"Machine: {os.cpu_count()} CPU cores, no GPU (GPU files skip, as on a CPU runner); "
        f"one pytest process per commit, median {statistics.median(r['seconds'] for r in runs):.0f} s.",
        "",
        f"- **mean share of est_time kept, static graph + recorded maps: {statistics.fmean(maps):.1%}** "
        f"(median {statistics.median(maps):.1%}); static graph alone: mean {statistics.fmean(static):.1%} "
        f"(median {statistics.median(static):.1%})",
        f"- **unsafe omissions: {len(unsafe)}** (a left-out file whose tests changed outcome, appeared, vanished or "
        f"changed a metric between the parent's run and the commit's); files with such a change: {len(changed)}",
        f"- left-out files whose recorded map (parent's or commit's) holds a changed file: {len(load_unsafe)}",
        f"- changes not run in full although the runner map (parent's or commit's) holds a changed file: "
        f"{len(runner_unsafe)}" + (f" ({', '.join(f'{c} {p}' for c, p in runner_unsafe[:6])})" if runner_unsafe else ""),
        f"- runner maps: {statistics.median(len(r['runner']['files']) for r in runs):.0f} files (median); "
        f"probe problems: {sum(bool(r['runner']['problems']) for r in runs)} of {len(runs)} runs",
        f"- changes that run everything: {len(everything)}"
        + (f" ({'; '.join(sorted({r['maps_everything'][:90] for r in everything})[:6])})" if everything else ""),
        f"- noisy metrics (differ between two runs of the newest commit; compared by key, unit, count): "
        f"{', '.join(sorted(noisy)) or 'none'}",
        "",
        "| commit | subject | changed | static | maps | results changed in | why everything |",
        "| --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        subj = r["subject"].replace("|", "/")
        ch = ", ".join(sorted(Path(p).name for p in r["changed_files"]))
        lines.append(f"| {r['commit']} | {subj} | {r['changed']} | {r['static_share']:.0%} | {r['maps_share']:.0%} | "
                     f"{ch} | {r['maps_everything'][:70].replace('|', '/')} |")
    if unsafe:
        lines += ["", "Unsafe omissions:", *(f"- {c} {p}: {d}" for c, p, d in unsafe)]
    if changed:
        lines += ["", "Result changes (each was selected unless listed above):",
                  *(f"- {c} {p}: {d[:160]}" for c, p, d in changed)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
