"""gates.gate: verdicts for a run from a temporary history (SQLite and PostgreSQL), confirm on
trip, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gates.gate import GateInputError, evaluate_run, main, verdict_table
from gates.model import decisions, stats
from gates.store.history import RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance

ROOT = Path(__file__).resolve().parents[1]
NODE = "suites/a/test_a.py::test_x"
NODE2 = "suites/a/test_a.py::test_acc"


def add_run(h, i: int, metrics: dict, *, fp="gpu-a", confirm_of=None, run_id=None,
            trusted=True, gate_mode=None) -> str:
    rid = run_id or f"run{i:03d}"
    p = Provenance(run_id=rid, suite="s", commit=f"{i:07d}abc", branch="main",
                   started_at=f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00",
                   fingerprint=fp, confirm_of=confirm_of, gate_mode=gate_mode)
    h.run_writes.start_run(p)
    ms = []
    for key, (samples, kw) in metrics.items():
        node = kw.pop("nodeid", NODE)
        # "key@2": the same key recorded by a second test of the run (samples pooled).
        ms.append((node, validate_metric(key.split("@")[0], list(samples), **kw)))
    tests = [TestResult(NODE, "suites/a/test_a.py", "passed", 1.0),
             TestResult(NODE2, "suites/a/test_a.py", "passed", 1.0)]
    h.run_writes.record_run(RunRecord(p, tests, ms, None, 0))
    if not trusted:
        h.run_writes.set_trust([rid], trusted=False, reason="test")
    return rid


def lat(rng, level=1.0, cv=0.01, m=5):
    return (level * (1 + rng.normal(0, cv, m)), {"unit": "ms", "better": "lower"})


@pytest.fixture
def h(store_location):
    with open_history(store_location) as history:
        yield history


def fill(h, n=30, seed=0, **extra):
    rng = np.random.default_rng(seed)
    for i in range(n):
        add_run(h, i, {"lat": lat(rng), **{k: f(rng) for k, f in extra.items()}})
    return rng


def test_pass_on_noise_and_saves_verdicts(h):
    rng = fill(h)
    rid = add_run(h, 100, {"lat": lat(rng)})
    res = evaluate_run(h, rid)
    [v] = res.verdicts
    assert v.verdict == "pass" and res.exit_code == 0 and not res.tripped_nodeids
    assert v.baseline == pytest.approx(1.0, abs=0.01) and v.n_baseline == 30
    assert v.ci_low < v.rel_change < v.ci_high and v.p_value is not None
    [row] = h.report_reads.verdicts(rid)
    assert row["verdict"] == "pass" and row["attempt"] == 1 and row["q_value"] is not None


def test_regression_trips_names_test_then_confirm_holds(h):
    rng = fill(h)
    a = add_run(h, 100, {"lat": lat(rng, level=1.10)})
    res = evaluate_run(h, a)
    [v] = res.verdicts
    assert v.verdict == "regression" and res.exit_code == 1
    assert v.rel_change == pytest.approx(0.10, abs=0.02) and v.floor > 0
    assert res.tripped_nodeids == [NODE]
    assert v.change_point is not None and v.change_point["run_id"] == a
    b = add_run(h, 101, {"lat": lat(rng, level=1.10)}, confirm_of=a)
    rb = evaluate_run(h, b, confirm_of=a)
    assert rb.attempt == 2 and rb.verdicts[0].verdict == "regression" and rb.exit_code == 1
    assert h.report_reads.verdicts(b)[0]["attempt"] == 2 and h.report_reads.verdicts(a)[0]["verdict"] == "regression"


def test_confirm_clears_a_one_off(h):
    rng = fill(h)
    a = add_run(h, 100, {"lat": lat(rng, level=1.25)})
    assert evaluate_run(h, a).exit_code == 1
    b = add_run(h, 101, {"lat": lat(rng)}, confirm_of=a)
    rb = evaluate_run(h, b, confirm_of=a)
    assert rb.verdicts[0].verdict == "pass" and rb.exit_code == 0
    # The next ordinary run leaves both the spike and its confirm rerun out of the baseline's way.
    c = add_run(h, 102, {"lat": lat(rng)})
    assert evaluate_run(h, c).verdicts[0].verdict == "pass"


def test_a_transient_leaves_later_baselines_its_rerun(h):
    # A +25% glitch whose clean rerun clears it: the confirm marks the first attempt a
    # transient, and later runs' baselines (both paths) hold the rerun's samples for
    # that run, so the glitch does not feed the windows after it.
    from gates.store import baselines

    rng = fill(h)
    a = add_run(h, 100, {"lat": lat(rng, level=1.25)})
    assert evaluate_run(h, a).exit_code == 1
    clean = lat(rng)
    b = add_run(h, 101, {"lat": clean}, confirm_of=a)
    [v] = evaluate_run(h, b, confirm_of=a).verdicts
    assert v.verdict == "pass" and v.transient and "transient" in v.message
    assert h.report_reads.verdicts(b)[0]["detail"]["transient"] is True
    c = add_run(h, 102, {"lat": lat(rng)})
    run = h.report_reads.run(c)
    one = baselines.baseline_runs(h.baseline_reads, "s", "lat", run["fingerprint"], run, {c})
    assert one[-1]["run_id"] == a and list(one[-1]["samples"]) == list(clean[0])
    assert one[-1]["standin"] and not any(r.get("standin") for r in one[:-1])
    standins: set[str] = set()
    bulk = baselines.bulk_baselines(h.baseline_reads, run, {"lat"}, {c}, 50, standins_out=standins)["lat"]
    assert bulk.summaries[-1] == stats.run_summary(clean[0])
    assert list(bulk.recent[-1]) == list(clean[0])
    assert standins == {"lat"}  # the newest baseline run stands in: the judge is told
    _same_both_ways(h, c)
    # A rerun as slow as its first attempt is no transient: nothing is substituted.
    d = add_run(h, 103, {"lat": lat(rng, level=1.25)})
    evaluate_run(h, d)
    e = add_run(h, 104, {"lat": lat(rng, level=1.25)}, confirm_of=d)
    assert not evaluate_run(h, e, confirm_of=d).verdicts[0].transient
    f = add_run(h, 105, {"lat": lat(rng)})
    run = h.report_reads.run(f)
    standins = set()
    assert baselines.bulk_baselines(h.baseline_reads, run, {"lat"}, {f}, 50,
                                    standins_out=standins)["lat"].summaries[-1] > 1.15
    assert standins == set()  # the stand-in is no longer the newest run


def test_the_run_after_a_transient_is_judged_knowing_its_predecessor_stands_in(h, monkeypatch):
    # Both paths tell the judge (and a confirm of that run) that the newest baseline run
    # is a rerun standing in for a transient (judge_summaries(standin_last=True)).
    from gates.model import decisions

    rng = fill(h)
    a = add_run(h, 100, {"lat": lat(rng, level=1.25)})
    evaluate_run(h, a)
    b = add_run(h, 101, {"lat": lat(rng)}, confirm_of=a)
    assert evaluate_run(h, b, confirm_of=a).verdicts[0].transient
    seen: list[bool] = []
    real, real_many = decisions.judge_summaries, stats.judge_many

    def spy(*args, **kw):
        seen.append(bool(kw.get("standin_last")))
        return real(*args, **kw)

    def spy_many(cases):  # first attempts: the run's metrics judged together
        seen.extend(c.standin_last for c in cases)
        return real_many(cases)

    monkeypatch.setattr(stats, "judge_summaries", spy)
    monkeypatch.setattr(stats, "judge_many", spy_many)
    monkeypatch.setattr(decisions, "judge_summaries", spy)
    c = add_run(h, 102, {"lat": lat(rng, level=1.25)})
    for bulk in (True, False):
        seen.clear()
        assert evaluate_run(h, c, bulk=bulk, save=False).verdicts[0].verdict == "regression"
        assert seen and all(seen), bulk
    evaluate_run(h, c)
    d = add_run(h, 103, {"lat": lat(rng, level=1.25)}, confirm_of=c)
    for bulk in (True, False):  # the confirm of that run is judged against the same baseline
        seen.clear()
        evaluate_run(h, d, confirm_of=c, bulk=bulk, save=False)
        assert seen and all(seen), bulk
    e = add_run(h, 104, {"lat": lat(rng, level=0.97)})  # back below c's level before
    for bulk in (True, False):  # c failed: it serves no baseline, a's rerun is still newest
        seen.clear()
        evaluate_run(h, e, bulk=bulk, save=False)
        assert seen and all(seen), bulk
    evaluate_run(h, e)  # red while c is open; accepted, c and e serve baselines again
    h.after_writes.add_acceptance("lat", from_commit="0000102abc", reason="slower by design")
    f = add_run(h, 105, {"lat": lat(rng)})
    for bulk in (True, False):  # e was no transient: its successor is judged plainly
        seen.clear()
        evaluate_run(h, f, bulk=bulk, save=False)
        assert seen and not any(seen), bulk


def const(level: float) -> tuple[list[float], dict]:
    return [level] * 5, {"unit": "ms", "better": "lower"}


def test_suspect_reruns_without_failing_and_the_rerun_decides(h):
    rng = fill(h)
    a = add_run(h, 100, {"lat": const(1.016)})  # short of the level, past the screen
    # Warn mode reruns nothing, so it suspects nothing.
    rw = evaluate_run(h, a, mode="warn", save=False)
    assert rw.verdicts[0].verdict == "pass" and not rw.tripped_nodeids
    res = evaluate_run(h, a)
    [v] = res.verdicts
    assert v.verdict == "suspect" and res.exit_code == 0 and res.tripped_nodeids == [NODE]
    assert "confirm rerun decides" in v.message and "suspect" in verdict_table(res)
    # The rerun decides: clean, or not clear enough as a pair -> pass; a real change holds.
    for i, (samples, verdict) in enumerate(((lat(rng), "pass"), (const(1.016), "pass"),
                                            (const(1.022), "regression"))):
        b = add_run(h, 101 + i, {"lat": samples}, confirm_of=a)
        rb = evaluate_run(h, b, confirm_of=a)
        assert rb.attempt == 2 and [x.verdict for x in rb.verdicts] == [verdict]
        assert rb.exit_code == (verdict == "regression")


def test_confirm_judges_only_tripped_metrics(h):
    rng = fill(h, tp=lambda r: (1000 * (1 + r.normal(0, 0.01, 5)),
                                {"unit": "tok/s", "better": "higher"}))
    a = add_run(h, 100, {"lat": lat(rng, level=1.2),
                         "tp": (1000 * (1 + rng.normal(0, 0.01, 5)),
                                {"unit": "tok/s", "better": "higher"})})
    res = evaluate_run(h, a)
    assert {v.key: v.verdict for v in res.verdicts} == {"lat": "regression", "tp": "pass"}
    b = add_run(h, 101, {"lat": lat(rng, level=1.2)}, confirm_of=a)
    rb = evaluate_run(h, b)  # confirm_of read from the run itself
    assert [v.key for v in rb.verdicts] == ["lat"] and rb.confirm_of == a


def test_warn_mode_never_fails_and_off_judges_nothing(h):
    rng = fill(h)
    a = add_run(h, 100, {"lat": lat(rng, level=1.3)})
    res = evaluate_run(h, a, mode="warn")
    assert res.verdicts[0].verdict == "regression" and res.verdicts[0].mode == "warn"
    assert res.exit_code == 0 and res.tripped_nodeids == []
    assert evaluate_run(h, a, mode="off").verdicts == []


def test_cold_start_insufficient_history_but_bounds_apply(h):
    rng = np.random.default_rng(1)
    for i in range(3):
        add_run(h, i, {"lat": lat(rng)})
    rid = add_run(h, 10, {"lat": lat(rng), "acc": ([0.80], {"unit": "ratio", "better": "higher",
                                                            "n": 1319, "min_value": 0.85,
                                                            "nodeid": NODE2})})
    res = evaluate_run(h, rid)
    got = {v.key: v for v in res.verdicts}
    assert got["lat"].verdict == "insufficient-history"
    assert got["acc"].verdict == "threshold-fail" and "min_value" in got["acc"].message
    assert res.exit_code == 1 and res.tripped_nodeids == [NODE2]


def test_declared_gate_missing_metric_and_declared_options(h):
    rng = fill(h)
    rid = add_run(h, 100, {"lat": lat(rng, level=1.04)})
    plan = {"gates": [
        {"path": "suites/a/test_a.py", "line": 4, "metric_key": "lat",
         "options": {"min_change": 0.10}},
        {"path": "suites/b/test_b.py", "line": 5, "metric_key": "gone",
         "options": {"better": "higher"}},
    ]}
    res = evaluate_run(h, rid, plan=plan)
    got = {v.key: v for v in res.verdicts}
    assert got["lat"].verdict == "pass" and got["lat"].floor == pytest.approx(0.10)
    assert got["gone"].verdict == "missing" and got["gone"].nodeid == "suites/b/test_b.py"
    assert res.exit_code == 1


def test_accuracy_uses_binomial_noise(h):
    rng = np.random.default_rng(3)
    acc = {"unit": "ratio", "better": "higher", "n": 200}
    for i in range(30):
        add_run(h, i, {"acc": ([rng.binomial(200, 0.9) / 200], dict(acc))})
    # 0.9 -> 0.87 on 200 questions is within binomial noise (se ~ 0.021).
    rid = add_run(h, 100, {"acc": ([0.87], dict(acc))})
    assert evaluate_run(h, rid).verdicts[0].verdict == "pass"


def test_baseline_uses_trusted_same_hardware_only(h):
    rng = fill(h)
    for i in range(40, 50):  # a faster GPU and untrusted slow runs must not move the baseline
        add_run(h, i, {"lat": lat(rng, level=0.5)}, fp="gpu-b")
        add_run(h, i + 20, {"lat": lat(rng, level=2.0)}, trusted=False)
    rid = add_run(h, 100, {"lat": lat(rng)})
    v = evaluate_run(h, rid).verdicts[0]
    assert v.verdict == "pass" and v.n_baseline == 30


def test_bh_across_many_metrics_keeps_quiet(h):
    rng = np.random.default_rng(5)
    for i in range(30):
        add_run(h, i, {f"m{j}": lat(rng) for j in range(40)})
    rid = add_run(h, 100, {f"m{j}": lat(rng) for j in range(40)})
    res = evaluate_run(h, rid)
    assert res.counts().get("regression", 0) == 0 and res.counts().get("improvement", 0) == 0
    assert all(v.q_value >= v.p_value for v in res.verdicts)


def test_bad_input(h):
    with pytest.raises(GateInputError, match="no run"):
        evaluate_run(h, "nope")
    fill(h, n=2)
    with pytest.raises(GateInputError, match="mode"):
        evaluate_run(h, "run000", mode="loud")
    with pytest.raises(GateInputError, match="min_change"):
        evaluate_run(h, "run000", plan={"gates": [{"metric_key": "lat", "path": "x.py",
                                                   "line": 1, "options": {"min_change": -1}}]})


def test_table_lists_every_verdict(h):
    rng = fill(h)
    rid = add_run(h, 100, {"lat": lat(rng, level=1.2)})
    text = verdict_table(evaluate_run(h, rid))
    assert "regression" in text and "lat" in text and "run(s) ago" in text


def test_cli_exit_codes_and_tripped_out(h, tmp_path, capsys):
    rng = fill(h)
    rid = add_run(h, 100, {"lat": lat(rng, level=1.2)})
    db = str(h.path)
    out = tmp_path / "tripped.json"
    assert main(["--history", db, "--run-id", rid, "--tripped-out", str(out)]) == 1
    assert json.loads(out.read_text()) == [NODE]
    assert "regression" in capsys.readouterr().out
    assert main(["--history", db, "--run-id", rid, "--mode", "warn"]) == 0
    assert main(["--history", db, "--run-id", "nope"]) == 2
    assert "error: no run" in capsys.readouterr().err
    assert main(["--history", str(tmp_path / "none.db"), "--run-id", rid]) == 2
    bad = tmp_path / "plan.json"
    bad.write_text("{")
    assert main(["--history", db, "--run-id", rid, "--plan", str(bad)]) == 2
    assert main(["--history", db]) == 2


def test_cli_as_module(h):
    rng = fill(h, n=6)
    rid = add_run(h, 100, {"lat": lat(rng)})
    p = subprocess.run([sys.executable, "-m", "gates.gate", "--history", str(h.path),
                        "--run-id", rid, "--json"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)[0]["verdict"] == "pass"


def _series_history(h) -> None:
    """A messy history: >80 rows per key, pooled nodeids, gaps, ties, untrusted, confirms."""
    rng = np.random.default_rng(11)
    rr = np.random.default_rng(13)  # its own stream: the other keys' draws stay as they were
    tp = {"unit": "tok/s", "better": "higher"}
    for i in range(110):
        ms = {"lat": lat(rng, level=1.0 + 0.002 * (i > 90)),
              "tp": (1000 * (1 + rng.normal(0, 0.02, 3)), dict(tp)),
              "one": ([1 + rng.normal(0, 0.03)], {"unit": "ms", "better": "lower"}),
              "pooled": lat(rng), "pooled@2": None}
        ms["pooled@2"] = (ms["pooled"][0] * 1.001, {**ms["pooled"][1], "nodeid": NODE2})
        if i % 3 == 0:
            ms["sparse"] = lat(rng, cv=0.02)
        # 2-5 samples a run: even counts take the mean of the middle two, stored
        # (metrics.median) and recomputed (stats) alike, bit for bit.
        ms["ragged"] = (3.3 * (1 + rr.normal(0, 0.02, 2 + i % 4)), {"unit": "ms", "better": "lower"})
        ms = {k: v for k, v in ms.items() if v is not None}
        add_run(h, i, ms, trusted=i % 17 != 5)
        if i % 10 == 0:  # another GPU, and a confirm rerun of this run: never baselines
            add_run(h, i, {"lat": lat(rng, level=0.5)}, fp="gpu-b", run_id=f"b{i:03d}")
            add_run(h, i, {"lat": lat(rng, level=3.0)}, confirm_of=f"run{i:03d}",
                    run_id=f"c{i:03d}")
        if i % 25 == 0:  # two runs started at the same second
            add_run(h, i, {"lat": lat(rng), "one": ([1.0], {"unit": "ms", "better": "lower"})},
                    run_id=f"tie{i:03d}")


def _same_both_ways(h, rid: str, **kw) -> list:
    from dataclasses import asdict

    bulk = evaluate_run(h, rid, save=False, **kw)
    one = evaluate_run(h, rid, save=False, bulk=False, **kw)
    assert [asdict(v) for v in bulk.verdicts] == [asdict(v) for v in one.verdicts]
    return bulk.verdicts


def test_bulk_baselines_summarise_bit_for_bit_like_the_per_metric_path(h):
    # The bulk path reads stored medians and only the newest runs' samples; the
    # per-metric path recomputes from every sample. Both must feed the statistics the
    # same numbers exactly (odd and even sample counts, pooled rows, gaps).
    from gates.store import baselines

    _series_history(h)
    rng = np.random.default_rng(12)
    new = add_run(h, 200, {k: lat(rng) for k in ("lat", "one", "pooled", "sparse", "ragged")})
    run = h.report_reads.run(new)
    # Rows whose samples are gone read as their stored median, in the newest runs (the
    # within-run spread) and in older ones, single and pooled.
    gone = [r[0] for r in h.conn.execute(
        "SELECT id FROM metrics WHERE run_id IN ('run105', 'run070') AND key IN ('lat', 'pooled')")]
    assert len(gone) == 6
    h.in_transaction(lambda: h.conn.execute(
        f"UPDATE metric_rows SET samples = NULL WHERE id IN ({','.join('?' * len(gone))})",
        gone))
    keys = {"lat", "tp", "one", "pooled", "sparse", "ragged"}
    need = stats.DEFAULTS.window + max(stats.DEFAULTS.windows)
    bulk = baselines.bulk_baselines(h.baseline_reads, run, keys, {new}, need)
    assert isinstance(bulk["ragged"], stats.Summarized) and isinstance(bulk["pooled"], list)
    probe = np.array([1.0, 1.2, 0.9, 1.1])
    for key in sorted(keys):
        base = baselines.baseline_runs(h.baseline_reads, "s", key, run["fingerprint"], run, {new})
        one = stats.summarize([r.get("samples") or [r["median"]] for r in base], probe)
        got = stats.summarize(bulk[key], probe)
        assert np.array_equal(got[0], one[0]) and got[1:] == one[1:], key


def test_bulk_baselines_give_the_per_metric_verdicts(h):
    _series_history(h)
    rng = np.random.default_rng(12)
    new = add_run(h, 200, {"lat": lat(rng, level=1.3), "tp": (900 * np.ones(3), {
        "unit": "tok/s", "better": "higher"}), "one": ([1.0], {"unit": "ms", "better": "lower"}),
        "sparse": lat(rng), "pooled": lat(rng, level=0.8),
        "ragged": (3.3 * (1 + rng.normal(0, 0.02, 3)), {"unit": "ms", "better": "lower"})})
    got = {v.key: v for v in _same_both_ways(h, new)}
    assert got["ragged"].verdict == "pass" and got["ragged"].n_baseline == 50
    assert got["lat"].verdict == "regression" and got["lat"].change_point is not None
    # (one run 20% faster: a pass; an improvement is read on a window, never one run)
    assert got["tp"].verdict == "regression" and got["pooled"].verdict == "pass"
    assert got["pooled"].rel_change is not None
    # A long history is read as far as the statistics look: the window and the last 10 runs.
    need = stats.DEFAULTS.window + max(stats.DEFAULTS.windows)
    assert got["sparse"].n_baseline == 35 and got["lat"].n_baseline == need == 50
    # Re-gating an old run: only runs started before it count (later ones still fill the
    # 80-row window the per-metric query reads).
    assert 0 < max(v.n_baseline for v in _same_both_ways(h, "run050")) < 40
    _same_both_ways(h, "run003")  # short history: insufficient-history on both paths
    evaluate_run(h, new)
    conf = add_run(h, 201, {"lat": lat(rng, level=1.3), "tp": (900 * np.ones(3), {
        "unit": "tok/s", "better": "higher"})}, confirm_of=new)
    assert [v.verdict for v in _same_both_ways(h, conf)] == ["regression", "regression"]


def test_first_run_on_an_empty_history(h):
    # The very first run of a suite has no baseline row at all (the CI cold start).
    rng = np.random.default_rng(3)
    rid = add_run(h, 0, {"lat": lat(rng)})
    res = evaluate_run(h, rid)
    assert [v.verdict for v in res.verdicts] == ["insufficient-history"] and res.exit_code == 0


def _const(v, node=NODE):
    return ([v] * 5, {"unit": "ms", "better": "lower", "nodeid": node})


def _two_metric_trip(h, n: int, a: float = 1.016, a2: float = 1.016) -> str:
    """n independent 1%-noise runs of lat and lat2 (another test), then A: ``a``, ``a2``."""
    rng = np.random.default_rng(0)
    for i in range(n):
        add_run(h, i, {"lat": lat(rng), "lat2": (lat(rng)[0], {"unit": "ms", "better": "lower",
                                                               "nodeid": NODE2})})
    return add_run(h, 100, {"lat": _const(a), "lat2": _const(a2, NODE2)})


def test_two_stage_confirm_chain_a_b_c(h):
    # Independent 1%-noise baseline (40 runs: the two-stage level needs 30 in the windows'
    # baseline, the runs before the last 10); two metrics trip on A (+1.4%, +1.6%), only
    # at that level.
    a = _two_metric_trip(h, 40, 1.014)
    # At the gate's own level (no second rerun may follow) both are only suspects.
    assert {v.verdict for v in evaluate_run(h, a, save=False).verdicts} == {"suspect"}
    ra = evaluate_run(h, a, attempts_left=2)
    assert {v.key: v.verdict for v in ra.verdicts} == {"lat": "regression", "lat2": "regression"}
    # Warn mode reruns nothing: the gate's own level.
    assert all(v.verdict != "regression"
               for v in evaluate_run(h, a, mode="warn", attempts_left=2, save=False).verdicts)
    # B: lat's rerun is clear (+4%, about 8 run scales): it holds alone, at the mixture
    # SPRT boundary; lat2's is borderline and asks for a second rerun.
    b = add_run(h, 101, {"lat": _const(1.04), "lat2": _const(1.010, NODE2)}, confirm_of=a)
    rb = evaluate_run(h, b, attempts_left=1)
    got = {v.key: v for v in rb.verdicts}
    assert {k: v.verdict for k, v in got.items()} == {"lat": "regression", "lat2": "suspect"}
    assert "holds alone" in got["lat"].message and got["lat"].stage == "rerun"
    assert "borderline" in got["lat2"].message
    assert rb.tripped_nodeids == [NODE2] and rb.exit_code == 1
    assert {r["key"]: r["stage"] for r in h.report_reads.verdicts(b)} == {"lat": "rerun", "lat2": "rerun"}
    # C reruns lat2 only: the two reruns' mean decides (the last attempt: outright).
    c = add_run(h, 102, {"lat": _const(1.04), "lat2": _const(1.014, NODE2)}, confirm_of=b)
    rc = evaluate_run(h, c)
    got = {v.key: v for v in rc.verdicts}
    assert got["lat2"].verdict == "regression" and got["lat2"].n_baseline == 40  # A left out
    assert "mean of 2 reruns" in got["lat2"].message and got["lat2"].stage == "reruns"
    assert got["lat"].verdict == "regression" and "held at confirm attempt 2" in got["lat"].message
    assert rc.exit_code == 1 and rc.attempt == 3 and rc.tripped_nodeids == []
    # The same chain with a clean second rerun passes lat2 (lat still held).
    c2 = add_run(h, 103, {"lat": _const(1.04), "lat2": _const(1.0, NODE2)}, confirm_of=b)
    got2 = {v.key: v.verdict for v in evaluate_run(h, c2, save=False).verdicts}
    assert got2 == {"lat": "regression", "lat2": "pass"}
    # One attempt left on B: no second rerun is asked for, and lat's clear rerun holds.
    got1 = {v.key: v.verdict for v in evaluate_run(h, b, save=False).verdicts}
    assert "suspect" not in got1.values() and got1["lat"] == "regression"


def test_sequential_confirm_chain_of_four_reruns(h):
    # A 45-run independent baseline (the third and fourth reruns need 30 baseline runs):
    # lat is held at B; lat2 stays borderline, so each rerun's gate asks for another and
    # the mean of all its reruns decides at the last one (E), with A to D left out; lat's
    # failure held at B (a clear rerun holds alone) is carried, not judged again.
    a = _two_metric_trip(h, 45)
    ra = evaluate_run(h, a, attempts_left=4)
    assert {v.verdict for v in ra.verdicts} == {"regression"}
    b = add_run(h, 101, {"lat": _const(1.04), "lat2": _const(1.007, NODE2)}, confirm_of=a)
    rb = evaluate_run(h, b, attempts_left=3)
    assert {v.key: v.verdict for v in rb.verdicts} == {"lat": "regression", "lat2": "suspect"}
    c = add_run(h, 102, {"lat2": _const(1.006, NODE2)}, confirm_of=b)
    rc = evaluate_run(h, c, attempts_left=2)
    got = {v.key: v for v in rc.verdicts}
    assert got["lat"].verdict == "regression" and "held at confirm attempt 2" in got["lat"].message
    assert got["lat2"].verdict == "suspect" and rc.tripped_nodeids == [NODE2]
    assert "else another rerun" in got["lat2"].message
    d = add_run(h, 103, {"lat2": _const(1.008, NODE2)}, confirm_of=c)
    rd = evaluate_run(h, d, attempts_left=1)
    got = {v.key: v for v in rd.verdicts}
    assert got["lat2"].verdict == "suspect" and rd.tripped_nodeids == [NODE2]
    assert "mean of 3 reruns" in got["lat2"].message
    assert got["lat"].verdict == "regression" and "held at confirm attempt 2" in got["lat"].message
    e = add_run(h, 110, {"lat2": _const(1.013, NODE2)}, confirm_of=d)
    re_ = evaluate_run(h, e)
    got = {v.key: v for v in re_.verdicts}
    assert got["lat2"].verdict == "regression" and "mean of 4 reruns" in got["lat2"].message
    assert f"held at p <= {decisions.FINAL_MEAN:g}" in got["lat2"].message
    assert got["lat2"].n_baseline == 45 and got["lat"].verdict == "regression"
    assert re_.attempt == 5 and re_.exit_code == 1 and re_.tripped_nodeids == []
    assert [r["key"] for r in h.report_reads.verdicts(e)] == ["lat2"]  # carried verdicts are not saved again
    # A clean last rerun: the mean of the four is noise, lat2 passes (lat still held).
    e2 = add_run(h, 111, {"lat2": _const(0.998, NODE2)}, confirm_of=d)
    assert ({v.key: v.verdict for v in evaluate_run(h, e2, save=False).verdicts}
            == {"lat": "regression", "lat2": "pass"})


def test_a_chain_whose_first_attempt_is_a_transient_holds_only_clear_reruns(h):
    # The four-rerun chain of lat2 above, but A a glitch: +2.7%, about 5 run scales, where
    # its reruns sit at +0.6-1.3%. B alone does not show it (the first stage goes on);
    # the mean of all four puts A far beyond their regime, and they hold only at the
    # last stage: the chain passes and says why. A at +1.6% (one draw of that regime)
    # holds, as in the test above.
    a = _two_metric_trip(h, 45, a=1.0, a2=1.027)  # lat stays quiet
    assert {v.key: v.verdict for v in evaluate_run(h, a, attempts_left=4).verdicts} == {
        "lat": "pass", "lat2": "regression"}
    prev = a
    for i, (x, left) in enumerate(((1.007, 3), (1.006, 2), (1.008, 1), (1.013, 0))):
        r = add_run(h, 101 + i, {"lat2": _const(x, NODE2)}, confirm_of=prev)
        res = evaluate_run(h, r, attempts_left=left)
        [v] = [v for v in res.verdicts if v.key == "lat2"]
        prev = r
    assert v.verdict == "pass" and res.exit_code == 0 and res.attempt == 5
    assert "first attempt 1.027 is a transient against the mean of its 4 reruns" in v.message
    assert "not clear on their own" in v.message
    assert h.report_reads.verdicts(prev)[0]["detail"]["chain_transient"] is True


def test_confirm_chain_that_loops_is_an_input_error(h):
    fill(h, 10)
    h.run_writes.start_run(Provenance(run_id="x", suite="s", commit="c", branch="main",
                           started_at="2026-01-02T00:00:00+00:00", fingerprint="gpu-a",
                           confirm_of="y"))
    h.run_writes.start_run(Provenance(run_id="y", suite="s", commit="c", branch="main",
                           started_at="2026-01-02T00:00:01+00:00", fingerprint="gpu-a",
                           confirm_of="x"))
    from gates.attempts import ChainError, read_chain

    with pytest.raises(ChainError, match="loops"):
        read_chain(h, "x")


def test_two_stage_level_never_announces_improvements(h):
    # 1.5% faster: an improvement only at the looser first-attempt level, which exists to
    # be confirmed; improvements are never rerun, so they keep the gate's own level.
    rng = np.random.default_rng(0)
    for i in range(30):
        add_run(h, i, {"lat": lat(rng)})
    a = add_run(h, 100, {"lat": _const(0.986)})
    [v] = evaluate_run(h, a, attempts_left=2, save=False).verdicts
    assert v.verdict == "pass" and v.p_value is not None


def _two_trips(h, c1: float) -> tuple[str, str]:
    """45 independent runs, then run100 trips (+1.6%) and reruns 1.010 (borderline) and
    ``c1``; run110 trips again and reruns 1.010: returns (run100's last rerun, run110's
    first rerun), whose gate judges run110's borderline metric at its last rerun."""
    c1_ = _first_trip(h, c1)
    a2 = add_run(h, 110, {"lat": _const(1.016)})
    assert evaluate_run(h, a2, attempts_left=2).verdicts[0].verdict == "regression"
    b2 = add_run(h, 111, {"lat": _const(1.010)}, confirm_of=a2)
    assert evaluate_run(h, b2, attempts_left=1).verdicts[0].verdict == "suspect"
    return c1_, b2


