"""The GitHub Actions matrix: entries per shard, nightly only on schedule, budget errors."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ci_register.planning.matrix import timeout_minutes

REPO = Path(__file__).resolve().parents[1]

SUITES = {
    "cpu": {"runner_labels": ["ubuntu-latest"], "shard_budget_s": 100},
    "gpu": {"backend": "cuda", "runner_labels": ["self-hosted", "h200"], "shard_budget_s": 1000,
            "shards": 2, "hardware": {"gpu_count": 1}},
    "night": {"backend": "cuda", "schedule": "nightly", "runner_labels": ["self-hosted", "gb300"],
              "shard_budget_s": 7200, "hardware": {"gpu_count": 4}},
    "empty": {"description": "nothing registered", "shard_budget_s": 100},
}


@pytest.fixture
def tree(catalog_tree) -> Path:
    files = {
        "test_c1.py": 'register_cpu_ci(est_time=60, suite="cpu")',
        "test_c2.py": 'register_cpu_ci(est_time=60, suite="cpu")',
        "test_c3.py": 'register_cpu_ci(est_time=60, suite="cpu", nightly=True)',
        "test_g1.py": 'register_cuda_ci(est_time=30, suite="gpu")\nregister_cuda_ci(est_time=300, suite="night")',
        "test_g2.py": 'register_cuda_ci(est_time=30, suite="gpu")',
    }
    return catalog_tree(SUITES, {f"suites/{name}": reg + "\ndef test_x():\n    pass\n"
                                 for name, reg in files.items()})


def matrix(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci_register", "matrix", *args], cwd=tree, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def entries(r: subprocess.CompletedProcess) -> dict[str, dict]:
    assert r.returncode == 0, r.stderr
    return {e["name"]: e for e in json.loads(r.stdout)["include"]}


def test_pull_request_matrix(tree):
    got = entries(matrix(tree, "--event", "pull_request"))
    # cpu: 2 x 60 s on a 100 s budget -> 2 shards; gpu fixed at 2; night and empty absent.
    assert sorted(got) == ["cpu 1/2", "cpu 2/2", "gpu 1/2", "gpu 2/2"]
    e = got["cpu 2/2"]
    assert e["suite"] == "cpu" and e["shard"] == 2 and e["shards"] == 2
    assert e["runs-on"] == ["ubuntu-latest"] and e["timeout-minutes"] == timeout_minutes(60, 100)
    assert e["history"] == "shard-cpu-2-of-2.db"
    assert shlex.split(e["command"]) == ["nox", "-s", "cpu", "--", "--partition", "2/2", "--history", "shard-cpu-2-of-2.db"]
    assert got["gpu 1/2"]["runs-on"] == ["self-hosted", "h200"]


def test_schedule_adds_nightly_suites_and_files(tree):
    got = entries(matrix(tree, "--event", "schedule"))
    assert "night 1/1" in got and got["night 1/1"]["runs-on"] == ["self-hosted", "gb300"]
    assert "--nightly" not in got["night 1/1"]["command"]  # a nightly suite runs nightly files anyway
    cpu = [e for e in got.values() if e["suite"] == "cpu"]
    assert len(cpu) == 3 and all(e["command"].endswith("--nightly") for e in cpu)


def test_output_file_and_summary(tree):
    r = matrix(tree, "--event", "push", "--output", "m.json", "--suite", "gpu")
    assert r.returncode == 0 and r.stdout == ""
    data = json.loads((tree / "m.json").read_text())
    assert [e["name"] for e in data["include"]] == ["gpu 1/2", "gpu 2/2"]
    assert "gpu: 2 shard(s) fixed by the catalog" in r.stderr


def test_output_dash_is_stdout(tree):
    r = matrix(tree, "--event", "push", "--output", "-", "--suite", "gpu")
    assert r.returncode == 0, r.stderr
    assert [e["name"] for e in json.loads(r.stdout)["include"]] == ["gpu 1/2", "gpu 2/2"]
    assert not (tree / "-").exists()


def test_durations_from_history_change_the_shard_count(tree, history_factory):
    # Measured on the suite's hardware (the matrix job runs on a CPU box: "latest" fingerprint).
    history_factory([{"suites/test_c1.py": 10.0, "suites/test_c2.py": 10.0}] * 3,
                    path=tree / "history.db")
    got = entries(matrix(tree, "--event", "push"))
    assert [n for n in got if n.startswith("cpu")] == ["cpu 1/1"]
    assert got["cpu 1/1"]["fingerprint"] == "cpu" and got["gpu 1/2"]["fingerprint"] == ""


def test_file_over_budget_fails_the_matrix(tree):
    (tree / "suites" / "test_big.py").write_text('register_cpu_ci(est_time=500, suite="cpu")\ndef test_x():\n    pass\n')
    r = matrix(tree, "--event", "push")
    assert r.returncode == 2 and r.stdout == ""
    assert "error: suites/test_big.py:1: expected 500 s exceeds suite 'cpu'" in r.stderr


def test_bad_event_and_registration_errors_exit_2(tree):
    r = matrix(tree, "--event", "release")
    assert r.returncode == 2 and "--event 'release'" in r.stderr
    (tree / "suites" / "test_bad.py").write_text('register_cpu_ci(est_time=5, suite="nope")\ndef test_x():\n    pass\n')
    r = matrix(tree, "--event", "push")
    assert r.returncode == 2 and "unknown cpu suite 'nope'" in r.stderr


def test_timeout_minutes():
    assert timeout_minutes(0, 600) == 25  # budget + 15 min setup
    assert timeout_minutes(1800, 600) == 75  # twice the expected time + setup


def test_the_root_trees_history_is_read_once_wherever_the_command_runs(tree, history_factory, tmp_path):
    history_factory([{"suites/test_c1.py": 10.0, "suites/test_c2.py": 10.0}] * 3,
                    path=tree / "history.db")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # A history in the current folder that says the opposite (three slow runs): not read.
    history_factory([{"suites/test_c1.py": 90.0, "suites/test_c2.py": 90.0}] * 3,
                    path=elsewhere / "history.db")
    log = tmp_path / "readers.log"
    shim = tmp_path / "shim"
    (shim / "gates").mkdir(parents=True)
    # Count the reader processes: a sitecustomize that logs each `-m gates.store.durations`.
    (shim / "sitecustomize.py").write_text(
        "import sys\n"
        "if sys.argv and sys.argv[0].endswith('durations.py') or 'gates.store.durations' in ' '.join(sys.orig_argv):\n"
        f"    open({str(log)!r}, 'a').write(' '.join(sys.orig_argv) + '\\n')\n")
    r = subprocess.run([sys.executable, "-m", "ci_register", "matrix", "--event", "push", "--root", str(tree)],
                       cwd=elsewhere, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": f"{shim}:{REPO}", "PATH": "/usr/bin:/bin"})
    got = entries(r)
    assert [n for n in got if n.startswith("cpu")] == ["cpu 1/1"]  # the root's 10 s runs
    readers = log.read_text().splitlines()
    assert len(readers) == 1, readers  # one reader for every suite, not one per suite
    assert f"--history {tree / 'history.db'}" in readers[0]
    assert readers[0].count("--suite") == 2  # cpu and gpu (push runs no nightly suite)


def test_changed_files_alone_plan_a_pull_request(tree):
    # No --event: a change is a pull request's question (README: `nox -s matrix -- --changed-files F`).
    got = entries(matrix(tree, "--changed-files", "suites/test_c1.py"))
    assert sorted(got) == ["cpu 1/1"] and got["cpu 1/1"]["files"] == 1
    r = matrix(tree)
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: the matrix needs --event pull_request|push|schedule (or --changed-files/--base: "
        "a pull request's change)")
    r = subprocess.run([sys.executable, "-m", "ci_register", "matrix"], cwd=tree, capture_output=True, text=True,
                       timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "GITHUB_EVENT_NAME": "schedule"})
    assert "night 1/1" in entries(r)  # GitHub Actions' own event


# --------------------------------------------- in process: gates.commands.planner


def _both(cwd: Path, *args: str, pythonpath: str = str(REPO)) -> tuple[subprocess.CompletedProcess, ...]:
    """The matrix through ci_register (a reader process) and through gates' entry point
    (in process), with the same arguments."""
    env = {"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin"}
    return tuple(subprocess.run([sys.executable, "-m", module, "matrix", *args], cwd=cwd,
                                capture_output=True, text=True, timeout=120, env=env)
                 for module in ("ci_register", "gates.commands.planner"))


def test_the_planner_entry_reads_durations_in_process_with_the_same_output(
        tree, history_factory, tmp_path):
    history_factory([{"suites/test_c1.py": 10.0, "suites/test_c2.py": 10.0}] * 3,
                    path=tree / "history.db")
    log = tmp_path / "readers.log"
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(  # logs every reader process
        "import sys\n"
        "if 'gates.store.durations' in ' '.join(sys.orig_argv):\n"
        f"    open({str(log)!r}, 'a').write(' '.join(sys.orig_argv) + '\\n')\n")
    for event in ("push", "schedule"):
        by_process, in_process = _both(tmp_path, "--event", event, "--root", str(tree),
                                       pythonpath=f"{shim}:{REPO}")
        assert by_process.returncode == in_process.returncode == 0, in_process.stderr
        if event == "push":  # the measured 10 s runs, not est_time's 60 s: one shard
            assert [n for n in entries(in_process) if n.startswith("cpu")] == ["cpu 1/1"]
        assert (in_process.stdout, in_process.stderr) == (by_process.stdout, by_process.stderr)
    assert len(log.read_text().splitlines()) == 2  # ci_register's two; none in process


def test_the_planner_entry_warns_as_the_reader_process_does(tree):
    (tree / "history.db").write_text("not a database\n")
    by_process, in_process = _both(tree, "--event", "push", "--root", str(tree))
    assert by_process.returncode == in_process.returncode == 0
    assert "warning: " in in_process.stderr and "history.db" in in_process.stderr
    assert (in_process.stdout, in_process.stderr) == (by_process.stdout, by_process.stderr)


def test_the_repository_matrix_is_the_same_in_process():
    for event in ("push", "schedule"):
        by_process, in_process = _both(REPO, "--event", event, "--root", str(REPO))
        assert by_process.returncode == in_process.returncode == 0, in_process.stderr
        assert (in_process.stdout, in_process.stderr) == (by_process.stdout, by_process.stderr)
        assert json.loads(in_process.stdout)["include"]
