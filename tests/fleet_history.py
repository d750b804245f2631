"""A history for the fleet tests: runs of eight metrics x five samples, three files."""

from __future__ import annotations

import random

from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.provenance import Provenance

__all__ = ["ENTRY", "FP", "KEYS", "SUITE", "record"]

SUITE, FP = "stage-b", "h200"
KEYS = [f"k{i}/latency" for i in range(8)]
ENTRY = {"pattern": "k4*", "entry_id": "accept-k4", "reason": "new kernel", "source": "file"}


def record(h, i: int, *, fp: str = FP, keys=KEYS, shift: float = 1.0, confirm_of=None,
            run_id: str | None = None, seed: int = 0, gate_mode: str | None = None) -> str:
    rng = random.Random(i * 7919 + seed)
    prov = Provenance(run_id=run_id or f"run{i:04d}{fp}", suite=SUITE, fingerprint=fp,
                      commit=f"{i:07d}" + "c" * 33, confirm_of=confirm_of, gate_mode=gate_mode,
                      started_at=f"2026-03-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00")
    paths = [f"suites/b/test_{j}.py" for j in range(3)]
    tests = [TestResult(f"{p}::t", p, "passed", 10.0 + j + rng.random())
             for j, p in enumerate(paths)]
    metrics = [(tests[n % 3].nodeid, validate_metric(
        k, [(1.0 + n) * (shift if n == 0 else 1.0) * (1 + rng.gauss(0, 0.01)) for _ in range(5)],
        unit="s", better="lower")) for n, k in enumerate(keys)]
    h.run_writes.start_run(prov)
    h.run_writes.record_run(RunRecord(prov, tests, metrics, None, 0))
    return prov.run_id