def _first_trip(h, c1: float) -> str:
    """``_two_trips`` up to run100's last rerun (``c1``), returned."""
    rng = np.random.default_rng(0)
    for i in range(45):
        add_run(h, i, {"lat": lat(rng)})
    a1 = add_run(h, 100, {"lat": _const(1.016)})
    assert evaluate_run(h, a1, attempts_left=2).verdicts[0].verdict == "regression"
    b1 = add_run(h, 101, {"lat": _const(1.010)}, confirm_of=a1)
    assert evaluate_run(h, b1, attempts_left=1).verdicts[0].verdict == "suspect"
    c1_ = add_run(h, 102, {"lat": _const(c1)}, confirm_of=b1)
    evaluate_run(h, c1_)
    return c1_


def test_unheld_confirm_reruns_of_a_recent_run_join_the_next_confirm(h):
    # run100's confirm went on to a second rerun and did not hold; its two reruns join
    # run110's: the mean of four (+1.05%) holds where run110's own two would not.
    c1, b2 = _two_trips(h, 1.009)
    assert h.report_reads.verdicts(c1)[0]["verdict"] == "pass"
    # What is carried: chains with two or more reruns of the key (run110 has one so far).
    from gates.store.baselines import unheld_chains
    assert unheld_chains(h.baseline_reads, "s", "lat", ["run099", "run100", "run110"]) == [
        ("run100", ["run101", "run102"])]
    assert unheld_chains(h.baseline_reads, "s", "other", ["run100"]) == []
    c2 = add_run(h, 112, {"lat": _const(1.012)}, confirm_of=b2)
    for bulk in (True, False):
        [v] = evaluate_run(h, c2, save=False, bulk=bulk).verdicts
        assert v.verdict == "regression", bulk
        assert "mean of 4 reruns" in v.message and "2 carried" in v.message
        assert "unheld confirms of run100" in v.message


