"""gates.record.accept: re-baselining by command and by the repo file, and `gate-report accept`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from history_seed import level_run

from gates.commands.cli import main as cli
from gates.gate import evaluate_run
from gates.record import accept
from gates.store.history import HistoryError
from gates.store.open import open_history

NODE = "suites/a/test_a.py::test_x"


def add_run(h, i: int, level: float, rng, *, key="lat", suite="s") -> str:
    return level_run(h, i, {key: level}, rng, suite=suite, run_id=f"{suite}-run{i:03d}",
                     commit=f"{i:07d}abc", branch="main", fingerprint="gpu-a", node=NODE)


@pytest.fixture
def h(store_location):
    with open_history(store_location) as history:
        yield history


def steady(h, n=30, seed=0):
    rng = np.random.default_rng(seed)
    for i in range(n):
        add_run(h, i, 1.0, rng)
    return rng


def test_without_acceptance_a_step_keeps_failing(h):
    rng = steady(h)
    for i in range(30, 36):
        rid = add_run(h, i, 1.10, rng)
    assert evaluate_run(h, rid).verdicts[0].verdict == "regression"


def test_command_acceptance_rebaselines_from_its_commit(h):
    rng = steady(h)
    first = add_run(h, 30, 1.10, rng)
    assert evaluate_run(h, first).verdicts[0].verdict == "regression"  # the one red run
    h.after_writes.add_acceptance("la*", from_commit="0000030", reason="bigger model", who="me")
    v = evaluate_run(h, add_run(h, 31, 1.10, rng)).verdicts[0]
    assert v.verdict == "insufficient-history" and v.n_baseline == 1
    assert "insufficient history after acceptance: 1 run(s) since" in v.message
    assert "bigger model" in v.message and "(me)" in v.message
    for i in range(32, 40):
        v = evaluate_run(h, add_run(h, i, 1.10, rng)).verdicts[0]
    assert v.verdict == "pass" and v.baseline == pytest.approx(1.10, rel=0.01)
    # Earlier runs stay in history; the new level regressing again is still caught.
    assert len(h.report_reads.runs(limit=1000)) == 40
    assert evaluate_run(h, add_run(h, 40, 1.25, rng)).verdicts[0].verdict == "regression"


def test_acceptance_of_another_key_suite_or_test_changes_nothing(h):
    rng = steady(h)
    h.after_writes.add_acceptance("other*", from_commit="0000030", reason="x")
    h.after_writes.add_acceptance("lat", from_commit="0000030", reason="x", suite="other-suite")
    h.after_writes.add_acceptance("lat", from_commit="0000030", reason="x", test="suites/b/*")
    add_run(h, 30, 1.10, rng)
    assert evaluate_run(h, add_run(h, 31, 1.10, rng)).verdicts[0].verdict == "regression"


def test_command_acceptance_waits_for_its_commit(h):
    rng = steady(h)
    h.after_writes.add_acceptance("lat", from_commit="feedbee", reason="not run yet")
    assert evaluate_run(h, add_run(h, 30, 1.10, rng)).verdicts[0].verdict == "regression"


def test_file_entry_in_force_only_in_runs_that_carry_it(h, tmp_path):
    rng = steady(h)
    (tmp_path / accept.ACCEPT_FILE).write_text(
        '[[accept]]\nkey = "lat"\nreason = "intended: chunked prefill"\n', encoding="utf-8")
    entries = accept.read_accept_file(tmp_path)
    # The PR that makes the change ships the entry: 0 red runs.
    for i in range(30, 40):
        v = evaluate_run(h, add_run(h, i, 1.10, rng), acceptances=entries).verdicts[0]
        assert v.verdict in ("insufficient-history", "pass"), (i, v.verdict)
    assert "intended: chunked prefill" in h.report_reads.acceptances()[0]["reason"]
    assert h.report_reads.acceptances()[0]["source"] == f"{accept.ACCEPT_FILE}:1"
    assert h.report_reads.acceptances()[0]["who"] == "first run at 0000030abc"
    # A run without the entry (main before the PR lands) keeps the old baseline.
    v = evaluate_run(h, add_run(h, 40, 1.0, rng)).verdicts[0]
    assert v.verdict == "pass" and v.baseline == pytest.approx(1.0, rel=0.01)
    # The same entry carried again is one acceptance, not a second one.
    evaluate_run(h, add_run(h, 41, 1.10, rng), acceptances=entries)
    assert len(h.report_reads.acceptances()) == 1


@pytest.mark.parametrize(("text", "want"), [
    ('[[accept]]\nreason = "x"\n', ':1: an entry needs key'),
    ('[[accept]]\nkey = "a"\nreason = "x"\n\n[[accept]]\nkey = "b"\n', ":5: an entry needs reason"),
    ('[[accept]]\nkey = "a"\nreason = "x"\nowner = "y"\n', ":1: unknown field 'owner'"),
    ('[[accept]]\nkey = "a"\nreason = "x"\nfrom = "main"\n', "is not a commit sha"),
    ("[[accept]\n", "fix the TOML syntax"),
])
def test_bad_accept_file_names_line_and_fix(tmp_path, text, want):
    (tmp_path / accept.ACCEPT_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(accept.AcceptFileError, match=want):
        accept.read_accept_file(tmp_path)


def test_missing_accept_file_is_no_entries(tmp_path):
    assert accept.read_accept_file(tmp_path) == []


def test_store_refuses_acceptance_without_reason_or_commit(h):
    with pytest.raises(HistoryError, match="needs a reason"):
        h.after_writes.add_acceptance("lat", from_commit="abcdef1", reason=" ")
    with pytest.raises(HistoryError, match="needs from_commit"):
        h.after_writes.add_acceptance("lat", reason="x")
    with pytest.raises(HistoryError, match="too short"):
        h.after_writes.add_acceptance("lat", reason="x", from_commit="abc")


def test_accept_command_suggestion_is_runnable(h, tmp_path, capsys):
    steady(h, n=3)
    cmd = accept.accept_command("lat", "s", "0000001abc")
    assert cmd.startswith("gate-report accept lat --suite s --from 0000001abc --reason ")
    import shlex

    args = shlex.split(cmd)[2:]
    args[args.index("--reason") + 1] = "bigger batch"
    assert cli(["accept", *args, "--history", str(h.path), "--who", "ci-bot"]) == 0
    out = capsys.readouterr().out
    assert "accepted #1 lat from 0000001abc" in out and "in force from its first run" in out
    assert "matches 1 key(s): lat" in out
    assert cli(["accept", "--list", "--history", str(h.path)]) == 0
    listed = capsys.readouterr().out
    assert "lat suite=s from 0000001abc by ci-bot" in listed and "bigger batch" in listed


def test_accept_cli_usage_errors(h, capsys):
    steady(h, n=2)
    assert cli(["accept", "lat", "--history", str(h.path), "--from", "abcdef1"]) == 2
    assert "--reason" in capsys.readouterr().err
    assert cli(["accept", "tpt*", "--history", str(h.path), "--from", "abcdef1",
                "--reason", "x"]) == 2
    assert "'tpt*' matches no recorded metric key" in capsys.readouterr().err
    assert h.report_reads.acceptances() == []


ENTRY = {"pattern": "lat", "reason": "intended", "entry_id": "file:abc",
         "source": "gates-accept.toml:1"}  # a gates-accept.toml entry, as a run carries it


def steady_file(path: Path, seed: int) -> Path:
    """A history file holding ``steady`` runs (the base a CI shard is copied from)."""
    with open_history(path) as h:
        steady(h, seed=seed)
    return path


def test_merged_shards_keep_the_entries_their_runs_carried(tmp_path):
    from gates.store.merge import merge_histories

    rng = np.random.default_rng(4)
    entry = dict(ENTRY)
    base = steady_file(tmp_path / "base.db", seed=4)
    shards = []
    for i in (30, 31):  # each CI run: a shard copied from the base, one new run in it
        shard = tmp_path / f"shard{i}.db"
        shard.write_bytes(base.read_bytes())
        with open_history(shard) as h:
            evaluate_run(h, add_run(h, i, 1.10, rng), acceptances=[entry])
        shards.append(shard)
        merge_histories([shard], base)
        merge_histories([shard], base)  # idempotent
    with open_history(base) as h:
        [acc] = h.report_reads.acceptances()
        assert set(h.baseline_reads.acceptance_runs(acc["id"])) == {"s-run030", "s-run031"}
        v = evaluate_run(h, add_run(h, 32, 1.10, rng), acceptances=[entry]).verdicts[0]
    assert v.verdict == "insufficient-history" and v.n_baseline == 2


def test_merge_refuses_a_shard_whose_carried_entry_is_forged(tmp_path):
    from gates.store.merge import merge_histories
    from gates.store.merge_check import ShardRejected, check_bundle

    rng = np.random.default_rng(5)
    entry = dict(ENTRY)
    base = steady_file(tmp_path / "base.db", seed=5)
    shard = tmp_path / "shard.db"
    shard.write_bytes(base.read_bytes())
    with open_history(shard) as h:
        rid = add_run(h, 30, 1.10, rng)
        evaluate_run(h, rid, acceptances=[entry])
        bundle = h.merge_reads.export_run(rid)
    check_bundle(bundle, "shard.db")  # the genuine entry passes
    for forged in ({"pattern": ""}, {"at": "soon"}, {"who": 3},
                   {"entry_id": None}, {"x) VALUES (1); --": "1"}):
        bad = dict(bundle, acceptances=[{**bundle["acceptances"][0], **forged}])
        with pytest.raises(ShardRejected, match="acceptance"):
            check_bundle(bad, "shard.db")
    with open_history(shard) as h:  # a forged row in the file itself: refused whole
        h.conn.execute("UPDATE acceptances SET at = 'later'")
        h.conn.commit()
    with pytest.raises(Exception, match="acceptance"):
        merge_histories([shard], base)
    with open_history(base) as h:
        assert h.report_reads.acceptances() == []


def test_gate_cli_reads_the_accept_file_at_the_plans_root(tmp_path, capsys):
    import json

    from gates.gate import main as gate_main

    db = tmp_path / "history.db"
    rng = np.random.default_rng(0)
    with open_history(db) as h:
        for i in range(30):
            add_run(h, i, 1.0, rng)
        rid = add_run(h, 30, 1.10, rng)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"root": str(tmp_path), "files": [], "gates": []}))
    args = ["--history", str(db), "--run-id", rid, "--plan", str(plan)]
    assert gate_main(args) == 1  # no file yet: the step is a regression
    (tmp_path / accept.ACCEPT_FILE).write_text('[[accept]]\nkey = "lat"\nreason = "ok"\n')
    assert gate_main(args) == 0
    assert "insufficient history after acceptance" in capsys.readouterr().out
    (tmp_path / accept.ACCEPT_FILE).write_text('[[accept]]\nkey = "lat"\n')
    assert gate_main(args) == 2
    assert f"{accept.ACCEPT_FILE}:1: an entry needs reason" in capsys.readouterr().err


def test_accept_refuses_a_commit_nothing_knows_and_names_the_suites_it_covers(
        h, tmp_path, capsys):
    steady(h, n=3)
    add_run(h, 10, 1.0, np.random.default_rng(1), suite="t")  # lat is in suite t too
    # Neither a run of the history nor a commit of the checkout: a typo that would
    # never apply is refused, and nothing is logged.
    assert cli(["accept", "lat", "--history", str(h.path), "--from", "deadbeef1",
                "--reason", "x", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--from deadbeef1: no run in" in err and "does not have it" in err
    assert h.report_reads.acceptances() == []
    # A commit of a run: accepted, and without --suite it says which suites it covers.
    assert cli(["accept", "lat", "--history", str(h.path), "--from", "0000001",
                "--reason", "x", "--who", "me"]) == 0
    out = capsys.readouterr().out
    assert "covers every suite (no --suite): the keys are recorded in s, t" in out
    # A commit of the checkout that has not run yet: in force once it runs.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    sha = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], check=True,
                         capture_output=True, text=True).stdout.strip()
    assert cli(["accept", "lat", "--history", str(h.path), "--from", sha[:9], "--suite", "s",
                "--reason", "x", "--who", "me", "--root", str(tmp_path)]) == 0
    assert "(in force once that commit has run); covers suite s;" in capsys.readouterr().out
