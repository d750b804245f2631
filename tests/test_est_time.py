"""est_time upkeep: which literals drifted, and rewriting just those bytes."""

from __future__ import annotations

import json
import resource
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ci_register.planning.est_time import EstTimeError, drifted, literal_span, rewrite, suggest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("literal", "measured", "expected"), [
    (60, 300, True),    # 240 s and 80% off
    (60, 85, False),    # 25 s: under the absolute floor
    (3600, 3000, False),  # 600 s but only 20% of the figure
    (3600, 2000, True),
    (100, 60, True),    # over-estimates count too: they waste shards
])
def test_drifted_needs_both_30_s_and_30_percent(literal, measured, expected):
    assert drifted(literal, measured) is expected


def test_suggest_rounds_up_to_5_s():
    assert suggest(301.2) == 305 and suggest(300.0) == 300 and suggest(0.4) == 5


SOURCE = '''\
# -*- coding: utf-8 -*-
"""Décodage: a docstring with non-ASCII text."""
from ci_register import register_cuda_ci

register_cuda_ci(est_time=60, suite="a")  # keep this comment
register_cuda_ci(  # multi-line call
    suite="b",
    est_time = 1.5e2 ,
)
register_cuda_ci(120, "c", labels=["é"])
'''


def test_literal_span_and_byte_exact_rewrite():
    spans = [literal_span(SOURCE, 5, "register_cuda_ci"), literal_span(SOURCE, 6, "register_cuda_ci"),
             literal_span(SOURCE, 10, "register_cuda_ci")]
    data = SOURCE.replace("\n", "\r\n").encode()
    out = rewrite(data, zip(spans, ["300", "45", "9"], strict=True)).decode()
    assert out == SOURCE.replace("\n", "\r\n").replace("est_time=60,", "est_time=300,").replace(
        "est_time = 1.5e2 ,", "est_time = 45 ,").replace('(120, "c"', '(9, "c"')


def test_literal_span_errors():
    with pytest.raises(EstTimeError, match="x.py:4: no top-level register_cuda_ci"):
        literal_span(SOURCE, 4, "register_cuda_ci", "x.py")
    with pytest.raises(EstTimeError, match="not a plain number literal"):
        literal_span("register_cuda_ci(est_time=+60, suite='a')\n", 1, "register_cuda_ci")


SUITES = {"cpu": {"shard_budget_s": 3600}}


@pytest.fixture
def make_tree(catalog_tree, history_factory):
    """make() -> a tree with one cpu suite: test_slow (60 s literal, ~292 s measured),
    test_ok (100 s, 110 s: within the rule) and test_new (too few runs), and its history."""

    def make(suites=SUITES) -> Path:
        tree = catalog_tree(suites, {
            "suites/test_slow.py": 'from ci_register import register_cpu_ci\n\nregister_cpu_ci(est_time=60, suite="cpu")  # measured? see history\ndef test_x():\n    pass\n',
            "suites/test_ok.py": 'register_cpu_ci(est_time=100, suite="cpu")\ndef test_x():\n    pass\n',
            "suites/test_new.py": 'register_cpu_ci(est_time=5, suite="cpu")\ndef test_x():\n    pass\n'})
        history_factory([{"suites/test_slow.py": 290.0 + i, "suites/test_ok.py": 110.0}
                         for i in range(5)])
        history_factory([{"suites/test_new.py": 500.0}] * 2, start=50)  # too few runs
        return tree

    return make