def test_a_held_confirm_is_not_carried(h):
    # The same runs, but run100's second rerun held its regression: nothing is carried
    # (a held failure is final), and run110, at the held level, is red at once (a red
    # stays red): no confirm to carry anything into.
    c1 = _first_trip(h, 1.016)
    assert h.report_reads.verdicts(c1)[0]["verdict"] == "regression"
    from gates.store.baselines import unheld_chains
    assert unheld_chains(h.baseline_reads, "s", "lat", ["run100"]) == []
    res = evaluate_run(h, add_run(h, 110, {"lat": _const(1.016)}), attempts_left=2)
    assert res.verdicts[0].open_of == "run100" and not res.tripped_nodeids


def test_a_quantile_trip_is_confirmed_by_its_reruns_own_quantile_test(h):
    # A two-mode baseline (a quarter of its runs 4-12% slow), then a sustained +20%: the
    # quantile test trips A. The reruns are judged alone (A's window left out): the least
    # bad of them against the baseline, held only at confirm_level after the last rerun.
    from test_stats import _slow_mode_baseline

    for i, x in enumerate(_slow_mode_baseline(31) / 100):
        add_run(h, i, {"lat": _const(float(x))})
    for i in range(40, 49):
        add_run(h, i, {"lat": _const(1.20 + 0.003 * (i % 3))})
    a = add_run(h, 100, {"lat": _const(1.21)})
    ra = evaluate_run(h, a, attempts_left=2)
    assert ra.verdicts[0].verdict == "regression" and "quantile" in ra.verdicts[0].method
    b = add_run(h, 101, {"lat": _const(1.25)}, confirm_of=a)
    rb = evaluate_run(h, b, attempts_left=1)
    [v] = rb.verdicts
    assert v.verdict == "suspect" and "on track" in v.message, v.message
    assert rb.tripped_nodeids == [NODE] and rb.exit_code == 0
    # With no rerun left, B decides alone: beyond every baseline run, p 1/32 <= 0.05.
    assert evaluate_run(h, b, save=False).verdicts[0].verdict == "regression"
    # A clean next rerun (in the baseline's fast mode): the regression does not hold ...
    c = add_run(h, 102, {"lat": _const(1.005)}, confirm_of=b)
    [vc] = evaluate_run(h, c).verdicts
    assert vc.verdict == "pass" and "least bad of 2 rerun(s)" in vc.message, vc.message
    # ... two that lean bad (both beyond the slow mode) hold it.
    c2 = add_run(h, 103, {"lat": _const(1.21)}, confirm_of=b)
    [vc2] = evaluate_run(h, c2, save=False).verdicts
    assert vc2.verdict == "regression" and evaluate_run(h, c2, save=False).exit_code == 1


