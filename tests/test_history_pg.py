"""The history on PostgreSQL: its schema guard (newer, foreign, read-only), URLs wherever a
history path is taken, and the offline path (a per-run file ingested by run id).

The store's behaviour itself is tested on both backends by test_history.py and
test_history_concurrency.py (the ``store_location`` fixture)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from test_history import PLAN, record

from gates.commands.cli import main
from gates.store.backend import display_location, history_location, is_database_url
from gates.store.dialect import POSTGRESQL, SQLITE
from gates.store.history import HistoryError
from gates.store.open import open_history
from gates.store.pg import _positional, translate
from gates.store.pg_schema import PG_KNOWN_MIGRATIONS

# Without psycopg the store_location tests of test_history.py fail under CI=true (conftest).
psycopg = pytest.importorskip("psycopg", reason="psycopg missing: pip install -e '.[postgres]'")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("GATES_HISTORY", raising=False)


def _sql(url: str, statement: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def _dump(url: str) -> list[tuple]:
    """Every table of the URL's schema with its row count (what 'untouched' compares)."""
    tables = [r[0] for r in _sql(url, "SELECT table_name FROM information_schema.tables "
                                      "WHERE table_schema = current_schema() ORDER BY 1")]
    return [(t, _sql(url, f"SELECT count(*) FROM {t}")[0][0]) for t in tables]


def test_locations_keep_urls_and_hide_passwords():
    url = "postgresql://ci:s3cret@db.example:5432/gates"
    assert is_database_url(url) and is_database_url(Path(url))  # Path folds the //
    assert history_location(Path(url)) == url
    assert history_location("h.db") == Path("h.db")
    assert display_location(url) == "postgresql://ci:***@db.example:5432/gates"
    assert display_location("postgres://u@h/d") == "postgres://u@h/d"


def test_translate_only_numbers_the_parameters():
    # The dialect is stated once (gates.store.dialect); the connection rewrites no SQL.
    assert translate("INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT DO NOTHING", True) == \
        "INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT DO NOTHING"
    assert translate("SELECT 1 WHERE +suite = ? AND x LIKE '%a%' LIMIT ?", True) == \
        "SELECT 1 WHERE +suite = $1 AND x LIKE '%a%' LIMIT $2"
    assert translate("SELECT a + b, '%' FROM t", False) == "SELECT a + b, '%' FROM t"


def test_the_dialects_state_what_differs():
    assert SQLITE.no_index == "+" and POSTGRESQL.no_index == ""
    assert SQLITE.json_list("keys") == "SELECT value FROM json_each(:keys)"
    assert POSTGRESQL.json_list("nums", numbers=True) == \
        "SELECT value::bigint FROM jsonb_array_elements_text(:nums::jsonb)"
    assert _positional("SELECT ?::int WHERE a = :x AND b > :y OR c = :x") == (
        "SELECT ?::int WHERE a = ? AND b > ? OR c = ?", ("x", "y", "x"))


def test_new_database_gets_schema_views_and_reopens(pg_url):
    with open_history(pg_url) as h:
        assert h.backend.schema_version == len(PG_KNOWN_MIGRATIONS)
        record(h, 1, plan=PLAN)
        h.run_writes.save_verdicts("run001", [{"key": "k", "verdict": "pass", "rel_change": 0.01}])
        h.check()
    with open_history(pg_url, create=False, readonly=True) as h:
        assert h.report_reads.run("run001")["status"] == "complete"
    # The report's queries as views, for SQL dashboards.
    assert _sql(pg_url, "SELECT run_id, tests, passed, failed FROM report_runs") == [
        ("run001", 2, 2, 0)]
    assert _sql(pg_url, "SELECT key, verdict, rel_change FROM report_verdicts") == [
        ("k", "pass", 0.01)]
    assert _sql(pg_url, "SELECT key, median, unit FROM report_trends") == [("k", 2.0, "s")]
    assert _sql(pg_url, "SELECT path, seconds, est_time FROM report_file_times ORDER BY 1") == [
        ("suites/a/test_a.py", 1.0, 120.0), ("suites/b/test_b.py", 2.0, None)]


