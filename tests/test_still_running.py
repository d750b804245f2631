"""`nox -s tests` says which test is still running while one runs long (tests/still_running.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _pytest(tmp_path: Path, every: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_pace.py").write_text(
        "import time\n\ndef test_slow():\n    print('captured output')\n    time.sleep(3.5)\n\n"
        "def test_fast():\n    pass\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
           "PYTHONPATH": str(HERE), "TESTS_STILL_RUNNING_S": every}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "still_running", "-q", "-p", "no:cacheprovider",
                           "test_pace.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_long_test_is_named_on_the_terminal_while_it_runs(tmp_path):
    r = _pytest(tmp_path, "1")
    assert r.returncode == 0, r.stdout + r.stderr
    beats = [line for line in r.stdout.splitlines() if line.startswith("[still running")]
    assert beats[:2] == ["[still running after 1 s: test_pace.py::test_slow]",
                         "[still running after 2 s: test_pace.py::test_slow]"], r.stdout
    assert all("test_slow" in b for b in beats)  # the fast test is never named
    assert "captured output" not in r.stdout  # the test's own output stays captured
    # A test's own line comes before the results: the beats arrived while it ran.
    assert r.stdout.index("[still running") < r.stdout.index("2 passed")


def test_zero_turns_it_off(tmp_path):
    r = _pytest(tmp_path, "0")
    assert r.returncode == 0 and "still running" not in r.stdout, r.stdout


def test_under_xdist_every_running_test_is_named(tmp_path):
    # `nox -s tests` runs two workers: the controller hears both tests start and names each
    # while it runs (a worker's own stdout never reaches the terminal). The two tests wait
    # for each other, so they run at the same time whatever the machine's load.
    for me, other in (("a", "b"), ("b", "a")):
        (tmp_path / f"test_{me}.py").write_text(
            "import pathlib, time\n\n"
            f"def test_slow_{me}():\n"
            f"    pathlib.Path('{me}.started').touch()\n"
            "    deadline = time.monotonic() + 60\n"
            f"    while not pathlib.Path('{other}.started').exists() and time.monotonic() < deadline:\n"
            "        time.sleep(0.05)\n"
            "    time.sleep(3.5)\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
           "PYTHONPATH": str(HERE), "TESTS_STILL_RUNNING_S": "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "still_running", "-q", "-p", "no:cacheprovider",
                        "-n", "2", "--dist", "loadfile", "test_a.py", "test_b.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    named = {line.rsplit(": ", 1)[1].rstrip("]") for line in r.stdout.splitlines()
             if line.startswith("[still running")}
    assert named == {"test_a.py::test_slow_a", "test_b.py::test_slow_b"}, r.stdout
