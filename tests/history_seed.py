"""Seed a temporary history with per-file durations (shared by the scheduling tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gates.history import RunRecord, TestResult, open_history
from gates.provenance import Provenance

__all__ = ["seed"]


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
            h.start_run(prov)
            bad = (failed or {}).get(i)
            tests = [TestResult(f"{f}::test_a", f, "failed" if f == bad else "passed", secs)
                     for f, secs in durations.items()]
            h.record_run(RunRecord(prov, tests, [], None, 0))
            ids.append(prov.run_id)
    return ids
