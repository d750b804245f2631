"""What a suite run executed (ci_register.running.executed) and what selection makes of it
(ci_register.planning.evidence, select_by_suite)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from own_runner import own_runner_tree, run_cpu_suite, write

from ci_register.planning.evidence import (
    EXECUTED_MAP_PATH,
    Evidence,
    ExecutedRecord,
    executed_records,
    not_executed,
    record_problem,
    since_record,
    still_describes,
)
from ci_register.planning.imports import scan
from ci_register.planning.recorded_imports import recorded_maps
from ci_register.planning.select import parse_select, select_by_suite, select_in_tree
from ci_register.registered.catalog import load_catalog
from ci_register.running import executed
from gates.record import import_map

REPO = Path(__file__).resolve().parents[1]
MODULE = "def used():\n    return 1\n\n\ndef unused():\n    return 2\n\n\ndef in_child():\n    return 3\n"


# A process traced as a suite run's processes are: through sitecustomize (CI_REGISTER_EXECUTED_DIR).
PROGRAM = """
import subprocess, sys
import pkg.core
for _ in range(1000):
    pkg.core.used()
subprocess.run([sys.executable, "-c", "import pkg.core; pkg.core.in_child()"], check=True)
"""


def traced_run(root: Path, program: str, **extra_env: str) -> tuple[Path, subprocess.CompletedProcess]:
    folder = root / "exec"
    folder.mkdir(exist_ok=True)
    env = {**os.environ, executed.DIR_ENV: str(folder), executed.ROOT_ENV: str(root),
           "PYTHONPATH": os.pathsep.join([str(executed.SITE_DIR), str(root)]), executed.TRACE_ENV: "1",
           **extra_env}
    r = subprocess.run([sys.executable, "-c", program], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    return folder, r


def test_a_traced_process_and_its_child_record_what_ran(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": MODULE})
    folder, r = traced_run(tmp_path, PROGRAM)
    assert r.returncode == 0, r.stderr
    got = executed.collect(folder, tmp_path)
    assert {"pkg/core.py", "pkg/core.py::used", "pkg/core.py::in_child"} <= set(got)  # the child's too
    assert "pkg/core.py::unused" not in got
    # One line per code object, not per call: 1000 calls of used() wrote it once.
    lines = [ln for f in folder.iterdir() for ln in f.read_text().splitlines() if ln.endswith("\t1")]
    assert len(lines) == 1, lines


def test_tracing_off_records_nothing(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": MODULE})
    folder, r = traced_run(tmp_path, PROGRAM, **{executed.TRACE_ENV: "0"})
    assert r.returncode == 0, r.stderr
    assert list(folder.iterdir()) == []
    assert executed.collect(folder, tmp_path, need_pid=12345)[0].startswith("<incomplete: pytest's process")


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is Python >= 3.12; this is the <= 3.11 path's twin")
def test_the_312_path_uses_sys_monitoring_once_per_function(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": MODULE})
    program = ("import sys, pkg.core\nt = sys.modules['_ci_register_executed']._PROCESS\n"
               "assert t._tool is not None and t._trace_fn is None, (t._tool, t._trace_fn)\n"
               "assert sys.monitoring.get_tool(t._tool) == 'ci_register.executed'\n"
               "assert sys.gettrace() is None\n" + PROGRAM)
    folder, r = traced_run(tmp_path, program)
    assert r.returncode == 0, r.stderr
    assert "pkg/core.py::used" in executed.collect(folder, tmp_path)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python >= 3.12 traces with sys.monitoring")
def test_the_311_path_uses_a_call_tracer_and_notices_its_replacement(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/core.py": MODULE})
    program = ("import sys, pkg.core\nt = sys.modules['_ci_register_executed']._PROCESS\n"
               "assert sys.gettrace() is t._trace_fn is not None\n" + PROGRAM
               + "sys.settrace(lambda *a: None)\nt.check()\n")
    folder, r = traced_run(tmp_path, program)
    assert r.returncode == 0, r.stderr
    got = executed.collect(folder, tmp_path)
    assert len(got) == 1 and got[0].startswith("<incomplete: sys.settrace was called at <string>:"), got


@pytest.mark.parametrize(("argv", "env", "unseen"), [
    (["git", "status"], None, False),  # a native program runs no project Python
    ([sys.executable, "-c", "pass"], None, False),  # inherits the environment: traced
    ([sys.executable, "-I", "-c", "pass"], None, True),  # isolated: no sitecustomize
    ([sys.executable, "-S", "-c", "pass"], None, True),
    ([sys.executable, "-c", "pass"], {"PATH": "/usr/bin"}, True),  # an environment without the tracer
    (["sh", "-c", "python3 x.py"], {"PATH": "/usr/bin"}, True),
])
def test_children_that_would_run_unseen_make_the_record_incomplete(argv, env, unseen, monkeypatch):
    folder = "/tmp/x"  # env None: the child inherits this (traced) process's environment
    monkeypatch.setenv(executed.DIR_ENV, folder)
    monkeypatch.setenv(executed.ROOT_ENV, "/tmp")
    monkeypatch.setenv("PYTHONPATH", str(executed.SITE_DIR))
    if env is not None:
        env = dict(env)
    got = executed._unseen_child("subprocess.Popen", (None, argv, None, env), folder)
    assert bool(got) is unseen, got


def test_tracing_is_on_by_default_only_where_it_is_cheap():
    assert executed.tracing_wanted({}) is (sys.version_info >= (3, 12))
    assert executed.tracing_wanted({executed.TRACE_ENV: "1"}) and not executed.tracing_wanted({executed.TRACE_ENV: "0"})


def test_collect_marks_before_start_files_whole_and_problems_incomplete(tmp_path):
    write(tmp_path, {"a.py": "def f():\n    pass\n", "b.py": "def g():\n    pass\n"})
    folder = tmp_path / "exec"
    folder.mkdir()
    (folder / "1-aa").write_text(f"{tmp_path}/a.py\t*\n{tmp_path}/b.py\t0\n{tmp_path}/b.py\t1\n/elsewhere/c.py\t1\n")
    assert executed.collect(folder, tmp_path) == ["a.py", "a.py::*", "b.py", "b.py::g"]
    (folder / "2-bb").write_text("!\tstarted python3 -I\n")
    assert executed.collect(folder, tmp_path) == ["<incomplete: started python3 -I>"]


def test_the_executed_path_is_one_literal_everywhere():
    from ci_register.planning import evidence

    assert executed.EXECUTED_MAP_PATH == evidence.EXECUTED_MAP_PATH == import_map.EXECUTED_MAP_PATH


# ------------------------------------------------------------------ selection, pure

TREE = {
    "pkg/__init__.py": "",
    "pkg/core.py": MODULE,
    "tests/test_a.py": "import pkg.core\n",
    "tests/test_b.py": "import pkg.core\n",
}
SUITES = {"cpu": {"tests/test_a.py"}, "gpu": {"tests/test_b.py"}}


def test_a_body_change_not_executed_in_a_suite_selects_nothing_there(tmp_path):
    write(tmp_path, TREE)
    config = parse_select({}, "catalog.toml")
    graph = scan(tmp_path, config.package_roots)
    rec = ExecutedRecord("cpu", frozenset({"pkg/core.py", "pkg/core.py::used"}), "abc1234567")
    ev = Evidence(set(), {"pkg/core.py": ("unused",)}, {"cpu": rec}, [])
    sel = select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev)
    assert not sel.keeps("cpu", "tests/test_a.py")
    assert sel.keeps("gpu", "tests/test_b.py")  # no record: the file-level rules
    assert "bodies of unused changed; not executed in suite cpu's run at abc1234567" in " ".join(sel.notes)
    # Two suites with the same record share one selection, each keeping its own files.
    both = {"cpu": rec, "gpu": ExecutedRecord("gpu", rec.entries, "abc1234567")}
    ev = Evidence(set(), {"pkg/core.py": ("unused",)}, both, [])
    sel = select_by_suite(graph, SUITES, ["pkg/core.py", "tests/test_b.py"], config, evidence=ev)
    assert sel.keeps("gpu", "tests/test_b.py") and not sel.keeps("cpu", "tests/test_a.py")
    # A changed function that ran: the file-level rules for that suite too.
    ev = Evidence(set(), {"pkg/core.py": ("used", "unused")}, {"cpu": rec}, [])
    sel = select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev)
    assert sel.keeps("cpu", "tests/test_a.py") and sel.keeps("gpu", "tests/test_b.py")
    # A file loaded before the tracer started counts as wholly run.
    whole = ExecutedRecord("cpu", frozenset({"pkg/core.py", "pkg/core.py::*"}), "abc")
    assert not_executed({"pkg/core.py": ("unused",)}, whole) == {}
    # A comment-only change affects nothing, in every suite, with or without a record.
    sel = select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=Evidence({"pkg/core.py"}, {}, {}, []))
    assert not sel.keeps("cpu", "tests/test_a.py") and not sel.keeps("gpu", "tests/test_b.py")
    # Declared paths stay declared.
    sel = select_by_suite(graph, SUITES, ["noxfile.py"], config, evidence=Evidence({"noxfile.py"}, {}, {}, []))
    assert "declared to run everything" in sel.everything


def test_records_are_used_only_when_complete_fresh_and_in_the_base_history():
    now = datetime(2026, 12, 3, tzinfo=UTC)
    rows = [
        {"suite": "cpu", "path": EXECUTED_MAP_PATH, "commit_sha": "a" * 40, "recorded_at": "2026-12-02T00:00:00Z",
         "files": ["pkg/core.py", "pkg/core.py::used"]},
        {"suite": "serving", "path": EXECUTED_MAP_PATH, "commit_sha": "b" * 40, "recorded_at": "2026-12-02T00:00:00Z",
         "files": ["<incomplete: started python3 -I>"]},
        {"suite": "old", "path": EXECUTED_MAP_PATH, "commit_sha": "c" * 40, "recorded_at": "2026-10-01T00:00:00Z",
         "files": ["x.py"]},
    ]
    got, notes = executed_records(rows, now, 30)
    assert set(got) == {"cpu"} and len(notes) == 2
    rec = got["cpu"]
    assert record_problem(rec, known=True, ancestor=True) is None
    assert "unknown to git" in record_problem(rec, known=False, ancestor=False)
    assert "not in the base's history" in record_problem(rec, known=True, ancestor=False)


def test_a_record_before_the_base_is_judged_on_the_change_since_it(tmp_path):
    """A record made at R, some commits before the base: what changed between R and the base
    counts as changed too, by the same rules."""
    write(tmp_path, TREE)
    config = parse_select({}, "catalog.toml")
    graph = scan(tmp_path, config.package_roots)
    rec = ExecutedRecord("cpu", frozenset({"pkg/core.py", "pkg/core.py::used"}), "abc1234567")
    # The pull request changes `unused` (never ran); between R and the base, `used` changed (it ran).
    since = since_record("abc1234567", [("M", "pkg/core.py")], {"pkg/core.py": (MODULE, MODULE.replace(
        "return 1", "return 11").replace("return 2", "return 22"))})
    assert since.bodies == {"pkg/core.py": ("unused", "used")}
    ev = Evidence(set(), {"pkg/core.py": ("unused",)}, {"cpu": rec}, [], {"abc1234567": since})
    sel = select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev)
    assert sel.keeps("cpu", "tests/test_a.py"), sel.summary()
    # Only dead bodies changed since R: nothing runs in cpu.
    since = since_record("abc1234567", [("M", "pkg/core.py")], {"pkg/core.py": (MODULE, MODULE.replace(
        "return 2", "return 22").replace("return 3", "return 33"))})
    ev = Evidence(set(), {"pkg/core.py": ("unused",)}, {"cpu": rec}, [], {"abc1234567": since})
    assert not select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev).keeps("cpu", "tests/test_a.py")
    # A conftest added between R and the base (the pull request does not touch it): its tests run.
    write(tmp_path, {"tests/conftest.py": "X = 1\n"})
    graph = scan(tmp_path, config.package_roots)
    since = since_record("abc1234567", [("M", "pkg/core.py"), ("A", "tests/conftest.py")], {
        "pkg/core.py": (MODULE, MODULE.replace("return 2", "return 22")), "tests/conftest.py": (None, "X = 1\n")})
    ev = Evidence(set(), {"pkg/core.py": ("unused",)}, {"cpu": rec}, [], {"abc1234567": since})
    sel = select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev)
    assert sel.keeps("cpu", "tests/test_a.py") and "tests/conftest.py" in sel.why("cpu", "tests/test_a.py")
    assert any("changed between the record's commit and the base count too" in n for n in sel.by_suite["cpu"].notes)
    # Data the run may read, changed since R: the file-level rules (everything for an unknown file).
    since = since_record("abc1234567", [("M", "pkg/core.py"), ("M", "data.json")], {
        "pkg/core.py": (MODULE, MODULE.replace("return 2", "return 22"))})
    ev = Evidence(set(), {"pkg/core.py": ("unused",)}, {"cpu": rec}, [], {"abc1234567": since})
    assert select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev).keeps("cpu", "tests/test_a.py")
    # A pull request of docs only, on a base whose ran-at-R `used` changed since R: the record's
    # whole change keeps test_a, the static graph on the change itself keeps nothing; both must.
    since = since_record("abc1234567", [("M", "pkg/core.py"), ("M", "README.md")], {
        "pkg/core.py": (MODULE, MODULE.replace("return 1", "return 11"))})
    ev = Evidence(set(), {}, {"cpu": rec}, [], {"abc1234567": since})
    sel = select_by_suite(graph, SUITES, ["README.md"], config, evidence=ev)
    assert not sel.keeps("cpu", "tests/test_a.py") and not sel.keeps("gpu", "tests/test_b.py")
    # The import maps recorded at R too: a suite without an executed record (gpu) is judged on
    # the change since R with them, and kept only where the static graph on the change keeps it.
    ev = Evidence(set(), {}, {}, [], {}, maps_since=since)
    sel = select_by_suite(graph, SUITES, ["README.md"], config, evidence=ev)
    assert not sel.keeps("gpu", "tests/test_b.py")
    ev = Evidence(set(), {"pkg/core.py": ("unused",)}, {}, [], {}, maps_since=since)
    assert select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev).keeps("gpu", "tests/test_b.py")
    # Between R and the base only a file the run never loaded changed (one nothing imports: on
    # its own it runs everything): R's record still describes the base, so it judges the pull
    # request's own change as a record at the base would.
    write(tmp_path, {"pkg/orphan.py": "X = 2\n"})
    graph = scan(tmp_path, config.package_roots)
    dead = MODULE.replace("return 2", "return 22")
    for to_base, kept in (([("M", "pkg/orphan.py")], False), ([("M", "pkg/orphan.py"), ("M", "pkg/core.py")], True)):
        since = since_record("abc1234567", [("M", "pkg/core.py"), ("M", "pkg/orphan.py")], {
            "pkg/core.py": (MODULE, dead), "pkg/orphan.py": ("X = 1\n", "X = 2\n")}, to_base)
        assert still_describes(rec.entries, since, config.ignore) is not kept
        ev = Evidence(set(), {"pkg/core.py": ("unused",)}, {"cpu": rec}, [], {"abc1234567": since})
        sel = select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev)
        assert sel.keeps("cpu", "tests/test_a.py") is kept, (to_base, sel.summary())
    # A file changed since R and changed back by the pull request: no change.
    since = since_record("abc1234567", [], {})
    ev = Evidence(set(), {"pkg/core.py": ("used",)}, {"cpu": rec}, [], {"abc1234567": since})
    assert not select_by_suite(graph, SUITES, ["pkg/core.py"], config, evidence=ev).keeps("cpu", "tests/test_a.py")


# ------------------------------------------------------------------ end to end

def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A tree holding its own runner (tests/own_runner.py), its suite run once at commit A:
    the `<executed>` row is stored."""
    root = own_runner_tree(tmp_path_factory.mktemp("executed_e2e"), {
        "pkg/__init__.py": "",
        "pkg/core.py": MODULE,
        "suites/test_core.py": ('from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="cpu")\n'
                                "import pkg.core\n\ndef test_x():\n    assert pkg.core.used() == 1\n"),
        ".gitignore": "h.db\nresults/\n__pycache__/\n",
    })
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "A")
    sha = git(root, "rev-parse", "HEAD")
    # CI_REGISTER_TRACE=1: on by default on Python >= 3.12 only.
    run_cpu_suite(root, GATES_COMMIT=sha, **{executed.TRACE_ENV: "1"})
    return root, sha


