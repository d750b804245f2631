"""Between-machine spread: host keys, the variance component, and the gate on a new machine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gates.gate import evaluate_run
from gates.model import machines, stats
from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance, host_key

NODE = "suites/a/test_a.py::test_x"


def hw(*uuids: str) -> dict:
    return {"gpus": [{"name": "NVIDIA H200", "capability": "9.0", "uuid": u} for u in uuids]}


def test_host_key_reads_dicts_and_stored_json_and_never_raises():
    assert host_key(hw("GPU-b", "GPU-a")) == "GPU-a,GPU-b"
    assert host_key(json.dumps(hw("GPU-a"))) == "GPU-a"
    # An old run without uuids, a GPU without one, garbage: no key, no error.
    assert host_key({"gpus": [{"name": "NVIDIA H200"}]}) is None
    assert host_key({"gpus": [{"uuid": "GPU-a"}, {"name": "x"}]}) is None
    for bad in (None, "", "{not json", "[]", {"gpus": "GPU-a"}, {}):
        assert host_key(bad) is None


def _pool(rng, n=30, offsets=(0.0, 0.02, -0.015), noise=0.004):
    names = [f"GPU-{i}" for i in range(len(offsets))]
    hosts = [names[i % len(offsets)] for i in range(n)]
    x = np.array([1 + offsets[i % len(offsets)] + rng.normal(0, noise) for i in range(n)])
    return x, hosts


def test_host_variance_recovers_the_spread_of_machine_offsets():
    rng = np.random.default_rng(1)
    taus = []
    for _ in range(200):
        offs = tuple(rng.normal(0, 0.02, 5))
        x, hosts = _pool(rng, n=40, offsets=offs)
        taus.append(stats.host_variance(x, hosts))
    # Unbiased up to the median/Qn approximations: the mean tau^2 is near 0.02^2.
    assert np.mean(taus) == pytest.approx(0.02**2, rel=0.2)
    x, hosts = _pool(rng, offsets=(0.0, 0.0, 0.0))
    assert stats.host_variance(x, hosts) < 0.004**2  # no machine effect: near 0
    # Not estimable: one machine, singletons, or no names.
    assert stats.host_variance(x, ["GPU-0"] * x.size) is None
    assert stats.host_variance(x[:3], ["a", "b", "c"]) is None
    assert stats.host_variance(x, [None] * x.size) is None
    assert stats.host_variance(x, None) is None


def test_a_new_machine_gets_the_between_machine_spread_and_a_known_one_its_offset():
    rng = np.random.default_rng(2)
    x, hosts = _pool(rng)
    new = stats.judge_summaries(x, 1.03, sign=1, hosts=hosts, host="GPU-new")
    plain = stats.judge_summaries(x, 1.03, sign=1)
    known = stats.judge_summaries(x, 1.03, sign=1, hosts=hosts, host="GPU-1")
    assert new.extras.new_host == 1.0 and new.extras.host_var_known == 1.0
    assert new.p_worse > 3 * plain.p_worse
    # A known machine's offset about the pool's centre is noise too, but its level is
    # part of the baseline: more than no machine model, less than a new machine.
    assert plain.p_worse <= known.p_worse < new.p_worse and not known.extras.new_host
    # Baseline runs that name no machine, in a history that names some: each could be
    # any machine, so their spread is read as between-machine spread.
    old = stats.judge_summaries(x, 1.03, sign=1, hosts=[None] * x.size, host="GPU-new")
    assert old.status == "ok" and old.p_worse >= plain.p_worse
    # One machine in the runs before, the new run on another: the offset cannot be told
    # from a change, and the verdict says so.
    one = stats.judge_summaries(x, 1.03, sign=1, hosts=["GPU-0"] * x.size, host="GPU-new")
    assert one.status == "unguarded" and "machine spread unknown" in one.reason
    same = stats.judge_summaries(x, 1.03, sign=1, hosts=["GPU-0"] * x.size, host="GPU-0")
    assert same.status == "ok"


def test_a_metric_spanning_2x_across_machines_is_unguarded():
    rng = np.random.default_rng(4)
    # int8 block GEMM at M=128 on H200s: 1.9 ms on one machine, 3.0-3.9 ms on others.
    levels = {"GPU-a": 1.9, "GPU-b": 3.4, "GPU-c": 2.1, "GPU-d": 3.8}
    hosts = [sorted(levels)[i % 4] for i in range(24)]
    x = np.array([levels[hk] * (1 + rng.normal(0, 0.01)) for hk in hosts])
    j = stats.judge_summaries(x, 2.0, sign=1, hosts=hosts, host="GPU-a")
    assert j.status == "unguarded" and "spread between machines" in j.reason
    assert stats.decide(j, 1.0, level=0.05) == "unguarded"
    # The same runs on one machine's level: guarded as usual.
    flat = np.array([2.0 * (1 + rng.normal(0, 0.01)) for _ in hosts])
    assert stats.judge_summaries(flat, 2.0, sign=1, hosts=hosts, host="GPU-a").status == "ok"


def _two_mode_fleet(rng) -> tuple[np.ndarray, list[str]]:
    """int8 block GEMM at M=128 on H200s (history.db): ~2.1 ms with a slow mode at ~3.4 ms
    that every machine shows, each machine seen two or three times."""
    hosts, x = [], []
    for m in range(8):
        for r in range(2 + m % 2):
            hosts.append(f"GPU-{m}")
            x.append((3.4 if (m + r) % 3 == 0 else 2.1) * (1 + rng.normal(0, 0.02)))
    return np.array(x), hosts


def test_a_second_mode_every_machine_shows_is_judged_not_unguarded():
    # The modes are within machines: the machine term must not call them machine spread
    # (it did: "run-to-run spread across machines 50%", on 66 committed-history verdicts).
    x, hosts = _two_mode_fleet(np.random.default_rng(5))
    j = stats.judge_summaries(x, 2.1, sign=1, hosts=hosts, host="GPU-1")
    assert j.status == "ok" and j.p_worse > 0.5, (j.status, j.reason)


def test_slow_runs_within_machines_are_not_read_as_between_machine_variance():
    # Nine machines, two runs each, no machine offset; two machines each had one run in a
    # 2x slow mode (FP8 block GEMM at M=128). A robust within-scale beside the plain
    # variance of machine means read tau as 22% of the level; by moments it is ~0.
    rng = np.random.default_rng(5)
    x = np.array([(2.0 if m in (2, 6) and r == 0 else 1.0) * (1 + rng.normal(0, 0.01))
                  for m in range(9) for r in range(2)])
    hosts = [f"GPU-{m}" for m in range(9) for _ in range(2)]
    assert stats.host_variance(x, hosts) < 0.02**2


def test_windows_carry_the_shared_offset_of_one_machines_runs():
    m = machines.MachineModel(4.0, 1.0, frozenset({"a", "b"}), 2)
    f = machines.chi2_median_factor(1)
    # Four runs on four known machines: independent offsets, nothing beyond k draws.
    assert m.window_extra(["a", "b", "c", "d"][:2]) == pytest.approx(0.0)
    # Two of four on one new machine share its offset: tau^2 f (1/2)^2 beyond the iid part.
    assert m.window_extra(["a", "b", "n1", "n1"]) == pytest.approx(
        4.0 / 16 * 2 + 4.0 * f / 4 - 1.0)
    assert m.run_var("a") == 5.0 and m.run_var("new") == pytest.approx(1.0 + 4.0 * f)
    assert machines.chi2_median_factor(1) == pytest.approx(2.198, abs=0.01)
    assert machines.chi2_median_factor(0) == 1.0


def _add(h, i: int, level: float, uuid: str | None, rng) -> str:
    rid = f"run{i:03d}"
    p = Provenance(run_id=rid, suite="s", commit=f"{i:07d}abc", branch="main",
                   started_at=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
                   fingerprint="gpu-a", hardware=hw(uuid) if uuid else {"gpus": [{}]})
    h.run_writes.start_run(p)
    m = validate_metric("lat", list(level * (1 + rng.normal(0, 0.002, 5))), unit="ms",
                        better="lower")
    h.run_writes.record_run(RunRecord(p, [TestResult(NODE, "suites/a/test_a.py", "passed", 1.0)],
                           [(NODE, m)], None, 0))
    return rid


@pytest.mark.parametrize("bulk", [True, False])
def test_gate_allows_for_machine_spread_on_a_new_machine_only(tmp_path: Path, bulk: bool):
    offsets = {"GPU-a": 1.0, "GPU-b": 1.02, "GPU-c": 0.985}
    rng = np.random.default_rng(3)
    with open_history(tmp_path / "history.db") as h:
        for i in range(30):
            u = sorted(offsets)[i % 3]
            _add(h, i, offsets[u] * (1 + rng.normal(0, 0.003)), u, rng)
        # 3% above the pool's centre on a machine never seen: within machine spread.
        rid = _add(h, 100, 1.03, "GPU-new", rng)
        [v] = evaluate_run(h, rid, save=False, bulk=bulk).verdicts
        assert v.verdict == "pass", v
        assert "first run on this machine" in v.message and "allowed for" in v.message
        # A slowdown well beyond the machine spread still trips on a new machine.
        rid = _add(h, 102, 1.12, "GPU-new2", rng)
        [v] = evaluate_run(h, rid, save=False, bulk=bulk).verdicts
        assert v.verdict == "regression" and "allowed for" in v.message, v
        # A known machine carries no note, and a real slowdown is still one.
        rid = _add(h, 101, 1.08, "GPU-a", rng)
        [v] = evaluate_run(h, rid, save=False, bulk=bulk).verdicts
        assert v.verdict == "regression" and not v.message, v


def test_new_machine_messages_never_print_nan_or_a_zero_spread():
    from gates.gate import _new_host_message

    def j(base, **extras):
        return stats.Judgement("ok", base, 0.0, None, None, 0.0, 1.0, 1.0, 0.0, 1, 30, None,
                               extras=stats.JudgeExtras(new_host=True, **extras))

    assert "1.5% allowed for" in _new_host_message(j(2.0, host_var=0.03**2, host_var_known=True))
    zero = _new_host_message(j(0.0, host_var=1e-4, host_var_known=True))  # a 0-centred metric
    assert "nan" not in zero and "0.01 allowed for" in zero
    assert "no spread" in _new_host_message(j(2.0, host_var=0.0, host_var_known=True))
    assert "unknown" in _new_host_message(j(2.0, host_var=0.0, host_var_known=False))


def test_a_known_machine_is_judged_against_its_own_level_not_the_fleets():
    # A fleet whose machines sit 2-3% apart, each run within 0.1% of its machine's
    # level (FlashInfer decode on H200s); then a host new to the history: five clean
    # runs, then a 3% slowdown. The slowdown lies inside the fleet's spread but far
    # outside the host's own runs: its level, once seen, is the reference.
    rng = np.random.default_rng(5)
    levels = {"GPU-a": 1.0, "GPU-b": 1.033, "GPU-c": 1.014, "GPU-d": 1.0, "GPU-e": 1.018}
    hosts = [sorted(levels)[i % 5] for i in range(40)]
    x = [levels[hk] * (1 + rng.normal(0, 0.001)) for hk in hosts]
    for _ in range(5):
        v = 1.0 * (1 + rng.normal(0, 0.001))
        j = stats.judge_summaries(np.array(x), v, sign=1, hosts=hosts, host="GPU-new")
        # Clean: no alarm either way (an improvement takes level x confirm level).
        assert stats.decide(j, j.p_worse, level=0.02, better_level=0.001) == "pass", j
        x.append(v)
        hosts = [*hosts, "GPU-new"]
    bad = stats.judge_summaries(np.array(x), 1.03, sign=1, hosts=hosts, host="GPU-new")
    assert bad.p_worse < 1e-4 and stats.decide(bad, bad.p_worse, level=0.02) == "regression"
    assert bad.rel_change == pytest.approx(0.03, abs=0.003)  # against the host's own level
    # The same value as a first run on a host never seen: inside the fleet's spread.
    new = stats.judge_summaries(np.array(x[:40]), 1.03, sign=1, hosts=hosts[:40],
                                host="GPU-other")
    assert new.p_worse > 0.01
    # A machine whose own runs sit at 1.03 is not slowed by a run at 1.03.
    same = stats.judge_summaries(np.array(x), 1.033, sign=1, hosts=hosts, host="GPU-b")
    assert stats.decide(same, same.p_worse, level=0.02) == "pass"


@pytest.mark.parametrize("bulk", [True, False])
def test_a_change_beyond_any_machine_spread_fails_on_a_new_host_of_one_machine_history(
        tmp_path: Path, bulk: bool):
    # The second H100: the history holds one host of the model, so machine spread
    # is unknown. +5% stays `unguarded` (a machine can be that far off); +20% is beyond
    # every between-machine spread seen (machines.MACHINE_BOUND) and fails after a rerun.
    rng = np.random.default_rng(4)
    with open_history(tmp_path / "history.db") as h:
        for i in range(8):
            _add(h, i, 1.0, "GPU-a", rng)
        rid = _add(h, 100, 1.05, "GPU-b", rng)
        [v] = evaluate_run(h, rid, save=False, bulk=bulk).verdicts
        assert v.verdict == "unguarded" and "machine spread unknown" in v.message, v
        h.run_writes.set_trust([rid], trusted=False, reason="a machine seen once, left out")
        a = _add(h, 101, 1.20, "GPU-c", rng)
        res = evaluate_run(h, a, bulk=bulk, attempts_left=4)
        [v] = res.verdicts
        assert v.verdict == "regression" and res.exit_code == 1, v
        assert "beyond 12%" in v.message and v.rel_change == pytest.approx(0.20, abs=0.01)
        assert v.ci_low is None or v.ci_low > 0.12  # the interval of the whole change
        b = f"run{102:03d}"
        p = Provenance(run_id=b, suite="s", commit="0000101abc", branch="main",
                       started_at="2026-01-01T00:01:42+00:00", fingerprint="gpu-a",
                       hardware=hw("GPU-c"), confirm_of=a)
        h.run_writes.start_run(p)
        m = validate_metric("lat", list(1.20 * (1 + rng.normal(0, 0.002, 5))), unit="ms",
                            better="lower")
        h.run_writes.record_run(RunRecord(p, [TestResult(NODE, "suites/a/test_a.py", "passed", 1.0)],
                               [(NODE, m)], None, 0))
        rb = evaluate_run(h, b, confirm_of=a, bulk=bulk, attempts_left=3)
        assert rb.verdicts[0].verdict == "regression" and rb.exit_code == 1, rb.verdicts
        # The failed run serves no baseline (8 runs of one machine), and the next run,
        # not back at the level before, is still red, on any machine.
        rid = _add(h, 103, 1.05, "GPU-b", rng)
        [v] = evaluate_run(h, rid, save=False, bulk=bulk).verdicts
        assert v.verdict == "regression" and v.open_of == a and v.n_baseline == 8, v
