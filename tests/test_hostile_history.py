"""Hostile history data: merged shards, units and names that try to become workflow
commands, runs dated in the future, one key in two units."""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import sqlite3
from pathlib import Path

import pytest
from report_history import SUITE, make_history, write_run

from gates.commands.cli import main
from gates.store import provenance
from gates.store.metrics import MetricError, validate_metric
from gates.store.open import open_history
from gates.store.schema import pack_samples


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("GITHUB_ACTIONS", "GATES_HISTORY", "GITHUB_SHA", "GITHUB_RUN_ID",
                 "GATES_COMMIT", "GATES_CI_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "history.db"
    make_history(path)
    return path


def cli(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def shard(tmp_path: Path, name: str, sql: str = "", params=()) -> Path:
    path = tmp_path / name
    with open_history(path) as h:
        write_run(h, 1, latency=1.0, run_id="s" * 32)
    if sql:
        with sqlite3.connect(path) as conn:
            # A verdict word is a texts id (m008): the hostile row's word goes in first.
            conn.execute("INSERT OR IGNORE INTO texts (text) VALUES ('pass')")
            conn.execute(sql, params)
    return path


HOSTILE = [
    ("text median", "UPDATE metric_rows SET median = 'fast'", (), "median"),
    ("null median", "UPDATE metric_rows SET median = NULL", (), "median"),
    ("text sample", "UPDATE metric_rows SET samples = 'x'", (), "sample"),
    ("inf sample", "UPDATE metric_rows SET samples = ?", (pack_samples([math.inf]),), "sample"),
    ("unit command", "UPDATE metric_rows SET unit = ?", ("s\n::error::pwned",), "unit"),
    ("key command", "UPDATE texts SET text = text || ? WHERE id IN "
                    "(SELECT key_id FROM metric_rows)", ("\n::warning::x",), "key"),
    ("bad outcome", "UPDATE test_rows SET outcome = 'pwned'", (), "outcome"),
    ("negative duration", "UPDATE test_rows SET duration = -5", (), "duration"),
    ("text duration", "UPDATE test_rows SET duration = 'slow'", (), "duration"),
    ("future run", "UPDATE runs SET started_at = ?",
     ((dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).isoformat(),), "future"),
    ("not a time", "UPDATE runs SET started_at = 'yesterday'", (), "ISO"),
    ("status", "UPDATE runs SET status = 'done'", (), "status"),
    ("trusted", "UPDATE runs SET trusted = 7", (), "trusted"),
    ("suite name", "UPDATE runs SET suite = ?", ("cpu\n::error::x",), "suite"),
    ("count", "UPDATE metric_rows SET count = 99", (), "count"),
    ("better", "UPDATE metric_rows SET better = 'sideways'", (), "better"),
    ("orphan test", "INSERT INTO test_rows (run_num, attempt, nodeid_id, outcome) "
                    "VALUES (999, 1, (SELECT min(id) FROM texts), 'passed')", (),
     "belong to no run"),
    # A plan row whose path text is gone reads as a row without a path (not as no row).
    ("plan path gone", "UPDATE plan_file_rows SET path_id = 999999 WHERE (run_num, path_id) IN "
                       "(SELECT run_num, path_id FROM plan_file_rows LIMIT 1)", (), "plan file"),
    ("verdict text p", "INSERT INTO verdict_rows (run_num, attempt, key_id, verdict_id, p_value) "
                       "VALUES ((SELECT num FROM runs WHERE run_id = ?), 1, "
                       "(SELECT min(id) FROM texts), (SELECT id FROM texts WHERE text = 'pass'), "
                       "'low')", ("s" * 32,), "p_value"),
]


@pytest.mark.parametrize(("what", "sql", "params", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_shard_is_refused_whole_and_the_target_unchanged(
        template, tmp_path, capsys, what, sql, params, message):
    into = tmp_path / "history.db"
    shutil.copy(template, into)
    good = shard(tmp_path, "good.db")
    with sqlite3.connect(good) as conn:
        conn.execute("UPDATE runs SET run_id = 'g' || substr(run_id, 2)")  # plan rows follow
    bad = shard(tmp_path, "bad.db", sql, params)
    before = into.read_bytes()
    code, out, err = cli(["merge", good, bad, "--into", into], capsys)
    assert code == 2, out
    assert err.count("\n") == 1 and message in err and "not merged" in err
    assert into.read_bytes() == before
    # Every later report still works.
    code, _, err = cli(["--history", into, "--no-health"], capsys)
    assert code in (0, 1), err


def _force(db: Path, sql: str, params=()) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, params)


@pytest.mark.parametrize("cmd", [[], ["health", "--suite", SUITE]])
def test_history_text_never_prints_a_workflow_command(template, tmp_path, capsys, monkeypatch,
                                                      cmd):
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    # Data written by an older version, or by hand: the renderers must hold on their own.
    _force(path, "UPDATE metric_rows SET unit = ?", ("s\n::error::unit-injected",))
    _force(path, "UPDATE texts SET text = text || ? WHERE id IN (SELECT nodeid_id FROM "
                 "test_rows WHERE skip_reason IS NOT NULL)", ("\n::warning::name-injected",))
    _force(path, "UPDATE test_rows SET skip_reason = ? WHERE skip_reason IS NOT NULL",
           ("sm100\r\n::error title=x::reason-injected",))
    _force(path, "UPDATE runs SET fingerprint = fingerprint || ?", ("\n  ::notice::fp",))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.chdir(tmp_path)
    for fmt in ("text", "md"):
        code, out, err = cli([*cmd, "--history", path, "--format", fmt], capsys)
        assert code in (0, 1), err
        for line in (out + err).splitlines():
            stripped = line.lstrip()
            assert not stripped.startswith("::") or stripped.startswith("::error file="), line


def test_a_unit_with_a_newline_or_command_is_refused_at_record():
    for unit in ("s\n", "s\n::error::x", "::error::", "m s", "s'", ""):
        with pytest.raises(MetricError, match="unit"):
            validate_metric("lat", 1.0, unit=unit, better="lower")
    with pytest.raises(MetricError, match="key"):
        validate_metric("lat\n", 1.0, unit="s", better="lower")  # `$` matched before "\n"


def test_latest_is_this_commits_run_not_a_run_dated_next_month(tmp_path, capsys, monkeypatch):
    path = tmp_path / "h.db"
    future = (dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).isoformat(timespec="microseconds")
    with open_history(path) as h:
        write_run(h, 1, latency=1.0, run_id="a" * 32, when=dt.datetime.now(dt.UTC)
                  .isoformat(timespec="microseconds"))
        write_run(h, 2, latency=1.0, run_id="f" * 32, when=future)
    monkeypatch.chdir(tmp_path)  # no git checkout here
    code, out, _ = cli(["--history", path, "--no-health"], capsys)
    assert "aaaaaaaa" in out and "ffffffff" not in out
    monkeypatch.setenv("GITHUB_SHA", "0002" + "c0ffee" * 6)  # this CI run is that commit's
    code, out, _ = cli(["--history", path, "--no-health"], capsys)
    assert "ffffffff" in out


def test_health_latest_is_this_commits_suite_not_a_run_dated_next_month(tmp_path, capsys,
                                                                        monkeypatch):
    path = tmp_path / "h.db"
    future = (dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).isoformat(timespec="microseconds")
    now = dt.datetime.now(dt.UTC)
    with open_history(path) as h:
        for i in range(3):  # this suite's runs, the newest this hour
            write_run(h, i + 1, latency=1.0, when=(now - dt.timedelta(hours=3 - i))
                      .isoformat(timespec="microseconds"))
        write_run(h, 9, latency=1.0, suite="merged-ahead", run_id="f" * 32, when=future)
    monkeypatch.chdir(tmp_path)  # no git checkout here
    code, out, err = cli(["health", "--history", path], capsys)
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"CI health of {SUITE}: ")
    monkeypatch.setenv("GITHUB_SHA", "0009" + "c0ffee" * 6)  # this CI run is that commit's
    code, out, _ = cli(["health", "--history", path], capsys)
    assert out.splitlines()[0].startswith("CI health of merged-ahead: ")
    # With --suite, the window ends at that suite's latest run, not at a later clock.
    code, out, _ = cli(["health", "--history", path, "--suite", SUITE, "--format", "json"],
                       capsys)
    assert code == 0 and json.loads(out)[0]["suite"] == SUITE


UNITS_SUITE = """
def test_a(metrics):
    metrics.record("lat", 0.5, unit="s", better="lower")
def test_b(metrics):
    metrics.record("lat", 500.0, unit="ms", better="lower")
"""


@pytest.fixture
def no_torch_probe(monkeypatch):
    monkeypatch.setattr(provenance, "torch_probe", lambda **kw: {})


def test_one_key_in_two_units_fails_the_second_test(pytester, no_torch_probe):
    pytester.makepyfile(test_units=UNITS_SUITE)
    db = pytester.path / "h.db"
    result = pytester.runpytest("--gates-suite", "cpu", "--gates-history", str(db),
                                "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*recorded in unit 'ms', but test_units.py::test_a recorded "
                                 "it in 's'*"])
    with open_history(db) as h:
        assert [(m["key"], m["unit"]) for m in h.report_reads.metrics(h.merge_reads.run_ids()[0])] == [("lat", "s")]
    # A later run in another unit is refused against the history.
    pytester.makepyfile(test_units="def test_c(metrics):\n"
                                   "    metrics.record('lat', 9.0, unit='ms', better='lower')\n")
    result = pytester.runpytest("--gates-suite", "cpu", "--gates-history", str(db),
                                "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*unit 'ms', but run * in the history recorded it in 's'*"])