def change(root: Path, branch: str, old: str, new: str, base: str = "main") -> None:
    git(root, "checkout", "-q", "-B", branch, base)
    p = root / "pkg" / "core.py"
    p.write_text(p.read_text().replace(old, new))
    git(root, "commit", "-qam", branch)


def select(root: Path, base: str, now: datetime | None = None):
    catalog = load_catalog(root / "suites" / "catalog.toml")
    changed = git(root, "diff", "--name-only", f"{base}...HEAD").splitlines()
    return select_in_tree(root, catalog, ["suites/test_core.py"], changed, str(root / "h.db"), now=now,
                          suites={"cpu": {"suites/test_core.py"}}, base=base)


def test_a_run_stores_what_it_executed(recorded):
    root, sha = recorded
    rows, problem = recorded_maps(root / "h.db")
    assert problem is None
    row = next(r for r in rows if r["path"] == EXECUTED_MAP_PATH)
    files = set(row["files"])
    assert row["suite"] == "cpu" and row["commit_sha"] == sha
    assert {"pkg/core.py::used", "suites/test_core.py::test_x", "ci_register/running/runner.py",
            "gates/record/plugin.py"} <= files, sorted(files)[:50]
    assert "pkg/core.py::unused" not in files and not any(f.startswith("<incomplete") for f in files)


