"""Run provenance: who ran what, where, on which hardware.

Pure helpers (`fingerprint_key`, `ci_from_env`, and `parse_nvidia_smi`, which
`ci_register.hardware` owns: one parser for the suite check and the provenance)
are separate from the probes that touch git, nvidia-smi and installed packages
(`detect_hardware`, `git_info`, `collect_provenance`). Every probe is best
effort: a missing tool yields missing fields, never an exception.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ci_register.hardware import SMI_QUERY, parse_nvidia_smi, run_probe, visible_indices

__all__ = [
    "Provenance",
    "ci_from_env",
    "collect_provenance",
    "detect_hardware",
    "fingerprint_key",
    "git_info",
    "host_key",
    "new_run_id",
    "parse_nvidia_smi",
    "torch_probe",
    "utc_now",
]

_PROBE_TIMEOUT_S = 10.0


def utc_now() -> str:
    """Current UTC time as ISO 8601 with microseconds (sorts as text)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def new_run_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Provenance:
    """Everything about a run except its results. `fingerprint` is what baselines match on."""

    run_id: str
    suite: str
    shard_index: int = 1
    shard_count: int = 1
    commit: str | None = None
    branch: str | None = None
    ci_url: str | None = None
    started_at: str = field(default_factory=utc_now)
    finished_at: str | None = None
    host: str = field(default_factory=socket.gethostname)
    python: str = field(default_factory=platform.python_version)
    fingerprint: str = "cpu"
    hardware: dict[str, Any] = field(default_factory=dict)
    confirm_of: str | None = None  # run id re-checked by this confirm-on-trip run

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- pure helpers


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


def host_key(hardware: Mapping[str, Any] | str | None) -> str | None:
    """The physical GPUs a run used (their sorted uuids), or None when not recorded.

    Groups runs for the gate's between-host variance component: host names
    are often generic ("vm", a pod name), GPU uuids are not. Accepts the
    hardware dict or its JSON text (as stored in ``runs.hardware``); anything
    unreadable is None (an old run, no uuid), never an error.
    """
    if isinstance(hardware, str):
        try:
            hardware = json.loads(hardware)
        except ValueError:
            return None
    if not isinstance(hardware, Mapping):
        return None
    gpus = hardware.get("gpus")
    if not isinstance(gpus, list):
        return None
    ids = sorted(str(g["uuid"]) for g in gpus if isinstance(g, Mapping) and g.get("uuid"))
    return ",".join(ids) if ids and len(ids) == len(gpus) else None


def ci_from_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """Commit, branch and run URL from the environment: GATES_* overrides, then GitHub Actions."""
    url = None
    server, repo, run = (env.get(k) for k in
                         ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run:
        url = f"{server.rstrip('/')}/{repo}/actions/runs/{run}"
        if env.get("GITHUB_RUN_ATTEMPT"):
            url += f"/attempts/{env['GITHUB_RUN_ATTEMPT']}"
    # GATES_COMMIT / GATES_BRANCH / GATES_CI_URL name the revision where there is no
    # git checkout (a copied tree on a GPU host) or another CI system.
    return {
        "commit": env.get("GATES_COMMIT") or env.get("GITHUB_SHA") or None,
        "branch": env.get("GATES_BRANCH") or env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or None,
        "ci_url": env.get("GATES_CI_URL") or url,
    }


# ---------------------------------------------------------------------- probes


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    return run_probe(cmd, cwd=cwd, timeout=_PROBE_TIMEOUT_S)


def git_info(root: Path) -> dict[str, str | None]:
    """Commit and branch of the checkout at `root` (None when git or a repo is missing)."""
    commit = _run(["git", "rev-parse", "HEAD"], cwd=root)
    branch = _run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=root)
    branch = branch.strip() if branch else None
    return {
        "commit": commit.strip() if commit else None,
        "branch": None if branch in (None, "HEAD") else branch,
    }


def _version(*dists: str) -> str | None:
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
_TORCH_PROBE_TIMEOUT_S = 120.0  # a cold torch import on a network filesystem is slow


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


def detect_hardware(*, probe_torch: bool = True, versions: bool = True) -> dict[str, Any]:
    """GPU models, count, capability, memory, driver, CUDA, torch and flashinfer versions.

    GPUs come from nvidia-smi; where it is missing (ROCm, slim containers) from torch.
    Torch is read in-process only if already imported; otherwise (with `probe_torch`)
    in a child process, so the caller never pays the import nor initialises CUDA.
    ``versions=False`` skips that child process where nvidia-smi already named the GPUs:
    a fingerprint needs no torch version. ``cuda`` is torch's CUDA build, ``cuda_driver``
    the driver's CUDA version.
    """
    hardware: dict[str, Any] = {
        "machine": platform.machine(),
        "system": platform.system(),
        "python": platform.python_version(),
        "gpus": [],
    }
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
        info = torch_probe(gpus=not hardware["gpus"]) if probe_torch and wanted and _gpu_device_nodes() else {}
    hardware["torch"] = info.get("torch") or _version("torch")
    hardware["cuda"] = info.get("cuda")
    hardware["hip"] = info.get("hip")
    if not hardware["gpus"] and info.get("gpus"):
        hardware["gpus"] = info["gpus"]
        hardware["vendor"] = "amd" if info.get("hip") else "nvidia"
    hardware["flashinfer"] = _version("flashinfer-python", "flashinfer")
    return {k: v for k, v in hardware.items() if v is not None}


def collect_provenance(
    suite: str,
    *,
    run_id: str | None = None,
    shard: tuple[int, int] = (1, 1),
    root: Path | None = None,
    env: Mapping[str, str] | None = None,
    hardware: dict[str, Any] | None = None,
) -> Provenance:
    """Provenance for a run starting now. CI variables win over local git."""
    env = os.environ if env is None else env
    ci = ci_from_env(env)
    local = git_info(root or Path.cwd()) if not (ci["commit"] and ci["branch"]) else {}
    hardware = detect_hardware() if hardware is None else hardware
    return Provenance(
        run_id=run_id or new_run_id(),
        suite=suite,
        shard_index=shard[0],
        shard_count=shard[1],
        commit=ci["commit"] or local.get("commit"),
        branch=ci["branch"] or local.get("branch"),
        ci_url=ci["ci_url"],
        fingerprint=fingerprint_key(hardware),
        hardware=hardware,
    )
