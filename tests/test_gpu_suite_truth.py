"""A GPU suite never passes by running nothing, and faked hardware is never a baseline.

With faked H200 hardware and the CPU-only torch of this venv, a GPU suite's tests
skip ("needs a CUDA GPU (found none)"): the session fails with one line saying why,
the stored run says so, and the run is untrusted (its hardware came from a fake).
"""

from __future__ import annotations

import json

import pytest
from test_runner import SUITES, run

from ci_register.running.pytest_plugin import suite_problem
from gates.store.open import open_history

H200 = {"CI_REGISTER_FAKE_HARDWARE": json.dumps({"gpus": [{"name": "NVIDIA H200",
                                                          "capability": [9, 0]}]})}
HEAD = 'from ci_register import register_cuda_ci\nregister_cuda_ci(est_time=5, suite="gpu1")\n'


@pytest.fixture
def tree(catalog_tree):
    return catalog_tree(SUITES, {})


def _run_row(tree):
    with open_history(tree / "h.db", create=False) as h:
        (row,) = h.backend.db.execute("SELECT status, exit_status, trusted, trust_reason FROM runs")
    return row


def test_a_gpu_suite_whose_tests_skip_for_want_of_a_gpu_stack_fails(tree):
    (tree / "suites" / "test_g.py").write_text(
        HEAD + "from suitelib.hardware import needs_cuda\n\n"
        "@needs_cuda\ndef test_kernel():\n    pass\n\n@needs_cuda\ndef test_other():\n    pass\n")
    r = run(tree, "gpu1", "--gate", "off", env=H200)
    assert r.returncode == 1, r.stdout + r.stderr
    line, = [x for x in r.stdout.splitlines() if x.startswith("ERROR suite gpu1")]
    assert "2 test(s) skipped because torch in" in line and "sees no GPU" in line
    assert "install a CUDA build of torch" in line
    status, exit_status, trusted, reason = _run_row(tree)
    assert (status, exit_status, trusted) == ("complete", 1, 0)
    assert "hardware faked" in reason


def test_a_gpu_suite_that_executes_no_test_fails(tree):
    (tree / "suites" / "test_g.py").write_text(
        HEAD + "import pytest\n\n@pytest.mark.skip(reason='later')\ndef test_kernel():\n    pass\n")
    r = run(tree, "gpu1", "--gate", "off", env=H200)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ERROR suite gpu1: no test executed (1 skipped: later); a suite that runs " \
           "nothing fails" in r.stdout


def test_a_gpu_suite_that_runs_its_tests_passes_but_faked_hardware_is_untrusted(tree):
    (tree / "suites" / "test_g.py").write_text(HEAD + "def test_g():\n    pass\n")
    r = run(tree, "gpu1", "--gate", "off", env=H200)
    assert r.returncode == 0, r.stdout + r.stderr
    status, exit_status, trusted, reason = _run_row(tree)
    assert (status, exit_status, trusted) == ("complete", 0, 0) and "faked" in reason


def test_suite_problem_rules():
    assert suite_problem("g", True, 3, ["needs 2 CUDA GPUs (found 1 x H200)"]) is None
    assert suite_problem("g", True, 3, ["needs a CUDA GPU (found none)"]) is not None
    assert "no test executed (none ran)" in suite_problem("g", True, 0, [])
    # A CPU suite: a GPU-stack skip among executed tests is its own business ...
    assert suite_problem("c", False, 3, ["needs a CUDA GPU (found none)"]) is None
    # ... but running nothing never passes, on any backend.
    assert "no test executed (2 skipped: no transformers)" in suite_problem(
        "c", False, 0, ["no transformers", "no transformers"])


CPU_HEAD = 'from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="cpu")\n'


def _cpu_session(catalog_tree, body: str):
    """(tree, completed run) of the cpu suite over one test file: CPU_HEAD + ``body``."""
    tree = catalog_tree(SUITES, {})
    (tree / "suites" / "test_c.py").write_text(CPU_HEAD + "import pytest\n\n" + body)
    return tree, run(tree, "cpu", "--gate", "off")


def test_a_cpu_suite_whose_every_test_skips_fails(catalog_tree):
    tree, r = _cpu_session(
        catalog_tree, "def test_a():\n    pytest.skip('no transformers')\n\n"
        "def test_b():\n    pytest.importorskip('no_such_module_here')\n")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ERROR suite cpu: no test executed (2 skipped: no transformers)" in r.stdout
    status, exit_status = _run_row(tree)[:2]
    assert (status, exit_status) == ("complete", 1)


def test_a_cpu_suite_with_one_executed_test_among_skips_passes(catalog_tree):
    _, r = _cpu_session(
        catalog_tree, "def test_a():\n    pytest.skip('later')\n\ndef test_b():\n    pass\n")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no test executed" not in r.stdout


def test_a_suite_whose_tests_error_in_setup_says_only_that(catalog_tree):
    _, r = _cpu_session(
        catalog_tree, "@pytest.fixture\ndef broken():\n    raise RuntimeError('setup')\n\n"
        "def test_a(broken):\n    pass\n")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no test executed" not in r.stdout