def test_selection_by_what_the_run_executed(recorded):
    root, _ = recorded
    # A body no run executed: nothing runs, and the reason names the record.
    change(root, "dead", "return 2", "return 22")
    s = select(root, "main")
    assert not s.keeps("cpu", "suites/test_core.py"), s.summary()
    assert any("bodies of unused changed; not executed in suite cpu's run at" in n for n in s.notes), s.notes
    # A body the run executed: the file-level rules (the test imports the module).
    change(root, "live", "return 1", "return 11")
    assert select(root, "main").keeps("cpu", "suites/test_core.py")
    # A stale record (past the bound): the file-level rules.
    change(root, "dead", "return 2", "return 22")
    later = datetime.now(UTC) + timedelta(days=31)
    assert select(root, "main", now=later).keeps("cpu", "suites/test_core.py")
    # The record serves later commits of main: a body it never ran, changed between its commit
    # and the base, is no change either.
    change(root, "moved-main", "return 3", "return 33")
    change(root, "dead2", "return 2", "return 22", base="moved-main")
    s = select(root, "moved-main")
    assert not s.keeps("cpu", "suites/test_core.py"), s.summary()
    assert "1 commit(s) before the base" in s.maps, s.maps
    git(root, "checkout", "-q", "main")


def test_a_fault_planted_between_the_record_and_the_base_is_selected(recorded):
    """The record was made at A; main then gets a fault in a function A's run executed; a pull
    request on top changes only a function that never ran. The test that the fault fails is
    selected (the change since A counts), and it does fail."""
    root, _ = recorded
    change(root, "faulty-main", "return 1", 'raise RuntimeError("planted fault")')
    change(root, "pr", "return 2", "return 22", base="faulty-main")
    s = select(root, "faulty-main")
    assert s.keeps("cpu", "suites/test_core.py"), s.summary()
    assert "pkg/core.py" in s.why("cpu", "suites/test_core.py")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suites/test_core.py"],
                       cwd=root, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "planted fault" in r.stdout, r.stdout[-2000:]
    git(root, "checkout", "-q", "main")


