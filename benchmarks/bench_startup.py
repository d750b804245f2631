"""Start-up of the commands people run most: gate-report, and the plan-only nox sessions.

Each command runs as its own process, ``--repeat`` times; the table gives the median
wall time and the median CPU time of the process and its children (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``: what the command costs whatever else the
machine is doing), after one untimed warm-up run that writes the bytecode. With ``--before DIR`` (an exported tree of an older commit:
``git archive COMMIT | tar -x -C DIR``) the same commands run there too, side by side.

- ``gate-report --help``; ``gate-report --run ID`` on a history of one 73-metric run
  (benchmarks/fleet_runs.py), text format: the console script's entry point from each
  tree's pyproject.toml, called as ``python -c``
- ``matrix --root TREE --event push`` on the tree's own suites and history, as
  ``python -m ci_register`` (durations through a reader process) and as
  ``python -m gates.commands.planner`` (in process; trees that have it)
- ``nox -s matrix -- --event push``, ``nox -s rerun -- test_flashinfer_decode.py`` and
  ``nox -s cpu -- --dry-run``, each in a fresh ``--envdir`` (what a CI job or a new
  checkout pays; ``--no-nox`` leaves them out, ``--no-nox-before`` only for DIR: there
  they build and install virtualenvs, minutes each)

    python benchmarks/bench_startup.py --repeat 5
    python benchmarks/bench_startup.py --repeat 5 --before /tmp/before --no-nox-before
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def entry_point(tree: Path, script: str = "gate-report") -> tuple[str, str]:
    text = (tree / "pyproject.toml").read_text()
    m = re.search(rf'^{re.escape(script)}\s*=\s*"([\w.]+):(\w+)"', text, re.M)
    if not m:
        raise SystemExit(f"{tree}/pyproject.toml: no [project.scripts] {script}")
    return m.group(1), m.group(2)


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.returncode, (r.stdout + r.stderr)[-300:]


def one_run_history(path: Path, tree: Path) -> str:
    """A history holding one gated 73-metric run, written by ``tree``'s code."""
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/benchmarks']\n"
        "from fleet_runs import make_run, write_run\n"
        "try:\n    from gates.store.open import open_history\n"
        "except ImportError:  # a tree from before the rooms (gates/history.py)\n"
        "    from gates.history import open_history\n"
        "with open_history(sys.argv[2]) as h:\n"
        "    print(write_run(h, make_run(0)))\n")
    env = {k: v for k, v in os.environ.items() if k != "GATES_HISTORY"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    r = subprocess.run([sys.executable, "-c", code, str(tree), str(path)], capture_output=True,
                       text=True, timeout=600, env=env)
    if r.returncode != 0:
        raise SystemExit(f"cannot build the one-run history with {tree}: {r.stderr[-500:]}")
    return r.stdout.split()[-1]


def commands(tree: Path, work: Path, nox: bool) -> list[tuple[str, list[str], bool]]:
    mod, fn = entry_point(tree)
    gr = [sys.executable, "-c", f"import sys; from {mod} import {fn}; sys.exit({fn}())"]
    hist = work / f"one-run-{tree.name}.db"
    run_id = one_run_history(hist, tree)
    out = [("gate-report --help", [*gr, "--help"], False),
           ("gate-report --run ID (one 73-metric run)", [*gr, "--history", str(hist), "--run", run_id], False)]
    # The matrix of the tree itself (its suites, its committed history.db): ci_register's
    # own command reads durations through one reader process; gates' entry point (what
    # `nox -s matrix` runs, where the tree has it) reads them in process.
    matrix = ["matrix", "--root", str(tree), "--event", "push"]
    out.append(("matrix --event push: python -m ci_register (reader process)",
                [sys.executable, "-m", "ci_register", *matrix], False))
    if (tree / "gates" / "commands" / "planner.py").exists():
        out.append(("matrix --event push: python -m gates.commands.planner (in process)",
                    [sys.executable, "-m", "gates.commands.planner", *matrix], False))
    if nox:
        for name, args in (("nox -s matrix -- --event push", ["-s", "matrix", "--", "--event", "push"]),
                           ("nox -s rerun -- test_flashinfer_decode.py",
                            ["-s", "rerun", "--", "test_flashinfer_decode.py"]),
                           ("nox -s cpu -- --dry-run", ["-s", "cpu", "--", "--dry-run"])):
            out.append((name, [sys.executable, "-m", "nox", "-f", str(tree / "noxfile.py"), "--envdir",
                               "{envdir}", *args], True))
    return out


def measure(tree: Path, work: Path, repeat: int, nox: bool) -> dict[str, tuple[float, float, str]]:
    # Bytecode is written and a warm-up run (untimed) writes it, as pip compiles an installed
    # package's: with PYTHONDONTWRITEBYTECODE set (as on the dev box) every run of a tree
    # without .pyc files would compile each module again (~0.2 s here), a cost no user pays.
    env = {k: v for k, v in os.environ.items()
           if k not in ("GATES_HISTORY", "CI", "PYTHONDONTWRITEBYTECODE")}
    # The tree first; what PYTHONPATH held (carried wheels on a GPU host) after it.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    results = {}
    for name, cmd, fresh in commands(tree, work, nox):
        walls, cpus, note = [], [], ""
        if not fresh:
            timed(cmd, tree, env)  # warm-up: bytecode and the page cache
        for i in range(repeat if not fresh else 1):  # a fresh envdir: once, it is minutes before
            envdir = work / f"env-{tree.name}-{len(results)}-{i}"
            wall, cpu, rc, tail = timed([c.replace("{envdir}", str(envdir)) for c in cmd], tree, env)
            if rc not in (0, 1):  # 1: a gate failed in the report (fine for timing)
                note = f"exit {rc}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"
            walls.append(wall)
            cpus.append(cpu)
            shutil.rmtree(envdir, ignore_errors=True)
        results[name] = (statistics.median(walls), statistics.median(cpus), note)
        print(f"  {tree.name}: {name}: {results[name][0]:.2f} s wall, {results[name][1]:.2f} s CPU {note}",
              file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--before", type=Path, default=None, metavar="DIR")
    ap.add_argument("--no-nox", action="store_true")
    ap.add_argument("--no-nox-before", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        after = measure(HERE, work, args.repeat, not args.no_nox)
        before = (measure(args.before.resolve(), work, args.repeat,
                          not (args.no_nox or args.no_nox_before)) if args.before else {})
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {load:.1f} at the end; "
          f"median of {args.repeat} (nox sessions: once, fresh --envdir)")
    print()
    head = "| command | this tree: wall | CPU |" + (" before: wall | CPU |" if before else "")
    print(head)
    print("| --- | ---: | ---: |" + (" ---: | ---: |" if before else ""))
    for name, (wall, cpu, note) in after.items():
        row = f"| {name} | {wall:.2f} s | {cpu:.2f} s |"
        if before:
            b = before.get(name)
            row += f" {b[0]:.2f} s | {b[1]:.2f} s |" if b else " not run | |"
        print(row + (f" {note}" if note else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
