"""Faults injected for real into a suite run: a segfault, os._exit, a C hang, signals to
the process group, leaked children. Nothing finished is lost; the run says what happened."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ci_register.running.supervise import group_members

REPO = Path(__file__).resolve().parents[1]
CATALOG = ('[suites.cpu]\nbackend = "cpu"\ndescription = "cpu"\nschedule = "per-commit"\n'
           "shard_budget_s = 600\n")
REG = 'from ci_register import register_cpu_ci\nregister_cpu_ci(est_time={t}, suite="cpu")\n'
# est_time 60: longest first, so it runs (and records a metric) before test_b.
PASSING = REG.format(t=60) + textwrap.dedent("""
    def test_a_first(metrics):
        metrics.record("lat", [1.0, 1.1], unit="s", better="lower")
    """)


def make_tree(tmp: Path, body: str, t: int = 1) -> Path:
    (tmp / "suites").mkdir()
    (tmp / "suites" / "catalog.toml").write_text(CATALOG)
    (tmp / "suites" / "test_a.py").write_text(PASSING)
    (tmp / "suites" / "test_b.py").write_text(REG.format(t=t) + textwrap.dedent(body))
    return tmp


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(REPO), CI_REGISTER_FILE_SLACK_S="0",
             CI_REGISTER_KILL_GRACE_S="1", **extra)
    e.pop("GATES_HISTORY", None)
    return e


def start(tmp: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ci_register", "run", "cpu", "--history", str(tmp / "h.db"),
         "--gate", "off", *args], cwd=tmp, env=env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


# How long a poll below waits for what a healthy run does in well under a second when idle:
# generous, since a loaded 2-core machine starts the runner's processes late (counted
# loops of 0.05 s sleeps gave up after 5-15 s there). Only a broken run waits it out.
WAIT_S = 120.0


def until(done, within_s: float = WAIT_S, every_s: float = 0.05) -> bool:
    """Poll ``done()`` until true or ``within_s`` passed; its last answer."""
    end = time.monotonic() + within_s
    while not done():
        if time.monotonic() > end:
            return bool(done())
        time.sleep(every_s)
    return True


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        _kill_session(proc.pid)  # pytest has a group of its own, but the runner's session
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out + err


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session `sid` but us (what a failed test leaves)."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def the_run(db: Path) -> tuple:
    (run,) = rows(db, "SELECT run_id, status, exit_status FROM runs")
    return run


def report_exit(db: Path) -> int:
    """gate-report's exit code for the run: every surface must say what the runner did."""
    from gates.commands.cli import main as gate_report  # noqa: PLC0415

    return gate_report(["--history", str(db), "--no-health", "--format", "json",
                        "--out", str(db.with_name("report.json"))])


def test_a_segfault_keeps_the_finished_test_and_its_metric_and_names_the_crash(tmp_path):
    tree = make_tree(tmp_path, """
        import ctypes
        def test_b_crash():
            ctypes.string_at(0)
        """)
    rc, out = finish(start(tree))
    assert rc == 1, out
    assert "pytest was killed by SIGSEGV while running suites/test_b.py::test_b_crash" in out
    db = tree / "h.db"
    run_id, status, exit_status = the_run(db)
    assert (status, exit_status) == ("crashed", -11)
    tests = dict(rows(db, "SELECT nodeid, outcome FROM tests"))
    assert tests == {"suites/test_a.py::test_a_first": "passed",
                     "suites/test_b.py::test_b_crash": "error"}
    (error,) = rows(db, "SELECT error FROM tests WHERE nodeid LIKE '%crash'")[0]
    assert "did not finish" in error and "SIGSEGV" in error
    assert rows(db, "SELECT key, median FROM metrics") == [("lat", 1.05)]


@pytest.mark.parametrize("code", [0, 2, 3, 4])
def test_os_exit_inside_a_test_is_a_crash_not_a_pass(tmp_path, code):
    # Exit 1 whatever code the test exited with: os._exit(3) made the run exit 3 and
    # os._exit(2) exit 2 ("bad input"), and gate-report said the same; os._exit(4) read
    # as pytest refusing its arguments (exit 2) and left the run `incomplete` for good.
    tree = make_tree(tmp_path, f"""
        import os
        def test_b_exit():
            os._exit({code})
        """)
    rc, out = finish(start(tree))
    assert rc == 1 and f"exited with code {code} before finishing" in out, out
    assert the_run(tree / "h.db")[1:] == ("crashed", 1)
    assert report_exit(tree / "h.db") == 1


@pytest.mark.parametrize("gate", ["off", "enforce"])
def test_a_conftest_that_exits_0_before_the_run_began_is_never_a_pass(tmp_path, gate):
    # pytest stopped before the plugin began the run, so no run was recorded and
    # gates.record.finish found nothing to mark: the runner took pytest's 0, and with
    # --gate off the session passed (with the gate on it exited 2, "bad input").
    tree = make_tree(tmp_path, """
        def test_b_fails():
            assert False
        """)
    rc, out = finish(start(tree, "--gate", "off"))  # a first run creates the history
    assert rc == 1, out
    (tree / "conftest.py").write_text("import os\nos._exit(0)\n")
    rc, out = finish(start(tree, "--gate", gate))
    assert rc == 1, out
    assert "pytest exited with code 0 before finishing its session" in out, out
    assert "was recorded (pytest stopped before its session began)" in out, out


@pytest.mark.parametrize("gate", ["off", "enforce"])
def test_a_history_that_fills_up_at_the_end_is_a_crash_exit_1_not_3(tmp_path, gate):
    # The recorder's last write fails the way SQLite fails on a full disk (a tmpfs filled
    # mid-run did this for real). pytest then exits 3 (INTERNALERROR), which the runner
    # used to hand on silently: an exit code no CI reader knows, nothing gated, and the
    # run left `incomplete`.
    tree = make_tree(tmp_path, """
        def test_b_ok():
            pass
        """)
    (tree / "conftest.py").write_text(textwrap.dedent("""
        import sqlite3
        from gates.store.run_writes import RunWrites

        def record_run(self, record, attempt=None):
            raise self._h.backend._fail(sqlite3.OperationalError("database or disk is full"))

        RunWrites.record_run = record_run
        """))
    rc, out = finish(start(tree, "--gate", gate))
    assert rc == 1, out
    assert "database or disk is full; free space on its filesystem" in out, out
    assert "internal error (exit 3)" in out and "gate - (the run did not finish)" in out, out
    assert the_run(tree / "h.db")[1:] == ("crashed", 1)
    assert report_exit(tree / "h.db") == 1


