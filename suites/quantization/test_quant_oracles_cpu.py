"""Quantisation oracles on CPU: round-trip bounds, quantised linear vs dequantised reference,
checkpoint loading, and the checks' power to catch a wrong scale."""

from __future__ import annotations

import math

import pytest
import torch

from ci_register import register_cpu_ci
from suitelib import quant as Q
from suitelib.timing import time_cpu

register_cpu_ci(est_time=15, suite="cpu")

SEEDS = (0, 1, 2, 3, 4)
# Weight [N, K] with a ragged last block in N (320 = 2.5 blocks) to exercise padding.
N, K, M = 320, 512, 48
# Quantised linear vs the float product: rms rounding of two int8 operands on Gaussian
# data is ~1.1% (measured), of two e4m3 operands ~3.7% (3 mantissa bits); bounds leave
# ~2x headroom and still fail on any wrong scale (see test_wrong_scale_is_caught).
VS_FLOAT_TOL = {"int8_channel": 2e-2, "int8_block": 2e-2, "fp8_tensor": 6e-2, "fp8_block": 6e-2}
# Quantised linear vs the same product on dequantised operands in float64: integer
# accumulation is exact, only float32 scaling rounds.
VS_DEQUANT_TOL = 1e-5


def _data(seed: int, m: int = M, n: int = N, k: int = K) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g)
    # Uneven channel magnitudes, as in real checkpoints, so per-channel scales matter.
    w = torch.randn(n, k, generator=g) * torch.logspace(-2, 0, n)[:, None]
    return x, w


def _dequant_activation_product(x: torch.Tensor, qw: Q.QuantizedWeight) -> torch.Tensor:
    """Float64 product of the dequantised activations and weight, quantised as the layer does."""
    xd = Q.dequantize_activation(Q.quantize_activation(x, qw.scheme, qw.block[1]))
    return xd.double() @ Q.dequantize_weight(qw).double().t()


@pytest.mark.parametrize("seed", SEEDS)
def test_int8_per_channel_round_trip_bound(seed: int) -> None:
    _, w = _data(seed)
    q, s = Q.quantize_int8_per_channel(w)
    assert q.dtype == torch.int8 and s.shape == (N,)
    assert int(q.abs().amax(dim=1).min()) == 127, "each row's largest element must map to +-127"
    err = (Q.dequantize_int8_per_channel(q, s) - w).abs()
    # Round to nearest: at most half a step per element (plus float32 slack).
    assert bool((err <= s[:, None] * 0.5 * (1 + 1e-5)).all())


@pytest.mark.parametrize("seed", SEEDS)
def test_int8_block_round_trip_bound(seed: int) -> None:
    _, w = _data(seed)
    q, s = Q.quantize_int8_block(w)
    assert s.shape == (math.ceil(N / 128), K // 128)
    full = s.repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]
    err = (Q.dequantize_block(q, s) - w).abs()
    assert bool((err <= full * 0.5 * (1 + 1e-5)).all())
    # Blocks see their own range: on data that grows along K, the small first K block
    # keeps its precision under block scales and loses it under one per-row scale.
    wk = w * torch.logspace(-3, 0, K)[None, :]
    small = slice(0, 128)
    e_block = Q.relative_error(
        Q.dequantize_weight(Q.quantize_weight(wk, "int8_block"))[:, small], wk[:, small]
    )
    e_chan = Q.relative_error(
        Q.dequantize_weight(Q.quantize_weight(wk, "int8_channel"))[:, small], wk[:, small]
    )
    assert e_block < e_chan / 5


@pytest.mark.parametrize("scheme", ["fp8_tensor", "fp8_block"])
def test_fp8_e4m3_round_trip_bound(scheme: str) -> None:
    _, w = _data(0)
    qw = Q.quantize_weight(w, scheme)
    assert qw.qweight.dtype == torch.float8_e4m3fn
    assert torch.isfinite(qw.qweight.float()).all(), "values past 448 must be clamped, not NaN"
    deq = Q.dequantize_weight(qw)
    if scheme == "fp8_tensor":
        scale = qw.scale.expand_as(w)
    else:
        scale = qw.scale.repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]
    # e4m3: 3 mantissa bits -> relative half-ulp 2^-4 for normals; subnormal step 2^-9.
    bound = torch.maximum(w.abs() * 2.0**-4, scale * 2.0**-10) * (1 + 1e-5)
    assert bool(((deq - w).abs() <= bound).all())
    assert float(qw.qweight.float().abs().max()) == Q.FP8_MAX


