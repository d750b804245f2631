"""gates.report.compare and `gate-report compare A B`: commits, branches, run ids, fingerprints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from history_seed import level_run

from gates.commands.cli import main as cli
from gates.store.open import open_history

NODE = "suites/a/test_a.py::test_x"


def _run(h, i, *, branch, commit, fp, levels, rng):
    level_run(h, i, levels, rng, commit=commit, branch=branch, fingerprint=fp, node=NODE)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "h.db"
    rng = np.random.default_rng(3)
    with open_history(path) as h:
        for i in range(30):
            _run(h, i, branch="main", commit=f"{i:07d}aaaa", fp="h100", rng=rng,
                 levels={"lat": (1.0, "lower"), "tput": (100.0, "higher")})
        for i in range(30, 33):  # the PR: latency +10%, throughput unchanged, a new metric
            _run(h, i, branch="feat", commit="feedface01", fp="h100", rng=rng,
                 levels={"lat": (1.10, "lower"), "tput": (100.0, "higher"),
                         "mem": (5.0, "lower")})
        for i in range(33, 63):  # another GPU type, faster
            _run(h, i, branch="main", commit=f"{i:07d}bbbb", fp="h200", rng=rng,
                 levels={"lat": (0.8, "lower"), "tput": (100.0, "higher")})
    return path


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_branch_against_branch_flags_the_regression_first(db, capsys):
    assert cli(["compare", "main", "feat", "--history", str(db), "--format", "json"]) == 1
    out = _json(capsys)
    assert out["a"] == "branch main" and out["b"] == "branch feat"
    lat, *rest = out["metrics"]
    assert lat["key"] == "lat" and lat["verdict"] == "regression"
    assert lat["rel_change"] == pytest.approx(0.10, abs=0.02)
    assert lat["ci_low"] < lat["rel_change"] < lat["ci_high"] and lat["n_b"] == 3
    verdicts = {(m["key"], m["fingerprint"]): m["verdict"] for m in rest}
    assert verdicts == {("tput", "h100"): "pass", ("mem", "h100"): "missing-in-A"}


def test_commit_and_run_id_refs(db, capsys):
    assert cli(["compare", "0000029aaaa", "run-0030", "--history", str(db),
                "--format", "json"]) == 0
    out = _json(capsys)
    assert out["a"].startswith("commit") and out["b"] == "run run-0030"
    # One run of A is too little history: the gate's own cold-start verdict.
    assert {m["verdict"] for m in out["metrics"] if m["key"] != "mem"} == {
        "insufficient-history"}
    assert cli(["compare", "feedface", "0000029aaaa", "--history", str(db)]) == 0


def test_two_gpu_types_pair_across_fingerprints(db, capsys):
    assert cli(["compare", "h100", "h200", "--history", str(db), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## Compare `fingerprint h100` -> `fingerprint h200`")
    assert "| improvement | s | h200 vs A | lat |" in md


def test_pr_job_defaults_and_bad_refs(db, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    monkeypatch.setenv("GITHUB_SHA", "feedface01")
    assert cli(["compare", "--history", str(db)]) == 1
    assert "compare branch main -> commit feedface01" in capsys.readouterr().out
    monkeypatch.delenv("GITHUB_BASE_REF")
    assert cli(["compare", "--history", str(db)]) == 2
    assert "give A and B" in capsys.readouterr().err
    assert cli(["compare", "main", "nosuchref", "--history", str(db)]) == 2
    assert "'nosuchref' names no complete run" in capsys.readouterr().err


def test_untrusted_runs_are_no_baseline(db, capsys):
    with open_history(db) as h:
        h.run_writes.set_trust(commit="0000029aaaa", reason="broken runner")
    assert cli(["compare", "0000029aaaa", "feat", "--history", str(db)]) == 2
    assert "names no complete run" in capsys.readouterr().err
    # As B (what is judged) an untrusted run still compares.
    assert cli(["compare", "main", "0000029aaaa", "--history", str(db)]) == 0


def test_out_never_replaces_the_history_and_replaces_its_own_output(db, tmp_path, capsys):
    before = db.read_bytes()
    assert cli(["compare", "main", "feat", "--history", str(db), "--out", str(db)]) == 2
    assert "is an input of this command" in capsys.readouterr().err and db.read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    assert cli(["compare", "main", "feat", "--history", str(db), "--out", str(notes)]) == 2
    assert notes.read_text() == "mine\n" and "--force" in capsys.readouterr().err
    for fmt in ("text", "md", "json"):  # an earlier compare output is replaced without --force
        out = tmp_path / f"cmp.{fmt}"
        for _ in range(2):
            assert cli(["compare", "main", "feat", "--history", str(db), "--format", fmt,
                        "--out", str(out)]) == 1, capsys.readouterr().err


def test_values_carry_units_and_two_runs_a_side_say_why_no_verdict(tmp_path, capsys):
    path = tmp_path / "two.db"
    rng = np.random.default_rng(5)
    with open_history(path) as h:
        for i in range(2):
            _run(h, i, branch="main", commit=f"{i:07d}aaaa", fp="h100", rng=rng, levels={"lat": 0.00038})
        for i in range(2, 4):
            _run(h, i, branch="feat", commit=f"{i:07d}bbbb", fp="h100", rng=rng, levels={"lat": 0.00042})
    assert cli(["compare", "main", "feat", "--history", str(path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("insufficient-history  s"))
    assert re.search(r"  0\.000\d+ ms  0\.000\d+ ms  \+\d+\.\d+%", row), out  # values with units, change
    assert "A has 2 run(s) of this metric; the gate judges against at least 5: change shown, not tested" in out
    assert cli(["compare", "main", "feat", "--history", str(path), "--format", "md"]) == 0
    assert "- insufficient-history: A has 2 run(s)" in capsys.readouterr().out


def test_a_compared_row_states_the_test_that_decided(db, capsys):
    # One statement a row, as the report's (issue 52): the change is B against A as the
    # row shows them; then the deciding test, its change and its interval at the level
    # its q was held to; its p and q against that level.
    assert cli(["compare", "main", "feat", "--history", str(db), "--format", "json"]) == 1
    lat = _json(capsys)["metrics"][0]
    assert lat["verdict"] == "regression" and lat["level"] == 0.02 and lat["test"]
    assert lat["own_change"] == pytest.approx((lat["b"] - lat["a"]) / lat["a"])
    assert 0 < lat["ci_low"] and 0.9 < lat["ci_conf"] < 1.0
    assert cli(["compare", "main", "feat", "--history", str(db)]) == 1
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("regression"))
    assert f"{lat['own_change'] * 100:+.2f}%" in row
    assert (f"{lat['test']} {lat['rel_change'] * 100:+.2f}% [{lat['ci_low'] * 100:+.1f}, "
            f"{lat['ci_high'] * 100:+.1f}] {100 * lat['ci_conf']:.4g}%") in row
    assert f"p={lat['p_value']:.2g} q={lat['q_value']:.2g} <= 0.02" in row
