"""Reading a miles-shaped tree as it is: implicit registrations by folder, miles'
register_ci_gate signature, gates below top level, labels selecting what runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ci_register.registered.catalog import CatalogError, parse_catalog
from ci_register.registered.collect import collect, parse_file

ROOT = Path(__file__).resolve().parents[1]
MILES_MIRROR = Path("/work/.mirror/radixark+miles/repo")

CATALOG = """
[collect]
tests = "tests"
globs = ["fast/**/test_*.py", "e2e/**/test_*.py"]
require = "none"
gate_mode = "warn"

[implicit]
"fast/**" = "stage-a-cpu"

[markers]
register_cpu_ci = "cpu"
register_cuda_ci = "cuda"

[suites.stage-a-cpu]
backend = "cpu"
description = "cpu"
schedule = "per-commit"
shard_budget_s = 600

[suites.stage-c-8-gpu-h200]
backend = "cuda"
description = "8 H200"
schedule = "per-commit"
shard_budget_s = 3600
[suites.stage-c-8-gpu-h200.hardware]
gpu_count = 8
"""


def cat(text: str = CATALOG):
    return parse_catalog(text, Path("ci/catalog.toml"))


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_implicit_folder_registers_files_without_a_call(tmp_path):
    root = tree(tmp_path, {
        "tests/fast/a/test_plain.py": "def test_a(): pass\n",
        "tests/fast/test_explicit.py": 'register_cpu_ci(7, "stage-a-cpu")\ndef test_a(): pass\n',
        "tests/e2e/test_gpu.py": 'register_cuda_ci(600, "stage-c-8-gpu-h200", labels=["fsdp"])\ndef test_a(): pass\n',
        "tests/e2e/test_none.py": "def test_a(): pass\n",
    })
    col = collect(cat(), base=root)
    regs = {r.path: (r.suite, r.est_time, r.marker) for r in col.registrations}
    assert regs["tests/fast/a/test_plain.py"] == ("stage-a-cpu", 1.0, "[implicit]")
    assert regs["tests/fast/test_explicit.py"] == ("stage-a-cpu", 7.0, "register_cpu_ci")
    assert [i.path for i in col.issues] == ["tests/e2e/test_none.py"]  # outside the implicit folder


def test_implicit_rule_names_a_declared_suite():
    with pytest.raises(CatalogError, match=r"\[implicit\] 'fast/\*\*' = 'stage-a-cp'"):
        cat(CATALOG.replace('"fast/**" = "stage-a-cpu"', '"fast/**" = "stage-a-cp"'))


def test_miles_gate_signature_maps_onto_gate_options():
    src = ('register_cpu_ci(5, "stage-a-cpu")\n'
           'register_ci_gate(metric_key="train/grad_norm")\n'
           'register_ci_gate(metric_key="train/ppo_kl", steps="all", constraint={"rel_up": 0.5, "abs_floor_up": 0.02, "rel_down": 0.8}, enforce=True)\n'
           'register_ci_gate(metric_key="rollout/raw_reward", steps=[0, 5], enforce=False, allowlist_reason="shadow")\n'
           "def test_a(): pass\n")
    _, gates, errs = parse_file(src, "tests/e2e/test_x.py", cat())
    assert errs == []
    assert [(g.metric_key, g.options) for g in gates] == [
        ("train/grad_norm", {"mode": "warn"}),  # miles' default: report, never fail
        ("train/ppo_kl", {"mode": "enforce", "min_change": 0.5}),
        ("rollout/raw_reward", {"mode": "warn"}),
    ]
    assert gates[1].miles == {"steps": "all", "constraint": {"rel_up": 0.5, "abs_floor_up": 0.02, "rel_down": 0.8}, "enforce": True}
    # This tool's own catalogs keep enforcing by default.
    own = parse_catalog(CATALOG.replace('gate_mode = "warn"\n', ""), Path("c.toml"))
    _, gates, _ = parse_file(src, "tests/e2e/test_x.py", own)
    assert gates[0].options == {}


@pytest.mark.parametrize(("call", "fragment"), [
    ('register_ci_gate(metric_key="k", enforce="yes")', "enforce must be True or False"),
    ('register_ci_gate(metric_key="k", enforce=True, mode="warn")', "both enforce= and mode="),
    ('register_ci_gate(metric_key="k", constraint={"rel_sideways": 1})', "constraint must be a dict"),
    ('register_ci_gate(metric_key="k", steps=[])', "steps must be"),
])
def test_bad_miles_gate_keywords_are_one_line(call, fragment):
    _, _, errs = parse_file(f'register_cpu_ci(5, "stage-a-cpu")\n{call}\ndef test_a(): pass\n', "tests/e2e/test_x.py", cat())
    assert len(errs) == 1 and fragment in errs[0].message and errs[0].line == 2


def test_gate_below_top_level_is_a_note_not_an_error():
    src = ('register_cpu_ci(5, "stage-a-cpu")\n'
           "def test_gate_parser():\n"
           '    register_ci_gate(metric_key="x", steps="last")\n')
    notes = []
    regs, gates, errs = parse_file(src, "tests/e2e/test_x.py", cat(), notes=notes)
    assert errs == [] and gates == [] and len(regs) == 1
    assert len(notes) == 1 and notes[0].line == 3 and "declares no gate" in notes[0].message


def test_labels_select_what_runs(tmp_path):
    root = tree(tmp_path, {
        "tests/e2e/test_fsdp.py": 'register_cuda_ci(600, "stage-c-8-gpu-h200", labels=["fsdp"])\ndef test_a(): pass\n',
        "tests/e2e/test_lora.py": 'register_cuda_ci(600, "stage-c-8-gpu-h200", labels=["lora", "short"])\ndef test_a(): pass\n',
        "tests/e2e/test_any.py": 'register_cuda_ci(600, "stage-c-8-gpu-h200")\ndef test_a(): pass\n',
    })
    col = collect(cat(), base=root)
    pick = lambda labels: [r.path.rsplit("/", 1)[1] for r in col.for_suite("stage-c-8-gpu-h200", labels=labels)]  # noqa: E731
    assert pick(None) == ["test_any.py", "test_fsdp.py", "test_lora.py"]
    assert pick(["short"]) == ["test_any.py", "test_lora.py"]
    assert pick([]) == ["test_any.py"]


@pytest.mark.skipif(not MILES_MIRROR.is_dir(), reason="needs a fetched miles mirror at /work/.mirror/radixark+miles")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # miles' own parser meets a test file's escapes
def test_miles_real_tree_reads_equal(capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import adopt_miles
    finally:
        sys.path.pop(0)
    assert adopt_miles.main(["--mirror", str(MILES_MIRROR)]) == 0, capsys.readouterr().out


def test_labels_outside_the_catalogs_registry_are_errors():
    text = CATALOG.replace('gate_mode = "warn"', 'gate_mode = "warn"\nlabels = ["fsdp", "short"]')
    _, _, errs = parse_file('register_cuda_ci(600, "stage-c-8-gpu-h200", labels=["fdsp"])\ndef test_a(): pass\n',
                            "tests/e2e/test_x.py", cat(text))
    assert len(errs) == 1 and "unknown label 'fdsp'; closest: fsdp" in errs[0].message


@pytest.mark.skipif(not MILES_MIRROR.is_dir(), reason="needs a fetched miles mirror at /work/.mirror/radixark+miles")
@pytest.mark.parametrize("event", ["push", "schedule"])
def test_shipped_catalog_builds_a_matrix_for_miles_at_its_commit(tmp_path, event):
    """The example was written for miles 31f1ca96, whose long e2e files (5,000-9,000 s)
    exceeded a 3,600 s shard budget: `matrix` refused the whole tree."""
    import subprocess

    archive = subprocess.run(["git", "-C", str(MILES_MIRROR), "archive", "31f1ca961a94cb860cec3b2dea34ec332bfa8f76", "tests"],
                             capture_output=True, check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True, timeout=120)
    r = subprocess.run([sys.executable, "-m", "ci_register", "matrix", "--root", str(tmp_path), "--catalog",
                        str(ROOT / "examples" / "miles" / "catalog.toml"), "--event", event],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-600:]
    jobs = json.loads(r.stdout)["include"]
    assert jobs and all(j["suite"] for j in jobs)


def test_catalog_gate_defaults_fill_a_bare_declaration_like_miles_gate_defaults(tmp_path):
    cat = parse_catalog((ROOT / "examples" / "miles" / "catalog.toml").read_text(), tmp_path / "catalog.toml")
    assert cat.gate_defaults["rollout/tito_session_mismatch_rate/v1/assistant_text"]["steps"] == "last"
    _, gates, errs = parse_file(
        'register_cuda_ci(600, "stage-c-8-gpu-h200")\n'
        'register_ci_gate(metric_key="rollout/tito_session_mismatch_rate/v1/assistant_text")\n'
        'register_ci_gate(metric_key="train/grad_norm", steps="last", enforce=True)\n'
        'register_ci_gate(metric_key="not/in/defaults")\n'
        'def test_a(): pass\n', "tests/e2e/test_x.py", cat)
    assert errs == []
    got = {g.metric_key: g for g in gates}
    bare = got["rollout/tito_session_mismatch_rate/v1/assistant_text"]
    assert bare.options == {"mode": "warn", "min_change": 1.0}  # the band's tighter relative side
    assert bare.miles == {"steps": "last", "constraint": {"rel_up": 1.0, "abs_floor_up": 0.1, "rel_down": 1.0}}
    own = got["train/grad_norm"]  # what the call says wins; the rest comes from the defaults
    assert own.options == {"mode": "enforce", "min_change": 0.5}
    assert own.miles["steps"] == "last" and own.miles["constraint"]["rel_down"] == 0.8
    assert got["not/in/defaults"].options == {"mode": "warn"}


def test_gate_defaults_with_an_unknown_option_name_file_and_key(tmp_path):
    text = CATALOG + '\n[gate_defaults."a/b"]\nband = 0.5\n'
    with pytest.raises(CatalogError, match=r"catalog\.toml:\d+: gate_defaults 'a/b': unknown option 'band'"):
        parse_catalog(text, tmp_path / "catalog.toml")
