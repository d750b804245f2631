"""Seed temporary histories: per-file durations (the scheduling tests) and runs whose
metrics sit at a chosen level (the gate, accept, owners, compare and notify tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance

__all__ = ["level_run", "seed"]

NODE = "suites/a/test_a.py::test_x"


def seed(path: Path, suite: str, fingerprint: str, runs: Sequence[Mapping[str, float]],
         *, failed: Mapping[int, str] | None = None, start: int = 0) -> list[str]:
    """One complete, trusted run per mapping {file: seconds}, oldest first; returns run ids.

    ``failed`` maps a run's position to a file whose test failed in that run.
    """
    ids = []
    with open_history(path) as h:
        for i, durations in enumerate(runs):
            n = start + i
            prov = Provenance(run_id=f"{suite}-{fingerprint}-{n:04d}", suite=suite,
                              started_at=f"2026-01-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}+00:00",
                              fingerprint=fingerprint)
            h.run_writes.start_run(prov)
            bad = (failed or {}).get(i)
            tests = [TestResult(f"{f}::test_a", f, "failed" if f == bad else "passed", secs)
                     for f, secs in durations.items()]
            h.run_writes.record_run(RunRecord(prov, tests, [], None, 0))
            ids.append(prov.run_id)
    return ids


def level_run(h: Any, i: int, levels: Mapping[str, float | tuple[float, str]],
              rng: np.random.Generator, *, suite: str = "s", run_id: str | None = None,
              commit: str | None = None, branch: str | None = None, fingerprint: str = "fp",
              node: str = NODE, test: bool = True, plan: dict | None = None,
              ci_url: str | None = None) -> str:
    """Record run ``i`` (started i seconds after 2026-01-01) in the open history ``h``:
    per key, 5 samples at ``level`` x (1 + 1% noise), ``better`` "lower" unless given as
    ``(level, better)``; with ``test``, ``node`` passed in 1 s. Returns the run id
    (default ``run-{i:04d}``; commit ``{i:07d}beef``)."""
    p = Provenance(run_id=run_id or f"run-{i:04d}", suite=suite, commit=commit or f"{i:07d}beef",
                   branch=branch, started_at=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
                   fingerprint=fingerprint, ci_url=ci_url)
    h.run_writes.start_run(p)
    metrics = []
    for key, spec in levels.items():
        level, better = spec if isinstance(spec, tuple) else (spec, "lower")
        metrics.append((node, validate_metric(key, list(level * (1 + rng.normal(0, 0.01, 5))),
                                              unit="ms", better=better)))
    tests = [TestResult(node, node.split("::")[0], "passed", 1.0)] if test else []
    h.run_writes.record_run(RunRecord(p, tests, metrics, plan, 0))
    return p.run_id
