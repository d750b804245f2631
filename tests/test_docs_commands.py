"""Every fenced command of README.md runs, in order, in a throwaway copy of this checkout
with a copy of its committed history: a README that drifts from the code fails here.

Commands run as written except where ``HOW`` says otherwise, each with its reason: nox
runs its sessions in this Python (``doc_commands.nox_here``), GPU sessions plan with
``--dry-run`` on faked hardware, and a few commands that take minutes (benchmarks) or
need what a test cannot have (a PostgreSQL server) have their arguments checked by the
program's own parser (``ARGCHECK``) instead. Generated doc sections are checked by
``tools/sync_docs.py --check``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from doc_commands import (
    REPO,
    SGLANG_TREE,
    DocCommand,
    Shell,
    console_scripts,
    copy_checkout,
    fenced_commands,
    nox_here,
    write_tree,
)

H200 = json.dumps({"vendor": "nvidia", "gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}]})
H200_4 = json.dumps({"vendor": "nvidia", "gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}] * 4})

# Parse a program's arguments with its own argparse parser, then stop: the command's
# program exists, imports and accepts exactly these arguments.
ARGCHECK = (
    "import argparse, runpy, sys\n"
    "def stop(self, args=None, namespace=None):\n"
    "    ns, rest = real(self, args, namespace)\n"
    "    if rest: self.error('unrecognized arguments: ' + ' '.join(rest))\n"
    "    print('arguments ok:', self.prog); raise SystemExit(0)\n"
    "real = argparse.ArgumentParser.parse_known_args\n"
    "def known(self, args=None, namespace=None):\n"
    "    ns, rest = real(self, args, namespace)\n"
    "    print('arguments ok:', self.prog); raise SystemExit(0)\n"
    "argparse.ArgumentParser.parse_args = stop\n"
    "argparse.ArgumentParser.parse_known_args = known\n"
    "target, sys.argv = sys.argv[1], sys.argv[1:]\n"
    "runpy.run_module(target[3:], run_name='__main__', alter_sys=True) if target.startswith('-m:') "
    "else runpy.run_path(target, run_name='__main__')\n"
)


def argcheck(command: str) -> str:
    """``python X.py ARGS`` / ``gate-report ARGS`` -> the same arguments, parsed only."""
    words = command.split(None, 1)
    if words[0] == "python":
        prog, rest = words[1].split(None, 1)
    else:  # a console script: its module
        prog, rest = f"-m:{console_scripts()[words[0]][0]}", words[1]
    return f'python -c "$ARGCHECK" {prog} {rest}'


@dataclass(frozen=True)
class How:
    run: str | None = None  # the command to run instead ({} is the doc's command)
    rc: int = 0
    out: str = ""  # a regex the output must match
    env: tuple[tuple[str, str], ...] = ()
    setup: str = ""  # shell run first (what the doc's reader has at that point)
    why: str = ""


# Keyed by the start of the command as written (first match wins); default: run as is, exit 0.
HOW: list[tuple[str, How]] = [
    ("pip install nox && nox -s tests", How(run="nox -s tests -- tests/test_catalog.py",
                                            out=r"passed",
                                            why="the whole suite is this test's caller; one file shows the session works")),
    ("pip install nox && ", How(run="{}", why="nox is installed; the rest runs")),
    ("pip install -e", How(run="pip install --dry-run --no-deps --no-build-isolation --no-index {rest}",
                           out=r"Would install gpu-ci-gates",
                           why="resolves and builds the package's metadata; installs nothing")),
    ("python -m ci_register sglang-catalog ../sglang", How(
        out=r"wrote", why="../sglang is a small SGLang-shaped tree beside the copy")),
    ("python -m ci_register list --root ../sglang", How(out=r'"base-a-test-cpu"')),
    ("nox -s stage-c-4gpu", How(run="{} --dry-run", env=(("CI_REGISTER_FAKE_HARDWARE", H200_4),),
                                out=r"shard 2/3", why="a GPU suite: the plan only, on four faked H200s")),
    ("nox -s base-b-1gpu -- --dry-run", How(env=(("CI_REGISTER_FAKE_HARDWARE", H200),), out=r"base-b-1gpu")),
    ("nox -s base-b-1gpu", How(run="{} -- --dry-run", env=(("CI_REGISTER_FAKE_HARDWARE", H200),),
                               out=r"base-b-1gpu", why="a GPU suite: the plan only, on a faked H200")),
    ("nox -s bench-gates", How(run="python benchmarks/bench_gates.py --help", out=r"usage",
                               why="minutes of simulation; the benchmark session's script answers")),
    ("python benchmarks/", How(run="argcheck", out=r"arguments ok", why="minutes of simulation")),
    ("gate-report ingest", How(run="argcheck", out=r"arguments ok", why="needs a PostgreSQL server")),
    ("gate-report --history history.db --suite base-b-1gpu --since 30d --format md > summary.md", How(
        rc=1, setup="rm -f summary.md", out=r"", why="the committed history's range holds regressions: exit 1")),
    ("gate-report --history history.db --run RUN_ID", How(out=r'"run_id"')),
    ("gate-report merge shard-*.db", How(setup="cp .gates/local-history.db shard-cpu-1-of-1.db",
                                         out=r"1 new run", why="the shard: the CPU run recorded above")),
    ("gate-report health --history history.db --suite base-b-1gpu", How(out=r"CI health of base-b-1gpu")),
    ("gate-report --history history.db --suite base-b-1gpu --format html", How(out=r"")),
    ("gate-report --history history.db  ", How(out=r"^cpu, serving-cpu @ ", why="the committed history's newest commit")),
    ("gate-report  ", How(out=r"^cpu @ [\s\S]*note: reading \.gates/local-history\.db",
                         why="after `nox -s cpu` outside CI: the run it just recorded, and which file")),
    ("nox -s rerun -- suites/kernels/test_flashinfer_decode.py::", How(
        run="{without --run}", out=r"timeout \d+ nox -s base-b-1gpu",
        why="--run would run a GPU suite; tests/test_rerun.py runs --run on a CPU suite")),
    ("nox -s rerun -- test_flashinfer_decode.py", How(out=r"expected \d+ s \(history")),
    ("nox -s est-time -- --check", How(out=r"measured registration\(s\), each within 30 s or 30%",
                                       why="the literals agree with the committed history")),
    ("python -m ci_register est-time --write", How(out=r"nothing to update")),
    ("nox -s matrix -- --event pull_request --base origin/main", How(
        setup="git init -q -b main . && git add -A && git -c user.name=t -c user.email=t@t commit -qm base "
              "&& git update-ref refs/remotes/origin/main HEAD && echo '# x' >> suites/conftest.py "
              "&& git -c user.name=t -c user.email=t@t commit -qam change",
        out=r'"include"', why="a repository with an origin/main one commit behind")),
    ("sqlite-utils", How(out=r".")),
]


def how(cmd: DocCommand) -> How:
    for prefix, h in HOW:
        if cmd.text.startswith(prefix):
            return h
    return How()


def resolve(cmd: DocCommand, h: How, subs: dict[str, str]) -> str:
    text = cmd.text
    if h.run == "argcheck":
        text = argcheck(" ".join(cmd.words))
    elif h.run:
        rest = " ".join(cmd.words[2:])
        text = (h.run.replace("{without --run}", " ".join(w for w in cmd.words if w != "--run"))
                .replace("{rest}", rest).replace("{}", text.split("#", 1)[0].strip()
                                                  if "\n" not in text else text))
        if text.startswith("pip install nox && "):
            text = text[len("pip install nox && "):]
    for key, value in subs.items():
        text = text.replace(key, value)
    return nox_here(text)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Shell, Path]:
    tmp = tmp_path_factory.mktemp("readme")
    repo = copy_checkout(tmp / "repo")
    write_tree(tmp / "sglang", SGLANG_TREE)
    return Shell(repo, repo, ARGCHECK=ARGCHECK), repo


def test_every_readme_command_runs(workspace):
    sh, repo = workspace
    commands = fenced_commands(REPO / "README.md")
    assert len(commands) > 40  # the extractor found the README's blocks
    with sqlite3.connect(repo / "history.db") as db:
        newest = db.execute("SELECT run_id, commit_sha FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
        old_commit = db.execute("SELECT commit_sha FROM runs ORDER BY started_at LIMIT 1").fetchone()[0]
    # The committed history's runs age: a window wide enough to reach them keeps the
    # command's point (a window) without a date in the README.
    subs = {"RUN_ID": newest[0], "abc1234": old_commit[:7], "--since 30d": "--since 3650d"}
    failed, took = [], []
    for cmd in commands:
        h = how(cmd)
        if h.setup:
            done = sh(h.setup)
            assert done.returncode == 0, f"{cmd.where}: setup failed: {done.stdout}{done.stderr}"
        text = resolve(cmd, h, subs)
        t0 = time.monotonic()
        r = sh(text, timeout=600, **dict(h.env))
        took.append((time.monotonic() - t0, cmd.where))
        out = r.stdout + r.stderr
        if r.returncode != h.rc or not re.search(h.out, out):
            failed.append(f"{cmd.where}: `{text}` exited {r.returncode} (want {h.rc}"
                          f"{', output matching ' + repr(h.out) if h.out else ''}):\n{out[-1500:]}")
    print("slowest:", ", ".join(f"{w} {t:.1f} s" for t, w in sorted(took, reverse=True)[:8]))
    assert not failed, "\n\n".join(failed)
    assert (repo / "summary.md").read_text().startswith("## \u274c ")  # the range's Markdown report
    # What the commands left behind: the HTML page with an ordinary file mode.
    page = repo / "report.html"
    assert page.read_text().lower().startswith("<!doctype html>")
    assert stat.S_IMODE(page.stat().st_mode) & 0o044 == 0o044  # readable by others, as a plain write


def test_generated_doc_sections_are_in_sync():
    r = subprocess.run([sys.executable, str(REPO / "tools" / "sync_docs.py"), "--check"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_the_extractor_reads_continuations_quotes_and_skips_output_blocks(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("x\n\n```\na --flag  # note\n# only a comment\nb \\\n  c\n```\n\n```text\nnot a command\n```\n\n"
                   "1. step\n\n   ```bash\n   sqlite-utils h.db \"select 1,\n       2\" --table\n   ```\n")
    cmds = fenced_commands(doc, root=tmp_path)
    assert [(c.line, c.words) for c in cmds] == [
        (4, ["a", "--flag"]), (6, ["b", "c"]), (17, ["sqlite-utils", "h.db", "select 1,\n    2", "--table"])]
