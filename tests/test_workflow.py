"""The CI workflow (.github/workflows/ci.yml) follows the snapshot flow: one cached main
history, a small baseline snapshot for the shards, small per-shard artifacts, and a
concurrency group that keeps a nightly queued behind a push."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml  # a dependency of the package (pyproject.toml)

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


FAKE_GH = r'''#!/usr/bin/env python3
"""gh, as the report job calls it: ``run list`` prints the fixture's run ids through
the step's event filter; ``run download ID --pattern P... --dir D`` copies that run's
artifacts (folders under $FAKE_GH_RUNS/ID) whose names match into D/<name>/."""
import fnmatch, json, os, shutil, sys
args = sys.argv[1:]
runs = os.environ["FAKE_GH_RUNS"]
def opt(name):
    return [args[i + 1] for i, a in enumerate(args) if a == name]
if args[:2] == ["run", "list"]:
    assert opt("--branch") == ["main"] and opt("--workflow") == ["ci.yml"], args
    assert opt("--jq") == ['.[] | select(.event != "pull_request") | .databaseId'], args
    for run in json.load(open(os.path.join(runs, "runs.json"))):
        if run["event"] != "pull_request":
            print(run["databaseId"])
elif args[:2] == ["run", "download"]:
    src = os.path.join(runs, args[2])
    names = [n for n in sorted(os.listdir(src)) if any(fnmatch.fnmatch(n, p) for p in opt("--pattern"))]
    if not names:
        sys.exit("no valid artifacts found to download")
    for n in names:
        shutil.copytree(os.path.join(src, n), os.path.join(opt("--dir")[0], n))
else:
    sys.exit(f"fake gh: unexpected {args}")
'''


def _step_script(job: dict, name: str) -> str:
    [step] = [s for s in job["steps"] if s.get("name") == name]
    return step["run"]


def test_a_replaced_report_jobs_runs_are_merged_by_the_next_one(wf, tmp_path):
    """GitHub replaces a pending report job when a newer one queues: the next saving
    report job merges the shards of main's earlier runs too (never a pull request's),
    and a file merge refuses costs only that file. The workflow's own two steps run."""
    import json
    import os
    import shutil
    import subprocess

    from gates.store.open import open_history
    from tests.history_seed import level_run

    rng = np.random.default_rng(0)
    runs, work = tmp_path / "runs", tmp_path / "work"

    def shard(path: Path, i: int) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open_history(path) as h:
            level_run(h, i, {"k": 1.0}, rng, run_id=f"run-{i}")
        return path

    main = shard(work / "history.db", 0)  # main's cached history holds run 0
    shard(work / "shards" / "shard-s-1-of-1" / "shard-s.db", 5)  # this run's own shard
    shard(runs / "101" / "shard-s-1-of-1" / "shard-s.db", 3)  # a replaced report job's
    shard(runs / "102" / "shard-s-1-of-1" / "shard-s.db", 4)  # a pull request's
    shutil.copytree(runs / "101", runs / "103")  # merged twice: once
    (runs / "104" / "shard-s-1-of-1").mkdir(parents=True)
    (runs / "104" / "shard-s-1-of-1" / "shard-s.db").write_text("not a history\n")
    (runs / "105").mkdir()  # a run without artifacts
    (runs / "runs.json").write_text(json.dumps(
        [{"databaseId": 200, "event": "push"}, {"databaseId": 101, "event": "push"},
         {"databaseId": 102, "event": "pull_request"}, {"databaseId": 103, "event": "schedule"},
         {"databaseId": 104, "event": "push"}, {"databaseId": 105, "event": "push"}]))
    (runs / "200").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    gate_report = Path(sys.executable).parent / "gate-report"
    if gate_report.exists():
        (bin_dir / "gate-report").symlink_to(gate_report)
    else:  # the package not installed: run its CLI through this interpreter
        (bin_dir / "gate-report").write_text(f"#!/bin/sh\nexec {sys.executable} -m gates.commands.cli \"$@\"\n")
        (bin_dir / "gate-report").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_GH_RUNS": str(runs),
           "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "200", "GH_TOKEN": "t",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    report = wf["jobs"]["report"]
    out = ""
    for name in ("Fetch what replaced report jobs left out", "Merge the new runs"):
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               _step_script(report, name)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        out += done.stdout + done.stderr
    with open_history(main) as h:
        assert sorted(r["run_id"] for r in h.report_reads.top_level_runs()) == ["run-0", "run-3", "run-5"]
    assert "::warning::not merged: earlier/104/shard-s-1-of-1/shard-s.db" in out
    assert "earlier/102" not in out and not (work / "earlier" / "102").exists()


