"""Figures of the GPU suites from a history: each metric's per-run medians and their spread.

    python benchmarks/gpu_figures.py [--history history.db] [--suite base-b-1gpu] [--grep bandwidth]

For every metric of the suite: the median over runs of the per-run medians, the range,
and the run-to-run spread (max-min over the median, and the CV of the run medians), plus
each run's wall time. Reads the history only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates.store.open import open_history  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", default="history.db")
    ap.add_argument("--suite", default="base-b-1gpu")
    ap.add_argument("--grep", default="", help="only metric keys containing this")
    args = ap.parse_args()
    h = open_history(args.history, create=False, readonly=True)
    runs = [r for r in reversed(h.report_reads.top_level_runs(suite=args.suite)) if r["status"] == "complete"]
    print(f"{args.suite}: {len(runs)} complete run(s) in {args.history}")
    ids = [r["run_id"] for r in runs]
    seconds: dict[str, float] = {}
    for t in h.report_reads.first_attempt_totals(ids):
        seconds[t["run_id"]] = seconds.get(t["run_id"], 0.0) + (t["s"] or 0.0)
    for r in runs:
        print(f"  run {r['run_id'][:12]} {r['started_at'][:19]} {r['fingerprint']}: "
              f"tests {seconds.get(r['run_id'], 0.0):.1f} s")
    order = {rid: i for i, rid in enumerate(ids)}
    rows = sorted((m for m in h.report_reads.metric_summaries(ids) if args.grep in m["key"]),
                  key=lambda m: (m["key"], order[m["run_id"]]))
    by: dict[str, list[float]] = {}
    unit: dict[str, str] = {}
    for row in rows:
        by.setdefault(row["key"], []).append(row["median"])
        unit[row["key"]] = row["unit"]
    print("\n| metric | unit | runs | median of run medians | min | max | spread (max-min)/median | CV of run medians |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key, vals in by.items():
        med = statistics.median(vals)
        spread = (max(vals) - min(vals)) / abs(med) * 100 if med else float("nan")
        cv = statistics.pstdev(vals) / abs(statistics.fmean(vals)) * 100 if len(vals) > 1 and statistics.fmean(vals) else float("nan")
        print(f"| {key} | {unit[key]} | {len(vals)} | {med:.4g} | {min(vals):.4g} | {max(vals):.4g} | {spread:.2f}% | {cv:.2f}% |")


if __name__ == "__main__":
    main()
