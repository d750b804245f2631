"""Hardware helpers: what GPU is here, skip markers with reasons, required imports.

These ask torch in the test process (what its kernels can use), not the machine
model (`ci_register.registered.machine`, which names the box a run records and may be faked
with CI_REGISTER_FAKE_HARDWARE): a faked GPU must never make a test launch a kernel.

Policy: a GPU test SKIPS only when there is no GPU (the CPU machine collects every suite);
on a GPU machine a missing kernel library is an ERROR, never a skip, because a GPU suite
that silently skips its kernels shows green while testing nothing.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest

__all__ = [
    "cuda_available",
    "device_count",
    "capability",
    "gpu_name",
    "needs_cuda",
    "needs_gpus",
    "needs_capability",
    "import_flashinfer",
    "nccl_env",
    "NCCL_SAFE_ENV",
    "hbm_peak_bytes_per_s",
    "bf16_peak_flop_per_s",
    "is_h200",
    "sm_clock",
]

# NVLink multicast (NVLS) can put a host's shared GPUs out of service; it stays off in
# every process we start, whatever the caller's environment says.
NCCL_SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def device_count() -> int:
    if not cuda_available():
        return 0
    import torch

    return int(torch.cuda.device_count())


def capability(index: int = 0) -> tuple[int, int]:
    """Compute capability of GPU ``index``; (0, 0) without a GPU."""
    if not cuda_available():
        return (0, 0)
    import torch

    major, minor = torch.cuda.get_device_capability(index)
    return (int(major), int(minor))


def gpu_name(index: int = 0) -> str:
    if not cuda_available():
        return ""
    import torch

    return str(torch.cuda.get_device_name(index))


def _found() -> str:
    n = device_count()
    if n == 0:
        return "found none"
    return f"found {n} x {gpu_name()} (capability {'.'.join(map(str, capability()))})"


needs_cuda = pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU (found none)")


def needs_gpus(n: int) -> pytest.MarkDecorator:
    return pytest.mark.skipif(device_count() < n, reason=f"needs {n} CUDA GPUs ({_found()})")


def needs_capability(major: int, minor: int = 0) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        capability() < (major, minor),
        reason=f"needs a GPU of capability {major}.{minor} or newer ({_found()})",
    )


def import_flashinfer() -> ModuleType:
    """Import FlashInfer on a GPU machine, failing (not skipping) with the fix when absent."""
    try:
        import flashinfer
    except ImportError as exc:
        raise RuntimeError(
            f"flashinfer is not importable on this GPU machine ({exc}); "
            "install flashinfer-python (tools/device_setup.sh does it offline)"
        ) from exc
    return flashinfer


def nccl_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """A process environment with NVLink multicast forced off."""
    env = dict(os.environ if base is None else base)
    env.update(NCCL_SAFE_ENV)
    return env


# Datasheet peaks, used only as upper sanity bounds on measured figures (a figure
# above the peak means the timing is broken, not that the kernel is fast). Keys match
# as a word in the device name; an unlisted GPU gets no bound.
_HBM_PEAK_B_PER_S = {
    "H100": 3.35e12,
    "H200": 4.8e12,
    "B200": 8.0e12,
    "B300": 8.0e12,
    "GB300": 8.0e12,
}
_BF16_DENSE_PEAK_FLOP_S = {"H100": 989e12, "H200": 989e12}


def _lookup(table: dict[str, float], name: str) -> float | None:
    words = name.replace("-", " ").split()
    hits = [v for k, v in table.items() if k in words]
    return hits[0] if hits else None


def hbm_peak_bytes_per_s(name: str | None = None) -> float | None:
    """Datasheet HBM bandwidth of the GPU called ``name`` (default: GPU 0), or None."""
    return _lookup(_HBM_PEAK_B_PER_S, gpu_name() if name is None else name)


def bf16_peak_flop_per_s(name: str | None = None) -> float | None:
    """Datasheet dense bf16 tensor-core rate of the GPU called ``name``, or None."""
    return _lookup(_BF16_DENSE_PEAK_FLOP_S, gpu_name() if name is None else name)


def is_h200(name: str | None = None) -> bool:
    """GPU-NOTES' floors were measured on an H200; an H100 shares its capability."""
    return "H200" in (gpu_name() if name is None else name).split()


def sm_clock(index: int = 0, nvml: ModuleType | None = None):
    """A reader of GPU ``index``'s SM clock in MHz (NVML), or None where NVML is missing
    or does not know the GPU. The reader returns None when a reading fails. For timing
    diagnostics and settling (``suitelib.blocks``): never a reason to fail a test.

    The GPU is found by torch's UUID (CUDA_VISIBLE_DEVICES renumbers, NVML does not);
    ``nvml``: the pynvml module (a fake in tests)."""
    try:
        if nvml is None:
            import pynvml as nvml
        import torch

        nvml.nvmlInit()
        uuid = str(torch.cuda.get_device_properties(index).uuid)
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:  # noqa: BLE001 - no NVML, no GPU it knows: no clock, timing goes on
        return None

    def read() -> float | None:
        try:
            return float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        except Exception:  # noqa: BLE001
            return None

    return read
