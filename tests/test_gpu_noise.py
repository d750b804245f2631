"""benchmarks/gpu_noise.py's analysis on recorded process lines (no GPU): the run-to-run
spread of per-process medians per method, and bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import gpu_noise  # noqa: E402


def _rec(i: int, old_ms: float, perm_ms: float, copy_ms: float) -> dict:
    part = {"samples": [perm_ms / 1e3] * 3, "reference": [copy_ms / 1e3] * 3}
    return {"index": i, "gpu": "NVIDIA H100 80GB HBM3", "wall_s": 5.0, "errors": [],
            "old": {"b8_kv32768": {"samples": [old_ms / 1e3, old_ms / 1e3 * 1.001]}},
            "perm": {"b8_kv32768": part},
            "clocks": [{"where": "start", "sm_mhz": 1980, "mem_mhz": 2619, "reasons": 0}]}


def test_spread_of_per_process_medians_per_method(tmp_path: Path):
    # Four processes; the second is 10% slow in the old measurement and in the raw block
    # medians, and its copy reference is as slow: the ratio does not move.
    recs = [_rec(0, 1.0, 1.0, 0.5), _rec(1, 1.1, 1.1, 0.55), _rec(2, 1.0, 1.0, 0.5),
            _rec(3, 1.0, 1.0, 0.5)]
    s = gpu_noise.summarize(recs)["b8_kv32768"]
    assert s["old"]["n"] == 4
    assert s["old"]["sd_rel"] == pytest.approx(0.05 / 1.0005, rel=1e-6)
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
    assert doc["processes"] == 4 and "b8_kv32768" in doc["shapes"]
    assert "| b8_kv32768 | perm/copy | 4 |" in out_md.read_text()
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
