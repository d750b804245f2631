"""The surfaces benchmark itself: one cell whose chains go past the first rerun."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_surfaces import run_benchmark  # noqa: E402


def test_report_and_session_agree_on_heavy_tailed_step_series():
    cells, examples = run_benchmark(1, 0, models=["student_t"], effects=["step5"],
                                    log=lambda *a, **k: None)
    c = sum(cells.values(), Counter())
    assert c["sessions"] == 16 and c["failed"] >= 1
    assert sum(c[f"reruns={k}"] for k in (2, 3, 4)) >= 1  # chains past the first rerun
    assert c["exit mismatch"] == 0 and c["verdict mismatch"] == 0, examples
    assert c["old exit mismatch"] >= 1  # the reading before issue 38 got them wrong


def test_no_verdict_row_shows_an_interval_that_did_not_decide():
    # Bimodal baselines: the quantile test holds regressions whose t-interval spans 0
    # at the level that decided; such a row shows the quantile test's own interval (or
    # none), and every held row names its test, its p and the level it was held to.
    cells, examples = run_benchmark(1, 0, models=["bimodal"], effects=["step2"],
                                    log=lambda *a, **k: None)
    c = sum(cells.values(), Counter())
    assert c["rows"] == c["sessions"] == 16 and c["failed"] >= 1
    assert c["interval contradicts"] == 0, examples
    assert c["held rows"] >= 1 and c["statement missing"] == 0, examples
