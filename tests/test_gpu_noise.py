"""benchmarks/gpu_noise.py's analysis on recorded process lines (no GPU): the run-to-run
spread of per-process medians per method, and bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import gpu_noise  # noqa: E402


def _rec(i: int, old_ms: float, perm_ms: float, copy_ms: float, paced_ms: float = 1.0,
         mhz: float = 1980.0) -> dict:
    part = {"samples": [perm_ms / 1e3] * 3, "reference": [copy_ms / 1e3] * 3}
    paced = {"samples": [paced_ms / 1e3] * 3, "reference": [], "clocks": [mhz] * 3,
             "settle_clocks": [mhz] * 3}
    return {"index": i, "gpu": "NVIDIA H100 80GB HBM3", "wall_s": 5.0, "errors": [],
            "old": {"b8_kv32768": {"samples": [old_ms / 1e3, old_ms / 1e3 * 1.001]}},
            "perm": {"b8_kv32768": part}, "paced": {"b8_kv32768": paced},
            "clocks": [{"where": "start", "sm_mhz": 1980, "mem_mhz": 2619, "reasons": 0}]}


def test_spread_of_per_process_medians_per_method(tmp_path: Path):
    # Four processes; the second is 10% slow in the old measurement and in the raw block
    # medians, and its copy reference is as slow: the ratio does not move. Paced, the
    # fourth is 2% slow, at a lower clock.
    recs = [_rec(0, 1.0, 1.0, 0.5), _rec(1, 1.1, 1.1, 0.55), _rec(2, 1.0, 1.0, 0.5),
            _rec(3, 1.0, 1.0, 0.5, paced_ms=1.02, mhz=1965.0)]
    s = gpu_noise.summarize(recs)["b8_kv32768"]
    assert s["old"]["n"] == 4
    assert s["old"]["sd_rel"] == pytest.approx(0.05, rel=1e-6)
    assert s["perm"]["sd_rel"] == pytest.approx(0.05, rel=1e-6)
    assert s["perm/copy"]["sd_rel"] == pytest.approx(0.0, abs=1e-12)
    assert s["perm"]["corr_with_old"] == pytest.approx(1.0)
    assert s["copy (perm blocks)"]["median"] == pytest.approx(0.5e-3)
    lines = tmp_path / "procs.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out_json, out_md = tmp_path / "s.json", tmp_path / "s.md"
    assert gpu_noise.main(["summarize", str(lines), "--json", str(out_json), "--md",
                           str(out_md)]) == 0
    doc = json.loads(out_json.read_text())
    assert doc["processes"] == 4
    fig = doc["shapes"]["b8_kv32768"]  # issue 56's figures: old, paced; blocks, over copy
    assert fig["sd_before"] == pytest.approx(0.05) and fig["sd_blocks"] == pytest.approx(0.05)
    assert fig["sd_after"] == pytest.approx(0.01, rel=1e-6)  # SD of 1, 1, 1, 1.02 over 1
    assert fig["sd_blocks_vs_copy"] == pytest.approx(0.0, abs=1e-12) and fig["processes"] == 4
    md = out_md.read_text()
    assert "| b8_kv32768 | perm/copy | 4 |" in md
    # The clock after each paced block: 9 of 12 at the top clock; time follows the clock.
    assert "| paced | b8_kv32768 | 12 | 1980 | 1965 | 75% | -1.00 | 4/4 |" in md
    # --skip leaves out the first processes (the one that compiled the kernels).
    assert gpu_noise.main(["summarize", str(lines), "--skip", "1", "--json", str(out_json)]) == 0
    assert json.loads(out_json.read_text())["processes"] == 3


def test_bad_input_is_one_line_naming_the_file_and_line(tmp_path: Path, capsys):
    lines = tmp_path / "procs.jsonl"
    lines.write_text(json.dumps(_rec(0, 1.0, 1.0, 0.5)) + "\n{not json\n")
    assert gpu_noise.main(["summarize", str(lines)]) == 2
    err = capsys.readouterr().err
    assert f"{lines}:2: not a JSON line" in err and err.count("\n") == 1
    assert gpu_noise.main(["summarize", str(tmp_path / "none.jsonl")]) == 2
    lines.write_text(json.dumps(_rec(0, 1.0, 1.0, 0.5)) + "\n")
    assert gpu_noise.main(["summarize", str(lines)]) == 2
    assert "need 2 or more" in capsys.readouterr().err


# ------------------------------------------------- the device script, dry-run on the CPU


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self) -> None:
        import time

        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        return (end.t - self.t) * 1e3


class _Wrapper:
    """FlashInfer's decode wrapper as the script uses it: plan checks the page table."""

    def __init__(self, workspace, layout: str, use_tensor_cores: bool = False) -> None:
        assert layout == "NHD"

    def plan(self, indptr, indices, last_page_len, hq, hkv, d, page, **kw) -> None:
        assert indices.numel() == int(indptr[-1]) and len(set(indices.tolist())) == indices.numel()
        self.table = (indptr.tolist(), indices.long(), last_page_len.tolist(), page)

    exact = False  # compute attention (the suite's spot check), else just write out

    def run(self, q, cache, out=None):
        """Attention through the page table, as the kernel computes it (float64)."""
        from suitelib.attention import reference_attention

        if not self.exact:
            return out.copy_(q)

        indptr, indices, last, page = self.table
        for i in range(q.shape[0]):
            pages = cache[indices[indptr[i]:indptr[i + 1]]]  # [n, 2, P, Hkv, D]
            kv = pages.transpose(0, 1).reshape(2, -1, *cache.shape[3:])
            n = (indptr[i + 1] - indptr[i] - 1) * page + last[i]
            out[i] = reference_attention(q[i : i + 1], kv[0, :n], kv[1, :n])[0].to(out.dtype)
        return out


