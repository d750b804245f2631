"""The runner map: what the suite runner's processes load, recorded, and what selection makes of it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from own_runner import own_runner_tree, run_cpu_suite, write

from ci_register.planning.imports import scan
from ci_register.planning.recorded_imports import recorded_maps
from ci_register.planning.select import (
    RUNNER_MAP_PATH,
    RunnerMap,
    fresh_maps,
    fresh_runner_map,
    parse_select,
    select_in_tree,
    select_tests,
)
from ci_register.registered.catalog import load_catalog
from ci_register.running import runner_map
from gates.record import import_map

TREE = {
    "pkg/__init__.py": "",
    "pkg/core.py": "X = 1\n",
    "pkg/plugins.py": "import importlib\ndef load(n):\n    return importlib.import_module(n)\n",
    "ci/__init__.py": "",
    "ci/run.py": "import ci.plan\n",
    "ci/plan.py": "",
    "ci/matrix.py": "import ci.plan\n",
    "ci/cli.py": "def main(cmd):\n    if cmd == 'matrix':\n        import ci.matrix\n    import ci.run\n",
    "tests/test_core.py": "import pkg.core\n",
    "tests/test_gpu.py": "import pkg.plugins\n",  # no recorded map: skipped where maps are recorded
    "tools/helper.py": "",
    "tools/test_tool.py": "import tools.helper\n",
}
TESTS = ["tests/test_core.py", "tests/test_gpu.py"]
RAW = {"runner": ["ci/**"], "ignore": ["tools/**"]}


def sel(root: Path, changed: list[str], runner: RunnerMap | None, maps=None):
    config = parse_select(RAW, "catalog.toml", catalog_path="suites/catalog.toml")
    maps = {"tests/test_core.py": {"tests/test_core.py", "pkg/core.py"}} if maps is None else maps
    return select_tests(scan(root, config.package_roots), TESTS, changed, config, maps, runner)


def test_runner_code_runs_everything_without_a_runner_map(tmp_path):
    write(tmp_path, TREE)
    s = sel(tmp_path, ["ci/matrix.py"], None)
    assert "declared runner code: 'ci/**'" in s.everything and "no fresh runner map" in s.everything


def test_runner_map_narrows_runner_code_to_what_it_loaded(tmp_path):
    write(tmp_path, TREE)
    runner = RunnerMap(frozenset({"ci/__init__.py", "ci/cli.py", "ci/run.py", "ci/plan.py"}), "runner map at abc")
    # The matrix code: the runner never loaded it, no test reaches it -> judged like any
    # module: only the file without a map, whose closure holds a computed import, runs.
    s = sel(tmp_path, ["ci/matrix.py"], runner)
    assert not s.everything and list(s.files) == ["tests/test_gpu.py"]
    # What the runner loaded can change any outcome.
    s = sel(tmp_path, ["ci/plan.py"], runner)
    assert s.everything.startswith("ci/plan.py changed: the suite runner loads it (runner map at abc)")
    # A file outside `runner` that the runner map holds (a plugin it loads) runs everything too.
    runner = RunnerMap(runner.files | {"pkg/core.py"}, "runner map at abc")
    assert "the suite runner loads it" in sel(tmp_path, ["pkg/core.py"], runner).everything
    # Declared `always` still wins.
    assert "declared to run everything" in sel(tmp_path, ["noxfile.py"], runner).everything


def test_ignored_python_change_does_not_reach_a_computed_import(tmp_path):
    write(tmp_path, TREE)
    # test_gpu.py has no map and reaches a computed import: any Python change may reach it,
    # except a file the catalog says no test loads (`ignore`). Before: it was selected.
    assert sel(tmp_path, ["tools/helper.py"], None).files == {}
    assert "computed name" in sel(tmp_path, ["ci/matrix.py"], RunnerMap(frozenset(), "x")).files["tests/test_gpu.py"]


def test_fresh_runner_map_unites_suites_and_drops_stale_ones():
    now = datetime(2026, 12, 3, tzinfo=UTC)
    rows = [
        {"suite": "cpu", "path": RUNNER_MAP_PATH, "commit_sha": "aaaa", "recorded_at": "2026-12-01T00:00:00Z",
         "files": ["ci/run.py"]},
        {"suite": "gpu", "path": RUNNER_MAP_PATH, "commit_sha": "bbbb", "recorded_at": "2026-12-02T00:00:00Z",
         "files": ["ci/hw.py"]},
        {"suite": "old", "path": RUNNER_MAP_PATH, "commit_sha": "cccc", "recorded_at": "2026-10-01T00:00:00Z",
         "files": ["ci/gone.py"]},
        {"suite": "cpu", "path": "tests/test_core.py", "commit_sha": "aaaa", "recorded_at": "2026-12-01T00:00:00Z",
         "files": ["pkg/core.py"]},
    ]
    got, notes = fresh_runner_map(rows, now, 30)
    assert got is not None and got.files == {"ci/run.py", "ci/hw.py"}
    assert "cpu, gpu" in got.source and "bbbb" in got.source and "1 runner map(s) older" in notes[0]
    assert fresh_runner_map(rows, now + timedelta(days=40), 30)[0] is None
    # The runner's row is no test file's map.
    assert set(fresh_maps(rows, now, 30)[0]) == {"tests/test_core.py"}


def test_runner_map_path_is_one_literal_on_both_sides():
    assert runner_map.RUNNER_MAP_PATH == RUNNER_MAP_PATH == import_map.RUNNER_MAP_PATH


def test_loaded_files_and_the_session_files_env(tmp_path):
    write(tmp_path, {"a.py": "", "sub/conftest.py": "", ".venv/x.py": "", "b.txt": ""})

    class M:
        def __init__(self, f):
            self.__file__ = str(tmp_path / f)

    mods = {"a": M("a.py"), "c": M("sub/conftest.py"), "v": M(".venv/x.py"), "t": M("b.txt"), "o": object()}
    assert runner_map.loaded_files(tmp_path, mods) == ["a.py"]
    env = {runner_map.SESSION_FILES_ENV: json.dumps(["noxfile.py", "/etc/passwd", "<runner>", 3])}
    assert "noxfile.py" in runner_map.runner_files(tmp_path, env)
    assert not {"/etc/passwd", "<runner>"} & set(runner_map.runner_files(tmp_path, env))
    assert runner_map.runner_files(tmp_path, {runner_map.SESSION_FILES_ENV: "{not json"}) == []


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A tree holding its own runner (tests/own_runner.py), run once as a nox session would
    start it."""
    root = own_runner_tree(tmp_path_factory.mktemp("own_runner"), {
        "suites/conftest.py": "",
        "noxfile.py": "",
        "pkg/__init__.py": "",
        "pkg/core.py": "X = 1\n",
        "suites/test_core.py": ('from ci_register import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="cpu")\n'
                                "import pkg.core\n\ndef test_x():\n    assert pkg.core.X == 1\n"),
    })
    run_cpu_suite(root, GATES_COMMIT="c0ffee", **{runner_map.SESSION_FILES_ENV: json.dumps(["noxfile.py"])})
    return root


