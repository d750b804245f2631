"""A tree that holds its own runner, as this repository does: copies of `ci_register` and
`gates` beside a one-suite catalog, run by `python -m ci_register run cpu` as a nox session
would start it.

``own_runner_tree(root, files)`` copies the two packages into ``root``, writes the catalog
(suite `cpu`, ``[select] runner = ["ci_register/**"]``) and then ``files`` (relative path ->
text). ``run_cpu_suite(root, **env)`` runs the suite once into ``root/h.db`` with the
gate off, ``PYTHONPATH`` set to ``root`` and the caller's variables added, and fails the
calling test with the runner's output unless it exits 0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ci_register.running.executed import DIR_ENV, ROOT_ENV

__all__ = ["CATALOG", "HISTORY", "own_runner_tree", "run_cpu_suite", "write"]

REPO = Path(__file__).resolve().parents[1]
HISTORY = "h.db"
CATALOG = ('[select]\nrunner = ["ci_register/**"]\n\n[suites.cpu]\nbackend = "cpu"\n'
           'description = "CPU"\nschedule = "per-commit"\nrunner_labels = ["ubuntu-latest"]\n'
           'shard_budget_s = 1800\n[suites.cpu.hardware]\ngpu_count = 0\n')
# Variables of the outer test run that would redirect the inner one: another plugin list,
# another history, the outer tracer's record folder and root.
_OUTER_ENV = ("PYTEST_PLUGINS", "GATES_HISTORY", DIR_ENV, ROOT_ENV)


def write(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def own_runner_tree(root: Path, files: Mapping[str, str]) -> Path:
    for pkg in ("ci_register", "gates"):
        shutil.copytree(REPO / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    write(root, {"suites/catalog.toml": CATALOG, **files})
    return root


def run_cpu_suite(root: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in _OUTER_ENV}
    full.update(PYTHONPATH=str(root), **env)
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--gate", "off", "--history",
                        str(root / HISTORY), "--root", str(root)], cwd=root, env=full, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r
