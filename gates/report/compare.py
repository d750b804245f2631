"""`gate-report compare A B`: every metric of B's runs against A's, with the gate's statistics.

A and B each name runs (``ReportReads.runs_by_ref``): a run id, a commit, a branch
or a hardware fingerprint (two GPU types, two images). A's newest ``window``
trusted runs are the baseline; B's newest runs (up to 10) are judged as one: one run by
``stats.judge_many`` as the gate judges a new run, several by the mean of
their summaries (``Case(mean_of=n)``: the variance of a mean of n runs
against means of n baseline runs). Verdicts come from ``stats.decide`` at the
gate's level on Benjamini-Hochberg q-values across the compared metrics.
Metrics pair on (suite, key) and, unless A or B names a fingerprint, on the
hardware fingerprint too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gates.model import stats
from gates.report.render_text import fmt_value, neutralise_commands, one_line

__all__ = ["CompareInputError", "CompareRow", "compare", "load_side", "render_compare"]

B_RUNS = 10  # B's newest runs judged together


class CompareInputError(ValueError):
    """A or B names no runs; the message names the fix."""


@dataclass
class CompareRow:
    suite: str
    fingerprint: str
    key: str
    unit: str | None
    better: str | None
    a: float | None  # baseline centre
    b: float | None  # B's value (mean of its run summaries)
    n_a: int
    n_b: int
    rel_change: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    q_value: float | None
    verdict: str
    note: str = ""  # why a change is shown without a verdict (too few runs of A)
    # What decided (one statement a row, as the report's): the test heading the judgement,
    # its change (rel_change) and interval at the level its BH q was held to (ci_conf)
    test: str = ""
    level: float | None = None
    ci_conf: float | None = None

    @property
    def own_change(self) -> float | None:
        """B against A, as the row shows them."""
        return None if self.a is None or self.b is None or not self.a else (
            (self.b - self.a) / abs(self.a))


def load_side(history: Any, ref: str, *, suite: str | None, limit: int,
              skip: set[str] = frozenset(),
              trusted_only: bool = False) -> tuple[str, dict[tuple[str, str, str], Any]]:
    """(kind of ref, {(suite, fingerprint, key): (unit, better, [samples per run, oldest
    first])}) of the runs ``ref`` names (a run with several rows of a key: pooled);
    ``trusted_only`` for the baseline side A."""
    kind, runs = history.report_reads.runs_by_ref(ref, suite=suite, limit=limit + len(skip),
                                     trusted_only=trusted_only)
    runs = [r for r in runs if r["run_id"] not in skip][:limit]
    if not runs:
        where = f" of suite {suite!r}" if suite else ""
        raise CompareInputError(f"{ref!r} names no complete run{where} (tried run id, commit, "
                                "branch, fingerprint); check it with gate-report --since 30d")
    out: dict[tuple[str, str, str], Any] = {}
    for run in reversed(runs):  # oldest first
        per: dict[str, list[float]] = {}
        meta: dict[str, tuple[str | None, str | None]] = {}
        for m in history.report_reads.metrics(run["run_id"]):
            if m.get("samples"):
                per.setdefault(m["key"], []).extend(m["samples"])
                meta[m["key"]] = (m.get("unit"), m.get("better"))
        for key, samples in per.items():
            slot = out.setdefault((run["suite"], run["fingerprint"], key),
                                  [*meta[key], []])
            slot[2].append(np.asarray(samples, dtype=float))
    return kind, out


def compare(a: Mapping[tuple[str, str, str], Any], b: Mapping[tuple[str, str, str], Any], *,
            by_fingerprint: bool = True,
            params: stats.GateParams = stats.DEFAULTS) -> list[CompareRow]:
    """Compare every metric B has with A's runs of it (``load_side`` outputs)."""
    def ident(k: tuple[str, str, str]) -> tuple[str, str, str]:
        return k if by_fingerprint else (k[0], "*", k[2])

    a_by: dict[tuple[str, str, str], list] = {}
    meta: dict[tuple[str, str, str], tuple[Any, Any]] = {}
    for k, (unit, better, runs) in a.items():
        a_by.setdefault(ident(k), []).extend(runs)
        meta[ident(k)] = (unit, better)
    rows: list[CompareRow] = []
    cases: list[tuple[CompareRow, stats.Case]] = []
    for k, (unit, better, b_runs) in sorted(b.items()):
        i = ident(k)
        fp = k[1] if by_fingerprint else f"{k[1]} vs A"
        unit = unit or meta.get(i, (None, None))[0]
        better = better or meta.get(i, (None, None))[1]
        row = CompareRow(k[0], fp, k[2], unit, better, None, None,
                         len(a_by.get(i, [])), len(b_runs), None, None, None, None, None,
                         "missing-in-A")
        rows.append(row)
        if i not in a_by:
            continue
        if better not in ("higher", "lower"):
            row.verdict = "no-direction"
            continue
        sign = 1 if better == "lower" else -1
        summaries, _, extra = stats.summarize(a_by[i], b_runs[-1], params)
        values = [stats.run_summary(x) for x in b_runs]
        cases.append((row, stats.Case(summaries, float(np.mean(values)), sign, params,
                                      extra_var=extra if len(values) == 1 else 0.0,
                                      mean_of=len(values))))
    judged: list[tuple[CompareRow, stats.Judgement]] = []
    for row, j in zip([r for r, _ in cases], stats.judge_many([c for _, c in cases]),
                      strict=True):  # the metrics judged together
        row.a, row.b = _num(j.baseline), _num(j.value)
        row.verdict = j.status
        if j.status == "insufficient-history":
            # The change is still a fact worth showing; the test is what needs runs.
            if row.a and row.b is not None:
                row.rel_change = (row.b - row.a) / abs(row.a)
            row.note = (f"A has {row.n_a} run(s) of this metric; the gate judges against at "
                        f"least {params.min_history}: change shown, not tested")
        if j.status == "ok":
            row.rel_change = _num(j.rel_change)
            if j.ci is not None:
                row.ci_low, row.ci_high = _num(j.ci[0]), _num(j.ci[1])
            row.p_value = _num(j.p)
            judged.append((row, j))
    if judged:
        q = stats.bh_qvalues([j.p_worse for _, j in judged])
        qb = stats.bh_qvalues([j.p_better for _, j in judged])
        for (row, j), qi, qbi in zip(judged, q, qb, strict=True):
            row.q_value = float(qi) if j.z >= 0 else float(qbi)
            row.verdict = stats.decide(j, float(qi), level=params.level, q_better=float(qbi))
            _state(row, j, params.level)
    order = {"regression": 0, "improvement": 1, "pass": 2}
    rows.sort(key=lambda r: (order.get(r.verdict, 3), r.suite, r.key, r.fingerprint))
    return rows


