"""How the timing of ``tests/gitrepo.py``'s generated test holds on a loaded machine.

Runs the test's measurement ``--execs`` times per level in fresh interpreters (as
bisection's pytest runs are), good (``--loops``) and bad (twice that) alternating,
by two methods: ``plain`` (the CPU time of the work loop, what the test used
first) and ``ratio`` (the work loop's CPU time over a fixed reference loop's, in
10 interleaved chunks, what it uses now). Then ``--trials`` bisections
(``gates.model.bisect`` with the test's settings: 5 commits, culprit the 4th, calib 6,
reps 1, max_reps 8, verify 6) draw each execution from those pools. Prints the
run-to-run spread and the outcomes. Load the machine as you like meanwhile (two
``python -c 'while 1: pass'`` on 2 cores, or the shared box as it is).

    python benchmarks/bisect_timing_noise.py [--method plain|ratio] [--execs 30]
        [--trials 300] [--loops 200000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # gitrepo: the generated test's timer

from gitrepo import CPU_TIMER  # noqa: E402  the generated test's own timer

from gates.model import stats  # noqa: E402
from gates.model.bisect import bisect  # noqa: E402

CPU = "import json\n" + CPU_TIMER
PLAIN = CPU + "print(json.dumps([_cpu({n}) for _ in range(5)]))\n"
RATIO = CPU + """
samples = []
for _ in range(5):
    work = ref = 0.0
    for _ in range(10):
        ref += _cpu({ref} // 10)
        work += _cpu({n} // 10)
    samples.append(work / ref)
print(json.dumps(samples))
"""


def pools(method: str, execs: int, loops: int) -> tuple[list, list]:
    code = PLAIN if method == "plain" else RATIO
    good: list[list[float]] = []
    bad: list[list[float]] = []
    for _ in range(execs):
        for level, out in ((loops, good), (2 * loops, bad)):
            done = subprocess.run([sys.executable, "-c", code.format(n=level, ref=loops)],
                                  capture_output=True, text=True, check=True)
            out.append(json.loads(done.stdout))
    return good, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", choices=("plain", "ratio"), default="ratio")
    ap.add_argument("--execs", type=int, default=30)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--loops", type=int, default=200_000)
    a = ap.parse_args()
    began = time.time()
    good, bad = pools(a.method, a.execs, a.loops)
    rng = np.random.default_rng(0)
    outcomes: dict[str, int] = {}
    for _ in range(a.trials):
        def measure(commit: str) -> list[float]:
            pool = bad if commit in ("c3", "c4") else good
            return pool[rng.integers(len(pool))]

        r = bisect(["c0", "c1", "c2", "c3", "c4"], measure, better="lower", calib=6, reps=1,
                   max_reps=8, verify=6)
        name = r.outcome + (f" {r.culprit}" if r.culprit else "")
        outcomes[name] = outcomes.get(name, 0) + 1
    g = np.array([stats.run_summary(np.asarray(x)) for x in good])
    b = np.array([stats.run_summary(np.asarray(x)) for x in bad])
    print(f"{a.method}: {a.execs} executions per level in {time.time() - began:.0f} s; "
          f"run-to-run cv good {g.std() / g.mean():.3f}, bad {b.std() / b.mean():.3f}; "
          f"bad/good {b.mean() / g.mean():.2f}")
    print(f"{a.trials} bisections (culprit c3): "
          + ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
