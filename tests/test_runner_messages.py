"""When pytest stops (exit 2), the runner says why and what ran, in one line."""

from __future__ import annotations

import pytest
from test_runner import OK, SUITES, run


@pytest.fixture
def tree(catalog_tree):
    return catalog_tree(SUITES, {})


def _error(r) -> str:
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error: suite cpu")]
    return line


def test_a_missing_module_at_collection_is_named(tree):
    (tree / "suites" / "test_bad.py").write_text(
        OK.format(t=5) + "import nosuchmod_xyz\n\ndef test_a():\n    pass\n")
    (tree / "suites" / "test_ok.py").write_text(OK.format(t=5) + "def test_ok():\n    pass\n")
    r = run(tree, "cpu", "--gate", "off")
    assert r.returncode == 2, r.stdout + r.stderr
    line = _error(r)
    assert ("pytest could not collect suites/test_bad.py: ModuleNotFoundError: No module "
            "named 'nosuchmod_xyz'; no test ran; install the missing module in") in line


def test_what_ran_before_pytest_stopped_is_said(tree):
    (tree / "suites" / "test_stop.py").write_text(
        OK.format(t=5) + "import pytest\n\ndef test_a():\n    pass\n\n"
        "def test_b():\n    pytest.exit('the GPU went away', returncode=2)\n")
    r = run(tree, "cpu", "--gate", "off")
    assert r.returncode == 2, r.stdout + r.stderr
    assert _error(r).endswith("pytest stopped (exit 2, interrupted); 2 test(s) ran and are "
                              "recorded")