def test_a_crash_with_the_gate_on_exits_1_like_any_crash_not_2(tmp_path):
    # The gate refuses an unfinished run as bad input (2); the runner must not ask it, or a
    # crash reads as "bad input or hardware" (README's exit codes).
    tree = make_tree(tmp_path, """
        import os
        def test_b_exit():
            os._exit(0)
        """)
    rc, out = finish(start(tree, "--gate", "enforce"))
    assert rc == 1, out
    assert "gate - (the run did not finish)" in out and "can be gated" not in out, out
    assert the_run(tree / "h.db")[1] == "crashed"


def test_a_test_hung_in_c_is_killed_from_outside_and_recorded(tmp_path):
    # Signals blocked, then pause(): pytest-timeout's SIGALRM can never interrupt it,
    # as with a CUDA or NCCL wait. Budget: 2 x est_time 1 s + slack 0 = 2 s, grace 1 s.
    tree = make_tree(tmp_path, """
        import ctypes, signal
        def test_b_hang():
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT,
                                                      signal.SIGTERM})
            ctypes.CDLL(None).pause()
        """)
    rc, out = finish(start(tree))
    assert rc == 1 and "hung: suites/test_b.py overran its budget" in out, out
    run_id, status, _ = the_run(tree / "h.db")
    assert status == "crashed"
    (error,) = rows(tree / "h.db", "SELECT error FROM tests WHERE nodeid LIKE '%hang'")[0]
    assert "did not finish" in error and "hung" in error


SLOW = """
    import time
    def test_b_slow():
        time.sleep(60)
    """


def _wait_running(tree: Path, proc: subprocess.Popen) -> None:
    db = tree / "h.db"
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        if db.exists():
            try:
                if rows(db, "SELECT 1 FROM tests WHERE nodeid LIKE '%slow'"):
                    return
            except sqlite3.Error:
                pass
        if proc.poll() is not None:
            raise AssertionError(proc.communicate())
        time.sleep(0.05)
    raise AssertionError("the slow test never started")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_process_group_ends_in_an_interrupted_run(tmp_path, sig):
    tree = make_tree(tmp_path, SLOW, t=30)
    proc = start(tree)
    _wait_running(tree, proc)
    os.killpg(proc.pid, sig)  # the terminal's Ctrl-C reaches the whole foreground group
    rc, out = finish(proc)
    assert rc == 128 + sig, out
    _, status, exit_status = the_run(tree / "h.db")
    # The plugin recorded pytest's 2; reports read 128 + N, as the runner exited.
    assert (status, exit_status) == ("interrupted", 128 + sig)
    assert report_exit(tree / "h.db") == 128 + sig
    tests = dict(rows(tree / "h.db", "SELECT nodeid, outcome FROM tests"))
    assert tests["suites/test_a.py::test_a_first"] == "passed"
    assert rows(tree / "h.db", "SELECT count(*) FROM metrics") == [(1,)]


def test_sigterm_to_the_runner_alone_is_forwarded(tmp_path):
    tree = make_tree(tmp_path, SLOW, t=30)
    proc = start(tree)
    _wait_running(tree, proc)
    proc.send_signal(signal.SIGTERM)
    rc, out = finish(proc)
    assert rc == 128 + signal.SIGTERM, out
    assert the_run(tree / "h.db")[1:] == ("interrupted", 128 + signal.SIGTERM)
    assert report_exit(tree / "h.db") == 128 + signal.SIGTERM


def test_the_parent_killed_takes_the_runner_and_pytest_with_it(tmp_path):
    # nox killed by SIGTERM forwards nothing: the runner learns of it by PDEATHSIG.
    tree = make_tree(tmp_path, SLOW, t=30)
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])",
         sys.executable, "-m", "ci_register", "run", "cpu", "--history", str(tree / "h.db"),
         "--gate", "off"], cwd=tree, env=env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_running(tree, parent)
        parent.kill()
        parent.wait()
        until(lambda: the_run(tree / "h.db")[1] != "incomplete")
        assert the_run(tree / "h.db")[1] == "interrupted"
        until(lambda: not group_members(parent.pid) and not _pytest_alive(tree))
        assert not _pytest_alive(tree)
    finally:
        _kill_tree_processes(tree)


def _pids_in(tree: Path) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/cwd") == str(tree) and int(name) != os.getpid():
                    out.append(int(name))
            except OSError:
                pass
    return out


def _pytest_alive(tree: Path) -> bool:
    return bool(_pids_in(tree))


def _kill_tree_processes(tree: Path) -> None:
    for pid in _pids_in(tree):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_child_a_test_leaves_behind_is_killed_at_the_end(tmp_path):
    marker = tmp_path / "child.pid"
    tree = make_tree(tmp_path, f"""
        import subprocess, sys
        def test_b_leak():
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            open({str(marker)!r}, "w").write(str(p.pid))
        """)
    try:
        rc, out = finish(start(tree))
        assert rc == 0, out
        assert "killed 1 process(es) the tests left running" in out
        pid = int(marker.read_text())

        def gone() -> bool:  # killed: gone, or a zombie its new parent has yet to reap
            try:
                return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
            except FileNotFoundError:
                return True

        assert until(gone)  # SIGKILL'd: a loaded machine runs its exit later than 0.1 s
    finally:
        _kill_tree_processes(tree)


def test_a_foreign_history_is_refused_untouched_with_exit_2(tmp_path):
    tree = make_tree(tmp_path, "def test_b():\n    pass\n")
    foreign = tree / "h.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('ada')")
    conn.close()
    before = foreign.read_bytes()
    rc, out = finish(start(tree))
    assert rc == 2, out
    assert "not a gates history" in out
    assert foreign.read_bytes() == before  # no switch to WAL, nothing written
    assert not (tree / "h.db-wal").exists()


