"""Replay this repository's history: what selection keeps, and whether it ever dropped a
test whose result changed.

For the newest ``--commits`` first-parent commits of a repository (this one by default, or
``--repo``: a checkout, a clone of a bundle, a git directory), oldest first, each commit's tree
is exported (``git archive``) and run on this machine as a CPU runner would (``CUDA_VISIBLE_DEVICES``
empty: GPU files skip):

- each CPU suite through the tree's own runner (``TRACED_RUN``: its noxfile's session function
  with a stand-in session, then ``python -m ci_register run SUITE --partition 1/1 --gate off``),
  under this checkout's executed-functions tracer (``ci_register/running/_trace_site``, by
  ``PYTHONPATH``, so every process of the run is traced: nox's stand-in, the runner, pytest,
  the tests' servers); the record is mapped to units with this checkout's code;
- the GPU suites' files under one plain pytest (they skip);
- in every pytest, this checkout's import tracker (``gates/record/import_map.py``, loaded by
  path so that the old tree's ``gates`` package stays the tree's) records each file's import map,
  and the tree's own gates plugin records outcomes and metrics;
- the tree's runner map (``RUNNER_PROBE``).

One run per commit serves twice: as the head of its own change and as the base of the
next. For each change (parent -> commit), the selection of the current code decides on the
commit's tree with this checkout's ``suites/catalog.toml`` ``[select]``: with the static graph
alone, with the maps recorded at the parent, and with the maps and the parent's
executed-functions records (function-level evidence). Figures: the share of the registered
est_time kept, and **unsafe omissions**: a file left out although, between the parent's run
and the commit's, a test of it changed outcome, appeared or vanished, or changed a metric
(a metric that differs between two runs of one commit is noisy and compared by key, unit and
sample count). Load evidence too: a file left out whose map holds a changed file, and a
file dropped for a suite whose run *at the commit* executed a changed function.

    python benchmarks/replay_selection.py --rev a1d3d76 --commits 62 --jobs 15 \
        --json /tmp/replay.json --out benchmarks/results/replay_selection.md

``--jobs N`` runs N commits at once (each in its own folder and processes).
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

from ci_register.planning.evidence import Evidence, ExecutedRecord, change_kinds, not_executed  # noqa: E402
from ci_register.planning.imports import scan  # noqa: E402
from ci_register.planning.select import RunnerMap, parse_select, select_by_suite, select_tests  # noqa: E402
from ci_register.registered.catalog import load_catalog  # noqa: E402
from ci_register.running.executed import DIR_ENV, ROOT_ENV, SITE_DIR, collect, incomplete_reason  # noqa: E402

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


# A CPU suite's run at an old tree, traced as the product traces it (ci_register.running.executed):
# this process starts under this checkout's sitecustomize tracer (CI_REGISTER_EXECUTED_DIR), as a
# nox process would, then
# - the nox phase: the tree's noxfile imported and the suite's session function called with a
#   stand-in session whose commands do not run (installs are no-ops, `session.error` is noted and
#   the function goes on, as CI's run passes its checks; the `ci_register run` command is noted). If
#   the function stops before that command, the record is marked incomplete;
# - the runner phase: the tree's own `python -m ci_register run SUITE --partition 1/1 --gate off`,
#   for real, in this process; the pytest it starts (with the replay plugin, for outcomes and maps)
#   and that pytest's children inherit the tracer through PYTHONPATH.
TRACED_RUN = r"""
import importlib, importlib.util, json, os, runpy, sys, types
suite, history = sys.argv[1], sys.argv[2]
tracer = sys.modules["_ci_register_executed"]._PROCESS
problems = []

class _Stop(Exception):
    pass

