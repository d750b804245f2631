"""Whether this machine can run a suite: its GPUs as a `Machine`, and the check.

Detection is `ci_register.machine.detect_hardware` (the same description a run
records and its fingerprint is made of, ``CI_REGISTER_FAKE_HARDWARE`` included);
:func:`check` is pure so it can be tested with any machine description.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ci_register.catalog import Hardware, Suite
from ci_register.machine import (
    FAKE_ENV,
    SMI_QUERY,
    detect_hardware,
    parse_nvidia_smi,
    run_probe,
    visible_indices,
)

__all__ = ["GPU", "Machine", "detect", "check", "machine_of", "visible_indices",
           "parse_nvidia_smi", "SMI_QUERY", "run_probe", "FAKE_ENV"]


@dataclass(frozen=True)
class GPU:
    name: str
    capability: tuple[int, int] | None = None
    memory_mb: int | None = None


@dataclass(frozen=True)
class Machine:
    vendor: str  # "nvidia", "amd" or "none"
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


def _model_matches(name: str, models: tuple[str, ...]) -> bool:
    # "H200" must match "NVIDIA H200" and "NVIDIA H200 NVL" but not "H2000".
    return any(re.search(rf"(?<![A-Za-z0-9]){re.escape(m)}(?![0-9])", name, re.I) for m in models)


def check(suite: Suite, machine: Machine) -> str | None:
    """None when the machine can run the suite, else the one-line reason."""
    hw: Hardware = suite.hardware
    if hw.gpu_count == 0:
        return None
    vendor = "amd" if suite.backend == "rocm" else "nvidia"
    need = f"{suite.name} needs {hw.describe()}"
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
