"""benchmarks/bench_confirm_paths.py: its cells, steps and processes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_confirm_paths as B  # noqa: E402


def test_a_relative_step_is_caught_and_processes_do_not_change_the_figures():
    one = B.run([("gauss1", "")], [7, 8], 3, step=0.2, log=lambda *a, **k: None)
    two = B.run([("gauss1", "")], [7, 8], 3, step=0.2, jobs=2, log=lambda *a, **k: None)
    assert one == two
    for m in (1, 5):
        c = one[("gauss1", "", m)]
        assert c["n"] == 6 and c["det"] == 1.0 and sum(c["paths"].values()) == 6
        # A +20% step persists to run 59: every run after the first detection stays red.
        assert c["green"] == 0 and c["after"] >= 6 * 10, c


def test_bad_arguments_exit_2_with_one_line(capsys):
    assert B.main(["--models", "gauss2"]) == 2
    err = capsys.readouterr().err
    assert "unknown cell 'gauss2'" in err and "h200:fi_decode" in err and err.count("\n") == 1
    assert B.main(["--jobs", "0"]) == 2
    assert B.main(["--step", "-0.1"]) == 2
    assert B.main(["--seeds", "4x"]) == 2


def test_the_report_says_which_seeds_are_tuning_ones():
    res = {("gauss1", "", 1): {"sd": 0.01, "n": 2, "fa": 0.0, "det": 1.0, "paths": {1: 2},
                               "green": 1, "after": 36, "green_series": 1}}
    assert "; tuning seeds" in B.render(res, [100, 101], 1, 10.0, 1.0)
    assert "; verification seeds" in B.render(res, [400], 1, 10.0, 1.0)
    md = B.render(res, [400], 1, 10.0, 1.0, step=0.05, models="bimodal", jobs=4)
    assert "+5% change" in md and "--step 0.05 --models bimodal --jobs 4" in md
    assert "| 1 of 36 (1 series)" in md
