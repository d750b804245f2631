"""Realistic shard runs for the fleet benchmarks: 73 metrics x 5 samples a run.

Each run is written through the public API (`start_run` + `record_run`) and
gated (`gates.gate.evaluate_run`, verdicts saved), as a CI shard does, so a
history built here holds what a real one does: runs with their hardware JSON,
tests, metrics, samples, plans and one verdict per metric.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path

from gates.gate import evaluate_run
from gates.store.history import History, RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance

__all__ = ["METRICS", "SAMPLES", "build_history", "make_run", "write_run"]

METRICS = 73
SAMPLES = 5
SUITE = "stage-b-1gpu"
FINGERPRINT = "nvidia-h200-x1-sm90-cuda12.8"
_HARDWARE = {
    "gpus": [{"name": "NVIDIA H200", "capability": "9.0", "memory_mib": 143771,
              "uuid": "GPU-5b3e1c2a-8f0d-4c1e-9a77-2f1d3c4b5a69", "driver": "570.124.06"}],
    "cuda": "12.8", "torch": "2.7.1+cu128", "cpu": "AMD EPYC 9654 96-Core Processor",
}
_OPS = ("attention/decode", "attention/prefill", "moe/grouped_gemm", "gemm/fp8", "norm/rms",
        "sampling/topk", "allreduce/one_shot", "kv_cache/copy")
_SHAPES = ("bf16-b1-s1024", "bf16-b16-s4096", "fp8-b64-s8192")


def _metric_names() -> list[tuple[str, str, str]]:
    """(nodeid, key, unit) of the 73 metrics: ~3 metrics per parametrized test."""
    out = []
    i = 0
    while len(out) < METRICS:
        op = _OPS[i % len(_OPS)]
        shape = _SHAPES[(i // len(_OPS)) % len(_SHAPES)]
        path = f"suites/stage_b/test_{op.split('/')[0]}.py"
        nodeid = f"{path}::test_{op.split('/')[1]}[{shape}-v{i // 24}]"
        for stat, unit in (("latency_us", "us"), ("throughput_tflops", "TFLOP/s"),
                           ("bandwidth_gbps", "GB/s")):
            if len(out) < METRICS:
                out.append((nodeid, f"{op}/{shape}-v{i // 24}/{stat}", unit))
        i += 1
    return out


NAMES = _metric_names()


def make_run(i: int, *, suite: str = SUITE, fingerprint: str = FINGERPRINT,
             shard: tuple[int, int] = (1, 1), run_id: str | None = None,
             seed: int = 0) -> RunRecord:
    """Run ``i`` (its start time orders it) of a steady series with realistic noise."""
    rng = random.Random(seed * 1_000_003 + i)
    prov = Provenance(
        run_id=run_id or uuid.UUID(int=rng.getrandbits(128)).hex, suite=suite,
        shard_index=shard[0], shard_count=shard[1],
        commit=f"{rng.getrandbits(160):040x}", branch="main",
        ci_url=f"https://github.com/org/repo/actions/runs/{9000000000 + i}",
        started_at=f"2026-{1 + i // 2000 % 12:02d}-{1 + i // 80 % 25:02d}T"
                   f"{i // 4 % 20:02d}:{i % 60:02d}:{rng.randrange(60):02d}.{i % 999999:06d}+00:00",
        host=f"gpu-runner-{i % 17:02d}", python="3.11.9", fingerprint=fingerprint,
        hardware=_HARDWARE,
    )
    tests: dict[str, TestResult] = {}
    metrics = []
    for k, (nodeid, key, unit) in enumerate(NAMES):
        path = nodeid.split("::")[0]
        tests.setdefault(nodeid, TestResult(nodeid, path, "passed", 2.0 + rng.random()))
        level = 10.0 + k
        better = "lower" if unit == "us" else "higher"
        metrics.append((nodeid, validate_metric(
            key, [level * (1 + rng.gauss(0, 0.01)) for _ in range(SAMPLES)], unit=unit,
            better=better)))
    plan = {"files": [{"path": p, "line": 1, "est_time": 30.0, "expected": 28.0,
                       "marker": "stage_b", "labels": ["gpu"]}
                      for p in sorted({t.path for t in tests.values()})], "gates": []}
    return RunRecord(prov, list(tests.values()), metrics, plan, 0)


def write_run(history: History, record: RunRecord, *, gate: bool = True) -> str:
    """Record ``record`` as a shard would (start, record, gate with verdicts saved)."""
    history.run_writes.start_run(record.provenance)
    history.run_writes.record_run(record)
    if gate:
        evaluate_run(history, record.provenance.run_id)
    return record.provenance.run_id


def build_history(path: Path, runs: int, *, start: int = 0, gate: bool = True,
                  seed: int = 0) -> list[str]:
    """Append ``runs`` runs (numbered from ``start``) to the history at ``path``."""
    with open_history(path) as h:
        return [write_run(h, make_run(start + i, seed=seed), gate=gate) for i in range(runs)]
