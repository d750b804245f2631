"""gate-report trim: twins, dead metrics and droppable variants from history."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gates.report.trim import Metric, TrimInput, analyse, build_input, render, variant_of
from gates.store.open import open_history

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_trim import FILE, SUITE, make_history, node, score  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def series(rng, n, shared=None, noise=0.02, base=100.0):
    z = shared if shared is not None else rng.normal(0, 0.05, n)
    return {f"r{i:03d}": base * (1 + z[i] + rng.normal(0, noise)) for i in range(n)}


def inp(metrics, durations, rate=7.0, gpus=4):
    return TrimInput(metrics, durations, {("s", "fp"): rate}, {("s", "fp"): gpus})


def test_twins_keep_the_cheapest_variant_and_drop_the_dearer_test():
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 0.05, 30)
    ms = [
        Metric("s", "fp", "v/bs16/tput", "t::a[16]", series(rng, 30, shared, 0.001)),
        Metric("s", "fp", "v/bs64/tput", "t::a[64]", series(rng, 30, shared, 0.001)),
        Metric("s", "fp", "v/bs1/tput", "t::a[1]", series(rng, 30)),
    ]
    rep = analyse(inp(ms, {("s", "fp", "t::a[16]"): 60.0, ("s", "fp", "t::a[64]"): 150.0, ("s", "fp", "t::a[1]"): 30.0}))
    assert [(t.key, t.keep) for t in rep.twins] == [("v/bs64/tput", "v/bs16/tput")]
    assert rep.twins[0].rho > 0.98 and rep.twins[0].runs == 30
    assert [(d.kind, d.nodeid) for d in rep.drops] == [("test", "t::a[64]")]
    # 150 s x 4 GPUs x 7 runs a week / 60
    assert rep.drops[0].minutes_per_week == pytest.approx(70.0)
    assert "a shift confined to v/bs64/tput" in rep.twins[0].lost()
    assert rep.dead == []


def test_independent_metrics_are_never_twins_and_quiet_ones_never_dead():
    rng = np.random.default_rng(2)
    ms = [Metric("s", "fp", f"k{i}/x", f"t::n{i}", series(rng, 40, noise=0.01)) for i in range(30)]
    rep = analyse(inp(ms, {("s", "fp", f"t::n{i}"): 10.0 for i in range(30)}))
    assert rep.twins == [] and rep.dead == [] and rep.drops == []


def test_dead_needs_large_noise_and_no_signal_verdict():
    rng = np.random.default_rng(3)
    noisy = {f"r{i:03d}": 1.0 * abs(1 + rng.normal(0, 0.3)) for i in range(30)}
    ms = [
        Metric("s", "fp", "a/ttft", "t::a", dict(noisy), {"pass": 30}),
        Metric("s", "fp", "b/ttft", "t::b", dict(noisy), {"pass": 29, "regression": 1}),
        Metric("s", "fp", "c/ttft", "t::c", series(rng, 30, noise=0.01), {"pass": 30}),
    ]
    rep = analyse(inp(ms, {("s", "fp", "t::a"): 6.0}))
    assert [d.key for d in rep.dead] == ["a/ttft"]
    d = rep.dead[0]
    assert 0.2 < d.detectable < 2 and "shifts under" in d.lost()
    assert [(x.kind, x.nodeid) for x in rep.drops] == [("test", "t::a")]
    # a stricter idea of "realistic" keeps it
    assert analyse(inp(ms, {}), realistic=5.0).dead == []


def test_same_measurement_twins_save_no_time():
    rng = np.random.default_rng(4)
    lat = series(rng, 20)
    ms = [Metric("s", "fp", "v/latency", "t::a", lat), Metric("s", "fp", "v/bandwidth", "t::a", {r: 1e6 / x for r, x in lat.items()})]
    rep = analyse(inp(ms, {("s", "fp", "t::a"): 5.0}))
    assert len(rep.twins) == 1 and rep.twins[0].rho == pytest.approx(-1.0) and rep.drops == []
    assert "one measurement in two units" in render(rep)


def test_too_few_runs_judges_nothing():
    rng = np.random.default_rng(5)
    shared = rng.normal(0, 0.05, 5)
    ms = [Metric("s", "fp", f"v{i}/x", f"t::{i}", series(rng, 5, shared, 0.0)) for i in range(2)]
    assert analyse(inp(ms, {})).twins == []
    assert variant_of("a/b/c") == "a/b" and variant_of("abc") == "abc"


def test_generated_nightly_history_finds_every_planted_case(tmp_path):
    truth = make_history(tmp_path / "h.db", seed=7, runs=30, variants=7, twin_variants=2, dead_variants=2)
    with open_history(tmp_path / "h.db", create=False, readonly=True) as h:
        rows = h.report_reads.trim_rows()
    rep = analyse(build_input(rows, gpus={SUITE: 4}, nightly=[SUITE]))
    got = score(rep, truth)
    assert got["twins_found"] == 1.0 and got["dead_found"] == 1.0 and got["nodes_found"] == 1.0
    assert got["false_twins"] == 0 and got["false_dead"] == 0 and got["false_drops"] == 0
    assert {d.nodeid for d in rep.drops if d.kind == "test"} == {node("model0", 64), node("model1", 64)}
    assert all(d.nodeid.startswith(FILE) for d in rep.drops)


def test_cli_trim(tmp_path):
    make_history(tmp_path / "h.db", seed=1, runs=20, variants=4, twin_variants=1, dead_variants=1)
    cmd = [sys.executable, "-m", "gates.commands.cli", "trim", "--history", str(tmp_path / "h.db"), "--since", "2026-09-01"]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([*cmd, "--format", "json"], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [d["subject"] for d in data["drops"] if d["kind"] == "test"] == [node("model0", 64)]
    assert data["gpu_minutes_per_week"] > 0
    r = subprocess.run([*cmd, "--format", "md"], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 0 and "## Trim suggestions" in r.stdout and "GPU-min/week" in r.stdout
    r = subprocess.run([*cmd[:-2], "--since", "1d"], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 2 and "widen --since" in r.stderr
    # Reading never writes: the file is unchanged.
    before = (tmp_path / "h.db").read_bytes()
    subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert (tmp_path / "h.db").read_bytes() == before
