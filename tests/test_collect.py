from __future__ import annotations

import time
from pathlib import Path

import pytest

from ci_register.registered.catalog import load_catalog, parse_catalog
from ci_register.registered.collect import collect, parse_file
from ci_register.registered.paths import glob_match, glob_regex

ROOT = Path(__file__).resolve().parents[1]
CATALOG = load_catalog(ROOT / "suites" / "catalog.toml")

HEAD = "from ci_register import register_cuda_ci, register_cpu_ci\n"


def parse(src: str):
    return parse_file(src, "suites/x/test_x.py", CATALOG)


def issues(src: str) -> list[str]:
    return [str(i) for i in parse(src)[2]]


def test_literal_registration_is_read():
    regs, gates, errs = parse(HEAD + 'register_cuda_ci(est_time=120, suite="base-b-1gpu")\nregister_cpu_ci(20, "cpu", labels=["q"])\ndef test_a(): pass\n')
    assert errs == []
    assert [(r.suite, r.est_time, r.line, r.backend) for r in regs] == [("base-b-1gpu", 120.0, 2, "cuda"), ("cpu", 20.0, 3, "cpu")]
    assert regs[1].labels == ("q",)


def test_sglang_signature_positional_and_keywords():
    regs, _, errs = parse(HEAD + 'register_cuda_ci(600, "stage-c-4gpu", True, None)\ndef test_a(): pass\n')
    assert errs == [] and regs[0].nightly and regs[0].suite == "stage-c-4gpu"


def test_stage_is_an_alias_for_suite():
    regs, _, errs = parse(HEAD + 'register_cuda_ci(est_time=5, stage="base-b-1gpu")\ndef test_a(): pass\n')
    assert errs == [] and regs[0].suite == "base-b-1gpu" and regs[0].stage == "base-b-1gpu"


def test_disabled_registration_is_kept_with_its_reason():
    regs, _, errs = parse(HEAD + 'register_cuda_ci(est_time=5, suite="base-b-1gpu", disabled="flaky on driver 580")\ndef test_a(): pass\n')
    assert errs == [] and regs[0].disabled == "flaky on driver 580"


@pytest.mark.parametrize(
    ("body", "fragment", "line"),
    [
        ('register_cuda_ci(est_time=5, suite="stage-c-4-gpu")', "unknown cuda suite 'stage-c-4-gpu'; known: ", 2),
        ('register_cuda_ci(est_time=T, suite="cpu")', "must be a literal", 2),
        ('register_cuda_ci(suite="base-b-1gpu")', "needs est_time", 2),
        ('register_cuda_ci(est_time=-3, suite="base-b-1gpu")', "must be >= 0", 2),
        ('register_cuda_ci(est_time=5, suite="base-b-1gpu", runner_config="x")', "both suite=", 2),
        ('register_cuda_ci(est_time=5, runner_config="x")', "without stage=", 2),
        ('register_cuda_ci(est_time=5, suite="")', "suite=\"\" is only for disabled", 2),
        ('register_cuda_ci(est_time=True, suite="base-b-1gpu")', "number of seconds", 2),
        ('register_cuda_ci(est_time=5, suite="base-b-1gpu", colour=1)', "unknown keyword 'colour'", 2),
        ('register_cuda_ci(est_time=5, suite="base-b-1gpu", stage="cpu")', "both suite=", 2),
        ('register_cuda_ci(est_time=5)', "names no suite", 2),
        ('register_cpu_ci(est_time=5, suite="base-b-1gpu")', "only as a cuda suite", 2),
        ('def f():\n    register_cuda_ci(est_time=5, suite="base-b-1gpu")', "module top level", 3),
        ('if True:\n    register_cuda_ci(est_time=5, suite="base-b-1gpu")', "module top level", 3),
        ('register_cuda_ci(est_time=5, suite="base-b-1gpu")\nregister_cuda_ci(est_time=6, suite="base-b-1gpu")', "registered twice", 3),
        ('register_cuda_ci(*args)', "not literal", 2),
        ('register_cuda_ci(est_time=5, suite="base-b-1gpu", disabled="")', "reason string", 2),
        ('register_cuda_ci(est_time=5, suite="base-b-1gpu", labels="a")', "list of strings", 2),
        ("x = (", "syntax error", 2),
    ],
)
def test_each_problem_is_one_line_naming_file_and_line(body, fragment, line):
    errs = issues(HEAD + body + "\ndef test_a(): pass\n")
    assert errs, body
    assert any(fragment in e for e in errs), errs
    assert any(e.startswith(f"suites/x/test_x.py:{line}: ") for e in errs), errs
    assert all("\n" not in e for e in errs)


def test_file_without_registration():
    errs = issues("def test_a(): pass\n")
    assert errs == [errs[0]] and "has no registration" in errs[0] and errs[0].startswith("suites/x/test_x.py:1:")


def test_registered_file_without_tests():
    errs = issues(HEAD + 'register_cuda_ci(est_time=5, suite="base-b-1gpu")\n')
    assert len(errs) == 1 and "defines no test functions" in errs[0]


