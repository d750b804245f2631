"""Registration markers: literal calls at the top of a test file.

They do nothing when the file is imported; ``ci_register.registered.collect`` reads them by
parsing the file with ``ast``. The signatures mirror SGLang's ``register_cuda_ci``
(plus miles' ``labels=``) so that existing test files move over unchanged, and
miles' ``register_ci_gate`` for metric gate declarations.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "register_cuda_ci",
    "register_rocm_ci",
    "register_amd_ci",
    "register_cpu_ci",
    "register_npu_ci",
    "register_xpu_ci",
    "register_musa_ci",
    "register_mlx_ci",
    "register_ci_gate",
]


def register_cuda_ci(
    est_time: float,
    suite: str | None = None,
    nightly: bool = False,
    disabled: str | None = None,
    *,
    stage: str | None = None,
    runner_config: str | None = None,
    in_process_group: str | None = None,
    labels: list[str] | None = None,
) -> None:
    """Register this file into a CUDA suite (read statically; a no-op at run time)."""


def register_rocm_ci(
    est_time: float,
    suite: str | None = None,
    nightly: bool = False,
    disabled: str | None = None,
    *,
    stage: str | None = None,
    runner_config: str | None = None,
    in_process_group: str | None = None,
    labels: list[str] | None = None,
) -> None:
    """Register this file into a ROCm suite (read statically; a no-op at run time)."""


def register_cpu_ci(
    est_time: float,
    suite: str | None = None,
    nightly: bool = False,
    disabled: str | None = None,
    *,
    stage: str | None = None,
    runner_config: str | None = None,
    in_process_group: str | None = None,
    labels: list[str] | None = None,
) -> None:
    """Register this file into a CPU suite (read statically; a no-op at run time)."""


# SGLang's other backends, under SGLang's names (declare each in the catalog's [markers]).
register_amd_ci = register_rocm_ci
register_npu_ci = register_cuda_ci
register_xpu_ci = register_cuda_ci
register_musa_ci = register_cuda_ci
register_mlx_ci = register_cuda_ci


def register_ci_gate(*, metric_key: str, **options: Any) -> None:
    """Declare or refine the gate of one metric (read statically; a no-op at run time).

    Options: ``better`` ("higher"/"lower"), ``min_change`` (relative practical floor),
    ``min_value`` / ``max_value`` (absolute bounds), ``level`` (significance), ``mode``
    ("enforce"/"warn"), ``owner`` ("@team-or-person", named when it regresses; else
    CODEOWNERS), ``expect`` ("fail": a negative control, whose session fails unless the
    gate flags it); miles' ``steps``, ``constraint``, ``enforce`` and
    ``allowlist_reason`` (``ci_register.registered.gate_options``). See ``gates.record.declarations``.
    """
