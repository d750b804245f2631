"""Where one judgement goes: the modules ``evaluate_run``'s history passes through.

    python benchmarks/trace_gate_flow.py [--show]

Builds a small history in a temporary directory (30 runs of two metrics, one
acceptance entry carried by the judged run, a first attempt whose metric trips and
a confirm chain of three reruns behind it), then follows each judgement's
``history`` argument with ``sys.setprofile``: every call or return into a Python
frame of ``gates`` that holds the history object among its locals (its argument,
``self``, or a local bound to it) is an event in that frame's module. Consecutive
events in one module are one *stay*; a stay in a module already left is a *return*;
consecutive stays in ``gates.store`` modules are one *store visit*. This is how
issue 51 counted the flow (28 stays in 7 modules, 9 visits to the store, before
the move); the target is at most 10 stays and 2 store visits (read, save).
``--show`` prints each judgement's stays in order.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates.gate import evaluate_run  # noqa: E402
from gates.store.history import RunRecord, TestResult  # noqa: E402
from gates.store.metrics import validate_metric  # noqa: E402
from gates.store.open import open_history  # noqa: E402
from gates.store.provenance import Provenance  # noqa: E402

__all__ = ["Flow", "trace", "main"]

NODE = "suites/a/test_a.py::test_x"


class Flow:
    """The modules a judgement's history passed through, as stays."""

    def __init__(self, modules: Sequence[str]) -> None:
        self.stays: list[str] = []
        for m in modules:
            if not self.stays or self.stays[-1] != m:
                self.stays.append(m)

    @property
    def returns(self) -> int:
        """Stays in a module the flow had already left."""
        return sum(1 for i, m in enumerate(self.stays) if m in self.stays[:i])

    @property
    def store_visits(self) -> int:
        """Runs of consecutive stays in ``gates.store`` modules."""
        return sum(1 for i, m in enumerate(self.stays) if m.startswith("gates.store")
                   and (i == 0 or not self.stays[i - 1].startswith("gates.store")))

    def line(self) -> str:
        return (f"{len(self.stays)} stays in {len(set(self.stays))} modules, "
                f"{self.returns} returns to a module already left, "
                f"{self.store_visits} store visits")


def trace(history: Any, call: Callable[[], Any]) -> tuple[Any, Flow]:
    """``call()``'s result and the flow of ``history`` through ``gates`` modules."""
    seen: list[str] = []

    def part(v: Any) -> bool:
        # The store's writers and readers hold the History they belong to as ``_h``:
        # a frame holding one of them holds the history.
        d = getattr(v, "__dict__", None)
        return v is history or (isinstance(d, dict) and d.get("_h") is history)

    def holds(frame: Any) -> bool:
        name = frame.f_globals.get("__name__", "")
        return name.startswith("gates.") and any(part(v) for v in frame.f_locals.values())

    def prof(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and holds(frame):
            seen.append(frame.f_globals["__name__"])
        elif event == "return" and frame.f_back is not None and holds(frame.f_back):
            seen.append(frame.f_back.f_globals["__name__"])

    sys.setprofile(prof)
    try:
        out = call()
    finally:
        sys.setprofile(None)
    return out, Flow(seen)


def _add(h: Any, i: int, value: float, *, confirm_of: str | None = None) -> str:
    rid = f"run{i:03d}"
    p = Provenance(run_id=rid, suite="s", commit=f"{i:07d}abc", branch="main",
                   started_at=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
                   fingerprint="gpu-a", confirm_of=confirm_of)
    h.run_writes.start_run(p)
    ms = [(NODE, validate_metric(key, [value * (1 + 0.001 * k) for k in range(5)],
                                 unit="ms", better="lower"))
          for key in ("lat", "other")]
    h.run_writes.record_run(RunRecord(p, [TestResult(NODE, "suites/a/test_a.py", "passed", 1.0)],
                           ms, None, 0))
    return rid


def scenario(path: Path) -> list[tuple[str, Flow]]:
    """The judgements of a first attempt that trips and of its confirm chain."""
    import numpy as np

    rng = np.random.default_rng(0)
    entry = [{"pattern": "other", "suite": "s", "test": None, "reason": "new level",
              "from_commit": None, "entry_id": "file:0", "source": "gates-accept.toml:1",
              "who": None}]
    out = []
    with open_history(path) as h:
        for i in range(30):
            _add(h, i, 1.0 + 0.01 * rng.normal())
        prev = _add(h, 40, 1.2)
        for label, attempts_left, i in (("first attempt", 3, None), ("confirm 1", 2, 41),
                                         ("confirm 2", 1, 42), ("confirm 3", 0, 43)):
            rid = prev if i is None else _add(h, i, 1.2, confirm_of=prev)
            res, flow = trace(h, lambda rid=rid, left=attempts_left: evaluate_run(
                h, rid, attempts_left=left, acceptances=entry))
            out.append((f"{label} ({', '.join(v.verdict for v in res.verdicts)})", flow))
            prev = rid
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", action="store_true", help="print each judgement's stays")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        flows = scenario(Path(tmp) / "history.db")
    for label, flow in flows:
        print(f"{label}: {flow.line()}")
        if a.show:
            print("  " + " -> ".join(m.removeprefix("gates.") for m in flow.stays))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
