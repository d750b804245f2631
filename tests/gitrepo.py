"""Generate a test repository for bisection: git init, N commits, one makes a test slower.

``make_repo(path, commits=8, culprit=5, slowdown=0.3)`` writes ``test_work.py``, a
CPU-timed test recording ``work_rel`` through the gates ``metrics`` fixture; every
commit touches ``CHANGES.txt``, and commit number ``culprit`` (1-based) also
multiplies the work loop by ``1 + slowdown``. Returns the shas, oldest first (the
first is the root).

Each of the 5 samples is the CPU time (``time.process_time``) of the work loop over
that of a fixed reference loop, in 10 alternating chunks each: on a loaded or
shared machine a process's CPU time per iteration drifts by tens of percent (steal
time, cache and frequency sharing), and the ratio of interleaved chunks cancels
it. Measured on a 2-vCPU VM at load average 9-12 (30 executions of each level):
plain CPU time varied 21% run to run and 20 of 300 bisections drawn from those
executions missed the culprit; the ratio varied 2% and 1 of 300 missed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

__all__ = ["CPU_TIMER", "make_repo", "make_series"]

# The CPU time of n iterations of a fixed loop (also timed by
# benchmarks/bisect_timing_noise.py, which measures how this test's timing holds).
CPU_TIMER = '''\
import time


def _cpu(n):
    t = time.process_time()
    x = 0
    for i in range(n):
        x += i * i
    return time.process_time() - t
'''

TEST = CPU_TIMER + '''

LOOPS = {loops}
REFERENCE = {reference}


def test_work(metrics):
    samples = []
    for _ in range(5):
        work = ref = 0.0
        for _ in range(10):  # interleaved: both see the machine's speed of the moment
            ref += _cpu(REFERENCE // 10)
            work += _cpu(LOOPS // 10)
        samples.append(work / ref)
    metrics.record("work_rel", samples, unit="x", better="lower")
'''


def _git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_series(path: Path, commits: int, files: Callable[[int], dict[str, str]]) -> list[str]:
    """Commits 0..``commits`` in a new repository at ``path``: commit n writes ``files(n)``
    (name -> text) and appends to CHANGES.txt, so every commit changes something."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "gen@example.invalid")
    _git(path, "config", "user.name", "generator")
    _git(path, "config", "commit.gpgsign", "false")
    (path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    shas = []
    for n in range(commits + 1):
        for name, text in files(n).items():
            (path / name).write_text(text, encoding="utf-8")
        with (path / "CHANGES.txt").open("a", encoding="utf-8") as f:
            f.write(f"change {n}\n")
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", f"change {n}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return shas


def make_repo(path: Path, commits: int = 8, culprit: int = 5, slowdown: float = 0.3,
              loops: int = 200_000) -> list[str]:
    def files(n: int) -> dict[str, str]:  # commit 0: the root, at the old level
        level = loops if n < culprit or n == 0 else int(loops * (1 + slowdown))
        return {"test_work.py": TEST.format(loops=level, reference=loops)}

    return make_series(path, commits, files)
