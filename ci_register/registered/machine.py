"""This machine's hardware, in one model: detection, the recorded description,
the fingerprint baselines match on, and the machine key that names a box.

One detection (:func:`detect_hardware`) serves the suite's hardware check
(`ci_register.running.hardware.detect`), the planner's fingerprint
(:func:`this_fingerprint`) and the provenance a run records (`gates.store.provenance`),
so the three cannot disagree: ``CI_REGISTER_FAKE_HARDWARE`` replaces it for all
of them. GPUs come from nvidia-smi; where it is missing (ROCm, slim containers)
from torch in a child process, then rocm-smi. Every probe is best effort: a
missing tool yields missing fields, never an exception.

Pure helpers (:func:`parse_nvidia_smi`, :func:`visible_indices`,
:func:`fingerprint_key`, :func:`host_key`) are separate from the probes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "FAKE_ENV",
    "FINGERPRINT_ENV",
    "SMI_QUERY",
    "detect_hardware",
    "fingerprint_gpus",
    "fingerprint_key",
    "host_key",
    "parse_nvidia_smi",
    "run_probe",
    "this_fingerprint",
    "torch_probe",
    "visible_indices",
]

# A JSON machine description that replaces detection, for tests and dry planning:
# {"vendor": "nvidia", "gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}]}
FAKE_ENV = "CI_REGISTER_FAKE_HARDWARE"
# A fingerprint that replaces the detected one where a planner must name it.
FINGERPRINT_ENV = "CI_REGISTER_FINGERPRINT"
_PROBE_TIMEOUT_S = 10.0
_TORCH_PROBE_TIMEOUT_S = 120.0  # a cold torch import on a network filesystem is slow
# uuid names the physical GPU: what a between-machine variance component groups by.
SMI_QUERY = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap,uuid",
             "--format=csv,noheader,nounits"]


# ---------------------------------------------------------------- pure helpers


def visible_indices(value: str | None, count: int) -> list[int] | None:
    """The GPU indices a CUDA_VISIBLE_DEVICES value leaves visible, out of ``count``.

    None when the variable is unset or names GPUs by UUID or MIG id (not mapped here:
    the list is left as it is); an empty value hides every GPU, as in CUDA.

    CUDA reads the list in order and stops at the first entry that is not a GPU (a
    negative, past the last GPU, or repeated): only the GPUs before it are visible.
    ``-1`` hides every GPU and ``0,-1,1`` leaves one, where reading on past the bad
    entry counted two (or all, for ``-1``), and a 2-GPU suite passed the hardware
    check on a host where CUDA showed it one.
    """
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not all(re.fullmatch(r"-?\d+", p) for p in parts):
        return None
    seen: list[int] = []
    for i in map(int, parts):
        if not 0 <= i < count or i in seen:
            break
        seen.append(i)
    return seen


def parse_nvidia_smi(csv_text: str) -> list[dict[str, object]]:
    """One dict per GPU (name, driver, memory_mib, capability "9.0", uuid when given)
    from ``SMI_QUERY``'s output; fields nvidia-smi reports as unsupported become None."""
    gpus: list[dict[str, object]] = []
    for line in csv_text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0]:
            continue
        name, memory, driver, cap = parts[:4]
        gpu: dict[str, object] = {"name": name, "driver": driver or None}
        try:
            gpu["memory_mib"] = int(float(memory))
        except ValueError:
            gpu["memory_mib"] = None
        gpu["capability"] = cap if re.fullmatch(r"\d+\.\d+", cap) else None
        if len(parts) > 4 and parts[4].startswith("GPU-"):
            gpu["uuid"] = parts[4]
        gpus.append(gpu)
    return gpus


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def fingerprint_key(hardware: Mapping[str, Any]) -> str:
    """Short stable key from GPU model(s), count and compute capability, or "cpu".

    Versions (driver, CUDA, torch) are deliberately left out: a driver bump must
    not orphan a metric's history. Example: "nvidia-h200-x8-sm90".
    """
    gpus = hardware.get("gpus") or []
    if not gpus:
        return "cpu"
    models = sorted({_slug(str(g.get("name") or "gpu")) for g in gpus})
    caps = sorted({str(g.get("capability") or "").replace(".", "") for g in gpus} - {""})
    key = f"{'+'.join(models)}-x{len(gpus)}"
    if caps:
        key += "-sm" + "+".join(caps)
    if len(key) > 64:  # many mixed models: keep it short but still stable
        key = key[:48] + "-" + hashlib.sha256(key.encode()).hexdigest()[:12]
    return key


def fingerprint_gpus(key: str) -> int | None:
    """The GPU count a :func:`fingerprint_key` names ("nvidia-h200-x8-sm90" -> 8; "cpu" -> 0),
    or None where it is not readable (a shortened key, a hand-set one)."""
    if key == "cpu":
        return 0
    found = re.search(r"-x(\d+)(?:-sm[0-9+]+)?$", key)
    return int(found.group(1)) if found else None


