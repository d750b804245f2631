"""Run provenance: who ran what, where, on which hardware.

Pure helpers (`fingerprint_key`, `parse_nvidia_smi`, `ci_from_env`) are separate
from the probes that touch git, nvidia-smi and installed packages
(`detect_hardware`, `git_info`, `collect_provenance`). Every probe is best
effort: a missing tool yields missing fields, never an exception.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Provenance",
    "ci_from_env",
    "collect_provenance",
    "detect_hardware",
    "fingerprint_key",
    "git_info",
    "new_run_id",
    "parse_nvidia_smi",
    "utc_now",
]

_SMI_FIELDS = "name,memory.total,driver_version,compute_cap"
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


def parse_nvidia_smi(csv_text: str) -> list[dict[str, Any]]:
    """Parse `nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap
    --format=csv,noheader,nounits` output into one dict per GPU."""
    gpus: list[dict[str, Any]] = []
    for line in csv_text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0]:
            continue
        name, memory, driver, cap = parts[:4]
        gpu: dict[str, Any] = {"name": name, "driver": driver or None}
        try:
            gpu["memory_mib"] = int(float(memory))
        except ValueError:
            gpu["memory_mib"] = None
        gpu["capability"] = cap if re.fullmatch(r"\d+\.\d+", cap) else None
        gpus.append(gpu)
    return gpus


def ci_from_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """Commit, branch and run URL from a GitHub Actions environment (None elsewhere)."""
    url = None
    server, repo, run = (env.get(k) for k in
                         ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run:
        url = f"{server.rstrip('/')}/{repo}/actions/runs/{run}"
        if env.get("GITHUB_RUN_ATTEMPT"):
            url += f"/attempts/{env['GITHUB_RUN_ATTEMPT']}"
    return {
        "commit": env.get("GITHUB_SHA") or None,
        "branch": env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or None,
        "ci_url": url,
    }


# ---------------------------------------------------------------------- probes


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(
            cmd, cwd=cwd, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


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


def detect_hardware() -> dict[str, Any]:
    """GPU models, count, capability, memory, driver, CUDA, torch and flashinfer versions.

    Torch is consulted only if the tests already imported it (no multi-second import
    just for provenance); otherwise its version comes from package metadata.
    """
    hardware: dict[str, Any] = {
        "machine": platform.machine(),
        "system": platform.system(),
        "python": platform.python_version(),
        "gpus": [],
    }
    smi = _run(["nvidia-smi", f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits"])
    if smi:
        hardware["vendor"] = "nvidia"
        hardware["gpus"] = parse_nvidia_smi(smi)
        drivers = {g["driver"] for g in hardware["gpus"] if g.get("driver")}
        hardware["driver"] = ",".join(sorted(drivers)) or None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        hardware["cuda_visible_devices"] = visible

    torch = sys.modules.get("torch")
    hardware["torch"] = _version("torch")
    if torch is not None:
        hardware["torch"] = getattr(torch, "__version__", hardware["torch"])
        version = getattr(torch, "version", None)
        hardware["cuda"] = getattr(version, "cuda", None)
        hardware["hip"] = getattr(version, "hip", None)
        if not hardware["gpus"]:
            hardware["gpus"] = _torch_gpus(torch)
            if hardware["gpus"]:
                hardware["vendor"] = "amd" if hardware.get("hip") else "nvidia"
    if not hardware.get("cuda") and smi:
        hardware["cuda"] = _cuda_from_smi_header()
    hardware["flashinfer"] = _version("flashinfer-python", "flashinfer")
    return {k: v for k, v in hardware.items() if v is not None}


def _torch_gpus(torch: Any) -> list[dict[str, Any]]:
    # Only reached when torch is already imported; any failure means "no GPU info".
    try:
        if not torch.cuda.is_available():
            return []
        gpus = []
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            gpus.append({
                "name": props.name,
                "memory_mib": int(props.total_memory // (1024 * 1024)),
                "capability": f"{props.major}.{props.minor}",
            })
        return gpus
    except Exception:  # noqa: BLE001 - provenance must never fail a run
        return []


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