def test_newer_schema_is_refused_untouched(pg_url):
    with open_history(pg_url) as h:
        record(h, 1)
    _sql(pg_url, "INSERT INTO gates_migrations VALUES ('m099_from_the_future', 'x')")
    before = _dump(pg_url)
    with pytest.raises(HistoryError, match="newer gates.*m099_from_the_future.*update this"):
        open_history(pg_url)
    assert _dump(pg_url) == before


def test_foreign_schema_is_refused_untouched(pg_url):
    _sql(pg_url, "CREATE TABLE runs (x int)")
    with pytest.raises(HistoryError, match="other tables and no gates history.*runs"):
        open_history(pg_url)
    assert _dump(pg_url) == [("runs", 0)]


def test_older_schema_migrates_read_write_only(pg_url):
    with open_history(pg_url) as h:
        record(h, 1)
    _sql(pg_url, "DROP VIEW report_runs, report_verdicts, report_trends, report_file_times")
    _sql(pg_url, "DELETE FROM gates_migrations WHERE name = 'pg005_report_views'")
    with pytest.raises(HistoryError, match="schema is older"):
        open_history(pg_url, readonly=True)
    with open_history(pg_url) as h:
        assert h.backend.schema_version == len(PG_KNOWN_MIGRATIONS)
        assert h.report_reads.run("run001")["status"] == "complete"


def test_readonly_and_missing_history(pg_url, pg_cluster):
    with pytest.raises(HistoryError, match="no gates history in this database yet"):
        open_history(pg_url, create=False)
    assert _dump(pg_url) == []
    with open_history(pg_url) as h:
        record(h, 1)
    with open_history(pg_url, readonly=True) as ro, \
            pytest.raises(HistoryError, match="read-only"):
        ro.run_writes.set_trust(run_ids=["run001"], reason="x")
    dead = f"postgresql://gates:pw@127.0.0.1:{pg_cluster.port + 1}/postgres"
    with pytest.raises(HistoryError, match=r"gates:\*\*\*@.*cannot connect.*ingest") as info:
        open_history(dead)
    assert "\n" not in str(info.value) and "pw" not in str(info.value)


@pytest.mark.parametrize("url", ["postgresql://...", "postgresql://gates:pw@a..b/gates"])
def test_a_url_whose_host_cannot_be_encoded_is_a_connect_error_not_a_bad_row(url, tmp_path, capsys):
    # The docs' placeholder `postgresql://...` raised UnicodeError (IDNA, empty label) while
    # psycopg resolved the host; gate-report read that as "a row this report cannot read".
    with pytest.raises(HistoryError, match=r"cannot connect \(bad host name in the URL") as info:
        open_history(url)
    assert "\n" not in str(info.value) and "pw" not in str(info.value)
    shard = tmp_path / "run-1.db"
    with open_history(shard) as h:
        record(h, 1)
    assert main(["ingest", str(shard), "--into", url]) == 2
    err = capsys.readouterr().err
    assert "cannot connect (bad host name in the URL" in err and "cannot read" not in err


def _run_file(tmp_path: Path, name: str, i: int, **kw) -> Path:
    """What an offline GPU host writes: a history file holding only its own run."""
    path = tmp_path / name
    with open_history(path) as h:
        record(h, i, plan=PLAN, **kw)
        h.run_writes.save_verdicts(f"run{i:03d}", [{"key": "k", "verdict": "pass"}])
    return path