def host_key(hardware: Mapping[str, Any] | str | None) -> str | None:
    """The machine key: the physical GPUs a run used (their sorted uuids), or None
    when not recorded.

    Groups runs for the gate's between-host variance component: host names
    are often generic ("vm", a pod name), GPU uuids are not. Accepts the
    hardware dict or its JSON text (as stored in ``runs.hardware``); anything
    unreadable is None (an old run, no uuid), never an error.
    """
    if isinstance(hardware, str):
        try:
            hardware = json.loads(hardware)
        except (ValueError, RecursionError):  # RecursionError: nested past json's depth
            return None
    if not isinstance(hardware, Mapping):
        return None
    gpus = hardware.get("gpus")
    if not isinstance(gpus, list):
        return None
    ids = sorted(str(g["uuid"]) for g in gpus if isinstance(g, Mapping) and g.get("uuid"))
    return ",".join(ids) if ids and len(ids) == len(gpus) else None


# ---------------------------------------------------------------------- probes


def run_probe(cmd: list[str], *, cwd: str | os.PathLike[str] | None = None,
              timeout: float = 20.0) -> str | None:
    """stdout of a probe command, or None when it is missing, fails or hangs (best effort)."""
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                             check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _run(cmd: list[str]) -> str | None:
    return run_probe(cmd, timeout=_PROBE_TIMEOUT_S)


def _version(*dists: str) -> str | None:
    import importlib.metadata  # noqa: PLC0415 - ~30 ms, only when a run's provenance is collected

    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _cuda_from_smi_header() -> str | None:
    out = _run(["nvidia-smi"])
    match = re.search(r"CUDA Version:\s*([\d.]+)", out or "")
    return match.group(1) if match else None


# Runs in a child interpreter: initialising CUDA inside the pytest process would
# break tests that fork later ("Cannot re-initialize CUDA in forked subprocess").
_TORCH_PROBE = r"""
import json, sys
import torch
out = {"torch": torch.__version__, "cuda": torch.version.cuda,
       "hip": getattr(torch.version, "hip", None), "gpus": []}
try:
    if sys.argv[1:] == ["gpus"] and torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out["gpus"].append({"name": p.name, "memory_mib": p.total_memory // 2**20,
                                "capability": f"{p.major}.{p.minor}"})
except Exception as exc:
    out["error"] = str(exc)[:200]
print(json.dumps(out))
"""


