"""Benchmark acceptance (re-baseline): red runs after an intended, permanent step.

A latency metric (1% run noise, 5 samples a run) runs 30 times at its old level,
then 40 times 10% slower, on purpose. Every run is gated as the suite runner
does (``evaluate_run`` with the runner's confirm reruns, 4 at most); a run is
red when its final verdict is an enforced failure. Three ways to live with it:

- ``none``: nobody accepts (the gate flags the new level until it ages in);
- ``command``: the first red run's operator runs
  ``gate-report accept lat --from <that commit>`` (``AfterWrites.add_acceptance``);
- ``file``: the change ships an entry in ``gates-accept.toml`` (every run after
  the step carries it).

Target (issue 28): ``command`` at most 1 red run, ``file`` 0.

    python benchmarks/bench_accept.py [--seeds 0 1 2] [--before 30] [--after 40] [--confirm 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from gates.gate import evaluate_run
from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance

NODE = "suites/perf/test_lat.py::test_lat"
CONFIRM = 4  # the runner's default confirm reruns
MODES = ("none", "command", "file")
ENTRY = {"pattern": "lat", "reason": "intended: +10% by design", "entry_id": "file:bench",
         "source": "gates-accept.toml:1"}


def _record(h, i: int, level: float, rng, *, confirm_of: str | None = None,
            suffix: str = "") -> str:
    rid = f"run{i:04d}{suffix}"
    p = Provenance(run_id=rid, suite="perf", commit=f"{i:07d}" + "c" * 33, branch="main",
                   started_at=f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
                              f".{len(suffix):03d}+00:00",
                   fingerprint="cpu", confirm_of=confirm_of)
    h.run_writes.start_run(p)
    m = validate_metric("lat", list(level * (1 + rng.normal(0, 0.01, 5))), unit="ms",
                        better="lower")
    h.run_writes.record_run(RunRecord(p, [TestResult(NODE, NODE.split("::")[0], "passed", 1.0)],
                           [(NODE, m)], None, 0))
    return rid


def _gated(h, i: int, level: float, rng, entries: list, confirm: int) -> bool:
    """Run, gate and confirm as ``ci_register.running.runner`` does; True when the run is red."""
    rid = _record(h, i, level, rng)
    res = evaluate_run(h, rid, attempts_left=confirm, acceptances=entries)
    attempt = 0
    while attempt < confirm and res.tripped_nodeids:
        attempt += 1
        cid = _record(h, i, level, rng, confirm_of=rid, suffix="c" * attempt)
        res = evaluate_run(h, cid, confirm_of=rid, attempts_left=confirm - attempt,
                           acceptances=entries)
        rid = cid
    return res.failed


def trial(mode: str, seed: int, before: int, after: int, step: float,
          confirm: int = CONFIRM) -> list[int]:
    """Indices (0-based, after the step) of the red runs."""
    rng = np.random.default_rng(seed)
    red: list[int] = []
    with tempfile.TemporaryDirectory() as tmp, open_history(Path(tmp) / "h.db") as h:
        for i in range(before):
            _record(h, i, 1.0, rng)
        for k in range(after):
            i = before + k
            entries = [ENTRY] if mode == "file" else []
            if _gated(h, i, 1.0 + step, rng, entries, confirm):
                red.append(k)
                if mode == "command" and len(red) == 1:
                    # The operator accepts from the commit that made the change.
                    h.after_writes.add_acceptance("lat", from_commit=f"{before:07d}", who="bench",
                                     reason="intended: +10% by design")
    return red


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--before", type=int, default=30)
    ap.add_argument("--after", type=int, default=40)
    ap.add_argument("--step", type=float, default=0.10)
    ap.add_argument("--confirm", type=int, default=CONFIRM,
                    help="confirm reruns per trip (the runner's --confirm)")
    a = ap.parse_args(argv)
    print(f"red runs of the {a.after} after a permanent +{a.step:.0%} step "
          f"({a.before} runs before; 1% noise, 5 samples a run, confirm {a.confirm})")
    print(f"{'mode':<8} " + " ".join(f"seed {s:<3}" for s in a.seeds) + "  red run indices")
    worst = {}
    for mode in MODES:
        reds = [trial(mode, s, a.before, a.after, a.step, a.confirm) for s in a.seeds]
        worst[mode] = max(len(r) for r in reds)
        print(f"{mode:<8} " + " ".join(f"{len(r):<8}" for r in reds)
              + "  " + "; ".join(",".join(map(str, r)) or "-" for r in reds), flush=True)
    ok = worst["command"] <= 1 and worst["file"] == 0
    print(f"target (command <= 1, file 0): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
