"""Run-to-run noise of FlashInfer fa2 batch decode: the suite's timing against paced blocks.

    python benchmarks/gpu_noise.py proc --out procs.jsonl --index I [--modes M,...] [--diag]
    python benchmarks/gpu_noise.py summarize procs.jsonl [--json J] [--md M] [--skip N] \
        [--series-json S]
    python benchmarks/gpu_noise.py history DB [DB ...] --out JSON [--suite base-b-1gpu]
    python benchmarks/gpu_noise.py spread JSON      # history's JSON: spread per GPU

``proc`` is one fresh process (on a GPU): it appends one JSON line to ``--out``. It times
each decode shape (GQA 32/8, head dim 128, bf16, pages of 16, kv 32768 at batch 8, 32 and
64) first as the suite's ``<key>/latency`` does, then by each of ``--modes`` in turn
(default ``perm,paced``):

- ``old`` (always, first): ``time_cuda``, 5 samples of 20 iterations, one allocation, the
  suite's page table, the SM clock read before and after;
- ``paced``: ``suitelib.attention.time_decode_blocks`` with ``DECODE_PACED``, what the
  suite records as ``<key>/paced/latency``: each block a fresh page table, an idle gap as
  long as the call after every call, settled on the SM clock (NVML), no reference;
  ``paced_half`` / ``paced2`` (gaps of half / twice the call), ``paced_ref`` (the copy
  interleaved too), ``settle_only`` (settled, no gaps) are its variants;
- ``perm``: unpaced blocks (``DECODE_BLOCKS``), each a fresh page table over a pool with
  an eighth more pages than the requests need (``PagedKV.reseated``), a 256 MiB copy
  interleaved as the reference; what the suite recorded until paced blocks replaced it.

Every block method reads the SM clock, power and clock-event reasons after each block.

With ``--diag`` it also times, per shape, ``perm`` and ``same`` (blocks on one page table: what a block
cancels without moving the inputs), ``alloc`` (blocks on a fresh allocation each, the
previous one still held so the new one lands elsewhere; the workspace, queries and output
too), ``perm_fa2ref`` (``perm`` with the same kernel on a pinned shape, batch 8 kv 8192, as
the reference instead of the copy), ``old`` again at the end (is a
slow allocation slow for the process's life?), and for batch 1 and 8 eager calls without
the L2 flush and CUDA-graph replays; and reads the GPU's clocks, power, temperature and
clock-event reasons (NVML) around each part. Odd ``--index`` values take the shapes in
reverse order (launch order).

``summarize`` reads the lines (skipping the first ``--skip``, the process that compiled the
kernels) and writes, per shape and method, the per-process medians, their standard deviation
relative to their median (the run-to-run spread a gate sees), the within-process spread, and
for the diagnostics the correlation of each method's per-process medians with ``old``'s;
``--series-json``: the processes' samples in ``history``'s format (below), a process a run.
``tools/gpu_noise.sh`` runs the whole experiment on a lent GPU.

``history`` reads the fa2 decode samples of recorded suite runs (complete, trusted, first
runs; by GPU uuid) out of history files into the JSON that ``benchmarks/series.py``'s
``suite`` noise model reads (``benchmarks/data/suite-noise/fa2_decode.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suitelib.attention import DECODE_BLOCKS, DECODE_PACED  # noqa: E402

HQ, HKV, D, PAGE = 32, 8, 128, 16
SHAPES = ((8, 32768), (32, 32768), (64, 32768))
LAUNCH_SHAPES = ((1, 1024), (8, 32768))  # the launch diagnostics (--diag)
PINNED = (8, 8192)  # the reference shape of perm_fa2ref (--diag)
WORKSPACE_BYTES = 128 << 20  # FlashInfer's workspace, as the suite gives it
OLD = {"samples": 5, "iters": 20, "warmup": 3}  # the suite's time_cuda arguments
BLOCKS = dict(DECODE_BLOCKS)  # the suite's block timing
PACED = dict(DECODE_PACED)  # the suite's paced block timing (the new measurement)
# Paced variants (``--modes``): mode -> (overrides of PACED, reference: copy or none).
PACED_MODES = {"paced": ({}, False), "paced_half": ({"pace": 0.5}, False),
               "paced2": ({"pace": 2.0}, False), "paced_ref": ({}, True),
               "settle_only": ({"pace": 0.0}, False)}
DIAG_MODES = ("perm", "same", "alloc", "perm_fa2ref")


def _key(shape: tuple[int, int]) -> str:
    return f"b{shape[0]}_kv{shape[1]}"


# ------------------------------------------------------------------ on the GPU


class _Clocks:
    """NVML readings (None where NVML is missing): SM and memory clock, power, temperature,
    clock-event reasons."""

    def __init__(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as e:  # noqa: BLE001 - diagnostics only: the timing goes on
            self.nv, self.error = None, repr(e)

    def uuid(self) -> str | None:
        if self.nv is None:
            return None
        try:
            u = self.nv.nvmlDeviceGetUUID(self.h)
            return u.decode() if isinstance(u, bytes) else str(u)
        except Exception:  # noqa: BLE001
            return None

    def sm_reader(self, log: list[list[Any]]):
        """A ``suitelib.blocks`` clock: the SM clock in MHz; each reading also appends
        [SM MHz, power W, clock-event reasons] to ``log``. None without NVML."""
        if self.nv is None:
            return None
        nv, h = self.nv, self.h
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons",
                          getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None))

        def read() -> float | None:
            row: list[Any] = []
            for f in (lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                      lambda: round(nv.nvmlDeviceGetPowerUsage(h) / 1e3, 1),
                      lambda: reasons(h)):
                try:
                    row.append(f())
                except Exception:  # noqa: BLE001 - diagnostics only
                    row.append(None)
            log.append(row)
            return None if row[0] is None else float(row[0])

        return read

    def read(self, where: str) -> dict[str, Any]:
        if self.nv is None:
            return {"where": where, "error": self.error}
        nv, h = self.nv, self.h
        out: dict[str, Any] = {"where": where, "t": time.time()}
        for name, f in (("sm_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                        ("mem_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
                        ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1e3),
                        ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                        ("reasons", lambda: getattr(
                            nv, "nvmlDeviceGetCurrentClocksEventReasons",
                            getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None))(h))):
            try:
                out[name] = f()
            except Exception as e:  # noqa: BLE001
                out[name] = repr(e)
        return out


def _proc(out: Path, index: int, diag: bool, modes: tuple[str, ...] = ("perm", "paced")) -> None:
    import torch

    from suitelib import hardware as hw
    from suitelib.attention import POOL_SPARE_SHARE as SPARE
    from suitelib.attention import build_paged_kv, time_decode_blocks
    from suitelib.blocks import NO_REFERENCE, copy_reference, time_cuda_blocks
    from suitelib.timing import time_cuda

    t_start = time.time()
    fi = hw.import_flashinfer()
    clocks = _Clocks()
    rec: dict[str, Any] = {"index": index, "pid": os.getpid(), "gpu": torch.cuda.get_device_name(0),
                           "uuid": clocks.uuid(), "diag": diag,
                           "clocks": [clocks.read("start")], "errors": [],
                           "old": {}, "perm": {}, "ptr": {}}
    workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    ref = copy_reference()

    def build(shape, spare: int, seed: int = 0):
        b, kv = shape
        return build_paged_kv([kv] * b, num_kv_heads=HKV, head_dim=D, page_size=PAGE,
                              device="cuda", spare_pages=spare, seed=seed)

    pinned_call: list[Any] = []

    def pinned():
        """The same kernel on a pinned shape (batch 8, kv 8192, one allocation), built
        once a process: the reference of ``perm_fa2ref``."""
        if not pinned_call:
            p = build(PINNED, 0)
            qp = torch.randn(PINNED[0], HQ, D, dtype=torch.bfloat16, device="cuda")
            op = torch.empty_like(qp)
            wp = p.decode_wrapper(fi, workspace, HQ)
            pinned_call.append(lambda: wp.run(qp, p.cache, out=op))
        return pinned_call[0]

    def old(shape) -> dict[str, Any]:
        paged = build(shape, 0)
        q = torch.randn(shape[0], HQ, D, dtype=torch.bfloat16, device="cuda")
        w = paged.decode_wrapper(fi, workspace, HQ)
        o = torch.empty_like(q)
        log: list[list[Any]] = []
        read = clocks.sm_reader(log)
        if read:
            read()
        t = time_cuda(lambda: w.run(q, paged.cache, out=o), **OLD)
        if read:
            read()
        return {"samples": t.samples, "ptr": paged.cache.data_ptr(), "nvml": log}

    def blocks(shape, mode: str) -> dict[str, Any]:
        b, kv = shape
        q = torch.randn(b, HQ, D, dtype=torch.bfloat16, device="cuda")
        o = torch.empty_like(q)
        need = b * (kv // PAGE)
        held: list[Any] = []
        pool = build(shape, need // SPARE) if mode == "same" else None
        ptrs: list[int] = []

        def setup(i: int):
            if mode == "same":
                p = pool
            else:  # alloc: new cache, workspace, q and out, the last ones held (elsewhere)
                p = build(shape, need // SPARE, seed=i + 1).reseated(i + 1)
                ws = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
                qa = torch.randn(b, HQ, D, dtype=torch.bfloat16, device="cuda")
                oa = torch.empty_like(qa)
                held[:] = held[-1:] + [(p, ws, qa, oa)]
                ptrs.append(p.cache.data_ptr())
                wa = p.decode_wrapper(fi, ws, HQ)
                return lambda: wa.run(qa, p.cache, out=oa)
            ptrs.append(p.cache.data_ptr())
            w = p.decode_wrapper(fi, workspace, HQ)
            return lambda: w.run(q, p.cache, out=o)

        log: list[list[Any]] = []
        if mode in PACED_MODES:  # the suite's paced blocks, or a variant of them
            over, with_ref = PACED_MODES[mode]
            t = time_decode_blocks(fi, workspace, [kv] * b, HQ, HKV, D, page_size=PAGE,
                                   config={**PACED, **over}, clock=clocks.sm_reader(log),
                                   reference=ref if with_ref else NO_REFERENCE)
        elif mode in ("perm", "perm_fa2ref"):  # what the suite records: suitelib's own helper
            t = time_decode_blocks(fi, workspace, [kv] * b, HQ, HKV, D, page_size=PAGE,
                                   reference=ref if mode == "perm" else pinned(),
                                   clock=clocks.sm_reader(log), **BLOCKS)
        else:
            t = time_cuda_blocks(setup, reference=ref, clock=clocks.sm_reader(log), **BLOCKS)
        return {"samples": t.samples, "reference": t.reference, "ptrs": ptrs,
                "clocks": t.clocks, "settle_clocks": t.settle_clocks, "gap_s": t.gap_s,
                "nvml": log}

    # The suite's measurement first, in the suite's order, as a suite process starts.
    for shape in SHAPES:
        try:
            rec["old"][_key(shape)] = old(shape)
        except Exception as e:  # noqa: BLE001 - one failed part must not lose the rest
            rec["errors"].append(f"old {shape}: {e!r}")
        torch.cuda.empty_cache()
    rec["clocks"].append(clocks.read("after old"))
    order = list(SHAPES)[::-1] if (diag and index % 2) else list(SHAPES)
    rec["order"] = [_key(s) for s in order]
    if diag:
        modes = tuple(dict.fromkeys((*modes, *DIAG_MODES)))
    rec["modes"] = list(modes)
    for mode in modes:
        rec.setdefault(mode, {})
        for shape in order:
            try:
                rec[mode][_key(shape)] = blocks(shape, mode)
            except Exception as e:  # noqa: BLE001
                rec["errors"].append(f"{mode} {shape}: {e!r}")
            torch.cuda.empty_cache()
        rec["clocks"].append(clocks.read(f"after {mode}"))
    if diag:
        rec["old_again"] = {}
        for shape in SHAPES:
            try:
                rec["old_again"][_key(shape)] = old(shape)
            except Exception as e:  # noqa: BLE001
                rec["errors"].append(f"old_again {shape}: {e!r}")
            torch.cuda.empty_cache()
        rec["clocks"].append(clocks.read("after old_again"))
        rec["launch"] = _launch_diag(fi, workspace, build)
        rec["clocks"].append(clocks.read("end"))
    rec["wall_s"] = time.time() - t_start
    with out.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    print(f"proc {index}: " + " ".join(
        f"{k} old {1e3 * statistics.median(v['samples']):.4f}" + "".join(
            f" {m} {1e3 * statistics.median(rec[m][k]['samples']):.4f}"
            for m in modes if k in rec.get(m, {}))
        for k, v in rec["old"].items()) + " ms", f"errors {len(rec['errors'])}",
        f"{rec['wall_s']:.1f} s", flush=True)


def _launch_diag(fi, workspace, build) -> dict[str, Any]:
    """Batch 1 (kv 1024) and 8 (kv 32768): eager with and without the L2 flush, and 20
    calls replayed from one CUDA graph (per call), each the median of 5 samples."""
    res: dict[str, Any] = {}
    for shape in LAUNCH_SHAPES:
        try:
            _launch_one(fi, workspace, build, shape, res)
        except Exception as e:  # noqa: BLE001 - diagnostics only
            res[f"{_key(shape)}/error"] = repr(e)
    return res


def _launch_one(fi, workspace, build, shape, res: dict[str, Any]) -> None:
    import torch

    from suitelib.timing import time_cuda

    k = _key(shape)
    paged = build(shape, 0)
    q = torch.randn(shape[0], HQ, D, dtype=torch.bfloat16, device="cuda")
    o = torch.empty_like(q)
    w = paged.decode_wrapper(fi, workspace, HQ)

    def run() -> None:
        w.run(q, paged.cache, out=o)

    res[f"{k}/flush"] = time_cuda(run, **OLD).samples
    res[f"{k}/noflush"] = time_cuda(run, flush_l2=False, **OLD).samples
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(20):
            run()
    torch.cuda.synchronize()
    t = time_cuda(g.replay, samples=5, iters=5, warmup=2, flush_l2=False)
    res[f"{k}/graph20_per_call"] = [x / 20 for x in t.samples]


# ------------------------------------------------------------------ analysis


def _cv(xs: list[float]) -> float:
    """Sample standard deviation relative to the median (a share)."""
    return statistics.stdev(xs) / statistics.median(xs) if len(xs) > 1 else float("nan")


def _corr(a: list[float], b: list[float]) -> float:
    if len(a) < 3 or statistics.pstdev(a) == 0 or statistics.pstdev(b) == 0:
        return float("nan")
    return statistics.correlation(a, b)


def _values(part: dict[str, Any], ratio: bool) -> list[float] | None:
    if not part or "samples" not in part:
        return None
    if ratio:
        ref = part.get("reference") or []
        if len(ref) != len(part["samples"]):
            return None
        return [s / r for s, r in zip(part["samples"], ref, strict=True)]
    return part["samples"]


METHODS = (("old", "old", False), ("perm", "perm", False), ("perm/copy", "perm", True),
           ("same", "same", False), ("same/copy", "same", True), ("alloc", "alloc", False),
           ("alloc/copy", "alloc", True), ("perm/fa2 b8_kv8192", "perm_fa2ref", True),
           ("copy (perm blocks)", "perm", "ref"), ("fa2 b8_kv8192 (ref)", "perm_fa2ref", "ref"),
           ("old_again", "old_again", False), ("paced", "paced", False),
           ("paced_half", "paced_half", False), ("paced2", "paced2", False),
           ("paced_ref", "paced_ref", False), ("paced_ref/copy", "paced_ref", True),
           ("settle_only", "settle_only", False))


def summarize(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per shape and method: per-process medians, their relative SD, the median
    within-process relative SD, and the correlation with ``old`` across processes."""
    shapes: dict[str, Any] = {}
    keys = sorted({k for r in recs for k in r.get("old", {})}, key=lambda k: int(k[1:k.index("_")]))
    for k in keys:
        row: dict[str, Any] = {}
        olds = None
        for name, field, ratio in METHODS:
            meds, within = [], []
            for r in recs:
                part = r.get(field, {}).get(k)
                v = part.get("reference") if (part and ratio == "ref") else _values(part, bool(ratio))
                if not v:
                    meds.append(None)
                    continue
                meds.append(statistics.median(v))
                within.append(_cv(v))
            ok = [m for m in meds if m is not None]
            if len(ok) < 2:
                continue
            cell = {"n": len(ok), "median": statistics.median(ok), "sd_rel": _cv(ok),
                    "min": min(ok), "max": max(ok),
                    "within_sd_rel": statistics.median(within), "per_process": meds}
            if name == "old":
                olds = meds
            elif olds is not None:
                pairs = [(a, b) for a, b in zip(olds, meds, strict=True)
                         if a is not None and b is not None]
                cell["corr_with_old"] = _corr([a for a, _ in pairs], [b for _, b in pairs])
            row[name] = cell
        shapes[k] = row
    return shapes