class StandIn:
    virtualenv = types.SimpleNamespace(location=None, venv_backend="none")
    python = None
    interactive = False
    bin = os.path.dirname(sys.executable)
    bin_paths = [bin]
    def __init__(self, name):
        self.name, self.posargs, self.env, self.runs, self.errors = name, [], {}, [], []
    def run(self, *args, **kw):
        self.runs.append([str(a) for a in args])
        return ""
    run_install = run_always = run
    def error(self, *args):  # CI's run passes the session's checks (its CPU torch): go on as it would
        self.errors.append(" ".join(map(str, args))[:200])
    def skip(self, *args):
        raise _Stop(" ".join(map(str, args)))
    def __getattr__(self, name):
        return lambda *a, **k: None

try:
    import nox
    real_nox = True
except ImportError:  # a host without nox: enough of it for a noxfile to define its sessions
    real_nox = False
    registry = {}
    nox = types.ModuleType("nox")
    def session(*a, **k):
        def deco(f):
            registry[k.get("name") or f.__name__] = f
            return f
        return deco(a[0]) if a and callable(a[0]) else deco
    nox.session, nox.options, nox.Session = session, types.SimpleNamespace(), StandIn
    nox.command = types.SimpleNamespace(CommandFailed=type("CommandFailed", (Exception,), {}))
    nox.parametrize = lambda *a, **k: (lambda f: f)
    nox.__getattr__ = lambda name: types.SimpleNamespace()  # anything else a noxfile reads
    sys.modules["nox"] = nox