def test_cli_plan_is_a_bounded_regular_file(tmp_path, monkeypatch, capsys):
    # `--plan FIFO` blocked forever and `--plan /dev/zero` read until memory ran out.
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    p = subprocess.run([sys.executable, "-m", "gates.gate", "--history", str(tmp_path / "h.db"),
                        "--run-id", "r1", "--plan", str(fifo)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.startswith(f"error: --plan {fifo}: cannot read the plan JSON (")
    assert "not a regular file" in p.stderr and "ci_register run" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    import gates.gate as gate_mod  # noqa: PLC0415
    monkeypatch.setattr(gate_mod, "MAX_PLAN_BYTES", 64)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"gates": [], "pad": "x" * 100}))
    assert main(["--history", str(tmp_path / "h.db"), "--run-id", "r1", "--plan", str(big)]) == 2
    assert f"--plan {big}: cannot read the plan JSON (over 64 bytes)" in capsys.readouterr().err


def test_an_unreadable_row_error_keeps_the_database_password_out(monkeypatch, capsys):
    # The "holds a row the gate cannot read" line printed GATES_HISTORY's URL whole.
    import contextlib  # noqa: PLC0415

    import gates.gate as gate_mod  # noqa: PLC0415
    import gates.store.open as store_open  # noqa: PLC0415

    monkeypatch.setattr(store_open, "open_history", lambda *a, **k: contextlib.nullcontext(None))

    def bad_row(*a, **k):
        raise ValueError("could not convert string to float: 'x'")

    monkeypatch.setattr(gate_mod, "evaluate_run", bad_row)
    url = "postgresql://ci:hunter2@db.example/history"
    assert main(["--history", url, "--run-id", "r1"]) == 2
    err = capsys.readouterr().err
    assert "holds a row the gate cannot read" in err and "db.example" in err
    assert "hunter2" not in err


