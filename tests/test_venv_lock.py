"""Concurrent `nox -s cpu` in one checkout share the session venv (reuse_venv): its pip
installs run one at a time (`ci_register.running.nox_sessions.venv_lock`), across processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What one nox process does around its pip install: take the lock, "install" for a while.
INSTALLER = """
import os, sys, time, types
from pathlib import Path
from ci_register.running.nox_sessions import venv_lock
venv, log, go = sys.argv[1:4]
session = types.SimpleNamespace(virtualenv=types.SimpleNamespace(location=venv))
while not Path(go).exists():
    time.sleep(0.002)
with venv_lock(session):
    with open(log, "a") as f:
        f.write(f"in {os.getpid()}\\n")
    time.sleep(float(sys.argv[4]))
    with open(log, "a") as f:
        f.write(f"out {os.getpid()}\\n")
"""


def installer(tmp: Path, hold_s: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", INSTALLER, str(tmp / ".nox" / "cpu"), str(tmp / "log"),
         str(tmp / "go"), str(hold_s)],
        env=dict(os.environ, PYTHONPATH=str(REPO)))


def lines(tmp: Path) -> list[str]:
    log = tmp / "log"
    return log.read_text().splitlines() if log.exists() else []


def test_two_installs_into_one_venv_run_one_after_the_other(tmp_path):
    (tmp_path / ".nox").mkdir()
    procs = [installer(tmp_path, 0.5) for _ in range(3)]
    time.sleep(1.0)  # every process imported and waits for the start signal
    (tmp_path / "go").touch()
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    got = lines(tmp_path)
    assert len(got) == 6, got
    for i in range(0, 6, 2):  # each "in" is followed by its own "out": never two inside
        assert got[i].startswith("in ") and got[i + 1] == "out " + got[i][3:], got
    assert (tmp_path / ".nox" / "cpu.lock").exists()  # beside the venv, not in it
    assert not (tmp_path / ".nox" / "cpu").exists()


def test_an_install_killed_inside_the_lock_does_not_block_the_next(tmp_path):
    (tmp_path / ".nox").mkdir()
    (tmp_path / "go").touch()
    first = installer(tmp_path, 600)
    for _ in range(600):
        if lines(tmp_path):
            break
        time.sleep(0.02)
    assert lines(tmp_path) == [f"in {first.pid}"]
    second = installer(tmp_path, 0)
    time.sleep(0.5)
    assert second.poll() is None and len(lines(tmp_path)) == 1  # waits for the first
    first.send_signal(signal.SIGKILL)  # nox killed mid-install: the kernel drops its flock
    first.wait()
    assert second.wait(timeout=30) == 0
    assert lines(tmp_path)[1:] == [f"in {second.pid}", f"out {second.pid}"]
