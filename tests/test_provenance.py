"""gates.store.provenance: fingerprints, nvidia-smi parsing, CI environment, and safe probes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ci_register.registered import machine
from ci_register.registered.machine import fingerprint_gpus
from gates.store import provenance
from gates.store.provenance import (
    ci_from_env,
    collect_provenance,
    detect_hardware,
    fingerprint_key,
    git_info,
    parse_nvidia_smi,
)

SMI = """NVIDIA H200, 143771, 570.124.06, 9.0
NVIDIA H200, 143771, 570.124.06, 9.0
"""


def test_parse_nvidia_smi():
    gpus = parse_nvidia_smi(SMI + "\n garbage line\n")
    assert gpus == [{"name": "NVIDIA H200", "driver": "570.124.06", "memory_mib": 143771,
                     "capability": "9.0"}] * 2


def test_parse_nvidia_smi_unsupported_fields():
    [gpu] = parse_nvidia_smi("Tesla T4, [N/A], 535.1, [N/A]")
    assert gpu["memory_mib"] is None and gpu["capability"] is None


def test_fingerprint_is_stable_and_ignores_versions():
    hw = {"gpus": parse_nvidia_smi(SMI), "driver": "570", "torch": "2.6"}
    key = fingerprint_key(hw)
    assert key == "nvidia-h200-x2-sm90"
    assert fingerprint_key({**hw, "driver": "580", "torch": "2.9"}) == key
    assert fingerprint_key({"gpus": hw["gpus"][:1]}) != key
    assert fingerprint_key({}) == "cpu"
    # The GPU count reads back from the key (trim's GPU-minutes without a catalog).
    assert fingerprint_gpus(key) == 2 and fingerprint_gpus("cpu") == 0
    assert fingerprint_gpus(fingerprint_key({"gpus": [{"name": "NVIDIA H200"}] * 8})) == 8
    assert fingerprint_gpus("my-box") is None


def test_fingerprint_of_many_models_is_short():
    hw = {"gpus": [{"name": f"Vendor Model Number {i} Extended Edition", "capability": "8.0"}
                   for i in range(8)]}
    key = fingerprint_key(hw)
    assert len(key) <= 64 and key == fingerprint_key(hw)


def test_ci_from_env_github():
    env = {"GITHUB_SHA": "abc", "GITHUB_REF_NAME": "main", "GITHUB_SERVER_URL": "https://gh.io/",
           "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "42"}
    assert ci_from_env(env) == {"commit": "abc", "branch": "main",
                                "ci_url": "https://gh.io/o/r/actions/runs/42"}
    assert ci_from_env({}) == {"commit": None, "branch": None, "ci_url": None}


def test_probes_survive_missing_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git, no nvidia-smi
    hw = detect_hardware(probe_torch=False)
    assert hw["gpus"] == [] and hw["python"]
    assert git_info(tmp_path) == {"commit": None, "branch": None}
    prov = collect_provenance("cpu", root=tmp_path, env={}, hardware=hw)
    assert prov.fingerprint == "cpu" and len(prov.run_id) == 32 and prov.commit is None


def test_fake_nvidia_smi_is_used(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nif [ -n \"$1\" ]; then printf '{SMI}'; "
                   "else echo 'CUDA Version: 12.8'; fi\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    hw = detect_hardware(probe_torch=False)
    assert hw["vendor"] == "nvidia" and len(hw["gpus"]) == 2
    assert hw["driver"] == "570.124.06" and hw["cuda_driver"] == "12.8"
    assert fingerprint_key(hw) == "nvidia-h200-x2-sm90"


FAKE_PROBE = """
import json, sys
gpus = [{"name": "AMD Instinct MI300X", "memory_mib": 196592, "capability": "9.4"}]
print("noise from an import")
print(json.dumps({"torch": "9.9.9", "cuda": None, "hip": "6.2",
                  "gpus": gpus if sys.argv[1:] == ["gpus"] else [], "argv": sys.argv[1:]}))
