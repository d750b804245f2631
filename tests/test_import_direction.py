"""The package arrows point one way: gates may use ci_register, never the reverse.

`ci_register` owns hardware detection and the fingerprint; it reaches the gate,
the pytest plugin and the history's durations only through processes
(``python -m gates.gate``, ``-p gates.plugin``, ``python -m gates.durations``).
"""

from __future__ import annotations

import ast
from pathlib import Path

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
    mod.write_text("def f():\n    from gates.history import History\n    import gates\n")
    assert _imported(mod) == {"gates"}


def test_gates_uses_ci_register_for_the_machine_model():
    # The one machine model: the record's hardware and fingerprint come from ci_register.
    assert "ci_register" in _imported(ROOT / "gates" / "provenance.py")
    text = (ROOT / "gates" / "provenance.py").read_text(encoding="utf-8")
    assert "nvidia-smi" not in text and "def fingerprint_key" not in text