@pytest.fixture
def cpu_as_cuda(monkeypatch):
    """'cuda' tensors made on the CPU, CUDA events from the host clock, a fake FlashInfer:
    enough to run the device script's every step here."""
    import functools
    import types

    import torch

    def cpuify(f):
        @functools.wraps(f)
        def g(*a, **k):
            if str(k.get("device", "")).startswith("cuda"):
                k["device"] = "cpu"
            return f(*a, **k)
        return g

    for n in ("empty", "zeros", "ones", "randn", "full", "tensor"):
        monkeypatch.setattr(torch, n, cpuify(getattr(torch, n)))
    real_gen, real_to = torch.Generator, torch.Tensor.to
    monkeypatch.setattr(torch, "Generator", lambda device="cpu": real_gen(device="cpu"))

    def to(self, *a, **k):
        a = tuple("cpu" if str(x).startswith("cuda") else x for x in a)
        return real_to(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "to", to)
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    for n in ("synchronize", "empty_cache", "_sleep"):
        monkeypatch.setattr(torch.cuda, n, lambda *a: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "fake GPU")
    from suitelib import blocks, hardware, timing

    monkeypatch.setattr(hardware, "import_flashinfer",
                        lambda: types.SimpleNamespace(BatchDecodeWithPagedKVCacheWrapper=_Wrapper))
    monkeypatch.setattr(timing, "_FLUSH_BYTES", 1 << 16)
    monkeypatch.setattr(blocks.copy_reference, "__defaults__", (1 << 16,))
    monkeypatch.setattr(gpu_noise, "SHAPES", ((4, 64), (2, 100)))
    monkeypatch.setattr(gpu_noise, "PINNED", (2, 32))
    monkeypatch.setattr(gpu_noise, "WORKSPACE_BYTES", 1 << 16)
    monkeypatch.setattr(gpu_noise, "LAUNCH_SHAPES", ((1, 16),))
    monkeypatch.setattr(gpu_noise, "OLD", {"samples": 2, "iters": 2, "warmup": 1})
    monkeypatch.setattr(gpu_noise, "BLOCKS", {"blocks": 3, "iters": 2, "warmup": 1})
    monkeypatch.setattr(gpu_noise, "PACED", {"blocks": 3, "iters": 2, "warmup": 1, "pace": 1.0,
                                             "settle_max_s": 0.2})


