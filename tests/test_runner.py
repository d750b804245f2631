"""The suite runner end to end, in subprocesses, on small generated trees."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ci_register.running.runner import UsageError, parse_run_args

REPO = Path(__file__).resolve().parents[1]

SUITES = {"cpu": {}, "gpu1": {"backend": "cuda", "description": "one H200", "hardware": {
    "gpu_count": 1, "gpu_models": ["H200"], "min_capability": "9.0"}}}

OK = 'from ci_register import register_cpu_ci\nregister_cpu_ci(est_time={t}, suite="cpu")\n'


@pytest.fixture
def make_tree(catalog_tree):
    """make(files) -> a tree with this module's suites and ``suites/REL`` files (dedented)."""
    return lambda files: catalog_tree(SUITES, {f"suites/{rel}": textwrap.dedent(text)
                                               for rel, text in files.items()})


def run(tmp: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    e.pop("CI_REGISTER_FAKE_HARDWARE", None) if not env or "CI_REGISTER_FAKE_HARDWARE" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "ci_register", "run", *args, "--history", str(tmp / "h.db")],
        cwd=tmp, env=e, capture_output=True, text=True, timeout=600,  # a hang guard: load stretches a chain
    )


@pytest.fixture
def tree(make_tree):
    return make_tree({
        "a/test_one.py": OK.format(t=30) + "def test_pass():\n    assert 1 + 1 == 2\n",
        "a/test_two.py": OK.format(t=10) + "def test_decode():\n    pass\ndef test_other():\n    pass\n",
        "b/test_three.py": OK.format(t=20) + "def test_x():\n    pass\n",
        "b/test_off.py": 'from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="cpu", disabled="broken by driver 580")\ndef test_x():\n    raise AssertionError("must never run")\n',
    })


def test_dry_run_lists_files_partition_and_disabled(tree):
    r = run(tree, "cpu", "--dry-run", "--partition", "2/2")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "shard 1/2" in out and "shard 2/2" in out and "<- this shard" in out
    assert "suites/a/test_one.py:2  est_time 30 s" in out
    assert "disabled: suites/b/test_off.py:2  (broken by driver 580)" in out
    assert "lower bound" in out and "nothing run" in out
    assert not (tree / "results").exists()


def test_run_passes_writes_junit_and_never_runs_disabled(tree):
    r = run(tree, "cpu", "--gate", "off")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "must never run" not in r.stdout
    assert "4 passed" in r.stdout
    assert len(list((tree / "results").glob("junit-cpu-1-of-1-*.xml"))) == 1


def test_pytest_args_pass_through(tree):
    r = run(tree, "cpu", "--gate", "off", "-k", "decode", "-x")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout and "deselected" in r.stdout


def test_partition_runs_only_its_shard(tree):
    r = run(tree, "cpu", "--gate", "off", "--partition", "1/2")
    assert r.returncode == 0, r.stdout + r.stderr
    # LPT: one(30) -> shard 1; three(20) -> shard 2; two(10) -> shard 2.
    assert "1 passed" in r.stdout


@pytest.mark.parametrize("spec", ["0/3", "4/3", "x"])
def test_bad_partition_is_usage_error(tree, spec):
    r = run(tree, "cpu", "--partition", spec)
    assert r.returncode == 2 and "--partition" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--confirm", "-1"], "--confirm -1: give 0 to 4"),
    (["--confirm", "5"], "--confirm 5: give 0 to 4"),
    (["--gate", "strict"], "--gate 'strict': use one of enforce, warn, off"),
    # Disabling the recorder through pytest's own -p ran green and stored nothing.
    (["-p", "no:gates.record.plugin"], "-p no:gates.record.plugin: a suite run needs"),
    (["-x", "-pno:ci_register.running.pytest_plugin"], "-p no:ci_register.running.pytest_plugin:"),
    (["-p", "no:junitxml"], "-p no:junitxml: a suite run needs"),
    # An empty --history (an unset CI variable) recorded into the root's history.db.
    (["--history", ""], "--history '': is blank: give a history file path"),
    (["--history= "], "--history ' ': is blank: give a history file path"),
    # Each of these made a file nobody meant: " h.db", a folder "sqlite:", a name with a
    # line break in it.
    (["--history", " h.db"], "--history ' h.db': starts or ends with a space"),
    (["--history", "sqlite:///x.db"], "only postgresql:// URLs name a database"),
    (["--history", "h\n.db"], "--history 'h\\n.db': holds a control character"),
    (["--history", " postgresql://u:pw@db/h"], "--history ' postgresql://u:***@db/h': starts"),
])
def test_bad_run_options_are_usage_errors(args, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_run_args("cpu", args)


@pytest.mark.parametrize("value", [" ", "sqlite:///x.db", "h.db\n",
                                   "host=db password=PWSECRET dbname=gates"])
def test_a_gates_history_that_is_no_path_is_refused_and_creates_nothing(tree, value):
    e = dict(os.environ, PYTHONPATH=str(REPO), GATES_HISTORY=value)
    e.pop("CI_REGISTER_FAKE_HARDWARE", None)
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--gate", "off"],
                       cwd=tree, env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"error: GATES_HISTORY {value!r}: ".replace("PWSECRET", "***")) \
        and r.stderr.count("\n") == 1
    assert "PWSECRET" not in r.stdout + r.stderr
    assert sorted(p.name for p in tree.iterdir()) == ["suites"]  # no file, no folder, no results
    # An empty GATES_HISTORY is an unset one, as before: the root's history.db.
    e["GATES_HISTORY"] = ""
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--dry-run"],
                       cwd=tree, env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_catalog_pytest_args_cannot_disable_the_recorder(catalog_tree):
    root = catalog_tree({"cpu": {"pytest_args": ["-p", "no:gates.record.plugin"]}},
                        {"suites/test_one.py": OK.format(t=5) + "def test_x():\n    pass\n"})
    r = run(root, "cpu", "--gate", "off")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "[suites.cpu] pytest_args: -p no:gates.record.plugin: a suite run needs" in r.stderr
    assert not (root / "h.db").exists()


