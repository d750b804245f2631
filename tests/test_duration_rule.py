"""One duration figure per file, from one rule (ci_register.planning.durations.expected), in every
command that shows one: plan, matrix, rerun and gate-report health agree."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITES = {"h200": {"backend": "cuda", "runner_labels": ["h200"], "shard_budget_s": 1000,
                   "hardware": {"gpu_count": 1}}}
FILES = {"suites/test_decode.py": 'register_cuda_ci(est_time=120, suite="h200")\ndef test_x():\n    pass\n',
         "suites/test_young.py": 'register_cuda_ci(est_time=40, suite="h200")\ndef test_x():\n    pass\n'}
DECODE = [50.0, 52.0, 57.0, 55.0, 54.0]  # p90 56.2 s: what every command must show


def cli(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GATES_HISTORY", "CI_REGISTER_FINGERPRINT")}
    env["PYTHONPATH"] = str(REPO)
    r = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_plan_matrix_rerun_and_health_show_one_figure_per_file(catalog_tree, history_factory):
    root = catalog_tree(SUITES, FILES)
    # Measured on an H200 (this machine is not one): decode 5 runs, young 2 (too few).
    runs = [{"suites/test_decode.py": d, **({"suites/test_young.py": 30.0} if i < 2 else {})}
            for i, d in enumerate(DECODE)]
    history_factory(runs, suite="h200", fingerprint="nvidia-h200-x1-sm90", path=root / "history.db")
    plan = cli(root, "-m", "ci_register", "plan", "h200")
    rerun = cli(root, "-m", "ci_register", "rerun", "suites/")
    health = cli(root, "-m", "gates.commands.cli", "health", "--suite", "h200", "--history", "history.db")
    matrix = json.loads(cli(root, "-m", "ci_register", "matrix", "--event", "push"))
    for out in (plan, rerun, health):
        decode = [line for line in out.splitlines() if "test_decode.py" in line and re.search(r"\d s\b", line)]
        young = [line for line in out.splitlines() if "test_young.py" in line and re.search(r"\d s\b", line)]
        assert decode and all(re.search(r"\b56 s\b", line) for line in decode), out
        assert any(re.search(r"\b56 s \(history", line) for line in decode), out
        assert young and all(re.search(r"\b40 s \(est_time", line) for line in young), out  # 2 runs: the literal
    assert matrix["include"][0]["expected-s"] == 96.2  # 56.2 + 40, the same figures