# What the reader runs: a report (reads) and a writer's open (refused, with the fix).
_READ_ONLY_READER = """
import sys
from pathlib import Path
from gates.commands.cli import main
from gates.store.history import HistoryError
from gates.store.open import open_history
db = Path(sys.argv[1])
try:
    (db.parent / "probe").touch()
except PermissionError:
    pass
else:
    sys.exit("the folder is writable to this process: the test's setup failed")
assert main(["--history", str(db), "--no-health"]) in (0, 1)
try:
    open_history(db)
except HistoryError as e:
    assert "folder is read-only" in str(e), e
else:
    sys.exit("open_history wrote into a read-only folder")
print("read and refused")
"""


def _without_dac_override() -> None:  # in the reader, between fork and exec
    """Root reads and writes any file through CAP_DAC_OVERRIDE (and searches any folder
    through CAP_DAC_READ_SEARCH): drop both from the bounding set, so the exec'd reader
    is root held to the owner's mode bits (CI runs as root; the folder is root's)."""
    import ctypes  # noqa: PLC0415

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (needs CAP_SETPCAP, as root has)
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL


def test_a_history_in_a_read_only_folder_is_read_and_never_written(tmp_path):
    from report_history import make_history

    folder = tmp_path / "ro"
    folder.mkdir()
    make_history(folder / "history.db")
    folder.chmod(0o555)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _READ_ONLY_READER, str(folder / "history.db")],
            env=dict(env(), PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests'}"),
            preexec_fn=_without_dac_override if os.geteuid() == 0 else None,
            capture_output=True, text=True, timeout=600, check=False)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 0 and "read and refused" in done.stdout, done.stdout + done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["history.db"]


def test_concurrent_runs_in_one_checkout_do_not_collide(tmp_path):
    tree = make_tree(tmp_path, "def test_b():\n    pass\n")
    procs = [start(tree) for _ in range(3)]
    results = [finish(p) for p in procs]
    assert [rc for rc, _ in results] == [0, 0, 0], results
    plans = list((tree / "results").glob("plan-cpu-1-of-1-*.json"))
    assert len(plans) == 3
    assert rows(tree / "h.db", "SELECT count(*) FROM runs WHERE status = 'complete'") == [(3,)]


def _pytest_pid(tree: Path) -> int:
    for pid in _pids_in(tree):
        try:
            if b"\x00-m\x00pytest\x00" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            pass
    raise AssertionError("no pytest process")


def test_sigkill_of_pytest_keeps_what_finished(tmp_path):
    tree = make_tree(tmp_path, SLOW, t=30)
    proc = start(tree)
    _wait_running(tree, proc)
    os.kill(_pytest_pid(tree), signal.SIGKILL)
    rc, out = finish(proc)
    assert rc == 1 and "killed by SIGKILL while running suites/test_b.py::test_b_slow" in out
    assert the_run(tree / "h.db")[1] == "crashed"
    assert rows(tree / "h.db", "SELECT count(*) FROM metrics") == [(1,)]


HUNG_IN_C = """
    import ctypes, signal, subprocess, sys
    def test_b_slow():
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT,
                                                  signal.SIGTERM})
        ctypes.CDLL(None).pause()
    """
SLOW_WITH_CHILD = """
    import subprocess, sys, time
    def test_b_slow():
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        time.sleep(60)
    """


@pytest.mark.parametrize("victim", ["runner", "runner's group"])
@pytest.mark.parametrize(("body", "status"), [(HUNG_IN_C, "crashed"),
                                              (SLOW_WITH_CHILD, "interrupted")],
                         ids=["hung-in-c", "python-sleep"])
def test_sigkill_of_the_runner_stops_pytest_and_keeps_what_finished(tmp_path, body, status,
                                                                    victim):
    # The runner cannot clean up after SIGKILL, and pytest's PDEATHSIG SIGTERM is blocked
    # by a test hung in C, as in a CUDA or NCCL wait: the runner's watchdog stops the
    # group. A test in Python code still unwinds: the run ends interrupted.
    tree = make_tree(tmp_path, body, t=30)
    proc = start(tree)
    try:
        _wait_running(tree, proc)
        pytest_pid = _pytest_pid(tree)
        until(lambda: len(group_members(pytest_pid)) == 2)  # the test's child started
        assert len(group_members(pytest_pid)) == 2
        time.sleep(0.3)  # into pause() or sleep()
        if victim == "runner":
            proc.kill()
        else:  # a CI cancel that kills the runner's group (pytest has a group of its own)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # The test sleeps or pauses for ever: only the watchdog ends the group (grace 1 s,
        # CI_REGISTER_KILL_GRACE_S). Waited for generously: a loaded machine schedules the
        # watchdog late, and an 11 s bound read that as the watchdog failing.
        until(lambda: not group_members(pytest_pid))
        assert not group_members(pytest_pid), "pytest's group outlived the runner"
        db = tree / "h.db"
        until(lambda: the_run(db)[1] != "incomplete")  # the watchdog marks it after the group
        assert the_run(db)[1] == status
        tests = dict(rows(db, "SELECT nodeid, outcome FROM tests"))
        assert tests["suites/test_a.py::test_a_first"] == "passed"
        assert rows(db, "SELECT key, median FROM metrics") == [("lat", 1.05)]
        if status == "crashed":
            (error,) = rows(db, "SELECT error FROM tests WHERE nodeid LIKE '%slow'")[0]
            assert "suite runner was killed" in error
    finally:
        _kill_session(proc.pid)
        _kill_tree_processes(tree)
        proc.communicate()


def test_a_test_that_swallows_ctrl_c_is_killed_after_the_grace(tmp_path):
    tree = make_tree(tmp_path, """
        import time
        def test_b_slow():
            while True:
                try:
                    time.sleep(60)
                except BaseException:
                    pass
        """, t=30)
    proc = start(tree)
    _wait_running(tree, proc)
    os.killpg(proc.pid, signal.SIGINT)
    rc, out = finish(proc)
    assert rc == 130, out  # the test swallows Ctrl-C for ever: only the kill ends it
    assert the_run(tree / "h.db")[1] == "interrupted"
    assert not _pids_in(tree)


