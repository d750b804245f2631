"""The confirm protocol as a state machine: stages, the next stage, the sequential rule,
and the stage column (migration m005 derives it for rows saved before it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from old_schema import to_m007

from gates.model import stats
from gates.model.decisions import (
    Stage,
    mixture_hold_p,
    next_stage,
    sequential_step,
    stage_of,
)
from gates.store.open import open_history
from gates.store.provenance import Provenance
from gates.store.schema import _VIEWS


@pytest.mark.parametrize("stage, verdict, corroborate, want", [
    (Stage.FIRST, "regression", False, Stage.RERUN),
    (Stage.FIRST, "suspect", False, Stage.RERUN),
    (Stage.FIRST, "missing", False, Stage.RERUN),
    (Stage.FIRST, "threshold-fail", False, Stage.RERUN),
    (Stage.FIRST, "pass", False, None),
    (Stage.FIRST, "improvement", False, None),
    (Stage.FIRST, "error", False, None),
    (Stage.RERUN, "suspect", False, Stage.RERUNS),
    (Stage.RERUN, "suspect", True, Stage.CORROBORATE),
    (Stage.RERUN, "regression", False, None),
    (Stage.RERUN, "missing", False, None),
    (Stage.RERUNS, "suspect", False, Stage.RERUNS),
    (Stage.RERUNS, "regression", False, None),
    (Stage.CORROBORATE, "suspect", False, None),
])
def test_next_stage(stage, verdict, corroborate, want):
    assert next_stage(stage, verdict, corroborate=corroborate) is want


def test_nothing_follows_in_warn_mode_or_without_attempts():
    assert next_stage(Stage.FIRST, "regression", enforced=False) is None
    assert next_stage(Stage.RERUN, "suspect", attempts_left=0) is None


def test_mixture_sprt_boundary():
    # Robbins' normal mixture, tau = 1 run SD: z^2 = 4 ln(sqrt(2) / alpha).
    assert mixture_hold_p(0.02) == pytest.approx(1.84e-5, rel=0.02)
    assert mixture_hold_p(0.01) < mixture_hold_p(0.02) < mixture_hold_p(0.05)


def test_sequential_step_boundaries():
    lv = 0.02
    assert sequential_step(1e-8, 1, final=False, level=lv) == "regression"  # a clear rerun
    assert sequential_step(1e-3, 1, final=False, level=lv) == "suspect"
    assert sequential_step(0.6, 1, final=False, level=lv) == "pass"
    assert sequential_step(1e-3, 2, final=False, level=lv) == "regression"  # z >= 3
    assert sequential_step(0.01, 3, final=False, level=lv) == "suspect"
    assert sequential_step(0.51, 2, final=False, level=lv) == "pass"
    assert sequential_step(0.009, 2, final=True, level=lv) == "regression"
    assert sequential_step(0.009, 3, final=True, level=lv) == "pass"


def test_one_clear_rerun_settles_the_sequential_confirm():
    # An independent Gaussian baseline: a rerun 8 SD out holds alone (one GPU rerun);
    # one 3 SD out is borderline and asks for another; a clean one passes.
    h = np.random.default_rng(14).normal(100, 1, 40)
    j, v = stats.confirm(h, 108.0, sign=1, first=103.0, another=True)
    assert v == "regression" and j.extras.p_run_worse <= mixture_hold_p(0.02)
    j, v = stats.confirm(h, 103.0, sign=1, first=103.0, another=True)
    assert v == "suspect" and mixture_hold_p(0.02) < j.extras.p_run_worse <= 0.46
    assert stats.confirm(h, 99.8, sign=1, first=103.0, another=True)[1] == "pass"


def test_stage_of_a_row_saved_without_one():
    assert stage_of({"attempt": 1}) is Stage.FIRST
    assert stage_of({"attempt": 2}) is Stage.RERUN
    assert stage_of({"attempt": 3}, {"detail": {"corroborate": True}}) is Stage.CORROBORATE
    assert stage_of({"attempt": 3}, {"detail": {}}) is Stage.RERUNS
    assert stage_of({"attempt": 3, "stage": "rerun"}) is Stage.RERUN


def _run(h, rid: str, i: int, confirm_of: str | None = None) -> None:
    h.run_writes.start_run(Provenance(run_id=rid, suite="s", commit="c", branch="main",
                           started_at=f"2026-01-01T00:00:{i:02d}+00:00", fingerprint="gpu-a",
                           confirm_of=confirm_of))


def test_migration_derives_the_stage_of_older_rows(tmp_path: Path):
    path = tmp_path / "history.db"
    with open_history(path) as h:
        chains = (("a", "b", "c", True), ("d", "e", "f", False))
        for n, (first, rerun, third, asked) in enumerate(chains):
            _run(h, first, 3 * n)
            _run(h, rerun, 3 * n + 1, first)
            _run(h, third, 3 * n + 2, rerun)
            h.run_writes.save_verdicts(first, [{"key": "k", "verdict": "regression", "attempt": 1}])
            h.run_writes.save_verdicts(rerun, [{"key": "k", "verdict": "suspect", "attempt": 2,
                                     "detail": {"corroborate": asked}}])
            h.run_writes.save_verdicts(third, [{"key": "k", "verdict": "pass", "attempt": 3}])
        # As a file written before m005: no stage column, m005 (and m007) not applied.
        to_m007(h.conn)
        h.conn.execute("DROP VIEW verdicts")
        h.conn.execute("ALTER TABLE verdict_rows DROP COLUMN stage")
        h.conn.execute("ALTER TABLE verdict_rows DROP COLUMN ci_conf")
        h.conn.execute(f"CREATE VIEW verdicts AS {_VIEWS['verdicts']}")
        h.conn.execute("DELETE FROM _sqlite_migrations WHERE name IN "
                       "('m005_verdict_stage', 'm007_verdict_ci_conf')")
        h.conn.commit()
    with open_history(path) as h:
        got = {r: h.report_reads.verdicts(r)[0]["stage"] for r in "abcdef"}
    assert got == {"a": "first", "b": "rerun", "c": "corroborate",
                   "d": "first", "e": "rerun", "f": "reruns"}


def test_a_confirm_rerun_never_announces_an_improvement():
    # A first attempt tripped high and its rerun landed far on the good side: the
    # rerun re-tests "worse" only, so it clears the trip; "better" was never its test.
    h = np.random.default_rng(0).normal(100, 1, 40)
    for rerun in (97.0, 93.0, 90.0):
        for another in (False, True):
            assert stats.confirm(h, rerun, sign=1, first=103.0, another=another)[1] == "pass"