def test_a_diagnostic_process_records_every_method_and_summarizes(tmp_path: Path, cpu_as_cuda):
    out = tmp_path / "procs.jsonl"
    for i in range(2):
        gpu_noise.main(["proc", "--out", str(out), "--index", str(i), "--diag"])
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["order"] for r in recs] == [["b4_kv64", "b2_kv100"], ["b2_kv100", "b4_kv64"]]
    for r in recs:
        # Only the CUDA graph needs a real GPU; everything else ran.
        assert r["errors"] == [] and list(r["launch"]) == ["b1_kv16/flush", "b1_kv16/noflush",
                                                          "b1_kv16/error"]
        for mode in ("old", "perm", "paced", "same", "alloc", "perm_fa2ref", "old_again"):
            assert set(r[mode]) == {"b4_kv64", "b2_kv100"}, mode
        assert len(r["old"]["b4_kv64"]["samples"]) == 2
        assert len(r["perm"]["b4_kv64"]["samples"]) == len(r["perm"]["b4_kv64"]["reference"]) == 3
        assert len(set(r["alloc"]["b4_kv64"]["ptrs"])) == 3  # a new cache each block
        paced = r["paced"]["b4_kv64"]  # no reference; an idle gap after each call
        assert len(paced["samples"]) == 3 and paced["reference"] == [] and paced["gap_s"] > 0
    s = gpu_noise.summarize(recs)
    assert set(s) == {"b2_kv100", "b4_kv64"}
    assert {"old", "perm", "perm/copy", "same", "alloc/copy", "perm/fa2 b8_kv8192",
            "old_again"} <= set(s["b4_kv64"])
    # Without --diag: the suite's measurement and the block timing only.
    gpu_noise.main(["proc", "--out", str(out), "--index", "5"])
    last = json.loads(out.read_text().splitlines()[-1])
    assert "same" not in last and set(last["perm"]) == {"b4_kv64", "b2_kv100"}
    # The samples as the benchmark's noise model reads them: a process a run.
    series_json = tmp_path / "series.json"
    assert gpu_noise.main(["summarize", str(out), "--series-json", str(series_json)]) == 0
    import series

    doc = json.loads(series_json.read_text())
    assert set(doc["keys"]) == {f"attn/decode/fa2/{k}/{m}" for k in ("b4_kv64", "b2_kv100")
                                for m in ("latency", "paced/latency", "blocks/latency",
                                          "blocks/vs_copy")}
    data = series.suite_data(series_json, (("b4", "attn/decode/fa2/b4_kv64/blocks/vs_copy"),))
    offsets, within = data["b4"]
    assert len(offsets) == 3 and len(within) == 3 and within[0].size == 3


def test_the_decode_suite_records_paced_latency_beside_its_old_keys(cpu_as_cuda, monkeypatch):
    """suites/kernels/test_flashinfer_decode.py's perf step on the fake GPU: the old keys
    as before, and <key>/paced/latency from the paced block timing (batch 8 and more),
    settled on the SM clock it is given, the clock noted beside."""
    import importlib.util
    import types

    import torch

    from gates.record.plugin import MetricsRecorder
    from gates.store.metrics import MetricBook
    from suitelib import hardware

    path = Path(__file__).resolve().parents[1] / "suites" / "kernels" / "test_flashinfer_decode.py"
    spec = importlib.util.spec_from_file_location("_decode_suite_dry", path)
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    monkeypatch.setattr(_Wrapper, "exact", True)
    # Fewer calls than on a GPU: each computes attention in float64 on the CPU.
    time_cuda = suite.time_cuda
    monkeypatch.setattr(suite, "time_cuda", lambda fn, **kw: time_cuda(fn, samples=2, iters=1,
                                                                         warmup=0))
    from suitelib import attention

    monkeypatch.setitem(attention.DECODE_PACED, "iters", 1)
    monkeypatch.setitem(attention.DECODE_PACED, "warmup", 0)
    monkeypatch.setitem(attention.DECODE_PACED, "settle_s", 0.0)
    # Float64 attention on a loaded CPU is slow: no wall-time bound cuts the settling short.
    monkeypatch.setitem(attention.DECODE_PACED, "settle_max_s", 600.0)
    fi = hardware.import_flashinfer()
    workspace = torch.zeros(1 << 16, dtype=torch.uint8, device="cuda")
    reads = iter([1700.0, 1800.0, 1980.0, 1980.0, 1980.0] + [1980.0] * 8)

    book = MetricBook()
    metrics = MetricsRecorder(book)
    request = types.SimpleNamespace(node=types.SimpleNamespace(user_properties=[]))
    for shape in ((8, 48), (1, 32)):
        suite._decode_perf(fi, workspace, shape, False, None, metrics, request)
        suite._decode_paced(fi, workspace, lambda: next(reads), shape, False, metrics, request)
    keys = sorted(book.metrics)
    assert keys == sorted([
        *(f"attn/decode/fa2/b8_kv48/{k}" for k in ("latency", "bandwidth", "paced/latency")),
        "attn/decode/fa2/b1_kv32/latency", "attn/decode/fa2/b1_kv32/bandwidth"])
    paced = book.metrics["attn/decode/fa2/b8_kv48/paced/latency"]
    assert len(paced.samples) == attention.DECODE_PACED["blocks"] == 8
    props = dict(request.node.user_properties)
    # Settled once three readings agreed; then one reading after each block.
    assert props["attn/decode/fa2/b8_kv48/paced/settle_sm_mhz"] == [1700.0, 1800.0, 1980.0,
                                                                     1980.0, 1980.0]
    assert props["attn/decode/fa2/b8_kv48/paced/sm_mhz"] == [1980.0] * 8
    assert props["attn/decode/fa2/b8_kv48/paced/gap_s"] > 0