NOX_CATALOG = CATALOG + ('[suites.gpu1]\nbackend = "cuda"\ndescription = "one H200"\n'
                         'schedule = "per-commit"\nshard_budget_s = 600\n'
                         "[suites.gpu1.hardware]\ngpu_count = 1\n")


def nox_tree(tmp: Path) -> Path:
    # A GPU session runs in nox's own interpreter (no venv to build): the real noxfile,
    # with fake hardware, exercises nox's Ctrl-C and SIGTERM handling in seconds.
    make_tree(tmp, SLOW, t=30)
    (tmp / "suites" / "catalog.toml").write_text(NOX_CATALOG)
    for name in ("test_a.py", "test_b.py"):
        path = tmp / "suites" / name
        path.write_text(path.read_text().replace("register_cpu_ci", "register_cuda_ci")
                        .replace('suite="cpu"', 'suite="gpu1"'))
    (tmp / "noxfile.py").write_text((REPO / "noxfile.py").read_text())
    for package in ("ci_register", "gates"):
        (tmp / package).symlink_to(REPO / package)
    return tmp


def start_nox(tree: Path) -> subprocess.Popen:
    fake = '{"gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}]}'
    return subprocess.Popen(
        [sys.executable, "-m", "nox", "-s", "gpu1", "--", "--history", str(tree / "h.db"),
         "--gate", "off"], cwd=tree, env=env(CI_REGISTER_FAKE_HARDWARE=fake),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.parametrize("how", ["ctrl-c to the group", "sigterm to nox alone",
                                 "sigint to nox alone"])
def test_signals_through_nox_end_in_an_interrupted_run_and_no_orphan(tmp_path, how):
    tree = nox_tree(tmp_path)
    proc = start_nox(tree)
    try:
        _wait_running(tree, proc)
        if how.startswith("ctrl-c"):
            os.killpg(proc.pid, signal.SIGINT)
        elif how.startswith("sigint"):  # `kill -INT` of nox's pid: not ignored, not exit 0
            proc.send_signal(signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        rc, out = finish(proc)
        assert rc != 0, out
        # After SIGTERM nox is gone at once; the runner finishes later.
        until(lambda: the_run(tree / "h.db")[1] != "incomplete" and not _pids_in(tree), every_s=0.1)
        assert the_run(tree / "h.db")[1] == "interrupted", out
        tests = dict(rows(tree / "h.db", "SELECT nodeid, outcome FROM tests"))
        assert tests["suites/test_a.py::test_a_first"] == "passed"
        assert not _pids_in(tree)
    finally:
        _kill_tree_processes(tree)


def test_a_test_that_changes_directory_does_not_blind_the_runner(tmp_path):
    # test_a (runs first) leaves the process in another folder; test_b then hangs in C.
    # The progress file must still reach the runner, naming test_b's file and deadline.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tree = tmp_path / "t"
    tree.mkdir()
    make_tree(tree, """
        import ctypes, signal
        def test_b_hang():
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT,
                                                      signal.SIGTERM})
            ctypes.CDLL(None).pause()
        """)
    (tree / "suites" / "test_a.py").write_text(PASSING + textwrap.dedent(f"""
        def test_a_moves():
            import os
            os.chdir({str(elsewhere)!r})
        """))
    rc, out = finish(start(tree))
    assert rc == 1 and "hung: suites/test_b.py" in out, out
    assert list(elsewhere.iterdir()) == []  # nothing of the run written where the test went


def test_a_child_in_a_session_of_its_own_is_killed_at_the_end(tmp_path):
    marker = tmp_path / "child.pid"
    tree = make_tree(tmp_path, f"""
        import subprocess, sys
        def test_b_daemon():
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                 start_new_session=True)
            open({str(marker)!r}, "w").write(str(p.pid))
        """)
    try:
        rc, out = finish(start(tree))
        assert rc == 0 and "killed 1 process(es)" in out, out
        pid = int(marker.read_text())
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    finally:
        _kill_tree_processes(tree)


def test_a_results_path_that_is_a_file_is_one_line(tmp_path):
    tree = make_tree(tmp_path, "def test_b():\n    pass\n")
    (tree / "taken").write_text("x")
    rc, out = finish(start(tree, "--results", "taken"))
    assert rc == 2 and "--results taken: cannot create the folder" in out
    assert "Traceback" not in out


def test_a_bad_k_expression_is_exit_2_and_never_a_complete_run(tmp_path):
    tree = make_tree(tmp_path, "def test_b():\n    pass\n")
    rc, out = finish(start(tree, "-k", "((("))
    assert rc == 2, out
    assert the_run(tree / "h.db")[1] == "interrupted"


# ------------------------------------------------------------- stale runs (issue 40)

KILLED_WRITER = """
import os, signal, sys
from gates.store.open import open_history
from gates.store.provenance import Provenance
h = open_history(sys.argv[1])
h.hold_writer_lock()
h.run_writes.start_run(Provenance(run_id=sys.argv[2], suite="cpu", commit="c" * 40, branch="main",
                       fingerprint="cpu", hardware={}))
print("started", flush=True)
if sys.argv[3] == "die":
    os.kill(os.getpid(), signal.SIGKILL)  # mid-run: no finish, no runner, no watchdog
sys.stdin.read()  # alive until the test closes our stdin
"""


def _writer(db: Path, run_id: str, how: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(db), run_id, how],
                            env=env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    return proc


def test_a_run_left_incomplete_by_a_killed_writer_is_closed_as_crashed(tmp_path):
    from gates.store.open import open_history

    db = tmp_path / "h.db"
    dead = _writer(db, "dead" * 8, "die")
    dead.wait(timeout=30)
    assert rows(db, "SELECT status FROM runs") == [("incomplete",)]
    with open_history(db) as h:
        assert h.hold_writer_lock() == ["dead" * 8]
    assert rows(db, "SELECT status FROM runs") == [("crashed",)]


def test_a_live_writers_incomplete_run_is_left_alone(tmp_path):
    from gates.store.open import open_history

    db = tmp_path / "h.db"
    dead = _writer(db, "dead" * 8, "die")
    dead.wait(timeout=30)
    live = _writer(db, "live" * 8, "live")  # the first writer after it closes the dead run
    try:
        with open_history(db) as h:
            assert h.hold_writer_lock() == []  # a writer is alive: its run stays open
        assert dict(rows(db, "SELECT run_id, status FROM runs")) == {
            "dead" * 8: "crashed", "live" * 8: "incomplete"}
    finally:
        live.communicate(timeout=30)
    with open_history(db) as h:  # it ended without finishing: stale now
        assert h.hold_writer_lock() == ["live" * 8]


def test_the_next_suite_run_closes_a_stale_run_and_says_so(tmp_path):
    tree = make_tree(tmp_path, "def test_b():\n    pass\n")
    dead = _writer(tree / "h.db", "dead" * 8, "die")
    dead.wait(timeout=30)
    rc, out = finish(start(tree))
    assert rc == 0 and "closed 1 run(s) left incomplete" in out, out
    statuses = dict(rows(tree / "h.db", "SELECT run_id, status FROM runs"))
    assert statuses.pop("dead" * 8) == "crashed" and list(statuses.values()) == ["complete"]


# ---------------------------------------------------------------- secrets (issue 40)

@pytest.mark.parametrize("how", ["--history", "GATES_HISTORY"])
def test_a_history_password_is_never_echoed_by_the_runner(tmp_path, how):
    tree = make_tree(tmp_path, "def test_b():\n    pass\n")
    url = ("postgresql://ci:PWSECRET1@127.0.0.1:1/gates?password=PWSECRET2"
           "&options=-c%20password%3DPWSECRET3")
    args = ["--history", url] if how == "--history" else []
    extra = {"GATES_HISTORY": url} if how == "GATES_HISTORY" else {}
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--gate", "off",
                        *args], cwd=tree, env={**env(), **extra}, capture_output=True,
                       text=True, timeout=600)
    text = r.stdout + r.stderr
    assert r.returncode != 0 and "PWSECRET" not in text, text
    assert "ci:***@127.0.0.1" in text  # the echo is there, masked