def torch_probe(*, gpus: bool = True) -> dict[str, Any]:
    """Torch version, its CUDA/HIP build and (with `gpus`) the GPUs it sees, from a
    child process. Without `gpus` the child never touches CUDA.

    Empty when torch is not installed (checked without importing it) or the probe fails.
    """
    if importlib.util.find_spec("torch") is None:
        return {}
    try:
        argv = [sys.executable, "-c", _TORCH_PROBE, *(["gpus"] if gpus else [])]
        done = subprocess.run(argv, capture_output=True,
                              text=True, timeout=_TORCH_PROBE_TIMEOUT_S, check=False)
        lines = done.stdout.strip().splitlines()
        info = json.loads(lines[-1]) if done.returncode == 0 and lines else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _torch_in_process(torch: Any) -> dict[str, Any]:
    # torch is already imported by the tests: read versions; read GPUs only when CUDA
    # is already initialised, so this never initialises it.
    version = getattr(torch, "version", None)
    info: dict[str, Any] = {"torch": getattr(torch, "__version__", None),
                            "cuda": getattr(version, "cuda", None),
                            "hip": getattr(version, "hip", None), "gpus": []}
    try:
        if torch.cuda.is_initialized():
            for i in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(i)
                info["gpus"].append({"name": props.name,
                                     "memory_mib": int(props.total_memory // 2**20),
                                     "capability": f"{props.major}.{props.minor}"})
    except Exception:  # noqa: BLE001 - provenance must never fail a run
        info["gpus"] = []
    return info


def _gpu_device_nodes() -> bool:
    """Any NVIDIA or AMD (ROCm) device node on this machine."""
    dev = Path("/dev")
    return any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists() or (dev / "nvidiactl").exists()


def _rocm_smi_gpus() -> list[dict[str, object]]:
    out = _run(["rocm-smi", "--showproductname", "--json"])
    try:
        data = json.loads(out) if out else {}
    except json.JSONDecodeError:
        return []
    if not isinstance(data, dict):
        return []
    return [{"name": str(v.get("Card Series") or v.get("Card series") or "AMD GPU")}
            for k, v in data.items() if k.startswith("card") and isinstance(v, dict)]


def _fake(raw: str) -> dict[str, Any]:
    """The hardware description ``CI_REGISTER_FAKE_HARDWARE`` names (JSON); ValueError
    (one line naming the variable) when it is not one: it raised AttributeError or
    KeyError, a traceback and exit 1 from a run."""
    example = '{"gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}]}'
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{FAKE_ENV}: not JSON ({exc}); give e.g. {example}") from None
    gpus_raw = data.get("gpus", []) if isinstance(data, dict) else None
    if not isinstance(gpus_raw, list) or not all(
            isinstance(g, dict) and isinstance(g.get("name"), str) and g["name"] for g in gpus_raw):
        raise ValueError(f"{FAKE_ENV}: want an object whose \"gpus\" is a list of objects "
                         f"with a \"name\"; give e.g. {example}")
    gpus = []
    for g in gpus_raw:
        cap = g.get("capability")
        gpus.append({k: v for k, v in (
            ("name", g["name"]),
            ("capability", ".".join(str(c) for c in cap) if isinstance(cap, list | tuple)
             else cap),
            ("memory_mib", g.get("memory_mib", g.get("memory_mb"))),
            ("uuid", g.get("uuid"))) if v is not None})
    return {"vendor": data.get("vendor", "nvidia" if gpus else "none"), "gpus": gpus,
            "driver": data.get("driver"), "source": "fake"}


def detect_hardware(*, probe_torch: bool = True, versions: bool = True) -> dict[str, Any]:
    """GPU models, count, capability, memory, driver, CUDA, torch and flashinfer versions.

    ``CI_REGISTER_FAKE_HARDWARE`` (JSON) replaces the GPU probes. Torch is read
    in-process only if already imported; otherwise (with `probe_torch`) in a child
    process, so the caller never pays the import nor initialises CUDA.
    ``versions=False`` skips that child process where nvidia-smi already named the GPUs:
    a fingerprint needs no torch version. ``cuda`` is torch's CUDA build,
    ``cuda_driver`` the driver's CUDA version.
    """
    hardware: dict[str, Any] = {
        "machine": platform.machine(),
        "system": platform.system(),
        "python": platform.python_version(),
        "gpus": [],
    }
    fake = os.environ.get(FAKE_ENV)
    if fake:
        hardware.update(_fake(fake))
        hardware["torch"] = _version("torch")
        hardware["flashinfer"] = _version("flashinfer-python", "flashinfer")
        return {k: v for k, v in hardware.items() if v is not None}
    smi = _run(SMI_QUERY)
    if smi:
        hardware["vendor"] = "nvidia"
        hardware["gpus"] = parse_nvidia_smi(smi)
        drivers = {g["driver"] for g in hardware["gpus"] if g.get("driver")}
        hardware["driver"] = ",".join(sorted(drivers)) or None
        hardware["cuda_driver"] = _cuda_from_smi_header()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        hardware["cuda_visible_devices"] = visible
    # nvidia-smi ignores CUDA_VISIBLE_DEVICES; the run only sees (and the baseline must
    # match) the visible GPUs.
    idx = visible_indices(visible, len(hardware["gpus"])) if hardware["gpus"] else None
    if idx is not None:
        hardware["gpus"] = [hardware["gpus"][i] for i in idx]

    torch = sys.modules.get("torch")
    if torch is not None:
        info = _torch_in_process(torch)
    else:
        # GPUs from torch only where nvidia-smi saw none (ROCm, slim containers).
        # The probe costs a torch import (seconds); skip it where no GPU device node
        # exists, since torch could find no GPU there either.
        wanted = versions or not hardware["gpus"]
        info = (torch_probe(gpus=not hardware["gpus"])
                if probe_torch and wanted and _gpu_device_nodes() else {})
    hardware["torch"] = info.get("torch") or _version("torch")
    hardware["cuda"] = info.get("cuda")
    hardware["hip"] = info.get("hip")
    if not hardware["gpus"] and info.get("gpus"):
        hardware["gpus"] = info["gpus"]
        hardware["vendor"] = "amd" if info.get("hip") else "nvidia"
    if not hardware["gpus"] and _gpu_device_nodes():
        rocm = _rocm_smi_gpus()
        if rocm:
            hardware["gpus"], hardware["vendor"] = rocm, "amd"
    hardware["flashinfer"] = _version("flashinfer-python", "flashinfer")
    return {k: v for k, v in hardware.items() if v is not None}


def this_fingerprint() -> str:
    """This machine's fingerprint, exactly as a run records it (``FINGERPRINT_ENV`` wins)."""
    override = os.environ.get(FINGERPRINT_ENV)
    if override:
        return override
    # Only the GPUs matter for the key: no torch child process where nvidia-smi answers.
    return fingerprint_key(detect_hardware(versions=False))
