"""The fenced commands of a Markdown file, and a shell to run them in a throwaway tree.

A fenced block with no language, ``bash`` or ``sh`` holds commands: one per line, a
line ending in ``\\`` or inside an open quote continues on the next, ``#`` starts a
comment. ``python``, ``toml`` and ``text`` blocks are code or output, not commands.
The tests of README.md and docs/adopting.md (tests/test_docs_commands.py,
tests/test_adoption_guide.py) run every command this module finds, so a doc that
drifts from the code fails CI.

Nox commands run with ``--no-venv --no-install``: the session's own commands run in
this test's Python (which has everything a session venv would get); what a session
installs into its venv is checked apart, as exact pip arguments
(tests/test_nox_sessions.py), and one real nox venv is built by the adoption test.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DocCommand", "SGLANG_TREE", "Shell", "console_scripts", "copy_checkout", "fenced_commands",
           "write_tree"]

REPO = Path(__file__).resolve().parents[1]
COMMAND_LANGS = ("", "bash", "sh")
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")


@dataclass(frozen=True)
class DocCommand:
    file: str
    line: int
    text: str  # as written, comments and continuation lines included

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def words(self) -> list[str]:
        """The command's words, comments dropped (shell quoting applied)."""
        lex = shlex.shlex(self.text.replace("\\\n", " "), posix=True)
        lex.whitespace_split = True
        lex.commenters = "#"
        return list(lex)


def _complete(text: str) -> bool:
    if text.rstrip().endswith("\\"):
        return False
    try:
        _ = DocCommand("", 0, text).words
    except ValueError:  # an open quote: the command goes on
        return False
    return True