@pytest.mark.parametrize("how", ["--history", "GATES_HISTORY"])
def test_a_database_url_reaches_no_child_command_line(tmp_path, pg_url, how):
    # Every user of a host can read every command line (ps, /proc/PID/cmdline); the URL,
    # password and all, went to pytest, the gate and the other children as --history.
    # Each child now gets it in GATES_HISTORY. A sitecustomize logs every Python child's
    # argv; the password is a query parameter the test server's trust auth ignores.
    tree = make_tree(tmp_path, "def test_b():\n    pass\n")
    url = pg_url + "&password=PWSECRET9"
    spy = tmp_path / "spy"
    spy.mkdir()
    log = tmp_path / "argv.log"
    (spy / "sitecustomize.py").write_text(
        f"import sys\nwith open({str(log)!r}, 'a') as f:\n    f.write(repr(sys.argv) + '\\n')\n")
    args = ["--history", url] if how == "--history" else []
    e = env()
    e["PYTHONPATH"] = os.pathsep.join([str(spy), str(REPO)])
    if how == "GATES_HISTORY":
        e["GATES_HISTORY"] = url
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--gate", "enforce",
                        *args], cwd=tree, env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    argvs = log.read_text().splitlines()
    children = [a for a in argvs if "gates.gate" in a or "pytest" in a]
    assert len(children) >= 2, argvs  # pytest and the gate ran, and were seen
    leaked = [a for a in argvs[1:] if "PWSECRET9" in a or "postgresql://" in a]
    assert leaked == [], leaked  # argvs[0] is the runner itself, as the caller wrote it
    from gates.store.open import open_history  # noqa: PLC0415

    with open_history(url, create=False, readonly=True) as h:
        assert [r["status"] for r in h.report_reads.runs()] == ["complete"]


def test_the_watchdogs_marking_of_a_dead_runners_run_is_bounded(monkeypatch, capsys):
    # After the runner died, the watchdog ran gates.record.finish with no limit: a locked
    # or unreachable history kept this orphan process waiting forever.
    import io  # noqa: PLC0415

    from ci_register.running import watchdog  # noqa: PLC0415

    monkeypatch.setenv("GATES_STEP_TIMEOUT_S", "0.5")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))  # the runner is gone
    monkeypatch.setattr(watchdog, "group_members", lambda pgid: [])
    # The watchdog ignores Ctrl-C and SIGHUP for the rest of its own process's life; run
    # in this one, it must leave them as they were: a Ctrl-C test after it in the same
    # process (pytest-xdist's order) had its child inherit the ignored SIGINT: exit 2, not 130.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGHUP)}
    began = time.monotonic()
    try:
        assert watchdog.main(["999999", "1", "sleep", "30"]) == 1
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert time.monotonic() - began < 30  # cut at 0.5 s, not the step's own 30 s
    assert "marking its run ran past 0.5 s (GATES_STEP_TIMEOUT_S)" in capsys.readouterr().err


# The gate step ends without finishing: a signal, a crash's exit before its verdicts are
# written, or past GATES_STEP_TIMEOUT_S. Injected into the real `python -m gates.gate`
# child by a sitecustomize that only that command line triggers.
GATE_FAULTS = {
    "killed": "os.kill(os.getpid(), signal.SIGKILL)",
    "crashed": "os._exit(1)",
    "timed-out": "time.sleep(60)",
}


