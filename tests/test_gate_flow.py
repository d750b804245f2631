"""benchmarks/trace_gate_flow.py: one judgement reads its inputs once and saves once."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import trace_gate_flow  # noqa: E402


def test_each_judgement_visits_the_store_twice_read_then_save(tmp_path):
    flows = trace_gate_flow.scenario(tmp_path / "history.db")
    assert [label.split(" (")[0] for label, _ in flows] == [
        "first attempt", "confirm 1", "confirm 2", "confirm 3"]
    assert "regression" in flows[0][0]  # the first attempt trips: the chain is judged
    for label, flow in flows:
        assert flow.store_visits == 2 and len(flow.stays) <= 10, (label, flow.stays)
        assert flow.stays[0] == flow.stays[-1] == "gates.gate", (label, flow.stays)
        assert flow.stays[-2] == "gates.store.run_writes", (label, flow.stays)  # the save


def test_the_flow_counts_stays_returns_and_store_visits():
    flow = trace_gate_flow.Flow(["gates.gate", "gates.store.a", "gates.store.a",
                                 "gates.store.b", "gates.gate", "gates.store.a", "gates.gate"])
    assert flow.stays == ["gates.gate", "gates.store.a", "gates.store.b", "gates.gate",
                          "gates.store.a", "gates.gate"]
    assert flow.returns == 3 and flow.store_visits == 2
