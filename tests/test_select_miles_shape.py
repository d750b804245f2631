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


# miles' e2e tests start training with a command line joined from literals; the loader
# (misc.load_function, declared closed) imports what a `--...-path` word names, and a model
# script, loaded by its path, names a spec module after `--spec`.
LAUNCH = {
    "miles/utils/external_utils/__init__.py": "",
    "miles/utils/external_utils/model_args_utils.py": (
        "import importlib.util\nfrom pathlib import Path\n\nMODEL_DIR = Path(__file__).resolve().parents[3] / 'scripts' / 'models'\n\n\n"
        "def load_model_args(model_type):\n    path = MODEL_DIR / f'{model_type}.py'\n"
        "    spec = importlib.util.spec_from_file_location('m', path)\n    module = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(module)\n    return module.model_args()\n"),
    "scripts/models/glm4.py": "def model_args():\n    return '--num-layers 2 --spec miles_plugins.models.glm4 get_glm_spec '\n",
    "miles_plugins/__init__.py": "",
    "miles_plugins/models/__init__.py": "",
    "miles_plugins/models/glm4.py": "def get_glm_spec():\n    return 1\n",
    "tests/manual/__init__.py": "",
    "tests/manual/compact_split_generate.py": "def generate():\n    return 1\n",
    "tests/e2e/__init__.py": "",
    "tests/e2e/test_compact.py": (
        '"""Runs miles.rollout.rm_hub.math_fn end to end (prose: not a name a program loads)."""\n'
        "from miles.utils.external_utils.model_args_utils import load_model_args\n\n\ndef test_compact():\n"
        "    args = (\n        '--rollout-batch-size 8 --n-samples-per-prompt 4 --rollout-max-response-len 1024 '\n"
        "        '--custom-generate-function-path tests.manual.compact_split_generate.generate '\n"
        + "".join(f"        '--option-{i} {i} '\n" for i in range(12))
        + "    )\n    assert load_model_args('glm4') and args\n"),
}
LAUNCH_TESTS = [*TESTS, "tests/e2e/test_compact.py"]


def test_a_dotted_name_in_a_command_line_is_an_edge(tmp_path):
    write(tmp_path, {**TREE, **LAUNCH})
    config = parse_select({**CONFIG, "dynamic": {"miles/utils/misc.py": [],
                                                 "miles/utils/external_utils/model_args_utils.py": ["scripts/models/*.py"]}},
                          "catalog.toml")
    graph = scan(tmp_path, config.package_roots)
    sel = select_tests(graph, LAUNCH_TESTS, ["tests/manual/compact_split_generate.py"], config)
    assert set(sel.files) == {"tests/e2e/test_compact.py"}, sel.files
    # The docstring's dotted name is prose: a change there does not reach the e2e test.
    sel = select_tests(scan(tmp_path, config.package_roots), LAUNCH_TESTS, ["miles/rollout/rm_hub/math_fn.py"], config)
    assert "tests/e2e/test_compact.py" not in sel.files, sel.files


def test_a_file_loaded_by_its_path_is_an_edge_or_opens_the_loader(tmp_path):
    write(tmp_path, {**TREE, **LAUNCH})
    graph = scan(tmp_path, ["."])
    assert graph.files["miles/utils/external_utils/model_args_utils.py"].open_import == 9
    # Declared as loading the model scripts: a model script's change, and the spec module that
    # script names after `--spec`, reach the test that loads them.
    config = parse_select({**CONFIG, "dynamic": {"miles/utils/misc.py": [],
                                                 "miles/utils/external_utils/model_args_utils.py": ["scripts/models/*.py"]}},
                          "catalog.toml")
    for changed in ("scripts/models/glm4.py", "miles_plugins/models/glm4.py"):
        sel = select_tests(scan(tmp_path, config.package_roots), LAUNCH_TESTS, [changed], config)
        assert set(sel.files) == {"tests/e2e/test_compact.py"}, (changed, sel.files)
    # Undeclared, the loader is open: any Python change reaches its tests.
    sel = select_tests(scan(tmp_path, ["."]), LAUNCH_TESTS, ["miles_plugins/models/glm4.py"],
                       parse_select(CONFIG, "catalog.toml"))
    assert "tests/e2e/test_compact.py" in sel.files and "computed name" in sel.files["tests/e2e/test_compact.py"]
    # A literal path is an edge.
    write(tmp_path, {"tests/fast/test_lit.py": ("import runpy\n\n\ndef test_lit():\n"
                                                "    runpy.run_path('scripts/models/glm4.py')\n")})
    graph = scan(tmp_path, ["."])
    assert not graph.files["tests/fast/test_lit.py"].open_import
    assert "scripts/models/glm4.py" in graph.closure("tests/fast/test_lit.py")


def test_a_python_file_in_a_hidden_folder_is_never_dropped(tmp_path):
    """miles' tests/ci/test/test_neon_access.py loads .claude/skills/.../run_neon_workflow.py by
    its path; the scan skips hidden folders, so no node stands for the file."""
    hidden = ".claude/skills/neon/scripts/run_workflow.py"
    write(tmp_path, {**TREE, hidden: "def run():\n    return 1\n",
                     "tests/fast/test_neon.py": ("import importlib.util\nfrom pathlib import Path\n\n"
                                                 "ROOT = Path(__file__).parents[2]\n\n\ndef load(path):\n"
                                                 "    spec = importlib.util.spec_from_file_location('w', path)\n"
                                                 "    return spec\n\n\nW = load(ROOT / '.claude/skills/neon/scripts/run_workflow.py')\n")})
    tests = [*TESTS, "tests/fast/test_neon.py"]
    graph = scan(tmp_path, ["."])
    assert hidden not in graph.files
    # Undeclared: what loads it is unknown, so everything runs.
    sel = select_tests(graph, tests, [hidden], parse_select(CONFIG, "catalog.toml"))
    assert "the scan skips its folder" in sel.everything, (sel.everything, sel.files)
    # Declared as the test's computed load: that test alone.
    config = parse_select({**CONFIG, "dynamic": {**CONFIG["dynamic"], "tests/fast/test_neon.py": [hidden]}}, "c.toml")
    sel = select_tests(scan(tmp_path, ["."]), tests, [hidden], config)
    assert not sel.everything and set(sel.files) == {"tests/fast/test_neon.py"}, (sel.everything, sel.files)
    # Ignored: nothing.
    config = parse_select({**CONFIG, "ignore": [".claude/**"]}, "c.toml")
    sel = select_tests(scan(tmp_path, ["."]), tests, [hidden], config)
    assert not sel.everything and not sel.files