def shimmed_session(tmp_path: Path, shim: str, *, history: str | None = None,
                    **extra: str) -> tuple[int, str, Path]:
    """A real `ci_register run cpu --gate enforce` session of one passing test, its
    child processes started with ``shim`` as their sitecustomize (to fault the gate or
    the runner's mark); history ``tree/h.db`` unless a URL is given. Returns (exit
    code, output, tree)."""
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "sitecustomize.py").write_text(shim)
    (tmp_path / "tree").mkdir()
    tree = make_tree(tmp_path / "tree", "def test_b():\n    pass\n")
    e = env(**extra)
    e["PYTHONPATH"] = f"{tmp_path / 'shim'}{os.pathsep}{REPO}"
    where = ["--history", str(tree / "h.db")] if history is None else []
    if history is not None:
        e["GATES_HISTORY"] = history
    proc = subprocess.Popen(
        [sys.executable, "-m", "ci_register", "run", "cpu", *where, "--gate", "enforce"],
        cwd=tree, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    rc, out = finish(proc)
    return rc, out, tree


@pytest.mark.parametrize("fault", sorted(GATE_FAULTS))
def test_a_gate_that_did_not_finish_reads_failed_on_every_report(tmp_path, fault):
    # No verdicts were saved, so every report said "passed: no gate failed" of a session
    # that exited 1 (and a SIGKILLed gate made the session itself exit 0).
    rc, out, tree = shimmed_session(
        tmp_path, "import os, signal, sys, time\n"
        "if sys.orig_argv[1:3] == ['-m', 'gates.gate']:\n"
        f"    {GATE_FAULTS[fault]}\n", GATES_STEP_TIMEOUT_S="3")
    db = tree / "h.db"
    assert rc == 1, out
    assert "was not gated: the gate " in out and "marked gate-unfinished" in out, out
    assert the_run(db)[1:] == ("gate-unfinished", 0)
    assert rows(db, "SELECT count(*) FROM verdicts") == [(0,)]
    from gates.commands.cli import main as gate_report  # noqa: PLC0415

    reports = {}
    for fmt in ("text", "md", "json", "html"):
        path = tree / f"report.{fmt}"
        assert gate_report(["--history", str(db), "--no-health", "--format", fmt,
                            "--out", str(path)]) == 1, fmt
        reports[fmt] = path.read_text(encoding="utf-8")
    for fmt in ("text", "md"):
        assert "no gate failed" not in reports[fmt], reports[fmt]
        assert "FAILED (exit 1)" in reports[fmt], reports[fmt]
        assert "the gate of 1 run(s) did not finish" in reports[fmt], reports[fmt]
    assert "❌" in reports["md"] and "✅" not in reports["md"].split("\n", 1)[0]
    data = json.loads(reports["json"])
    assert data["exit_code"] == 1
    assert [r["status"] for r in data["runs"]] == ["gate-unfinished"], data["runs"]
    assert "badge b-fail" in reports["html"]
    # The PR comment is built from the same Markdown.
    from gates.report import notify  # noqa: PLC0415

    assert notify.comment_body(reports["md"], None).splitlines()[1].startswith("## ❌")
    # The shard's history merges into the fleet's with the run's status, never refused.
    from gates.store.merge import check_history, merge_histories  # noqa: PLC0415

    assert check_history(db) == []
    merge_histories([db], tmp_path / "fleet.db")
    assert rows(tmp_path / "fleet.db", "SELECT status FROM runs") == [("gate-unfinished",)]


# The gate refuses its input (exit 2) and saves no verdicts: a plan it cannot read (it
# marks the run itself, with its error line), or an exit 2 before it could say why (the
# runner marks it).
GATE_INPUT_FAULTS = {
    "unreadable-plan": ("open(sys.orig_argv[sys.orig_argv.index('--plan') + 1], 'w')"
                        ".write('{not json')",
                        "the gate refused its input: --plan "),
    "exit-2": ("os._exit(2)", "the gate refused its input (exit 2"),
}


@pytest.mark.parametrize("fault", sorted(GATE_INPUT_FAULTS))
def test_a_gate_that_refused_its_input_reads_failed_with_its_reason(tmp_path, fault):
    # The session exited 2, but the run stayed `complete` with no verdicts: gate-report
    # text, md, json, html, the PR comment and the fleet merge read it as passed.
    inject, reason = GATE_INPUT_FAULTS[fault]
    rc, out, tree = shimmed_session(
        tmp_path, "import os, sys\n"
        "if sys.orig_argv[1:3] == ['-m', 'gates.gate']:\n"
        f"    {inject}\n")
    db = tree / "h.db"
    assert rc == 2, out
    assert "is marked gate-error" in out, out
    assert the_run(db)[1:] == ("gate-error", 0)
    assert rows(db, "SELECT count(*) FROM verdicts") == [(0,)]
    (note,) = rows(db, "SELECT gate_note FROM runs")[0]
    assert reason in note, note
    from gates.commands.cli import main as gate_report  # noqa: PLC0415

    reports = {}
    for fmt in ("text", "md", "json", "html"):
        path = tree / f"report.{fmt}"
        assert gate_report(["--history", str(db), "--no-health", "--format", fmt,
                            "--out", str(path)]) == 2, fmt
        reports[fmt] = path.read_text(encoding="utf-8")
    for fmt in ("text", "md"):
        # The text report wraps at 120 columns: compare with its line breaks undone.
        flat = " ".join(reports[fmt].split())
        assert "no gate failed" not in flat, reports[fmt]
        assert "FAILED (exit 2)" in flat, reports[fmt]
        assert "was not judged: " in flat and " ".join(reason.split()) in flat, reports[fmt]
    assert "❌" in reports["md"] and "✅" not in reports["md"].split("\n", 1)[0]
    data = json.loads(reports["json"])
    assert data["exit_code"] == 2
    assert [(r["status"], reason in r["gate_note"]) for r in data["runs"]] == \
        [("gate-error", True)], data["runs"]
    assert "badge b-fail" in reports["html"]
    from gates.report import notify  # noqa: PLC0415

    assert notify.comment_body(reports["md"], None).splitlines()[1].startswith("## ❌")
    from gates.store.merge import check_history, merge_histories  # noqa: PLC0415

    assert check_history(db) == []
    merge_histories([db], tmp_path / "fleet.db")
    assert rows(tmp_path / "fleet.db", "SELECT status, gate_note FROM runs") == \
        [("gate-error", note)]


# The gate never saved a result and nobody could mark the run: the runner's mark failed
# (the history locked past its limit), or the runner itself was SIGKILLed mid-gate.
NEVER_JUDGED = {
    "mark-failed": ("os.kill(os.getpid(), signal.SIGKILL)",
                    "if sys.orig_argv[1:3] == ['-m', 'gates.record.finish']:\n    os._exit(1)\n"),
    "runner-killed": ("os.kill(os.getppid(), signal.SIGKILL); os._exit(1)", ""),
}


@pytest.mark.parametrize("fault", sorted(NEVER_JUDGED))
def test_a_run_whose_gate_never_saved_a_result_reads_failed(tmp_path, fault):
    # The run stayed `complete` with no verdicts and no mark: every report read it as
    # "passed: no gate failed", though the session failed (1) or died (SIGKILL).
    in_gate, elsewhere = NEVER_JUDGED[fault]
    rc, out, tree = shimmed_session(
        tmp_path, "import os, signal, sys\n"
        "if sys.orig_argv[1:3] == ['-m', 'gates.gate']:\n"
        f"    {in_gate}\n{elsewhere}")
    db = tree / "h.db"
    assert rc == (1 if fault == "mark-failed" else -signal.SIGKILL), out
    assert rows(db, "SELECT status, gate_mode, gated_at FROM runs") == \
        [("complete", "enforce", None)]
    assert rows(db, "SELECT count(*) FROM verdicts") == [(0,)]
    from gates.commands.cli import main as gate_report  # noqa: PLC0415

    reports = {}
    for fmt in ("text", "md", "json", "html"):
        path = tree / f"report.{fmt}"
        assert gate_report(["--history", str(db), "--no-health", "--format", fmt,
                            "--out", str(path)]) == 1, fmt
        reports[fmt] = path.read_text(encoding="utf-8")
    for fmt in ("text", "md"):
        assert "no gate failed" not in reports[fmt], reports[fmt]
        assert "the gate did not record a result for 1 run(s)" in reports[fmt], reports[fmt]
    assert json.loads(reports["json"])["exit_code"] == 1
    assert "badge b-fail" in reports["html"]
    from gates.report import notify  # noqa: PLC0415

    assert notify.comment_body(reports["md"], None).splitlines()[1].startswith("## ❌")
    from gates.store.merge import check_history, merge_histories  # noqa: PLC0415

    assert check_history(db) == []
    merge_histories([db], tmp_path / "fleet.db")
    assert report_exit(tmp_path / "fleet.db") == 1


@pytest.mark.parametrize("gate", ["enforce", "warn", "off"])
def test_a_judged_or_ungated_run_still_reads_passed(tmp_path, gate):
    # The other side of "never judged": a gate that saved (no metric failing, or none
    # at all) marks the run, and a run with its gate off needs no mark.
    tree = make_tree(tmp_path, "def test_b():\n    pass\n")
    db = tree / "h.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ci_register", "run", "cpu", "--history", str(db),
         "--gate", gate], cwd=tree, env=env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    rc, out = finish(proc)
    assert rc == 0, out
    ((status, mode, gated_at),) = rows(db, "SELECT status, gate_mode, gated_at FROM runs")
    assert (status, mode, gated_at is None) == ("complete", gate, gate == "off")
    assert report_exit(db) == 0
    # A row written before gate_mode existed (NULL) reads as it did: passed.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET gate_mode = NULL, gated_at = NULL")
    assert report_exit(db) == 0


