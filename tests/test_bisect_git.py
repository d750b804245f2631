"""End to end on real git and pytest: a generated repository whose commit 3 of 4 makes a
CPU-timed test twice as slow; `gate-report bisect` names it and stores the evidence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import make_repo

from gates.bisect_git import BisectInputError, candidates
from gates.commands.cli import main as cli
from gates.store.open import open_history

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str], Path]:
    path = tmp_path_factory.mktemp("gen") / "repo"
    shas = make_repo(path, commits=4, culprit=3, slowdown=1.0)
    db = path.parent / "history.db"
    # One recorded run at the bad commit: the history knows which test records work_rel.
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--gates-suite", "cpu-perf", "--gates-history", str(db)],
                         cwd=path, env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return path, shas, db


def test_candidates_follow_first_parent_from_good_to_bad(repo):
    path, shas, _ = repo
    assert candidates(path, shas[0][:8], "HEAD") == shas
    with pytest.raises(BisectInputError, match="not an ancestor"):
        candidates(path, shas[-1], shas[0])
    with pytest.raises(BisectInputError, match="failed"):
        candidates(path, "nosuchref", "HEAD")


def test_bisect_names_the_slower_commit_and_stores_evidence(repo, capsys):
    path, shas, db = repo
    rc = cli(["bisect", "work_rel", "--good", shas[0], "--bad", shas[-1], "--repo", str(path),
              "--history", str(db), "--calib", "6", "--reps", "1", "--max-reps", "8", "--verify", "6"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert f"bisect work_rel: culprit {shas[3][:12]}" in out.out
    assert "test executions of test_work.py::test_work" in out.out
    with open_history(db) as h:
        [row] = h.report_reads.bisects("work_rel")
    assert row["outcome"] == "culprit" and row["culprit"] == shas[3]
    assert row["good"] == shas[0] and row["bad"] == shas[-1] and row["executions"] > 8
    classes = {e["commit"]: e["class"] for e in row["evidence"]["candidates"]}
    assert classes[shas[3]] == "bad" and all(
        classes[s] == "good" for s in shas[:3] if s in classes)
    # Worktrees are gone afterwards.
    listed = subprocess.run(["git", "-C", str(path), "worktree", "list"], capture_output=True,
                            text=True, check=True).stdout.strip().splitlines()
    assert len(listed) == 1


def test_bisect_of_an_unknown_key_is_a_usage_error(repo, capsys):
    path, shas, db = repo
    assert cli(["bisect", "nope", "--good", shas[0], "--bad", shas[-1], "--repo", str(path),
                "--history", str(db)]) == 2
    assert "no test recorded 'nope'" in capsys.readouterr().err


def test_ci_bisects_a_confirmed_regression_on_main_with_its_own_budget():
    import yaml

    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())["jobs"]
    job = jobs["bisect"]
    assert job["timeout-minutes"] <= 120 and "needs.report.outputs.bisect" in job["if"]
    run = " ".join(str(step.get("run", "")) for step in job["steps"])
    assert "nox -s bisect -- " in run and '--good "$good" --bad "$bad"' in run
    assert any(step.get("with", {}).get("fetch-depth") == 0 for step in job["steps"])
    after = next(s for s in jobs["report"]["steps"] if s.get("id") == "after")
    assert "refs/heads/main" in after["if"] and "notify --webhook" in after["run"]
    assert jobs["report"]["outputs"]["bisect"] == "${{ steps.after.outputs.bisect }}"