def est(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci_register", "est-time", *args], cwd=tree, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_check_then_write_then_clean(make_tree, tmp_path):
    tree = make_tree()
    before_ok = (tree / "suites" / "test_ok.py").read_text()
    r = est(tree, "--check")
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "suites/test_slow.py:3: est_time 60 s, measured 294 s (p90 of 5 runs, suite cpu on cpu); set est_time=295"
    assert len(lines) == 2 and "est-time --write" in lines[1]
    r = est(tree, "--write")
    assert r.returncode == 0 and "updated suites/test_slow.py:3: est_time 60 -> 295" in r.stdout
    text = (tree / "suites" / "test_slow.py").read_text()
    assert 'register_cpu_ci(est_time=295, suite="cpu")  # measured? see history\n' in text
    assert text.startswith("from ci_register import register_cpu_ci\n\n")
    assert (tree / "suites" / "test_ok.py").read_text() == before_ok
    r = est(tree, "--check")
    assert r.returncode == 0 and "2 measured registration(s), each within 30 s or 30%" in r.stdout


def test_usage_and_missing_history(make_tree, tmp_path):
    tree = make_tree()
    assert est(tree).returncode == 2
    assert est(tree, "--check", "--suite", "nope").returncode == 2
    # The history is what est-time reads: a wrong path is an error, not "nothing to compare".
    r = est(tree, "--check", "--history", "missing.db")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("error: missing.db: no such history; pass --history PATH or set GATES_HISTORY, "
                        "or run a suite to record durations\n")


@pytest.mark.parametrize("make_bad", [lambda p: p.write_text("not sqlite"), lambda p: p.mkdir()])
def test_unreadable_history_is_an_error_that_names_the_fix(make_tree, tmp_path, make_bad):
    tree = make_tree()
    make_bad(tree / "bad.db")
    for mode in ("--check", "--write"):
        r = est(tree, mode, "--history", "bad.db")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("error: bad.db: ") and "--history PATH" in r.stderr
    assert "est_time=60," in (tree / "suites" / "test_slow.py").read_text()  # nothing written


def test_planning_warns_once_about_an_unreadable_history(make_tree, catalog_tree, tmp_path):
    tree = make_tree()
    catalog_tree({**SUITES, "cpu2": SUITES["cpu"]})
    (tree / "suites" / "test_two.py").write_text('register_cpu_ci(est_time=5, suite="cpu2")\ndef test_x():\n    pass\n')
    (tree / "bad.db").write_text("not sqlite")
    r = subprocess.run([sys.executable, "-m", "ci_register", "plan", "--history", "bad.db"], cwd=tree,
                       capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "suite cpu2" in r.stdout and r.stderr.count("warning: bad.db: not an SQLite database") == 1


@pytest.mark.parametrize(("seconds", "stale"), [
    ((128.0, 129.0, 130.0, 131.0), True),  # p90 130.7 against 100: under-estimated
    ((58.0, 59.0, 60.0, 61.0), True),  # p90 60.7 against 100: over-estimated
    ((110.0, 111.0, 112.0, 113.0), False),  # 12.7 s off: not worth a diff
])
def test_health_and_est_time_check_give_one_answer(catalog_tree, history_factory, seconds,
                                                   stale):
    # Once `gate-report health` and `est-time --check` disagreed on exactly these numbers.
    path = "suites/test_a.py"
    tree = catalog_tree(files={path: 'register_cpu_ci(est_time=100, suite="cpu")\n'
                                     "def test_x():\n    pass\n"})
    history_factory([{path: s} for s in seconds])
    check = est(tree, "--check")
    health = subprocess.run([sys.executable, "-m", "gates.commands.cli", "health", "--suite", "cpu",
                             "--format", "json", "--history", "history.db", "--root", "."],
                            cwd=tree, capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert health.returncode == 0, health.stderr
    health_stale = [s["path"] for s in json.loads(health.stdout)[0]["stale"]]
    assert (f"{path}:1: est_time 100 s" in check.stdout) is stale, check.stdout + check.stderr
    assert health_stale == ([path] if stale else [])


def test_a_write_cut_short_leaves_the_test_file_whole(make_tree):
    # A full disk mid-write, made by a file-size limit: the rewrite is one byte longer
    # (est_time=60 -> 295), so the write fails at its last byte. The file used to be
    # truncated and rewritten in place, so the limit left it cut off.
    tree = make_tree()
    slow = tree / "suites" / "test_slow.py"
    before = slow.read_bytes()
    # A rollback-journal history is read without writing a -shm index under the limit.
    with sqlite3.connect(tree / "history.db") as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before), len(before)))

    r = subprocess.run([sys.executable, "-m", "ci_register", "est-time", "--write"], cwd=tree,
                       capture_output=True, text=True, timeout=60, preexec_fn=limit,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stdout + r.stderr
    assert r.stderr.startswith("error: suites/test_slow.py: cannot write (File too large); the "
                               "file is unchanged")
    assert slow.read_bytes() == before
    assert [p.name for p in slow.parent.iterdir() if p.name.endswith(".tmp")] == []