@pytest.mark.parametrize(("call", "line"), [
    ('register_ci_gate(metric_key="lat", min_change=-1)',
     "register_ci_gate(metric_key='lat'): min_change=-1 is relative (0.05 = 5%); "
     "use a value in [0, 10]"),
    ('register_ci_gate(metric_key="lat", mode="strict")',
     "register_ci_gate(metric_key='lat'): mode='strict'; use one of enforce, warn, off"),
])
def test_a_bad_gate_value_stops_the_session_before_any_test_runs(tmp_path, call, line):
    # It was refused only by the gate, after every test had run (GPU minutes spent on a
    # session that could only exit 2).
    ran = tmp_path / "ran"
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(CATALOG)
    (tmp_path / "suites" / "test_a.py").write_text(
        "from ci_register import register_cpu_ci, register_ci_gate\n"
        'register_cpu_ci(est_time=10, suite="cpu")\n'
        f"{call}\n\n"
        "def test_a(metrics):\n"
        f"    open({str(ran)!r}, 'w').close()\n"
        '    metrics.record("lat", [1.0, 1.1], unit="s", better="lower")\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "ci_register", "run", "cpu", "--history", str(tmp_path / "h.db"),
         "--gate", "enforce"], cwd=tmp_path, env=env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    rc, out = finish(proc)
    assert rc == 2, out
    assert not ran.exists(), out  # no test ran
    assert [ln for ln in out.splitlines() if "test_a.py:3:" in ln] == \
        [f"ERROR: suites/test_a.py:3: {line}"], out
    assert not (tmp_path / "h.db").exists() or rows(tmp_path / "h.db",
                                                    "SELECT count(*) FROM runs") == [(0,)]


