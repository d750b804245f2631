"""Test selection from a change: the static import graph and what it selects, on generated trees."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ci_register.planning.imports import scan
from ci_register.planning.select import SelectError, parse_select, select_tests

REPO = Path(__file__).resolve().parents[1]


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


TREE = {
    "pkg/__init__.py": "from .core import run  # re-export\n",
    "pkg/core.py": "from pkg.util import helper\n",
    "pkg/util.py": "import os\n",
    "pkg/io/__init__.py": "",
    "pkg/io/client.py": "from ..util import helper\n",
    "pkg/io/server.py": "from . import client\n",
    "pkg/lonely.py": "x = 1\n",
    "pkg/models/__init__.py": "",
    "pkg/models/llama.py": "",
    "pkg/models/registry.py": "import importlib\ndef load(n):\n    return importlib.import_module(f'pkg.models.{n}')\n",
    "tests/conftest.py": "",
    "tests/a/conftest.py": "import pkg.lonely\n",
    "tests/a/test_a.py": "from pkg import io\n",  # io is a subpackage: loads pkg.io
    "tests/b/test_b.py": "import pkg\n",  # pkg/__init__ re-exports core -> util
    "tests/b/test_c.py": "from pkg.io import server\n",
    "tests/b/test_d.py": "import subprocess\nsubprocess.run(['python', '-m', 'pkg.models.registry'])\n",
    "tests/b/test_e.py": "import os\n",
}
TESTS = ["tests/a/test_a.py", "tests/b/test_b.py", "tests/b/test_c.py", "tests/b/test_d.py", "tests/b/test_e.py"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    write(tmp_path, TREE)
    return tmp_path


def sel(root: Path, changed: list[str], raw: dict | None = None, tests=TESTS):
    config = parse_select(raw, "catalog.toml", catalog_path="suites/catalog.toml")
    return select_tests(scan(root, config.package_roots), tests, changed, config)


def test_transitive_reexport_and_relative_imports(tree):
    s = sel(tree, ["pkg/util.py"])
    assert not s.everything
    # test_b: pkg/__init__ re-exports core, core imports util; importing any pkg.x runs
    # pkg/__init__ too (test_a, test_c, and test_d through the module it starts by name).
    assert sorted(s.files) == ["tests/a/test_a.py", "tests/b/test_b.py", "tests/b/test_c.py", "tests/b/test_d.py"]
    assert s.files["tests/b/test_b.py"] == "tests/b/test_b.py imports pkg/__init__.py imports pkg/core.py imports pkg/util.py (changed)"
    assert "tests/b/test_e.py" not in s.files


def test_submodule_named_in_from_import(tree):
    s = sel(tree, ["pkg/io/server.py"])
    assert sorted(s.files) == ["tests/b/test_c.py"]  # `from pkg import io` loads io/__init__, not server
    s = sel(tree, ["pkg/io/__init__.py"])
    assert sorted(s.files) == ["tests/a/test_a.py", "tests/b/test_c.py"]


def test_conftest_affects_only_tests_below_it(tree):
    s = sel(tree, ["pkg/lonely.py"])
    assert sorted(s.files) == ["tests/a/test_a.py"]
    assert s.files["tests/a/test_a.py"] == "tests/a/test_a.py uses tests/a/conftest.py imports pkg/lonely.py (changed)"
    s = sel(tree, ["tests/conftest.py"])
    assert sorted(s.files) == TESTS


def test_changed_test_runs_and_unrelated_change_runs_nothing(tree):
    assert sel(tree, ["tests/b/test_e.py"]).files == {"tests/b/test_e.py": "tests/b/test_e.py changed"}
    write(tree, {"tools/script.py": "import pkg\n"})
    # A script nothing imports: only the catalog can say no test loads it.
    s = sel(tree, ["tools/script.py"], {"ignore": ["tools/**"]})
    assert s.files == {} and not s.everything
    assert "no file imports it" in sel(tree, ["tools/script.py"]).everything


def test_string_literal_module_and_prefix_import(tree):
    # test_d starts `python -m pkg.models.registry`; the registry loads pkg.models.* by an f-string.
    s = sel(tree, ["pkg/models/llama.py"])
    assert sorted(s.files) == ["tests/b/test_d.py"]
    assert "pkg/models/registry.py imports pkg/models/llama.py" in s.files["tests/b/test_d.py"]


def test_everything_runs_for_declared_unknown_and_unparsable(tree):
    assert "pyproject.toml" in sel(tree, ["pyproject.toml"]).everything
    assert ".github/workflows/ci.yml" in sel(tree, ["pkg/util.py", ".github/workflows/ci.yml"]).everything
    assert "suites/catalog.toml" in sel(tree, ["suites/catalog.toml"]).everything
    assert "not Python and not declared" in sel(tree, ["pkg/kernel.cu"]).everything
    assert "docker/x" in sel(tree, ["docker/x"], {"always": ["docker/**"]}).everything
    write(tree, {"pkg/util.py": "def broken(:\n"})
    assert "pkg/util.py does not parse (line 1" in sel(tree, ["pkg/util.py"]).everything


def test_ignored_and_data_paths(tree):
    s = sel(tree, ["README.md", "docs/x.png"])
    assert not s.everything and s.files == {} and len(s.notes) == 2
    s = sel(tree, ["csrc/kernel.cu"], {"data": {"csrc/**": ["pkg/io/*.py"]}})
    assert sorted(s.files) == ["tests/a/test_a.py", "tests/b/test_c.py"]
    assert "stands for csrc/kernel.cu" in s.files["tests/b/test_c.py"]


def test_computed_import_name(tree):
    write(tree, {"pkg/plugins.py": "import importlib\ndef load(n):\n    return importlib.import_module(n)\n",
                 "tests/b/test_f.py": "import pkg.plugins\n"})
    tests = [*TESTS, "tests/b/test_f.py"]
    s = sel(tree, ["pkg/plugins.py"], tests=tests)
    assert s.everything == "pkg/plugins.py:3 imports a module by a computed name; what it loads is unknown"
    # A test that reaches such a file runs on any Python change; others still select.
    s = sel(tree, ["pkg/lonely.py"], tests=tests)
    assert sorted(s.files) == ["tests/a/test_a.py", "tests/b/test_f.py"]
    assert "computed name" in s.files["tests/b/test_f.py"]
    assert sel(tree, ["README.md"], tests=tests).files == {}


def test_deleted_file_selects_its_importers(tree):
    s = sel(tree, ["pkg/gone.py"])
    assert s.files == {}
    write(tree, {"pkg/io/client.py": "from ..util import helper\nfrom pkg.gone import x\n"})
    s = sel(tree, ["pkg/gone.py"])
    assert sorted(s.files) == ["tests/b/test_c.py"]  # test_a loads pkg.io, not its client
    assert "imports pkg/gone.py, deleted" in s.files["tests/b/test_c.py"]


def test_a_change_past_the_bound_runs_everything_and_says_why(tree):
    # Every changed path was read, each deleted or new Python file with a pass over
    # every file's imports (~11 ms on this repository's tree): a 100,000-file change took
    # over 5 minutes before the selection said anything. Past the bound everything runs.
    from ci_register.planning.select import MAX_CHANGED_PATHS

    docs = [f"docs/page{i}.md" for i in range(MAX_CHANGED_PATHS)]
    s = sel(tree, docs)
    assert not s.everything and s.files == {}  # at the bound: read as ever
    s = sel(tree, [*docs, "pkg/new_module.py"])
    assert s.everything == (f"{MAX_CHANGED_PATHS + 1} paths changed, more than the "
                            f"{MAX_CHANGED_PATHS} a selection reads; everything runs")
    assert sel(tree, [*docs, *docs]).everything == ""  # repeats count once


def test_a_module_too_deep_or_too_big_to_parse_is_not_a_crash(tree, monkeypatch):
    # The import scan parsed every Python file of the tree unbounded: a 200,000-term
    # expression anywhere crashed `matrix --changed-files` (RecursionError), and a large
    # generated module took ~440 times its size in memory (a 50 MB literal: 22 GB).
    import ci_register.planning.imports as imports

    write(tree, {"pkg/deep.py": "x = " + "+".join(["1"] * 200_000) + "\n",
                 "tests/b/test_f.py": "import pkg.deep\nimport pkg.big\n",
                 "pkg/big.py": "import pkg.util\n" + "# padding\n" * 200})
    tests = [*TESTS, "tests/b/test_f.py"]
    assert "nested too deeply to parse" in sel(tree, ["pkg/deep.py"], tests=tests).everything
    monkeypatch.setattr(imports, "MAX_SCAN_BYTES", 1000)
    assert "over 0 MB, not parsed" in sel(tree, ["pkg/big.py"], tests=tests).everything
    # Unchanged, its imports unknown: the test reaching it runs on any Python change.
    s = sel(tree, ["pkg/lonely.py"], tests=tests)
    assert "tests/b/test_f.py" in s.files and not s.everything


def test_src_layout_and_test_folder_on_sys_path(tmp_path):
    write(tmp_path, {
        "src/lib/__init__.py": "", "src/lib/ops.py": "", "src/lib/other.py": "",
        "test/helpers/common.py": "from lib import ops\n",
        "test/unit/test_ops.py": "import sys\nsys.path.insert(0, '..')\nfrom helpers.common import x\n",
        "test/unit/test_other.py": "import lib.other\n",
    })
    tests = ["test/unit/test_ops.py", "test/unit/test_other.py"]
    assert sorted(sel(tmp_path, ["src/lib/ops.py"], {"package_roots": ["src"]}, tests).files) == ["test/unit/test_ops.py"]
    # Undeclared, the root is found: src/ holds `lib`, which the tests import.
    assert sorted(sel(tmp_path, ["src/lib/ops.py"], None, tests).files) == ["test/unit/test_ops.py"]


def test_bad_select_table():
    with pytest.raises(SelectError, match="unknown field 'alway'"):
        parse_select({"alway": []}, "c.toml")
    with pytest.raises(SelectError, match="always_suites names unknown suite 'x'"):
        parse_select({"always_suites": ["x"]}, "c.toml", suites=["cpu"])
    with pytest.raises(SelectError, match="package_roots must be a list"):
        parse_select({"package_roots": "src"}, "c.toml")


CATALOG = """
[select]
always_suites = ["always"]
[suites.cpu]
backend = "cpu"
description = "cpu"
schedule = "per-commit"
shard_budget_s = 100
[suites.always]
backend = "cpu"
description = "always"
schedule = "per-commit"
shard_budget_s = 1000
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, {
        "suites/catalog.toml": CATALOG,
        "lib/__init__.py": "", "lib/a.py": "", "lib/b.py": "",
        "suites/test_1.py": 'from lib import a\nregister_cpu_ci(est_time=60, suite="cpu")\ndef test_x():\n    pass\n',
        "suites/test_2.py": 'from lib import a\nregister_cpu_ci(est_time=60, suite="cpu")\ndef test_x():\n    pass\n',
        "suites/test_3.py": 'from lib import b\nregister_cpu_ci(est_time=60, suite="cpu")\ndef test_x():\n    pass\n',
        "suites/test_4.py": 'register_cpu_ci(est_time=10, suite="always")\ndef test_x():\n    pass\n',
    })
    return tmp_path


