"""gates.record.plugin, driven through pytester: the metrics fixture, recording, options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gates.record.plugin import outcome_of, parse_options
from gates.store import provenance
from gates.store.open import open_history

pytest_plugins = ["pytester"]

SUITE_FILE = """
import pytest

def test_latency(metrics):
    metrics.record("decode/latency", [0.5, 0.25, 0.75], unit="s", better="lower")
    metrics.record("decode/latency", 1.0, unit="s", better="lower")
    metrics.record("eval/gsm8k", 0.9, unit="ratio", better="higher", n=1319, min_value=0.85)

def test_fails(metrics):
    metrics.record("fail/metric", [1.0], unit="s", better="lower")
    assert 1 == 2, "boom" + "x" * 5000

@pytest.mark.skip(reason="needs 8 GPUs")
def test_skipped():
    pass

@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False

@pytest.mark.xfail(reason="fixed?")
def test_xpass():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

def test_setup_error(broken):
    pass

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown broke")

def test_teardown_error(bad_teardown):
    pass

def test_bad_metric(metrics):
    metrics.record("ok/metric", [1.0], unit="s", better="lower")
    metrics.record("ok/metric", [2.0], unit="ms", better="lower")
"""


@pytest.fixture(autouse=True)
def no_torch_probe(monkeypatch):
    # Provenance probes torch in a child interpreter (seconds); not what these tests test.
    monkeypatch.setattr(provenance, "torch_probe", lambda **kw: {})


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.mkpydir("suites")
    pytester.path.joinpath("suites", "test_suite.py").write_text(SUITE_FILE)
    return pytester


def inner(pytester: pytest.Pytester, *argv: str) -> pytest.RunResult:
    # In-process run; hypothesis' plugin (if installed) costs seconds per run, so leave it out.
    return pytester.runpytest(*argv, "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def args(pytester: pytest.Pytester, *extra: str) -> list[str]:
    return ["--gates-suite", "cpu", "--gates-history", str(pytester.path / "h.db"), *extra]


def test_records_every_outcome_and_metric(suite: pytest.Pytester):
    plan = {"suite": "cpu", "shard": [2, 3], "run_id": "r1", "root": str(suite.path),
            "files": [{"path": "suites/test_suite.py", "line": 1, "est_time": 30,
                       "expected": 31.5, "marker": "register_cpu_ci", "labels": []}],
            "gates": [{"path": "suites/test_suite.py", "line": 2, "metric_key": "decode/latency",
                       "options": {"better": "lower"}}]}
    (suite.path / "plan.json").write_text(json.dumps(plan))
    result = inner(suite, *args(suite, "--gates-plan", "plan.json", "--gates-shard", "2/3"))
    result.assert_outcomes(passed=2, failed=2, skipped=1, xfailed=1, xpassed=1, errors=2)
    result.stdout.fnmatch_lines([
        f"gates: history {suite.path / 'h.db'}, suite cpu, shard 2/3, run r1, hardware *",
        "gates: recorded run r1 (8 tests, 4 metrics) in *h.db",
    ])
    with open_history(suite.path / "h.db") as h:
        run = h.report_reads.run("r1")
        assert (run["suite"], run["shard_index"], run["shard_count"]) == ("cpu", 2, 3)
        assert run["status"] == "complete" and run["exit_status"] == 1
        assert run["started_at"] <= run["finished_at"] and run["host"] and run["python"]
        tests = {t["nodeid"].split("::")[1]: t for t in h.report_reads.tests("r1")}
        assert {k: v["outcome"] for k, v in tests.items()} == {
            "test_latency": "passed", "test_fails": "failed", "test_skipped": "skipped",
            "test_xfail": "xfailed", "test_xpass": "xpassed", "test_setup_error": "error",
            "test_teardown_error": "error", "test_bad_metric": "failed",
        }
        assert all(t["path"] == "suites/test_suite.py" for t in tests.values())
        assert tests["test_skipped"]["skip_reason"] == "needs 8 GPUs"
        assert tests["test_xfail"]["skip_reason"] == "known bug"
        fail_error = tests["test_fails"]["error"]
        assert len(fail_error) == 2000 and "AssertionError" in fail_error
        assert "setup broke" in tests["test_setup_error"]["error"]
        assert "teardown broke" in tests["test_teardown_error"]["error"]
        assert tests["test_latency"]["duration"] >= 0
        assert "MetricError" in tests["test_bad_metric"]["error"]
        metrics = {(m["nodeid"].split("::")[1], m["key"]): m for m in h.report_reads.metrics("r1")}
        latency = metrics[("test_latency", "decode/latency")]
        assert latency["samples"] == [0.5, 0.25, 0.75, 1.0] and latency["median"] == 0.625
        gsm = metrics[("test_latency", "eval/gsm8k")]
        assert (gsm["n"], gsm["min_value"], gsm["better"]) == (1319, 0.85, "higher")
        assert ("test_fails", "fail/metric") in metrics  # a failing test's metrics are kept
        # the rejected second call stored nothing; the first call's sample stays
        assert metrics[("test_bad_metric", "ok/metric")]["samples"] == [1.0]
        assert h.planning_reads.plan_files("r1")[0]["expected"] == 31.5
        assert h.planning_reads.plan_gates("r1")[0]["metric_key"] == "decode/latency"


def test_bad_metric_message_reaches_the_test_report(suite: pytest.Pytester):
    suite.makepyfile(test_nan="""
        def test_nan(metrics):
            metrics.record("x", float("nan"), unit="s", better="lower")
        def test_empty(metrics):
            metrics.record("x", [], unit="s", better="lower")
        def test_key(metrics):
            metrics.record("bad key!", 1, unit="s", better="lower")
        def test_direction(metrics):
            metrics.record("x", 1, unit="s", better="faster")
    """)
    result = inner(suite, "test_nan.py")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines([
        "*MetricError: metric 'x': value must be finite, got nan*",
        "*MetricError: metric 'x': empty sample list*",
        "*MetricError: metric key 'bad key!' is invalid*",
        "*MetricError: metric 'x': better must be 'higher' or 'lower', got 'faster'*",
    ])


def test_without_suite_nothing_is_recorded(suite: pytest.Pytester):
    result = inner(suite, "suites", "-k", "latency")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gates: recording off (no --gates-suite); history *history.db"])
    assert not (suite.path / "history.db").exists()


def test_history_from_env_and_default(suite: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("GATES_HISTORY", str(suite.path / "env.db"))
    inner(suite, "suites", "--gates-suite", "cpu", "-k", "latency")
    with open_history(suite.path / "env.db") as h:
        [run] = h.report_reads.runs()
        assert run["status"] == "complete" and len(run["run_id"]) == 32
    monkeypatch.delenv("GATES_HISTORY")
    inner(suite, "suites", "--gates-suite", "cpu", "-k", "latency")
    with open_history(suite.path / "history.db") as h:
        assert len(h.report_reads.runs()) == 1


def test_two_sessions_make_two_runs(suite: pytest.Pytester):
    for _ in range(2):
        inner(suite, *args(suite, "-k", "latency"))
    with open_history(suite.path / "h.db") as h:
        runs = h.report_reads.runs()
        assert len(runs) == 2 and runs[0]["run_id"] != runs[1]["run_id"]
        assert len(h.baseline_reads.metric_series("cpu", "decode/latency", runs[0]["fingerprint"])) == 2
        assert list(h.planning_reads.file_durations("cpu", runs[0]["fingerprint"])) == ["suites/test_suite.py"]


def test_collection_error_is_recorded_against_the_file(pytester: pytest.Pytester):
    pytester.makepyfile(test_broken="import not_a_module_anywhere\n")
    result = inner(pytester, *args(pytester))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    with open_history(pytester.path / "h.db") as h:
        [run] = h.report_reads.runs()
        assert run["status"] == "interrupted" and run["exit_status"] == 2
        [test] = h.report_reads.tests(run["run_id"])
        assert (test["path"], test["outcome"]) == ("test_broken.py", "error")
        assert "not_a_module_anywhere" in test["error"]


def test_a_token_in_a_traceback_skip_or_output_stays_out_of_the_log_and_xml(
        pytester: pytest.Pytester):
    # The history masked a failing test's text on write, but pytest printed the same
    # traceback, skip reason and captured output to the CI log and the JUnit XML unmasked.
    token = "hf_" + "S3CRET" * 6
    pytester.makepyfile(test_leak=(
        "import pytest\n"
        f"TOKEN = {token!r}\n"
        "def test_fails():\n"
        "    print('HF_TOKEN=' + TOKEN)\n"
        "    assert False, 'Authorization: Bearer ' + TOKEN\n"
        "def test_skips():\n"
        "    pytest.skip('no access with GITHUB_TOKEN=ghp_' + 'S3CRET' * 6)\n"
        "@pytest.mark.xfail(reason='PGPASSWORD=S3CRETPW')\n"
        "def test_xfails():\n"
        "    assert False\n"
        "def test_passes():\n"
        "    pass\n"))
    pytester.makepyfile(test_broken="raise RuntimeError('postgresql://ci:S3CRETPW@db/h')\n")
    xml = pytester.path / "junit.xml"
    result = inner(pytester, *args(pytester), "-rA", f"--junitxml={xml}",
                   "--continue-on-collection-errors")
    out = result.stdout.str() + result.stderr.str()
    assert "test_fails" in out and "AssertionError" in out and "1 passed" in out
    assert "S3CRET" not in out
    assert "S3CRET" not in xml.read_text() and "AssertionError: Authorization: ***" in xml.read_text()
    with open_history(pytester.path / "h.db") as h:
        [run] = h.report_reads.runs()
        texts = [str(t) for t in h.report_reads.tests(run["run_id"])]
    assert texts and not any("S3CRET" in t for t in texts)


def test_broken_conftest_is_recorded_as_a_session_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_ok="def test_ok(): pass\n")
    pytester.mkdir("sub").joinpath("conftest.py").write_text("raise RuntimeError('bad conftest')\n")
    pytester.path.joinpath("sub", "test_in_sub.py").write_text("def test_x(): pass\n")
    inner(pytester, *args(pytester))
    with open_history(pytester.path / "h.db") as h:
        [run] = h.report_reads.runs()
        errors = [t for t in h.report_reads.tests(run["run_id"]) if t["outcome"] == "error"]
        assert [(t["nodeid"], t["path"]) for t in errors] == [("sub", "sub")]
        assert "bad conftest" in errors[0]["error"]


@pytest.mark.parametrize("option,value,message", [
    ("--gates-shard", "3/2", "--gates-shard '3/2': expected I/N"),
    ("--gates-shard", "one", "--gates-shard 'one': expected I/N"),
    ("--gates-run-id", "bad id", "--gates-run-id 'bad id'"),
    ("--gates-suite", "-x", "--gates-suite '-x'"),
    ("--gates-plan", "missing.json", "--gates-plan 'missing.json': cannot read"),
    # /dev/zero was read until memory ran out.
    ("--gates-plan", "/dev/zero", "--gates-plan '/dev/zero': cannot read the plan JSON (*not "
     "a regular file"),
])
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, option, value, message):
    pytester.makepyfile(test_ok="def test_ok(): pass\n")
    base = ["--gates-suite", "cpu"] if option != "--gates-suite" else []
    result = inner(pytester, *base, f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert not (pytester.path / "history.db").exists()


def test_plan_for_another_suite_is_a_usage_error(pytester: pytest.Pytester):
    (pytester.path / "plan.json").write_text(json.dumps({"suite": "gpu", "files": []}))
    result = inner(pytester, "--gates-suite", "cpu", "--gates-plan", "plan.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*is for suite 'gpu', not --gates-suite 'cpu'*"])


def test_unusable_history_is_a_usage_error_and_untouched(pytester: pytest.Pytester):
    pytester.makepyfile(test_ok="def test_ok(): pass\n")
    bad = pytester.path / "h.db"
    bad.write_text("not a database")
    result = inner(pytester, *args(pytester))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*h.db: not an SQLite database; move it away*"])
    assert bad.read_text() == "not a database"


def test_ci_variables_are_stored_without_credentials_or_refused(pytester: pytest.Pytester,
                                                                monkeypatch):
    pytester.makepyfile(test_ok="def test_ok(): pass\n")
    monkeypatch.setenv("GATES_CI_URL", "https://bob:hunter2@ci.example/run/5?token=tok123")
    assert inner(pytester, *args(pytester)).ret == pytest.ExitCode.OK
    with open_history(pytester.path / "h.db") as h:
        [run] = h.report_reads.runs()
    assert run["ci_url"] == "https://bob:***@ci.example/run/5?token=***"
    # A newline in the commit would split every report line that names it: refused,
    # with the variable named, before a run is opened.
    monkeypatch.setenv("GATES_COMMIT", "abc\n::error::x")
    result = inner(pytester, *args(pytester))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*GATES_COMMIT: holds a control character*"])
    with open_history(pytester.path / "h.db") as h:
        assert len(h.report_reads.runs()) == 1


def test_parse_options_plan_fills_run_and_shard(tmp_path: Path):
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"suite": "s", "shard": [2, 4], "run_id": "abc", "files": []}))
    opts = parse_options(suite="s", shard=None, run_id=None, plan_path=str(plan), history=None,
                         rootdir=tmp_path, env={})
    assert (opts.run_id, opts.shard, opts.history) == ("abc", (2, 4), tmp_path / "history.db")
    with pytest.raises(pytest.UsageError, match="is for run 'abc'"):
        parse_options(suite="s", shard=None, run_id="zzz", plan_path=str(plan), history=None,
                      rootdir=tmp_path, env={})


def test_plugin_import_is_light():
    # Loaded in every pytest session via the entry point: no numpy, torch or sqlite-utils.
    code = ("import sys, gates, gates.record.plugin; "
            "print(sorted(m for m in ('numpy', 'torch', 'sqlite_utils') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize("when,outcome,xfail,expected", [
    ("setup", "passed", False, None),
    ("setup", "failed", False, "error"),
    ("setup", "skipped", False, "skipped"),
    ("setup", "skipped", True, "xfailed"),
    ("call", "passed", False, "passed"),
    ("call", "passed", True, "xpassed"),
    ("call", "failed", False, "failed"),
    ("call", "skipped", True, "xfailed"),
    ("teardown", "failed", False, "error"),
    ("teardown", "passed", False, None),
])
def test_outcome_of(when, outcome, xfail, expected):
    assert outcome_of(when, outcome, xfail) == expected


@pytest.mark.parametrize(("history", "env", "message"), [
    (" ", {}, "--gates-history ' ': is blank"),
    ("sqlite:///x.db", {}, "--gates-history 'sqlite:///x.db': is a sqlite:// URL"),
    # libpq's keyword/value form became a file named after it, password and all.
    (None, {"GATES_HISTORY": "host=db password=S dbname=g"}, "GATES_HISTORY 'host=db "
     "password=*** dbname=g': is a key=value connection string, not a file path: write it as "
     "a URL"),
    (None, {"GATES_HISTORY": "h.db "}, "GATES_HISTORY 'h.db ': starts or ends with a space"),
    (None, {"GATES_HISTORY": "a\nb.db"}, "GATES_HISTORY 'a\\nb.db': holds a control character"),
])
def test_a_history_value_that_is_no_path_is_a_usage_error(tmp_path: Path, history, env, message):
    with pytest.raises(pytest.UsageError) as err:
        parse_options(suite="s", shard=None, run_id=None, plan_path=None, history=history,
                      rootdir=tmp_path, env=env)
    assert str(err.value).startswith(message)
    assert list(tmp_path.iterdir()) == []
