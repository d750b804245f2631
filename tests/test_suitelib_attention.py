"""suitelib.attention on CPU: the float64 reference, the paged cache and its padding."""

from __future__ import annotations

import math

import torch

from suitelib.attention import (
    PAD_K,
    PAD_V,
    build_paged_kv,
    decode_bytes,
    nan_filled_outputs,
    prefill_flops,
    reference_attention,
    sdpa_attention,
)
from suitelib.quant import relative_error


def test_reference_matches_sdpa_and_a_hand_computation() -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(s, h, 16, generator=g) for s, h in ((9, 4), (9, 2), (9, 2)))
    for causal in (False, True):
        assert (
            relative_error(
                sdpa_attention(q, k, v, causal=causal), reference_attention(q, k, v, causal=causal)
            )
            < 1e-5
        )
    # One query, two keys: softmax weights by hand; GQA maps query head 3 to kv head 1.
    q1, k1, v1 = torch.randn(1, 4, 16), torch.randn(2, 2, 16), torch.randn(2, 2, 16)
    s = (k1[:, 1].double() @ q1[0, 3].double()) / 4.0
    p = torch.softmax(s, 0)
    assert torch.allclose(reference_attention(q1, k1, v1)[0, 3], p @ v1[:, 1].double())


def test_causal_reference_aligns_bottom_right() -> None:
    q, k, v = torch.randn(2, 1, 8), torch.randn(5, 1, 8), torch.randn(5, 1, 8)
    out = reference_attention(q, k, v, causal=True)
    # The last query sees every key; the first sees all but the last.
    assert torch.allclose(out[1], reference_attention(q[1:], k, v)[0])
    assert torch.allclose(out[0], reference_attention(q[:1], k[:4], v[:4])[0])


def test_paged_cache_gathers_each_request_and_pads_the_rest() -> None:
    lengths = [1, 16, 17, 40]
    p = build_paged_kv(
        lengths, num_kv_heads=2, head_dim=8, page_size=16, dtype=torch.float32, seed=3
    )
    assert p.indptr.tolist() == [0, 1, 2, 4, 7]
    assert p.last_page_len.tolist() == [1, 16, 1, 8]
    assert len(set(p.indices.tolist())) == 7  # no page shared
    seen = set()
    for i, n in enumerate(lengths):
        k, v = p.request_kv(i)
        assert k.shape == (n, 2, 8) and (k.abs() < 10).all() and (v.abs() < 10).all()
        seen.add(float(k[0, 0, 0]))
    assert len(seen) == len(lengths)
    # Slots nobody owns hold the sentinels (spare pages and last-page tails).
    owned = sum(lengths)
    assert int((p.cache[:, 1] == PAD_V).sum()) == (p.cache[:, 1].numel() - owned * 2 * 8)
    assert int((p.cache[:, 0] == PAD_K).sum()) == (p.cache[:, 0].numel() - owned * 2 * 8)


def test_pages_are_shuffled() -> None:
    p = build_paged_kv(
        [4096], num_kv_heads=1, head_dim=8, dtype=torch.float32, spare_pages=0, seed=1
    )
    assert p.indices.tolist() != sorted(p.indices.tolist())


def test_roofline_arithmetic() -> None:
    assert decode_bytes(1, 1024, 8, 128) == 2 * 1024 * 8 * 128 * 2
    assert prefill_flops(2048, 2048, 32, 128, causal=True) == 4 * 2048 * 2048 * 32 * 128 / 2
    assert math.isclose(prefill_flops(8, 8, 1, 4, causal=False), 1024)


def test_nan_filled_outputs_only_inside_and_only_half_precision() -> None:
    with nan_filled_outputs():
        a = torch.empty(3, dtype=torch.bfloat16)
        b = torch.empty_like(torch.zeros(3, dtype=torch.float16))
        c = torch.empty(3, dtype=torch.int32)
    assert torch.isnan(a).all() and torch.isnan(b).all() and c.dtype == torch.int32
    assert not torch.isnan(torch.zeros(3, dtype=torch.bfloat16)).any()
    assert torch.empty is not None and torch.empty(2, dtype=torch.bfloat16).shape == (2,)


def test_decode_wrapper_plans_the_cache_it_belongs_to() -> None:
    # A stand-in for the flashinfer module: what plan is given is the cache's own
    # layout (heads, head dim, page size, dtype), not constants a caller could mistype.
    calls: list = []

    class Wrapper:
        def __init__(self, workspace, layout, use_tensor_cores):
            calls.append(("init", layout, use_tensor_cores))

        def plan(self, *args, **kwargs):
            calls.append(("plan", args, kwargs))

    fi = type("fi", (), {"BatchDecodeWithPagedKVCacheWrapper": Wrapper})
    paged = build_paged_kv([5, 17], num_kv_heads=2, head_dim=8, page_size=4,
                           dtype=torch.float16)
    paged.decode_wrapper(fi, torch.zeros(8, dtype=torch.uint8), 6, tensor_cores=True)
    (_, layout, tc), (_, args, kwargs) = calls
    assert (layout, tc) == ("NHD", True)
    assert args[0] is paged.indptr and args[1] is paged.indices
    assert args[2] is paged.last_page_len and args[3:] == (6, 2, 8, 4)
    assert kwargs == {"q_data_type": torch.float16, "kv_data_type": torch.float16}