def matrix(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci_register", "matrix", "--event", "pull_request", *args], cwd=root,
                          capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_matrix_runs_only_affected_files_and_says_why(repo):
    r = matrix(repo, "--changed-files", "lib/a.py")
    assert r.returncode == 0, r.stderr
    got = {e["name"]: e for e in json.loads(r.stdout)["include"]}
    assert sorted(got) == ["always 1/1", "cpu 1/2", "cpu 2/2"]  # 2 x 60 s on a 100 s budget
    for name in ("cpu 1/2", "cpu 2/2"):
        args = shlex.split(got[name]["command"])
        assert args[args.index("--file") + 1:][::2] == ["suites/test_1.py", "suites/test_2.py"]
    assert got["cpu 1/2"]["why"].endswith("imports lib/a.py (changed)")
    assert got["always 1/1"]["why"] == "suite always always runs ([select] always_suites)"
    assert "--file" not in got["always 1/1"]["command"]  # the whole suite
    assert "selection: 2 registered file(s)" in r.stderr
    r = matrix(repo, "--changed-files", "lib/b.py", "suites/catalog.toml")  # the catalog: everything
    got = {e["name"]: e for e in json.loads(r.stdout)["include"]}
    assert "--file" not in got["cpu 1/3"]["command"] and "suites/catalog.toml changed" in got["cpu 1/3"]["why"]


@pytest.mark.timeout(120)
def test_matrix_with_a_huge_change_plans_everything_quickly(repo):
    from ci_register.planning.select import MAX_CHANGED_PATHS

    listing = repo / "changed.txt"
    listing.write_text("".join(f"vendor/pkg{i}/mod.py\n" for i in range(MAX_CHANGED_PATHS * 4)))
    r = subprocess.run(f"{sys.executable} -m ci_register matrix --event pull_request "
                       "--changed-files $(cat changed.txt)", shell=True, cwd=repo,
                       capture_output=True, text=True, timeout=100,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-500:]
    got = {e["name"]: e for e in json.loads(r.stdout)["include"]}
    assert f"{MAX_CHANGED_PATHS * 4} paths changed" in got["cpu 1/3"]["why"]


def test_matrix_base_reads_git(repo):
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    for cmd in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "base"], ["checkout", "-qb", "pr"]):
        subprocess.run([*git, *cmd], cwd=repo, check=True)
    (repo / "lib" / "b.py").write_text("x = 2\n")
    subprocess.run([*git, "commit", "-qam", "change"], cwd=repo, check=True)
    r = matrix(repo, "--base", "main")
    assert r.returncode == 0, r.stderr
    got = {e["name"]: e for e in json.loads(r.stdout)["include"]}
    assert sorted(got) == ["always 1/1", "cpu 1/1"] and "suites/test_3.py imports lib/b.py" in got["cpu 1/1"]["why"]
    r = matrix(repo, "--base", "nope")
    assert r.returncode == 2 and "--base nope:" in r.stderr and "git fetch" in r.stderr