def test_a_shard_with_a_key_in_another_unit_is_refused(template, tmp_path, capsys):
    into = tmp_path / "history.db"
    shutil.copy(template, into)
    bad = shard(tmp_path, "ms.db", "UPDATE metric_rows SET unit = 'ms' WHERE unit = 's'")
    before = into.read_bytes()
    code, _, err = cli(["merge", bad, "--into", into], capsys)
    assert code == 2 and "is in 'ms' but" in err and "has it in 's'" in err
    assert into.read_bytes() == before


def test_json_nested_past_the_decoders_depth_is_a_bad_row_not_a_traceback(template, tmp_path,
                                                                         capsys):
    # A hardware text of 100,000 nested arrays: json.loads raised RecursionError, which
    # no handler took; gate-report printed a traceback.
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    _force(path, "UPDATE runs SET hardware = ? WHERE num = (SELECT max(num) FROM runs)",
           ("[" * 100_000 + "]" * 100_000,))
    code, _, err = cli(["--history", path, "--no-health"], capsys)
    assert code == 2 and err.count("\n") == 1 and "gate-report check" in err, err
    assert "Traceback" not in err


def test_a_shard_count_past_an_integer_is_a_bad_row_not_a_traceback(template, tmp_path,
                                                                   capsys):
    # 99999999999999999999 is stored as a REAL; it reached a LIMIT as 1e20 and SQLite
    # raised "datatype mismatch" (sqlite3.IntegrityError), a traceback from a report.
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    _force(path, "UPDATE runs SET shard_count = 99999999999999999999")
    code, _, err = cli(["--history", path, "--no-health"], capsys)
    assert code == 2 and err.count("\n") == 1 and "gate-report check" in err, err


