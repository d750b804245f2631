"""The interval's confidence is a column of its own (m007): inside the detail JSON its
full-precision float made almost every detail text unique, stored twice (texts and
their unique index), 34.2 kB a 73-metric run instead of ~21."""

from __future__ import annotations

import json
from pathlib import Path

from old_schema import to_m007

from gates.store.open import open_history
from gates.store.provenance import Provenance
from gates.store.schema import VERDICTS_VIEW_M005


def _run(h, rid: str, i: int) -> None:
    h.run_writes.start_run(Provenance(run_id=rid, suite="s", commit="c", branch="main",
                           started_at=f"2026-01-01T00:00:{i:02d}+00:00", fingerprint="gpu-a"))


def _rows(confs: list[float]) -> list[dict]:
    return [{"key": f"k{i}", "verdict": "pass", "detail": {"method": "robust-t/run", "n_baseline": 50},
             "ci_conf": c} for i, c in enumerate(confs)]


def test_verdicts_differing_only_in_confidence_share_their_detail_text(tmp_path: Path):
    confs = [0.9887132511908158, 0.9993513513513513, 0.9995549538625863]
    with open_history(tmp_path / "h.db") as h:
        _run(h, "r1", 1)
        h.run_writes.save_verdicts("r1", _rows(confs))
        got = h.report_reads.verdicts("r1")
        assert [v["ci_conf"] for v in got] == confs  # full precision, in its column
        assert all("ci_conf" not in v["detail"] for v in got)
        details = h.conn.execute("SELECT count(DISTINCT detail_id) FROM verdict_rows").fetchone()[0]
        assert details == 1
        assert h.conn.execute("SELECT count(*) FROM texts WHERE text LIKE '%ci_conf%'").fetchone()[0] == 0


def test_the_gate_stores_the_confidence_in_the_column():
    from gates.gate import Verdict

    v = Verdict(key="k", verdict="pass", ci_conf=0.99935)
    row = v.row(1, None)
    assert row["ci_conf"] == 0.99935 and "ci_conf" not in row["detail"]


def test_migration_copies_older_rows_confidence_out_of_their_detail(tmp_path: Path):
    path = tmp_path / "h.db"
    with open_history(path) as h:
        _run(h, "r1", 1)
        h.run_writes.save_verdicts("r1", [{"key": "a", "verdict": "pass", "detail": {"method": "m", "ci_conf": 0.98}},
                               {"key": "b", "verdict": "pass", "detail": {"method": "m"}},
                               {"key": "c", "verdict": "pass", "detail": "not json {\"ci_conf\""}])
        # As a file written before m007: confidences inside the detail, no column.
        to_m007(h.conn)
        h.conn.execute("DROP VIEW verdicts")
        h.conn.execute("ALTER TABLE verdict_rows DROP COLUMN ci_conf")
        h.conn.execute(f"CREATE VIEW verdicts AS {VERDICTS_VIEW_M005}")
        h.conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm007_verdict_ci_conf'")
        h.conn.commit()
    with open_history(path) as h:
        got = {v["key"]: (v["ci_conf"], v["detail"]) for v in h.report_reads.verdicts("r1")}
    assert got["a"] == (0.98, {"method": "m", "ci_conf": 0.98})  # detail kept as it was
    assert got["b"][0] is None and got["c"][0] is None
    assert json.dumps(got["c"][1])  # an unreadable detail is left alone
