"""Reading an SGLang-shaped tree as it is: stage + runner_config, every backend, suites
keyed by (backend, name), est_time=0, suite="" on disabled files, files not named test_*,
files outside the globs, empty trees, short error lines, matrix chunks and reruns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from catalog_seed import catalog_text

from ci_register.planning.matrix import MAX_JOBS, MatrixError, chunk
from ci_register.registered.catalog import BACKENDS, CatalogError, parse_catalog
from ci_register.registered.collect import collect, parse_file
from ci_register.running.hardware import GPU, Machine, check
from ci_register.running.rerun import RerunError, plan_rerun

ROOT = Path(__file__).resolve().parents[1]

SGLANG_BACKENDS = ("cuda", "amd", "cpu", "npu", "xpu", "musa", "mlx")
COLLECT = {"tests": "test", "globs": ["registered/**/*.py"],
           "exclude": ["**/__init__.py", "**/conftest.py"], "require": "main"}
GPU1 = {"hardware": {"gpu_count": 1}}
SHARED = "a name CUDA and AMD both use"
SUITES = {
    "base-b-test-1-gpu-large": {"backend": "cuda", "description": "one large GPU", **GPU1},
    "stage-b-test-1-gpu-small-amd": {"backend": "amd", "description": "one AMD GPU", **GPU1},
    "shared-cuda": {"name": "shared", "backend": "cuda", "description": SHARED, **GPU1},
    "shared-amd": {"name": "shared", "backend": "amd", "description": SHARED, **GPU1},
    "base-a-test-cpu": {"backend": "cpu", "description": "cpu"},
    "stage-b-test-1-npu-a2": {"backend": "npu", "description": "one Ascend NPU", **GPU1},
    "stage-a-test-1-gpu-xpu": {"backend": "xpu", "description": "one Intel GPU", **GPU1},
    "nightly-musa-1-gpu": {"backend": "musa", "description": "one Moore Threads GPU",
                           "schedule": "nightly", **GPU1},
    "stage-a-unit-test-mlx": {"backend": "mlx", "description": "Apple silicon", **GPU1},
}


def sglang_catalog(suites: dict = SUITES, **collect) -> str:
    """SGLang's catalog: its markers and tree layout; ``collect`` adds or replaces keys."""
    return catalog_text(suites, markers={f"register_{b}_ci": b for b in SGLANG_BACKENDS},
                        collect={**COLLECT, **collect},
                        defaults={"schedule": "per-commit", "shard_budget_s": 1800})


CATALOG = sglang_catalog()

MAIN = '\nimport unittest\nclass TestX(unittest.TestCase):\n    def test_a(self): pass\nif __name__ == "__main__":\n    unittest.main()\n'


@pytest.fixture
def make_tree(catalog_tree):
    """make(root, files, catalog=CATALOG): an SGLang-shaped tree, its catalog at ci/."""

    def make(root: Path, files: dict[str, str], catalog: str = CATALOG) -> Path:
        return catalog_tree(files=files, root=root, text=catalog, at="ci/catalog.toml")

    return make


def cat(text: str = CATALOG):
    return parse_catalog(text, Path("ci/catalog.toml"))


def parse(src: str, catalog=None):
    return parse_file(src + MAIN, "test/registered/x.py", catalog or cat())


def test_stage_and_runner_config_make_sglangs_effective_suite():
    regs, _, errs = parse('register_cuda_ci(45, stage="base-b", runner_config="1-gpu-large")')
    assert errs == []
    assert (regs[0].suite, regs[0].declared, regs[0].stage, regs[0].runner_config) == (
        "base-b-test-1-gpu-large", "base-b-test-1-gpu-large", "base-b", "1-gpu-large")


def test_stage_suite_rule_is_catalog_data():
    renamed = {("base-a-cpu" if k == "base-a-test-cpu" else k): v for k, v in SUITES.items()}
    text = sglang_catalog(renamed, stage_suite="{stage}-{runner_config}")
    regs, _, errs = parse('register_cpu_ci(5, stage="base-a", runner_config="cpu")', cat(text))
    assert errs == [] and regs[0].suite == "base-a-cpu"
    with pytest.raises(CatalogError, match="stage_suite"):
        cat(sglang_catalog(stage_suite="{suite}"))


