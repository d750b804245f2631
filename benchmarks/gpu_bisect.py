"""Bisect a real GPU kernel slowdown end to end: a generated git repository, real CUDA timings.

The generated repository holds one test, a decode-shaped step timed on the GPU: an
RMSNorm over a (tokens x hidden) bf16 activation followed by the projection GEMM,
captured in a CUDA graph and replayed (so the figure is kernel time, not Python
launch overhead), 5 samples of the mean step time in microseconds. Every commit
touches CHANGES.txt; commit ``--culprit`` also makes the norm run in fp32
(``x.float()`` ... ``.to(bf16)``), the "upcast for stability" change that adds two
cast kernels and doubles the norm's memory traffic. One recorded run at the bad
commit tells the history which test records the key; then ``gate-report bisect``
runs the tests behind the key in git worktrees and names the commit.

    python benchmarks/gpu_bisect.py --out DIR [--commits 32] [--culprit 21]
        [--tokens 256] [--hidden 4096] [--ffn 14336] [--calib 6] [--reps 2] [--verify 6]

Needs a CUDA GPU, torch, git, pytest and this repository's dependencies; it exits 2
with one line where any is missing. Writes DIR/history.db, DIR/bisect.md and
DIR/summary.json (found culprit vs planted, executions, wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # gitrepo: the test repository generator

from gitrepo import make_series  # noqa: E402

KEY = "decode_step_us"

TEST = '''\
import torch
import torch.nn.functional as F

UPCAST = {upcast}
TOKENS, HIDDEN, FFN = {tokens}, {hidden}, {ffn}


def step(x, w_norm, w_proj):
    if UPCAST:
        y = F.rms_norm(x.float(), (HIDDEN,), w_norm.float(), 1e-6).to(x.dtype)
    else:
        y = F.rms_norm(x, (HIDDEN,), w_norm, 1e-6)
    return y @ w_proj


def test_decode_step(metrics):
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.bfloat16, generator=gen)
    w_norm = torch.rand(HIDDEN, device="cuda", dtype=torch.bfloat16, generator=gen)
    w_proj = torch.randn(HIDDEN, FFN, device="cuda", dtype=torch.bfloat16, generator=gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(x, w_norm, w_proj)
    torch.cuda.current_stream().wait_stream(side)
    graph, steps = torch.cuda.CUDAGraph(), 20
    with torch.cuda.graph(graph):
        for _ in range(steps):
            step(x, w_norm, w_proj)
    for _ in range(20):
        graph.replay()
    samples = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / (10 * steps))
    metrics.record("{key}", samples, unit="us", better="lower")
'''


def make_repo(path: Path, *, commits: int, culprit: int, shape: dict[str, int]) -> list[str]:
    """Commits 0..commits (0 is the root); ``culprit`` and later upcast the norm."""
    return make_series(path, commits, lambda n: {
        "test_decode.py": TEST.format(upcast=n >= culprit, key=KEY, **shape)})


def _preflight() -> str | None:
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch; run this on a GPU machine"
    if shutil.which("git") is None:
        return "git is not on PATH"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for the results")
    ap.add_argument("--commits", type=int, default=32)
    ap.add_argument("--culprit", type=int, default=21, help="1-based commit that upcasts")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--calib", type=int, default=6)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--verify", type=int, default=6)
    a = ap.parse_args(argv)
    if not 1 <= a.culprit <= a.commits:
        print(f"gpu_bisect: --culprit {a.culprit} must lie in 1..{a.commits}", file=sys.stderr)
        return 2
    problem = _preflight()
    if problem:
        print(f"gpu_bisect: {problem}", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    db = a.out / "history.db"
    if db.exists():
        print(f"gpu_bisect: {db} exists; give an empty --out", file=sys.stderr)
        return 2
    shape = {"tokens": a.tokens, "hidden": a.hidden, "ffn": a.ffn}
    env = dict(os.environ)
    # The plugin is loaded by name where the package is on PYTHONPATH but not installed.
    env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " -p gates.record.plugin").strip()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    os.environ.update(env)  # the bisection's pytest runs inherit it
    from gates.commands.cli import main as gate_report  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="gpu-bisect-") as tmp:
        repo = Path(tmp) / "repo"
        shas = make_repo(repo, commits=a.commits, culprit=a.culprit, shape=shape)
        t0 = time.perf_counter()
        rec = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "--gates-suite", "gpu-bisect", "--gates-history", str(db)],
                             cwd=repo, env=env, capture_output=True, text=True, check=False)
        if rec.returncode != 0:
            print(f"gpu_bisect: the recording run failed (exit {rec.returncode}): "
                  f"{rec.stdout[-400:]} {rec.stderr[-400:]}", file=sys.stderr)
            return 1
        print(f"recorded one run at the bad commit in {time.perf_counter() - t0:.1f} s",
              flush=True)
        t0 = time.perf_counter()
        rc = gate_report(["bisect", KEY, "--good", shas[0], "--bad", shas[-1], "--repo",
                          str(repo), "--history", str(db), "--calib", str(a.calib), "--reps",
                          str(a.reps), "--verify", str(a.verify), "--format", "md",
                          "--out", str(a.out / "bisect.md")])
        wall = time.perf_counter() - t0
    from gates.store.open import open_history  # noqa: PLC0415

    with open_history(db, create=False, readonly=True) as h:
        rows = h.report_reads.bisects(KEY)
    row = rows[-1] if rows else {}
    found = row.get("culprit")
    summary = {"exit": rc, "outcome": row.get("outcome"), "planted": shas[a.culprit],
               "found": found, "right": found == shas[a.culprit],
               "executions": row.get("executions"), "wall_s": round(wall, 1),
               "commits": a.commits, "culprit_index": a.culprit, "shape": shape,
               "calib": a.calib, "reps": a.reps, "verify": a.verify}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary))
    return 0 if summary["right"] else 1


if __name__ == "__main__":
    sys.exit(main())
