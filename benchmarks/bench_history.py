"""Benchmark the history store: append one run of 500 metrics to a history of
1,000,000 metric samples, and read the last 50 runs of one metric.

Targets (issue 3): append < 0.2 s, read < 10 ms.

    python benchmarks/bench_history.py                 # build in a temp dir, then time
    python benchmarks/bench_history.py --path /tmp/h.db --keep   # reuse a built file

The history is built through the public API (`start_run` + `record_run`), spread
over 2 suites x 2 hardware fingerprints so the series index has to discriminate.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance

SUITES = ("stage-a-1gpu", "stage-c-4gpu")
FINGERPRINTS = ("nvidia-h200-x1-sm90", "nvidia-h100-x1-sm90")


def make_run(i: int, n_metrics: int, n_samples: int, *, suite: str, fingerprint: str,
             run_id: str | None = None) -> RunRecord:
    prov = Provenance(
        run_id=run_id or f"bench{i:07d}", suite=suite, fingerprint=fingerprint,
        commit=f"{i:040x}", branch="main",
        started_at=f"2026-{1 + i // 40000 % 12:02d}-01T00:00:00.{i:06d}+00:00",
        hardware={"gpus": [{"name": "NVIDIA H200", "capability": "9.0"}]},
    )
    tests = [TestResult(f"suites/k/test_{t}.py::test_x", f"suites/k/test_{t}.py", "passed",
                        1.0 + t) for t in range(max(1, n_metrics // 10))]
    metrics = [
        (tests[k % len(tests)].nodeid,
         validate_metric(f"kernel/case{k}/latency", [1.0 + 0.01 * ((i + s) % 7)
                                                     for s in range(n_samples)],
                         unit="s", better="lower"))
        for k in range(n_metrics)
    ]
    return RunRecord(prov, tests, metrics, None, 0)


def build(path: Path, total_samples: int, metrics_per_run: int, samples_per_metric: int) -> int:
    runs = total_samples // (metrics_per_run * samples_per_metric)
    started = time.perf_counter()
    with open_history(path) as h:
        for i in range(runs):
            record = make_run(i, metrics_per_run, samples_per_metric,
                              suite=SUITES[i % 2], fingerprint=FINGERPRINTS[(i // 2) % 2])
            h.run_writes.start_run(record.provenance)
            h.run_writes.record_run(record)
            if (i + 1) % 500 == 0:
                print(f"  built {i + 1}/{runs} runs", flush=True)
        samples = h.merge_reads.sample_count()
    print(f"built {runs} runs, {samples:,} samples in {time.perf_counter() - started:.1f} s")
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", type=Path, help="history file (default: a temp file)")
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--metrics-per-run", type=int, default=200)
    parser.add_argument("--samples-per-metric", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)

    tmp = None
    if args.path is None:
        tmp = tempfile.TemporaryDirectory()
        args.path = Path(tmp.name) / "history.db"
    with open_history(args.path) as h:
        have = h.merge_reads.sample_count()
    if have < args.samples:
        build(args.path, args.samples - have, args.metrics_per_run, args.samples_per_metric)

    appends, reads = [], []
    with open_history(args.path) as h:
        total = h.merge_reads.sample_count()
        for r in range(args.repeat):
            record = make_run(10_000_000 + r, 500, args.samples_per_metric, suite=SUITES[0],
                              fingerprint=FINGERPRINTS[0], run_id=f"append-{time.time_ns()}")
            t0 = time.perf_counter()
            h.run_writes.start_run(record.provenance)
            h.run_writes.record_run(record)
            appends.append(time.perf_counter() - t0)
        key = "kernel/case3/latency"
        for _ in range(args.repeat * 3):
            t0 = time.perf_counter()
            series = h.baseline_reads.metric_series(SUITES[0], key, FINGERPRINTS[0], limit=50)
            reads.append(time.perf_counter() - t0)
        assert len(series) == 50, len(series)
        plan = h.conn.execute(
            "EXPLAIN QUERY PLAN SELECT m.id FROM metrics m JOIN runs r ON r.run_id = m.run_id "
            "WHERE m.suite = ? AND m.key = ? AND m.fingerprint = ? AND r.status = 'complete' "
            "AND r.trusted = 1 ORDER BY m.started_at DESC, m.id DESC LIMIT 50",
            (SUITES[0], key, FINGERPRINTS[0])).fetchall()
    size_mb = args.path.stat().st_size / 1e6
    append_med, read_med = statistics.median(appends), statistics.median(reads)
    print(f"history: {args.path} ({size_mb:.0f} MB), {total:,} samples before appends")
    print(f"append one run of 500 metrics x {args.samples_per_metric} samples "
          f"(start_run + record_run): median {append_med * 1000:.1f} ms, "
          f"max {max(appends) * 1000:.1f} ms over {len(appends)}  (target < 200 ms)")
    print(f"read last 50 runs of one metric (metric_series): median {read_med * 1000:.2f} ms, "
          f"max {max(reads) * 1000:.2f} ms over {len(reads)}  (target < 10 ms)")
    print("query plan: " + "; ".join(row[-1] for row in plan))
    if tmp is not None:
        tmp.cleanup()
    ok = append_med < 0.2 and read_med < 0.010
    print("PASS" if ok else "MISS: above target")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
