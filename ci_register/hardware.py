"""What GPUs this machine has, and whether a suite's requirement is met.

Detection is the only I/O here (torch if it is importable, else nvidia-smi or
rocm-smi, each with a timeout); :func:`check` is pure so it can be tested
with any machine description.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from ci_register.catalog import Hardware, Suite

__all__ = ["GPU", "Machine", "detect", "detect_for", "check", "visible_indices", "parse_nvidia_smi",
           "SMI_QUERY", "run_probe", "FAKE_ENV", "VENDORS"]

# Which vendor's devices each catalog backend runs on (SGLang's backends; "rocm" = "amd").
VENDORS = {"cuda": "nvidia", "rocm": "amd", "amd": "amd", "npu": "ascend", "xpu": "intel",
           "musa": "mthreads", "mlx": "apple"}

# A JSON machine description that replaces detection, for tests and dry planning:
# {"vendor": "nvidia", "gpus": [{"name": "NVIDIA H200", "capability": [9, 0]}]}
FAKE_ENV = "CI_REGISTER_FAKE_HARDWARE"


@dataclass(frozen=True)
class GPU:
    name: str
    capability: tuple[int, int] | None = None
    memory_mb: int | None = None


@dataclass(frozen=True)
class Machine:
    vendor: str  # "nvidia", "amd", "ascend", "intel", "mthreads", "apple" or "none"
    gpus: tuple[GPU, ...] = ()
    driver: str | None = None
    source: str = "none"
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        if not self.gpus:
            return "no GPU" + (f" ({'; '.join(self.notes)})" if self.notes else "")
        names = sorted({g.name for g in self.gpus})
        return f"{len(self.gpus)}x {' + '.join(names)}"

    def to_json(self) -> dict[str, object]:
        return asdict(self)


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


def _from_fake(raw: str) -> Machine:
    data = json.loads(raw)
    gpus = tuple(
        GPU(g["name"], tuple(g["capability"]) if g.get("capability") else None, g.get("memory_mb"))
        for g in data.get("gpus", [])
    )
    return Machine(data.get("vendor", "nvidia" if gpus else "none"), gpus, data.get("driver"), "fake")


def visible_indices(value: str | None, count: int) -> list[int] | None:
    """The GPU indices a CUDA_VISIBLE_DEVICES value leaves visible, out of ``count``.

    None when the variable is unset or names GPUs by UUID or MIG id (not mapped here:
    the list is left as it is); an empty value hides every GPU, as in CUDA.
    """
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        return None
    return [i for i in map(int, parts) if i < count]


# uuid names the physical GPU: what a between-machine variance component groups by.
SMI_QUERY = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap,uuid",
             "--format=csv,noheader,nounits"]


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


def _from_nvidia_smi() -> Machine | None:
    out = run_probe(SMI_QUERY)
    if not out:
        return None
    parsed = parse_nvidia_smi(out)
    gpus = [GPU(str(g["name"]),
                tuple(int(v) for v in str(g["capability"]).split(".")) if g["capability"] else None,
                g["memory_mib"]) for g in parsed]
    driver = next((str(g["driver"]) for g in reversed(parsed) if g["driver"]), None)
    # nvidia-smi ignores CUDA_VISIBLE_DEVICES; honour it like CUDA does.
    idx = visible_indices(os.environ.get("CUDA_VISIBLE_DEVICES"), len(gpus))
    if idx is not None:
        gpus = [gpus[i] for i in idx]
    return Machine("nvidia", tuple(gpus), driver, "nvidia-smi") if gpus else None


def _from_torch() -> Machine | None:
    try:
        import torch  # noqa: PLC0415 - optional, heavy
    except Exception:  # noqa: BLE001 - any import failure means "no torch here"
        return None
    try:
        if not torch.cuda.is_available():
            return None
        gpus = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append(GPU(p.name, (p.major, p.minor), p.total_memory // (1 << 20)))
    except Exception:  # noqa: BLE001 - a broken driver reads as no GPU, with a note
        return None
    vendor = "amd" if getattr(torch.version, "hip", None) else "nvidia"
    return Machine(vendor, tuple(gpus), None, "torch")


def _from_rocm_smi() -> Machine | None:
    out = run_probe(["rocm-smi", "--showproductname", "--json"])
    if not out:
        return None
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        return None
    gpus = [GPU(str(v.get("Card Series") or v.get("Card series") or "AMD GPU")) for k, v in data.items() if k.startswith("card")]
    return Machine("amd", tuple(gpus), None, "rocm-smi") if gpus else None


def detect(use_torch: bool = True) -> Machine:
    """Describe this machine's GPUs; never raises."""
    fake = os.environ.get(FAKE_ENV)
    if fake:
        return _from_fake(fake)
    for probe in ((_from_torch,) if use_torch else ()) + (_from_nvidia_smi, _from_rocm_smi):
        m = probe()
        if m is not None:
            return m
    return Machine("none", (), None, "none", ("torch sees no GPU, no nvidia-smi or rocm-smi",))


