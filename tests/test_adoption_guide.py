"""A fresh SGLang-shaped repository adopts the tool by following docs/adopting.md word
for word: every fenced command of the guide runs, and its noxfile is the guide's own.

The path through the guide: Install; "An SGLang-shaped tree" (the catalog from
test/run_suite.py, the listing, the guide's noxfile, a real CPU run recorded into
.gates/local-history.db, its report, a selection from a diff); the common steps with
SUITE the SGLang CPU suite; the commands of any other section, as written; the GitHub
Actions commands (matrix, one shard run as its entry says, merge, the step summary). The first suite run builds a real nox venv (the
tool and the repository's own package installed into it, offline); later nox commands
reuse it with ``--no-install``. Install lines run as ``pip install --dry-run`` against a
git clone of this checkout (GIT_URL, COMMIT) and the checkout itself.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
from doc_commands import (
    REPO,
    SGLANG_TREE,
    DocCommand,
    Shell,
    copy_checkout,
    fenced_code,
    fenced_commands,
    write_tree,
)

GUIDE = REPO / "docs" / "adopting.md"
SUITE = "base-a-test-cpu"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def _git_repo(root: Path) -> str:
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], [*GIT, "commit", "-qm", "initial"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True, timeout=120)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


def _section(commands: list[DocCommand], text: str, title: str) -> list[DocCommand]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines, 1) if line == f"## {title}")
    end = next((i for i, line in enumerate(lines, 1) if i > start and line.startswith("## ")), len(lines) + 1)
    return [c for c in commands if start < c.line < end]


@pytest.fixture(scope="module")
def adopted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("adopt")
    tool = copy_checkout(tmp / "gpu-ci-gates")
    commit = _git_repo(tool)
    repo = write_tree(tmp / "sglang", SGLANG_TREE)
    (repo / ".gitignore").write_text("/.gates/\n/.nox/\n/results/\n")
    _git_repo(repo)
    # Offline: the session venv's pip installs without dependencies and without build
    # isolation; the venv's Python sees this Python's packages (its dependencies and
    # setuptools) through PYTHONPATH, after the tool's copy.
    offline = {"PIP_NO_DEPS": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_INDEX": "1"} if \
        importlib.util.find_spec("setuptools") else {}
    code = f"{tool}:{sysconfig.get_paths()['purelib']}"
    sh = Shell(repo, tool, **offline)
    sh.env["PYTHONPATH"] = code
    # file://localhost/...: older pips reject a file URL without a host in a requirement.
    subs = {"GIT_URL": f"file://localhost{tool}", "COMMIT": commit, "/path/to/gpu-ci-gates": str(tool)}
    return sh, repo, subs


def dry_pip(words: list[str], subs: dict[str, str]) -> str:
    """A documented ``pip install`` line as a dry run that builds what it names offline."""
    for k, v in subs.items():
        words = [w.replace(k, v) for w in words]
    return shlex.join([*words[:2], "--dry-run", "--no-deps", "--no-index", "--no-build-isolation", *words[2:]])


def nox_guide(words: str) -> str:
    """Nox commands after the first real run reuse its venv (``--no-install``)."""
    return words.replace("nox -", "nox --no-install -") if words.startswith("nox ") else words


def run(sh: Shell, cmd: DocCommand, text: str, *, rc: int = 0, **env: str) -> str:
    r = sh(text, timeout=600, **env)
    out = r.stdout + r.stderr
    assert r.returncode == rc, f"{cmd.where}: `{text}` exited {r.returncode} (want {rc}):\n{out[-3000:]}"
    return out


def test_an_sglang_shaped_repository_adopts_the_tool_by_the_guide(adopted):
    sh, repo, subs = adopted
    text = GUIDE.read_text()
    commands = fenced_commands(GUIDE)
    install, sglang = _section(commands, text, "Install"), _section(commands, text, "An SGLang-shaped tree")
    common, actions = _section(commands, text, "Common steps"), _section(commands, text, "GitHub Actions")
    planned = {id(c) for c in install + sglang + common + actions}
    other = [c for c in commands if id(c) not in planned]  # other sections: run as written

    for cmd in install:  # each line resolves and builds the package it names
        out = run(sh, cmd, dry_pip(cmd.words, subs))
        assert "Would install gpu-ci-gates" in out, out

    (noxfile,) = fenced_code(GUIDE, "python")  # the guide's noxfile, as written
    venv_built = False
    for cmd in sglang:
        words = " ".join(cmd.words)
        if words.startswith("nox") and not (repo / "noxfile.py").exists():
            (repo / "noxfile.py").write_text(noxfile)
        if words == f"nox -s {SUITE}":
            # The one real venv: the tool and this repository's sglang package go into it.
            out = run(sh, cmd, words)
            venv_built = True
            assert re.search(r"pip install .*gpu-ci-gates", out) and "-e ./python" in out, out
            assert "2 passed" in out and ".gates/local-history.db" in out, out
            continue
        out = run(sh, cmd, words.replace("nox -", "nox --no-install -"))
        if words.startswith("python -m ci_register sglang-catalog"):
            assert (repo / "ci" / "catalog.toml").is_file()
        elif words == "nox -l":
            selected = [line.split()[1] for line in out.splitlines() if line.startswith("* ")]
            assert selected == [SUITE], out  # a bare `nox` runs the CPU suite only
            assert re.search(r"- base-b-test-1-gpu-large \[cuda,1gpu,per-commit,gpu\]", out), out
        elif words.startswith("gate-report"):
            assert f"{SUITE} @ " in out and re.search(r"complete +2 +0 ", out), out  # 2 passed, 0 failed
        elif "--changed-files" in words:
            matrix = json.loads(out[out.index("{"):out.rindex("}") + 1])
            (entry,) = matrix["include"]
            assert entry["suite"] == SUITE and entry["files"] == 1, matrix
            assert "test/registered/cpu/test_utils.py" in out, out  # the selection says why
    assert venv_built

    for cmd in common:
        words = " ".join(cmd.words).replace("SUITE", SUITE)
        if "FILE" in words:
            words = words.replace("FILE", "python/sglang/srt/layers.py")
        out = run(sh, cmd, words.replace("nox -", "nox --no-install -"))
        if "--partition 1/2" in words:
            assert "1 passed" in out, out

    for cmd in other:
        run(sh, cmd, nox_guide(" ".join(cmd.words)))

    # GitHub Actions: the matrix job, one suite job as its entry says, the report job.
    env = {"EVENT": "push", "GITHUB_STEP_SUMMARY": str(repo / "summary.md")}
    for cmd in actions:
        words = " ".join(cmd.words).replace("$EVENT", "push").replace("$GITHUB_STEP_SUMMARY", env["GITHUB_STEP_SUMMARY"])
        for k, v in subs.items():
            words = words.replace(k, v)
        if words.startswith("pip install"):
            run(sh, cmd, dry_pip(cmd.words, subs))
            continue
        if words.startswith("gate-report merge"):
            entry = next(e for e in json.loads((repo / "matrix.json").read_text())["include"] if e["suite"] == SUITE)
            run(sh, cmd, entry["command"].replace("nox -", "nox --no-install -"),
                CI="true", CI_REGISTER_FINGERPRINT=entry["fingerprint"] or "cpu")
            shard = repo / "shards" / "1" / entry["history"]
            shard.parent.mkdir(parents=True)
            shutil.move(repo / entry["history"], shard)
        out = run(sh, cmd, words, **env)
        if words.startswith("gate-report merge"):
            assert "1 new run" in out, out
    summary = (repo / "summary.md").read_text()
    assert summary.startswith("## ") and SUITE in summary, summary


PIP_3_11 = "23.2.1"  # the pip Python 3.11 ships (ensurepip, 3.11.7): the oldest a user meets


def _bundled_pip() -> Path | None:
    import ensurepip  # noqa: PLC0415

    wheel = Path(ensurepip.__file__).parent / "_bundled" / f"pip-{PIP_3_11}-py3-none-any.whl"
    return wheel if wheel.is_file() else None


@pytest.mark.skipif(_bundled_pip() is None, reason=f"this Python does not bundle pip {PIP_3_11} (3.11.7 does)")
def test_every_documented_pip_line_works_with_python_311s_own_pip(tmp_path):
    """The guide's and the README's install lines, as written, with pip 23.2.1 (run from
    the wheel Python 3.11 bundles), as dry runs that resolve and build what they name:
    GIT_URL a clone on this machine, spelt as the guide says."""
    pip = _bundled_pip()
    tool = copy_checkout(tmp_path / "gpu-ci-gates")
    commit = _git_repo(tool)
    build = tmp_path / "build-backend"  # setuptools from this Python, nothing else of it
    build.mkdir()
    purelib = Path(sysconfig.get_paths()["purelib"])
    for name in ("setuptools", "pkg_resources", "_distutils_hack"):
        if (purelib / name).is_dir():
            (build / name).symlink_to(purelib / name)
    sh = Shell(tool, build)
    assert sh(f"python {pip}/pip --version").stdout.startswith(f"pip {PIP_3_11} ")
    # GIT_URL as the guide spells a clone on this machine.
    local = re.search(r"For a clone\s+on this machine write `(file://[^`]*)/abs/path/to/gpu-ci-gates`",
                      GUIDE.read_text())
    assert local, "the guide says how to write GIT_URL for a clone on this machine"
    subs = {"GIT_URL": f"{local.group(1)}{tool}", "COMMIT": commit, "/path/to/gpu-ci-gates": str(tool)}
    lines = [c for c in fenced_commands(GUIDE) + fenced_commands(REPO / "README.md")
             if c.words[:2] == ["pip", "install"] and c.words[2] != "nox"]  # nox: PyPI's
    assert len(lines) >= 6, [c.where for c in lines]
    for cmd in lines:
        line = dry_pip(cmd.words, subs).replace("pip install", f"python {pip}/pip install", 1)
        r = sh(line, timeout=300)
        assert r.returncode == 0 and "Would install gpu-ci-gates" in r.stdout, \
            f"{cmd.where}: `{line}` exited {r.returncode}:\n{(r.stdout + r.stderr)[-2000:]}"
    # Why the guide spells the host: the same line without it is no requirement to this pip.
    r = sh(f"python {pip}/pip install --dry-run --no-deps --no-index 'gpu-ci-gates @ git+file://{tool}@{commit}'")
    assert r.returncode != 0 and "Invalid requirement" in r.stderr, r.stdout + r.stderr
