"""Quantisation oracles: int8 (per-channel, 128x128 block) and FP8 e4m3 (per-tensor, block).

Each scheme has a quantiser that returns what a checkpoint stores (quantised weight plus
float32 scales), a dequantiser that is the float reference, and a linear layer that
computes from the quantised form. Conventions follow the serving engines' checkpoints:

- scales are float32 and multiply: ``w ~= q * scale``;
- int8 is symmetric with range [-127, 127] (-128 unused, so negation is exact);
- FP8 is ``torch.float8_e4m3fn`` with max 448;
- block scales have shape ``[ceil(N / bn), ceil(K / bk)]`` for a weight ``[N, K]``
  (the DeepSeek-V3 / SGLang ``weight_scale_inv`` layout); activations are quantised per
  token (per-channel schemes) or per token and per ``bk`` group (block schemes).

Everything works on CPU and CUDA tensors; the GPU fast paths (``torch._int_mm``,
``torch._scaled_mm``) are chosen by the device of the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

__all__ = [
    "INT8_MAX",
    "FP8_DTYPE",
    "FP8_MAX",
    "BLOCK",
    "SCHEMES",
    "QuantizedWeight",
    "CheckpointError",
    "quantize_int8_per_channel",
    "quantize_int8_per_token",
    "dequantize_int8_per_channel",
    "quantize_int8_block",
    "quantize_int8_groups",
    "dequantize_block",
    "quantize_fp8_per_tensor",
    "dequantize_fp8_per_tensor",
    "quantize_fp8_block",
    "quantize_weight",
    "dequantize_weight",
    "load_quantized",
    "QuantizedActivation",
    "quantize_activation",
    "dequantize_activation",
    "quantized_matmul",
    "quantized_linear",
    "relative_error",
]

INT8_MAX = 127.0
FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(torch.float8_e4m3fn).max)  # 448
BLOCK = (128, 128)
# Smallest scale: keeps an all-zero row or block from dividing by zero.
_TINY = 1e-12

SCHEMES = ("int8_channel", "int8_block", "fp8_tensor", "fp8_block")


class CheckpointError(ValueError):
    """A quantised state dict does not match its scheme (missing key, dtype or shape)."""


@dataclass(frozen=True)
class QuantizedWeight:
    """A quantised weight ``[N, K]`` as a checkpoint holds it."""

    scheme: str
    qweight: torch.Tensor
    scale: torch.Tensor
    block: tuple[int, int] = BLOCK

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.qweight.shape[0]), int(self.qweight.shape[1]))

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The tensors a checkpoint stores (``weight`` and ``weight_scale``)."""
        return {"weight": self.qweight, "weight_scale": self.scale}

    def to(self, device: torch.device | str) -> QuantizedWeight:
        return QuantizedWeight(
            self.scheme, self.qweight.to(device), self.scale.to(device), self.block
        )


# --------------------------------------------------------------------------- int8


def _round_clamp_int8(x: torch.Tensor) -> torch.Tensor:
    return torch.round(x).clamp_(-INT8_MAX, INT8_MAX).to(torch.int8)


def quantize_int8_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output channel: ``w [N, K] -> (q int8 [N, K], scale f32 [N])``."""
    w32 = w.float()
    scale = (w32.abs().amax(dim=1) / INT8_MAX).clamp_min(_TINY)
    return _round_clamp_int8(w32 / scale[:, None]), scale


# Per-token activation quantisation is the same arithmetic over rows of ``x [M, K]``.
quantize_int8_per_token = quantize_int8_per_channel


def dequantize_int8_per_channel(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale.float()[:, None]


def _pad_to_blocks(w: torch.Tensor, bn: int, bk: int) -> torch.Tensor:
    n, k = w.shape
    pn, pk = -n % bn, -k % bk
    if pn or pk:
        w = torch.nn.functional.pad(w, (0, pk, 0, pn))
    return w


def _block_amax(w: torch.Tensor, bn: int, bk: int) -> torch.Tensor:
    """Max |w| over each ``bn x bk`` block -> ``[ceil(N/bn), ceil(K/bk)]``."""
    wp = _pad_to_blocks(w.float().abs(), bn, bk)
    nb, kb = wp.shape[0] // bn, wp.shape[1] // bk
    return wp.reshape(nb, bn, kb, bk).amax(dim=(1, 3))


def _expand_blocks(scale: torch.Tensor, shape: tuple[int, int], bn: int, bk: int) -> torch.Tensor:
    n, k = shape
    return scale.repeat_interleave(bn, dim=0)[:n].repeat_interleave(bk, dim=1)[:, :k]


def quantize_int8_block(
    w: torch.Tensor, block: tuple[int, int] = BLOCK
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per ``bn x bk`` block: ``(q int8 [N, K], scale f32 [N/bn, K/bk])``."""
    bn, bk = block
    scale = (_block_amax(w, bn, bk) / INT8_MAX).clamp_min(_TINY)
    full = _expand_blocks(scale, tuple(w.shape), bn, bk)
    return _round_clamp_int8(w.float() / full), scale