def test_gate_declarations():
    regs, gates, errs = parse(HEAD + 'register_cpu_ci(est_time=5, suite="cpu")\nregister_ci_gate(metric_key="rollout/x/v1", better="lower", max_value=0.01)\ndef test_a(): pass\n')
    assert errs == [] and gates[0].metric_key == "rollout/x/v1" and gates[0].options == {"better": "lower", "max_value": 0.01}
    errs = issues(HEAD + 'register_cpu_ci(est_time=5, suite="cpu")\nregister_ci_gate(metric_key="k", tolerance=3)\ndef test_a(): pass\n')
    assert any("unknown keyword 'tolerance'" in e for e in errs)


def test_other_marker_names_read_an_sglang_tree(catalog_tree):
    tree = catalog_tree(
        {"stage-b-test-small-1-gpu-amd": {"backend": "rocm", "description": "x",
                                          "shard_budget_s": 1800, "hardware": {"gpu_count": 1}}},
        {"test/test_amd.py": 'from sglang.test.ci.ci_register import register_amd_ci\nregister_amd_ci(est_time=60, suite="stage-b-test-small-1-gpu-amd")\nclass TestX:\n    pass\n'},
        markers={"register_amd_ci": "rocm", "register_cuda_ci": "cuda"})
    cat = load_catalog(tree / "suites" / "catalog.toml")
    col = collect(cat, root=tree / "test", base=tree)
    assert col.issues == []
    assert [(r.path, r.backend) for r in col.registrations] == [("test/test_amd.py", "rocm")]


def test_collect_does_not_import(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "catalog.toml").write_text((ROOT / "suites" / "catalog.toml").read_text())
    (tmp_path / "suites" / "test_boom.py").write_text(
        HEAD + 'raise SystemExit("imported!")\nregister_cpu_ci(est_time=1, suite="cpu")\ndef test_a(): pass\n'
    )
    col = collect(load_catalog(tmp_path / "suites" / "catalog.toml"), base=tmp_path)
    assert col.issues == [] and len(col.registrations) == 1


def test_shipped_tree_collects_cleanly():
    col = collect(CATALOG, base=ROOT)
    assert col.issues == [], [str(i) for i in col.issues]
    assert any(r.suite == "cpu" for r in col.registrations)


def test_collecting_2000_files_is_fast(tmp_path):
    # A behaviour check with a generous bound; the <1 s figure is measured by
    # benchmarks/bench_collect.py, not asserted here.
    suites = tmp_path / "suites"
    for i in range(300):
        d = suites / f"area{i % 20}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"test_f{i}.py").write_text(HEAD + f'register_cuda_ci(est_time={i + 1}, suite="base-b-1gpu")\ndef test_a(): pass\n')
    cat = parse_catalog((ROOT / "suites" / "catalog.toml").read_text(), suites / "catalog.toml")
    t = time.process_time()  # CPU time: load stretches wall time only
    col = collect(cat, base=tmp_path)
    assert time.process_time() - t < 5
    assert len(col.registrations) == 300 and not col.issues


def test_collect_globs_read_classes_as_pathlib_does():
    assert glob_match("suites/test_a.py", "suites/test_[ab].py")
    assert not glob_match("suites/test_c.py", "suites/test_[ab].py")
    assert glob_match("suites/test_c.py", "suites/test_[!ab].py")
    assert glob_match("x/y/test_a.py", "**/test_*.py") and glob_match("test_a.py", "**/test_*.py")
    assert not glob_match("x/test_a.py", "test_*.py")
    assert glob_regex("a[b].py", classes=False) == r"a\[b\]\.py"  # CODEOWNERS: literal


def test_a_marker_imported_from_a_module_the_tree_lacks_is_a_note(tmp_path):
    # Collection never imports a file, so a test file taking its markers from another
    # project's module (SGLang's) passed list, nox -l, the dry run and matrix, then
    # failed at the run's import. Found in the tree (a package root, a folder above the
    # file, relative), or from ci_register, it says nothing.
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "catalog.toml").write_text(
        '[collect]\ntests = "tests"\nglobs = ["**/test_*.py"]\n\n[markers]\nregister_cpu_ci = "cpu"\n\n'
        '[suites.unit]\nbackend = "cpu"\ndescription = "U."\nschedule = "per-commit"\nshard_budget_s = 60\n')
    body = 'register_cpu_ci(est_time=1, suite="unit")\n\ndef test_a():\n    pass\n'
    files = {
        "tests/test_ours.py": "from ci_register import register_cpu_ci\n" + body,
        "tests/test_theirs.py": "import os\nfrom sglang.test.ci.ci_register import (\n    register_cpu_ci,\n)\n" + body,
        "tests/test_src.py": "from mypkg.ci import register_cpu_ci\n" + body,
        "tests/sub/test_near.py": "from helpers import register_cpu_ci\n" + body,
        "tests/sub/test_rel.py": "from .helpers import register_cpu_ci\n" + body,
        "src/mypkg/__init__.py": "", "src/mypkg/ci.py": "", "tests/helpers.py": "", "tests/sub/helpers.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    col = collect(load_catalog(tmp_path / "ci" / "catalog.toml"), base=tmp_path)
    assert not col.issues and len(col.registrations) == 5
    assert [str(n) for n in col.notes] == [
        "tests/test_theirs.py:2: register_cpu_ci is imported from sglang.test.ci.ci_register, which this tree "
        "lacks: the run imports the file and fails unless sglang.test.ci.ci_register is installed there; "
        "import it from ci_register"]
