from __future__ import annotations

from pathlib import Path

import pytest

from ci_register.registered.catalog import CatalogError, load_catalog, parse_catalog

ROOT = Path(__file__).resolve().parents[1]

MINIMAL = """
[suites.cpu]
backend = "cpu"
description = "cpu things"
schedule = "per-commit"
shard_budget_s = 600
"""


def test_shipped_catalog_has_the_required_suites():
    cat = load_catalog(ROOT / "suites" / "catalog.toml")
    for name in ("cpu", "base-b-1gpu", "stage-c-4gpu", "gb300-nightly", "rocm-mi350-nightly", "base-b-2gpu"):
        assert name in cat.suites
    c4 = cat.suites["stage-c-4gpu"].hardware
    assert (c4.gpu_count, c4.gpu_models) == (4, ("H200",))
    assert cat.suites["stage-c-4gpu"].hardware.describe() == "4x H200 (capability 9.0)"
    gb = cat.suites["gb300-nightly"]
    assert gb.nightly and gb.hardware.min_capability.admits_as_min((10, 3))
    assert gb.hardware.max_capability.admits_as_max((10, 3))  # "10.x" admits any minor
    assert not gb.hardware.max_capability.admits_as_max((11, 0))
    assert cat.suites["rocm-mi350-nightly"].backend == "rocm"
    assert cat.markers["register_cuda_ci"] == "cuda"


def test_tags_drive_nox_selection():
    cat = parse_catalog(MINIMAL, Path("c.toml"))
    assert cat.suites["cpu"].tags() == ["cpu", "0gpu", "per-commit"]  # backend cpu: "cpu" once


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (MINIMAL + "\n[suites.cpu]\nbackend='cpu'\n", "malformed catalog"),  # duplicate table
        (MINIMAL.replace('"cpu"\ndescription', '"tpu"\ndescription'), "backend 'tpu'"),
        (MINIMAL.replace("schedule = \"per-commit\"", "schedule = \"weekly\""), "schedule 'weekly'"),
        (MINIMAL.replace("shard_budget_s = 600", "shard_budget_s = -1"), "shard_budget_s"),
        (MINIMAL.replace("shard_budget_s = 600", "shard_budget_s = 600\ncolour = 1"), "unknown field 'colour'"),
        (MINIMAL.replace("description = \"cpu things\"\n", ""), "missing 'description'"),
        (MINIMAL + "[suites.cpu.hardware]\ngpu_count = 2\n", "cpu suite but asks for 2 GPUs"),
        ("[suites.g]\nbackend='cuda'\ndescription='x'\nschedule='nightly'\nshard_budget_s=1\n", "gpu_count >= 1"),
        ("[suites.g]\nbackend='cuda'\ndescription='x'\nschedule='nightly'\nshard_budget_s=1\n[suites.g.hardware]\ngpu_count=1\nmin_capability='nine'\n", "capability 'nine'"),
        ("[markers]\nregister_tpu_ci='tpu'\n" + MINIMAL, "unknown backend 'tpu'"),
        ("[suites.g]\nbackend='cuda'\ndescription='x'\nschedule='nightly'\nshard_budget_s=1\n[suites.g.hardware]\ngpu_count=1\ncolor=2\n", "unknown field 'color' in [suites.g.hardware]"),
        ("", "defines no suites"),
    ],
)
def test_bad_catalogs_are_one_line_errors_with_a_line_number(text, fragment):
    with pytest.raises(CatalogError) as info:
        parse_catalog(text, Path("suites/catalog.toml"))
    msg = str(info.value)
    assert fragment in msg
    assert "\n" not in msg
    assert msg.startswith("suites/catalog.toml:")


def test_missing_catalog_file(tmp_path):
    with pytest.raises(CatalogError, match="catalog not found"):
        load_catalog(tmp_path / "nope.toml")


def test_other_marker_names_are_data():
    cat = parse_catalog("[markers]\nregister_amd_ci = 'rocm'\nregister_cuda_ci='cuda'\n" + MINIMAL, Path("c.toml"))
    assert cat.markers == {"register_amd_ci": "rocm", "register_cuda_ci": "cuda"}
