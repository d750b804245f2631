"""End-to-end speed of the gate through SQLite: 1,000 metrics against 200-run histories.

Run: ``python benchmarks/bench_gate_speed.py [--metrics 1000] [--runs 200]
[--samples 5] [--repeat 5] [--per-metric] [--out benchmarks/results/bench_gates_speed.md]``
(also ``python benchmarks/bench_gates.py --speed``).

Builds a history in a temporary directory through the ``History`` API (one
suite, one hardware fingerprint, ``--runs`` complete trusted runs, each
recording ``--metrics`` metrics of ``--samples`` samples; a few metrics of
the judged run carry a real regression, so the report path - BH, change-point
localisation - is exercised too), then times ``gates.gate.evaluate_run`` on
one new run end to end: history reads, statistics, BH, verdict rows saved.
``--per-metric`` also times the old path (one history query per metric) for
comparison. Reports wall and CPU (``time.process_time``) seconds and the load
average, as the machine may be shared. Target (issue 27): at most 0.5 s.

``--scaling 200,2000,20000`` (with ``--metrics 1``: one series) instead times the
same judgement against histories of each length and reports the CPU per series
and its ratio to the shortest: the gate reads a window of the history, so its cost
must not grow with the history's length (issue 51: within 1.5x from 200 to 20,000).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates import gate  # noqa: E402
from gates.store.history import History, RunRecord  # noqa: E402
from gates.store.metrics import Metric  # noqa: E402
from gates.store.open import open_history  # noqa: E402
from gates.store.provenance import Provenance  # noqa: E402

__all__ = ["build_history", "time_evaluate", "scaling", "main"]

SUITE = "speed"
FP = "nvidia-h200-x1-sm90"
TARGET_S = 0.5  # issue 27: 1,000 metrics x 200 runs end to end
TARGET_GROWTH = 1.5  # issue 51: CPU per series at the longest history / at the shortest


def _stamp(i: int) -> str:
    return f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"


def _record(h: History, i: int, rid: str, values: np.ndarray, keys: Sequence[str]) -> None:
    # Runs name their machine (one of 4 GPU uuids), as GPU runs do: the gate then reads
    # each baseline run's machine (stats.host_variance only when a machine is new).
    prov = Provenance(run_id=rid, suite=SUITE, commit=f"{i:07d}c0ffee", branch="main",
                      started_at=_stamp(i), fingerprint=FP,
                      hardware={"gpus": [{"name": "NVIDIA H200", "uuid": f"GPU-{i % 4}"}]})
    h.run_writes.start_run(prov)
    metrics = [(f"suites/perf/test_p.py::test_{k.split('/')[0]}",
                Metric(k, tuple(float(v) for v in row), "ms", "lower"))
               for k, row in zip(keys, values, strict=True)]
    h.run_writes.record_run(RunRecord(prov, [], metrics, None, 0))


def build_history(path: Path, *, n_metrics: int = 1000, n_runs: int = 200, samples: int = 5,
                  cv: float = 0.02, n_bad: int = 5, seed: int = 0) -> str:
    """Write ``n_runs`` baseline runs and one judged run; return the judged run's id."""
    rng = np.random.default_rng(seed)
    keys = [f"k{i:04d}/latency" for i in range(n_metrics)]
    level = rng.uniform(0.5, 50.0, n_metrics)
    with open_history(path) as h:
        for i in range(n_runs):
            run_level = level * (1 + rng.normal(0, cv, n_metrics))
            vals = run_level[:, None] * (1 + rng.normal(0, cv / 2, (n_metrics, samples)))
            _record(h, i, f"run{i:04d}", vals, keys)
        run_level = level * (1 + rng.normal(0, cv, n_metrics))
        run_level[:n_bad] *= 1.25  # a few real regressions: BH, decide and localisation run
        vals = run_level[:, None] * (1 + rng.normal(0, cv / 2, (n_metrics, samples)))
        _record(h, n_runs, "judged", vals, keys)
    return "judged"


def time_evaluate(path: Path, run_id: str, *, repeat: int = 3, bulk: bool = True,
                  cpu: list[float] | None = None) -> tuple[list[float], gate.GateResult]:
    """Wall seconds of each of ``repeat`` open + ``evaluate_run`` (saving verdicts) +
    close; ``cpu``, when given, receives each one's CPU seconds of this process."""
    times = []
    res = None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        with open_history(path) as h:
            res = gate.evaluate_run(h, run_id, bulk=bulk)
        times.append(time.perf_counter() - t0)
        if cpu is not None:
            cpu.append(time.process_time() - c0)
    assert res is not None
    return times, res


