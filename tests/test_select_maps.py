"""Selection that pays on real trees: found package roots, fixture-scoped conftest
imports, recorded run-time import maps, and never selecting nothing by mistake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ci_register.planning.imports import scan
from ci_register.planning.recorded_imports import recorded_maps
from ci_register.planning.select import (
    SelectError,
    changed_since,
    fresh_maps,
    parse_select,
    select_tests,
)
from gates.store.open import open_history

REPO = Path(__file__).resolve().parents[1]


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def sel(root: Path, changed: list[str], tests: list[str], raw: dict | None = None, maps=None):
    config = parse_select(raw, "catalog.toml")
    return select_tests(scan(root, config.package_roots), tests, changed, config, maps)


# ------------------------------------------------------------ issue 38: never select nothing


SGLANG = {
    "python/pyproject.toml": '[project]\nname = "pkg"\n[tool.setuptools.packages.find]\nwhere = ["."]\n',
    "python/pkg/__init__.py": "",
    "python/pkg/srt/__init__.py": "",
    "python/pkg/srt/norm.py": "def rms():\n    return 1\n",
    "python/pkg/srt/other.py": "",
    "test/srt/test_norm.py": "from pkg.srt.norm import rms\ndef test_x():\n    assert rms()\n",
    "test/srt/test_other.py": "import pkg.srt.other\ndef test_x():\n    pass\n",
}


def test_python_layout_found_without_package_roots(tmp_path):
    # SGLang's shape: the package under python/. No [select] package_roots given.
    write(tmp_path, SGLANG)
    s = sel(tmp_path, ["python/pkg/srt/norm.py"], ["test/srt/test_norm.py", "test/srt/test_other.py"])
    assert not s.everything
    assert sorted(s.files) == ["test/srt/test_norm.py"]
    assert "python" in scan(tmp_path).package_roots


def test_src_layout_declared_in_setup_cfg(tmp_path):
    write(tmp_path, {
        "setup.cfg": "[options]\npackage_dir =\n    =lib\n",
        "lib/thing/__init__.py": "", "lib/thing/core.py": "",
        "tests/test_core.py": "import importlib\nM = importlib.import_module('thing.core')\n",
    })
    g = scan(tmp_path)
    assert "lib" in g.package_roots and "lib/thing/core.py" in g.loads("tests/test_core.py")


def test_changed_python_file_that_maps_to_nothing_selects_everything(tmp_path):
    write(tmp_path, {**SGLANG, "python/pkg/srt/plugin_x.py": "X = 1\n"})
    s = sel(tmp_path, ["python/pkg/srt/plugin_x.py"], ["test/srt/test_norm.py"])
    assert "no file imports it" in s.everything and "[select] ignore" in s.everything
    # Declared ignored, it affects nothing (and says so by not running everything).
    s = sel(tmp_path, ["python/pkg/srt/plugin_x.py"], ["test/srt/test_norm.py"], {"ignore": ["python/pkg/srt/plugin_*.py"]})
    assert not s.everything and s.files == {}


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def test_base_that_looks_like_an_option_is_refused(tmp_path):
    write(tmp_path, {"a.py": ""})
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "one")
    with pytest.raises(SelectError, match="not a git ref"):
        changed_since("--output=stolen.txt", tmp_path)
    assert not any(p.name.startswith("stolen") for p in tmp_path.iterdir())  # git never ran with it
    assert changed_since("main", tmp_path) == []
    # An unknown ref: git's reason, not its usage hint that follows it.
    with pytest.raises(SelectError) as got:
        changed_since("nosuchref", tmp_path)
    assert "fatal: ambiguous argument 'nosuchref...HEAD'" in str(got.value)
    assert "git <command>" not in str(got.value)


def test_changed_since_outside_a_repository_names_gits_reason(tmp_path):
    with pytest.raises(SelectError) as got:
        changed_since("main", tmp_path)
    assert "Not a git repository" in str(got.value) and "usage:" not in str(got.value)


# ------------------------------------------------------------ conftest scope and fixtures


def test_root_conftest_change_selects_the_tests_under_it_not_everything(tmp_path):
    write(tmp_path, {
        "conftest.py": "", "pkg/__init__.py": "",
        "a/conftest.py": "", "a/test_a.py": "def test_x():\n    pass\n",
        "b/test_b.py": "def test_x():\n    pass\n",
    })
    tests = ["a/test_a.py", "b/test_b.py"]
    s = sel(tmp_path, ["conftest.py"], tests)
    assert not s.everything and sorted(s.files) == tests
    assert s.files["b/test_b.py"] == "b/test_b.py uses conftest.py (changed)"
    assert sorted(sel(tmp_path, ["a/conftest.py"], tests).files) == ["a/test_a.py"]


CONFTEST_FIXTURES = {
    "pkg/__init__.py": "", "pkg/db.py": "", "pkg/cache.py": "", "pkg/log.py": "", "pkg/auto.py": "",
    "tests/conftest.py": (
        "import pytest\nimport pkg.log\n\n"
        "@pytest.fixture\ndef db():\n    import pkg.db\n    return pkg.db\n\n"
        "@pytest.fixture\ndef cache(db):\n    from pkg import cache\n    return cache\n\n"
        "@pytest.fixture(autouse=True)\ndef _env():\n    import pkg.auto\n"
    ),
    "tests/test_uses_db.py": "def test_x(db):\n    pass\n",
    "tests/test_uses_cache.py": "def test_x(cache):\n    pass\n",
    "tests/test_by_name.py": "import pytest\n@pytest.mark.usefixtures('cache')\ndef test_x():\n    pass\n",
    "tests/test_plain.py": "def test_x():\n    pass\n",
}
FIXTURE_TESTS = ["tests/test_by_name.py", "tests/test_plain.py", "tests/test_uses_cache.py", "tests/test_uses_db.py"]


def test_fixture_imports_count_for_the_tests_that_can_use_them(tmp_path):
    write(tmp_path, CONFTEST_FIXTURES)
    # pkg.db is imported inside fixture `db`: the tests that request it (directly, or
    # through `cache`, or by name in usefixtures) run; test_plain does not.
    assert sorted(sel(tmp_path, ["pkg/db.py"], FIXTURE_TESTS).files) == [
        "tests/test_by_name.py", "tests/test_uses_cache.py", "tests/test_uses_db.py"]
    assert sorted(sel(tmp_path, ["pkg/cache.py"], FIXTURE_TESTS).files) == ["tests/test_by_name.py", "tests/test_uses_cache.py"]
    # Module-level imports and autouse fixtures count for every test under the conftest.
    assert sorted(sel(tmp_path, ["pkg/log.py"], FIXTURE_TESTS).files) == FIXTURE_TESTS
    assert sorted(sel(tmp_path, ["pkg/auto.py"], FIXTURE_TESTS).files) == FIXTURE_TESTS


def test_fixture_scoping_never_drops_a_test_that_loads_the_module(tmp_path):
    # Run every test with a tracer of what it imports and check no left-out test loaded it.
    write(tmp_path, CONFTEST_FIXTURES)
    probe = (
        "import json, sys, pytest\n"
        "class P:\n"
        "    def pytest_runtest_teardown(self, item):\n"
        "        print('LOADED', item.path.name, json.dumps(sorted(m for m in sys.modules if m.startswith('pkg'))))\n"
        "sys.exit(pytest.main(['-q', '-s', '-p', 'no:cacheprovider', '-p', 'no:randomly', sys.argv[1]], plugins=[P()]))\n"
    )
    (tmp_path / "probe.py").write_text(probe)
    for t in FIXTURE_TESTS:
        r = subprocess.run([sys.executable, "probe.py", t], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env={**{k: v for k, v in os.environ.items() if k != "PYTEST_PLUGINS"}, "PYTHONPATH": str(tmp_path)})
        assert r.returncode == 0, r.stdout + r.stderr
        line = next(x for x in r.stdout.splitlines() if "LOADED " in x)
        loaded = json.loads(line[line.index("LOADED "):].split(" ", 2)[2])
        for mod in loaded:
            path = mod.replace(".", "/") + ("/__init__.py" if mod == "pkg" else ".py")
            assert t in sel(tmp_path, [path], FIXTURE_TESTS).files, (t, path)


# ------------------------------------------------------------ recorded import maps (miles' shape)


MILES = {
    "pyproject.toml": "[project]\nname = \"miles\"\n",
    "miles/__init__.py": "",
    "miles/utils/__init__.py": "",
    # What miles' loader does: the module comes from a name computed at run time.
    "miles/utils/registry.py": "import importlib\n\ndef load(name):\n    return importlib.import_module(name.strip())\n",
    "miles/backends/__init__.py": "",
    "miles/backends/fsdp.py": "NAME = 'fsdp'\n",
    "miles/backends/megatron.py": "NAME = 'megatron'\n",
    "miles/rollout/__init__.py": "",
    "miles/rollout/buffer.py": "SIZE = 4\n",
    "tests/__init__.py": "",
    "tests/fixtures/__init__.py": "",
    "tests/fixtures/env.py": (
        "import pytest\nfrom miles.utils import registry\n\n"
        "@pytest.fixture\ndef backend():\n    return registry.load(open('BACKEND').read())\n"
    ),
    "BACKEND": "miles.backends.fsdp\n",
    "tests/conftest.py": "pytest_plugins = ['tests.fixtures.env']\n",
    "tests/test_fsdp.py": "def test_backend(backend):\n    assert backend.NAME == 'fsdp'\n",
    "tests/test_megatron.py": (
        "from miles.utils.registry import load\n\n"
        "def test_megatron():\n    assert load('miles.backends.' + 'megatron').NAME == 'megatron'\n"
    ),
    "tests/test_buffer.py": "from miles.rollout import buffer\n\ndef test_size():\n    assert buffer.SIZE == 4\n",
    "tests/test_leaf.py": "def test_leaf():\n    assert 1 + 1 == 2\n",
}
MILES_TESTS = ["tests/test_buffer.py", "tests/test_fsdp.py", "tests/test_leaf.py", "tests/test_megatron.py"]
CATALOG_SELECT = {"data": {"BACKEND": ["tests/fixtures/env.py"]}}


@pytest.fixture(scope="module")
def miles(tmp_path_factory) -> tuple[Path, dict[str, set[str]]]:
    """The tree, and the maps the real plugin recorded into a history by running it."""
    root = tmp_path_factory.mktemp("miles")
    write(root, MILES)
    hist = root / "h.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), "PYTEST_PLUGINS": "gates.record.plugin",
           "GATES_COMMIT": "c0ffee"}
    r = subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", "--gates-suite", "unit",
                        "--gates-history", str(hist)], cwd=root, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows, problem = recorded_maps(hist)
    assert problem is None and {x["path"] for x in rows} == set(MILES_TESTS)
    assert {x["commit_sha"] for x in rows} == {"c0ffee"}
    maps, notes = fresh_maps(rows, datetime.now(UTC), 30)
    assert notes == []
    return root, maps


def test_recorded_maps_hold_what_each_file_loaded(miles):
    _, maps = miles
    assert "miles/backends/fsdp.py" in maps["tests/test_fsdp.py"]  # through the fixture, by a computed name
    assert "miles/backends/fsdp.py" not in maps["tests/test_megatron.py"]
    assert "miles/backends/megatron.py" in maps["tests/test_megatron.py"]
    assert "miles/rollout/buffer.py" not in maps["tests/test_leaf.py"]
    assert "tests/fixtures/env.py" in maps["tests/test_leaf.py"]  # the root conftest's plugin loads for all


def test_leaf_change_selects_only_that_file_once_maps_exist(miles):
    root, maps = miles
    # The static graph alone: the root conftest reaches the computed import, so any change runs all.
    assert sorted(sel(root, ["tests/test_leaf.py"], MILES_TESTS, CATALOG_SELECT).files) == MILES_TESTS
    s = sel(root, ["tests/test_leaf.py"], MILES_TESTS, CATALOG_SELECT, maps)
    assert s.files == {"tests/test_leaf.py": "tests/test_leaf.py changed"}
    s = sel(root, ["miles/rollout/buffer.py"], MILES_TESTS, CATALOG_SELECT, maps)
    assert sorted(s.files) == ["tests/test_buffer.py"]


def test_module_loaded_by_computed_name_selects_the_tests_that_loaded_it(miles):
    root, maps = miles
    s = sel(root, ["miles/backends/megatron.py"], MILES_TESTS, CATALOG_SELECT, maps)
    assert not s.everything and sorted(s.files) == ["tests/test_megatron.py"]
    assert "loaded (recorded run) miles/backends/megatron.py" in s.files["tests/test_megatron.py"]
    assert sorted(sel(root, ["miles/backends/fsdp.py"], MILES_TESTS, CATALOG_SELECT, maps).files) == ["tests/test_fsdp.py"]
    # The data file that names the module stands for the fixture module: every user runs.
    assert sorted(sel(root, ["BACKEND"], MILES_TESTS, CATALOG_SELECT, maps).files) == MILES_TESTS


def test_a_module_no_record_and_no_import_reaches_runs_everything(miles):
    root, maps = miles
    write(root, {"miles/backends/deepspeed.py": "NAME = 'ds'\n"})
    try:
        s = sel(root, ["miles/backends/deepspeed.py"], MILES_TESTS, CATALOG_SELECT, maps)
        assert "no recorded run loaded it" in s.everything
    finally:
        (root / "miles/backends/deepspeed.py").unlink()


def test_a_file_without_a_fresh_map_falls_back_to_the_static_graph(miles):
    root, maps = miles
    partial = {k: v for k, v in maps.items() if k != "tests/test_buffer.py"}
    s = sel(root, ["tests/test_leaf.py"], MILES_TESTS, CATALOG_SELECT, partial)
    # test_buffer has no map: its closure holds the computed import, so it runs too.
    assert sorted(s.files) == ["tests/test_buffer.py", "tests/test_leaf.py"]
    assert "computed name" in s.files["tests/test_buffer.py"]
    rows = [{"path": p, "files": sorted(f), "recorded_at": "2026-01-01T00:00:00Z"} for p, f in maps.items()]
    old, notes = fresh_maps(rows, datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=31), 30)
    assert old == {} and "older than 30 days" in notes[0]
    assert fresh_maps(rows, datetime(2026, 1, 2, tzinfo=UTC), 30)[0].keys() == maps.keys()


# ------------------------------------------------------------ the store, both backends


def test_store_keeps_the_newest_map_per_file_and_carries_it_in_bundles(store_location, tmp_path):
    from test_history import record  # noqa: PLC0415

    with open_history(store_location) as h:
        run_id = record(h, 1, suite="cpu").run_id
        assert h.after_writes.record_import_maps("cpu", run_id, "c1", {"t/test_a.py": ["a.py", "b.py"]}, at="2026-01-02T00:00:00Z") == 1
        h.after_writes.record_import_maps("cpu", run_id, "c0", {"t/test_a.py": ["old.py"]}, at="2026-01-01T00:00:00Z")  # older: ignored
        h.after_writes.record_import_maps("gpu", run_id, "c1", {"t/test_a.py": ["g.py"]}, at="2026-01-02T00:00:00Z")
        rows = {(r["suite"], r["path"]): r for r in h.planning_reads.import_maps()}
        assert rows[("cpu", "t/test_a.py")]["files"] == ["a.py", "b.py"] and rows[("cpu", "t/test_a.py")]["commit_sha"] == "c1"
        assert rows[("gpu", "t/test_a.py")]["files"] == ["g.py"]
        h.after_writes.record_import_maps("cpu", run_id, "c2", {"t/test_a.py": ["new.py"]}, at="2026-01-03T00:00:00Z")
        assert h.planning_reads.import_maps("cpu")[0]["files"] == ["new.py"]
        bundle = h.merge_reads.export_run(run_id)
    assert len(bundle["import_maps"]) == 2
    with open_history(tmp_path / "other.db") as other:
        other.in_transaction(lambda: other.run_writes.insert_bundle(bundle))
        assert {(r["suite"], tuple(r["files"])) for r in other.planning_reads.import_maps()} == {("cpu", ("new.py",)), ("gpu", ("g.py",))}


def test_lazy_import_table_is_read_not_open(tmp_path):
    # gates/__init__.py's pattern: a literal table of module names, imported on attribute access.
    write(tmp_path, {
        "lib/__init__.py": ("import importlib\n_LAZY = {'A': 'lib.a', 'B': 'lib.b'}\n"
                            "def __getattr__(name):\n    module = _LAZY.get(name)\n"
                            "    return getattr(importlib.import_module(module), name)\n"),
        "lib/a.py": "A = 1\n", "lib/b.py": "B = 2\n", "lib/c.py": "from lib import a\n",
        "t/test_x.py": "import lib\n", "t/test_y.py": "import lib.c\n",
    })
    g = scan(tmp_path)
    assert not g.files["lib/__init__.py"].open_import
    assert {"lib/a.py", "lib/b.py"} <= g.loads("lib/__init__.py")
    assert sorted(sel(tmp_path, ["lib/b.py"], ["t/test_x.py", "t/test_y.py"]).files) == ["t/test_x.py", "t/test_y.py"]


def test_matrix_refuses_a_base_that_is_an_option(tmp_path):
    write(tmp_path, {"suites/catalog.toml": "[suites.cpu]\nbackend = \"cpu\"\ndescription = \"c\"\n"
                                            "schedule = \"per-commit\"\nshard_budget_s = 100\n",
                     "suites/test_a.py": "register_cpu_ci(est_time=1, suite=\"cpu\")\ndef test_x():\n    pass\n"})
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "one")
    r = subprocess.run([sys.executable, "-m", "ci_register", "matrix", "--event", "pull_request", "--base=--output=x.txt"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2 and "not a git ref" in r.stderr
    assert not list(tmp_path.glob("x.txt*"))


def test_reading_maps_never_writes_an_older_history(tmp_path):
    from test_schema_migration import OLD  # noqa: PLC0415 - an m002 history file

    path = tmp_path / "history.db"
    path.write_bytes(OLD.read_bytes())
    rows, problem = recorded_maps(path)
    assert problem is None and rows == []
    assert path.read_bytes() == OLD.read_bytes()
