"""suitelib.hardware: peaks by name, NVLink multicast forced off, reasons on CPU."""

from __future__ import annotations

import pytest

from suitelib import hardware as hw


def test_peaks_by_device_name() -> None:
    assert hw.hbm_peak_bytes_per_s("NVIDIA H200") == 4.8e12
    assert hw.hbm_peak_bytes_per_s("NVIDIA H100 80GB HBM3") == 3.35e12
    assert hw.hbm_peak_bytes_per_s("NVIDIA GB300") == 8.0e12
    assert hw.hbm_peak_bytes_per_s("NVIDIA A100-SXM4-80GB") is None
    assert hw.bf16_peak_flop_per_s("NVIDIA B200") is None
    assert hw.is_h200("NVIDIA H200") and not hw.is_h200("NVIDIA H100 80GB HBM3")


def test_nccl_env_keeps_multicast_off() -> None:
    env = hw.nccl_env({"NCCL_NVLS_ENABLE": "1", "PATH": "/bin"})
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and env["PATH"] == "/bin"


def test_skip_reasons_name_what_was_found() -> None:
    if hw.cuda_available():
        pytest.skip("the reasons checked here are those of a machine without a GPU")
    assert hw.needs_cuda.kwargs["reason"] == "needs a CUDA GPU (found none)"
    assert hw.needs_gpus(2).kwargs["reason"] == "needs 2 CUDA GPUs (found none)"
    assert hw.capability() == (0, 0) and hw.device_count() == 0