def test_a_planned_shard_that_recorded_no_run_fails_the_commits_report(tmp_path):
    # Shard 2/3's job died before pytest began (or its history never reached the merge):
    # the commit's report, its PR comment and the fleet read "passed" on shard 1 alone.
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(CATALOG)
    for name, t in (("a", 10), ("b", 5)):
        (tmp_path / "suites" / f"test_{name}.py").write_text(
            REG.format(t=t) + f"def test_{name}():\n    pass\n")
    db = tmp_path / "h.db"

    def shard(part: str, ci: bool = True) -> int:
        # A CI run's shards carry its URL: they promise their siblings.
        e = env(GATES_COMMIT="c0ffee" * 6 + "c0ff", GATES_BRANCH="main",
                **({"GATES_CI_URL": "https://ci.example/runs/7"} if ci else {}))
        done = subprocess.run(
            [sys.executable, "-m", "ci_register", "run", "cpu", "--history", str(db),
             "--gate", "enforce", "--partition", part], cwd=tmp_path, env=e,
            capture_output=True, text=True, timeout=600)
        return done.returncode

    from gates.commands.cli import main as gate_report  # noqa: PLC0415
    from gates.report import notify  # noqa: PLC0415

    def reports() -> dict[str, str]:
        out = {}
        for fmt in ("text", "md", "json", "html"):
            path = tmp_path / f"report.{fmt}"
            out[fmt] = str(gate_report(["--history", str(db), "--root", str(tmp_path),
                                        "--no-health", "--format", fmt, "--out", str(path)]))
            out[fmt] += "\n" + path.read_text(encoding="utf-8")
        return out

    # Outside CI one shard is run by choice (the adoption guide's `--partition 1/2`):
    # the others are not missing, and the report reads as that shard says.
    assert shard("1/3", ci=False) == 0
    assert reports()["text"].startswith("0\n")
    db.unlink()
    # Two files, three shards: shards 1 and 2 get a file each, shard 3 none.
    assert shard("1/3") == 0 and shard("3/3") == 0  # the empty shard records nothing
    assert rows(db, "SELECT shard_index, planned_shards FROM runs") == [(1, "[1, 2]")]
    got = reports()
    for fmt in ("text", "md"):
        assert got[fmt].startswith("1\n"), got[fmt]
        assert "shard(s) cpu 2/3 recorded no run" in got[fmt], got[fmt]
        assert "3/3" not in got[fmt].split("\n")[1], got[fmt]  # the empty shard is not missing
    data = json.loads(got["json"].split("\n", 1)[1])
    assert data["exit_code"] == 1
    assert [(r["shard"], r["status"]) for r in data["runs"]] == \
        [("1/3", "complete"), ("2/3", "not-recorded")]
    assert "badge b-fail" in got["html"]
    md = got["md"].split("\n", 1)[1]
    assert notify.comment_body(md, None).splitlines()[1].startswith("## ❌")
    # Once shard 2 reports, the commit reads as its shards say.
    assert shard("2/3") == 0
    assert reports()["text"].startswith("0\n")


@pytest.mark.parametrize("fault", ["none", "gate-refused", "never-judged"])
def test_the_gates_marks_on_postgresql(tmp_path, pg_url, fault):
    # The same marks in a fleet's database: gate_mode with the run, gated_at with the
    # verdicts, gate-error with the gate's line; each read by gate-report as on SQLite.
    inject = {"none": "pass",
              "gate-refused": "open(sys.orig_argv[sys.orig_argv.index('--plan') + 1], 'w')"
                              ".write('{not json')",
              "never-judged": "os.kill(os.getpid(), signal.SIGKILL)"}[fault]
    rc, out, _ = shimmed_session(
        tmp_path, "import os, signal, sys\n"
        "if sys.orig_argv[1:3] == ['-m', 'gates.gate']:\n"
        f"    {inject}\n"
        "if sys.orig_argv[1:3] == ['-m', 'gates.record.finish']:\n"
        "    os._exit(1)\n", history=pg_url)
    assert rc == {"none": 0, "gate-refused": 2, "never-judged": 1}[fault], out
    from gates.commands.cli import main as gate_report  # noqa: PLC0415
    from gates.store.open import open_history  # noqa: PLC0415

    with open_history(pg_url, create=False, readonly=True) as h:
        (run,) = h.report_reads.runs()
    assert run["gate_mode"] == "enforce"
    assert (run["status"], run["gated_at"] is not None) == {
        "none": ("complete", True), "gate-refused": ("gate-error", False),
        "never-judged": ("complete", False)}[fault]
    assert run["planned_shards"] == "[1]"
    assert gate_report(["--history", pg_url, "--no-health", "--format", "json",
                        "--out", str(tmp_path / "r.json")]) == rc


def test_a_gate_run_by_hand_on_bad_input_never_fails_an_ungated_or_judged_run(tmp_path):
    # `python -m gates.gate --attempts-left -1` (a typo) on a run its session recorded with
    # --gate off marked it gate-error: a green session's run then read as failed.
    from gates.gate import main as gate  # noqa: PLC0415

    for mode in ("off", "enforce"):
        tree = tmp_path / mode
        tree.mkdir()
        make_tree(tree, "def test_b():\n    pass\n")
        rc, out = finish(subprocess.Popen(
            [sys.executable, "-m", "ci_register", "run", "cpu", "--history",
             str(tree / "h.db"), "--gate", mode], cwd=tree, env=env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True))
        assert rc == 0, out
        run_id = the_run(tree / "h.db")[0]
        assert gate(["--history", str(tree / "h.db"), "--run-id", run_id,
                     "--attempts-left", "-1"]) == 2
        assert the_run(tree / "h.db")[1] == "complete", mode
        assert report_exit(tree / "h.db") == 0


STOPS = {
    "in-a-test": ("", "def test_b_stop():\n    pytest.exit('enough', returncode=0)\n"),
    "in-a-hook": ("import pytest\ndef pytest_runtest_setup(item):\n"
                  "    if 'test_b_stop' in item.nodeid:\n"
                  "        pytest.exit('stop', returncode=0)\n",
                  "def test_b_stop():\n    pass\n"),
    "between-tests": ("import pytest\ndef pytest_runtest_logfinish(nodeid):\n"
                      "    if 'test_a_first' in nodeid:\n"
                      "        pytest.exit('stop', returncode=0)\n",
                      "def test_b_stop():\n    pass\n"),
}


@pytest.mark.parametrize("where", sorted(STOPS))
def test_a_session_stopped_with_exit_0_before_its_tests_ran_is_not_green(tmp_path, where):
    # pytest.exit(returncode=0) after a first test passed: the session exited 0, the run
    # was `complete` with exit 0, and the tests after it never ran.
    conftest, body = STOPS[where]
    tree = make_tree(tmp_path, "import pytest\n" + body + "def test_c_after():\n    assert 0\n")
    if conftest:
        (tree / "suites" / "conftest.py").write_text(conftest)
    rc, out = finish(start(tree))
    assert rc == 2, out
    assert "the session ended with exit 0 before" in out and "never passes" in out, out
    assert the_run(tree / "h.db")[1:] == ("interrupted", 2)
    assert report_exit(tree / "h.db") == 2
