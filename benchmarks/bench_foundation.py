"""Foundation figures: static collection speed and the suite session's overhead.

    python benchmarks/bench_foundation.py            # collection of 2,000 generated files
    python benchmarks/bench_foundation.py --nox      # also `nox -R -s cpu` vs bare pytest

Targets (issue 2): collecting 2,000 registered files < 1 s; `nox -s cpu` adds < 1.5 s to
the bare pytest time of the same files once its venv exists (-R).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ci_register.registered.catalog import parse_catalog  # noqa: E402
from ci_register.registered.collect import collect  # noqa: E402

TEMPLATE = '''"""Generated test file {i}."""
from ci_register import register_cuda_ci, register_cpu_ci

register_cuda_ci(est_time={est}, suite="{suite}")  # a comment
register_cpu_ci(est_time=20, suite="cpu")


def helper(x):
    return x * 2


def test_one():
    assert helper(2) == 4


class TestGroup:
    def test_two(self):
        assert True
'''


def bench_collect(n: int = 2000, repeats: int = 5) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        suites = Path(tmp, "suites")
        for i in range(n):
            d = suites / f"area{i % 40}" / f"sub{i % 7}"
            d.mkdir(parents=True, exist_ok=True)
            suite = ("base-b-1gpu", "stage-c-4gpu", "gb300-nightly")[i % 3]
            (d / f"test_gen_{i}.py").write_text(TEMPLATE.format(i=i, est=30 + i % 600, suite=suite))
        cat = parse_catalog((ROOT / "suites" / "catalog.toml").read_text(), suites / "catalog.toml")
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            col = collect(cat, base=Path(tmp))
            times.append(time.perf_counter() - t)
            assert len(col.registrations) == 2 * n and not col.issues
    med = statistics.median(times)
    print(f"collect {n} files ({2 * n} registrations): median {med * 1000:.0f} ms over {repeats} runs (min {min(times) * 1000:.0f} ms)")
    return med


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return time.perf_counter() - t


def bench_nox(repeats: int = 7) -> None:
    venv_py = ROOT / ".nox" / "cpu" / "bin" / "python"
    if not venv_py.exists():
        raise SystemExit("run `nox -s cpu` once first so that its venv exists")
    files = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "suites").rglob("test_*.py")) if "register_cpu_ci" in p.read_text() and 'suite="cpu"' in p.read_text()]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GATES_HISTORY=str(Path(tmp, "h.db")))
        bare, session = [], []
        for _ in range(repeats):
            bare.append(_wall([str(venv_py), "-m", "pytest", "-q", "-p", "no:cacheprovider", *files], env))
            session.append(_wall(["nox", "-R", "-s", "cpu"], env))
    b, s = statistics.median(bare), statistics.median(session)
    # Runs alternate, so load from other jobs hits both; the minima are the least disturbed.
    print(f"bare pytest on {len(files)} cpu file(s): median {b:.2f} s (min {min(bare):.2f}); "
          f"`nox -R -s cpu`: median {s:.2f} s (min {min(session):.2f}); "
          f"overhead: medians {s - b:.2f} s, minima {min(session) - min(bare):.2f} s ({repeats} runs each)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nox", action="store_true", help="also time `nox -R -s cpu` against bare pytest")
    ap.add_argument("--files", type=int, default=2000)
    args = ap.parse_args()
    bench_collect(args.files)
    if args.nox:
        bench_nox()


if __name__ == "__main__":
    main()
