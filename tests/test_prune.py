"""`gate-report prune`: old runs nothing reads go, what gates and reports need stays."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fleet_history import ENTRY, FP, SUITE, record

from gates.commands.cli import main
from gates.gate import evaluate_run
from gates.store.baselines import SERIES_LIMIT
from gates.store.open import open_history


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prune") / "history.db"
    with open_history(path) as h:
        ids = [record(h, i) for i in range(SERIES_LIMIT + 40)]
        h.run_writes.set_trust([ids[3]], trusted=False, reason="broken runner gpu-17")
        h.after_writes.carry_acceptances(ids[5], [ENTRY])
        confirm = record(h, 7, confirm_of=ids[7], run_id="confirm7", seed=1)
        h.after_writes.save_bisect({"suite": SUITE, "key": "k0/latency", "good": h.report_reads.run(ids[9])["commit_sha"],
                       "bad": h.report_reads.run(ids[10])["commit_sha"], "outcome": "culprit",
                       "executions": 3, "evidence": {}})
        assert h.report_reads.run(confirm)
    return path


def cli(args, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_dry_run_names_what_would_go_and_changes_nothing(template, tmp_path, capsys):
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    before = path.read_bytes()
    code, out, _ = cli(["prune", "--history", path, "--keep-runs", "10"], capsys)
    assert code == 0 and "dry run: nothing deleted" in out
    assert "to delete" in out and "in the trust log" in out
    assert path.read_bytes() == before


def test_prune_keeps_what_gates_and_reports_read_and_verdicts_do_not_move(template, tmp_path,
                                                                         capsys):
    full, pruned = tmp_path / "full.db", tmp_path / "pruned.db"
    shutil.copy(template, full)
    shutil.copy(template, pruned)
    code, out, _ = cli(["prune", "--history", pruned, "--keep-runs", "10", "--apply"], capsys)
    assert code == 0 and "deleted" in out, out
    assert pruned.stat().st_size < full.stat().st_size
    with open_history(pruned) as h:
        kept = set(h.merge_reads.run_ids())
        assert len(kept) < SERIES_LIMIT + 41
        # The trust log's run, the acceptance's run and the bisected commits stay; the
        # runs the gate reads stay (same verdicts below); an old confirm chain goes whole.
        assert {f"run0003{FP}", f"run0005{FP}", f"run0009{FP}", f"run0010{FP}"} <= kept
        assert f"run0007{FP}" not in kept and "confirm7" not in kept
        assert f"run0008{FP}" not in kept
        assert h.report_reads.trust_log()[0]["reason"] == "broken runner gpu-17"
        assert h.merge_reads.orphan_rows() == [] and len(h.report_reads.acceptances()) == 1 and len(h.report_reads.bisects()) == 1
    verdicts = []
    for path in (full, pruned):
        with open_history(path) as h:
            rid = record(h, 500, shift=1.1)
            verdicts.append([v.row(1, None) for v in evaluate_run(h, rid, save=False).verdicts])
    assert verdicts[0] == verdicts[1]
    assert any(v["verdict"] == "regression" for v in verdicts[0])


def test_prune_by_age_and_bad_input(template, tmp_path, capsys):
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    code, out, _ = cli(["prune", "--history", path, "--keep", "1d"], capsys)
    assert code == 0 and "to delete" in out  # the fixture's runs are from March 2026
    code, _, err = cli(["prune", "--history", path], capsys)
    assert code == 2 and "--keep" in err
    code, _, err = cli(["prune", "--history", path, "--keep", "soon"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "--keep 'soon'" in err and "--since" not in err  # the option the user gave
    # A negative span: argparse reads `--keep -5d` as two options. Each spelling gets one
    # line that says what to write instead, and nothing is deleted.
    before = path.read_bytes()
    code, _, err = cli(["prune", "--history", path, "--keep", "-5d", "--apply"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "'-5d' was read as an option" in err and "--keep=-5d" in err
    code, _, err = cli(["prune", "--history", path, "--keep=-5d", "--apply"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "never negative" in err and "write --keep 5d" in err
    assert path.read_bytes() == before
    notes = tmp_path / "notes.db"
    notes.write_text("not a history")
    code, _, err = cli(["prune", "--history", notes, "--keep", "90d", "--apply"], capsys)
    assert code == 2 and "not an SQLite database" in err
    assert notes.read_text() == "not a history"


def test_snapshot_command_writes_a_small_file_and_refuses_overwrite(template, tmp_path, capsys):
    out = tmp_path / "snap.db"
    code, text, _ = cli(["snapshot", "--history", template, "--suite", SUITE, "--out", out],
                        capsys)
    assert code == 0 and "run(s) the gate and planner read" in text
    assert out.stat().st_size < template.stat().st_size
    code, _, err = cli(["snapshot", "--history", template, "--suite", SUITE, "--out", out],
                       capsys)
    assert code == 2 and "exists" in err


def test_a_kept_confirm_rerun_keeps_the_old_run_it_rechecked(template, tmp_path, capsys):
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    with open_history(path) as h:
        record(h, 300, confirm_of=f"run0012{FP}", run_id="late-confirm")
    code, out, _ = cli(["prune", "--history", path, "--keep-runs", "5", "--apply"], capsys)
    assert code == 0 and "in a confirm chain with a kept run" in out
    with open_history(path) as h:
        kept = set(h.merge_reads.run_ids())
    assert {"late-confirm", f"run0012{FP}"} <= kept and f"run0013{FP}" not in kept


def test_prune_never_deletes_a_run_still_being_written(template, tmp_path, capsys):
    # A suite started before the cut-off and still running: prune --apply deleted its
    # rows, and the run then finished `complete` without its first tests and metrics.
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    live = f"run0013{FP}"
    with open_history(path) as h:
        h.backend.db.execute("UPDATE runs SET status = 'incomplete' WHERE run_id = ?", (live,))
        h.backend.db.commit()
    code, out, _ = cli(["prune", "--history", path, "--keep-runs", "5", "--apply"], capsys)
    assert code == 0 and "1 still being written (incomplete)" in out, out
    with open_history(path) as h:
        kept = set(h.merge_reads.run_ids())
    assert live in kept and f"run0014{FP}" not in kept


def test_prune_keeps_the_runs_of_a_bisection_culprit(template, tmp_path, capsys):
    # Issue 40: the good and bad commits' runs stayed, the culprit's went.
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    with open_history(path) as h:
        h.after_writes.save_bisect({"suite": SUITE, "key": "k0/latency", "good": h.report_reads.run(f"run0014{FP}")[
            "commit_sha"], "bad": h.report_reads.run(f"run0017{FP}")["commit_sha"], "outcome": "culprit",
            "culprit": h.report_reads.run(f"run0016{FP}")["commit_sha"], "executions": 9, "evidence": {}})
    code, out, _ = cli(["prune", "--history", path, "--keep-runs", "10", "--apply"], capsys)
    assert code == 0, out
    with open_history(path) as h:
        kept = set(h.merge_reads.run_ids())
    assert {f"run0014{FP}", f"run0016{FP}", f"run0017{FP}"} <= kept
    assert f"run0015{FP}" not in kept  # between them, named by nothing: it goes


def test_ctrl_c_during_prune_is_one_line_and_deletes_nothing(template, tmp_path, capsys,
                                                             monkeypatch):
    import gates.store.prune

    path = tmp_path / "history.db"
    shutil.copy(template, path)
    before = path.read_bytes()

    def interrupted(history, plan, **kw):
        raise KeyboardInterrupt  # Ctrl-C while deleting: the transaction rolls back

    monkeypatch.setattr(gates.store.prune, "apply_prune", interrupted)
    code, out, err = cli(["prune", "--history", path, "--keep-runs", "10", "--apply"], capsys)
    assert code == 130 and "interrupted" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and path.read_bytes() == before


def test_sigint_to_a_real_prune_prints_no_traceback(template, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    proc = subprocess.Popen([sys.executable, "-m", "gates.commands.cli", "prune", "--history",
                             str(path), "--keep-runs", "10", "--apply"], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(repo)))
    assert proc.stdout is not None
    proc.stdout.readline()  # the plan: it is deleting now
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and proc.returncode in (0, 130), err
    with open_history(path) as h:  # whole or nothing: never a run without its rows
        assert h.merge_reads.orphan_rows() == []
