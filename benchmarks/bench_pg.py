"""The history on PostgreSQL: concurrent shard writers, then the gate's time against SQLite.

Run: ``python benchmarks/bench_pg.py [--url postgresql://...] [--writers 32] [--runs 50]
[--metrics 73] [--samples 5] [--repeat 5] [--out benchmarks/results/bench_pg.md]``

Without ``--url`` it starts a throwaway PostgreSQL cluster (``tests/pg_cluster.py``:
Debian's ``postgresql`` package, a temp dir, a free loopback port) and stops it at
the end; with ``--url`` it writes into that database's current schema, which must
hold no history yet.

1. Writers: ``--writers`` processes start together and each records ``--runs`` runs
   (``start_run`` then ``record_run``: ``--metrics`` metrics of ``--samples``
   samples and one test per metric) through `History`, as CI shards do. Counts
   every run, metric and sample afterwards: lost = expected - found; errors =
   exceptions in the writers.
2. Gate: the same history is copied run by run (`MergeReads.export_run` /
   `insert_bundle`) into an SQLite file; one new run is recorded in both and
   judged with `gates.gate.evaluate_run` (open, baseline reads, statistics,
   verdicts saved, close), ``--repeat`` times on each backend: the ratio of the
   medians is the figure (target: PostgreSQL within 2x of SQLite).
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gates import gate  # noqa: E402
from gates.store.history import History, RunRecord, TestResult  # noqa: E402
from gates.store.metrics import Metric  # noqa: E402
from gates.store.open import open_history  # noqa: E402
from gates.store.provenance import Provenance  # noqa: E402

__all__ = ["main"]

SUITES = 4  # writers spread over 4 suites (shards of a nightly), one hardware fingerprint
FP = "nvidia-h200-x1-sm90"


def _record(worker: int, i: int, n_metrics: int, n_samples: int, seed: int) -> RunRecord:
    rng = np.random.default_rng(seed)
    stamp = f"2026-01-{1 + i // 24 % 28:02d}T{i % 24:02d}:{worker % 60:02d}:00+00:00"
    prov = Provenance(run_id=f"w{worker:02d}-r{i:03d}", suite=f"suite{worker % SUITES}",
                      commit=f"{i:07d}c0ffee", branch="main", started_at=stamp, fingerprint=FP,
                      hardware={"gpus": [{"name": "NVIDIA H200", "uuid": f"GPU-{worker % 8}"}]})
    nodeids = [f"suites/perf/test_p.py::test_{k}" for k in range(n_metrics)]
    level = 1.0 + np.arange(n_metrics)
    values = level[:, None] * (1 + rng.normal(0, 0.02, (n_metrics, n_samples)))
    metrics = [(nodeids[k], Metric(f"k{k:03d}/latency", tuple(map(float, values[k])), "ms",
                                   "lower")) for k in range(n_metrics)]
    tests = [TestResult(n, "suites/perf/test_p.py", "passed", 0.5) for n in nodeids]
    return RunRecord(prov, tests, metrics, None, 0)


def _writer(url: str, worker: int, runs: int, n_metrics: int, n_samples: int, barrier,
            out) -> None:
    latencies, errors = [], []
    try:
        barrier.wait(timeout=120)
        with open_history(url) as h:
            for i in range(runs):
                record = _record(worker, i, n_metrics, n_samples, seed=worker * 1000 + i)
                t0 = time.perf_counter()
                try:
                    h.run_writes.start_run(record.provenance)
                    h.run_writes.record_run(record)
                except Exception as exc:  # counted, reported: the figure is "0 errors"
                    errors.append(f"{type(exc).__name__}: {exc}")
                latencies.append(time.perf_counter() - t0)
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    out.put((worker, latencies, errors))


def run_writers(url: str, writers: int, runs: int, n_metrics: int,
                n_samples: int) -> dict[str, object]:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, w, runs, n_metrics, n_samples, barrier, out))
             for w in range(writers)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    results = [out.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    wall = time.perf_counter() - t0
    latencies = sorted(x for _, lat, _ in results for x in lat)
    errors = [e for _, _, errs in results for e in errs]
    with open_history(url) as h:
        found = {t: h._rows(f"SELECT count(*) AS n FROM {t}")[0]["n"]
                 for t in ("runs", "metrics")}
        found["samples"] = h.merge_reads.sample_count()
        complete = len(h._rows("SELECT run_id FROM runs WHERE status = 'complete'"))
        short = h._rows("SELECT count(*) AS n FROM metric_rows WHERE length(samples) != ?",
                        (8 * n_samples,))[0]["n"]
    want = writers * runs
    return {"wall": wall, "errors": errors, "complete": complete, "found": found,
            "lost": {"runs": want - found["runs"], "metrics": want * n_metrics - found["metrics"],
                     "samples": want * n_metrics * n_samples - found["samples"]},
            "short_metrics": short, "p50": latencies[len(latencies) // 2] if latencies else 0,
            "p95": latencies[int(len(latencies) * 0.95)] if latencies else 0}


def copy_history(src: History, dest: Path) -> int:
    with open_history(dest) as out:
        ids = src.merge_reads.run_ids()
        for start in range(0, len(ids), 100):
            bundles = [src.merge_reads.export_run(r) for r in ids[start:start + 100]]
            out.in_transaction(lambda b=bundles: [out.run_writes.insert_bundle(x) for x in b])
    return len(ids)


def time_gate(location: str | Path, record: RunRecord, repeat: int) -> tuple[list[float], dict]:
    with open_history(location) as h:
        h.run_writes.start_run(record.provenance)
        h.run_writes.record_run(record)
    times, counts = [], {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        with open_history(location) as h:
            res = gate.evaluate_run(h, record.provenance.run_id)
        times.append(time.perf_counter() - t0)
        counts = res.counts()
    return times, counts


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=None,
                    help="PostgreSQL URL (an empty schema); default: a throwaway cluster")
    ap.add_argument("--writers", type=int, default=32, help="concurrent writer processes")
    ap.add_argument("--runs", type=int, default=50, help="runs each writer records")
    ap.add_argument("--metrics", type=int, default=73, help="metrics per run")
    ap.add_argument("--samples", type=int, default=5, help="samples per metric")
    ap.add_argument("--repeat", type=int, default=5, help="gate timings per backend")
    ap.add_argument("--out", default=None, help="also write the Markdown report here")
    a = ap.parse_args(argv)
    cluster = None
    if a.url is None:
        from pg_cluster import start_cluster  # noqa: PLC0415

        cluster = start_cluster()
        url = cluster.url
    else:
        url = a.url
    try:
        w = run_writers(url, a.writers, a.runs, a.metrics, a.samples)
        judged = _record(999, 0, a.metrics, a.samples, seed=7)
        judged.provenance.run_id, judged.provenance.suite = "judged", "suite0"
        judged.provenance.started_at = "2026-02-01T00:00:00+00:00"
        judged.provenance.hardware = {"gpus": [{"name": "NVIDIA H200", "uuid": "GPU-0"}]}
        with tempfile.TemporaryDirectory() as tmp:
            sqlite_path = Path(tmp) / "history.db"
            t0 = time.perf_counter()
            with open_history(url) as src:
                copied = copy_history(src, sqlite_path)
            copy_s = time.perf_counter() - t0
            pg_t, pg_counts = time_gate(url, judged, a.repeat)
            sl_t, sl_counts = time_gate(sqlite_path, judged, a.repeat)
    finally:
        if cluster is not None:
            cluster.stop()
    pg_med, sl_med = statistics.median(pg_t), statistics.median(sl_t)
    lost = w["lost"]
    cmd = "python benchmarks/bench_pg.py" + "".join(
        f" --{k} {v}" for k, v in (("writers", a.writers), ("runs", a.runs),
                                   ("metrics", a.metrics), ("samples", a.samples),
                                   ("repeat", a.repeat)))
    lines = [
        "# The history on PostgreSQL: concurrent writers and the gate\n",
        f"Command: `{cmd}` (Python {platform.python_version()}, "
        f"{'a throwaway local cluster' if cluster else 'the given server'}, "
        "shared 2-core machine).\n",
        f"- **{a.writers} concurrent writers x {a.runs} runs ({a.metrics} metrics x "
        f"{a.samples} samples): {w['complete']} of {a.writers * a.runs} runs complete, lost "
        f"{lost['runs']} runs / {lost['metrics']} metrics / {lost['samples']} samples, "
        f"{len(w['errors'])} errors**; {w['short_metrics']} metrics without all their samples; "
        f"{w['wall']:.1f} s wall ({a.writers * a.runs / w['wall']:.0f} runs/s), per run "
        f"p50 {1e3 * w['p50']:.0f} ms, p95 {1e3 * w['p95']:.0f} ms.",
        f"- Same history copied to SQLite ({copied} runs, {copy_s:.1f} s). Gate per run "
        f"(open, evaluate_run, verdicts saved, close), median of {a.repeat}: "
        f"**PostgreSQL {1e3 * pg_med:.0f} ms, SQLite {1e3 * sl_med:.0f} ms, ratio "
        f"{pg_med / sl_med:.2f}x** (target within 2x: "
        f"{'met' if pg_med <= 2 * sl_med else 'MISSED'}); verdicts identical: "
        f"{pg_counts == sl_counts} ({', '.join(f'{n} {k}' for k, n in sorted(pg_counts.items()))}).",
    ]
    if w["errors"]:
        lines.append(f"- first error: {w['errors'][0]}")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    ok = not w["errors"] and not any(lost.values()) and not w["short_metrics"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