def test_a_run_records_the_runner_map(recorded):
    rows, problem = recorded_maps(recorded / "h.db")
    assert problem is None
    row = next(r for r in rows if r["path"] == RUNNER_MAP_PATH)
    files = set(row["files"])
    assert row["suite"] == "cpu" and row["commit_sha"] == "c0ffee"
    # nox's process (from the environment), the runner's, pytest's plugins before collection.
    assert {"noxfile.py", "ci_register/running/runner.py", "ci_register/registered/collect.py",
            "ci_register/running/pytest_plugin.py", "gates/record/plugin.py"} <= files
    # Not loaded by a run: selection, the matrix, the SGLang catalog writer; conftests are scoped.
    assert not {"ci_register/planning/select.py", "ci_register/planning/matrix.py",
                "ci_register/registered/sglang_catalog.py", "suites/conftest.py", "pkg/core.py"} & files


def test_selection_from_the_recorded_runner_map(recorded):
    catalog = load_catalog(recorded / "suites" / "catalog.toml")
    tests = ["suites/test_core.py"]
    h = str(recorded / "h.db")
    s = select_in_tree(recorded, catalog, tests, ["ci_register/planning/matrix.py"], h)
    assert not s.everything and s.files == {}, s.everything
    assert "a runner map (runner map of suite(s) cpu, newest at c0ffee" in s.maps
    s = select_in_tree(recorded, catalog, tests, ["ci_register/running/runner.py"], h)
    assert "the suite runner loads it (runner map of suite(s) cpu" in s.everything
    s = select_in_tree(recorded, catalog, tests, ["pkg/core.py"], h)
    assert not s.everything and list(s.files) == tests
    # Past the bound: back to "ci_register/** runs everything".
    later = datetime.now(UTC) + timedelta(days=31)
    s = select_in_tree(recorded, catalog, tests, ["ci_register/planning/matrix.py"], h, now=later)
    assert "no fresh runner map" in s.everything
