"""`--out` / `--output` never destroy a history, an input or a foreign file."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from report_history import SUITE, make_history

from ci_register.planning.outfile import OutputError, check_output
from gates.commands.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("guard") / "history.db"
    make_history(path)
    return path


@pytest.fixture
def hist(template, tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "history.db"
    shutil.copy(template, path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GATES_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)
    return path


def _report(argv, capsys) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_out_onto_the_history_it_reads_is_refused_and_the_history_kept(hist, capsys):
    before = hist.read_bytes()
    code, err = _report(["--history", hist, "--out", hist], capsys)
    assert code == 2 and "is an input of this command" in err
    assert hist.read_bytes() == before


def test_out_onto_another_history_is_refused_even_with_force(hist, tmp_path, capsys):
    other = tmp_path / "other.db"
    shutil.copy(hist, other)
    before = other.read_bytes()
    code, err = _report(["--history", hist, "--out", other, "--force"], capsys)
    assert code == 2 and "is an SQLite database" in err and other.read_bytes() == before


def test_out_through_a_symlink_to_the_history_is_refused(hist, tmp_path, capsys):
    link = tmp_path / "report.txt"
    link.symlink_to(hist)
    code, err = _report(["--history", hist, "--out", link], capsys)
    assert code == 2 and "input" in err


def test_out_over_a_foreign_file_needs_force(hist, tmp_path, capsys):
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n")
    code, err = _report(["--history", hist, "--suite", SUITE, "--format", "md", "--out", notes],
                        capsys)
    assert code == 2 and "--force" in err and notes.read_text() == "my notes\n"
    code, err = _report(["--history", hist, "--suite", SUITE, "--format", "md", "--out", notes,
                         "--force"], capsys)
    assert code in (0, 1) and notes.read_text().startswith("## ")


@pytest.mark.parametrize("fmt", ["text", "md", "json", "html"])
def test_an_earlier_report_is_replaced_without_force(hist, tmp_path, capsys, fmt):
    out = tmp_path / f"report.{fmt}"
    for _ in range(2):
        code, err = _report(["--history", hist, "--suite", SUITE, "--format", fmt, "--out", out],
                            capsys)
        assert code in (0, 1), err
    health = tmp_path / f"health.{fmt}"
    if fmt != "html":
        for _ in range(2):
            code, err = _report(["health", "--history", hist, "--suite", SUITE, "--format", fmt,
                                 "--out", health], capsys)
            assert code == 0, err


def test_check_output_refuses_a_directory(tmp_path):
    with pytest.raises(OutputError, match="is a directory"):
        check_output(tmp_path)


def _matrix(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci_register", "matrix", "--event", "push", *args],
                          cwd=tree, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(
        '[suites.cpu]\nbackend = "cpu"\ndescription = "c"\nschedule = "per-commit"\n'
        "shard_budget_s = 600\n")
    (tmp_path / "suites" / "test_a.py").write_text(
        'register_cpu_ci(est_time=6, suite="cpu")\ndef test_x():\n    pass\n')
    return tmp_path


def test_matrix_output_never_overwrites_the_catalog_or_history(tree, template):
    catalog = tree / "suites" / "catalog.toml"
    before = catalog.read_bytes()
    r = _matrix(tree, "--output", str(catalog))
    assert r.returncode == 2 and "is an input" in r.stderr and catalog.read_bytes() == before
    shutil.copy(template, tree / "history.db")
    r = _matrix(tree, "--output", "history.db", "--force")
    assert r.returncode == 2 and "is an input" in r.stderr
    assert (tree / "history.db").read_bytes() == template.read_bytes()


def test_matrix_output_replaces_its_own_file_and_refuses_others(tree):
    out = tree / "matrix.json"
    assert _matrix(tree, "--output", str(out)).returncode == 0
    assert _matrix(tree, "--output", str(out)).returncode == 0
    foreign = tree / "README"
    foreign.write_text("hello\n")
    r = _matrix(tree, "--output", str(foreign))
    assert r.returncode == 2 and "--force" in r.stderr and foreign.read_text() == "hello\n"
    assert _matrix(tree, "--output", str(foreign), "--force").returncode == 0


def test_out_to_a_device_or_through_a_symlink_never_replaces_it(hist, tmp_path, capsys):
    link = tmp_path / "to-null"
    link.symlink_to("/dev/null")
    code, err = _report(["--history", hist, "--out", link], capsys)
    assert code in (0, 1), err
    assert link.is_symlink() and Path("/dev/null").is_char_device()
    real = tmp_path / "real.txt"
    real.write_text("")
    alias = tmp_path / "alias.txt"
    alias.symlink_to(real)
    code, err = _report(["--history", hist, "--out", alias], capsys)
    assert code in (0, 1) and alias.is_symlink() and "Runs" in real.read_text()


@pytest.mark.timeout(120)
def test_output_to_a_fifo_or_a_pipe_is_written_not_waited_on(tree, hist):
    # check_output read the head of an existing output to see whether it was an earlier
    # one: on a FIFO (or /dev/stdout piped into tee) that open waited for a writer that
    # was the command itself, so `matrix --output fifo` and `--out /dev/stdout | cat`
    # hung until the job's timeout.
    import os
    import threading

    fifo = tree / "matrix.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    try:
        r = _matrix(tree, "--output", str(fifo))
    except subprocess.TimeoutExpired:
        r = None
    finally:
        if reader.is_alive():  # unblock the reader of a run that never wrote
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert r is not None and r.returncode == 0, r and r.stderr
    assert got and '"include"' in got[0]
    piped = subprocess.run(
        f"{sys.executable} -m gates.commands.cli --history {hist} --format md "
        "--out /dev/stdout | cat", shell=True, capture_output=True, text=True, timeout=60,
        cwd=tree, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert piped.returncode == 0 and "|" in piped.stdout, piped.stderr


def test_bisect_refuses_out_onto_the_history_before_any_work(hist, capsys):
    before = hist.read_bytes()
    code, err = _report(["bisect", "some/key", "--good", "a" * 7, "--bad", "b" * 7,
                         "--history", hist, "--out", hist], capsys)
    assert code == 2 and "is an input of this command" in err and hist.read_bytes() == before


def test_bisect_and_compare_outputs_are_recognised_as_replaceable():
    from gates.bisect_git import render_bisect  # noqa: PLC0415
    from gates.commands.common import is_report  # noqa: PLC0415
    from gates.model.bisect import BisectResult  # noqa: PLC0415

    r = BisectResult("culprit", "ab" * 20, 27, [], "first bad commit")
    for fmt in ("text", "md"):
        assert is_report(render_bisect(r, "gemm/latency", ["t.py::x"], fmt).encode())
    assert not is_report(b"bisect notes: my own file\n")
    assert not is_report(b"compare these two later\n")


def test_outputs_get_an_ordinary_file_mode(tmp_path):
    import os
    import stat

    from ci_register.planning.outfile import write_output

    old = os.umask(0o022)
    try:
        write_output(tmp_path / "report.html", "<!DOCTYPE html>\n")
        assert stat.S_IMODE((tmp_path / "report.html").stat().st_mode) == 0o644  # not mkstemp's 0600
        (tmp_path / "report.html").chmod(0o664)
        write_output(tmp_path / "report.html", "<!DOCTYPE html>\n")
        assert stat.S_IMODE((tmp_path / "report.html").stat().st_mode) == 0o664  # the replaced file's
    finally:
        os.umask(old)
