"""A 3% regression planted on a machine of the committed history still fails its session
(benchmarks/plant_history.py), and planting never touches the history itself."""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import plant_history  # noqa: E402


def test_a_planted_regression_fails_on_a_machines_first_and_later_runs():
    path = ROOT / "history.db"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ms = plant_history.machines_of(con)
    sens = plant_history.sensitive_keys(con, "base-b-1gpu", 0.03)
    con.close()
    # The last machine of the 1-GPU suite: its first run is new to the history, its
    # second is judged against its own first.
    (suite, _), runs = [(k, v) for k, v in ms.items() if k[0] == "base-b-1gpu"][-1]
    first = plant_history.judge_plant(path, suite, runs, 0.03, sens)
    later = plant_history.judge_plant(path, suite, runs[1:], 0.03, sens)
    assert first["fails"] and later["fails"]
    assert first["sensitive_caught"] >= 0.5 * first["sensitive"] > 0
    # Nothing planted: no metric of the same run trips.
    clean = plant_history.judge_plant(path, suite, runs, 0.0, sens)
    assert not clean["fails"], clean
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