def quantize_int8_groups(x: torch.Tensor, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Activation int8 per token and per ``group`` columns: scale ``[M, ceil(K/group)]``."""
    return quantize_int8_block(x, (1, group))


def dequantize_block(
    q: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] = BLOCK
) -> torch.Tensor:
    """Float32 reference of a block-quantised tensor (int8 or FP8)."""
    bn, bk = block
    return q.float() * _expand_blocks(scale.float(), tuple(q.shape), bn, bk)


# ---------------------------------------------------------------------------- fp8


def quantize_fp8_per_tensor(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """FP8 e4m3 with one scale: ``(q float8_e4m3fn [N, K], scale f32 [])``."""
    w32 = w.float()
    scale = (w32.abs().amax() / FP8_MAX).clamp_min(_TINY)
    # The clamp matters: a value that rounds past 448 would become NaN in e4m3fn.
    return (w32 / scale).clamp_(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scale


def dequantize_fp8_per_tensor(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale.float()


def quantize_fp8_block(
    w: torch.Tensor, block: tuple[int, int] = BLOCK
) -> tuple[torch.Tensor, torch.Tensor]:
    """FP8 e4m3 per ``bn x bk`` block: ``(q [N, K], scale f32 [N/bn, K/bk])``."""
    bn, bk = block
    scale = (_block_amax(w, bn, bk) / FP8_MAX).clamp_min(_TINY)
    full = _expand_blocks(scale, tuple(w.shape), bn, bk)
    return (w.float() / full).clamp_(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scale


# ------------------------------------------------------------- scheme dispatch


def quantize_weight(
    w: torch.Tensor, scheme: str, block: tuple[int, int] = BLOCK
) -> QuantizedWeight:
    """Quantise a float weight ``[N, K]`` with one of ``SCHEMES``."""
    if scheme == "int8_channel":
        q, s = quantize_int8_per_channel(w)
    elif scheme == "int8_block":
        q, s = quantize_int8_block(w, block)
    elif scheme == "fp8_tensor":
        q, s = quantize_fp8_per_tensor(w)
    elif scheme == "fp8_block":
        q, s = quantize_fp8_block(w, block)
    else:
        raise ValueError(f"unknown quantisation scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    return QuantizedWeight(scheme, q, s, block)


def dequantize_weight(qw: QuantizedWeight) -> torch.Tensor:
    """The float32 weight a quantised checkpoint stands for (the reference)."""
    if qw.scheme == "int8_channel":
        return dequantize_int8_per_channel(qw.qweight, qw.scale)
    if qw.scheme == "fp8_tensor":
        return dequantize_fp8_per_tensor(qw.qweight, qw.scale)
    if qw.scheme in ("int8_block", "fp8_block"):
        return dequantize_block(qw.qweight, qw.scale, qw.block)
    raise ValueError(f"unknown quantisation scheme {qw.scheme!r}; known: {', '.join(SCHEMES)}")


def _expected_scale_shape(scheme: str, n: int, k: int, block: tuple[int, int]) -> tuple[int, ...]:
    if scheme == "int8_channel":
        return (n,)
    if scheme == "fp8_tensor":
        return ()
    return (math.ceil(n / block[0]), math.ceil(k / block[1]))


def load_quantized(
    state: Mapping[str, torch.Tensor],
    scheme: str,
    *,
    prefix: str = "",
    block: tuple[int, int] = BLOCK,
) -> QuantizedWeight:
    """Build a ``QuantizedWeight`` from a checkpoint's state dict, checking it fully.

    Reads ``{prefix}weight`` and ``{prefix}weight_scale`` (``weight_scale_inv`` is accepted
    for block schemes, as DeepSeek-style checkpoints name it). A per-tensor scale stored
    as shape ``[1]`` is accepted. Raises ``CheckpointError`` naming the key at fault.
    """
    if scheme not in SCHEMES:
        raise CheckpointError(
            f"unknown quantisation scheme {scheme!r}; known: {', '.join(SCHEMES)}"
        )
    wkey = f"{prefix}weight"
    if wkey not in state:
        raise CheckpointError(f"checkpoint has no {wkey!r}")
    skey = next(
        (f"{prefix}{s}" for s in ("weight_scale", "weight_scale_inv") if f"{prefix}{s}" in state),
        None,
    )
    if skey is None:
        raise CheckpointError(f"checkpoint has no {prefix}weight_scale for {wkey!r}")
    q, scale = state[wkey], state[skey]
    want_dtype = torch.int8 if scheme.startswith("int8") else FP8_DTYPE
    if q.dtype != want_dtype:
        raise CheckpointError(f"{wkey}: dtype {q.dtype}, scheme {scheme} needs {want_dtype}")
    if q.dim() != 2:
        raise CheckpointError(f"{wkey}: shape {tuple(q.shape)}, a linear weight is 2-D")
    if not scale.is_floating_point():
        raise CheckpointError(f"{skey}: dtype {scale.dtype}, scales are floating point")
    if scheme == "fp8_tensor" and scale.numel() == 1:
        scale = scale.reshape(())
    want = _expected_scale_shape(scheme, int(q.shape[0]), int(q.shape[1]), block)
    if tuple(scale.shape) != want:
        raise CheckpointError(f"{skey}: shape {tuple(scale.shape)}, scheme {scheme} needs {want}")
    if not torch.isfinite(scale).all() or (scale <= 0).any():
        raise CheckpointError(f"{skey}: scales must be finite and positive")
    return QuantizedWeight(scheme, q, scale.float(), block)


# ---------------------------------------------------------------- linear layers


@dataclass(frozen=True)
class QuantizedActivation:
    """Activations ``[M, K]`` quantised the way a scheme's GEMM consumes them."""

    scheme: str
    q: torch.Tensor
    scale: torch.Tensor  # [M] (int8_channel), [] (fp8_tensor) or [M, K/bk] (block schemes)
    group: int = BLOCK[1]


def quantize_activation(x: torch.Tensor, scheme: str, group: int = BLOCK[1]) -> QuantizedActivation:
    """Dynamic activation quantisation: per token (int8_channel), per tensor (fp8_tensor),
    per token and ``group`` columns (block schemes)."""
    if scheme == "int8_channel":
        q, s = quantize_int8_per_token(x)
    elif scheme == "int8_block":
        q, s = quantize_int8_groups(x, group)
    elif scheme == "fp8_tensor":
        q, s = quantize_fp8_per_tensor(x)
    elif scheme == "fp8_block":
        q, s = quantize_fp8_block(x, (1, group))
    else:
        raise ValueError(f"unknown quantisation scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    return QuantizedActivation(scheme, q, s, group)


def dequantize_activation(a: QuantizedActivation) -> torch.Tensor:
    if a.scheme == "int8_channel":
        return dequantize_int8_per_channel(a.q, a.scale)
    if a.scheme == "fp8_tensor":
        return dequantize_fp8_per_tensor(a.q, a.scale)
    return dequantize_block(a.q, a.scale, (1, a.group))


def _int_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """int8 [M, K] @ int8 [K, N] -> int32, exact.

    ``torch._int_mm`` on CUDA needs M > 16 and K, N multiples of 8; smaller M is padded
    with zero rows, which add nothing to the sums.
    """
    m = a.shape[0]
    if a.is_cuda and m <= 16:
        a = torch.nn.functional.pad(a, (0, 0, 0, 17 - m))
    return torch._int_mm(a, b)[:m]


def _mm_int8_channel(a: QuantizedActivation, qw: QuantizedWeight) -> torch.Tensor:
    acc = _int_mm(a.q, qw.qweight.t())
    return acc.float() * a.scale[:, None] * qw.scale[None, :]


def _mm_int8_block(a: QuantizedActivation, qw: QuantizedWeight) -> torch.Tensor:
    # One exact int GEMM per K block, scaled and summed in float32: the arithmetic of
    # block-scaled W8A8 kernels (which do the same inside one launch).
    bn, bk = qw.block
    n, k = qw.shape
    if k % bk or a.group != bk:
        raise ValueError(f"int8_block GEMM needs K ({k}) a multiple of {bk} and groups of {bk}")
    wt = qw.qweight.t()
    ws = qw.scale.repeat_interleave(bn, dim=0)[:n]  # [N, K/bk]
    out = torch.zeros(a.q.shape[0], n, dtype=torch.float32, device=a.q.device)
    for j in range(k // bk):
        acc = _int_mm(a.q[:, j * bk : (j + 1) * bk].contiguous(), wt[j * bk : (j + 1) * bk])
        out += acc.float() * a.scale[:, j : j + 1] * ws[None, :, j]
    return out


def _mm_fp8_tensor(a: QuantizedActivation, qw: QuantizedWeight) -> torch.Tensor:
    if a.q.is_cuda:
        # cuBLASLt FP8 wants the second operand column-major: q.t() of a row-major [N, K].
        return torch._scaled_mm(
            a.q, qw.qweight.t(), scale_a=a.scale, scale_b=qw.scale, out_dtype=torch.float32
        )
    return (a.q.float() @ qw.qweight.float().t()) * (a.scale * qw.scale)


def _mm_fp8_block_native(a: QuantizedActivation, qw: QuantizedWeight) -> torch.Tensor:
    """Block-scaled FP8 GEMM of torch/cuBLASLt (1x128 activations, 128x128 weights).

    cuBLASLt >= 12.9 on capability 9.0; scales must be "outer-dim major" (column-major
    activation scales, weight scales as the transpose of the checkpoint's
    ``[N/128, K/128]``). The output is bf16 (the only dtype this recipe offers).
    """
    if qw.block != (128, 128) or a.group != 128:
        raise ValueError(f"native FP8 block GEMM needs 128x128 blocks, got {qw.block}")
    # cuBLASLt answered CUBLAS_STATUS_NOT_SUPPORTED for M = 1 and 33 on an H200 (torch
    # 2.11, CUDA 13.0) and ran M = 128, 512, 2048: pad M to a multiple of 128 with zero
    # rows (scale 1), which add nothing, and drop them from the result.
    m = a.q.shape[0]
    pad = -m % 128
    q, sa = a.q, a.scale
    if pad:
        q = torch.cat([q, torch.zeros(pad, q.shape[1], dtype=q.dtype, device=q.device)])
        sa = torch.cat([sa, torch.ones(pad, sa.shape[1], dtype=sa.dtype, device=sa.device)])
    scale_a = sa.t().contiguous().t()
    out = torch._scaled_mm(
        q, qw.qweight.t(), scale_a=scale_a, scale_b=qw.scale.t(), out_dtype=torch.bfloat16
    )
    return out[:m].float()


def _mm_fp8_block_emulated(a: QuantizedActivation, qw: QuantizedWeight) -> torch.Tensor:
    return dequantize_activation(a) @ dequantize_weight(qw).t()


def quantized_matmul(
    a: QuantizedActivation, qw: QuantizedWeight, *, fp8_block: str = "auto"
) -> torch.Tensor:
    """GEMM of quantised activations and weight -> float32 ``[M, N]``.

    ``fp8_block``: ``"native"`` (torch ``_scaled_mm`` with block scales), ``"emulated"``
    (dequantise, then a float matmul) or ``"auto"`` (native on CUDA, emulated on CPU).
    """
    if a.scheme != qw.scheme:
        raise ValueError(f"activation scheme {a.scheme} does not match weight {qw.scheme}")
    if a.q.dim() != 2 or a.q.shape[1] != qw.shape[1]:
        raise ValueError(f"x {tuple(a.q.shape)} does not match weight {qw.shape}")
    if qw.scheme == "int8_channel":
        return _mm_int8_channel(a, qw)
    if qw.scheme == "int8_block":
        return _mm_int8_block(a, qw)
    if qw.scheme == "fp8_tensor":
        return _mm_fp8_tensor(a, qw)
    if fp8_block == "auto":
        fp8_block = "native" if a.q.is_cuda else "emulated"
    if fp8_block == "native":
        return _mm_fp8_block_native(a, qw)
    if fp8_block == "emulated":
        return _mm_fp8_block_emulated(a, qw)
    raise ValueError(f"fp8_block must be native, emulated or auto, got {fp8_block!r}")


def quantized_linear(
    x: torch.Tensor, qw: QuantizedWeight, *, fp8_block: str = "auto"
) -> torch.Tensor:
    """``x [M, K] @ w.T`` from the quantised weight, activations quantised dynamically."""
    if x.dim() != 2 or x.shape[1] != qw.shape[1]:
        raise ValueError(f"x {tuple(x.shape)} does not match weight {qw.shape}")
    a = quantize_activation(x, qw.scheme, qw.block[1])
    return quantized_matmul(a, qw, fp8_block=fp8_block)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` in float64; NaN anywhere in ``out`` gives inf."""
    o, r = out.double(), ref.double()
    if not torch.isfinite(o).all():
        return math.inf
    return float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r).clamp_min(1e-300))