def test_a_history_poisoned_before_merge_checked_is_exit_2_and_named(template, tmp_path, capsys):
    from gates.gate import main as gate_main

    path = tmp_path / "history.db"
    shutil.copy(template, path)
    _force(path, "UPDATE metric_rows SET median = 'fast' WHERE run_num IN "
                 "(SELECT num FROM runs WHERE run_id LIKE 'run0005%')")
    code, _, err = cli(["--history", path, "--no-health"], capsys)
    assert code == 2 and err.count("\n") == 1 and "gate-report check" in err
    code, out, _ = cli(["check", "--history", path], capsys)
    assert code == 2 and "run 'run000500000000000000000000'" in out and "median 'fast'" in out
    with open_history(path) as h:
        newest = h.merge_reads.run_ids()[-1]
    assert gate_main(["--history", str(path), "--run-id", newest]) == 2
    assert "gate-report check" in capsys.readouterr().err
    shutil.copy(template, path)
    code, out, _ = cli(["check", "--history", path], capsys)
    assert code == 0 and "every row is sound" in out



def test_the_gate_on_json_nested_past_the_decoders_depth_is_exit_2_and_one_line(
        template, tmp_path, capsys):
    # gate-report said one line and exit 2 for this row; `python -m gates.gate` let json's
    # RecursionError out: a traceback and exit 1 (a regression, not bad input).
    from gates.gate import main as gate_main

    path = tmp_path / "history.db"
    shutil.copy(template, path)
    with open_history(path) as h:
        newest = h.merge_reads.run_ids()[-1]
    # The run as its session left it for its gate: recorded with the gate on, not judged.
    _force(path, "DELETE FROM verdict_rows WHERE run_num = (SELECT num FROM runs "
                 "WHERE run_id = ?)", (newest,))
    _force(path, "UPDATE runs SET hardware = ?, gate_mode = 'enforce', gated_at = NULL "
                 "WHERE run_id = ?", ("[" * 10_000 + "]" * 10_000, newest))
    capsys.readouterr()
    assert gate_main(["--history", str(path), "--run-id", newest]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert f"run {newest}: its runs.hardware is JSON nested past the decoder's depth" \
        in lines[0] and f"`gate-report check --history {path}` names the runs" in lines[0], err
    # The gate refused its input: the run is marked so, and every report reads it failed.
    assert lines[1:] == [f"error: run {newest} is marked gate-error: it was not judged, "
                         "and every report reads it as failed"], err
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT status FROM runs WHERE run_id = ?",
                            (newest,)).fetchone() == ("gate-error",)
    code, out, _ = cli(["check", "--history", path], capsys)
    assert code == 2 and f"run '{newest}'" in out, out


def test_a_baseline_whose_hardware_is_nested_past_the_decoders_depth_has_no_host(
        template, tmp_path, capsys):
    # provenance.host_key reads unreadable hardware as no host, never an error; JSON nested
    # past the decoder's depth raised RecursionError there: the gate's traceback, exit 1.
    from gates.gate import main as gate_main

    path = tmp_path / "history.db"
    shutil.copy(template, path)
    with open_history(path) as h:
        newest, baseline = h.merge_reads.run_ids()[-1], h.merge_reads.run_ids()[-3]
    capsys.readouterr()
    clean = gate_main(["--history", str(path), "--run-id", newest, "--json"])
    want = capsys.readouterr().out
    _force(path, "UPDATE runs SET hardware = ? WHERE run_id = ?",
           ("[" * 10_000 + "]" * 10_000, baseline))
    assert gate_main(["--history", str(path), "--run-id", newest, "--json"]) == clean == 1
    assert capsys.readouterr().out == want
