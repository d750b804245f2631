"""All-reduce benchmark: one process per device, exact-sum check, bus bandwidth per size.

Processes are started with ``torch.multiprocessing`` (spawn) and meet through a
``FileStore``, so no port is needed. Each rank writes its results to a JSON file; the
caller combines them (a collective is as slow as its slowest rank). ``backend="gloo"``
runs the same code on CPU tensors, which is how the logic is tested without GPUs.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from suitelib.hardware import NCCL_SAFE_ENV

__all__ = ["AllReduceResult", "allreduce_bench", "bus_bandwidth", "size_label"]


@dataclass(frozen=True)
class AllReduceResult:
    """One message size: per-sample times of the slowest rank, and whether sums were exact."""

    size_bytes: int
    world_size: int
    samples_s: list[float]
    exact: bool
    first_mismatch: str

    @property
    def busbw(self) -> list[float]:
        """Bus bandwidth per sample in B/s (nccl-tests' definition)."""
        return [bus_bandwidth(self.size_bytes, self.world_size, t) for t in self.samples_s]


def bus_bandwidth(nbytes: int, world_size: int, seconds: float) -> float:
    """``2 (n - 1) / n * bytes / time``: what each link carries in a ring all-reduce."""
    return 2.0 * (world_size - 1) / world_size * nbytes / seconds


def size_label(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return f"{nbytes}B"


def _worker(
    rank: int,
    world: int,
    sizes: list[int],
    backend: str,
    store_path: str,
    out_dir: str,
    samples: int,
    iters: int,
    warmup: int,
    perturb_rank: int,
) -> None:
    os.environ.update(NCCL_SAFE_ENV)  # before NCCL initialises, whatever the parent set
    import torch
    import torch.distributed as dist

    cuda = backend == "nccl"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    store = dist.FileStore(store_path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)
    try:
        out = []
        factor = world * (world + 1) // 2  # sum over ranks of (rank + 1)
        for nbytes in sizes:
            n = nbytes // 2
            # Small integers in bf16: every partial sum of any reduction order is exact
            # (|sum| <= 2 * factor <= 256 for up to 15 ranks), so equality is the check.
            pattern = (torch.arange(n, device=device) % 5 - 2).to(torch.bfloat16)
            x = pattern * (rank + 1)
            if rank == perturb_rank:  # lets a test prove the exact-sum check can fail
                x[-1] += 1
            dist.all_reduce(x)
            want = pattern * factor
            exact = bool(torch.equal(x, want))
            mismatch = ""
            if not exact:
                i = int((x != want).nonzero()[0])
                mismatch = f"element {i}: got {float(x[i])}, want {float(want[i])}"
            del want, pattern
            for _ in range(warmup):
                dist.all_reduce(x)
            times = []
            for _ in range(samples):
                dist.barrier()
                times.append(statistics.median(_timed(dist, x, iters, cuda)))
            out.append({"size": nbytes, "samples": times, "exact": exact, "mismatch": mismatch})
            del x
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))
    finally:
        dist.destroy_process_group()


def _timed(dist, x, iters: int, cuda: bool) -> list[float]:
    import torch

    if not cuda:
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            dist.all_reduce(x)
            ts.append(time.perf_counter() - t0)
        return ts
    evs = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(iters)
    ]
    for start, end in evs:
        start.record()
        dist.all_reduce(x)
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in evs]


def allreduce_bench(
    world_size: int,
    sizes: list[int],
    out_dir: str | Path,
    *,
    backend: str = "nccl",
    samples: int = 5,
    iters: int = 10,
    warmup: int = 3,
    timeout_s: float = 300.0,
    perturb_rank: int = -1,
) -> list[AllReduceResult]:
    """Run the benchmark in ``world_size`` spawned processes; raise if any of them fails.

    ``perturb_rank`` adds 1 to that rank's last element (for tests of the sum check).
    """
    import torch.multiprocessing as mp

    if world_size < 1 or any(s < 2 or s % 2 for s in sizes):
        raise ValueError(f"world_size {world_size} and even sizes >= 2 bytes needed, got {sizes}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = out_dir / "store"
    store.unlink(missing_ok=True)
    args = (
        world_size,
        list(sizes),
        backend,
        str(store),
        str(out_dir),
        samples,
        iters,
        warmup,
        perturb_rank,
    )
    ctx = mp.start_processes(
        _worker, args=args, nprocs=world_size, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=2.0):  # raises ProcessRaisedException when a rank fails
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            raise TimeoutError(f"all-reduce over {world_size} processes ran past {timeout_s:.0f} s")
    ranks = [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world_size)]
    results = []
    for i, nbytes in enumerate(sizes):
        per_rank = [r[i] for r in ranks]
        slowest = [max(r["samples"][j] for r in per_rank) for j in range(samples)]
        bad = [f"rank {k}: {r['mismatch']}" for k, r in enumerate(per_rank) if not r["exact"]]
        results.append(AllReduceResult(nbytes, world_size, slowest, not bad, "; ".join(bad)))
    return results