def test_cli_plan_with_a_root_that_is_no_path_is_bad_input_not_a_bad_row(tmp_path, capsys):
    # {"root": 5} raised TypeError inside the gate, reported as a history row it
    # cannot read (sending the user to `gate-report check` for a bad plan).
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"root": 5, "gates": []}))
    assert main(["--history", str(tmp_path / "h.db"), "--run-id", "r1", "--plan", str(plan)]) == 2
    err = capsys.readouterr().err
    assert f"--plan {plan}: its 'root' is not a path string" in err and "row" not in err


def test_a_run_its_gate_never_judged_is_no_baseline_on_either_path(h):
    # A complete run recorded with its gate on and no gated_at reads failed
    # (verdicts.never_judged): no later gate compares against it. Runs without a recorded
    # mode, gated ones and ones run with the gate off still serve.
    from gates.store import baselines

    rng = np.random.default_rng(5)
    for i in range(30):
        add_run(h, i, {"lat": lat(rng)})
    judged = add_run(h, 30, {"lat": lat(rng)}, gate_mode="enforce")
    h.run_writes.save_verdicts(judged, [{"key": "lat", "verdict": "pass"}])
    off = add_run(h, 31, {"lat": lat(rng)}, gate_mode="off")
    never = [add_run(h, 32 + j, {"lat": lat(rng, level=1.3)}, gate_mode=mode)
             for j, mode in enumerate(["enforce", "warn"] * 6)]
    # The never-judged confirm rerun of a run that served: no stand-in, no chain link.
    add_run(h, 44, {"lat": lat(rng, level=1.3)}, confirm_of="run029", run_id="c029",
            gate_mode="enforce")
    new = add_run(h, 50, {"lat": lat(rng, level=1.3)})
    run = h.report_reads.run(new)
    base = baselines.baseline_runs(h.baseline_reads, "s", "lat", run["fingerprint"], run, {new})
    ids = [r["run_id"] for r in base]
    assert ids[-2:] == [judged, off] and len(ids) == 32 and not set(ids) & set(never)
    need = stats.DEFAULTS.window + max(stats.DEFAULTS.windows)
    bulk = baselines.bulk_baselines(h.baseline_reads, run, {"lat"}, {new}, need, ids_out=(got := {}))
    assert got["lat"] == ids[-need:]
    assert isinstance(bulk["lat"], stats.Summarized)
    assert [r.run_id for r in h.baseline_reads.confirm_links("s", ["run029"])] == []
    verdicts = _same_both_ways(h, new)
    assert [(v.verdict, v.n_baseline) for v in verdicts] == [("regression", 32)]