def test_the_nox_session_hands_its_tracer_to_the_runner(monkeypatch, tmp_path):
    """nox's process traces itself (begin at import, in nox) and gives the runner's command
    alone the folder and the sitecustomize path (not its pip installs)."""
    from ci_register.registered.catalog import load_catalog
    from ci_register.running import nox_sessions

    handed = {executed.DIR_ENV: str(tmp_path), executed.ROOT_ENV: str(REPO),
              "PYTHONPATH": os.pathsep.join([str(executed.SITE_DIR), "/elsewhere"])}
    monkeypatch.setattr(nox_sessions, "_TRACE_ENV", handed)
    monkeypatch.setenv("PYTHONPATH", "/mine")
    monkeypatch.setenv("CI", "1")  # no local history path
    seen: list[tuple[list[str], dict]] = []

    class Session:
        posargs: list[str] = []
        env: dict = {}

        def run(self, *args, **kwargs):
            seen.append(([str(a) for a in args], dict(self.env)))

        def install(self, *args, **kwargs):
            seen.append((["install", *args], dict(self.env)))

        def log(self, *args):
            pass

        def error(self, *args):
            raise AssertionError(args)

    def prepare(session, suite):
        session.install("pkg")

    suite = load_catalog(REPO / "suites" / "catalog.toml").suites["cpu"]
    fn = nox_sessions._session(suite, REPO / "suites" / "catalog.toml", REPO, None, prepare)
    fn(Session())
    (install, install_env), (cmd, env) = seen
    assert executed.DIR_ENV not in install_env
    assert cmd[1:4] == ["-m", "ci_register", "run"]
    assert env[executed.DIR_ENV] == str(tmp_path) and env[executed.ROOT_ENV] == str(REPO)
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(executed.SITE_DIR), "/mine"]
    # Only nox's own process starts that tracer (a test importing the module does not).
    assert nox_sessions.in_nox(["/usr/bin/nox", "-s", "cpu"]) and not nox_sessions.in_nox(["pytest"])