def fenced_blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(first body line number, language, body lines without the fence's indent)."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, body, start = m.group("indent"), [], i + 2
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        out.append((start, m.group("lang"), body))
        i += 1
    return out


def fenced_commands(path: Path, *, root: Path = REPO) -> list[DocCommand]:
    """Every command of the command blocks of ``path``, in order."""
    rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    out: list[DocCommand] = []
    for start, lang, body in fenced_blocks(path.read_text(encoding="utf-8")):
        if lang not in COMMAND_LANGS:
            continue
        buf, first = "", start
        for n, raw in enumerate(body, start):
            if not buf and (not raw.strip() or raw.lstrip().startswith("#")):
                continue
            if not buf:
                first = n
            buf = f"{buf}\n{raw}" if buf else raw
            if _complete(buf):
                out.append(DocCommand(rel, first, buf))
                buf = ""
        assert not buf, f"{rel}:{first}: a command that never ends (open quote or trailing \\)"
    return out


def fenced_code(path: Path, lang: str) -> list[str]:
    """The bodies of the ``lang`` blocks of ``path`` (the noxfile a guide shows, say)."""
    return ["\n".join(body) + "\n" for _, la, body in fenced_blocks(path.read_text(encoding="utf-8"))
            if la == lang]


def copy_checkout(dest: Path) -> Path:
    """This checkout's files as git sees them (tracked and untracked-not-ignored, as
    they are on disk now) copied to ``dest``: a throwaway tree to run commands in."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True, timeout=60).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = REPO / rel
        if not src.is_file():
            continue  # deleted in the working tree
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    return dest


def write_tree(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# An SGLang-shaped repository: its package under python/, its suite lists in
# test/run_suite.py, registered tests under test/registered/ run as `python3 FILE`.
_MAIN = '\n\nif __name__ == "__main__":\n    unittest.main()\n'
SGLANG_TREE = {
    "python/pyproject.toml": ('[build-system]\nrequires = ["setuptools>=69"]\n'
                              'build-backend = "setuptools.build_meta"\n\n'
                              '[project]\nname = "sglang"\nversion = "0.0.1"\n\n'
                              '[tool.setuptools.packages.find]\ninclude = ["sglang*"]\n'),
    "python/sglang/__init__.py": "",
    "python/sglang/srt/__init__.py": "",
    "python/sglang/srt/utils.py": "def add(a, b):\n    return a + b\n",
    "python/sglang/srt/layers.py": "def scale(x):\n    return 2 * x\n",
    "test/run_suite.py": (
        "class HWBackend:\n    CPU = CUDA = AMD = 0\n\n"
        'PER_COMMIT_SUITES = {HWBackend.CPU: ["base-a-test-cpu"],\n'
        '                     HWBackend.CUDA: ["base-b-test-1-gpu-large"]}\n'
        'NIGHTLY_SUITES = {HWBackend.CUDA: ["nightly-8-gpu-h200"]}\n'
        "OTHER_SUITES = {HWBackend.AMD: []}\n"),
    "test/registered/cpu/test_utils.py": (
        "import unittest\n\nfrom sglang.srt.utils import add\nfrom sglang.test.ci.ci_register import register_cpu_ci\n\n"
        'register_cpu_ci(est_time=5, suite="base-a-test-cpu")\n\n\n'
        "class TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
        + _MAIN),
    "test/registered/cpu/test_layers.py": (
        "import unittest\n\nfrom sglang.srt.layers import scale\nfrom sglang.test.ci.ci_register import register_cpu_ci\n\n"
        'register_cpu_ci(est_time=3, suite="base-a-test-cpu")\n\n\n'
        "class TestScale(unittest.TestCase):\n    def test_scale(self):\n        self.assertEqual(scale(2), 4)\n"
        + _MAIN),
    "test/registered/kernels/test_decode.py": (
        "import unittest\n\nfrom sglang.test.ci.ci_register import register_cuda_ci\n\n"
        'register_cuda_ci(est_time=60, stage="base-b", runner_config="1-gpu-large")\n\n\n'
        "class TestDecode(unittest.TestCase):\n    def test_decode(self):\n        pass\n" + _MAIN),
}
# SGLang's own marker module (the files import it; collection never does).
SGLANG_TREE["python/sglang/test/__init__.py"] = ""
SGLANG_TREE["python/sglang/test/ci/__init__.py"] = ""
SGLANG_TREE["python/sglang/test/ci/ci_register.py"] = (
    "def register_cpu_ci(*args, **kwargs):\n    pass\n\n\n"
    "def register_cuda_ci(*args, **kwargs):\n    pass\n")


def console_scripts() -> dict[str, tuple[str, str]]:
    """pyproject.toml's ``[project.scripts]``: name -> (module, function)."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("scripts", {})
    return {name: tuple(target.split(":", 1)) for name, target in scripts.items()}


class Shell:
    """Runs commands with bash in ``cwd``: this checkout's code on PYTHONPATH (``code``),
    this Python's scripts first on PATH, outside CI (no ``CI``, no ``GATES_HISTORY``)."""

    def __init__(self, cwd: Path, code: Path, **env: str) -> None:
        self.cwd = cwd
        base = {k: v for k, v in os.environ.items()
                if k not in ("CI", "GATES_HISTORY", "PYTEST_ADDOPTS", "PYTHONPATH", "GITHUB_EVENT_NAME",
                             "CI_REGISTER_FINGERPRINT", "CI_REGISTER_FAKE_HARDWARE")
                and not k.startswith("PIP_")}
        bindir = Path(sys.executable).parent
        shims = cwd.parent / f".{cwd.name}-bin"
        for name, (module, func) in console_scripts().items():
            if not (bindir / name).is_file():
                # Where the package is not installed (its code on PYTHONPATH only), the
                # console script it would install: the same entry point.
                shims.mkdir(exist_ok=True)
                (shims / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "import sys; '
                                          f'from {module} import {func}; sys.exit({func}())" "$@"\n')
                (shims / name).chmod(0o755)
        path = [str(bindir), *([str(shims)] if shims.is_dir() else []), base.get("PATH", "")]
        base.update({"PATH": os.pathsep.join(path), "PYTHONPATH": str(code),
                     "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
                     "PIP_CONFIG_FILE": os.devnull, **env})
        self.env = base

    def __call__(self, command: str, *, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], cwd=self.cwd, capture_output=True, text=True,
                              timeout=timeout, env={**self.env, **env})


def nox_here(command: str) -> str:
    """``nox ARGS`` -> ``nox --no-venv --no-install ARGS`` (see the module's doc)."""
    return re.sub(r"(^|&& )nox ", r"\1nox --no-venv --no-install ", command)