def _chain(h, i: int, samples, rng=None, *, attempts: int = 4) -> tuple[int, list, int]:
    """A suite session's gate with confirm reruns of the same code: (the session's exit
    code, every attempt's verdicts on lat, the next free run index)."""
    a = add_run(h, i, {"lat": samples()})
    r = evaluate_run(h, a, attempts_left=attempts)
    said, prev, left = [r.verdicts[0].verdict], a, attempts
    while r.tripped_nodeids and left:
        i, left = i + 1, left - 1
        b = add_run(h, i, {"lat": samples()}, confirm_of=prev)
        r = evaluate_run(h, b, confirm_of=prev, attempts_left=left - 1)
        said.append(r.verdicts[0].verdict)
        prev = b
    return r.exit_code, said, i + 1


def test_a_regression_stays_red_on_every_run_of_the_same_code_until_accepted(h):
    # The H100 case: 6 clean runs (0.4% noise), then +3% on every run. The first
    # bad run's attempts used to serve the next run's baseline, where "a level the
    # baseline has produced is never evidence" turned the 2nd and 3rd bad runs green.
    rng = np.random.default_rng(1)
    for i in range(6):
        add_run(h, i, {"lat": lat(rng, cv=0.004)})
    i, firsts = 10, []
    for _ in range(3):
        firsts.append(i)
        code, said, i = _chain(h, i, lambda: lat(rng, level=1.03, cv=0.004))
        assert code == 1 and said[-1] == "regression", said
    # The 2nd and 3rd bad runs: still at the held level, red at once (no rerun asked).
    rows = [h.report_reads.verdicts(f"run{i:03d}")[0] for i in firsts[1:]]
    assert all(r["verdict"] == "regression" and r["detail"]["open_of"] for r in rows), rows
    assert "the regression held at run run010" in rows[0]["detail"][
        "message"]
    # The first bad run held after one rerun: a 6-run baseline takes no sequential confirm
    # (its reruns' mean against means of 6 runs cannot reach a level; it passed at p 0.065).
    assert h.report_reads.verdicts(f"run{firsts[0] + 1:03d}")[0]["verdict"] == "regression"
    # Accepted from the first bad commit: the failed runs are the new level's baseline.
    h.after_writes.add_acceptance("lat", from_commit=f"{firsts[0]:07d}abc", reason="fa2 work +3%")
    v = evaluate_run(h, add_run(h, i, {"lat": lat(rng, level=1.03, cv=0.004)})).verdicts[0]
    assert v.verdict == "insufficient-history" and v.n_baseline == 3