def target_doc(summary: dict[str, Any], recs: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 56's figures per shape: ``sd_before`` (the suite's first measurement,
    ``old``, ``<key>/latency``), ``sd_after`` (paced blocks, ``<key>/paced/latency``),
    ``sd_blocks`` and ``sd_blocks_vs_copy`` (unpaced blocks, ``<key>/blocks/latency`` and
    ``<key>/blocks/vs_copy``), each the SD of per-process medians over their median
    (None where the method did not run); every method's cell beside them."""
    shapes = {}
    for k, row in summary.items():
        sd = {name: row[name]["sd_rel"] if name in row else None
              for name in ("old", "perm", "perm/copy", "paced")}
        shapes[k] = {"sd_before": sd["old"], "sd_after": sd["paced"],
                     "sd_blocks": sd["perm"], "sd_blocks_vs_copy": sd["perm/copy"],
                     "processes": row["old"]["n"] if "old" in row else 0, "methods": row}
    return {"processes": len(recs), "gpu": recs[0].get("gpu") if recs else None,
            "shapes": shapes}


def spread_of_recorded(doc: dict[str, Any], min_runs: int = 3) -> list[str]:
    """A table of ``history``'s JSON: per key and GPU with ``min_runs`` runs or more, the
    SD of the run medians over their median, and the median within-run SD."""
    lines = ["| metric | GPU | runs | median of run medians | run-to-run SD | within-run SD |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for key, by in doc["keys"].items():
        for gpu, runs in sorted(by.items()):
            if len(runs) < min_runs:
                continue
            meds = [statistics.median(r) for r in runs]
            lines.append(f"| {key} | {gpu[:12]} | {len(runs)} | {1e3 * statistics.median(meds):.4f} ms"
                         f" | {100 * _cv(meds):.3f}% | "
                         f"{100 * statistics.median(_cv(r) for r in runs):.3f}% |")
    lines += ["", "Each run's first sample over the median of its others (time under load):", "",
              "| metric | runs | median | min | max | more than 0.5% under |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for key, by in doc["keys"].items():
        first = [r[0] / statistics.median(r[1:]) - 1 for runs in by.values() for r in runs
                 if len(r) > 1]
        if first:
            lines.append(f"| {key} | {len(first)} | {100 * statistics.median(first):+.2f}% | "
                         f"{100 * min(first):+.2f}% | {100 * max(first):+.2f}% | "
                         f"{sum(f < -0.005 for f in first)} |")
    return lines


def series_doc(recs: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """The processes' samples in ``history``'s JSON format (what ``series.suite_data``
    reads), by GPU: ``old`` under the suite's ``<key>/latency``, ``paced`` under
    ``<key>/paced/latency``, ``perm`` under ``<key>/blocks/latency`` and its ratios under
    ``<key>/blocks/vs_copy``; a process a run, as the suite records them."""
    keys: dict[str, dict[str, list[list[float]]]] = {}
    for r in recs:
        gpu = r.get("uuid") or r.get("gpu") or "?"
        for shape, part in r.get("old", {}).items():
            keys.setdefault(f"attn/decode/fa2/{shape}/latency", {}).setdefault(gpu, []).append(
                part["samples"])
        for shape, part in r.get("paced", {}).items():
            keys.setdefault(f"attn/decode/fa2/{shape}/paced/latency", {}).setdefault(
                gpu, []).append(part["samples"])
        for shape, part in r.get("perm", {}).items():
            base = f"attn/decode/fa2/{shape}/blocks"
            keys.setdefault(f"{base}/latency", {}).setdefault(gpu, []).append(part["samples"])
            ratios = _values(part, True)
            if ratios:
                keys.setdefault(f"{base}/vs_copy", {}).setdefault(gpu, []).append(ratios)
    return {"suite": "gpu_noise", "sources": [source], "keys": keys}


def _launch_table(recs: list[dict[str, Any]]) -> list[str]:
    names = sorted({k for r in recs for k in r.get("launch", {}) if not k.endswith("/error")})
    if not names:
        return []
    lines = ["| launch diagnostic | processes | median of medians | run-to-run SD |",
             "| --- | ---: | ---: | ---: |"]
    for n in names:
        meds = [statistics.median(r["launch"][n]) for r in recs if n in r.get("launch", {})]
        lines.append(f"| {n} | {len(meds)} | {1e3 * statistics.median(meds):.4f} ms | "
                     f"{100 * _cv(meds):.3f}% |")
    errs = sorted({f"{k}: {v}" for r in recs for k, v in r.get("launch", {}).items()
                   if k.endswith("/error")})
    return lines + [f"- {e}" for e in errs]


def clock_table(recs: list[dict[str, Any]]) -> list[str]:
    """Per block method and shape, the SM clock read after each block (NVML): its median,
    lowest, the share of blocks at the highest clock any block saw, and how the
    per-process medians of the time follow the per-process medians of the clock."""
    fields = sorted({m for r in recs for m, v in r.items() if isinstance(v, dict)
                     and any(isinstance(p, dict) and p.get("clocks") for p in v.values())})
    top = max((c for r in recs for m in fields for p in r.get(m, {}).values()
               for c in p.get("clocks") or [] if c), default=None)
    if top is None:
        return []
    lines = ["| method | shape | blocks | median SM MHz | lowest | at the top clock "
             f"({top:.0f}) | corr. of process medians: time, clock | settled (3 equal reads) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in fields:
        for k in sorted({k for r in recs for k in r.get(m, {})},
                        key=lambda k: int(k[1:k.index("_")])):
            parts = [r[m][k] for r in recs if k in r.get(m, {})]
            cs = [c for p in parts for c in p.get("clocks") or [] if c]
            if not cs:
                continue
            t_med = [statistics.median(p["samples"]) for p in parts if p.get("clocks")]
            c_med = [statistics.median([c for c in p["clocks"] if c] or [0]) for p in parts
                     if p.get("clocks")]
            settled = [len(p.get("settle_clocks") or []) >= 3
                       and len(set(p["settle_clocks"][-3:])) == 1 for p in parts]
            lines.append(f"| {m} | {k} | {len(cs)} | {statistics.median(cs):.0f} | {min(cs):.0f} | "
                         f"{100 * sum(c == top for c in cs) / len(cs):.0f}% | "
                         f"{_corr(t_med, c_med):.2f} | {sum(settled)}/{len(parts)} |")
    return lines


def _clock_lines(recs: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, set] = {}
    for r in recs:
        for c in r.get("clocks", []):
            for f in ("sm_mhz", "mem_mhz", "reasons"):
                if f in c:
                    seen.setdefault(f, set()).add(c[f] if not isinstance(c[f], float) else round(c[f]))
    return [f"- {f}: {sorted(map(str, v))}" for f, v in seen.items()]


def render(summary: dict[str, Any], recs: list[dict[str, Any]], title: str) -> str:
    lines = [f"# {title}", "",
             f"Processes: {len(recs)} on {recs[0]['gpu'] if recs else '?'}; wall per process "
             f"{statistics.median(r.get('wall_s', 0) for r in recs):.1f} s (median).", "",
             "| shape | method | processes | median | run-to-run SD (of per-process medians) "
             "| within-process SD | corr. with old |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for k, row in summary.items():
        for name, c in row.items():
            unit = (f"{c['median']:.4f}" if "/" in name else f"{1e3 * c['median']:.4f} ms")
            corr = c.get("corr_with_old")
            lines.append(f"| {k} | {name} | {c['n']} | {unit} | {100 * c['sd_rel']:.3f}% | "
                         f"{100 * c['within_sd_rel']:.3f}% | "
                         f"{'' if corr is None else f'{corr:.2f}'} |")
    lines += ["", *_launch_table(recs), "", "SM clock after each block (NVML):", "",
              *clock_table(recs), "", "Clock readings seen (NVML):", *_clock_lines(recs)]
    errs = [e for r in recs for e in r.get("errors", [])]
    if errs:
        lines += ["", f"Errors ({len(errs)}):", *(f"- {e}" for e in errs[:20])]
    return "\n".join(lines) + "\n"


def _read(path: Path, skip: int) -> list[dict[str, Any]]:
    recs = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not a JSON line ({e.msg}); drop the line") from None
    return recs[skip:]


# ------------------------------------------------------------------ recorded suite runs

SUITE_KEYS = ("attn/decode/fa2/b8_kv32768/latency", "attn/decode/fa2/b32_kv8192/latency",
              "attn/decode/fa2/b64_kv32768/latency")


def from_histories(paths: list[str], suite: str = "base-b-1gpu",
                   keys: tuple[str, ...] = SUITE_KEYS) -> dict[str, Any]:
    """The samples of ``keys`` in every complete, trusted first run (no confirm rerun) of
    ``suite`` in the histories, by GPU: ``{"keys": {key: {gpu uuid: [[samples of a run],
    ...]}}}``, runs oldest first. A run whose record names no GPU uuid is left out: it
    cannot be told apart from another host's."""
    import shutil
    import tempfile

    from gates.store.open import open_history

    out: dict[str, Any] = {"suite": suite, "sources": [Path(p).as_posix() for p in paths],
                           "keys": {k: {} for k in keys}}
    seen: set[str] = set()
    for p in paths:
        # A copy, opened read-write: an older history's schema is migrated there, never
        # in the file given.
        tmp = Path(tempfile.mkdtemp(prefix="gpu_noise_"))
        for suffix in ("", "-wal"):
            if Path(p + suffix).is_file():
                shutil.copyfile(p + suffix, tmp / f"h.db{suffix}")
        h = open_history(tmp / "h.db", create=False)
        try:
            runs = h.report_reads.runs(suite=suite, limit=1_000_000, status="complete")
            for r in reversed(runs):
                gpus = (r.get("hardware") or {}).get("gpus") or []
                uuid = gpus[0].get("uuid") if gpus else None
                if r["confirm_of"] or not r["trusted"] or not uuid or r["run_id"] in seen:
                    continue
                seen.add(r["run_id"])
                for m in h.report_reads.metrics(r["run_id"]):
                    if m["key"] in out["keys"] and m["attempt"] == 1 and m["samples"]:
                        out["keys"][m["key"]].setdefault(uuid, []).append(m["samples"])
        finally:
            h.close()
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("proc", help="one fresh process's measurements (needs a GPU)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--diag", action="store_true")
    p.add_argument("--modes", default="perm,paced",
                   help="block methods after the old measurement, in order: "
                        f"{', '.join(('perm', *PACED_MODES, *DIAG_MODES[1:]))}")
    s = sub.add_parser("summarize", help="spread across processes")
    s.add_argument("lines", type=Path)
    s.add_argument("--skip", type=int, default=0, help="first processes to leave out")
    s.add_argument("--json", type=Path, default=None)
    s.add_argument("--md", type=Path, default=None)
    s.add_argument("--title", default="fa2 decode: run-to-run spread across fresh processes")
    s.add_argument("--series-json", type=Path, default=None,
                   help="also write the samples by GPU in `history`'s format (series.py)")
    hs = sub.add_parser("history", help="recorded suite runs' samples by GPU, as JSON")
    hs.add_argument("histories", nargs="+")
    hs.add_argument("--suite", default="base-b-1gpu")
    hs.add_argument("--out", type=Path, required=True)
    sp = sub.add_parser("spread", help="run-to-run spread per GPU of history's JSON")
    sp.add_argument("noise_json", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "spread":
        try:
            doc = json.loads(a.noise_json.read_text())
            print("\n".join(spread_of_recorded(doc)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"error: {a.noise_json}: {e!r}; give the JSON of `gpu_noise.py history`",
                  file=sys.stderr)
            return 2
        return 0
    if a.cmd == "proc":
        modes = tuple(m for m in a.modes.split(",") if m)
        known = ("perm", *PACED_MODES, *DIAG_MODES)
        bad = [m for m in modes if m not in known]
        if bad:
            print(f"error: --modes {a.modes}: unknown {bad[0]!r}; known: {', '.join(known)}",
                  file=sys.stderr)
            return 2
        _proc(a.out, a.index, a.diag, modes)
        return 0
    if a.cmd == "history":
        missing = [p for p in a.histories if not Path(p).is_file()]
        if missing:
            print(f"error: {missing[0]}: no such history file", file=sys.stderr)
            return 2
        from gates.store.history import HistoryError

        try:
            doc = from_histories(a.histories, a.suite)
        except HistoryError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1) + "\n")
        for k, by in doc["keys"].items():
            print(f"{k}: {sum(map(len, by.values()))} runs on {len(by)} GPU(s)")
        return 0
    if not a.lines.is_file():
        print(f"error: {a.lines}: no such file; give the proc lines (--out of proc)", file=sys.stderr)
        return 2
    try:
        recs = _read(a.lines, a.skip)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if len(recs) < 2:
        print(f"error: {a.lines}: {len(recs)} process(es) after --skip {a.skip}; need 2 or more",
              file=sys.stderr)
        return 2
    summary = summarize(recs)
    md = render(summary, recs, a.title)
    print(md)
    if a.json:
        a.json.write_text(json.dumps(target_doc(summary, recs), indent=1) + "\n")
    if a.md:
        a.md.write_text(md)
    if a.series_json:
        a.series_json.write_text(json.dumps(series_doc(recs, a.lines.as_posix()), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
