"""The executed-functions recorder: this project's tracer against coverage.py, on cost
and on what each sees.

Cost: a call-heavy and a line-heavy loop, each in a fresh Python (plain, under the tracer
as a suite run starts it through ``sitecustomize``, under coverage.py as pytest-testmon or
``coverage run`` start it through coverage's ``.pth`` and ``COVERAGE_PROCESS_START``); the
best of ``--reps`` runs. Coverage: one program per escape class, a function called where a
recorder may miss it; a recorder is *sound* on a case when it records the function or
says its record is incomplete, and *unsound* when it says nothing and misses it.

    python benchmarks/bench_recorder_choice.py --reps 5 --out benchmarks/results/bench_recorder_choice.md

Needs coverage.py installed (``pip install -e .[bench]``: coverage==7.17.3); exits 2 without it.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from ci_register.running import executed  # noqa: E402

WORK = """
import json, time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def loop(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s
t = time.perf_counter(); fib(24); a = time.perf_counter() - t
t = time.perf_counter(); loop(2_000_000); b = time.perf_counter() - t
print(json.dumps({"calls": a, "lines": b}))
"""

TARGET = "def target():\n    return 1\n"
# Each case: a program (in the tree, cwd on sys.path) that calls pkg.target() one way.
CASES = {
    "in the process": "import pkg\npkg.target()\n",
    "child python -I": ("import subprocess, sys\nsubprocess.run([sys.executable, '-I', '-c', "
                        "'import os, sys; sys.path.insert(0, os.getcwd()); import pkg; pkg.target()'], check=True)\n"),
    "child under env -i": ("import subprocess, sys\nsubprocess.run(['env', '-i', 'PYTHONPATH=.', sys.executable, '-c', "
                           "'import pkg; pkg.target()'], check=True)\n"),
    "child killed (SIGKILL) after the call": (
        "import subprocess, sys, time\np = subprocess.Popen([sys.executable, '-c', "
        "'import pkg, time; pkg.target(); print(1, flush=True); time.sleep(60)'], stdout=subprocess.PIPE)\n"
        "p.stdout.readline(); p.kill(); p.wait()\n"),
    "settrace(None), then the call": "import sys, pkg\nsys.settrace(None)\npkg.target()\n",
    "_thread.start_new_thread": ("import _thread, threading, pkg\ndone = threading.Event()\n"
                                 "def run():\n    pkg.target()\n    done.set()\n"
                                 "_thread.start_new_thread(run, ())\nassert done.wait(30)\n"),
}


def tree(root: Path) -> None:
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "__init__.py").write_text(TARGET)


def run_own(root: Path, program: str) -> tuple[str, float]:
    folder = Path(tempfile.mkdtemp(dir=root))
    env = {**os.environ, executed.DIR_ENV: str(folder), executed.ROOT_ENV: str(root), executed.TRACE_ENV: "1",
           "PYTHONPATH": os.pathsep.join([str(executed.SITE_DIR), str(root)])}
    r = subprocess.run([sys.executable, "-c", program], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    rec = executed.collect(folder, root)
    why = executed.incomplete_reason(rec)
    return ("incomplete" if why else ("recorded" if "pkg/__init__.py::target" in rec else "MISSED")), r.stdout


def run_coverage(root: Path, program: str) -> tuple[str, float]:
    data = Path(tempfile.mkdtemp(dir=root))
    rc = data / "rc"
    rc.write_text(f"[run]\ndata_file = {data}/.coverage\nparallel = true\nsource = {root}\n"
                  "patch = subprocess, _exit\nconcurrency = thread, multiprocessing\nsigterm = true\n")
    env = {**os.environ, "COVERAGE_PROCESS_START": str(rc), "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, "-c", program], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    lines = set()
    for f in data.glob(".coverage*"):
        con = sqlite3.connect(f)
        try:
            for path, numbits in con.execute("SELECT file.path, line_bits.numbits FROM line_bits JOIN file ON file.id = line_bits.file_id"):
                if path.endswith("pkg/__init__.py"):
                    lines.update(i * 8 + b for i, byte in enumerate(numbits) for b in range(8) if byte >> b & 1)
        except sqlite3.Error:
            pass
        con.close()
    return ("recorded" if 2 in lines else "MISSED"), r.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    try:
        import coverage
    except ImportError:
        print("bench_recorder_choice: coverage.py is not installed; pip install coverage==7.17.3", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        tree(root)
        (root / "work.py").write_text(WORK)
        cost: dict[str, dict[str, float]] = {}
        for _ in range(a.reps):
            for name, runner in (("plain", None), ("own tracer", run_own), ("coverage.py", run_coverage)):
                if runner is None:
                    out = subprocess.run([sys.executable, "work.py"], cwd=root, capture_output=True, text=True).stdout
                else:
                    out = runner(root, "import runpy; runpy.run_path('work.py')")[1]
                got = json.loads(out.strip().splitlines()[-1])
                best = cost.setdefault(name, {"calls": 1e9, "lines": 1e9})
                for k in best:
                    best[k] = min(best[k], got[k])
        seen = {case: (run_own(root, prog)[0], run_coverage(root, prog)[0]) for case, prog in CASES.items()}
    base = cost["plain"]
    lines = [
        "# The executed-functions recorder: own tracer against coverage.py",
        "",
        f"Command: `python benchmarks/bench_recorder_choice.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
        f"Machine: {os.cpu_count()} CPU cores, Python {sys.version.split()[0]}, coverage.py {coverage.__version__} "
        f"(core: {'sysmon' if sys.version_info >= (3, 12) else 'ctrace'} default), best of {a.reps}.",
        "",
        "| recorder | fib(24), s | x plain | 2M-iteration loop, s | x plain |",
        "| --- | ---: | ---: | ---: | ---: |",
        *(f"| {n} | {c['calls']:.3f} | {c['calls'] / base['calls']:.1f} | {c['lines']:.3f} | {c['lines'] / base['lines']:.1f} |"
          for n, c in cost.items()),
        "",
        "| a function called | own tracer | coverage.py |",
        "| --- | --- | --- |",
        *(f"| {case} | {o} | {c} |" for case, (o, c) in seen.items()),
        "",
        "`recorded`: the record holds it; `incomplete`: the record says it cannot be trusted (the static graph",
        "decides); `MISSED`: the record says nothing and lacks it (a selection trusting it would skip an",
        "affected test). coverage.py keeps no incompleteness mark: a miss is silent.",
        "",
        "Choice: this project's tracer. Selection may only trust a record that is complete, so a silent miss",
        "(coverage.py's SIGKILLed child, `env -i` child, `settrace(None)`, `_thread` thread) is a false green;",
        "the tracer writes each function as it starts (a killed process has written what it ran) and marks",
        "what it cannot see. coverage.py sees `-I` children (its `.pth` reads the environment) where the tracer",
        "can only mark the record incomplete. Cost on Python <= 3.11 is of one order for both (tracing is off",
        "there by default); on >= 3.12 the tracer's `sys.monitoring` PY_START callback disables itself after a",
        "function's first call.",
    ]
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
