"""Hostile test files and catalogs: every problem is one line naming file, line and fix,
never a traceback, and the collector never runs out of memory or stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_register.registered.catalog import RESERVED_NAMES, CatalogError, parse_catalog
from ci_register.registered.collect import MAX_FILE_BYTES, collect, parse_file

REPO = Path(__file__).resolve().parents[1]
CATALOG_TEXT = ('[suites.cpu]\nbackend = "cpu"\ndescription = "c"\nschedule = "per-commit"\n'
                "shard_budget_s = 600\n")
CAT = parse_catalog(CATALOG_TEXT, Path("suites/catalog.toml"))
REG = "register_cpu_ci(est_time={}, suite=\"cpu\")\ndef test_a():\n    pass\n"


def issues(src: str) -> list[str]:
    return [str(i) for i in parse_file(src, "suites/test_x.py", CAT)[2]]


@pytest.mark.parametrize(("est", "message"), [
    ("1" + "0" * 400, "an integer of 401 digits"),
    ("1e300", "at most 604800 s"),
    ("-" + "9" * 400, "an integer of 400 digits"),
    ("1e999", "at most 604800 s"),   # inf as a literal
    ("86400 * 8", "must be a literal"),
])
def test_absurd_est_time_is_one_line(est, message):
    (issue,) = issues(REG.format(est))
    assert "est_time" in issue or "literal" in issue
    assert message in issue and "\n" not in issue


def test_a_200k_term_expression_is_one_line_not_a_crash():
    src = REG.format(10) + "x = " + "+".join(["1"] * 200_000) + "\n"
    out = issues(src)
    # CPython 3.11's parser recurses per term: refused in one line (a newer one may parse it).
    assert out == [] or (len(out) == 1 and "for the parser" in out[0])
    deep = REG.format(10) + "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    (issue,) = issues(deep)
    assert issue.startswith("suites/test_x.py:") and "\n" not in issue


def test_a_utf8_bom_file_is_read(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "test_bom.py").write_bytes(b"\xef\xbb\xbf" + REG.format(5).encode())
    cat = parse_catalog(CATALOG_TEXT, tmp_path / "suites" / "catalog.toml")
    col = collect(cat, base=tmp_path)
    assert col.issues == [] and [r.path for r in col.registrations] == ["suites/test_bom.py"]


def test_a_test_file_named_in_bytes_or_with_a_newline_is_one_line_each(tmp_path):
    # A name that is not UTF-8 crashed every planning command (RE2 cannot encode it: a
    # UnicodeEncodeError traceback); a newline split the file's error line in two.
    (tmp_path / "suites").mkdir()
    os.close(os.open(os.fsencode(tmp_path / "suites") + b"/test_\xff.py", os.O_CREAT | os.O_WRONLY))
    (tmp_path / "suites" / "test_a\nb.py").write_text(REG.format(5))
    (tmp_path / "suites" / "test_ok.py").write_text(REG.format(5))
    (tmp_path / "suites" / "catalog.toml").write_text(CATALOG_TEXT)
    cat = parse_catalog(CATALOG_TEXT, tmp_path / "suites" / "catalog.toml")
    col = collect(cat, base=tmp_path)
    assert sorted(str(i) for i in col.issues) == [
        "suites/test_\\xff.py:1: file name is not UTF-8 (byte 0xff); rename it in UTF-8",
        "suites/test_a\\nb.py:1: file name holds a control character (a newline?); rename it"]
    assert [r.path for r in col.registrations] == ["suites/test_ok.py"]
    r = subprocess.run([sys.executable, "-m", "ci_register", "matrix", "--event", "push"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "test_\\xff.py:1: file name is not UTF-8" in r.stderr


def test_a_looping_symlink_is_not_told_to_be_utf8(tmp_path):
    (tmp_path / "suites").mkdir()
    loop = tmp_path / "suites" / "test_loop.py"
    loop.symlink_to(loop)
    cat = parse_catalog(CATALOG_TEXT, tmp_path / "suites" / "catalog.toml")
    (issue,) = [str(i) for i in collect(cat, base=tmp_path).issues]
    assert "symbolic links" in issue and "UTF-8" not in issue


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    (tmp_path / "suites").mkdir()
    big = tmp_path / "suites" / "test_big.py"
    big.write_text(REG.format(5) + "DATA = '" + "x" * (MAX_FILE_BYTES + 10) + "'\n")
    cat = parse_catalog(CATALOG_TEXT, tmp_path / "suites" / "catalog.toml")
    (issue,) = [str(i) for i in collect(cat, base=tmp_path).issues]
    assert "MB" in issue and "move data out" in issue


@pytest.mark.parametrize(("text", "message"), [
    (CATALOG_TEXT.replace("600", "inf"), "shard_budget_s"),
    (CATALOG_TEXT.replace("600", "nan"), "shard_budget_s"),
    (CATALOG_TEXT.replace("600", "1e300"), "shard_budget_s"),
    (CATALOG_TEXT + "[collect]\nglob = ['**/t_*.py']\n", "unknown field 'glob' in [collect]"),
    (CATALOG_TEXT + "[collect]\ngate_marker = 3\n", "gate_marker"),
    (CATALOG_TEXT.replace("[suites.cpu]", "[suites.tests]"), "framework session"),
    ("collect = 3\n" + CATALOG_TEXT, "[collect] must be a table"),
    ("markers = 3\n" + CATALOG_TEXT, "markers must be a table"),
    ("suites = 3\n", "suites must be tables"),
    (CATALOG_TEXT + "shards = 1000000000\n", "from 1 to 256"),  # matrix hung, then OOM
])
def test_catalog_errors_are_one_line(text, message):
    with pytest.raises(CatalogError) as info:
        parse_catalog(text, Path("suites/catalog.toml"))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_every_framework_session_name_is_reserved():
    sessions = subprocess.run([sys.executable, "-m", "nox", "-l", "--json"], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
    if sessions.returncode != 0 and "No module named nox" in sessions.stderr:
        pytest.skip("nox not installed in this interpreter")
    import json

    framework = {s["session"] for s in json.loads(sessions.stdout) if "framework" in s["tags"]
                 or s["session"] in ("history-browse", "bench-gates")}
    assert framework <= set(RESERVED_NAMES), framework - set(RESERVED_NAMES)


def _cli(tmp: Path, *args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci_register", *args], cwd=tmp, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_a_broken_catalog_through_nox_is_one_line_exit_2(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(CATALOG_TEXT.replace("600", "inf"))
    (tmp_path / "noxfile.py").write_text((REPO / "noxfile.py").read_text())
    (tmp_path / "ci_register").symlink_to(REPO / "ci_register")
    r = subprocess.run([sys.executable, "-m", "nox", "-l"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    if "No module named nox" in r.stderr:
        pytest.skip("nox not installed in this interpreter")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "shard_budget_s" in r.stderr


def test_run_help_prints_the_options(tmp_path):
    r = _cli(tmp_path, "run", "--help")
    assert r.returncode == 0 and "--partition I/N" in r.stdout and "exit codes" in r.stdout
    r = _cli(tmp_path, "run")
    assert r.returncode == 2 and "usage:" in r.stdout


def test_list_json_into_a_closed_pipe_is_quiet(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(CATALOG_TEXT)
    for i in range(400):
        (tmp_path / "suites" / f"test_{i:03d}.py").write_text(REG.format(5))
    proc = subprocess.Popen([sys.executable, "-m", "ci_register", "list", "--json"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.stdout is not None and proc.stdout.read(10)
    proc.stdout.close()  # what `| head -1` does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err


def test_a_catalog_with_a_bom_or_that_is_a_folder(tmp_path):
    from ci_register.registered.catalog import load_catalog

    (tmp_path / "c.toml").write_bytes(b"\xef\xbb\xbf" + CATALOG_TEXT.encode())
    assert list(load_catalog(tmp_path / "c.toml").suites) == ["cpu"]
    (tmp_path / "d.toml").mkdir()
    with pytest.raises(CatalogError, match="not a regular file"):
        load_catalog(tmp_path / "d.toml")


def test_a_catalog_that_is_a_fifo_a_device_or_huge_is_one_line_not_a_hang(tmp_path):
    # `--catalog /dev/zero` read until memory ran out; a FIFO blocked forever.
    from ci_register.registered.catalog import MAX_CATALOG_BYTES, load_catalog

    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(CatalogError, match=r"not a regular file \(a FIFO, device or folder\)"):
            load_catalog(path)
    big = tmp_path / "big.toml"
    big.write_bytes(CATALOG_TEXT.encode() + b"#" * MAX_CATALOG_BYTES)
    with pytest.raises(CatalogError, match="MiB, not a catalog"):
        load_catalog(big)
    r = subprocess.run([sys.executable, "-m", "ci_register", "run", "cpu", "--catalog",
                        "/dev/zero"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 2 and r.stderr.startswith("error: /dev/zero: not a regular file")


def test_toml_nested_past_the_parsers_depth_is_one_line(tmp_path):
    # tomllib recurses per nested array: a catalog, an accept file or a tree's
    # pyproject.toml of 100,000 nested arrays raised RecursionError, a traceback.
    from ci_register.planning.imports import scan
    from gates.record import accept

    deep = "x = " + "[" * 100_000 + "]" * 100_000 + "\n"
    with pytest.raises(CatalogError, match="^suites/catalog.toml: malformed catalog: arrays or "
                                           "tables nested too deeply"):
        parse_catalog(CATALOG_TEXT + deep, Path("suites/catalog.toml"))
    (tmp_path / accept.ACCEPT_FILE).write_text("[[accept]]\nkey = " + deep[4:])
    with pytest.raises(accept.AcceptFileError, match="nested too deeply"):
        accept.read_accept_file(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.x]\n" + deep)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    assert "pkg/__init__.py" in scan(tmp_path, (".",)).files  # read without it, as ever


def test_a_plan_json_nested_past_the_decoders_depth_is_one_line(tmp_path):
    # read_json (the gate's --plan, the plugins' plans) let json's RecursionError out:
    # `python -m gates.gate --plan deep.json` printed a traceback, exit 1.
    from ci_register.registered.paths import read_json

    deep = tmp_path / "plan.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        read_json(deep)
    r = subprocess.run([sys.executable, "-m", "gates.gate", "--history", str(tmp_path / "h.db"),
                        "--run-id", "r1", "--plan", str(deep)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"error: --plan {deep}: cannot read the plan JSON (arrays or "
                               "objects nested too deeply")


def test_a_tiny_budget_or_a_huge_partition_is_one_line():
    from ci_register.planning.partition import PartitionError, parse_partition
    from ci_register.planning.schedule import ScheduleError, plan_schedule

    with pytest.raises(PartitionError, match="at most 256 shards"):
        parse_partition("1/1000000000")
    items = [(f"suites/test_{i}.py", 10.0) for i in range(400)]
    with pytest.raises(ScheduleError, match="more than the 256 jobs"):
        plan_schedule(items, 10.0, suite="cpu")


# ---------------------------------------------------------------- issue 40: not regular files


def _tree_with(tmp_path: Path, make) -> Path:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text(CATALOG_TEXT)
    (tmp_path / "suites" / "test_ok.py").write_text("from ci_register import register_cpu_ci\n"
                                                      + REG.format(5))
    make(tmp_path / "suites")
    return tmp_path


@pytest.mark.parametrize("command", [["list"], ["list", "--json"],
                                     ["matrix", "--event", "push"]])
@pytest.mark.parametrize("what", ["fifo", "symlink to a fifo", "fifo outside the globs"])
def test_a_fifo_named_like_a_test_file_is_never_read(tmp_path, command, what):
    def make(suites: Path) -> None:
        if what == "fifo":
            os.mkfifo(suites / "test_fifo.py")
        elif what == "symlink to a fifo":
            os.mkfifo(tmp_path / "pipe")
            (suites / "test_link.py").symlink_to(tmp_path / "pipe")
        else:  # the "called a marker outside the globs" scan reads other .py files
            os.mkfifo(suites / "helper.py")

    tree = _tree_with(tmp_path, make)
    r = subprocess.run([sys.executable, "-m", "ci_register", *command], cwd=tree,
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert "Traceback" not in r.stderr
    if what == "fifo outside the globs":
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 2 and "not a regular file" in r.stderr, r.stderr
        assert len([x for x in r.stderr.splitlines() if "test_" in x]) == 1


def test_a_folder_named_like_a_test_file_is_one_line(tmp_path):
    tree = _tree_with(tmp_path, lambda s: (s / "test_dir.py").mkdir())
    cat = parse_catalog(CATALOG_TEXT, tree / "suites" / "catalog.toml")
    col = collect(cat, base=tree)
    assert [r.path for r in col.registrations] == ["suites/test_ok.py"]


@pytest.mark.timeout(20)
def test_a_hostile_glob_matches_in_linear_time():
    import time

    from ci_register.registered.paths import glob_match

    began = time.process_time()  # CPU time: load stretches wall time only
    for path in ("a" * 30, "a" * 5000, "suites/" + "a" * 3000 + "/test_x.py"):
        assert not glob_match(path, "*a" * 12 + "b")
        assert not glob_match(path, "**/" * 20 + "*a" * 12 + "b")
    assert time.process_time() - began < 1.0
    assert glob_match("suites/x/test_y.py", "suites/**/test_*.py")
    assert not glob_match("test_y.py\n", "test_*.py")  # no trailing-newline slack


@pytest.mark.parametrize("text", ["X = 1\x00\n", "x = " + "+".join(["1"] * 200_000) + "\n"])
def test_an_sglang_run_suite_that_cannot_be_parsed_is_one_line(tmp_path, text):
    # A 200,000-term expression raised RecursionError (a traceback); ast's ValueError
    # (a NUL byte) was not taken either.
    from ci_register.registered.sglang_catalog import SglangCatalogError, read_lists

    (tmp_path / "run_suite.py").write_text(text)
    with pytest.raises(SglangCatalogError, match="cannot be read as Python"):
        read_lists(tmp_path / "run_suite.py")