def test_every_sglang_backend_is_declared_as_itself():
    assert {"cuda", "amd", "cpu", "npu", "xpu", "musa", "mlx"} <= set(BACKENDS)
    src = "\n".join([
        'register_amd_ci(30, "stage-b-test-1-gpu-small-amd")',
        'register_npu_ci(30, "stage-b-test-1-npu-a2")',
        'register_xpu_ci(30, "stage-a-test-1-gpu-xpu")',
        'register_musa_ci(30, "nightly-musa-1-gpu", nightly=True)',
        'register_mlx_ci(30, "stage-a-unit-test-mlx")',
    ])
    regs, _, errs = parse(src)
    assert errs == []
    assert [r.backend for r in regs] == ["amd", "npu", "xpu", "musa", "mlx"]


def test_suites_are_keyed_by_backend_and_name():
    regs, _, errs = parse('register_cuda_ci(10, "shared")\nregister_amd_ci(12, "shared")')
    assert errs == []
    assert [(r.backend, r.suite, r.declared) for r in regs] == [("cuda", "shared-cuda", "shared"), ("amd", "shared-amd", "shared")]
    with pytest.raises(CatalogError, match="both the cuda suite 'shared'"):
        cat(sglang_catalog({**SUITES, "shared-amd": {**SUITES["shared-amd"], "backend": "cuda"}}))


def test_a_name_declared_for_another_backend_says_so():
    _, _, errs = parse('register_amd_ci(10, "base-b-test-1-gpu-large")')
    assert len(errs) == 1 and "declared only as a cuda suite" in errs[0].message


def test_hardware_check_knows_each_backend():
    suites = cat().suites
    npu = Machine("ascend", (GPU("Ascend910B"),), source="torch.npu")
    assert check(suites["stage-b-test-1-npu-a2"], npu) is None
    assert "found 1x Ascend910B" in check(suites["stage-a-test-1-gpu-xpu"], npu)
    nvidia = Machine("nvidia", (GPU("NVIDIA H200", (9, 0)),))
    assert check(suites["base-b-test-1-gpu-large"], nvidia) is None
    assert check(suites["stage-b-test-1-gpu-small-amd"], nvidia) is not None
    assert check(suites["stage-a-unit-test-mlx"], nvidia) is not None


def test_unknown_backend_check_fails_with_a_reason():
    from dataclasses import replace

    suite = replace(cat().suites["stage-b-test-1-npu-a2"], backend="tpu")
    msg = check(suite, Machine("nvidia", (GPU("NVIDIA H200", (9, 0)),)))
    assert msg and "no hardware check" in msg and "tpu" in msg


def test_est_time_zero_and_empty_suite_on_disabled():
    regs, _, errs = parse('register_cuda_ci(0, "base-b-test-1-gpu-large")\nregister_amd_ci(0, suite="", disabled="not ported")')
    assert errs == []
    assert [(r.est_time, r.suite, r.disabled) for r in regs] == [(0.0, "base-b-test-1-gpu-large", None), (0.0, "", "not ported")]
    _, _, errs = parse('register_amd_ci(5, suite="")')
    assert len(errs) == 1 and 'suite="" is only for disabled' in errs[0].message


def test_require_main_is_sglangs_rule():
    c = cat()
    no_main = 'register_cuda_ci(5, "base-b-test-1-gpu-large")\nimport unittest\nclass TestX(unittest.TestCase):\n    def test_a(self): pass\n'
    _, _, errs = parse_file(no_main, "test/registered/x.py", c)
    assert len(errs) == 1 and '__name__ == "__main__"' in errs[0].message
    # A file whose only registration is disabled needs no main block (as in SGLang).
    _, _, errs = parse_file(no_main.replace('"base-b-test-1-gpu-large")', '"base-b-test-1-gpu-large", disabled="x")'), "test/registered/x.py", c)
    assert errs == []


def test_error_suggests_the_closest_names_not_all():
    many = sglang_catalog({**SUITES, **{f"extra-{i}": {"backend": "cuda", "description": "x",
                                                       "shard_budget_s": 60, **GPU1}
                                        for i in range(40)}})
    _, _, errs = parse('register_cuda_ci(5, "base-b-test-1-gpu-largee")', cat(many))
    msg = errs[0].message
    assert "closest: base-b-test-1-gpu-large" in msg and "extra-3" not in msg and len(msg) < 300


