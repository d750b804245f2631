"""What runs where: registration markers, the suite catalog, static collection,
partitioning, hardware checks and the suite runner."""

from __future__ import annotations

from ci_register.registered.markers import (
    register_amd_ci,
    register_ci_gate,
    register_cpu_ci,
    register_cuda_ci,
    register_mlx_ci,
    register_musa_ci,
    register_npu_ci,
    register_rocm_ci,
    register_xpu_ci,
)

__all__ = ["register_cuda_ci", "register_rocm_ci", "register_amd_ci", "register_cpu_ci", "register_npu_ci",
           "register_xpu_ci", "register_musa_ci", "register_mlx_ci", "register_ci_gate"]
