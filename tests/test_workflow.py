"""The CI workflow (.github/workflows/ci.yml) follows the snapshot flow: one cached main
history, a small baseline snapshot for the shards, small per-shard artifacts, and a
concurrency group that keeps a nightly queued behind a push."""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "ci.yml"


@pytest.fixture(scope="module")
def wf() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _steps(job: dict, uses: str) -> list[dict]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith(uses)]


def _run(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) for s in job["steps"])


def test_concurrency_is_keyed_by_event_and_cancels_only_pull_requests(wf):
    group = wf["concurrency"]["group"]
    assert "github.event_name" in group and "github.ref" in group
    assert wf["concurrency"]["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    # One report job at a time writes main's history; a waiting one is not cancelled.
    report = wf["jobs"]["report"]["concurrency"]
    assert report["cancel-in-progress"] is False and "github.ref" in report["group"]


def test_one_main_history_is_restored_and_saved_under_one_key_prefix(wf):
    jobs = wf["jobs"]
    for name in ("matrix", "report"):
        [restore] = _steps(jobs[name], "actions/cache/restore")
        assert restore["with"]["path"] == "history.db"
        assert restore["with"]["restore-keys"] == "history-main-"
        assert restore["with"]["key"] == "history-main-${{ github.run_id }}"
    [save] = _steps(jobs["report"], "actions/cache/save")
    assert save["with"]["key"] == "history-main-${{ github.run_id }}"
    assert "github.event_name != 'pull_request'" in save["if"]
    assert "refs/heads/main" in save["if"] and "always()" in save["if"]
    # Saved after the merge, so the next run's restore holds this run's results.
    names = [s.get("name", "") for s in jobs["report"]["steps"]]
    assert names.index("Merge the new runs") < names.index("Save main's history")
    # The bisect reads the history the report job saved, from the cache, and bisects on
    # a snapshot of it; the bisection row goes back into the newest main history.
    [bisect] = _steps(jobs["bisect"], "actions/cache/restore")
    assert bisect["with"]["key"] == "history-main-${{ github.run_id }}"
    assert "gate-report snapshot --history history.db" in _run(jobs["bisect"])
    assert "--history bisect.db" in _run(jobs["bisect"])
    keep = jobs["keep-bisect"]
    assert keep["concurrency"] == wf["jobs"]["report"]["concurrency"]
    [restore] = _steps(keep, "actions/cache/restore")
    [save] = _steps(keep, "actions/cache/save")
    assert restore["with"]["restore-keys"] == "history-main-"
    assert save["with"]["key"].startswith("history-main-")
    assert "gate-report merge bisect/bisect.db --into history.db" in _run(keep)


def test_shards_get_a_snapshot_and_upload_only_their_own_history(wf):
    jobs = wf["jobs"]
    assert "gate-report snapshot --history history.db" in _run(jobs["matrix"])
    [share] = _steps(jobs["matrix"], "actions/upload-artifact")
    assert share["with"]["name"] == "baseline-snapshot" and share["with"]["path"] == "snapshot.db"
    [fetch] = _steps(jobs["suite"], "actions/download-artifact")
    assert fetch["with"]["name"] == "baseline-snapshot"
    run = _run(jobs["suite"])
    assert "GATES_BASELINE=base/snapshot.db" in run and "cp base/" not in run
    [upload] = _steps(jobs["suite"], "actions/upload-artifact")
    assert upload["with"]["path"].splitlines() == ["${{ matrix.history }}", "results/"]
    # No job uploads the whole history as an artifact: it lives in the cache.
    for job in jobs.values():
        for step in _steps(job, "actions/upload-artifact"):
            assert "history.db" not in str(step["with"]["path"]).splitlines()
    assert "gate-report merge shards/*/shard-*.db --into history.db" in _run(jobs["report"])