session = StandIn(suite)
try:
    spec = importlib.util.spec_from_file_location("noxfile", "noxfile.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    funcs = dict(nox.registry.get()) if real_nox else registry
    if suite not in funcs:
        raise _Stop(f"no nox session {suite}")
    funcs[suite](session)
except BaseException as exc:
    problems.append(f"nox phase: {exc!r}"[:300])
if not any("ci_register" in r and "run" in r for r in session.runs):
    tracer.note(f"replay: the nox session of {suite} did not reach the runner ({problems[-1] if problems else 'no command'})")
sys.argv = ["ci_register", "run", suite, "--partition", "1/1", "--gate", "off", "--history", history,
            "--catalog", "suites/catalog.toml", "--root", "."]
code = 0
try:
    runpy.run_module("ci_register", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
print(json.dumps({"problems": problems + session.errors, "exit": code, "real_nox": real_nox}))
"""


def _metrics(hist: Path) -> dict[str, dict[str, tuple]]:
    metrics: dict[str, dict[str, tuple]] = {}
    if hist.exists():
        conn = sqlite3.connect(hist)
        try:
            for nodeid, key, unit, count, median in conn.execute("SELECT nodeid, key, unit, count, median FROM metrics"):
                metrics.setdefault(nodeid.split("::")[0], {})[f"{nodeid}|{key}"] = (unit, count, median)
        except sqlite3.Error:
            pass
        conn.close()
    return metrics


def run_traced_suite(tree: Path, suite: str, work: Path, timeout_s: float) -> dict:
    """One CPU suite through the tree's own runner, traced (TRACED_RUN): outcomes, metrics,
    import maps and the executed-functions record."""
    out, hist, folder = work / f"out-{suite}.json", work / f"h-{suite}.db", work / f"exec-{suite}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for p in (out, hist):
        p.unlink(missing_ok=True)
    (work / "replay_plugin.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE_DIR), str(tree), str(work)]),
           "PYTEST_PLUGINS": "replay_plugin", DIR_ENV: str(folder), ROOT_ENV: str(tree),
           "REPLAY_TRACKER": str(HERE / "gates" / "record" / "import_map.py"), "REPLAY_OUT": str(out),
           "GATES_IMPORT_MAPS": "0", "GATES_COMMIT": "replay", "CI_REGISTER_FILE_SLACK_S": "60",
           "CUDA_VISIBLE_DEVICES": "",  # a CPU runner's view, also on a GPU host
           "CI_REGISTER_TRACE": "1"}  # on Python <= 3.11 too (off there by default: its cost)
    for k in ("GATES_HISTORY", "CI"):
        env.pop(k, None)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", TRACED_RUN, suite, str(hist)], cwd=tree, capture_output=True, text=True,
                       env=env, timeout=timeout_s, check=False)
    secs = time.perf_counter() - t0
    try:
        probe = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        probe = {"problems": [f"traced run exit {r.returncode}: {r.stderr[-500:]}"], "exit": r.returncode}
    if not out.exists():
        raise RuntimeError(f"{suite} in {tree}: pytest wrote nothing ({probe}): {r.stdout[-1500:]}{r.stderr[-1500:]}")
    got = json.loads(out.read_text())
    got["metrics"] = _metrics(hist)
    got["seconds"] = secs
    got["probe"] = probe
    got["executed"] = collect(folder, tree)
    shutil.rmtree(folder, ignore_errors=True)
    return got


def do_commit(job: tuple) -> dict:
    """Everything one commit needs, in its own folder (a --jobs worker): its CPU suites run
    traced through its runner, its GPU suites' files under one plain pytest (they skip
    here), and its runner map."""
    repo, c, i, catalog_path, timeout_s, work_root, twice = job
    work = Path(work_root) / f"c{i}"
    tree = work / "tree"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    export(Path(repo), c, tree)
    catalog = load_catalog(Path(catalog_path))
    regs, _ = registrations(tree, catalog)
    by_suite: dict[str, set[str]] = {}
    for s_, p_, _ in regs:
        by_suite.setdefault(s_, set()).add(p_)
    run: dict = {"commit": c, "outcomes": {}, "metrics": {}, "maps": {}, "suites": {}, "seconds": 0.0}
    gpu_files = sorted({p for s_, ps in by_suite.items() if catalog.suites[s_].is_gpu for p in ps})
    for rep in range(2 if twice else 1):
        got_all: dict = {"outcomes": {}, "metrics": {}, "maps": {}}
        for suite in sorted(s_ for s_ in by_suite if not catalog.suites[s_].is_gpu):
            got = run_traced_suite(tree, suite, work, timeout_s)
            if rep == 0:
                run["suites"][suite] = {"executed": got["executed"], "probe": got["probe"], "seconds": got["seconds"],
                                        "files": sorted(by_suite[suite])}
                run["seconds"] += got["seconds"]
            for k in ("outcomes", "metrics", "maps"):
                got_all[k].update(got[k])
        if gpu_files:
            got = run_commit(tree, gpu_files, work, timeout_s)
            if rep == 0:
                run["seconds"] += got["seconds"]
            for k in ("outcomes", "metrics", "maps"):
                got_all[k].update(got[k])
        if rep == 0:
            run.update(got_all)
        else:
            run["again_metrics"] = got_all["metrics"]
    run["runner"] = runner_probe(tree)
    shutil.rmtree(work, ignore_errors=True)
    return run


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
           "GATES_IMPORT_MAPS": "0", "GATES_COMMIT": "replay", "CI_REGISTER_FILE_SLACK_S": "60",
           "CUDA_VISIBLE_DEVICES": ""}  # GPU files skip, as on a CPU runner, also on a GPU host
    env.pop("GATES_HISTORY", None)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", "-p", "replay_plugin",
                        "--gates-suite", "replay", "--gates-history", str(hist), "--timeout", "300"],
                       cwd=tree, capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
    secs = time.perf_counter() - t0
    if not out.exists():
        raise RuntimeError(f"pytest in {tree} wrote nothing (exit {r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
    got = json.loads(out.read_text())
    metrics = _metrics(hist)
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


def _show(repo: Path, rev: str, path: str) -> bytes | None:
    r = subprocess.run(["git", "--git-dir", str(repo), "show", f"{rev}:{path}"], capture_output=True, check=False)
    return r.stdout if r.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=HERE,
                    help="a git checkout, clone (of a bundle too) or git directory (default: this checkout)")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--commits", type=int, default=62, help="changes to replay (one more run than this)")
    ap.add_argument("--catalog", type=Path, default=HERE / "suites" / "catalog.toml")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="raw per-commit runs (to re-analyse without rerunning)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds one suite's run may take")
    ap.add_argument("--jobs", type=int, default=1, help="commits run at once, each in its own processes")
    ap.add_argument("--runs-from", type=Path, default=None,
                    help="reuse the runs of an earlier --json of this version (selection decided afresh)")
    a = ap.parse_args(argv)
    if a.jobs < 1:
        ap.error(f"--jobs {a.jobs}: give 1 or more")
    where = a.repo.parent if a.repo.name == ".git" else a.repo
    got_dir = subprocess.run(["git", "-C", str(where), "rev-parse", "--git-common-dir"], capture_output=True, text=True,
                             check=False)
    if got_dir.returncode != 0:
        ap.error(f"--repo {a.repo}: not a git repository ({got_dir.stderr.strip()[:200]})")
    repo = Path(got_dir.stdout.strip())
    repo = repo if repo.is_absolute() else (where / repo).resolve()
    commits = git(repo, "rev-list", "--first-parent", f"-n{a.commits + 1}", a.rev).split()[::-1]
    catalog = load_catalog(a.catalog)
    config = parse_select(catalog.select, str(a.catalog), catalog_path="suites/catalog.toml", suites=catalog.suites)
    earlier: dict[str, dict] = {}
    if a.runs_from:
        got = json.loads(a.runs_from.read_text())
        earlier = {r["commit"]: r for r in got["runs"] if "suites" in r}  # older files hold no executed sets
    runs: dict[int, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [(str(repo), c, i, str(a.catalog), a.timeout, tmp, i == len(commits) - 1)
                for i, c in enumerate(commits) if c not in earlier]
        for i, c in enumerate(commits):
            if c in earlier:
                runs[i] = earlier[c]

        def done(run: dict) -> None:
            i = commits.index(run["commit"])
            runs[i] = run
            sets = {s: (incomplete_reason(d["executed"]) or f"{len(d['executed'])} entries") for s, d in run["suites"].items()}
            print(f"[{len(runs)}/{len(commits)}] {run['commit'][:10]} in {run['seconds']:.0f} s, {len(run['maps'])} maps, "
                  f"runner map {len(run['runner']['files'])} files, executed {sets}", file=sys.stderr)
            if a.json:  # after every run: an interrupted replay resumes with --runs-from
                a.json.write_text(json.dumps({"runs": [runs[k] for k in sorted(runs)], "rows": [], "noisy": []}, default=str))

        if a.jobs == 1:
            for job in jobs:
                done(do_commit(job))
        else:
            import concurrent.futures  # noqa: PLC0415

            with concurrent.futures.ProcessPoolExecutor(max_workers=a.jobs) as pool:
                for fut in concurrent.futures.as_completed([pool.submit(do_commit, job) for job in jobs]):
                    done(fut.result())
        runs_l = [runs[i] for i in range(len(commits))]
        newest = runs_l[-1]
        noisy: set[str] = set()
        for path in set(newest["metrics"]) | set(newest.get("again_metrics", {})):
            for key, v in newest["metrics"].get(path, {}).items():
                w = newest.get("again_metrics", {}).get(path, {}).get(key)
                if w is None or list(w)[2] != list(v)[2]:
                    noisy.add(key.split("|", 1)[1])
        t0 = time.perf_counter()
        if a.jobs == 1:
            rows = [analyse(repo, commits, i, runs_l, catalog, config, Path(tmp)) for i in range(1, len(commits))]
        else:  # each change's selection is independent: spread them too (a worker gets the runs it reads)
            import concurrent.futures  # noqa: PLC0415

            with concurrent.futures.ProcessPoolExecutor(max_workers=a.jobs) as pool:
                futs = [pool.submit(analyse, repo, commits, i, {i - 1: runs_l[i - 1], i: runs_l[i]}, catalog, config,
                                    Path(tmp)) for i in range(1, len(commits))]
                rows = [f.result() for f in futs]
        print(f"selection decided for {len(rows)} changes in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for r in rows:
        base, head = runs_l[r["base_i"]], runs_l[r["base_i"] + 1]
        diffs = file_changes(base, head, noisy)
        r["changed_files"] = diffs
        r["unsafe"] = {p: d for p, d in diffs.items() if p in r["left"]}
        r["func_unsafe"] = {f"{s_} {p}": diffs[p] for s_, p in r["func_left"] if p in diffs}
        changed = set(r["changed_paths"])
        r["load_unsafe"] = sorted(p for p in r["left"] if changed & set(base["maps"].get(p, ())) or changed & set(head["maps"].get(p, ())))
        r["runner_unsafe"] = [] if r["maps_everything"] else sorted(
            changed & (set(base["runner"]["files"]) | set(head["runner"]["files"])))
    if a.json:
        a.json.write_text(json.dumps({"runs": runs_l, "rows": rows, "noisy": sorted(noisy)}, default=str))
    text = report(rows, runs_l, noisy, commits, argv, a.jobs)
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


_SCAN_CACHE: dict = {}


def analyse(repo: Path, commits: list[str], i: int, runs, catalog, config, tmp: Path) -> dict:
    """One change (commits[i-1] -> commits[i]): what selection keeps with the static graph,
    with the recorded maps, and with the executed-functions records of the parent's run."""
    c, parent = commits[i], commits[i - 1]
    tree = tmp / f"a{i}"
    export(repo, c, tree)
    regs, _ = registrations(tree, catalog)
    changed = [p for p in git(repo, "diff-tree", "--no-commit-id", "-r", "--name-only", "--no-renames", parent, c).split("\n") if p]
    base, head = runs[i - 1], runs[i]
    tests = sorted({p for _, p, _ in regs})
    est = {(s_, p): e for s_, p, e in regs}
    suites: dict[str, set[str]] = {}
    for s_, p, _ in regs:
        suites.setdefault(s_, set()).add(p)
    total = sum(est.values())
    out = {"commit": c[:10], "subject": git(repo, "log", "-1", "--format=%s", c).strip()[:60],
           "changed": len(changed), "total": total, "base_i": i - 1, "changed_paths": changed}
    runner = RunnerMap(frozenset(base["runner"]["files"]), f"runner map at {parent[:10]}")
    maps = {p: set(f) for p, f in base["maps"].items()}
    graph = scan(tree, config.package_roots, cache=_SCAN_CACHE)
    for label, sel in (("static", select_tests(graph, tests, changed, config, None, None)),
                       ("maps", select_tests(graph, tests, changed, config, maps, runner))):
        out[f"{label}_share"] = sum(e for (s_, p), e in est.items() if sel.keeps(s_, p)) / total if total else 1.0
        out[f"{label}_everything"] = sel.everything
        if label == "maps":
            out["left"] = [p for p in tests if not any(sel.keeps(s_, q) for s_, q in est if q == p)]
    records = {s_: ExecutedRecord(s_, frozenset(d["executed"]), parent) for s_, d in base["suites"].items()
               if incomplete_reason(d["executed"]) is None}
    sources = {p: (_show(repo, parent, p), _show(repo, c, p)) for p in changed if p.endswith(".py")}
    equal, bodies = change_kinds(sources)
    sel = select_by_suite(graph, suites, changed, config, maps, runner, Evidence(equal, bodies, records, []))
    out["func_share"] = sum(e for (s_, p), e in est.items() if sel.keeps(s_, p)) / total if total else 1.0
    out["func_everything"] = {s_: x.everything for s_, x in sel.by_suite.items()} if sel.by_suite else sel.everything
    out["func_left"] = [[s_, p] for (s_, p) in est if not sel.keeps(s_, p)]
    out["func_notes"] = [n for n in sel.notes if "not executed" in n or "syntax tree" in n]
    out["bodies"] = {p: list(u) for p, u in bodies.items()}
    out["equal"] = sorted(equal)
    # Load evidence at the commit: a file dropped for a suite by the parent's record although the
    # suite's run at the commit executed one of its changed functions.
    out["exec_unsafe"] = sorted(
        f"{s_} {p}" for s_, rec in records.items() for p in not_executed(bodies, rec)
        if incomplete_reason(head["suites"].get(s_, {}).get("executed", ["<incomplete: no run>"])) is None
        and p not in not_executed({p: bodies[p]}, ExecutedRecord(s_, frozenset(head["suites"][s_]["executed"]), c)))
    shutil.rmtree(tree, ignore_errors=True)
    return out


def report(rows: list[dict], runs: list[dict], noisy: set[str], commits: list[str], argv: list[str], jobs: int = 1) -> str:
    static = [r["static_share"] for r in rows]
    maps = [r["maps_share"] for r in rows]
    funcs = [r["func_share"] for r in rows]
    func_unsafe = [(r["commit"], k, d) for r in rows for k, d in r["func_unsafe"].items()]
    exec_unsafe = [(r["commit"], k) for r in rows for k in r["exec_unsafe"]]
    records = [(s_, incomplete_reason(d["executed"])) for r in runs for s_, d in r["suites"].items()]
    dropped = sorted({n for r in rows for n in r["func_notes"]})
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
        f"Machine: {os.cpu_count()} CPU cores, no GPU (GPU files skip, as on a CPU runner), Python "
        f"{sys.version.split()[0]}, {jobs} commit(s) at once; per commit: each CPU suite through the tree's own "
        f"runner, traced, and the GPU suites' files in one pytest; median {statistics.median(r['seconds'] for r in runs):.0f} s.",
        "",
        f"- **mean share of est_time kept, with function-level evidence: {statistics.fmean(funcs):.1%}** "
        f"(median {statistics.median(funcs):.1%}); unsafe omissions of it (a (suite, file) left out whose tests "
        f"changed): **{len(func_unsafe)}**; files dropped for a suite whose run at the commit executed a changed "
        f"function: {len(exec_unsafe)}" + (f" ({', '.join(f'{c} {k}' for c, k in exec_unsafe[:6])})" if exec_unsafe else ""),
        f"- executed-functions records: {sum(w is None for _, w in records)} of {len(records)} CPU-suite runs usable; "
        f"the nox phase ran with nox itself in {sum(bool(d['probe'].get('real_nox')) for r in runs for d in r['suites'].values())}"
        f" of them (else a minimal stand-in module)"
        + (f"; not usable: {'; '.join(sorted({f'{s_}: {w[:120]}' for s_, w in records if w}))[:600]}"
           if any(w for _, w in records) else ""),
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
        "| commit | subject | changed | static | maps | functions | results changed in | why everything (maps) |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        subj = r["subject"].replace("|", "/")
        ch = ", ".join(sorted(Path(p).name for p in r["changed_files"]))
        lines.append(f"| {r['commit']} | {subj} | {r['changed']} | {r['static_share']:.0%} | {r['maps_share']:.0%} | {r['func_share']:.0%} | "
                     f"{ch} | {r['maps_everything'][:70].replace('|', '/')} |")
    if unsafe or func_unsafe:
        lines += ["", "Unsafe omissions:", *(f"- {c} {p}: {d}" for c, p, d in unsafe),
                  *(f"- (functions) {c} {k}: {d}" for c, k, d in func_unsafe)]
    if dropped:
        lines += ["", "What the function-level evidence left out (per suite, from the parent's run):",
                  *(f"- {n[:200]}" for n in dropped)]
    if changed:
        lines += ["", "Result changes (each was selected unless listed above):",
                  *(f"- {c} {p}: {d[:160]}" for c, p, d in changed)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
