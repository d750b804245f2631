"""benchmarks/gpu_bisect.py off the GPU: the generated repository and the refusal."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_bisect.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_bisect", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_repo_upcasts_from_the_culprit_on(tmp_path):
    mod = _module()
    shas = mod.make_repo(tmp_path / "r", commits=4, culprit=3,
                         shape={"tokens": 8, "hidden": 16, "ffn": 32})
    assert len(shas) == 5
    flags = [subprocess.run(["git", "-C", str(tmp_path / "r"), "show", f"{s}:test_decode.py"],
                            capture_output=True, text=True, check=True).stdout
             for s in shas]
    assert ["UPCAST = True" in f for f in flags] == [False, False, False, True, True]
    compile(flags[-1], "test_decode.py", "exec")


def test_without_a_gpu_it_refuses_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the script runs for real there (results/gpu_bisect_h200.md)")
    out = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "no CUDA GPU" in out.stderr
    assert not (tmp_path / "o").exists()