def test_zero_weight_gives_zeros_not_nan() -> None:
    w = torch.zeros(256, 256)
    for scheme in Q.SCHEMES:
        deq = Q.dequantize_weight(Q.quantize_weight(w, scheme))
        assert torch.equal(deq, w), scheme


@pytest.mark.parametrize("scheme", Q.SCHEMES)
def test_quantized_linear_vs_references(scheme: str, metrics) -> None:
    vs_float, vs_deq = [], []
    for seed in SEEDS:
        x, w = _data(seed)
        out = Q.quantized_linear(x, Q.quantize_weight(w, scheme))
        assert out.shape == (M, N) and out.dtype == torch.float32
        vs_deq.append(
            Q.relative_error(out, _dequant_activation_product(x, Q.quantize_weight(w, scheme)))
        )
        vs_float.append(Q.relative_error(out, x.double() @ w.double().t()))
    assert max(vs_deq) < VS_DEQUANT_TOL, f"{scheme}: vs dequantised reference {vs_deq}"
    assert max(vs_float) < VS_FLOAT_TOL[scheme], f"{scheme}: vs float {vs_float}"
    # One sample per seed: the quantisation error is deterministic, so a change is a code change.
    metrics.record(f"quant/cpu/{scheme}/rel_err_vs_float", vs_float, unit="ratio", better="lower")


@pytest.mark.parametrize("scheme", ["int8_channel", "int8_block"])
def test_wrong_scale_is_caught(scheme: str) -> None:
    """The tolerances have teeth: scales off by one channel fail the vs-float bound."""
    x, w = _data(0)
    qw = Q.quantize_weight(w, scheme)
    bad = Q.QuantizedWeight(scheme, qw.qweight, qw.scale.roll(1, dims=0), qw.block)
    err = Q.relative_error(Q.quantized_linear(x, bad), x.double() @ w.double().t())
    assert err > 10 * VS_FLOAT_TOL[scheme]


@pytest.mark.parametrize("scheme", Q.SCHEMES)
def test_checkpoint_round_trip(scheme: str, tmp_path) -> None:
    _, w = _data(3)
    qw = Q.quantize_weight(w, scheme)
    path = tmp_path / "layer.pt"
    torch.save({f"model.layers.0.mlp.{k}": v for k, v in qw.state_dict().items()}, path)
    state = torch.load(path, weights_only=True)
    loaded = Q.load_quantized(state, scheme, prefix="model.layers.0.mlp.")
    assert torch.equal(loaded.qweight.view(torch.uint8), qw.qweight.view(torch.uint8))
    assert torch.equal(loaded.scale, qw.scale)
    assert torch.equal(Q.dequantize_weight(loaded), Q.dequantize_weight(qw))


def test_checkpoint_errors_name_the_key() -> None:
    qw = Q.quantize_weight(torch.randn(256, 256), "int8_block")
    with pytest.raises(Q.CheckpointError, match="has no 'weight'"):
        Q.load_quantized({}, "int8_block")
    with pytest.raises(Q.CheckpointError, match="needs torch.int8"):
        Q.load_quantized({"weight": qw.qweight.float(), "weight_scale": qw.scale}, "int8_block")
    with pytest.raises(Q.CheckpointError, match=r"weight_scale_inv: shape \(2,\)"):
        Q.load_quantized({"weight": qw.qweight, "weight_scale_inv": qw.scale[0]}, "int8_block")
    with pytest.raises(Q.CheckpointError, match="finite and positive"):
        Q.load_quantized({"weight": qw.qweight, "weight_scale": -qw.scale}, "int8_block")
    with pytest.raises(Q.CheckpointError, match="unknown quantisation scheme"):
        Q.load_quantized({"weight": qw.qweight, "weight_scale": qw.scale}, "int4")
    # A per-tensor scale saved as [1] is the common checkpoint form and is accepted.
    q8 = Q.quantize_weight(torch.randn(64, 64), "fp8_tensor")
    got = Q.load_quantized(
        {"weight": q8.qweight, "weight_scale": q8.scale.reshape(1)}, "fp8_tensor"
    )
    assert got.scale.shape == ()


def test_int8_linear_cpu_throughput(metrics) -> None:
    x, w = _data(0, m=64, n=512, k=1024)
    qw = Q.quantize_weight(w, "int8_channel")
    t = time_cpu(lambda: Q.quantized_linear(x, qw), samples=5, iters=5, warmup=2)
    flops = 2.0 * 64 * 512 * 1024
    assert all(s > 0 for s in t.samples)
    metrics.record(
        "quant/cpu/int8_channel/m64_n512_k1024/gflops",
        [r / 1e9 for r in t.rate(flops)],
        unit="GFLOP/s",
        better="higher",
    )
