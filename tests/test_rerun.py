"""Rerun: resolving specs the way collection does, and the commands it prints or runs."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ci_register.registered.catalog import load_catalog
from ci_register.registered.collect import collect
from ci_register.running.rerun import RerunError, make_targets, resolve, split_spec

REPO = Path(__file__).resolve().parents[1]

SUITES = {"cpu": {}, "cpu2": {"description": "cpu too"}, "night": {"schedule": "nightly"}}

REG = 'from ci_register import register_cpu_ci\n{regs}\ndef test_a():\n    pass\ndef test_b():\n    pass\n'


@pytest.fixture
def tree(catalog_tree) -> Path:
    files = {
        "kernels/test_decode.py": 'register_cpu_ci(est_time=40, suite="cpu")',
        "kernels/test_prefill.py": 'register_cpu_ci(est_time=20, suite="cpu")\nregister_cpu_ci(est_time=25, suite="cpu2")',
        "quant/test_decode.py": 'register_cpu_ci(est_time=10, suite="cpu2")',
        "quant/test_off.py": 'register_cpu_ci(est_time=10, suite="cpu", disabled="flaky on driver 580")',
        "quant/test_late.py": 'register_cpu_ci(est_time=10, suite="cpu", nightly=True)',
    }
    texts = {f"suites/{rel}": REG.format(regs=regs) for rel, regs in files.items()}
    return catalog_tree(SUITES, {**texts, "suites/kernels/helper.py": "X = 1\n"})


def sel(tree: Path, spec: str, suite: str | None = None):
    col = collect(load_catalog(tree / "suites" / "catalog.toml"), base=tree)
    return resolve(spec, col, tree, suite)


def paths(s) -> list[tuple[str, str]]:
    return [(r.path, r.suite) for r in s.registrations]


def test_split_spec():
    assert split_spec("a/test_x.py::TestC::test_y[1]") == ("a/test_x.py", "TestC::test_y[1]")
    assert split_spec("test_x.py") == ("test_x.py", None)
    with pytest.raises(RerunError):
        split_spec("test_x.py::")


def test_path_forms_resolve_alike(tree):
    for spec in ("suites/kernels/test_decode.py", "kernels/test_decode.py", "./suites/kernels/test_decode.py",
                 str(tree / "suites/kernels/test_decode.py")):
        assert paths(sel(tree, spec)) == [("suites/kernels/test_decode.py", "cpu")], spec


def test_bare_name_unique_and_ambiguous(tree):
    assert paths(sel(tree, "test_prefill.py")) == [("suites/kernels/test_prefill.py", "cpu"), ("suites/kernels/test_prefill.py", "cpu2")]
    assert paths(sel(tree, "test_prefill")) == paths(sel(tree, "test_prefill.py"))
    with pytest.raises(RerunError, match="ambiguous, 2 files .*suites/kernels/test_decode.py, suites/quant/test_decode.py"):
        sel(tree, "test_decode.py")


def test_glob_and_folder(tree):
    assert {p for p, _ in paths(sel(tree, "suites/kernels/*"))} == {"suites/kernels/test_decode.py", "suites/kernels/test_prefill.py"}
    assert {p for p, _ in paths(sel(tree, "test_pre*"))} == {"suites/kernels/test_prefill.py"}
    s = sel(tree, "quant")  # disabled files in a folder are skipped, not fatal
    assert {p for p, _ in paths(s)} == {"suites/quant/test_decode.py", "suites/quant/test_late.py"}
    assert [r.path for r in s.skipped] == ["suites/quant/test_off.py"]


def test_disabled_file_is_refused_with_its_reason(tree):
    with pytest.raises(RerunError, match=r"suites/quant/test_off.py:2: disabled in suite 'cpu' \(flaky on driver 580\)"):
        sel(tree, "test_off.py")


def test_suite_picks_one_and_wrong_suite_says_where(tree):
    assert paths(sel(tree, "test_prefill.py", "cpu2")) == [("suites/kernels/test_prefill.py", "cpu2")]
    with pytest.raises(RerunError, match="not registered to suite 'night'; registered to: cpu, cpu2"):
        sel(tree, "test_prefill.py", "night")


def test_nothing_matches_and_not_a_test_file(tree):
    with pytest.raises(RerunError, match="no test file of that name"):
        sel(tree, "test_nope.py")
    with pytest.raises(RerunError, match="not a test file the catalog collects"):
        sel(tree, "suites/kernels/helper.py")
    with pytest.raises(RerunError, match="no such file or folder"):
        sel(tree, "suites/nope/test_x.py")
    with pytest.raises(RerunError, match="needs exactly one file"):
        sel(tree, "kernels::test_a")


def test_targets_fan_out_with_node_ids_and_timeouts(tree):
    s = sel(tree, "test_prefill.py::test_b")
    ts = make_targets(s, {("cpu", "suites/kernels/test_prefill.py"): 100.0})
    assert [t.suite for t in ts] == ["cpu", "cpu2"]
    assert ts[0].files == ["suites/kernels/test_prefill.py::test_b"]
    assert ts[0].timeout_s == int(2 * 100 + 60 + 300) and ts[1].timeout_s == int(2 * 25 + 60 + 300)
    assert shlex.split(ts[0].command()) == ["timeout", "560", "nox", "-s", "cpu", "--", "--file", "suites/kernels/test_prefill.py::test_b"]
    late = make_targets(sel(tree, "test_late.py"), {})
    assert late[0].args() == ["--file", "suites/quant/test_late.py", "--nightly"]


def cli(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci_register", "rerun", *args, "--history", "h.db"], cwd=tree,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_cli_prints_one_command_per_suite(tree):
    r = cli(tree, "test_prefill.py")
    assert r.returncode == 0, r.stderr
    assert "registered to 2 suites" in r.stdout
    assert "timeout 400 nox -s cpu -- --file suites/kernels/test_prefill.py --history h.db" in r.stdout
    assert "nox -s cpu2 -- --file suites/kernels/test_prefill.py --history h.db" in r.stdout


def test_cli_errors_exit_2(tree):
    r = cli(tree, "test_prefill.py::test_zz[1]")
    assert r.returncode == 2 and "no test 'test_zz' at top level; known: test_a, test_b" in r.stderr
    r = cli(tree, "test_decode.py")
    assert r.returncode == 2 and r.stderr.startswith("error: test_decode.py: ambiguous")
    r = cli(tree, "test_off.py")
    assert r.returncode == 2 and "flaky on driver 580" in r.stderr


def test_cli_runs_exactly_the_named_test(tree):
    r = cli(tree, "kernels/test_prefill.py::test_b", "--suite", "cpu", "--run", "--no-nox", "--gate", "off")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "suites/kernels/test_prefill.py::test_b" in r.stdout and "1 passed" in r.stdout


def test_a_rerun_killed_by_a_signal_is_never_a_pass(tmp_path):
    # proc.wait() reads -9 for SIGKILL (an OOM kill), and max(0, -9) made the rerun exit 0.
    from ci_register.running.rerun import execute  # noqa: PLC0415

    assert execute(["sh", "-c", "kill -KILL $$"], 30, tmp_path) == 137
    assert execute(["sh", "-c", "exit 2"], 30, tmp_path) == 2
