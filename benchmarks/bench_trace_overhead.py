"""What tracing a suite run's functions costs (ci_register.running.executed), per Python.

Two measurements, each untraced and traced (the tracer started by the run's sitecustomize,
as in a suite run), the better of ``--repeat`` runs each, alternating:

- a CPU-bound micro benchmark: a recursive Python function (``fib(N)``: about a million
  calls), the worst case for a per-call tracer;
- the ``cpu`` suite's pytest (this repository's registered files of the suite), as
  ``nox -s cpu`` runs it, minus nox's install.

    python benchmarks/bench_trace_overhead.py --repeat 5 --out benchmarks/results/bench_trace_overhead.md

On Python >= 3.12 the tracer uses ``sys.monitoring`` (one event per function for the whole
run); on <= 3.11 a call tracer (a Python call per function call).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from ci_register.running.executed import DIR_ENV, ROOT_ENV, SITE_DIR, TRACE_ENV  # noqa: E402

MICRO = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib({n})\n"


def calls(n: int) -> int:
    """How many calls the recursive fib(n) makes: 2 fib(n + 1) - 1."""
    a, b = 0, 1
    for _ in range(n + 1):
        a, b = b, a + b
    return 2 * a - 1


def timed(cmd: list[str], traced: bool, cwd: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in (DIR_ENV, ROOT_ENV, "GATES_HISTORY", "PYTEST_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE_DIR) if traced else "", str(HERE)]))
    with tempfile.TemporaryDirectory() as folder:
        if traced:  # CI_REGISTER_TRACE=1: on Python <= 3.11 tracing is off unless asked for
            env[DIR_ENV], env[ROOT_ENV], env[TRACE_ENV] = folder, str(cwd), "1"
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, check=False)
        secs = time.perf_counter() - t0
        if r.returncode not in (0, 1, 5):
            raise RuntimeError(f"{cmd} exit {r.returncode}: {r.stdout[-1500:]}{r.stderr[-1500:]}")
        if traced and not os.listdir(folder):
            raise RuntimeError("the traced run wrote nothing: the tracer did not start")
    return secs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fib", type=int, default=27)
    ap.add_argument("--suite", default="cpu")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    from ci_register.registered.catalog import load_catalog  # noqa: PLC0415
    from ci_register.registered.collect import collect  # noqa: PLC0415

    catalog = load_catalog(HERE / "suites" / "catalog.toml")
    files = sorted({r.path for r in collect(catalog, root=HERE, base=HERE).registrations if r.suite == a.suite})
    with tempfile.TemporaryDirectory() as tmp:
        micro = Path(tmp) / "micro.py"
        micro.write_text(MICRO.format(n=a.fib))
        cases = {
            f"micro: fib({a.fib}) ({calls(a.fib):,} calls)": ([sys.executable, str(micro)], Path(tmp)),
            f"suite {a.suite}: pytest over its {len(files)} registered file(s)":
                ([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files], HERE),
        }
        rows = []
        for name, (cmd, cwd) in cases.items():
            best = {False: float("inf"), True: float("inf")}
            for _ in range(a.repeat):
                for traced in (False, True):
                    best[traced] = min(best[traced], timed(cmd, traced, cwd))
            rows.append((name, best[False], best[True]))
            print(f"{name}: {best[False]:.2f} s untraced, {best[True]:.2f} s traced", file=sys.stderr)
    mechanism = "sys.monitoring PY_START, DISABLE after the first" if sys.version_info >= (3, 12) else \
        "sys.settrace call events (no line events)"
    lines = [
        "# What tracing executed functions costs",
        "",
        f"Command: `python benchmarks/bench_trace_overhead.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
        f"Python {sys.version.split()[0]} ({mechanism}); {os.cpu_count()} CPU cores; load {os.getloadavg()[0]:.1f} "
        f"at the end; best of {a.repeat}, untraced and traced alternating.",
        "",
        "| case | untraced | traced | overhead |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {n} | {u:.2f} s | {t:.2f} s | {t / u - 1:+.0%} |" for n, u, t in rows),
    ]
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