def test_computed_names_the_graph_can_still_read(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "", "pkg/ops/__init__.py": "", "pkg/ops/a.py": "", "pkg/ops/b.py": "",
        "pkg/other.py": "", "pkg/plug.py": "", "ext/__init__.py": "", "ext/x.py": "",
        # a name bound once to a literal; a pkgutil walk with a prefix; pkg.__name__ in an f-string
        "pkg/const.py": "import importlib\nNAME = 'pkg.' + 'other'\nimportlib.import_module(NAME)\n",
        "pkg/walk.py": ("import importlib, pkgutil\nimport pkg.ops as ops\n"
                        "for info in pkgutil.iter_modules(ops.__path__):\n"
                        "    importlib.import_module(f'{ops.__name__}.{info.name}')\n"),
        "pkg/walk2.py": ("import importlib, pkgutil\nP = 'pkg.ops.'\n"
                         "for _, name, _ in pkgutil.walk_packages([], P):\n    importlib.import_module(name)\n"),
        "pkg/dyn.py": "import importlib, sys\nimportlib.import_module(sys.argv[1])\n",
        "t/test_const.py": "import pkg.const\n", "t/test_walk.py": "import pkg.walk\n",
        "t/test_walk2.py": "import pkg.walk2\n", "t/test_dyn.py": "import pkg.dyn\n",
    })
    tests = ["t/test_const.py", "t/test_walk.py", "t/test_walk2.py", "t/test_dyn.py"]
    g = scan(tmp_path)
    assert {p for p, n in g.files.items() if n.open_import} == {"pkg/dyn.py"}
    s = sel(tmp_path, ["pkg/other.py"], tests=tests)
    assert sorted(s.files) == ["t/test_const.py", "t/test_dyn.py"]  # dyn may load anything
    s = sel(tmp_path, ["pkg/ops/b.py"], tests=tests)
    assert sorted(s.files) == ["t/test_dyn.py", "t/test_walk.py", "t/test_walk2.py"]
    # The catalog may declare what a computed import loads ([] : nothing in this tree).
    s = sel(tmp_path, ["pkg/other.py"], {"dynamic": {"pkg/dyn.py": ["ext/*.py"]}}, tests)
    assert sorted(s.files) == ["t/test_const.py"]
    s = sel(tmp_path, ["ext/x.py"], {"dynamic": {"pkg/dyn.py": ["ext/*.py"]}}, tests)
    assert sorted(s.files) == ["t/test_dyn.py"]
    with pytest.raises(SelectError, match="dynamic"):
        parse_select({"dynamic": {"pkg/dyn.py": "ext"}}, "c.toml")


