"""Mixed units in old history: the gate says the units disagree, never pools them."""

from __future__ import annotations

import sqlite3

import pytest
from report_history import BW, LAT, write_run

from gates.gate import evaluate_run
from gates.model import stats
from gates.store.open import open_history

NEED = stats.DEFAULTS.window + max(stats.DEFAULTS.windows)  # baseline runs the gate reads


def history(tmp_path, runs: int) -> tuple[str, list[str]]:
    path = str(tmp_path / "h.db")
    with open_history(path) as h:
        ids = [write_run(h, i, latency=1.0) for i in range(1, runs + 1)]
    return path, ids


def set_unit(path: str, unit: str, run_ids: list[str]) -> None:
    # Written before the recorder and merge checked units, or by hand.
    with sqlite3.connect(path) as conn:
        conn.executemany("UPDATE metric_rows SET unit = ? WHERE key_id = (SELECT id FROM "
                         "texts WHERE text = ?) AND run_num = (SELECT num FROM runs WHERE "
                         "run_id = ?)", [(unit, LAT, r) for r in run_ids])
    conn.close()


def verdicts(path: str, run_id: str, bulk: bool) -> tuple[int, dict[str, tuple[str, str]]]:
    with open_history(path) as h:
        result = evaluate_run(h, run_id, save=False, bulk=bulk)
    return result.exit_code, {v.key: (v.verdict, v.message) for v in result.verdicts}


@pytest.mark.parametrize("bulk", [True, False])
def test_a_history_mixing_units_across_runs_is_an_error_not_pooled(tmp_path, bulk):
    path, ids = history(tmp_path, 12)
    set_unit(path, "ms", ids[2:4])
    code, got = verdicts(path, ids[-1], bulk)
    assert code == 2
    verdict, message = got[LAT]
    assert verdict == "error" and "units disagree" in message
    assert "2 baseline run(s) in 'ms'" in message and "9 baseline run(s) in 's'" in message
    assert ids[3][:12] in message  # the newest run in the other unit, to untrust
    assert got[BW][0] == "pass"  # the other key is judged as usual


@pytest.mark.parametrize("bulk", [True, False])
def test_this_run_in_ms_against_a_history_in_s_is_an_error(tmp_path, bulk):
    path, ids = history(tmp_path, 12)
    set_unit(path, "ms", ids[-1:])
    code, got = verdicts(path, ids[-1], bulk)
    assert code == 2
    verdict, message = got[LAT]
    assert verdict == "error" and "this run in 'ms'; 11 baseline run(s) in 's'" in message


def test_another_unit_only_before_the_baseline_window_is_not_an_error(tmp_path):
    path, ids = history(tmp_path, NEED + 3)
    set_unit(path, "ms", ids[:2])  # older than the newest NEED runs before the last
    for bulk in (True, False):
        code, got = verdicts(path, ids[-1], bulk)
        assert got[LAT][0] != "error", got[LAT]
        assert code in (0, 1)
