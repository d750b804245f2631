"""The report shows the interval that decided, at the level that decided (issue 27).

A verdict's interval is the deciding test's, widened to agree with its rank and
tail bounds and taken at the level the verdict was held to: it excludes 0
exactly where that test carried the verdict. These tests fail if the interval
shown is the plain t-interval, or one at another level.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from test_gate import add_run

from gates.gate import evaluate_run
from gates.model import stats
from gates.report.build import build_report
from gates.report.query import load_report_input, select_runs
from gates.report.render_html import render_html
from gates.report.render_md import md_text, render_md
from gates.report.render_text import change_parts, render_text
from gates.store.open import open_history


def _series(tmp_path: Path, base: np.ndarray, new: float, better: str = "lower"):
    """A history of one metric (5 identical samples a run: run summaries as given),
    the new run judged; returns (path, verdict)."""
    path = tmp_path / "history.db"
    with open_history(path) as h:
        for i, x in enumerate([*base, new]):
            rid = add_run(h, i, {"lat": ([float(x)] * 5, {"unit": "ms", "better": better})})
        [v] = evaluate_run(h, rid, mode="warn").verdicts
    return path, v


def _excludes_zero(v) -> bool:
    return v.ci_low is not None and (v.ci_low > 0 or v.ci_high < 0)


def test_a_level_the_baseline_produced_before_gets_an_interval_through_zero(tmp_path):
    # A second slow mode (a third of the runs 10% up): a new run there is ordinary.
    # Its t statistic is large (the plain t-interval excludes 0), but the rank bound
    # says p ~ 1/3: the verdict is pass, and so must the interval say.
    rng = np.random.default_rng(3)
    base = 1.0 + rng.normal(0, 0.005, 40)
    base[rng.choice(40, 13, replace=False)] += 0.10
    path, v = _series(tmp_path, base, 1.10)
    assert v.verdict == "pass" and v.ci_conf is not None
    assert not _excludes_zero(v)
    j = stats.judge_summaries(base, 1.10, sign=1)
    assert j.ci is not None and j.ci[0] > 0  # what the report showed before


@pytest.mark.parametrize("seed", range(6))
def test_interval_excludes_zero_exactly_where_the_verdict_is_a_change(tmp_path, seed):
    rng = np.random.default_rng(seed)
    base = 1.0 + rng.normal(0, 0.01, 40)
    for i, step in enumerate((0.0, 0.01, 0.02, 0.025, 0.03, 0.05, -0.03, -0.06)):
        path, v = _series(tmp_path / f"{i}", base, 1.0 + step + rng.normal(0, 0.01))
        # (the floor also holds a change back: only where it does not is the p alone)
        beyond_floor = v.rel_change is not None and abs(v.rel_change) > v.floor
        if v.verdict in ("regression", "improvement"):
            assert _excludes_zero(v), v
        elif beyond_floor:
            assert not _excludes_zero(v), v
        assert v.ci_conf is not None and 0.9 < v.ci_conf < 1.0


def test_confidence_is_the_level_that_decided(tmp_path):
    rng = np.random.default_rng(0)
    base = 1.0 + rng.normal(0, 0.01, 40)
    _, v = _series(tmp_path, base, 1.08)
    assert v.verdict == "regression" and v.method.endswith("/run")
    # One metric: q = p; the new run alone carries half of the level.
    level = stats.level_for(stats.judge_summaries(base, 1.08, sign=1), 0.02)
    assert v.ci_conf == pytest.approx(1 - 2 * level * 0.5)
    # Improvements are held to level x confirm_level: a tighter level, a wider interval;
    # read on a window (never one run alone), so two runs down come first.
    _, vi = _series(tmp_path / "i", np.r_[base, 0.921, 0.919], 0.92)
    assert vi.verdict == "improvement" and vi.ci_conf > v.ci_conf
    assert vi.method.endswith("/huber-3")
    assert vi.p_value is not None and vi.p_value < 1e-3  # its own p, not the bad side's
    # One fast run alone: a pass, however fast.
    _, v1 = _series(tmp_path / "one", base, 0.8)
    assert v1.verdict == "pass"


def test_renderers_show_the_stored_interval_and_the_change_against_the_row(tmp_path):
    rng = np.random.default_rng(1)
    base = 1.0 + rng.normal(0, 0.01, 40)
    path, v = _series(tmp_path, base, 1.08)
    with open_history(path, readonly=True) as h:
        runs, scope = select_runs(h)
        rep = build_report(load_report_input(h, runs, scope=scope))
    [row] = [r for r in rep.verdicts if r.key == "lat"]
    assert (row.ci_low, row.ci_high, row.ci_conf) == pytest.approx(
        (v.ci_low, v.ci_high, v.ci_conf))
    change, interval = change_parts(row)
    own = (row.new - row.baseline) / row.baseline
    assert change == f"{own * 100:+.1f}%"
    shown = f"[{v.ci_low * 100:+.1f}, {v.ci_high * 100:+.1f}]"
    # What decided: the new run alone, its change, its interval at the level that decided
    assert interval.startswith(f"run {v.rel_change * 100:+.1f}% {shown}")
    assert interval.endswith("%")
    for text, esc in ((render_text(rep), shown), (render_md(rep), md_text(shown)),
                      (render_html(rep), shown)):
        assert esc in text and "95% CI" not in text


def test_a_verdict_stored_without_its_level_shows_its_interval_as_it_was():
    from gates.report.build import VerdictRow

    row = VerdictRow(run_id="r", suite="s", fingerprint="f", key="k", nodeid=None,
                     verdict="pass", cls="pass", mode="enforce", baseline=1.0, new=1.1,
                     unit=None, better="lower", rel_change=0.09, ci_low=0.05, ci_high=0.13,
                     statistic=3.0, p_value=0.5, q_value=0.5, floor=0.01, attempt=1,
                     method="robust-t/huber-10")
    # The change is the row's own (1.0 -> 1.1): the stored +9% is the window's, named so
    assert change_parts(row) == ("+10.0%", "huber-10 +9.0% [+5.0, +13.0] 95%")


def test_a_stored_confidence_that_is_not_one_is_not_shown():
    from gates.report.build import _confidence

    assert _confidence(0.98) == 0.98
    assert [_confidence(x) for x in (5.0, 0.0, -1, "x", None, float("nan"))] == [None] * 6


@pytest.mark.parametrize("seed", range(4))
def test_the_quantile_tests_interval_is_the_shifts_it_still_finds(seed):
    # Inverting the exact rank test: a shift back by less than the bound still rejects,
    # by more it does not; the bound is above 0 exactly where the test rejects at all.
    from gates.model.robust import quantile_bound, quantile_p

    rng = np.random.default_rng(seed)
    base = rng.normal(0, 1, 37)
    base[rng.choice(37, 11, replace=False)] += 6.0  # a slow mode: a third of the runs
    for least in (-0.5, 0.3, 1.0, 2.5, 6.5, 9.0):
        new = np.array([least, *(least + rng.uniform(0, 2, 6))])
        for alpha in (0.0025, 0.0333, 0.2):
            b = quantile_bound(base, least, 7, alpha)
            p = float(quantile_p(base, new))
            if b is None:  # too few runs for any rejection at alpha
                assert math.comb(7, 7) > alpha * math.comb(44, 7)
                continue
            assert (b > 0) == (p <= alpha), (least, alpha, b, p)
            if b > 0:
                assert float(quantile_p(base, new - (b - 1e-9))) <= alpha
                assert float(quantile_p(base, new - (b + 1e-9))) > alpha


def test_a_one_sided_interval_is_read_on_its_bounded_end():
    from gates.model.verdicts import interval_contradicts

    # lower is better: a regression is a rise; its bound must be above 0
    assert not interval_contradicts("regression", "lower", 0.02, None)
    assert interval_contradicts("regression", "lower", -0.01, None)
    assert interval_contradicts("regression", "lower", None, 0.05)  # (-inf, +5%]: spans 0
    # higher is better: a regression is a fall
    assert not interval_contradicts("regression", "higher", None, -0.02)
    assert interval_contradicts("regression", "higher", None, 0.01)
    assert not interval_contradicts("regression", "lower", None, None)  # no interval