def test_gpu_shards_carry_flashinfers_jit_cache_under_its_key(wf):
    steps = wf["jobs"]["suite"]["steps"]
    (key,) = [s for s in steps if s.get("id") == "jit"]
    assert "ubuntu-latest" in key["if"] and key["if"].startswith("${{ !contains(")  # GPU runners only
    assert key["run"].split("\n")[:2] == ["python -m suitelib.flashinfer_cache pin",
                                          'python -m suitelib.flashinfer_cache github >> "$GITHUB_OUTPUT"']
    assert key.get("continue-on-error") is True  # a runner without FlashInfer runs uncached
    (cache,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache@")]
    assert cache["with"] == {"path": "${{ steps.jit.outputs.path }}", "key": "${{ steps.jit.outputs.key }}"}
    assert cache["if"] == "steps.jit.outputs.key != ''"
    # Restored (and pinned) before the suite runs.
    names = [s.get("name", "") for s in steps]
    assert names.index(cache["name"]) < next(i for i, n in enumerate(names) if n.startswith("Run shard"))


def test_a_failed_plan_fails_the_required_report_instead_of_skipping_it(wf):
    # GitHub counts a skipped job as passed on a required check: if the matrix job fails
    # (a broken catalog, an unreadable history), the report job must run and fail.
    report = wf["jobs"]["report"]
    cond = report["if"]
    assert "always()" in cond and "needs.matrix.result != 'success'" in cond
    assert "needs.matrix.outputs.any == 'true'" in cond
    first = report["steps"][0]
    assert first["if"] == "needs.matrix.result != 'success'"
    assert "exit 1" in first["run"] and "::error::" in first["run"]
    # The gate step's own check of the shards' result is still there.
    assert 'SUITE_RESULT" != "success"' in _run(report)


def _noxfile():
    sys.path.insert(0, str(WORKFLOW.parents[2]))
    try:
        import noxfile
    finally:
        sys.path.pop(0)
    return noxfile


def test_every_shipped_workflow_pins_each_action_by_full_commit_sha():
    # A tag moves (and `@v4` ran node20, which GitHub retires): a full commit SHA with its
    # release in a comment is what runs, and what the next bump reviews.
    workflows = _noxfile().shipped_workflows()
    assert WORKFLOW in workflows
    loose = []
    for path in workflows:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            uses = re.match(r"^\s*(?:- )?uses:\s*(\S+)(.*)$", line)
            if uses and not uses.group(1).startswith("./") and not (
                    re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses.group(1))
                    and re.fullmatch(r"\s+# v\d+\.\d+\.\d+", uses.group(2))):
                loose.append(f"{path.name}:{n}: {line.strip()}")
    assert not loose, "\n".join(loose)


def test_the_snapshot_step_names_each_planned_suite_once(wf, tmp_path):
    (step,) = [s for s in wf["jobs"]["matrix"]["steps"] if s.get("name") == "Write the baseline snapshot"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gate-report").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > args.txt\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\n[ "$2" = pip ] && exit 0\nexec {sys.executable} "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    (tmp_path / "history.db").write_text("")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    for include, want in (([{"suite": "cpu"}, {"suite": "base-b-1gpu"}, {"suite": "cpu"}],
                           ["--suite", "base-b-1gpu", "--suite", "cpu"]), ([], None)):
        (tmp_path / "matrix.json").write_text(json.dumps({"include": include}))
        (tmp_path / "args.txt").unlink(missing_ok=True)
        r = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        args = (tmp_path / "args.txt").read_text().split("\n")[:-1] if want else None
        assert args == (["snapshot", "--history", "history.db", *want, "--out", "snapshot.db"] if want else None)


def test_the_lint_session_runs_actionlint_over_every_shipped_workflow_and_fails_on_a_finding(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("ruff", "lint-imports"):  # the session's other steps: passing, not under test
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    found = tmp_path / "args.txt"
    (bin_dir / "actionlint").write_text(f'#!/bin/sh\n[ "$1" = -version ] && exit 0\nprintf "%s\\n" "$@" > {found}\n'
                                        'echo "x.yml:1:1: finding"\nexit 1\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    root = WORKFLOW.parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", ACTIONLINT=str(bin_dir / "actionlint"))
    r = subprocess.run([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "--no-venv", "--no-install",
                        "-s", "lint"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert found.read_text().split() == [str(p.relative_to(root)) for p in _noxfile().shipped_workflows()]