"""


@pytest.fixture
def fake_torch(monkeypatch):
    # The probe runs a child interpreter; swap its script for one that needs no torch.
    monkeypatch.setattr(machine, "_TORCH_PROBE", FAKE_PROBE)
    monkeypatch.setattr(machine.importlib.util, "find_spec", lambda name: object())
    monkeypatch.delitem(sys.modules, "torch", raising=False)


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    # An nvidia-smi that prints the two-H200 query answer, alone on PATH.
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{SMI}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


def test_gpus_from_torch_probe_where_nvidia_smi_is_missing(tmp_path, monkeypatch, fake_torch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(machine, "_gpu_device_nodes", lambda: True)
    hw = detect_hardware()
    assert hw["vendor"] == "amd" and hw["torch"] == "9.9.9" and hw["hip"] == "6.2"
    assert fingerprint_key(hw) == "amd-instinct-mi300x-x1-sm94"


def test_torch_probe_skips_gpus_when_nvidia_smi_saw_them(monkeypatch, fake_torch, fake_smi):
    monkeypatch.setattr(machine, "_gpu_device_nodes", lambda: True)
    assert provenance.torch_probe(gpus=False)["argv"] == []
    hw = detect_hardware()
    assert fingerprint_key(hw) == "nvidia-h200-x2-sm90" and hw["torch"] == "9.9.9"


def test_visible_devices_narrow_the_fingerprint(monkeypatch, fake_torch, fake_smi):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    hw = detect_hardware(probe_torch=False)
    assert fingerprint_key(hw) == "nvidia-h200-x1-sm90" and hw["cuda_visible_devices"] == "1"


def test_no_torch_probe_without_gpu_device_nodes(tmp_path, monkeypatch, fake_torch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(machine, "_gpu_device_nodes", lambda: False)
    calls = []
    monkeypatch.setattr(machine, "torch_probe", lambda **kw: calls.append(kw) or {})
    assert fingerprint_key(detect_hardware()) == "cpu" and calls == []


def test_failing_torch_probe_is_empty(monkeypatch, fake_torch):
    monkeypatch.setattr(machine, "_TORCH_PROBE", "raise SystemExit(3)")
    assert provenance.torch_probe() == {}


def test_git_info_in_a_repo(tmp_path):
    subprocess.run(["git", "init", "-q", "-b", "feature", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=a@b", "-c", "user.name=a",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    info = git_info(tmp_path)
    assert info["branch"] == "feature" and len(info["commit"]) == 40


def test_ci_env_wins_over_git(tmp_path):
    prov = collect_provenance("s", root=tmp_path, hardware={},
                              env={"GITHUB_SHA": "f" * 40, "GITHUB_REF_NAME": "pr-1"},
                              run_id="given", shard=(2, 3))
    assert (prov.commit, prov.branch, prov.run_id, prov.shard_index, prov.shard_count) == (
        "f" * 40, "pr-1", "given", 2, 3)


def test_commit_override_for_copied_trees():
    from gates.store.provenance import ci_from_env

    got = ci_from_env({"GATES_COMMIT": "abc123", "GATES_BRANCH": "main", "GITHUB_SHA": "zzz"})
    assert got["commit"] == "abc123" and got["branch"] == "main"


def test_gpu_uuid_is_kept_when_nvidia_smi_gives_it():
    from gates.store.provenance import parse_nvidia_smi

    got = parse_nvidia_smi("NVIDIA H200, 143771, 580.159.04, 9.0, GPU-1a2b3c4d-0000-1111-2222-333344445555\n")
    assert got[0]["uuid"] == "GPU-1a2b3c4d-0000-1111-2222-333344445555" and got[0]["capability"] == "9.0"
    assert "uuid" not in parse_nvidia_smi("NVIDIA H200, 143771, 580.159.04, 9.0\n")[0]


def test_fingerprint_detection_skips_the_version_probe_when_smi_names_the_gpus(monkeypatch, fake_torch, fake_smi):
    monkeypatch.setattr(machine, "_gpu_device_nodes", lambda: True)
    calls = []
    monkeypatch.setattr(machine, "torch_probe", lambda **kw: calls.append(kw) or {})
    assert fingerprint_key(detect_hardware(versions=False)) == "nvidia-h200-x2-sm90" and calls == []
    detect_hardware()
    assert calls == [{"gpus": False}]


def test_a_credential_in_the_ci_url_is_masked_before_it_is_stored():
    got = ci_from_env({"GATES_CI_URL": "https://bob:hunter2@ci.example.com/run/5?token=tok123"})
    assert got["ci_url"] == "https://bob:***@ci.example.com/run/5?token=***"
    got = ci_from_env({"GITHUB_SERVER_URL": "https://x:pat_abc@ghe.example", "GITHUB_REPOSITORY":
                       "o/r", "GITHUB_RUN_ID": "7"})
    assert "pat_abc" not in got["ci_url"] and got["ci_url"].endswith("/o/r/actions/runs/7")


@pytest.mark.parametrize(("name", "value", "words"), [
    ("GATES_COMMIT", "abc\n::error::x", "control character"),
    ("GITHUB_SHA", "f" * 65, "65 characters"),
    ("GATES_BRANCH", "b" * 100_000, "100000 characters"),
    ("GITHUB_HEAD_REF", "feature\r", "control character"),
    ("GATES_CI_URL", "https://ci/" + "x" * 3000, "3011 characters"),
])
def test_a_ci_variable_no_run_should_store_is_refused_by_name(name, value, words):
    from gates.store.provenance import ProvenanceError

    with pytest.raises(ProvenanceError) as err:
        ci_from_env({name: value})
    message = str(err.value)
    assert message.startswith(f"{name}: ") and words in message and "\n" not in message
    assert value not in message  # the value itself may be the secret or the garbage
