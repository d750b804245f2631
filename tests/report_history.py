"""A small, deterministic history for the gate-report tests, written through the
History API (what the plugin and the gate write), plus a pure ReportInput builder
for renderer tests that need hostile names the metric validator would refuse."""

from __future__ import annotations

from pathlib import Path

from gates.report.build import ReportInput, series_columns
from gates.store.history import History, RunRecord, TestResult
from gates.store.metrics import validate_metric
from gates.store.open import open_history
from gates.store.provenance import Provenance

SUITE = "stage-x"
FP = "nvidia-h200-x1-sm90"
HW = {"gpus": [{"name": "NVIDIA H200", "capability": "9.0", "memory_mib": 143771}],
      "driver": "570.86", "cuda": "12.8", "torch": "2.8.0", "python": "3.11.7"}
LAT = "decode/b32/latency"
BW = "decode/b32/bandwidth"
NOISE = (0.0, 0.01, -0.01, 0.004, -0.006, 0.008, -0.002, 0.006, -0.008, 0.002,
         0.0, -0.004, 0.01, -0.01, 0.003, -0.003)
FILE_A = "suites/kernels/test_decode.py"
FILE_B = "suites/kernels/test_flaky.py"
FILE_C = "suites/kernels/test_silent.py"
PLAN = {
    "suite": SUITE, "shard": [1, 1],
    "files": [
        {"path": FILE_A, "line": 3, "est_time": 10, "expected": 10, "marker": "register_cuda_ci"},
        {"path": FILE_B, "line": 4, "est_time": 30, "expected": 30, "marker": "register_cuda_ci"},
        {"path": FILE_C, "line": 2, "est_time": 20, "expected": 20, "marker": "register_cuda_ci"},
    ],
    "gates": [],
}


def commit(i: int) -> str:
    return f"{i:04d}" + "c0ffee" * 6


def started(i: int) -> str:
    return f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00.000000+00:00"


def prov(i: int, *, suite: str = SUITE, run_id: str | None = None, shard=(1, 1),
         confirm_of: str | None = None, when: str | None = None) -> Provenance:
    return Provenance(
        run_id=run_id or f"run{i:04d}" + "0" * 20, suite=suite,
        shard_index=shard[0], shard_count=shard[1], commit=commit(i), branch="main",
        started_at=when or started(i),
        finished_at=(when or started(i)).replace(":00:00.", ":01:05."),  # 65 s of wall time
        fingerprint=FP, hardware=HW, confirm_of=confirm_of)


def write_run(h: History, i: int, *, latency: float, bandwidth: float = 500.0,
              flaky_ok: bool = True, **kw) -> str:
    p = prov(i, **kw)
    tests = [
        TestResult(f"{FILE_A}::test_decode", FILE_A, "passed", 60.0 + (i % 3)),
        TestResult(f"{FILE_A}::test_needs_fp4", FILE_A, "skipped", 0.0,
                   skip_reason="needs sm100"),
        TestResult(f"{FILE_B}::test_sometimes", FILE_B, "passed" if flaky_ok else "failed",
                   1.0, error=None if flaky_ok else "AssertionError: timeout"),
    ]
    metrics = [
        (f"{FILE_A}::test_decode", validate_metric(
            LAT, [latency * (1 + d) for d in NOISE[:5]], unit="s", better="lower")),
        (f"{FILE_A}::test_decode", validate_metric(
            BW, [bandwidth * (1 + d) for d in NOISE[5:10]], unit="B/s", better="higher")),
    ]
    h.run_writes.record_run(RunRecord(p, tests, metrics, PLAN, 0))
    return p.run_id


def regression_verdicts(run_id: str, *, mode: str = "enforce", latency_verdict="regression"):
    return [
        {"key": LAT, "nodeid": f"{FILE_A}::test_decode", "verdict": latency_verdict,
         "baseline": 1.0, "new": 1.3, "rel_change": 0.3, "ci_low": 0.22, "ci_high": 0.38,
         "statistic": 7.5, "p_value": 1e-6, "q_value": 2e-6, "floor": 0.05, "mode": mode,
         "detail": {"method": "robust-t"}},
        {"key": BW, "nodeid": f"{FILE_A}::test_decode", "verdict": "pass",
         "baseline": 500.0, "new": 501.0, "rel_change": 0.002, "ci_low": -0.01,
         "ci_high": 0.014, "statistic": 0.2, "p_value": 0.4, "q_value": 0.4, "floor": 0.03,
         "mode": mode},
    ]


def make_history(path: Path, *, runs: int = 16, regress_at: int = 10,
                 verdicts: bool = True) -> list[str]:
    """`runs` runs of SUITE; latency jumps 30% from run `regress_at` on; the flaky test
    fails on every third run; the newest run gets a latency regression verdict."""
    ids = []
    with open_history(path) as h:
        for i in range(runs):
            lat = 1.0 * (1 + NOISE[i % len(NOISE)]) * (1.3 if i >= regress_at else 1.0)
            ids.append(write_run(h, i, latency=lat, flaky_ok=i % 3 != 1))
        if verdicts:
            h.run_writes.save_verdicts(ids[-2], [dict(v, verdict="pass")
                                      for v in regression_verdicts(ids[-2])])
            h.run_writes.save_verdicts(ids[-1], regression_verdicts(ids[-1]))
    return ids


def hostile_input() -> ReportInput:
    """A report input whose metric key and test id are HTML/Markdown attacks."""
    key = "<script>alert(1)</script>"
    nodeid = "suites/x/test_x.py::test_y[<img src=x onerror=alert(2)>|`]"
    rid = "evil" + "0" * 28
    series = [{"run_id": f"r{i}", "commit": commit(i), "started_at": started(i),
               "trusted": 1, "value": 1.0 if i < 6 else 2.0} for i in range(10)]
    series[-1]["run_id"] = rid
    return ReportInput(
        runs=[{"run_id": rid, "suite": "<b>suite</b>", "status": "complete",
               "commit_sha": commit(9), "branch": "<i>br</i>", "started_at": started(9),
               "finished_at": started(9).replace(":00:00.", ":02:00."),
               "fingerprint": FP, "hardware": HW, "trusted": 1, "shard_index": 1,
               "shard_count": 1, "ci_url": "javascript:alert(3)"}],
        counts={rid: {"passed": 3, "failed": 1}},
        metrics=[{"run_id": rid, "attempt": 1, "nodeid": nodeid, "key": key, "unit": "<u>",
                  "better": "lower", "median": 2.0}],
        verdicts=[{"run_id": rid, "attempt": 1, "key": key, "nodeid": nodeid,
                   "verdict": "regression", "baseline": 1.0, "new": 2.0, "rel_change": 1.0,
                   "ci_low": 0.8, "ci_high": 1.2, "statistic": 9.0, "p_value": 1e-5,
                   "q_value": 1e-5, "floor": 0.05, "mode": "enforce",
                   "detail": {"method": "<svg onload=alert(4)>"}},
                  {"run_id": rid, "attempt": 1, "key": "ok/metric", "nodeid": nodeid,
                   "verdict": "pass", "baseline": 1.0, "new": 1.0, "rel_change": 0.0,
                   "mode": "enforce"}],
        series={("<b>suite</b>", FP, key): series_columns(series),
                ("<b>suite</b>", FP, "ok/metric"): series_columns(
                    [dict(s, value=1.0) for s in series])},
    )
