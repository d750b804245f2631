from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_register.registered.catalog import load_catalog
from ci_register.running.hardware import FAKE_ENV, GPU, Machine, check, detect

CAT = load_catalog(Path(__file__).resolve().parents[1] / "suites" / "catalog.toml")


def m(*gpus, vendor="nvidia"):
    return Machine(vendor, tuple(gpus))


H200 = GPU("NVIDIA H200", (9, 0), 143771)
H100 = GPU("NVIDIA H100 80GB HBM3", (9, 0), 81559)
A100 = GPU("NVIDIA A100-SXM4-80GB", (8, 0))
GB300 = GPU("NVIDIA GB300", (10, 3))
B200 = GPU("NVIDIA B200", (10, 0))


def test_cpu_suite_runs_anywhere():
    assert check(CAT.suites["cpu"], m()) is None


def test_stage_c_needs_four_h200_and_says_what_it_found():
    assert check(CAT.suites["stage-c-4gpu"], m(H200, H200, H200, H200)) is None
    msg = check(CAT.suites["stage-c-4gpu"], m(H200))
    assert msg == "stage-c-4gpu needs 4x H200 (capability 9.0); found 1x NVIDIA H200 (capability 9.0)"
    # An H100 is also 9.0: the model name decides.
    assert "needs 4x H200" in check(CAT.suites["stage-c-4gpu"], m(H100, H100, H100, H100))


def test_capability_ranges():
    base = CAT.suites["base-b-1gpu"]
    assert check(base, m(H100)) is None and check(base, m(GB300)) is None
    assert "capability 9.0 or newer" in check(base, m(A100))
    gb = CAT.suites["gb300-nightly"]
    assert check(gb, m(GB300, GB300, GB300, GB300)) is None
    assert check(gb, m(B200, B200, B200, B200)) is not None  # model must match
    assert check(gb, m(H200, H200, H200, H200)) is not None


def test_rocm_suite_wants_amd():
    s = CAT.suites["rocm-mi350-nightly"]
    assert check(s, m(*[GPU("AMD Instinct MI350X")] * 4, vendor="amd")) is None
    assert check(s, m(H200, H200, H200, H200)) is not None


def test_no_gpu_message():
    msg = check(CAT.suites["base-b-1gpu"], Machine("none", (), None, "none", ("torch sees no GPU",)))
    assert msg.startswith("base-b-1gpu needs 1x GPU (capability 9.0 or newer); found no GPU")


def test_fake_hardware_env(monkeypatch):
    monkeypatch.setenv(FAKE_ENV, json.dumps({"gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}] * 2}))
    got = detect()
    assert got.vendor == "nvidia" and len(got.gpus) == 2 and got.gpus[0].capability == (9, 0)


@pytest.mark.parametrize("raw", ["{bad", "[]", '{"gpus": "x"}', '{"gpus": [{"name": 1}]}',
                                 '{"gpus": [{}]}'])
def test_a_malformed_fake_hardware_is_one_line_naming_the_variable(monkeypatch, raw):
    # These raised AttributeError / KeyError: a traceback and exit 1 from a run.
    monkeypatch.setenv(FAKE_ENV, raw)
    with pytest.raises(ValueError, match=f"^{FAKE_ENV}: .*give e.g."):
        detect()


def test_detect_never_raises_here(monkeypatch):
    monkeypatch.delenv(FAKE_ENV, raising=False)
    assert isinstance(detect(use_torch=False), Machine)


def test_visible_indices_follow_cuda_rules():
    from ci_register.running.hardware import visible_indices

    assert visible_indices(None, 4) is None
    assert visible_indices("2,0", 4) == [2, 0]
    assert visible_indices("1, 7", 2) == [1]  # an index past the last GPU is ignored
    assert visible_indices("", 4) == []  # empty hides every GPU, as in CUDA
    assert visible_indices("GPU-1a2b,GPU-3c4d", 4) is None  # UUIDs: left to the caller
    # CUDA stops at the first entry that is not a GPU: the ones after it are hidden.
    assert visible_indices("-1", 4) == []
    assert visible_indices("0,-1,1", 4) == [0]
    assert visible_indices("7,0", 4) == []
    assert visible_indices("1,1,2", 4) == [1]


def test_nvidia_smi_path_keeps_gpus_named_by_uuid(tmp_path, monkeypatch):
    from ci_register.running import hardware

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf 'NVIDIA H200, 143771, 580.159.04, 9.0, GPU-27ae3a54\\nNVIDIA H200, 143771, 580.159.04, 9.0, GPU-9c0d1e2f\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-27ae3a54")
    monkeypatch.delenv(FAKE_ENV, raising=False)
    m = hardware.detect(use_torch=False)
    assert len(m.gpus) == 2 and m.driver == "580.159.04" and m.source == "nvidia-smi"
    assert m.gpus[0] == hardware.GPU("NVIDIA H200", (9, 0), 143771)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert len(hardware.detect(use_torch=False).gpus) == 1


def test_run_probe_is_best_effort(tmp_path):
    from ci_register.running.hardware import run_probe

    assert run_probe(["no-such-probe-here"]) is None
    assert run_probe(["sh", "-c", "echo ok"]) == "ok\n"
    assert run_probe(["sh", "-c", "pwd"], cwd=tmp_path).strip() == str(tmp_path)
    assert run_probe(["sh", "-c", "echo no; exit 3"]) is None  # a failing probe says nothing
    assert run_probe(["sleep", "5"], timeout=0.2) is None  # nor does a hung one


def test_fake_hardware_is_what_the_check_the_planner_and_the_record_see(monkeypatch, tmp_path):
    # One machine model: the faked GPUs pass the suite check, name the planner's
    # fingerprint and the fingerprint a run records (not "cpu").
    from ci_register.registered.machine import FINGERPRINT_ENV, detect_hardware, this_fingerprint
    from gates.store.provenance import collect_provenance

    monkeypatch.delenv(FINGERPRINT_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, no git
    monkeypatch.setenv(FAKE_ENV, json.dumps(
        {"gpus": [{"name": "NVIDIA H200", "capability": [9, 0], "uuid": "GPU-a"}]}))
    assert check(CAT.suites["base-b-1gpu"], detect()) is None
    assert this_fingerprint() == "nvidia-h200-x1-sm90"
    prov = collect_provenance("base-b-1gpu", root=tmp_path, env={})
    assert prov.fingerprint == "nvidia-h200-x1-sm90"
    assert prov.hardware["gpus"] == [{"name": "NVIDIA H200", "capability": "9.0", "uuid": "GPU-a"}]
    assert detect_hardware()["source"] == "fake"
    monkeypatch.delenv(FAKE_ENV)
    assert this_fingerprint() == "cpu" and detect().gpus == ()


@pytest.mark.parametrize(("visible", "count"), [("0,-1,1", 1), ("-1", 0), ("1,0", 2)])
def test_a_cuda_device_list_cut_short_is_what_the_suite_check_counts(tmp_path, monkeypatch,
                                                                     visible, count):
    from ci_register.running import hardware

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf 'NVIDIA H200, 143771, 580.159.04, 9.0\\n"
                   "NVIDIA H200, 143771, 580.159.04, 9.0\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.delenv(FAKE_ENV, raising=False)
    assert len(hardware.detect(use_torch=False).gpus) == count
