"""Does the report say what the session said? Over the gate benchmark's series.

Each series of the gate detection benchmark (``benchmarks/series.py``: every noise
model, null / step / drift / spike effects, 5 samples a run) is written into a
fresh history run by run; its first ``BASE`` runs are the baseline, and every run
after them is a suite session driven through the runner's confirm protocol
(``ci_register.running.runner.confirm_chain``, the loop ``run_suite`` runs, with up to
four reruns; each rerun is the run's next twin, stored ``confirm_of`` the attempt
before it, and gated with ``gates.gate.evaluate_run`` as ``python -m gates.gate``
does). For every session the report (``gates.report.query`` ->
``gates.report.build_report``, what every surface renders) is then built for that
run and compared with the session: its exit code, and the metric's verdict (the
last verdict the session's gates gave it). A checker reads every verdict row as the
report shows it: a held ``regression`` or ``improvement`` must not stand beside an
interval that spans 0 (``gates.model.verdicts.interval_contradicts``): a row shows the
statement of the test that decided, at the level that decided; and a held regression's
row must name that test and its p at or below the level it states (issue 52).

A mismatch is a false green (or a false red) on some surface. The ``old reading``
columns replay how the report read a chain before issue 38 (the first attempt and
its first rerun only, a rerun's ``improvement`` shown as one, exit 1 only on a
failing row), for comparison.

    python benchmarks/bench_surfaces.py [--reps 2] [--out benchmarks/results/bench_surfaces.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from series import NOISE_MODELS, make_series  # noqa: E402

from ci_register.running.runner import Attempt, confirm_chain  # noqa: E402
from gates.gate import evaluate_run  # noqa: E402
from gates.model.verdicts import interval_contradicts  # noqa: E402
from gates.report.build import build_report, classify  # noqa: E402
from gates.report.query import load_report_input, select_runs  # noqa: E402
from gates.store.history import RunRecord, TestResult  # noqa: E402
from gates.store.metrics import validate_metric  # noqa: E402
from gates.store.open import open_history  # noqa: E402
from gates.store.provenance import Provenance  # noqa: E402

NODE = "suites/perf/test_lat.py::test_lat"
EFFECTS = ("null", "step2", "step5", "step10", "drift", "spike")
CONFIRM = 4  # the runner's default --confirm
BASE = 30  # baseline runs before the first gated one
GATED = (34, 50)  # gated runs [first, last): the change lands at run 40
M = 5  # samples a run


def _record(h, i: int, sub: int, samples: np.ndarray, confirm_of: str | None) -> str:
    rid = f"run{i:03d}-{sub}"
    p = Provenance(run_id=rid, suite="perf", commit=f"{i:07d}" + "c" * 33, branch="main",
                   started_at=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}.{sub:03d}+00:00",
                   fingerprint="cpu", confirm_of=confirm_of)
    h.run_writes.start_run(p)
    m = validate_metric("lat", [float(x) for x in samples], unit="ms", better="lower")
    h.run_writes.record_run(RunRecord(p, [TestResult(NODE, NODE.split("::")[0], "passed", 1.0)],
                           [(NODE, m)], None, 0))
    return rid


def _session(h, series, i: int) -> tuple[int, str, list[str]]:
    """Run ``i`` as a suite session: (exit code, the metric's last verdict, chain)."""
    chain = [_record(h, i, 0, series.runs[i], None)]
    res = evaluate_run(h, chain[0], attempts_left=CONFIRM)
    last = {v.key: v.verdict for v in res.verdicts}
    state = {"res": res}
    twins = [series.twins, *series.more_twins]

    def rerun(attempt: int, nodeids: list[str]) -> Attempt:
        cid = _record(h, i, attempt, twins[attempt - 1][i], chain[-1])
        r = evaluate_run(h, cid, confirm_of=chain[-1], attempts_left=CONFIRM - attempt)
        chain.append(cid)
        state["res"] = r
        last.update({v.key: v.verdict for v in r.verdicts})
        return Attempt(0, r.exit_code)

    done = confirm_chain(Attempt(0, res.exit_code), CONFIRM,
                         lambda: state["res"].tripped_nodeids, rerun)
    return done.exit_code, last.get("lat", "not-judged"), chain


def _old_reading(h, chain: list[str]) -> tuple[int, str]:
    """The report before issue 38: the first attempt's verdict, replaced by its first
    rerun's (a rerun of a rerun was never read); exit 1 only on a failing row."""
    rows = [r for rid in chain[:2] for r in h.report_reads.verdicts(rid) if r["key"] == "lat"]
    if not rows:
        return 0, "not-judged"
    v = rows[-1]
    return int(classify(v["verdict"], v.get("mode")) == "fail"), str(v["verdict"])


def _unstated(v) -> bool:
    """A held regression whose row does not state what decided it: the test's name, and
    (but for ``still-red``, which is the level a run is at) its p at or below the level
    it states (BH q where the row has one)."""
    if v.verdict != "regression":
        return False
    if v.method == "still-red":
        return v.p_value is not None
    held = v.q_value if v.q_value is not None else v.p_value
    return (not v.test or held is None or v.level is None
            or held > v.level * (1 + 1e-9))


def run_benchmark(reps: int, seed: int, models=NOISE_MODELS, effects=EFFECTS, log=print):
    cells: dict[tuple[str, str], Counter] = {}
    examples: list[str] = []
    for model in models:
        for effect in effects:
            c = cells.setdefault((model, effect), Counter())
            for rep in range(reps):
                rng = np.random.default_rng([seed, NOISE_MODELS.index(model),
                                             EFFECTS.index(effect), rep])
                reruns = [np.random.default_rng([seed, 99, rep, k]) for k in range(CONFIRM - 1)]
                s = make_series(model, effect, rng, n_runs=GATED[1], m=M, rerun_rngs=reruns)
                with tempfile.TemporaryDirectory() as tmp, open_history(Path(tmp) / "h.db") as h:
                    for i in range(BASE):
                        _record(h, i, 0, s.runs[i], None)
                    for i in range(BASE, GATED[1]):
                        rc, verdict, chain = _session(h, s, i)
                        if i < GATED[0]:
                            continue
                        runs, scope = select_runs(h, run=chain[0])
                        report = build_report(load_report_input(h, runs, scope=scope))
                        row = [v for v in report.verdicts if v.key == "lat"]
                        shown = row[0].verdict if row else "not-judged"
                        old_rc, old_verdict = _old_reading(h, chain)
                        for v in report.verdicts:  # every verdict row, as shown
                            c["rows"] += 1
                            bad = interval_contradicts(v.verdict, v.better, v.ci_low, v.ci_high)
                            c["interval contradicts"] += bad
                            unstated = _unstated(v)
                            c["held rows"] += v.verdict == "regression"
                            c["statement missing"] += unstated
                            if unstated and len(examples) < 10:
                                examples.append(f"{model} {effect} rep {rep} run {i}: "
                                                f"{v.verdict} {v.method} p {v.p_value} q "
                                                f"{v.q_value} level {v.level}")
                            if bad and len(examples) < 10:
                                examples.append(f"{model} {effect} rep {rep} run {i}: "
                                                f"{v.verdict} [{v.ci_low}, {v.ci_high}] "
                                                f"{v.ci_conf} ({v.method})")
                        c["sessions"] += 1
                        c[f"reruns={len(chain) - 1}"] += 1
                        c["failed"] += rc != 0
                        c["exit mismatch"] += report.exit_code != rc
                        c["verdict mismatch"] += shown != verdict
                        c["old exit mismatch"] += old_rc != rc
                        c["old verdict mismatch"] += old_verdict != verdict
                        if (report.exit_code != rc or shown != verdict) and len(examples) < 10:
                            examples.append(f"{model} {effect} rep {rep} run {i}: session "
                                            f"{rc} {verdict}, report {report.exit_code} {shown}")
            log(f"{model:<10} {effect:<7} {dict(c)}", flush=True)
    return cells, examples


def render(cells, examples, *, reps: int, seed: int, elapsed: float, argv: list[str]) -> str:
    total = sum(cells.values(), Counter())
    lines = [
        "# Report surfaces against the session, over the gate benchmark's series",
        "",
        f"Command: `python benchmarks/bench_surfaces.py {' '.join(argv)}`",
        "",
        f"{len(cells)} cells (noise model x effect), {reps} series a cell (seed {seed}), "
        f"runs {GATED[0]}-{GATED[1] - 1} of each gated as suite sessions (change at run 40; "
        f"{BASE} baseline runs first), up to {CONFIRM} confirm reruns; {elapsed:.0f} s.",
        "",
        f"**Sessions: {total['sessions']}; failed: {total['failed']}; report exit-code "
        f"mismatches: {total['exit mismatch']}; verdict mismatches: "
        f"{total['verdict mismatch']}; verdict rows whose interval contradicts their "
        f"verdict (spans 0 beside a held one): {total['interval contradicts']} of "
        f"{total['rows']}; held regressions whose row does not state the test that "
        f"decided, its p and the level it was held to: {total['statement missing']} of "
        f"{total['held rows']}.** Old reading (before issue 38): "
        f"{total['old exit mismatch']} exit-code and {total['old verdict mismatch']} verdict "
        "mismatches.",
        "",
        "Chains: " + ", ".join(f"{total[f'reruns={k}']} with {k} rerun(s)"
                               for k in range(CONFIRM + 1)),
        "",
        "| noise | effect | sessions | failed | with 2+ reruns | exit mismatch | verdict "
        "mismatch | interval contradicts | held, unstated | old exit mismatch | "
        "old verdict mismatch |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (model, effect), c in cells.items():
        deep = sum(c[f"reruns={k}"] for k in range(2, CONFIRM + 1))
        lines.append(f"| {model} | {effect} | {c['sessions']} | {c['failed']} | {deep} | "
                     f"{c['exit mismatch']} | {c['verdict mismatch']} | "
                     f"{c['interval contradicts']} | "
                     f"{c['held rows']}, {c['statement missing']} | "
                     f"{c['old exit mismatch']} | {c['old verdict mismatch']} |")
    if examples:
        lines += ["", "Mismatches:", "", *[f"- {e}" for e in examples]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2, help="series per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", nargs="+", default=list(NOISE_MODELS))
    ap.add_argument("--effects", nargs="+", default=list(EFFECTS))
    ap.add_argument("--out", type=Path, help="write the Markdown result here")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    cells, examples = run_benchmark(a.reps, a.seed, a.models, a.effects)
    text = render(cells, examples, reps=a.reps, seed=a.seed, elapsed=time.monotonic() - t0,
                  argv=argv)
    print(text)
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    total = sum(cells.values(), Counter())
    ok = not (total["exit mismatch"] or total["verdict mismatch"]
              or total["interval contradicts"] or total["statement missing"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
