"""Recorded import maps and executed-functions records are outside data: bounded,
validated, placed by the commit graph; empty, future-dated and damaged ones are refused,
and `gate-report check` and the merge name them."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest
from report_history import write_run

from ci_register.planning.evidence import (
    EXECUTED_MAP_PATH,
    ExecutedRecord,
    executed_records,
    record_problem,
)
from ci_register.planning.record_check import MAX_ENTRIES, row_problem
from ci_register.planning.select import fresh_maps, fresh_runner_map
from gates.commands.cli import main
from gates.store.history import HistoryError
from gates.store.merge import merge_histories
from gates.store.merge_check import ShardRejected
from gates.store.open import open_history

NOW = dt.datetime(2026, 12, 7, 12, tzinfo=dt.UTC)
GOOD = {"suite": "cpu", "path": EXECUTED_MAP_PATH, "commit_sha": "a" * 40, "run_id": "r1",
        "recorded_at": "2026-12-06T00:00:00+00:00", "files": ["pkg/core.py", "pkg/core.py::used"]}
FUTURE = (dt.datetime.now(dt.UTC) + dt.timedelta(days=400)).isoformat()

HOSTILE = [
    ("outside the tree", {"files": ["/etc/passwd"]}, "not a path inside the tree"),
    ("parent folder", {"files": ["../x.py"]}, "not a path inside the tree"),
    ("NUL", {"files": ["pkg/core.py\x00::used"]}, "NUL"),
    ("too many", {"files": [f"p/f{i}.py" for i in range(MAX_ENTRIES * 2)]}, "more than the"),
    ("empty", {"files": []}, "empty"),
    ("future", {"recorded_at": "2027-06-01T00:00:00+00:00"}, "in the future"),
    ("damaged JSON", {"files": '["pkg/core.py", '}, "not JSON"),
    ("not a list", {"files": {"a": 1}}, "not a list"),
    ("mark beside entries", {"files": ["<incomplete: x>", "pkg/core.py"]}, "beside entries"),
    ("no commit", {"commit_sha": None}, "names no commit"),
    ("bad test path", {"path": "../test_x.py"}, "not a path inside the tree"),
]


@pytest.mark.parametrize(("name", "change", "said"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_record_is_refused_by_selection(name, change, said):
    row = {**GOOD, **change}
    assert said in (row_problem(row, NOW) or ""), row_problem(row, NOW)
    got, notes = executed_records([row] if row["path"] == EXECUTED_MAP_PATH else [], NOW, 30)
    if row["path"] == EXECUTED_MAP_PATH:
        assert got == {} and "refused" in notes[0], notes
    as_map = {**row, "path": "tests/test_a.py"} if row["path"] == EXECUTED_MAP_PATH else row
    if "commit" not in name:
        maps, notes = fresh_maps([as_map], NOW, 30)
        assert maps == {} and "refused" in " ".join(notes), notes
        runner, notes = fresh_runner_map([{**as_map, "path": "<runner>"}], NOW, 30)
        if "test path" not in name:
            assert runner is None and "refused" in " ".join(notes), notes


def test_a_sound_record_is_used():
    assert row_problem(GOOD, NOW) is None
    got, _ = executed_records([GOOD], NOW, 30)
    assert set(got) == {"cpu"}
    assert row_problem({**GOOD, "files": ["<incomplete: started python3 -I>"], "commit_sha": None}, NOW) is None


def test_records_are_placed_by_the_commit_graph_not_the_clock():
    rec = ExecutedRecord("cpu", frozenset({"pkg/core.py"}), "b" * 40)
    assert record_problem(rec, known=True, ancestor=True) is None
    assert "not in the base's history" in record_problem(rec, known=True, ancestor=False)


# ------------------------------------------------------------ the store and gate-report check

def _history(tmp_path: Path, name: str = "h.db", shard: tuple[int, int] = (1, 1)) -> tuple[Path, str]:
    path = tmp_path / name
    with open_history(path) as h:
        run_id = write_run(h, 1, latency=1.0, run_id=f"{name.replace('.', '-')}-run")
    if shard != (1, 1):
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE runs SET shard_index = ?, shard_count = ?", shard)
    return path, run_id


def _put_rows(path: Path, run_id: str, rows: list[tuple[str, str, str, str]]) -> None:
    """Rows as a hand edit or a forged file would hold them: (path, commit, recorded_at, files JSON)."""
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT OR REPLACE INTO import_maps (suite, path, commit_sha, run_id, recorded_at, files) "
                         "VALUES ('cpu', ?, ?, ?, ?, ?)", [(p, c, run_id, at, f) for p, c, at, f in rows])


def test_gate_report_check_names_hostile_records(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GATES_HISTORY", raising=False)
    path, run_id = _history(tmp_path)
    now = dt.datetime.now(dt.UTC).isoformat()
    _put_rows(path, run_id, [
        ("tests/test_a.py", "c" * 40, now, json.dumps(["/etc/passwd"])),
        ("tests/test_b.py", "c" * 40, now, json.dumps(["../x.py"])),
        ("tests/test_c.py", "c" * 40, now, json.dumps(["a\x00.py"])),
        ("tests/test_d.py", "c" * 40, now, json.dumps([f"p/{i}.py" for i in range(200_000)])),
        ("tests/test_e.py", "c" * 40, now, "[]"),
        ("tests/test_f.py", "c" * 40, FUTURE, json.dumps(["tests/test_f.py"])),
        ("tests/test_g.py", "c" * 40, now, "[not json"),
        ("tests/test_h.py", "c" * 40, now, json.dumps(["tests/test_h.py"])),  # sound
    ])
    code = main(["check", "--history", str(path)])
    out = capsys.readouterr().out
    assert code == 2, out
    for name in "abcdefg":
        assert f"tests/test_{name}.py" in out, out
    assert "tests/test_h.py" not in out


def test_a_future_dated_record_is_replaced_by_the_next_run(tmp_path):
    path, run_id = _history(tmp_path)
    _put_rows(path, run_id, [(EXECUTED_MAP_PATH, "c" * 40, FUTURE, json.dumps(["pkg/a.py"]))])
    with open_history(path) as h:
        h.after_writes.record_import_maps("cpu", run_id, "d" * 40, {EXECUTED_MAP_PATH: ["pkg/b.py"]})
        rows = h.planning_reads.import_maps("cpu")
    assert [(r["commit_sha"], r["files"]) for r in rows] == [("d" * 40, ["pkg/b.py"])]


def test_a_merge_refuses_hostile_records_and_a_shards_executed_record(tmp_path):
    into, _ = _history(tmp_path, "into.db")
    bad, run_id = _history(tmp_path, "bad.db")
    _put_rows(bad, run_id, [("tests/test_a.py", "c" * 40, dt.datetime.now(dt.UTC).isoformat(), json.dumps(["/etc/passwd"]))])
    with pytest.raises((ShardRejected, HistoryError), match="not a path inside the tree"):
        merge_histories([bad], into)
    shard, run_id = _history(tmp_path, "shard.db", shard=(2, 3))
    _put_rows(shard, run_id, [(EXECUTED_MAP_PATH, "c" * 40, dt.datetime.now(dt.UTC).isoformat(), json.dumps(["pkg/a.py"]))])
    with pytest.raises((ShardRejected, HistoryError), match="counts only for a run of the whole suite"):
        merge_histories([shard], into)
    ok, run_id = _history(tmp_path, "ok.db", shard=(2, 3))
    _put_rows(ok, run_id, [(EXECUTED_MAP_PATH, "c" * 40, dt.datetime.now(dt.UTC).isoformat(),
                            json.dumps(["<incomplete: shard 2/3>"]))])
    merge_histories([ok], into)