def test_ingest_loads_per_run_files_by_run_id_idempotently(tmp_path, pg_url, capsys,
                                                            monkeypatch):
    files = [_run_file(tmp_path, f"run{i}.db", i) for i in (1, 2, 3)]
    assert main(["ingest", *map(str, files[:2]), "--into", pg_url]) == 0
    assert "merged 2 new run(s)" in capsys.readouterr().out
    monkeypatch.setenv("GATES_HISTORY", pg_url)  # the default target
    assert main(["ingest", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "merged 1 new run(s)" in out and "2 already present" in out
    with open_history(pg_url) as h:
        assert h.merge_reads.run_ids() == ["run001", "run002", "run003"]
        assert h.report_reads.metrics("run003")[0]["samples"] == [1.0, 2.0, 3.0]
        assert [v["verdict"] for v in h.report_reads.verdicts("run002")] == ["pass"]
    # The reports read it through the same URL.
    assert main(["report", "--history", pg_url, "--run", "run003", "--format", "json"]) == 0
    assert '"run003"' in capsys.readouterr().out


def test_ingest_refuses_a_broken_file_whole(tmp_path, pg_url, capsys):
    good = _run_file(tmp_path, "good.db", 1)
    bad = _run_file(tmp_path, "bad.db", 2)
    with sqlite3.connect(bad) as conn:
        conn.execute("UPDATE metric_rows SET median = 'fast'")
    assert main(["ingest", str(good), str(bad), "--into", pg_url]) == 2
    err = capsys.readouterr().err
    assert "bad.db" in err and "median" in err and "not merged" in err
    with open_history(pg_url) as h:
        assert h.merge_reads.run_ids() == []
    other = _run_file(tmp_path, "other.db", 1, commit="9999999abc")  # run001, other content
    assert main(["ingest", str(good), "--into", pg_url]) == 0
    assert main(["ingest", str(other), "--into", pg_url]) == 2
    assert "different content" in capsys.readouterr().err


def test_plugin_records_into_a_url_and_gate_reads_it(pytester, pg_url, monkeypatch):
    from gates.store import provenance  # noqa: PLC0415

    monkeypatch.setattr(provenance, "torch_probe", lambda **kw: {})
    pytester.makepyfile(test_m="""
        def test_latency(metrics):
            metrics.record("decode/latency", [0.5, 0.25, 0.75], unit="s", better="lower")
    """)
    for run in ("r1", "r2"):
        result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                                    "--gates-suite", "cpu", "--gates-run-id", run,
                                    "--gates-history", pg_url)
        result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gates: recorded run r2 (1 tests, 1 metrics) in postgresql://*"])
    from gates.gate import main as gate_main  # noqa: PLC0415

    assert gate_main(["--history", pg_url, "--run-id", "r2", "--json"]) in (0, 1)
    with open_history(pg_url) as h:
        assert h.report_reads.run("r2")["status"] == "complete"
        assert {v["key"] for v in h.report_reads.verdicts("r2")} == {"decode/latency"}


def test_check_and_planner_durations_read_a_url(pg_url, capsys):
    with open_history(pg_url) as h:
        for i in (1, 2, 3):
            record(h, i)
    assert main(["check", "--history", pg_url]) == 0
    assert "every row is sound" in capsys.readouterr().out
    from ci_register.planning.durations import history_path, lookup  # noqa: PLC0415
    from ci_register.registered.collect import Registration  # noqa: PLC0415

    assert str(history_path(pg_url)) == pg_url and history_path(pg_url).exists()
    regs = [Registration(path="suites/a/test_a.py", line=1, marker="register_cpu_ci",
                         backend="cpu", suite="s", est_time=60.0)]
    found = lookup(regs, "s", history=pg_url, fingerprint="latest")
    assert found.problem is None and found.fingerprint == "gpu-a"
    assert found.figures["suites/a/test_a.py"].runs == 3


@pytest.mark.parametrize("args", [["--since", "2016-01-01", "--format", "json"],
                                  ["--format", "md"], ["health", "--format", "json"]])
def test_reports_read_the_same_from_both_backends(tmp_path, pg_url, capsys, args):
    from report_history import make_history  # noqa: PLC0415

    path = tmp_path / "history.db"
    make_history(path)
    assert main(["ingest", str(path), "--into", pg_url]) == 0
    capsys.readouterr()
    out = {}
    for where in (str(path), pg_url):
        cmd = [args[0], "--history", where, *args[1:]] if args[0] == "health" else \
            ["--history", where, *args]
        code = main(cmd)
        text = capsys.readouterr().out.replace(where, "HISTORY")
        out[where] = (code, re.sub(r'"generated_at":"[^"]*"', "", text))
    assert out[str(path)][1].strip() and out[str(path)] == out[pg_url]


def test_m002_database_migrates_to_the_compact_layout(pg_url):
    from gates.store.pg_schema import PG_MIGRATIONS  # noqa: PLC0415

    with psycopg.connect(pg_url, autocommit=True) as conn, conn.transaction():
        conn.execute("CREATE TABLE gates_migrations (name text PRIMARY KEY, applied_at text)")
        for name, statements in PG_MIGRATIONS[:2]:  # a database written before m003
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO gates_migrations VALUES (%s, 'x')", (name,))
        conn.execute("INSERT INTO runs (run_id, suite, status, started_at, fingerprint) "
                     "VALUES ('old1', 's', 'complete', '2026-01-01T00:00:00+00:00', 'fp')")
        conn.execute("INSERT INTO tests (run_id, attempt, nodeid, path, outcome, duration) "
                     "VALUES ('old1', 1, 't.py::a', 't.py', 'passed', 1.5)")
        conn.execute("INSERT INTO metrics (id, run_id, attempt, nodeid, key, unit, better, "
                     "count, median) VALUES (7, 'old1', 1, 't.py::a', 'k', 's', 'lower', 3, 2.0)")
        conn.cursor().executemany("INSERT INTO samples VALUES (7, %s, %s)",
                                  [(0, 1.0), (1, 3.0), (2, 2.0)])
        conn.execute("INSERT INTO verdicts (run_id, attempt, key, verdict, detail) "
                     "VALUES ('old1', 1, 'k', 'pass', '{\"n\": 1}')")
        conn.execute("INSERT INTO plan_files (run_id, path, line, est_time, expected, marker, "
                     "labels) VALUES ('old1', 't.py', 3, 30.0, 28.5, 'gpu', '[\"x\"]')")
    with open_history(pg_url) as h:
        assert h.backend.schema_version == len(PG_KNOWN_MIGRATIONS)
        assert [(m["key"], m["samples"], m["suite"]) for m in h.report_reads.metrics("old1")] == [
            ("k", [1.0, 3.0, 2.0], "s")]
        assert [(t["nodeid"], t["path"], t["duration"]) for t in h.report_reads.tests("old1")] == [
            ("t.py::a", "t.py", 1.5)]
        assert [(v["verdict"], v["detail"]) for v in h.report_reads.verdicts("old1")] == [("pass", {"n": 1})]
        assert [(f["path"], f["line"], f["est_time"], f["expected"], f["marker"], f["labels"])
                for f in h.planning_reads.plan_files("old1")] == [("t.py", 3, 30.0, 28.5, "gpu", ["x"])]
        record(h, 1)  # new rows get ids after the migrated ones
        assert h.report_reads.metrics("run001")[0]["id"] > 7 and h.merge_reads.sample_count() == 6
        h.run_writes.save_verdicts("run001", [{"key": "k", "verdict": "pass"}])
        h.check()


# ------------------------------------------------ the fleet flow with a database


def _fleet_file(path: Path, runs: int = 60) -> Path:
    from fleet_history import record as fleet_record  # noqa: PLC0415

    with open_history(path) as h:
        for i in range(runs):
            fleet_record(h, i)
        fleet_record(h, runs, confirm_of=f"run{runs - 1:04d}h200", run_id="conf")
    return path


def test_snapshot_of_a_database_reads_as_the_files(tmp_path, pg_url):
    from fleet_history import SUITE  # noqa: PLC0415

    from gates.store.merge import merge_histories  # noqa: PLC0415
    from gates.store.snapshot import make_snapshot  # noqa: PLC0415

    path = _fleet_file(tmp_path / "h.db")
    merge_histories([path], pg_url)
    make_snapshot(path, tmp_path / "a.db", [SUITE])
    make_snapshot(pg_url, tmp_path / "b.db", [SUITE], rows_per_key=20, per_file=5)
    make_snapshot(path, tmp_path / "c.db", [SUITE], rows_per_key=20, per_file=5)
    with open_history(tmp_path / "b.db") as b, open_history(tmp_path / "c.db") as c:
        ids = c.merge_reads.run_ids()
        assert 20 <= len(ids) < 61 and b.merge_reads.run_ids() == ids and "conf" in ids
        assert all(b.merge_reads.export_run(r) == c.merge_reads.export_run(r) for r in ids)
        assert b.fleet_sql.snapshot_run_ids() == set(ids)
    with pytest.raises(HistoryError, match="exists"):
        make_snapshot(pg_url, tmp_path / "b.db", [SUITE])
    assert main(["snapshot", "--history", pg_url, "--suite", SUITE,
                 "--out", str(tmp_path / "d.db")]) == 0


def test_prune_on_a_database_drops_what_the_file_drops(tmp_path, pg_url):
    from gates.store.merge import merge_histories  # noqa: PLC0415
    from gates.store.prune import apply_prune, plan_prune  # noqa: PLC0415

    path = _fleet_file(tmp_path / "h.db", runs=100)  # the gate reads the newest 80
    merge_histories([path], pg_url)
    out = []
    for where in (path, pg_url):
        with open_history(where) as h:
            deleted = apply_prune(h, plan_prune(h, keep_runs=20))
            out.append((h.merge_reads.run_ids(), h.fleet_sql.counts(), {k: v for k, v in deleted.items()
                                                  if k != "texts"}))
    assert out[0] == out[1] and out[0][2]["runs"] > 0
    assert main(["prune", "--history", pg_url, "--keep-runs", "10", "--apply"]) == 0


@pytest.mark.parametrize("path", ["pg_temp", "pg_temp,public", "%22pg_temp%22",
                                  "PG_TEMP", "no_such_schema"])
def test_a_temporary_or_missing_schema_is_refused_before_any_write(pg_cluster, tmp_path,
                                                                   capsys, path):
    # Issue 40: search_path=pg_temp said "recorded run", then the data left with the
    # session.
    url = f"{pg_cluster.url}?options=-csearch_path%3D{path}"
    with pytest.raises(HistoryError, match="temporary schema|no schema") as info:
        open_history(url)
    assert "\n" not in str(info.value)
    shard = tmp_path / "run.db"
    with open_history(shard) as h:
        record(h, 1)
    assert main(["ingest", str(shard), "--into", url]) == 2
    assert "schema" in capsys.readouterr().err


def test_a_password_in_the_url_or_query_never_reaches_an_error(pg_cluster, capsys):
    base = pg_cluster.url.replace("postgresql://", "postgresql://ci:PWSECRET1@")
    for url in (base, f"{pg_cluster.url}?password=PWSECRET2&options=-csearch_path%3Dpg_temp",
                base.replace("127.0.0.1", "127.0.0.1:1").rsplit(":", 1)[0] + ":1/none"):
        code = main(["check", "--history", url])
        text = "".join(capsys.readouterr())
        assert code == 2 and "PWSECRET" not in text, text


def test_every_exchange_with_the_server_has_a_deadline(pg_url):
    # A server that vanishes mid-query (no reset ever arrives) blocked a read for ~15 min
    # of retransmissions, or for good while idle; keepalives and tcp_user_timeout end it.
    with open_history(pg_url) as h:
        dsn = _conninfo(h)
    assert dsn["keepalives"] == "1" and dsn["tcp_user_timeout"] == "60000"
    assert dsn["keepalives_idle"] == "30" and dsn["connect_timeout"] == "10"
    # The URL's own value wins.
    with open_history(pg_url + "&tcp_user_timeout=5000") as h:
        assert _conninfo(h)["tcp_user_timeout"] == "5000"


def _conninfo(h) -> dict[str, str]:
    from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

    return {k: str(v) for k, v in conninfo_to_dict(h.backend.conn.raw.info.dsn).items()}


# ------------------------------------------------------------- server-side deadlines


def test_every_session_has_a_statement_deadline_and_keeps_the_urls_own(pg_url):
    with open_history(pg_url, busy_timeout_s=7) as h:
        got = h.conn.execute("SELECT current_setting('statement_timeout'), "
                             "current_setting('idle_in_transaction_session_timeout'), "
                             "current_setting('lock_timeout')").fetchone()
    assert tuple(got) == ("10min", "7s", "7s")
    own = pg_url + "%20-cstatement_timeout%3D5s%20-cidle_in_transaction_session_timeout%3D9s"
    with open_history(own, busy_timeout_s=7) as h:
        got = h.conn.execute("SELECT current_setting('statement_timeout'), "
                             "current_setting('idle_in_transaction_session_timeout')").fetchone()
    assert tuple(got) == ("5s", "9s")


@pytest.mark.timeout(120)
def test_a_writer_frozen_inside_its_write_frees_the_lock_for_the_fleet(pg_url):
    # A shard whose process froze (or whose host went away) in the middle of a write held
    # the history's write lock until the server noticed, hours later: every other writer
    # failed on the lock. The server now ends a session idle in its transaction past the
    # busy timeout, rolls it back and the lock is free.
    import os
    import signal
    import subprocess
    import sys
    import time

    open_history(pg_url).close()
    child = subprocess.Popen([sys.executable, "-c", (
        "import time\n"
        "from gates.store.open import open_history\n"
        f"h = open_history({pg_url!r}, busy_timeout_s=1)\n"
        "def stall():\n"
        "    print('locked', flush=True)\n"
        "    time.sleep(600)\n"
        "h.backend._write(stall)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        os.kill(child.pid, signal.SIGSTOP)
        began = time.monotonic()
        with open_history(pg_url, busy_timeout_s=30) as h:
            record(h, 1)
            assert [r[0] for r in h.conn.execute("SELECT run_id FROM runs")] == \
                ["run001"]
        # Sooner than this waiter's own 30 s busy timeout: the frozen writer's session was
        # ended (its 1 s), not outwaited. Not a tighter bound: load stretches the wait.
        assert time.monotonic() - began < 30
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()


@pytest.mark.parametrize("url", [
    "postgresql://ci:p%zzPWSECRET@127.0.0.1:1/h",     # libpq echoes the bad token
    "postgresql://ci:pw@PWSECRET@127.0.0.1:1/h",      # libpq reads PWSECRET@127.0.0.1 as the host
    'postgresql://ci:PW"SECRET@[::1/h',               # libpq echoes the whole URL
    "postgresql://ci:pw PWSECRET@127.0.0.1:1/h",      # a blank: the display's mask stopped at it
    "postgresql://ci:pa/PWSECRET@127.0.0.1:1/h",
])
def test_a_password_with_unencoded_characters_stays_out_of_connect_errors(url):
    with pytest.raises(HistoryError, match="cannot connect") as err:
        open_history(url)
    assert "SECRET" not in str(err.value) and "ci:***@" in str(err.value), str(err.value)
    assert "SECRET" not in display_location(url)


@pytest.mark.timeout(60)
def test_a_server_that_answers_nothing_ends_at_the_client_deadline(monkeypatch):
    # A proxy whose server died keeps the connection and its keepalives alive and
    # answers nothing: the first statement after the handshake waited forever.
    import subprocess
    import sys

    import gates.store.pg as pg

    monkeypatch.setattr(pg, "_STATEMENT_TIMEOUT_MS", 1000)
    monkeypatch.setattr(pg, "_CLIENT_SLACK_S", 1.0)
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("wedged_pg.py"))],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        with pytest.raises(HistoryError, match=r"no answer from the server within 2 s") as err:
            open_history(f"postgresql://ci:PWSECRET@127.0.0.1:{port}/h?sslmode=disable")
        assert "PWSECRET" not in str(err.value)  # the 2 s deadline's words: no wall bound
    finally:
        server.kill()
        server.wait()


def test_every_exchange_ends_at_the_client_deadline(pg_url):
    # Past the session's statement timeout plus the slack, the socket is shut down.
    import time

    with open_history(pg_url) as h:
        assert h.conn.deadline_s == 600 + 60  # statement_timeout 10 min, plus the slack
        h.conn.deadline_s = 1.0
        began = time.monotonic()
        with pytest.raises(psycopg.OperationalError):
            h.conn.execute("SELECT pg_sleep(30)")
        assert time.monotonic() - began < 30 and h.conn.cut  # cut, not pg_sleep's 30 s
    own = pg_url + "%20-cstatement_timeout%3D5s"
    with open_history(own) as h:
        assert h.conn.deadline_s == 5 + 60  # the URL's own statement timeout, plus the slack