def test_catalog_ignore_carves_out_of_default_always(tree):
    raw = {"ignore": [".github/workflows/release-*.yml"], "always": [".github/workflows/release-gpu.yml"]}
    assert sel(tree, [".github/workflows/release-pypi.yml"], raw).everything == ""
    assert "release-gpu.yml" in sel(tree, [".github/workflows/release-gpu.yml"], raw).everything
    assert ".github/workflows/ci.yml" in sel(tree, [".github/workflows/ci.yml"], raw).everything


def test_scripts_and_modules_named_in_command_lines(tmp_path):
    write(tmp_path, {
        "train.py": "import lib.core\n", "lib/__init__.py": "", "lib/core.py": "", "lib/serve.py": "",
        "t/test_train.py": "import os\nos.system(f'python3 train.py --steps {3}')\n",
        "t/test_serve.py": "CMD = 'python -m lib.serve --port 1'\n",
        "t/helper.py": "", "t/test_local.py": "RUN = 'python helper.py'\n",
    })
    tests = ["t/test_train.py", "t/test_serve.py", "t/test_local.py"]
    assert sorted(sel(tmp_path, ["lib/core.py"], tests=tests).files) == ["t/test_train.py"]
    assert sorted(sel(tmp_path, ["lib/serve.py"], tests=tests).files) == ["t/test_serve.py"]
    assert sorted(sel(tmp_path, ["t/helper.py"], tests=tests).files) == ["t/test_local.py"]


def test_function_paths_in_strings_reach_their_module(tmp_path):
    write(tmp_path, {"lib/__init__.py": "", "lib/rm.py": "def score():\n    pass\n",
                     "t/test_rm.py": "ARGS = ['--rm-path', 'lib.rm.score']\n"})
    assert sorted(sel(tmp_path, ["lib/rm.py"], tests=["t/test_rm.py"]).files) == ["t/test_rm.py"]


def test_plan_text_says_why(repo):
    r = subprocess.run([sys.executable, "-m", "ci_register", "plan", "--event", "pull_request", "--changed-files", "lib/b.py"],
                       cwd=repo, capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "suites/test_3.py:2" in r.stdout and "why: suites/test_3.py imports lib/b.py (changed)" in r.stdout
    assert "suites/test_1.py" not in r.stdout


def test_a_change_that_affects_no_file_is_an_empty_matrix_not_an_error(repo):
    cat = repo / "suites" / "catalog.toml"
    cat.write_text(cat.read_text().replace('always_suites = ["always"]\n', ""))
    (repo / "README.md").write_text("")
    r = matrix(repo, "--changed-files", "README.md")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"include": []} and "0 registered file(s)" in r.stderr