def test_a_suspect_whose_chain_held_serves_no_baseline(h):
    rng = fill(h)
    a = add_run(h, 100, {"lat": const(1.016)})
    assert evaluate_run(h, a).verdicts[0].verdict == "suspect"  # stored with exit 0
    b = add_run(h, 101, {"lat": const(1.022)}, confirm_of=a)
    assert evaluate_run(h, b, confirm_of=a).verdicts[0].verdict == "regression"
    c = add_run(h, 102, {"lat": const(1.016)})
    for bulk in (True, False):
        v = evaluate_run(h, c, bulk=bulk, save=False).verdicts[0]
        # a left out (30 clean runs), and still at a's held level: red at once.
        assert v.n_baseline == 30 and v.verdict == "regression" and v.open_of == a, (bulk, v)
    # Accepted from a's commit: a's failure is answered and a serves the new level's
    # baseline (with c, never judged, and the 5 runs after it).
    h.after_writes.add_acceptance("lat", from_commit="0000100abc", reason="slower by design")
    for j in range(103, 108):
        evaluate_run(h, add_run(h, j, {"lat": lat(rng, level=1.016)}))
    v = evaluate_run(h, add_run(h, 108, {"lat": const(1.016)}), save=False).verdicts[0]
    assert v.n_baseline == 7 and v.verdict == "pass"


def test_an_open_regression_stays_red_until_accepted(h):
    rng = fill(h)
    code, said, i = _chain(h, 100, lambda: lat(rng, level=1.05))
    assert code == 1 and said[-1] == "regression"
    res = evaluate_run(h, add_run(h, i, {"lat": const(1.012)}))  # red, final
    assert res.verdicts[0].verdict == "regression" and res.exit_code == 1
    assert res.verdicts[0].open_of == "run100" and not res.tripped_nodeids
    assert res.verdicts[0].p_value is None and res.verdicts[0].method == "still-red"
    # A run at the level before (a revert, or the red was a false alarm) is one draw: a
    # change within the noise puts some runs of the changed code there too. Red until
    # someone accepts.
    v = evaluate_run(h, add_run(h, i + 1, {"lat": const(0.985)})).verdicts[0]
    assert v.verdict == "regression" and v.open_of == "run100"
    assert "red until accepted" in v.message
    h.after_writes.add_acceptance("lat", from_commit="0000100abc", reason="reverted")
    v = evaluate_run(h, add_run(h, i + 2, {"lat": const(1.0)})).verdicts[0]
    assert v.verdict != "regression" and v.open_of is None