def _state(row: CompareRow, j: stats.Judgement, level: float) -> None:
    """The row's statement: the deciding test, its interval at the level its q was held to
    (on its p's scale: level x p / q), as ``gates.gate`` states a first attempt's."""
    row.test = j.statistic.rpartition("/")[2]
    row.level = level
    p, q = row.p_value, row.q_value
    at = level * (p / q) if p is not None and q and p <= q else level
    d = j.decider
    if d is None:
        row.ci_low = row.ci_high = None
        return
    ci = d.interval(at)
    row.ci_low, row.ci_high = (_num(ci[0]), _num(ci[1])) if ci is not None else (None, None)
    row.ci_conf = d.confidence(at)


def _num(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.2f}%"


def _statement(r: CompareRow) -> str:
    """"huber-3 +8.1% [+5.0, +11.2] 99.9%": the deciding test, its change and interval."""
    if not r.test:
        return "-"
    if r.ci_low is None and r.ci_high is None:
        ci = "[unbounded]" if r.ci_conf is not None else ""
    else:
        lo = "-inf" if r.ci_low is None else f"{r.ci_low * 100:+.1f}"
        hi = "+inf" if r.ci_high is None else f"{r.ci_high * 100:+.1f}"
        ci = f"[{lo}, {hi}]"
    conf = "" if r.ci_conf is None else f" {100 * r.ci_conf:.4g}%"
    return f"{r.test} {_pct(r.rel_change)} {ci}{conf}".rstrip()


def render_compare(rows: Sequence[CompareRow], a: str, b: str, fmt: str = "text") -> str:
    """The comparison as text, Markdown or JSON (``fmt``)."""
    if fmt == "json":
        import json  # noqa: PLC0415

        return json.dumps({"a": a, "b": b, "metrics": [dict(asdict(r), own_change=r.own_change)
                                                    for r in rows]},
                          indent=1) + "\n"
    head = ["verdict", "suite", "hardware", "metric", "A", "B", "change",
            "decided by: change [interval] level", "p / q <= level", "runs A/B"]
    body = []
    for r in rows:
        pq = "-" if r.p_value is None else f"p={r.p_value:.2g} q={r.q_value:.2g}"
        if r.p_value is not None and r.level is not None and r.verdict in (
                "regression", "improvement"):
            pq += f" <= {r.level:g}"
        body.append([one_line(str(c)) for c in (r.verdict, r.suite, r.fingerprint, r.key)] + [
                     fmt_value(r.a, r.unit), fmt_value(r.b, r.unit),
                     _pct(r.own_change if r.test else r.rel_change), _statement(r), pq,
                     f"{r.n_a}/{r.n_b}"])
    a, b = one_line(str(a)), one_line(str(b))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no metrics"
    notes = sorted({one_line(r.note) for r in rows if r.note})
    if fmt == "md":
        esc = [[c.replace("|", "\\|") for c in row] for row in body]
        lines = [f"## Compare `{a}` -> `{b}`: {summary}", "",
                 "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in esc]
        lines += ["", *(f"- insufficient-history: {n}" for n in notes)] if notes else []
        return neutralise_commands("\n".join(lines) + "\n")
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    lines = [f"compare {a} -> {b}: {summary}", line(head)]
    lines += [line(row) for row in body]
    lines += [f"insufficient-history: {n}" for n in notes]
    return neutralise_commands("\n".join(lines) + "\n")