def test_tree_not_named_test_and_outside_glob_and_empty(tmp_path, make_tree):
    root = make_tree(tmp_path, {
        "test/registered/core/flash_attn.py": 'register_cuda_ci(60, "base-b-test-1-gpu-large")' + MAIN,
        "test/registered/__init__.py": "",
        "test/manual/old.py": 'register_cuda_ci(60, "base-b-test-1-gpu-large")' + MAIN,
        "test/manual/defines.py": "def register_cuda_ci(est_time, suite=None):\n    return None\n",
    })
    c = parse_catalog((root / "ci/catalog.toml").read_text(), root / "ci/catalog.toml")
    col = collect(c, base=root)
    assert col.issues == []
    assert [r.path for r in col.registrations] == ["test/registered/core/flash_attn.py"]
    assert [(n.path, n.line) for n in col.notes] == [("test/manual/old.py", 1)]
    assert "no [collect] glob" in col.notes[0].message
    empty = parse_catalog(sglang_catalog(globs=["nothing/**/*.py"]), root / "ci/catalog.toml")
    col = collect(empty, base=root)
    assert len(col.issues) == 1 and "matches [collect] globs" in col.issues[0].message


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci_register", *args], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=60)


def test_cli_catalog_relative_to_root_and_empty_plan_is_exit_2(tmp_path, make_tree):
    root = make_tree(tmp_path / "adopter", {
        "test/registered/a.py": 'register_cuda_ci(60, "base-b-test-1-gpu-large")' + MAIN,
    })
    r = run_cli(tmp_path, "list", "--root", "adopter", "--catalog", "ci/catalog.toml", "--json")
    assert r.returncode == 0, r.stderr
    files = json.loads(r.stdout)["suites"]["base-b-test-1-gpu-large"]["files"]
    assert [f["path"] for f in files] == ["test/registered/a.py"]
    r = run_cli(root, "matrix", "--event", "push", "--catalog", "ci/catalog.toml", "--labels", "none-such")
    assert r.returncode == 0  # a file without labels runs under every label set
    (root / "test/registered/a.py").write_text('register_cuda_ci(60, "base-b-test-1-gpu-large", disabled="x")' + MAIN)
    r = run_cli(root, "matrix", "--event", "push", "--catalog", "ci/catalog.toml")
    assert r.returncode == 2 and "no registered file runs" in r.stderr
    (root / "test/registered/a.py").unlink()
    r = run_cli(root, "list", "--catalog", "ci/catalog.toml")
    assert r.returncode == 2 and "matches [collect] globs" in r.stderr


def test_matrix_past_256_jobs_is_chunked_or_refused():
    jobs = {"include": [{"name": str(i)} for i in range(MAX_JOBS * 2 + 3)]}
    with pytest.raises(MatrixError, match="exceed GitHub's 256"):
        chunk(jobs, None)
    parts = [chunk(jobs, i)["include"] for i in (1, 2, 3)]
    assert [len(p) for p in parts] == [256, 256, 3] and sum(parts, []) == jobs["include"]
    with pytest.raises(MatrixError, match="use 1..3"):
        chunk(jobs, 4)
    assert chunk({"include": jobs["include"][:5]}, None)["include"] == jobs["include"][:5]


def test_rerun_runs_the_enabled_registration_and_takes_test_folder_paths(tmp_path, make_tree):
    root = make_tree(tmp_path, {
        "test/registered/core/test_mixed.py": 'register_cuda_ci(60, "base-b-test-1-gpu-large")\n'
                                              'register_amd_ci(60, "stage-b-test-1-gpu-small-amd", disabled="rocm bug")' + MAIN,
    })
    for spec in ("test/registered/core/test_mixed.py", "core/test_mixed.py", "test_mixed.py"):
        sel, targets = plan_rerun(spec, root, root / "ci/catalog.toml")
        assert [t.suite for t in targets] == ["base-b-test-1-gpu-large"], spec
        assert [r.suite for r in sel.skipped] == ["stage-b-test-1-gpu-small-amd"]
    (root / "test/registered/core/test_mixed.py").write_text('register_cuda_ci(60, "base-b-test-1-gpu-large", disabled="gone")' + MAIN)
    with pytest.raises(RerunError, match="disabled in suite"):
        plan_rerun("core/test_mixed.py", root, root / "ci/catalog.toml")


def test_unchecked_backend_keeps_undeclared_names_listed_not_run(tmp_path, make_tree):
    text = sglang_catalog(unchecked_backends=["amd", "npu"])
    root = make_tree(tmp_path, {
        "test/registered/a.py": 'register_npu_ci(30, "base-b-test-1-npu-a3")\nregister_cuda_ci(5, "base-b-test-1-gpu-large")' + MAIN,
    }, catalog=text)
    c = parse_catalog(text, root / "ci/catalog.toml")
    col = collect(c, base=root)
    assert col.issues == []
    assert [(r.backend, r.suite, r.declared) for r in col.registrations] == [
        ("npu", "", "base-b-test-1-npu-a3"), ("cuda", "base-b-test-1-gpu-large", "base-b-test-1-gpu-large")]
    assert any("'base-b-test-1-npu-a3' is not declared" in n.message for n in col.notes)
    # A checked backend still refuses an undeclared name.
    _, _, errs = parse('register_xpu_ci(30, "stage-z-test-1-gpu-xpu")', cat(text))
    assert len(errs) == 1 and "unknown xpu suite" in errs[0].message


