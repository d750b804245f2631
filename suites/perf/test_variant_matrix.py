"""Variant perf matrix: each variant with its own batch sizes; every variant runs even when
an earlier one raises, all failures are listed at the end, all metrics are recorded."""

from __future__ import annotations

import pytest
import torch

from ci_register import register_cuda_ci
from suitelib import hardware as hw
from suitelib import quant as Q
from suitelib.attention import decode_bytes, prefill_flops
from suitelib.matrix import Measurement, Variant, failure_report, run_matrix
from suitelib.timing import Timing, time_cuda

# H200: the cells take ~1 s together once FlashInfer's decode kernel is compiled; its JIT
# on a fresh machine is ~25 s (measured with 16 cores).
register_cuda_ci(est_time=60, suite="stage-c-4gpu")
register_cuda_ci(est_time=120, suite="gb300-nightly", nightly=True)

pytestmark = hw.needs_cuda

HIDDEN, FFN = 4096, 14336  # Llama-3-8B MLP up-projection
HQ, HKV, D = 32, 8, 128


def _rates(prefix: str, t: Timing, amount: float, name: str, unit: str) -> list[Measurement]:
    """Latency samples plus ``amount / latency`` in ``unit`` (TFLOP/s or TB/s)."""
    scale = 1e12  # both units are tera-
    return [
        Measurement(f"{prefix}/latency", t.samples, "s", "lower"),
        Measurement(f"{prefix}/{name}", [r / scale for r in t.rate(amount)], unit, "higher"),
    ]


def _gemm_bf16(bs: int) -> list[Measurement]:
    x = torch.randn(bs, HIDDEN, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(FFN, HIDDEN, device="cuda", dtype=torch.bfloat16)
    t = time_cuda(lambda: x @ w.t(), samples=5, iters=20)
    return _rates(f"matrix/gemm_bf16/bs{bs}", t, 2.0 * bs * HIDDEN * FFN, "tflops", "TFLOP/s")


def _gemm_quant(scheme: str):
    def run(bs: int) -> list[Measurement]:
        if scheme.startswith("fp8") and hw.capability() < (8, 9):
            raise RuntimeError(f"{scheme} needs capability 8.9+, found {hw.capability()}")
        w = torch.randn(FFN, HIDDEN, device="cuda") * 0.02
        qw = Q.quantize_weight(w, scheme)
        a = Q.quantize_activation(torch.randn(bs, HIDDEN, device="cuda"), scheme)
        out = Q.quantized_matmul(a, qw)
        ref = Q.dequantize_activation(a) @ Q.dequantize_weight(qw).t()
        err = Q.relative_error(out, ref)
        assert err < 5e-3, f"{scheme} bs {bs}: {err:.2e} vs dequantised reference"
        t = time_cuda(lambda: Q.quantized_matmul(a, qw), samples=5, iters=20)
        return _rates(
            f"matrix/gemm_{scheme}/bs{bs}", t, 2.0 * bs * HIDDEN * FFN, "tflops", "TFLOP/s"
        )

    return run


def _decode_sdpa(bs: int, kv_len: int = 8192) -> list[Measurement]:
    q = torch.randn(bs, HQ, 1, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(bs, HKV, kv_len, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t = time_cuda(lambda: sdpa(q, k, v, enable_gqa=True), samples=5, iters=20)
    return _rates(
        f"matrix/decode_sdpa_kv{kv_len}/bs{bs}",
        t,
        decode_bytes(bs, kv_len, HKV, D),
        "bandwidth",
        "TB/s",
    )


def _decode_flashinfer(bs: int, kv_len: int = 8192) -> list[Measurement]:
    from suitelib.attention import build_paged_kv

    fi = hw.import_flashinfer()
    paged = build_paged_kv(
        [kv_len] * bs, num_kv_heads=HKV, head_dim=D, device="cuda", spare_pages=0
    )
    ws = torch.zeros(128 << 20, dtype=torch.uint8, device="cuda")
    w = paged.decode_wrapper(fi, ws, HQ)
    q = torch.randn(bs, HQ, D, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(q)
    t = time_cuda(lambda: w.run(q, paged.cache, out=out), samples=5, iters=20)
    return _rates(
        f"matrix/decode_flashinfer_kv{kv_len}/bs{bs}",
        t,
        decode_bytes(bs, kv_len, HKV, D),
        "bandwidth",
        "TB/s",
    )


def _prefill_sdpa(bs: int, seq: int = 4096) -> list[Measurement]:
    q = torch.randn(bs, HQ, seq, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(bs, HKV, seq, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t = time_cuda(lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True), samples=5, iters=10)
    flops = bs * prefill_flops(seq, seq, HQ, D, causal=True)
    return _rates(f"matrix/prefill_sdpa_s{seq}/bs{bs}", t, flops, "tflops", "TFLOP/s")


# Each variant has the batch sizes its nightly needs, not one shared list.
VARIANTS = [
    Variant("gemm_bf16", (1, 4, 16, 64), _gemm_bf16),
    Variant("gemm_fp8_tensor", (16, 128), _gemm_quant("fp8_tensor")),
    Variant("gemm_int8_channel", (32, 256), _gemm_quant("int8_channel")),
    Variant("decode_sdpa", (1, 4), _decode_sdpa),
    Variant("decode_flashinfer", (16,), _decode_flashinfer),
    Variant("prefill_sdpa", (1, 2), _prefill_sdpa),
]


def test_variant_matrix(metrics, request) -> None:
    def record(m: Measurement) -> None:
        metrics.record(m.key, list(m.values), unit=m.unit, better=m.better)

    errors, cells = run_matrix(VARIANTS, record, after_each=torch.cuda.empty_cache)
    request.node.user_properties += [("cells", cells), ("failed_cells", len(errors))]
    if errors:
        pytest.fail(failure_report(errors, cells), pytrace=False)
