"""Shard count from the budget, LPT placement, and the over-budget error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ci_register.planning.schedule import ScheduleError, plan_schedule

REPO = Path(__file__).resolve().parents[1]


def items(*durs: float) -> list[tuple[str, float]]:
    return [(f"suites/test_{i:02d}.py", d) for i, d in enumerate(durs)]


def test_count_from_budget_with_lpt_margin():
    # 10 x 100 s on a 300 s budget: ceil(1000 / 225) = 5 shards of 200 s.
    s = plan_schedule(items(*[100.0] * 10), 300)
    assert s.count == 5 and not s.fixed
    assert s.makespan == 200.0 and s.bound == 200.0 and s.gap == 0.0
    assert "from budget 300 s" in s.describe()


def test_fixed_count_wins():
    s = plan_schedule(items(*[100.0] * 10), 300, fixed=2)
    assert s.count == 2 and s.fixed and s.makespan == 500.0
    assert "fixed by the catalog" in s.describe()


def test_never_more_shards_than_files_and_one_for_nothing():
    assert plan_schedule(items(50.0), 10.0 + 50.0).count == 1
    assert plan_schedule([], 600).count == 1


def test_grows_until_every_shard_fits_the_budget():
    # ceil(367 / 75) = 5 shards, but LPT then puts 52 + 50 together: 102 s > 100 s.
    s = plan_schedule(items(69.0, 68.0, 68.0, 60.0, 52.0, 50.0), 100)
    assert s.count == 6 and s.makespan == 69.0


def test_file_longer_than_budget_is_an_error_naming_it():
    its = items(10.0, 4000.0, 5000.0)
    where = {p: f"{p}:7" for p, _ in its}
    with pytest.raises(ScheduleError) as e:
        plan_schedule(its, 3600, where=where, suite="stage-c")
    msg = str(e.value)
    assert msg.startswith("suites/test_02.py:7: expected 5000 s exceeds suite 'stage-c'")
    assert "(and 1 more)" in msg and "shard_budget_s" in msg and "\n" not in msg


def test_deterministic_plan():
    its = items(*[float(x % 7 + 1) for x in range(50)])
    a, b = plan_schedule(its, 20), plan_schedule(list(reversed(its)), 20)
    assert [s.items for s in a.shards] == [s.items for s in b.shards]


def write_tree(tmp: Path, budget: int, est: list[int]) -> Path:
    (tmp / "suites").mkdir()
    (tmp / "suites" / "catalog.toml").write_text(
        f'[suites.cpu]\nbackend = "cpu"\ndescription = "cpu"\nschedule = "per-commit"\nshard_budget_s = {budget}\n')
    for i, t in enumerate(est):
        (tmp / "suites" / f"test_{i}.py").write_text(f'register_cpu_ci(est_time={t}, suite="cpu")\ndef test_x():\n    pass\n')
    return tmp


def dry(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--dry-run", *args, "--history", "none.db"],
                          cwd=tmp, capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_dry_run_without_partition_shows_the_budget_plan(tmp_path):
    r = dry(write_tree(tmp_path, 100, [60, 60, 60, 30]))
    assert r.returncode == 0, r.stderr
    assert "3 shard(s) from budget 100 s" in r.stdout
    assert "shard 3/3" in r.stdout and "<- this shard" not in r.stdout
    # 60 | 60 | 60 + 30: no plan on 3 shards beats max(210 / 3, 60) = 70 s.
    assert "makespan 90 s; lower bound max(total/shards, longest) 70 s (+28.6%)" in r.stdout


def test_dry_run_with_partition_keeps_its_count(tmp_path):
    r = dry(write_tree(tmp_path, 100, [60, 60, 60, 30]), "--partition", "1/2")
    assert r.returncode == 0, r.stderr
    assert "shard 2/2" in r.stdout and "<- this shard" in r.stdout and "from budget" not in r.stdout


def test_dry_run_over_budget_exits_2(tmp_path):
    r = dry(write_tree(tmp_path, 100, [60, 150]))
    assert r.returncode == 2
    assert "error: suites/test_1.py:1: expected 150 s exceeds suite 'cpu'" in r.stderr
