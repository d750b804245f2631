"""A tree of miles' shape (radixark/miles): a loader that imports a function by a computed
dotted path, declared in ``[select.dynamic]`` as loading nothing, and example modules a
conftest puts on ``sys.path`` for tests that import them by bare name. A change to a file
either way reaches keeps the tests that load it."""

from __future__ import annotations

from own_runner import write

from ci_register.planning.imports import scan
from ci_register.planning.select import parse_select, select_tests

TREE = {
    "miles/__init__.py": "",
    "miles/utils/__init__.py": "",
    "miles/utils/misc.py": ("import importlib\n\n\ndef load_function(path):\n"
                            "    module_path, _, name = path.rpartition('.')\n"
                            "    return getattr(importlib.import_module(module_path), name)\n"),
    "miles/rollout/__init__.py": "",
    "miles/rollout/rm_hub/__init__.py": "from .math_fn import score\n",
    "miles/rollout/rm_hub/math_fn.py": "def score(x):\n    return x\n",
    "tests/__init__.py": "",
    "tests/fast/__init__.py": "",
    "tests/fast/test_rm.py": ("from miles.utils.misc import load_function\n\n\ndef test_rm():\n"
                              "    path = '.'.join(['miles', 'rollout', 'rm_hub', 'math_fn', 'score'])\n"
                              "    assert load_function(path)(1) == 1\n"),
    "tests/fast/test_rm_again.py": ("from miles.utils.misc import load_function\n\n\ndef test_rm_again():\n"
                                    "    assert load_function(RM_PATH)\n"),
    "examples/__init__.py": "",  # miles' examples/ is a package that other tests import by its name
    "examples/other.py": "def other():\n    return 2\n",
    "tests/fast/test_other.py": "import examples.other\n",
    "examples/openenv/openenv_generate.py": "def generate():\n    return 1\n",
    "examples/openenv/recipe.py": "import openenv_generate\n",
    "tests/fast/examples/__init__.py": "",
    "tests/fast/examples/openenv/__init__.py": ("from pathlib import Path\n\n"
                                                "EXAMPLE_DIR = Path(__file__).resolve().parents[4] / 'examples' / 'openenv'\n"),
    "tests/fast/examples/openenv/conftest.py": ("import sys\n\nfrom . import EXAMPLE_DIR\n\n"
                                                "if str(EXAMPLE_DIR) not in sys.path:\n"
                                                "    sys.path.insert(0, str(EXAMPLE_DIR))\n"),
    "tests/fast/examples/openenv/test_generate.py": "import openenv_generate\n\n\ndef test_g():\n    assert openenv_generate.generate()\n",
    "tests/fast/test_leaf.py": "def test_leaf():\n    pass\n",
}
TESTS = ["tests/fast/test_other.py", "tests/fast/test_rm.py", "tests/fast/test_rm_again.py", "tests/fast/examples/openenv/test_generate.py",
         "tests/fast/test_leaf.py"]
# miles' own settings for this shape (benchmarks/catalogs/miles.toml): the loader declared closed.
CONFIG = {"package_roots": ["."], "dynamic": {"miles/utils/misc.py": []}}


def test_a_bare_name_import_after_a_conftest_sys_path_insert_keeps_its_test(tmp_path):
    write(tmp_path, TREE)
    config = parse_select(CONFIG, "catalog.toml")
    sel = select_tests(scan(tmp_path, config.package_roots), TESTS, ["examples/openenv/openenv_generate.py"], config)
    assert not sel.everything
    assert set(sel.files) == {"tests/fast/examples/openenv/test_generate.py"}, sel.files
    # A leaf test's change still selects that file alone.
    sel = select_tests(scan(tmp_path, config.package_roots), TESTS, ["tests/fast/test_leaf.py"], config)
    assert set(sel.files) == {"tests/fast/test_leaf.py"}


def test_a_declaration_a_recorded_run_contradicts_is_refused(tmp_path):
    write(tmp_path, TREE)
    config = parse_select(CONFIG, "catalog.toml")
    change = ["miles/rollout/rm_hub/math_fn.py"]
    # test_rm's recorded run loaded the scorer through the computed import.
    maps = {"tests/fast/test_rm.py": ["tests/fast/test_rm.py", "tests/__init__.py", "tests/fast/__init__.py",
                                      "miles/__init__.py", "miles/utils/__init__.py", "miles/utils/misc.py",
                                      "miles/rollout/__init__.py", "miles/rollout/rm_hub/__init__.py",
                                      "miles/rollout/rm_hub/math_fn.py"]}
    sel = select_tests(scan(tmp_path, config.package_roots), TESTS, change, config, maps)
    assert {"tests/fast/test_rm.py", "tests/fast/test_rm_again.py"} <= set(sel.files), sel.files
    assert any("miles/utils/misc.py: declaration refused" in n for n in sel.notes), sel.notes
    # A recorded run that agrees with the declaration leaves it standing.
    quiet = {"tests/fast/test_rm.py": [f for f in maps["tests/fast/test_rm.py"] if "rollout" not in f]}
    sel = select_tests(scan(tmp_path, config.package_roots), TESTS, ["tests/fast/test_leaf.py"], config, quiet)
    assert not any("declaration refused" in n for n in sel.notes), sel.notes


def test_an_ignored_file_with_a_computed_import_affects_no_test(tmp_path):
    """The framework's own tests (`ignore`) may import by a computed name: a change to one
    runs nothing, unless a registered test reaches it by a static import."""
    write(tmp_path, {**TREE, "tools/check_docs.py": "import importlib\n\n\ndef load(n):\n    return importlib.import_module(n)\n"})
    config = parse_select({**CONFIG, "ignore": ["tools/**"]}, "catalog.toml")
    sel = select_tests(scan(tmp_path, config.package_roots), TESTS, ["tools/check_docs.py"], config)
    assert not sel.everything and not sel.files, (sel.everything, sel.files)
    write(tmp_path, {"tests/fast/test_leaf.py": "import tools.check_docs\n"})
    sel = select_tests(scan(tmp_path, config.package_roots), TESTS, ["tools/check_docs.py"], config)
    assert "tests/fast/test_leaf.py" in sel.files