def test_sglang_benchmark_agrees_on_a_generated_tree(capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import adopt_sglang
    finally:
        sys.path.pop(0)
    assert adopt_sglang.main(["--synthetic", "3", "--shards", "2"]) == 0
    out = capsys.readouterr().out
    assert "registrations: SGLang 900, ours 900; suites differing: 0" in out
    assert "(none)" in out and "-undeclared" in out  # suite="" and unchecked-backend names compared too


def test_rerun_of_an_undeclared_unchecked_suite_says_it_has_no_session(tmp_path, make_tree):
    text = sglang_catalog(unchecked_backends=["npu"])
    root = make_tree(tmp_path, {
        "test/registered/test_npu.py": 'register_npu_ci(30, "base-b-test-1-npu-a3")' + MAIN,
    }, catalog=text)
    with pytest.raises(RerunError, match="npu suite 'base-b-test-1-npu-a3' has no session"):
        plan_rerun("test_npu.py", root, root / "ci/catalog.toml")


TRICKY = {
    "docstring_example_before": '"""Example:\nregister_cuda_ci(1, "nope")\n"""\nregister_cuda_ci(5, "base-b-test-1-gpu-large")' + MAIN,
    "docstring_example_after": 'register_cuda_ci(5, "base-b-test-1-gpu-large")\ndef f():\n    """\nregister_cuda_ci(1, "nope")\n"""\n' + MAIN,
    "multiline_call": 'import os\nregister_cuda_ci(\n    est_time=24, stage="base-b", runner_config="1-gpu-large"\n)\nX = 1' + MAIN,
    "nested": 'register_cuda_ci(5, "base-b-test-1-gpu-large")\ndef f():\n    register_cuda_ci(5, "base-b-test-1-gpu-large")\n' + MAIN,
    "no_main": 'register_cuda_ci(5, "base-b-test-1-gpu-large")\nimport unittest\n',
    "main_in_string_after": 'register_cuda_ci(5, "base-b-test-1-gpu-large")' + MAIN + 'DOC = """\nif __name__ == "__main__":\n    run()\n"""\n',
    "main_with_pass_only": 'register_cuda_ci(5, "base-b-test-1-gpu-large")\nif __name__ == "__main__":\n    pass\n',
    "attribute_call": 'import ci\nci.register_cuda_ci(5, "base-b-test-1-gpu-large")' + MAIN,
    "gate_and_call": 'register_cuda_ci(5, "base-b-test-1-gpu-large")\nregister_ci_gate(metric_key="a/b", better="lower")' + MAIN,
    "line_numbers": "\n" * 30 + 'register_cuda_ci(5, "base-b-test-1-gpu-large")\n' + "x = 1\n" * 50 + MAIN,
}


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_partial_parse_reads_what_the_full_tree_reads(name, monkeypatch):
    import ci_register.registered.collect as collect_mod

    c = cat()
    fast = collect_mod.parse_file(TRICKY[name], "test/registered/x.py", c)
    monkeypatch.setattr(collect_mod, "_partial_tree", lambda *a, **k: None)
    full = collect_mod.parse_file(TRICKY[name], "test/registered/x.py", c)
    strip = lambda result: ([(r.suite, r.line, r.est_time) for r in result[0]], [(g.metric_key, g.line) for g in result[1]],  # noqa: E731
                            [str(i) for i in result[2]])
    assert strip(fast) == strip(full)


def test_partial_parse_is_taken_for_plain_files_and_refused_for_nested_calls():
    from ci_register.registered.collect import _partial_tree

    names = {"register_cuda_ci", "register_amd_ci", "register_ci_gate"}
    for name in ("multiline_call", "line_numbers", "gate_and_call", "docstring_example_before"):
        assert _partial_tree(TRICKY[name], "x.py", names, True) is not None, name
    for name in ("nested", "attribute_call", "no_main", "main_in_string_after"):
        assert _partial_tree(TRICKY[name], "x.py", names, True) is None, name


SGLANG_MIRROR = Path("/work/.mirror/Ascend+sglang/repo")


@pytest.mark.skipif(not SGLANG_MIRROR.is_dir(), reason="needs a fetched SGLang mirror at /work/.mirror/Ascend+sglang")
def test_sglang_real_tree_reads_equal(capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import adopt_sglang
    finally:
        sys.path.pop(0)
    assert adopt_sglang.main(["--mirror", str(SGLANG_MIRROR), "--shards", "2"]) == 0, capsys.readouterr().out
    assert "suites differing: 0" in capsys.readouterr().out


def test_sglang_catalog_reads_sglangs_suite_lists(tmp_path):
    from ci_register.registered import sglang_catalog

    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "run_suite.py").write_text(
        "class HWBackend:\n    CPU = CUDA = AMD = NPU = 0\n"
        'PER_COMMIT_SUITES = {HWBackend.CPU: ["base-a-test-cpu"], HWBackend.CUDA: ["base-a-test-1-gpu-small", "base-c-test-8-gpu-h200"],\n'
        '    HWBackend.NPU: ["base-a-test-1-gpu-small", "stage-b-test-16-npu-a3"]}\n'
        'NIGHTLY_SUITES = {HWBackend.AMD: ["nightly-amd-8-gpu-mi35x"]}\n'
        'OTHER_SUITES = {HWBackend.CUDA: ["stress"]}\n')
    (tmp_path / "test" / "registered").mkdir()
    (tmp_path / "test" / "registered" / "long.py").write_text('register_cuda_ci(4000, "stress")' + MAIN)
    out = tmp_path / "catalog.toml"
    assert sglang_catalog.main([str(tmp_path), "--out", str(out)]) == 0
    c = parse_catalog(out.read_text(), out)
    assert c.find("npu", "base-a-test-1-gpu-small").name == "base-a-test-1-gpu-small-npu"
    assert c.find("cuda", "base-a-test-1-gpu-small").name == "base-a-test-1-gpu-small"
    assert c.suites["base-c-test-8-gpu-h200"].hardware.describe() == "8x H200"
    assert c.suites["stage-b-test-16-npu-a3"].hardware.gpu_count == 16
    assert c.suites["nightly-amd-8-gpu-mi35x"].nightly and c.suites["nightly-amd-8-gpu-mi35x"].hardware.gpu_models == ("MI350", "MI355")
    assert c.suites["stress"].schedule == "per-commit" and c.require == "main" and c.unchecked_backends == ("amd", "npu")
    assert c.suites["stress"].shard_budget_s == 4020 and c.suites["base-c-test-8-gpu-h200"].shard_budget_s == 1800


def test_list_json_includes_registrations_without_a_session_as_the_text_listing(tmp_path, make_tree):
    root = make_tree(tmp_path / "adopter", {
        "test/registered/test_npu.py": 'register_npu_ci(30, "base-b-test-1-npu-a3")' + MAIN,
        "test/registered/test_blank.py": 'register_cuda_ci(20, "", disabled="flaky")' + MAIN,
        "test/registered/a.py": 'register_cuda_ci(60, "base-b-test-1-gpu-large")' + MAIN,
    }, catalog=sglang_catalog(unchecked_backends=["npu"]))
    text = run_cli(root, "list", "--catalog", "ci/catalog.toml")
    assert text.returncode == 0, text.stderr
    assert "(no session" in text.stdout and "test_npu.py" in text.stdout and "test_blank.py" in text.stdout
    r = run_cli(root, "list", "--catalog", "ci/catalog.toml", "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    in_suites = [f["path"] for s in listed["suites"].values() for f in s["files"]]
    assert in_suites == ["test/registered/a.py"]
    assert [(f["path"], f["declared"]) for f in listed["no_session"]] == [
        ("test/registered/test_blank.py", ""),
        ("test/registered/test_npu.py", "base-b-test-1-npu-a3"),
    ]


@pytest.mark.parametrize("run_suite", [None, "PER_COMMIT_SUITES = {\n", "PER_COMMIT_SUITES = {}\n"])
def test_sglang_catalog_on_a_tree_it_cannot_read_is_one_error_line(tmp_path, run_suite):
    if run_suite is not None:
        (tmp_path / "test").mkdir()
        (tmp_path / "test" / "run_suite.py").write_text(run_suite)
    r = subprocess.run([sys.executable, "-m", "ci_register", "sglang-catalog", str(tmp_path), "--out",
                        str(tmp_path / "ci" / "catalog.toml")], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"error: {tmp_path / 'test' / 'run_suite.py'}") and "SGLang" in line, line
    assert not (tmp_path / "ci").exists()
