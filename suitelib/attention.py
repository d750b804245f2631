"""Attention references, paged KV caches and roofline arithmetic for the kernel suites.

Layouts follow FlashInfer's ``NHD``: queries ``[tokens, Hq, D]``, keys and values
``[tokens, Hkv, D]``; a paged cache is ``[pages, 2, page_size, Hkv, D]`` (K then V).
The reference is computed in float64 from the same bf16 inputs the kernel sees, so its
error is the kernel's alone.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import torch

__all__ = [
    "reference_attention",
    "sdpa_attention",
    "PagedKV",
    "build_paged_kv",
    "decode_bytes",
    "prefill_flops",
    "nan_filled_outputs",
    "PAD_K",
    "PAD_V",
    "POOL_SPARE_SHARE",
    "DECODE_BLOCKS",
    "DECODE_PACED",
    "time_decode_blocks",
]

# Filler for cache slots no request owns. Finite (a masked NaN can still poison a
# correct kernel through 0 * NaN) but large: a kernel that reads a slot it should not
# gets logits of ~1e3 and values of 1e3, far outside any tolerance.
PAD_K = 64.0
PAD_V = 1000.0


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False
) -> torch.Tensor:
    """float64 ``softmax(q k^T / sqrt(d)) v`` with GQA; returns ``[Sq, Hq, D]`` float64.

    Causal masking aligns the last query with the last key (FlashInfer's and SDPA's
    convention when ``Sq == Skv``; for ``Sq < Skv`` it is FlashInfer's bottom-right one).
    """
    sq, hq, d = q.shape
    skv, hkv, _ = k.shape
    if hq % hkv:
        raise ValueError(f"{hq} query heads are not a multiple of {hkv} kv heads")
    group = hq // hkv
    qd = q.double().transpose(0, 1)  # [Hq, Sq, D]
    kd = k.double().transpose(0, 1).repeat_interleave(group, dim=0)  # [Hq, Skv, D]
    vd = v.double().transpose(0, 1).repeat_interleave(group, dim=0)
    scores = qd @ kd.transpose(1, 2) / math.sqrt(d)
    if causal:
        i = torch.arange(sq, device=q.device)[:, None] + (skv - sq)
        j = torch.arange(skv, device=q.device)[None, :]
        scores = scores.masked_fill(j > i, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vd).transpose(0, 1)


def sdpa_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False
) -> torch.Tensor:
    """torch SDPA in the inputs' dtype (cuDNN/flash on a GPU), NHD in and out."""
    hq, hkv = q.shape[1], k.shape[1]
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1).unsqueeze(0),
        k.transpose(0, 1).unsqueeze(0),
        v.transpose(0, 1).unsqueeze(0),
        is_causal=causal,
        enable_gqa=hq != hkv,
    )
    return out.squeeze(0).transpose(0, 1)