def test_a_conftest_that_fails_to_import_is_named(catalog_tree):
    # The line said "pytest refused its arguments or the history": neither was wrong.
    root = catalog_tree({"cpu": {}}, {"suites/test_one.py": OK.format(t=5) + "def test_x():\n    pass\n",
                                      "suites/conftest.py": "raise RuntimeError('boom in conftest')\n"})
    r = run(root, "cpu", "--gate", "off")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "boom in conftest" in r.stdout + r.stderr
    assert "a conftest.py that failed to import" in r.stderr.splitlines()[-1]


def test_run_options_keep_pytest_args_in_order():
    opts = parse_run_args("cpu", ["-k", "decode", "--confirm", "0", "-x", "--gate", "warn"])
    assert (opts.confirm, opts.gate, opts.pytest_args) == (0, "warn", ["-k", "decode", "-x"])


def test_gpu_suite_on_this_machine_fails_with_what_it_needs(tree):
    (tree / "suites" / "test_g.py").write_text('from ci_register import register_cuda_ci\nregister_cuda_ci(est_time=5, suite="gpu1")\ndef test_g():\n    pass\n')
    r = run(tree, "gpu1", env={"CI_REGISTER_FAKE_HARDWARE": json.dumps({"gpus": [{"name": "NVIDIA A100", "capability": [8, 0]}]})})
    assert r.returncode == 2
    assert "gpu1 needs 1x H200 (capability 9.0 or newer); found 1x NVIDIA A100 (capability 8.0)" in r.stderr
    r = run(tree, "gpu1", env={"CI_REGISTER_FAKE_HARDWARE": json.dumps({"gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}]}), })
    assert r.returncode == 0, r.stdout + r.stderr


def test_registered_file_that_collects_nothing_fails(tree):
    (tree / "suites" / "test_empty.py").write_text(OK.format(t=5) + "class TestNothing:\n    helper = 1\n")
    r = run(tree, "cpu", "--gate", "off")
    assert r.returncode == 1
    assert "suites/test_empty.py: registered but ran no tests" in r.stdout


def test_failing_test_fails_the_session(tree):
    (tree / "suites" / "test_bad.py").write_text(OK.format(t=5) + "def test_bad():\n    assert 0\n")
    r = run(tree, "cpu", "--gate", "off")
    assert r.returncode == 1 and "1 failed" in r.stdout


def test_collection_errors_stop_the_run(tree):
    (tree / "suites" / "test_typo.py").write_text('from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="cpu-typo")\ndef test_a():\n    pass\n')
    r = run(tree, "cpu")
    assert r.returncode == 2
    assert "suites/test_typo.py:2: unknown cpu suite 'cpu-typo'; known: cpu" in r.stderr
    assert not (tree / "results").exists()


def test_unknown_suite_and_empty_suite(tree):
    r = run(tree, "nope")
    assert r.returncode == 2 and "unknown suite 'nope'; known: cpu, gpu1" in r.stderr
    r = run(tree, "gpu1")
    assert r.returncode == 2 and "no enabled test file" in r.stderr


def test_per_file_budget_times_out_a_hung_test(tmp_path):
    (tmp_path / "test_slow.py").write_text("import time\ndef test_fast():\n    pass\ndef test_hang():\n    time.sleep(30)\n")
    plan = {"root": str(tmp_path), "files": [{"path": "test_slow.py", "expected": -29.0}]}  # budget = 2 s
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "ci_register.running.pytest_plugin", "--ci-plan", "plan.json", "test_slow.py", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 1
    assert "Timeout" in r.stdout and "1 passed" in r.stdout


LAT_TEST = '''
import os
from pathlib import Path

from ci_register import register_cpu_ci
register_cpu_ci(est_time=5, suite="cpu")


def test_lat(metrics):
    # One value per pytest process, in order: the first attempt, then its reruns.
    count = Path(os.environ["LAT_COUNT"])
    i = int(count.read_text()) if count.exists() else 0
    count.write_text(str(i + 1))
    value = float(os.environ["LAT_VALUES"].split()[i])
    metrics.record("lat", [value] * 5, unit="ms", better="lower")
'''


def _baseline(db: Path, n: int = 30) -> None:
    """n earlier runs of suite cpu on this machine's fingerprint, 1% noise, 5 samples."""
    import numpy as np

    from gates.store.history import RunRecord, TestResult
    from gates.store.metrics import validate_metric
    from gates.store.open import open_history
    from gates.store.provenance import Provenance, detect_hardware, fingerprint_key

    fp = fingerprint_key(detect_hardware())
    rng = np.random.default_rng(0)
    node = "suites/test_lat.py::test_lat"
    with open_history(db) as h:
        for i in range(n):
            p = Provenance(run_id=f"base{i:02d}", suite="cpu", commit=f"{i:07d}", branch="main",
                           started_at=f"2026-01-01T00:00:{i:02d}+00:00", fingerprint=fp)
            h.run_writes.start_run(p)
            m = validate_metric("lat", list(1 + rng.normal(0, 0.01, 5)), unit="ms", better="lower")
            h.run_writes.record_run(RunRecord(p, [TestResult(node, "suites/test_lat.py", "passed", 1.0)],
                                   [(node, m)], None, 0))


@pytest.mark.parametrize(("values", "rc"), [("1.016 1.0", 0), ("1.016 1.022", 1)])
def test_a_suspect_is_rerun_and_the_rerun_decides(make_tree, tmp_path, values, rc):
    # One confirm attempt: the first attempt at the gate's own level, one rerun decides.
    tree = make_tree({"test_lat.py": LAT_TEST})
    _baseline(tree / "h.db")
    r = run(tree, "cpu", "--gate", "enforce", "--confirm", "1",
            env={"LAT_VALUES": values, "LAT_COUNT": str(tmp_path / "count")})
    assert r.returncode == rc, r.stdout + r.stderr
    assert "suspected 1 test(s); confirming (attempt 1 of 1)" in r.stdout
    assert (tmp_path / "count").read_text() == "2"  # first attempt + one rerun
    # --confirm 0: the suspect is recorded and the session passes. On a fresh baseline: a
    # regression held above stays red for the same code until accepted.
    (tmp_path / "count").unlink()
    for leftover in tree.glob("h.db*"):
        leftover.unlink()
    _baseline(tree / "h.db")
    r0 = run(tree, "cpu", "--gate", "enforce", "--confirm", "0",
             env={"LAT_VALUES": values, "LAT_COUNT": str(tmp_path / "count")})
    assert r0.returncode == 0 and "confirming" not in r0.stdout, r0.stdout + r0.stderr
    assert "suspect" in r0.stdout


def test_a_rerun_of_one_file_leaves_the_suites_other_files_alone(make_tree, tmp_path):
    # The confirm rerun runs the tripped test only; its plan still listed every file of the
    # suite, so each other file "registered but ran no tests" failed the rerun (pytest
    # exit 1): serving-cpu's checkpoint swap, cleared at its rerun, failed the session.
    tree = make_tree({"test_lat.py": LAT_TEST, "test_other.py": OK.format(t=1) + "def test_x():\n    pass\n"})
    _baseline(tree / "h.db")
    r = run(tree, "cpu", "--gate", "enforce", "--confirm", "1",
            env={"LAT_VALUES": "1.03 0.97", "LAT_COUNT": str(tmp_path / "count")})
    assert (tmp_path / "count").read_text() == "2"  # first attempt + one rerun
    assert "registered but ran no tests" not in r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(("values", "rc", "runs"), [
    ("1.025 1.04", 1, 2),        # clear: the first rerun holds alone (one GPU rerun)
    ("1.025 1.012 1.018", 1, 3),  # borderline, and the two reruns' mean holds
    ("1.025 1.010 1.0", 0, 3),    # borderline, and the second rerun clears it
    ("1.025 0.998", 0, 2),        # the first rerun is back in the noise: passes at once
])
def test_two_stage_confirm_reruns_again_unless_the_first_rerun_is_back_in_the_noise(
        make_tree, tmp_path, values, rc, runs):
    tree = make_tree({"test_lat.py": LAT_TEST})
    _baseline(tree / "h.db")
    # Default: four confirm attempts; a 30-run baseline (its windows' baseline the 21 runs
    # before the last 10) is too short for a third rerun and for the first attempt's
    # two-stage level (decisions.SEQUENTIAL_MIN_BASE), so A trips at the gate's own
    # level (+2.5%) and the second rerun decides outright.
    r = run(tree, "cpu", "--gate", "enforce",
            env={"LAT_VALUES": values, "LAT_COUNT": str(tmp_path / "count")})
    assert r.returncode == rc, r.stdout + r.stderr
    assert "confirming (attempt 1 of 4)" in r.stdout
    assert ("confirming (attempt 2 of 4)" in r.stdout) == (runs == 3), r.stdout
    assert "confirming (attempt 3 of 4)" not in r.stdout
    assert (tmp_path / "count").read_text() == str(runs)
    from gates.store.open import open_history

    with open_history(tree / "h.db", create=False) as h:
        rows = h.backend.db.execute("SELECT r.confirm_of, v.verdict, v.attempt, v.detail FROM verdicts v "
                            "JOIN runs r ON r.run_id = v.run_id WHERE v.key = 'lat' "
                            "ORDER BY v.attempt").fetchall()
    # Every attempt is recorded: the first (a regression), the reruns.
    assert [row[2] for row in rows] == list(range(1, runs + 1))
    assert rows[0][1] == "regression" and rows[0][0] is None
    assert rows[-1][1] == ("regression" if rc else "pass")
    if runs == 3:
        assert rows[1][1] == "suspect"
        # The second rerun's baseline: the 30 earlier runs, not the first attempt.
        assert json.loads(rows[2][3])["n_baseline"] == 30


@pytest.mark.parametrize(("values", "rc"), [
    ("1.016 1.012 1.011 1.013 1.015", 1),  # borderline to the end; the mean of four holds
    ("1.016 1.012 1.011 1.013 0.998", 0),  # ... and a clean fourth rerun clears it
])
def test_sequential_confirm_takes_up_to_four_reruns_on_a_long_baseline(make_tree, tmp_path, values, rc):
    tree = make_tree({"test_lat.py": LAT_TEST})
    _baseline(tree / "h.db", n=45)
    r = run(tree, "cpu", "--gate", "enforce",
            env={"LAT_VALUES": values, "LAT_COUNT": str(tmp_path / "count")})
    assert r.returncode == rc, r.stdout + r.stderr
    assert "confirming (attempt 4 of 4)" in r.stdout
    assert (tmp_path / "count").read_text() == "5"
    from gates.store.open import open_history

    with open_history(tree / "h.db", create=False) as h:
        rows = h.backend.db.execute("SELECT v.verdict, v.attempt, v.detail FROM verdicts v "
                            "WHERE v.key = 'lat' ORDER BY v.attempt").fetchall()
    assert [row[0] for row in rows] == ["regression", "suspect", "suspect", "suspect",
                                        "regression" if rc else "pass"]
    assert json.loads(rows[-1][2])["n_baseline"] == 45  # first attempt and reruns left out


def test_runner_default_confirm_attempts_match_the_gate():
    from ci_register.running.runner import DEFAULT_CONFIRM
    from gates.model.stats import DEFAULTS

    assert DEFAULT_CONFIRM == DEFAULTS.confirm_attempts == 4


def test_a_shard_gates_against_a_baseline_snapshot_and_keeps_only_its_runs(make_tree, tmp_path):
    from gates.store.open import open_history
    from gates.store.snapshot import make_snapshot

    tree = make_tree({"test_lat.py": LAT_TEST})
    _baseline(tmp_path / "main.db")
    make_snapshot(tmp_path / "main.db", tmp_path / "snap.db", ["cpu"])
    before = (tmp_path / "snap.db").read_bytes()
    # Clearly slower, and the confirm rerun holds it: the snapshot's 30 runs are the baseline.
    r = run(tree, "cpu", "--gate", "enforce", "--confirm", "1", "--baseline",
            str(tmp_path / "snap.db"),
            env={"LAT_VALUES": "1.06 1.06", "LAT_COUNT": str(tmp_path / "count")})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "regression" in r.stdout and "dropped 30 snapshot run(s); 2 run(s) of its own" in r.stdout
    assert (tmp_path / "snap.db").read_bytes() == before
    with open_history(tree / "h.db") as h:
        assert len(h.merge_reads.run_ids()) == 2 and not h.fleet_sql.snapshot_run_ids()
    # A missing snapshot is bad input: one line, nothing run.
    r = run(tree, "cpu", "--baseline", str(tmp_path / "nope.db"))
    assert r.returncode == 2 and "nope.db" in r.stderr and "passed" not in r.stdout


def test_confirm_chain_ends_on_a_rerun_that_did_not_finish():
    from ci_register.running.runner import Attempt, confirm_chain

    def crashed_rerun(attempt, nodeids):  # os._exit(0) in a rerun: pytest 1, never gated
        return Attempt(1, None, crashed=True)

    done = confirm_chain(Attempt(0, 1), 4, lambda: ["t::a"], crashed_rerun)
    assert done.crashed and done.exit_code == 1
    done = confirm_chain(Attempt(0, 1), 4, lambda: ["t::a"],
                         lambda attempt, nodeids: Attempt(130, None, crashed=True))
    assert done.crashed and done.exit_code == 130
    # A rerun that passes its gate ends the chain green, as before.
    done = confirm_chain(Attempt(0, 1), 4, lambda: ["t::a"],
                         lambda attempt, nodeids: Attempt(0, 0))
    assert not done.crashed and done.exit_code == 0


@pytest.mark.parametrize("kind", ["fifo", "list", "bad-files"])
def test_ci_plan_that_is_not_a_plan_is_a_usage_error(tmp_path, kind):
    # A FIFO blocked forever, /dev/zero read until memory ran out, and a JSON list
    # or a file entry without "expected" crashed with an internal error.
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    plan = tmp_path / "plan.json"
    if kind == "fifo":
        os.mkfifo(plan)
    else:
        plan.write_text(json.dumps([] if kind == "list" else {"files": [{"path": "test_ok.py"}]}))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "ci_register.running.pytest_plugin", "--ci-plan", "plan.json", "test_ok.py", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 4, r.stdout + r.stderr  # pytest's usage error
    assert "--ci-plan plan.json: " in r.stderr and "rerun through `python -m ci_register run`" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_a_gate_past_its_time_limit_fails_the_session(tmp_path, monkeypatch, capsys):
    # The gate ran as a child with no limit: one waiting on a locked database held the job.
    import time  # noqa: PLC0415

    from ci_register.running import runner  # noqa: PLC0415

    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hang))
    monkeypatch.setenv("GATES_STEP_TIMEOUT_S", "1")
    opts = parse_run_args("cpu", ["--history", str(tmp_path / "h.db"), "--root", str(tmp_path)])
    assert opts.step_timeout_s == 1.0
    start = time.monotonic()
    rc = runner._gate(opts, "r1", tmp_path / "plan.json", None, tmp_path / "tripped.json")
    assert time.monotonic() - start < 30  # cut at its 1 s limit, not the hang's own 30 s
    err = capsys.readouterr().err
    assert rc == 1  # a failure, never a pass (0) nor "not gated" (None)
    assert "the gate of run r1 (python -m gates.gate) ran past its 1 s limit" in err
    assert "GATES_STEP_TIMEOUT_S=SECONDS" in err and "run r1 was not gated" in err
    # The confirm protocol turns that into the session's exit 1.
    done = runner.confirm_chain(runner.Attempt(0, rc), 4, lambda: [], lambda a, n: None)
    assert done.exit_code == 1
    # Marking an unfinished run that hangs fails the session too (True: exit 1).
    assert runner._finish(opts, "r1", "crashed", 1, "pytest exited with code 0 early") is True


@pytest.mark.parametrize("value", ["0", "-5", "soon", "inf", "nan"])
def test_a_bad_step_timeout_is_a_usage_error(monkeypatch, value):
    monkeypatch.setenv("GATES_STEP_TIMEOUT_S", value)
    with pytest.raises(UsageError, match="GATES_STEP_TIMEOUT_S=.*give seconds > 0"):
        parse_run_args("cpu", [])


@pytest.mark.parametrize("flag", ["--fixtures", "--fixtures-per-test"])
def test_pytest_options_that_run_no_test_never_pass(tree, flag):
    # pytest returns 0 after --fixtures whatever its session's status: the suite ran no
    # test, said so ("no test executed"), recorded exit 1, and the session exited 0.
    r = run(tree, "cpu", "--gate", "off", flag)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no test executed" in r.stdout + r.stderr