def test_maps_recorded_before_the_base_are_judged_on_the_change_since_them(tmp_path):
    """select_in_tree hands the change since the maps' commits to the suites without an
    executed record (select_by_suite's maps_since): several commits are merged."""
    from ci_register.planning.evidence import maps_change, merge_since

    write(tmp_path, TREE)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "A")
    a = git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "pkg" / "core.py").write_text(MODULE.replace("return 1", "return 11"))
    git(tmp_path, "commit", "-qam", "B")
    b = git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "README.md").write_text("x\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "C")
    since, notes = maps_change(tmp_path, {a, "f" * 40}, b, "HEAD")
    assert since is not None and set(since.changed) == {"pkg/core.py", "README.md"}, since
    assert since.bodies == {"pkg/core.py": ("used",)} and since.to_base == (("M", "pkg/core.py"),)
    assert any("outside the base's history" in n for n in notes), notes
    assert maps_change(tmp_path, {b}, b, "HEAD")[0] is None  # recorded at the base: the change itself
    # Merged: a path structural in one commit's change is structural in the merge.
    one = since_record("a", [("M", "x.py")], {"x.py": ("def f():\n    return 1\n", "def f():\n    return 2\n")}, [])
    two = since_record("b", [("M", "x.py")], {"x.py": ("def g():\n    return 1\n", "def f():\n    return 2\n")}, [])
    both = merge_since([one, two])
    assert one.bodies == {"x.py": ("f",)} and "x.py" not in both.bodies and "x.py" not in both.equal