@dataclass
class PagedKV:
    """A paged KV cache plus the page table FlashInfer's ``plan`` takes."""

    cache: torch.Tensor  # [pages, 2, page_size, Hkv, D]
    indptr: torch.Tensor  # int32 [B + 1]
    indices: torch.Tensor  # int32 [indptr[-1]], shuffled page ids
    last_page_len: torch.Tensor  # int32 [B], in 1..page_size
    lengths: list[int]
    page_size: int

    def request_kv(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Contiguous ``(k, v)`` of request ``i``, gathered through the page table."""
        lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
        pages = self.cache[self.indices[lo:hi].long()]  # [n, 2, P, Hkv, D]
        kv = pages.transpose(0, 1).reshape(2, -1, *self.cache.shape[3:])
        n = self.lengths[i]
        return kv[0, :n], kv[1, :n]

    def reseated(self, seed: int) -> PagedKV:
        """The same requests on other pages of the same cache: a fresh random page table
        drawn from all of its pages (spare ones too), the data left where it is.

        For timing only: a request's K/V become whatever those pages hold (pad pages
        included), so compare outputs with :meth:`request_kv` of the reseated cache.
        Each draw moves every request's pages to other places in device memory, as a
        new allocation would, without allocating (``suitelib.blocks``).
        """
        need = int(self.indptr[-1])
        g = torch.Generator(device="cpu").manual_seed(seed)
        perm = torch.randperm(self.cache.shape[0], generator=g)[:need].to(torch.int32)
        return replace(self, indices=perm.to(self.indices.device))

    def decode_wrapper(self, fi, workspace: torch.Tensor, num_qo_heads: int, *,
                       tensor_cores: bool = False):
        """A FlashInfer ``BatchDecodeWithPagedKVCacheWrapper`` planned for this cache.

        ``fi`` is the imported ``flashinfer`` module (``hardware.import_flashinfer``);
        queries and cache share the cache's dtype. ``tensor_cores`` picks the
        prefill-style kernel FlashInfer uses for grouped-query decode.
        """
        w = fi.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD",
                                                  use_tensor_cores=tensor_cores)
        w.plan(self.indptr, self.indices, self.last_page_len, num_qo_heads,
               self.cache.shape[3], self.cache.shape[4], self.page_size,
               q_data_type=self.cache.dtype, kv_data_type=self.cache.dtype)
        return w


def build_paged_kv(
    lengths: Sequence[int],
    *,
    num_kv_heads: int,
    head_dim: int,
    page_size: int = 16,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device | str = "cpu",
    spare_pages: int = 3,
    seed: int = 0,
) -> PagedKV:
    """Random K/V for requests of ``lengths`` tokens in shuffled pages.

    Pages are assigned in a random permutation (so a kernel that assumes contiguous
    pages reads the wrong data); ``spare_pages`` unowned pages and the unused tail of
    each last page hold ``PAD_K`` / ``PAD_V``.
    """
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be non-empty and >= 1, got {list(lengths)}")
    g = torch.Generator(device="cpu").manual_seed(seed)
    # Values come from a generator on the target device: GBs of randn on a CPU take minutes.
    gd = torch.Generator(device=device).manual_seed(seed)
    npages = [math.ceil(n / page_size) for n in lengths]
    total = sum(npages) + spare_pages
    perm = torch.randperm(total, generator=g)[: sum(npages)].to(torch.int32)
    cache = torch.empty(total, 2, page_size, num_kv_heads, head_dim, dtype=dtype, device=device)
    cache[:, 0] = PAD_K
    cache[:, 1] = PAD_V
    indptr = [0]
    for n, p in zip(lengths, npages, strict=True):
        lo = indptr[-1]
        ids = perm[lo : lo + p].long().to(device)
        kv = torch.randn(2, p * page_size, num_kv_heads, head_dim, generator=gd, device=device).to(
            dtype
        )
        kv[0, n:] = PAD_K
        kv[1, n:] = PAD_V
        cache[ids] = kv.reshape(2, p, page_size, num_kv_heads, head_dim).transpose(0, 1)
        indptr.append(lo + p)
    last = [n - (p - 1) * page_size for n, p in zip(lengths, npages, strict=True)]
    as_i32 = {"dtype": torch.int32, "device": device}
    return PagedKV(
        cache=cache,
        indptr=torch.tensor(indptr, **as_i32),
        indices=perm.to(device),
        last_page_len=torch.tensor(last, **as_i32),
        lengths=list(lengths),
        page_size=page_size,
    )


def decode_bytes(batch: int, kv_len: int, num_kv_heads: int, head_dim: int, elem: int = 2) -> int:
    """Bytes a decode step must read: K and V once (q and output are negligible)."""
    return 2 * batch * kv_len * num_kv_heads * head_dim * elem


def prefill_flops(sq: int, skv: int, num_qo_heads: int, head_dim: int, *, causal: bool) -> float:
    """Matmul FLOPs of attention: 2 GEMMs of 2*Sq*Skv*D each per head, halved if causal."""
    flops = 4.0 * sq * skv * num_qo_heads * head_dim
    return flops / 2 if causal else flops


@contextlib.contextmanager
def nan_filled_outputs(
    dtypes: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16),
) -> Iterator[None]:
    """Make ``torch.empty``/``empty_like`` of ``dtypes`` return NaN-filled tensors.

    Kernel wrappers that allocate their own output (FlashInfer's single decode and
    prefill) then hand back NaN wherever the kernel wrote nothing. Only half-precision
    allocations are filled: float32 scratch (LSE, split-k partials) keeps its
    uninitialised contents, as kernels may legitimately leave parts of it unwritten.
    Use it around correctness calls only, never inside timed loops.
    """
    empty, empty_like = torch.empty, torch.empty_like

    def _fill(t: torch.Tensor) -> torch.Tensor:
        if t.dtype in dtypes:
            t.fill_(float("nan"))
        return t

    torch.empty = lambda *a, **k: _fill(empty(*a, **k))  # type: ignore[assignment]
    torch.empty_like = lambda *a, **k: _fill(empty_like(*a, **k))  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.empty, torch.empty_like = empty, empty_like


# Block timing of batch decode (suitelib.blocks): the pool holds this share more pages
# than the requests need, so each block's page table also reaches pages the last one
# left unused.
POOL_SPARE_SHARE = 8  # spare pages: 1/8 of the requests' pages
# Blocks of a decode shape: 0.1 s of untimed calls first (at b64 kv32768 the recorded
# runs' first 60 ms are a median 1.45% fast: benchmarks/results/gpu_noise.md), then 8
# placements, each 2 untimed and 8 timed calls (the median of 8). Per fa2 shape 80 calls
# and the 0.1 s: the four fa2 shapes of 8 or more requests add about 0.8 s on an H200
# (their recorded latencies, 0.38-3.0 ms a call), under a tenth of a warm `base-b-1gpu`
# run (10-13 s in the committed history).
DECODE_BLOCKS = {"blocks": 8, "iters": 8, "warmup": 2, "settle_s": 0.1}
# Paced blocks (issue 56): as DECODE_BLOCKS, no reference, and after every call the GPU
# idles as long as the call took, so the card stays under its power cap and its SM
# clock where the load does not push it; before the first block the calls run untimed
# (paced) until three SM clock readings in a row agree, at most 1 s.
DECODE_PACED = {"blocks": 8, "iters": 8, "warmup": 2, "settle_s": 0.1, "pace": 1.0,
                "settle_max_s": 1.0}


def time_decode_blocks(fi, workspace: torch.Tensor, lengths: Sequence[int], num_qo_heads: int,
                       num_kv_heads: int, head_dim: int, *, page_size: int = 16,
                       tensor_cores: bool = False, config: dict | None = None,
                       reference=None, clock=None, **overrides):
    """Batch decode timed in blocks, each on a fresh page table over one pool (a
    :class:`suitelib.blocks.BlockTiming`): the requests of ``lengths`` move to other
    pages every block, so where one page table's pages landed in device memory is one
    block of the run, not the run. Block ``b`` uses ``PagedKV.reseated(b + 1)``: the
    same page tables in every process, only their placement in memory differs.
    ``config``: ``DECODE_BLOCKS`` (the default) or ``DECODE_PACED``; ``overrides``
    (``blocks``, ``iters``, ``warmup``, ``settle_s``, ``pace``, ``settle_max_s``) replace
    its values; ``reference`` and ``clock`` as ``time_cuda_blocks`` takes them."""
    from suitelib.blocks import time_cuda_blocks  # local: CUDA work only

    kw = dict(DECODE_BLOCKS if config is None else config)
    unknown = set(overrides) - {"blocks", "iters", "warmup", "settle_s", "pace", "settle_max_s"}
    if unknown:
        raise TypeError(f"time_decode_blocks: unknown timing argument(s) {sorted(unknown)}")
    kw.update({k: v for k, v in overrides.items() if v is not None})

    need = sum(math.ceil(n / page_size) for n in lengths)
    pool = build_paged_kv(lengths, num_kv_heads=num_kv_heads, head_dim=head_dim,
                          page_size=page_size, device=workspace.device,
                          spare_pages=max(1, need // POOL_SPARE_SHARE))
    q = torch.randn(len(lengths), num_qo_heads, head_dim, dtype=pool.cache.dtype,
                    device=workspace.device)
    out = torch.empty_like(q)

    def setup(b: int):
        p = pool.reseated(b + 1)
        w = p.decode_wrapper(fi, workspace, num_qo_heads, tensor_cores=tensor_cores)
        return lambda: w.run(q, p.cache, out=out)

    return time_cuda_blocks(setup, reference=reference, clock=clock, **kw)
