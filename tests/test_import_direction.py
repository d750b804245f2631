"""The package arrows point one way: gates may use ci_register, never the reverse;
inside each, the rooms import downwards only (pyproject.toml's import-linter contracts,
run by `nox -s lint`).

`ci_register` owns hardware detection and the fingerprint; it reaches the gate,
the pytest plugin and the history's durations only through processes
(``python -m gates.gate``, ``-p gates.record.plugin``, ``python -m gates.store.durations``).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imported(path: Path) -> set[str]:
    """Top-level package names a module imports anywhere (functions included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_ci_register_never_imports_gates():
    offenders = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "ci_register").rglob("*.py")
                       if "gates" in _imported(p))
    assert offenders == []


def test_the_checker_sees_imports_inside_functions(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from gates.store.history import History\n    import gates\n")
    assert _imported(mod) == {"gates"}


def test_gates_uses_ci_register_for_the_machine_model():
    # The one machine model: the record's hardware and fingerprint come from ci_register.
    assert "ci_register" in _imported(ROOT / "gates" / "store" / "provenance.py")
    text = (ROOT / "gates" / "store" / "provenance.py").read_text(encoding="utf-8")
    assert "nvidia-smi" not in text and "def fingerprint_key" not in text


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` over the tree at `root` (its pyproject.toml's contracts)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import "
                           "lint_imports_command; sys.exit(lint_imports_command())", "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture()
def tree_copy(tmp_path: Path) -> Path:
    for name in ("gates", "ci_register"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_rooms_keep_their_contracts():
    r = _lint_imports(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


@pytest.mark.parametrize("module, line, contract", [
    # the model reaching into the store: a layer crossed and the model no longer pure
    ("gates/model/robust.py", "from gates.store import history", "commands -> gate"),
    ("gates/model/judge.py", "import sqlite3", "gates.model is pure"),
    ("gates/report/owners.py", "from gates.commands import cli", "commands -> gate"),
    ("ci_register/planning/partition.py", "from ci_register.running import runner",
     "cli -> running"),
    ("ci_register/registered/markers.py", "import gates", "never imports gates"),
    # a cycle inside a room: the schema importing the history that imports it
    ("gates/store/schema.py", "from gates.store import history", "no cycles"),
])
def test_a_crossed_layer_fails_the_lint(tree_copy, module, line, contract):
    path = tree_copy / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # planted\n",
                    encoding="utf-8")
    r = _lint_imports(tree_copy)
    assert r.returncode == 1, r.stdout + r.stderr
    broken = [ln for ln in r.stdout.splitlines() if ln.rstrip().endswith("BROKEN")]
    assert any(contract in ln for ln in broken), r.stdout
