"""Hand-written code against the library that does the job (issue 41, "Libraries").

    python benchmarks/bench_libraries.py [--out benchmarks/results/bench_libraries.md]

1. Tables: `gates.report.render_text.grid` (kept) against tabulate's "simple" format, with and
   without its number parsing, on a 10,000-row x 10-column verdict table (best of 3).
2. CODEOWNERS: pathspec's gitignore patterns on its default backend (Python ``re``) and on
   RE2 (what `gates.report.owners` uses), a hostile line against growing paths that do not match.
Both measured side by side in one run; the figures in the modules' docstrings come from it.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pathspec  # noqa: E402
from tabulate import tabulate  # noqa: E402

from gates.report.render_text import grid  # noqa: E402


def best(fn, repeat: int = 3) -> float:
    out = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - began)
    return out


def tables() -> list[str]:
    rng = random.Random(0)
    head = ["metric", "verdict", "baseline", "new", "change [interval] level", "p / q",
            "trend", "owner", "test", "note"]
    rows = [[f"serving/b{i % 64}/metric_{i}", "regression" if i % 50 == 0 else "pass",
             f"{rng.random():.4g} ms", f"{rng.random():.4g} ms", "+1.4% [+0.8, +2.0] 98%",
             "p=0.001 q=0.01", "▁▂▃▄▅▆▇█" * 3, "@org/serving", f"test_{i % 97}", "-"]
            for i in range(10_000)]
    g = best(lambda: grid(rows, head))
    t = best(lambda: tabulate(rows, head, tablefmt="simple"))
    tn = best(lambda: tabulate(rows, head, tablefmt="simple", disable_numparse=True))
    return ["## Tables: 10,000 rows x 10 columns, best of 3", "",
            "| formatter | seconds | vs grid |", "| --- | ---: | ---: |",
            f"| gates.report.render_text.grid | {g:.3f} | 1.0x |",
            f"| tabulate simple | {t:.3f} | {t / g:.1f}x |",
            f"| tabulate simple, disable_numparse | {tn:.3f} | {tn / g:.1f}x |", "",
            "The layout differs too: tabulate pads every header by 2, so each column of "
            "the golden outputs would widen.", ""]


def codeowners() -> list[str]:
    pattern = "*a" * 12 + "b"
    lines = ["## CODEOWNERS: the line `" + pattern + "` against `a` * n (no match)", "",
             "| n | pathspec, Python re (s) | pathspec, RE2 (s) |", "| ---: | ---: | ---: |"]
    simple = pathspec.PathSpec.from_lines("gitignore", [pattern], backend="simple")
    re2 = pathspec.PathSpec.from_lines("gitignore", [pattern], backend="re2")
    for n in (16, 20, 24, 28, 7000):
        path = "a" * n
        r = best(lambda p=path: re2.match_file(p))
        if n <= 28:
            s = f"{best(lambda p=path: simple.match_file(p), repeat=1):.3f}"
        else:
            s = "(not run: grows as n^12)"
        lines.append(f"| {n} | {s} | {r:.6f} |")
    return [*lines, ""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the Markdown here too")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    text = "\n".join([
        "# Libraries against hand-written code", "",
        f"`python benchmarks/bench_libraries.py` on {os.cpu_count()} cores, 1-minute load "
        f"{load:.1f} at the start (a shared machine: ratios, not absolute times).", "",
        *tables(), *codeowners()])
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
