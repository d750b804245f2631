"""Whether this machine can run a suite: its GPUs as a `Machine`, and the check.

Detection is `ci_register.registered.machine.detect_hardware` (the same description a run
records and its fingerprint is made of, ``CI_REGISTER_FAKE_HARDWARE`` included);
:func:`check` is pure so it can be tested with any machine description.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ci_register.registered.catalog import Hardware, Suite
from ci_register.registered.machine import (
    FAKE_ENV,
    SMI_QUERY,
    detect_hardware,
    parse_nvidia_smi,
    run_probe,
    visible_indices,
)

__all__ = ["GPU", "Machine", "detect", "detect_for", "check", "machine_of", "visible_indices",
           "parse_nvidia_smi", "SMI_QUERY", "run_probe", "FAKE_ENV", "VENDORS"]

# Which vendor's devices each catalog backend runs on (SGLang's backends; "rocm" = "amd").
VENDORS = {"cuda": "nvidia", "rocm": "amd", "amd": "amd", "npu": "ascend", "xpu": "intel",
           "musa": "mthreads", "mlx": "apple"}


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


def machine_of(hardware: Mapping[str, Any]) -> Machine:
    """The `Machine` a recorded hardware description (``detect_hardware``) names."""
    gpus = []
    for g in hardware.get("gpus") or []:
        cap = str(g.get("capability") or "")
        gpus.append(GPU(str(g.get("name") or "GPU"),
                        tuple(int(v) for v in cap.split(".")) if re.fullmatch(r"\d+\.\d+", cap)
                        else None,  # type: ignore[arg-type]
                        g.get("memory_mib")))
    if not gpus:
        return Machine("none", (), None, "none", ("no nvidia-smi or rocm-smi GPU, torch sees none",))
    driver = hardware.get("driver")
    source = hardware.get("source") or ("nvidia-smi" if driver else "torch")
    return Machine(str(hardware.get("vendor") or "nvidia"), tuple(gpus),
                   str(driver).split(",")[-1] if driver else None, source)


def detect(use_torch: bool = True) -> Machine:
    """Describe this machine's GPUs (``machine.detect_hardware``); never raises."""
    return machine_of(detect_hardware(probe_torch=use_torch, versions=False))


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
    if os.environ.get(FAKE_ENV):
        return detect()  # the faked description, as every other reader sees it
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