def _torch_device_module(module: str, attr: str, vendor: str) -> Machine | None:
    """Devices of a torch backend that lives in ``torch.<attr>`` once ``module`` is imported
    (torch_npu for Ascend NPUs, torch_musa for Moore Threads; torch itself for Intel XPU)."""
    try:
        import importlib  # noqa: PLC0415

        importlib.import_module(module)
        import torch  # noqa: PLC0415 - optional, heavy

        dev = getattr(torch, attr)
        if not dev.is_available():
            return None
        gpus = tuple(GPU(str(dev.get_device_name(i))) for i in range(dev.device_count()))
    except Exception:  # noqa: BLE001 - any failure means "not usable here"
        return None
    return Machine(vendor, gpus, None, f"torch.{attr}") if gpus else None


def _from_mlx() -> Machine | None:
    """Apple silicon through MLX's Metal backend (one GPU per machine)."""
    try:
        import mlx.core as mx  # noqa: PLC0415 - optional

        if not mx.metal.is_available():
            return None
        name = str(mx.metal.device_info().get("architecture", "Apple GPU"))
    except Exception:  # noqa: BLE001
        return None
    return Machine("apple", (GPU(name),), None, "mlx")


_VENDOR_PROBES = {
    "ascend": (lambda: _torch_device_module("torch_npu", "npu", "ascend"), "torch_npu (torch.npu)"),
    "intel": (lambda: _torch_device_module("torch", "xpu", "intel"), "torch.xpu"),
    "mthreads": (lambda: _torch_device_module("torch_musa", "musa", "mthreads"), "torch_musa (torch.musa)"),
    "apple": (_from_mlx, "mlx.core.metal"),
}


def detect_for(backend: str) -> Machine:
    """This machine's devices of the kind ``backend`` runs on; never raises.

    CUDA and AMD go through :func:`detect` (torch, nvidia-smi, rocm-smi); the other
    backends through their torch device module or MLX. A backend without a probe reads
    as a machine with no device and a note saying so: it can never pass by default.
    """
    vendor = VENDORS.get(backend)
    if vendor in (None, "nvidia", "amd"):
        m = detect()
        if vendor is None:
            return Machine("none", (), None, "none", (f"no hardware probe for backend {backend!r}",))
        return m
    fake = os.environ.get(FAKE_ENV)
    if fake:
        return _from_fake(fake)
    probe, what = _VENDOR_PROBES[vendor]
    return probe() or Machine("none", (), None, "none", (f"{what} finds no device",))


def _model_matches(name: str, models: tuple[str, ...]) -> bool:
    # "H200" must match "NVIDIA H200" and "NVIDIA H200 NVL" but not "H2000".
    return any(re.search(rf"(?<![A-Za-z0-9]){re.escape(m)}(?![0-9])", name, re.I) for m in models)


def check(suite: Suite, machine: Machine) -> str | None:
    """None when the machine can run the suite, else the one-line reason."""
    hw: Hardware = suite.hardware
    if hw.gpu_count == 0:
        return None
    vendor = VENDORS.get(suite.backend)
    if vendor is None:
        return (f"{suite.name}: backend {suite.backend!r} has no hardware check; use one of "
                f"{', '.join(sorted(VENDORS))} or a cpu suite")
    need = f"{suite.name} needs {hw.describe()}" + ("" if suite.backend == "cuda" else f" ({suite.backend})")
    found = f"found {machine.describe()}"
    usable = [g for g in machine.gpus if machine.vendor == vendor]
    if hw.gpu_models:
        usable = [g for g in usable if _model_matches(g.name, hw.gpu_models)]
    if hw.min_capability:
        usable = [g for g in usable if g.capability is None or hw.min_capability.admits_as_min(g.capability)]
    if hw.max_capability:
        usable = [g for g in usable if g.capability is None or hw.max_capability.admits_as_max(g.capability)]
    if len(usable) >= hw.gpu_count:
        return None
    caps = sorted({f"{g.capability[0]}.{g.capability[1]}" for g in machine.gpus if g.capability})
    cap_note = f" (capability {', '.join(caps)})" if caps else ""
    return f"{need}; {found}{cap_note}"