# ------------------------------------------- the suite's recorded noise, for the benchmark

REPO = Path(__file__).resolve().parents[1]


def test_history_reads_each_runs_samples_by_gpu_and_leaves_the_files_as_they_were(tmp_path):
    # The committed history names no GPU in its first runs: those are left out. The fleet
    # history has an older schema: it is migrated on a copy, never in place.
    fleet = REPO / "benchmarks" / "data" / "fleet_h200" / "fleet_clean.db"
    before = {p: p.read_bytes() for p in (REPO / "history.db", fleet)}
    out = tmp_path / "noise.json"
    assert gpu_noise.main(["history", str(REPO / "history.db"), str(fleet), "--out",
                           str(out)]) == 0
    assert {p: p.read_bytes() for p in before} == before
    doc = json.loads(out.read_text())
    by = doc["keys"]["attn/decode/fa2/b8_kv32768/latency"]
    assert all(gpu.startswith("GPU-") for gpu in by)
    assert len(by) >= 2 and all(len(run) == 5 for runs in by.values() for run in runs)
    # The fleet host's six clean runs, all on one GPU the history had not seen.
    assert max(len(runs) for runs in by.values()) >= 6
    assert gpu_noise.main(["history", str(tmp_path / "none.db"), "--out", str(out)]) == 2


def test_the_suite_noise_model_draws_recorded_runs(tmp_path):
    import numpy as np
    import series

    data = series.suite_data()
    assert set(data) == set(series.SUITE_BENCHES)
    for offsets, within in data.values():
        # Offsets from GPUs with 3 runs or more, centred on each GPU's median run.
        assert len(offsets) >= 12 and abs(float(np.median(offsets))) < 0.002
        assert all(abs(float(np.median(w))) < 1e-12 for w in within)
    rng = np.random.default_rng(0)
    one = series.make_series("suite", "null", rng, m=1, bench="fa2_b8")
    five = series.make_series("suite", "step2", rng, m=5)
    assert one.runs.shape == (60, 1) and five.runs.shape == (60, 5)
    assert five.bench in series.SUITE_BENCHES
    # A single sample carries the within-run noise as well as the run's offset.
    assert len(np.unique(one.runs)) > len(data["fa2_b8"][0])
    # A GPU with fewer runs gives no offsets; too few in all is an error naming the file.
    doc = json.loads(series.SUITE_DATA.read_text())
    for k in doc["keys"]:
        doc["keys"][k] = {"GPU-a": [[1.0, 1.1, 1.0, 1.0, 1.0]] * 2}
    bad = tmp_path / "few.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="few.json: fa2_b8 has 0 run offsets"):
        series.suite_data(bad)


def test_spread_tabulates_recorded_runs_per_gpu(tmp_path, capsys):
    doc = {"keys": {"k/latency": {"GPU-aaaaaaaaaaaa-1": [[1.0, 1.0], [1.1, 1.1], [1.0, 1.2]],
                                  "GPU-b": [[2.0]]}}}
    path = tmp_path / "n.json"
    path.write_text(json.dumps(doc))
    assert gpu_noise.main(["spread", str(path)]) == 0
    out = capsys.readouterr().out
    # Medians 1.0, 1.1, 1.1: SD 0.0577 over 1.1; a GPU with one run is left out.
    assert "| k/latency | GPU-aaaaaaaa | 3 | 1100.0000 ms | 5.249% |" in out and "GPU-b" not in out
    # First samples over the rest: 1.0/1.0, 1.1/1.1, 1.0/1.2 -> 0, 0, -16.7%.
    assert "| k/latency | 3 | +0.00% | -16.67% | +0.00% | 1 |" in out
    path.write_text("{}")
    assert gpu_noise.main(["spread", str(path)]) == 2


def test_the_paced_noise_model_draws_the_device_comparisons_processes():
    import numpy as np
    import series

    assert series.benches("paced") == ("fa2_b8", "fa2_b32", "fa2_b64")
    data = series._measured("paced")
    for offsets, within in data.values():
        # One H100, a process a run: 8 offsets around its median run, 8 paced blocks a run.
        assert len(offsets) == len(within) == 8 and all(w.size == 8 for w in within)
        assert abs(float(np.median(offsets))) < 1e-12
    # b64: 3 of 8 processes 0.6-0.7% slow (gpu_noise.md); the model keeps them.
    assert np.sort(data["fa2_b64"][0])[-3:].min() > 0.005
    rng = np.random.default_rng(0)
    s = series.make_series("paced", "step2", rng, m=5, bench="fa2_b32")
    assert s.runs.shape == (60, 5) and s.bench == "fa2_b32"
    assert series.bench_index("paced", "fa2_b64") == 2