def scaling(lengths: Sequence[int], *, n_metrics: int = 1, samples: int = 5,
            repeat: int = 5) -> list[tuple[int, float, float]]:
    """(runs, build seconds, best CPU seconds per series of one judgement) per length."""
    out = []
    for n in lengths:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "history.db"
            t0 = time.perf_counter()
            rid = build_history(path, n_metrics=n_metrics, n_runs=n, samples=samples)
            build_s = time.perf_counter() - t0
            cpu: list[float] = []
            time_evaluate(path, rid, repeat=repeat, cpu=cpu)
            out.append((n, build_s, min(cpu) / n_metrics))
    return out


def _scaling_report(a: argparse.Namespace) -> str:
    lengths = [int(x) for x in a.scaling.split(",")]
    got = scaling(lengths, n_metrics=a.metrics, samples=a.samples, repeat=a.repeat)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    base = got[0][2]
    lines = [
        "# Gate cost against the history's length\n",
        f"Command: `python benchmarks/bench_gate_speed.py --scaling {a.scaling} --metrics "
        f"{a.metrics} --repeat {a.repeat}` (Python {platform.python_version()}, SQLite, "
        f"{os.cpu_count()} cores, load average {load} (1/5/15 min) at the end).\n",
        f"One judged run of {a.metrics} metric(s) x {a.samples} samples, open + "
        "`evaluate_run` + verdicts saved, best CPU (`time.process_time`) of "
        f"{a.repeat}, per series.\n",
        "| runs in history | built in | CPU per series | vs shortest |",
        "| ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {n:,} | {b:.1f} s | {1e3 * c:.1f} ms | {c / base:.2f}x |" for n, b, c in got]
    growth = got[-1][2] / base
    lines.append(f"\n{got[-1][0]:,} runs against {got[0][0]:,}: {growth:.2f}x (target <= "
                 f"{TARGET_GROWTH}x: {'met' if growth <= TARGET_GROWTH else 'MISSED'}).")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--per-metric", action="store_true",
                    help="also time the old path (one history query per metric)")
    ap.add_argument("--out", default=None, help="Markdown report path")
    ap.add_argument("--scaling", default=None, metavar="RUNS,RUNS,...",
                    help="time one judgement against histories of these lengths instead")
    a = ap.parse_args(argv)
    if a.scaling:
        md = _scaling_report(a)
        print(md)
        if a.out:
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(md)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.db"
        t0 = time.perf_counter()
        rid = build_history(path, n_metrics=a.metrics, n_runs=a.runs, samples=a.samples)
        build_s = time.perf_counter() - t0
        cpu: list[float] = []
        times, res = time_evaluate(path, rid, repeat=a.repeat, cpu=cpu)
        secs = min(times)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        lines = [
            "# Gate speed, end to end through SQLite\n",
            f"Command: `python benchmarks/bench_gate_speed.py{' --per-metric' if a.per_metric else ''}"
            f"{' --repeat ' + str(a.repeat) if a.repeat != 5 else ''}"
            f"{' --out ' + a.out if a.out else ''}`"
            f" (Python {platform.python_version()}, SQLite, {os.cpu_count()} cores, load "
            f"average {load} (1/5/15 min) at the end).\n",
            f"History: {a.runs} complete trusted runs x {a.metrics} metrics x {a.samples} "
            f"samples, built in {build_s:.1f} s through `RunWrites.record_run`; one new run "
            f"judged with `gates.gate.evaluate_run` (bulk baseline query, BH, verdicts "
            f"saved), best of {a.repeat}.\n",
            f"- **{a.metrics} metrics against {a.runs}-run histories: {secs:.3f} s** best, "
            f"{float(np.median(times)):.3f} s median of {a.repeat} wall "
            f"({1e3 * secs / a.metrics:.2f} ms per metric; target <= {TARGET_S} s: "
            f"{'met' if secs <= TARGET_S else 'MISSED'}); CPU {min(cpu):.3f} s best, "
            f"{float(np.median(cpu)):.3f} s median.",
            f"- verdicts: {', '.join(f'{n} {k}' for k, n in sorted(res.counts().items()))}.",
        ]
        if a.per_metric:
            old_t, res_old = time_evaluate(path, rid, repeat=1, bulk=False)
            old = old_t[0]
            same = ([gate.asdict(v) for v in res_old.verdicts]
                    == [gate.asdict(v) for v in res.verdicts])
            lines.append(f"- old path, one history query per metric: {old:.3f} s "
                         f"({1e3 * old / a.metrics:.2f} ms per metric); verdicts identical: "
                         f"{same}.")
    md = "\n".join(lines) + "\n"
    print(md)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
