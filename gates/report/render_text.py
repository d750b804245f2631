"""Terminal rendering of a `gates.report.build.Report`, and the number formats the
Markdown renderer shares. Pure: returns a string."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from gates.report.build import Report, RunInfo, VerdictRow, own_change
from gates.report.health import HealthReport

__all__ = [
    "next_steps",
    "LABELS",
    "VERDICT_HEAD",
    "SPARK",
    "fmt_change",
    "change_parts",
    "fmt_pq",
    "fmt_seconds",
    "fmt_value",
    "grid",
    "headline",
    "health_tables",
    "neutralise_commands",
    "one_line",
    "render_text",
    "run_label",
    "run_table",
    "several_runs",
    "sparkline",
    "verdict_table",
]

SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 24
LABELS = {"fail": "FAIL", "warn": "warn", "improved": "better", "info": "info", "pass": "ok"}


# Control characters (newlines included) in a printed field become "?": a field can
# never start a line of its own, so history data cannot print a workflow command.
_CONTROL = {c: "?" for c in [*range(0, 32), 127, 0x85, 0x2028, 0x2029]}


def one_line(text: str) -> str:
    """`text` with every control character (newline, CR, escape...) replaced by ``?``."""
    return text.translate(_CONTROL)


def neutralise_commands(text: str) -> str:
    """Break a line that would read as a GitHub workflow command (``::name::``).

    The runner parses ``::`` at the start of any line of a step's output, so a test
    name or unit from the history must never begin one; such a line keeps its text
    with a space between the colons.
    """
    if "::" not in text:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("::"):
            lines[i] = line.replace("::", ": :", 1)
    return "\n".join(lines)


# A terminal report fits this many columns: a table wider than that is folded, each row
# on as many lines as its columns need (the later ones indented), and a heading or a
# single cell wider than a line wraps.
TEXT_WIDTH = 120
FOLD_INDENT = "    "


def grid(rows: Sequence[Sequence[str]], head: Sequence[str], width: int | None = None) -> str:
    """A plain table in tabulate's "simple" style (header, dashes, two-space gaps).

    Formatted directly rather than through tabulate (which the gate's own verdict
    table uses): a 10,000-metric report has 100,000 cells, and tabulate's per-cell type
    sniffing and wide-character width lookups cost seconds there. Measured side by side
    on 10,000 rows x 10 columns (``python benchmarks/bench_libraries.py``, results in
    ``benchmarks/results/bench_libraries.md``): tabulate 0.10 "simple" 7.9x this
    function's time, 2.4x with ``disable_numparse``; and it pads every header by 2,
    which would widen each column of the golden outputs. Cells are text already;
    widths are len().

    With ``width``, a table wider than that is folded: its columns go, in order, into
    groups that each fit a line, and every row (the header too) takes one line per
    group, the later groups indented, so each group stays aligned down the table.
    A cell wider than its line wraps onto lines of its own.
    """
    rows = [[one_line(c) for c in row] for row in rows]
    widths = [len(h) for h in head]
    for row in rows:
        for i, cell in enumerate(row):
            if len(cell) > widths[i]:
                widths[i] = len(cell)
    if width is None or sum(widths) + 2 * (len(widths) - 1) <= width:
        groups = [list(range(len(widths)))]
    else:
        groups = _fold(widths, width)
    out: list[str] = []
    for g, cols in enumerate(groups):
        out += _group_lines([head[i] for i in cols], [widths[i] for i in cols], g, width)
    for g, cols in enumerate(groups):
        dashes = (FOLD_INDENT if g else "") + "  ".join("-" * widths[i] for i in cols)
        out.append(dashes[:width] if width else dashes)
    for row in rows:
        for g, cols in enumerate(groups):
            out += _group_lines([row[i] for i in cols], [widths[i] for i in cols], g, width)
    return "\n".join(out)


def _fold(widths: Sequence[int], width: int) -> list[list[int]]:
    """Consecutive column groups, each fitting ``width`` (the later ones after the indent)."""
    groups: list[list[int]] = [[]]
    used = 0
    for i, w in enumerate(widths):
        indent = len(FOLD_INDENT) if len(groups) > 1 else 0
        need = w if not groups[-1] else w + 2
        if groups[-1] and indent + used + need > width:
            groups.append([])
            used, need = 0, w
        groups[-1].append(i)
        used += need
    return groups


def _group_lines(cells: Sequence[str], widths: Sequence[int], group: int,
                 width: int | None) -> list[str]:
    indent = FOLD_INDENT if group else ""
    last = len(cells) - 1
    line = indent + "  ".join(c if i == last else c.ljust(widths[i]) for i, c in enumerate(cells))
    line = line.rstrip()
    if width is None or len(line) <= width:
        return [line]
    # One cell wider than a line (a long key or command): the others as they are, that
    # cell broken at spaces where it can be, else at the line's end. A command alone on
    # its lines (the accept hint) ends each broken line with a shell continuation, so it
    # still pastes as one command.
    command = len(cells) == 1 and cells[0].startswith(_COMMANDS)
    room = max(width - len(indent) - (2 if command else 0), 20)
    parts = textwrap.wrap(line[len(indent):], room, break_on_hyphens=False, subsequent_indent="  ") or [line]
    return [indent + part + (" \\" if command and i < len(parts) - 1 else "") for i, part in enumerate(parts)]


_COMMANDS = ("gate-report ", "nox ", "python ")


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """Unicode sparkline of the last `width` values (flat series -> a flat line)."""
    vals = [v for v in values[-width:] if v == v]  # drop NaN
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi == lo:
        return SPARK[3] * len(vals)
    scale = (len(SPARK) - 1) / (hi - lo)
    return "".join(SPARK[int(round((v - lo) * scale))] for v in vals)


def fmt_value(x: float | None, unit: str | None = None) -> str:
    if x is None:
        return "-"
    text = f"{x:.4g}"
    return f"{text} {unit}" if unit else text


def fmt_change(v: VerdictRow) -> str:
    """"+1.4%; run +1.4% [+0.8, +2.0] 98%": the row's own change, then what decided it
    (``change_parts``)."""
    change, statement = change_parts(v)
    return f"{change}; {statement}" if statement else change


def change_parts(v: VerdictRow) -> tuple[str, str]:
    """(the row's own change, the statement of the test that decided it), in percent.

    The change is the new value against the baseline shown beside it, always, so the
    row never contradicts itself. The statement names the test that decided (the
    new run alone, a window of runs, a quantile test, a confirm rule over reruns),
    the change that test measured and its interval at the level that decided, with
    that interval's confidence: "quantile-7 +3.3% [no interval]" where the test's
    interval is not a t-interval (a rank or quantile rule). A verdict stored before
    rows carried their level shows its stored change and 95% interval as they were.
    """
    own = own_change(v.new, v.baseline)
    change = "-" if own is None else f"{own * 100:+.1f}%"
    name = (v.method or "").rpartition("/")[2]
    if v.method == "still-red":
        cp = v.change_point or {}
        since = str(cp.get("run_id") or "")[:12]
        return change, "still-red" + (f" since {since}" if since else "")
    if v.verdict == "threshold-fail" or v.method == "bound":
        return change, "declared bound"
    if not name or v.verdict in ("missing", "error", "not-judged", "insufficient-history",
                                 "unguarded"):
        return change, ""
    test_change = "" if v.rel_change is None else f" {v.rel_change * 100:+.1f}%"
    if v.ci_low is not None and v.ci_high is not None:
        ci = f" [{v.ci_low * 100:+.1f}, {v.ci_high * 100:+.1f}]"
        ci += f" {_conf(v.ci_conf)}" if v.ci_conf is not None else " 95%"
    elif (v.ci_low is not None or v.ci_high is not None) and v.ci_conf is not None:
        # One-sided (a quantile test's, by inversion): the least change it still finds
        lo = "-inf" if v.ci_low is None else f"{v.ci_low * 100:+.1f}"
        hi = "+inf" if v.ci_high is None else f"{v.ci_high * 100:+.1f}"
        ci = f" [{lo}, {hi}] {_conf(v.ci_conf)}"
    elif v.ci_conf is not None:
        ci = f" [unbounded] {_conf(v.ci_conf)}"
    elif v.level is not None and v.verdict in ("regression", "improvement"):
        ci = " [no interval]"  # a rank or quantile rule: its p is the statement
    else:
        ci = ""
    return change, f"{name}{test_change}{ci}"


def _conf(c: float) -> str:
    """A confidence in percent, with the digits that tell it from 100%."""
    pct = 100 * c
    for d in range(4):
        text = f"{pct:.{d}f}"
        if float(text) < 100 or pct >= 100:
            return f"{text}%"
    return f"{pct:.4g}%"


def _p(x: float) -> str:
    return f"{x:.2g}" if x >= 0.001 else f"{x:.1e}"


def fmt_pq(v: VerdictRow) -> str:
    """"p=0.018 q=0.018 <= 0.02": the deciding test's p, its BH q where the run's metrics
    were tested together (a first attempt), and the level it was held to where the
    verdict is a change."""
    parts = []
    if v.p_value is not None:
        parts.append(f"p={_p(v.p_value)}")
    if v.q_value is not None:
        parts.append(f"q={_p(v.q_value)}")
    if parts and v.level is not None and v.verdict in ("regression", "improvement"):
        parts.append(f"<= {_p(v.level)}")
    return " ".join(parts) or "-"


def fmt_seconds(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 3600:
        return f"{x / 3600:.1f} h"
    if x >= 120:
        return f"{x / 60:.1f} min"
    return f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"


def _wall(r: RunInfo) -> str:
    text = fmt_seconds(r.wall_s)
    if r.est_s:
        delta = r.est_delta
        text += f" vs est {fmt_seconds(r.est_s)}"
        if delta is not None:
            text += f" ({delta * 100:+.0f}%)"
    return text


def health_findings(report: Report) -> int:
    """Stale est_time, flaky, always-skipped and never-run entries over the health sections."""
    return sum(len(h.stale) + len(h.flaky) + len(h.always_skipped) + len(h.never_ran)
               for h in report.health)


_NOTE_CHARS = 400  # of a run's gate note in the headline (a bad plan's line is ~200)
_NAMED_TESTS = 5  # failed tests the headline names; the "Failed tests" section lists all
FAILED_TESTS_HEAD = ["test", "outcome", "error (first line)"]


def failed_tests(report: Report) -> list[tuple[str, str, str]]:
    """(nodeid, outcome, error line) of every reported run's failed first-attempt tests."""
    return [(t.nodeid, t.outcome, t.error) for r in report.runs for t in r.failed_tests]


def headline(report: Report) -> str:
    if report.scope == "health":  # no runs or verdicts of its own: what health found
        n = health_findings(report)
        return f"{report.title}: " + (f"{n} finding(s)" if n else "nothing to fix")
    n_fail = report.summary.get("fail", 0)
    code = report.exit_code
    state = (f"FAILED: {n_fail} gate(s) failed" if n_fail
             else f"FAILED (exit {code})" if code
             else "passed: no gate failed")
    counts = ", ".join(f"{n} {LABELS.get(k, k)}" for k, n in
                       sorted(report.summary.items(), key=lambda kv: list(LABELS).index(kv[0])
                              if kv[0] in LABELS else 9))
    text = f"{report.title}: {state}" + (f" ({counts})" if counts else "")
    # The exit code is the sessions' (gates, failed tests, a run that never finished:
    # a crash mid-suite records no verdicts at all); say which of them it was.
    failed_tests = sum(r.counts.get("failed", 0) + r.counts.get("error", 0)
                       for r in report.runs)
    # A run whose gate was killed, crashed or timed out holds no (or partial) verdicts:
    # "no gate failed" would be a false green; its status (gate-unfinished) fails it.
    gate_unfinished = sum(r.status == "gate-unfinished" for r in report.runs)
    # A gate that refused its input (exit 2) judged nothing either; its line says why.
    gate_error = [r for r in report.runs if r.status == "gate-error"]
    # A planned shard that recorded no run (gates.report.query.not_recorded_shards).
    missing = [f"{r.suite} {r.shard}" for r in report.runs if r.status == "not-recorded"]
    incomplete = sum(r.status not in ("complete", "gate-unfinished", "gate-error",
                                      "not-recorded") for r in report.runs)
    if failed_tests:
        text += f"; {failed_tests} test(s) failed"
        names = [t.name for r in report.runs for t in r.failed_tests]
        if names:  # the tests (a parametrized variant by its id), not a count alone
            shown = ", ".join(names[:_NAMED_TESTS])
            more = f" and {len(names) - _NAMED_TESTS} more" if len(names) > _NAMED_TESTS else ""
            text += f": {shown}{more}"
    if incomplete:
        text += f"; {incomplete} run(s) incomplete"
    if missing:
        text += f"; shard(s) {', '.join(missing[:8])} recorded no run"
    if gate_unfinished:
        text += f"; the gate of {gate_unfinished} run(s) did not finish, so it was not judged"
    # Recorded with the gate on, and no gate saved a result for it (its runner killed
    # mid-gate, a mark nobody could write): never judged, never "no gate failed".
    never = sum(len(r.never_judged) for r in report.runs)
    if never:
        text += f"; the gate did not record a result for {never} run(s)"
    if gate_error:
        why = gate_error[0].gate_note or "the gate refused its input"
        more = f" (and {len(gate_error) - 1} more run(s))" if len(gate_error) > 1 else ""
        text += (f"; run {gate_error[0].run_id[:12]}{more} was not judged: "
                 f"{why[:_NOTE_CHARS]}{'...' if len(why) > _NOTE_CHARS else ''}")
    # A confirm rerun that crashed or was interrupted left the trip unconfirmed; the
    # exit code is that rerun's (1, 128 + N), not the gate's.
    unfinished = [s for r in report.runs for s in r.confirm_statuses if s != "complete"]
    if unfinished:
        text += (f"; {len(unfinished)} confirm rerun(s) {'/'.join(sorted(set(unfinished)))}, "
                 "the trip unconfirmed")
    # A machine model new to its suite: its runs are judged against its own only, so
    # its first runs are insufficient-history; say so, and what was set aside.
    seen_models: set[tuple[str, str]] = set()
    for r in sorted(report.runs, key=lambda r: r.started_at, reverse=True):
        if r.new_model and (r.suite, r.fingerprint) not in seen_models:
            seen_models.add((r.suite, r.fingerprint))
            text += f"; {r.new_model}"
    errors = sum(v.verdict == "error" and v.mode not in ("warn", "off") for v in report.verdicts)
    if errors:
        text += f"; the gate could not judge {errors} metric(s)"
    return text


def run_table(report: Report) -> tuple[list[str], list[list[str]]]:
    head = ["run", "suite", "shard", "commit", "branch", "started (UTC)", "status",
            "passed", "failed", "skipped", "wall vs est_time", "hardware"]
    rows = []
    for r in report.runs:
        failed = r.counts.get("failed", 0) + r.counts.get("error", 0)
        status = r.status + ("" if r.trusted else " (untrusted)")
        if r.confirm_runs:
            status += f", {len(r.confirm_runs)} confirm run(s)"
        rows.append([r.run_id[:12], r.suite, r.shard, (r.commit or "-")[:10], r.branch or "-",
                     r.started_at[:19].replace("T", " "), status,
                     str(r.counts.get("passed", 0)), str(failed),
                     str(r.counts.get("skipped", 0)), _wall(r), r.hardware])
    return head, rows


def several_runs(report: Report) -> bool:
    """Rows need a run column when the report covers more than one run."""
    return report.scope == "range" or len(report.runs) > 1


def run_label(v: VerdictRow) -> str:
    return f"{v.suite} {v.run_id[:8]}"


# A verdict row: the row's own change (new against baseline), then one statement of
# what decided it: the test, its change and interval at the level that decided, its p
# (and BH q) against that level.
VERDICT_HEAD = ["verdict", "metric", "test", "baseline", "new", "change",
                "decided by: change [interval] level", "p / q <= level", "floor", "trend",
                "changed in"]


def verdict_table(report: Report, *, with_run: bool | None = None
                  ) -> tuple[list[str], list[list[str]]]:
    with_run = several_runs(report) if with_run is None else with_run
    head = (["suite run"] if with_run else []) + VERDICT_HEAD
    rows = []
    for v in report.verdicts:
        verdict = f"{LABELS.get(v.cls, v.cls)} {v.verdict}" if v.cls != "pass" else v.verdict
        if v.mode and v.mode != "enforce" and v.cls in ("warn",):
            verdict += f" ({v.mode})"
        if v.confirmed_by:
            verdict += " (confirmed)"
        change = v.change
        own, statement = change_parts(v)
        rows.append(([run_label(v)] if with_run else []) + [
            verdict, v.key, v.nodeid.split("::", 1)[-1] if v.nodeid else "-",
            fmt_value(v.baseline, v.unit), fmt_value(v.new, v.unit), own, statement or "-",
            fmt_pq(v), "-" if v.floor is None else f"{v.floor * 100:.1f}%",
            sparkline(v.trend.values) if v.trend else "",
            f"{change.commit_range} ({(change.rel or 0) * 100:+.1f}%)" if change else "-",
        ])
    return head, rows


def health_tables(h: HealthReport) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, header, rows, note) per health section that has something to say."""
    out: list[tuple[str, list[str], list[list[str]], str]] = []
    if h.stale:
        out.append(("Stale est_time (vs p90 of recent passing runs)",
                    ["file", "est_time", "measured p90", "runs", "suggested"],
                    [[f"{s.path}:{s.line or 1}", f"{s.est_time:g} s", f"{s.p90:.0f} s",
                      str(s.runs), f"est_time={s.suggested}"] for s in h.stale], ""))
    if h.flaky:
        out.append(("Flaky tests", ["test", "passed", "failed", "why"],
                    [[f.nodeid, str(f.passes), str(f.fails), f.why] for f in h.flaky], ""))
    if h.always_skipped:
        out.append(("Always skipped where registered to run", ["test", "runs", "reason"],
                    [[s.nodeid, str(s.runs), s.reason or "-"] for s in h.always_skipped], ""))
    if h.never_ran:
        out.append(("Registered files that never ran", ["file", "why"],
                    [[f"{n.path}:{n.line or 1}", n.why] for n in h.never_ran], ""))
    if h.slowest:
        note = ""
        g = h.shard_gain
        if g is not None:
            if g.shards > 1:
                note = (f"{g.shards} shards: slowest shard {fmt_seconds(g.makespan_est)} when "
                        f"planned by est_time, {fmt_seconds(g.makespan_fresh)} with fresh "
                        f"estimates (-{fmt_seconds(max(g.drop_s, 0.0))}, "
                        f"{max(g.drop_pct, 0.0):.0f}%)")
            else:
                note = (f"1 shard: {fmt_seconds(g.makespan_fresh)} measured; fresh "
                        "estimates change nothing on one shard")
        # "expected" is the planner's figure, formatted as plan and rerun print it.
        out.append(("Slowest files", ["file", "median", "expected", "est_time", "runs"],
                    [[s.path, fmt_seconds(s.median), f"{s.expected:.0f} s ({s.source})",
                      "-" if s.est_time is None else f"{s.est_time:g} s", str(s.runs)]
                     for s in h.slowest], note))
    return out


NEXT_STEPS_HEAD = ["metric", "verdict", "owner", "bisected", "to accept as the new level"]
WHERE_CHANGED_HEAD = ["metric", "commits", "median before -> after", "change", "change-point p",
                      "first run after"]


def _next_order(v: VerdictRow) -> int:
    """Confirmed regressions first (held by a confirm rerun, or still red: held by an
    earlier chain and not accepted), then other failures, then the rest (improvements)."""
    if v.cls == "fail":
        held = v.confirmed_by or v.method == "still-red"
        return 0 if v.verdict == "regression" and held else 1
    return 2


def next_steps(report: Report) -> list[list[str]]:
    """Rows naming the owner of each failing or improved metric and, where the change
    held, the command that accepts it (``gates.report.owners.assign`` fills them). Every
    failing metric has a row, with or without an owner; confirmed regressions first. A
    metric is listed once, however many runs a range holds: the verdict of its first
    row (the worst), and the owner, bisection and accept command of any of its rows
    (the command sits on the run where the change has held long enough)."""
    rows: dict[tuple[str, str], list[VerdictRow]] = {}
    for v in sorted(report.verdicts, key=_next_order):
        if v.owner or v.accept_hint or v.bisect or v.cls == "fail":
            rows.setdefault((v.suite, v.key), []).append(v)

    def first(vs: list[VerdictRow], name: str) -> str:
        return next((getattr(v, name) for v in vs if getattr(v, name)), None) or "-"

    return [[vs[0].key, vs[0].verdict, first(vs, "owner"), first(vs, "bisect"),
             first(vs, "accept_hint")] for vs in rows.values()]


def where_changed(report: Report) -> list[list[str]]:
    """Where each non-passing metric's series changed (``Trend.change``): the commits
    around the change point, the medians either side, and the first run after it. One
    row a metric (its first row: the worst verdict), however many runs a range holds."""
    rows = []
    seen: set[tuple[str, str]] = set()
    for v in report.verdicts:
        c = v.change
        if c is None or v.cls == "pass" or (v.suite, v.key) in seen:
            continue
        seen.add((v.suite, v.key))
        rows.append([v.key, c.commit_range, f"{c.before:.4g} -> {c.after:.4g}",
                     "-" if c.rel is None else f"{c.rel * 100:+.1f}%",
                     f"{c.p:.2g}" if c.p == c.p else "-", c.run_id[:12]])
    return rows


def _runs_and_verdicts(report: Report) -> list[str]:
    head, rows = run_table(report)
    runs = ["Runs", grid(rows, head, TEXT_WIDTH), ""]
    parts = [] if report.scope == "range" else runs  # a range's many runs come after its verdicts
    head, rows = verdict_table(report)
    title = f"Verdicts ({len(rows)})"
    if report.omitted:
        title += f"; {report.omitted} older passing row(s) not listed (--all lists them)"
    parts.append(title)
    parts.append(grid(rows, head, TEXT_WIDTH)
                 if rows else "  no metrics recorded")
    parts.append("")
    failed = failed_tests(report)
    if failed:
        parts += [f"Failed tests ({len(failed)})",
                  grid([list(f) for f in failed], FAILED_TESTS_HEAD, TEXT_WIDTH), ""]
    nxt = next_steps(report)
    if nxt:
        parts += ["Owners and next steps", grid(nxt, NEXT_STEPS_HEAD, TEXT_WIDTH), ""]
    changed = where_changed(report)
    if changed:
        parts += ["Where metrics changed", grid(changed, WHERE_CHANGED_HEAD, TEXT_WIDTH), ""]
    return parts + (runs if report.scope == "range" else [])


def _wrapped(text: str) -> str:
    """A heading or a headline within TEXT_WIDTH: its start stays on the first line."""
    return "\n".join(textwrap.wrap(text, TEXT_WIDTH, subsequent_indent="  ", break_on_hyphens=False)) or text


def render_text(report: Report) -> str:
    parts = [_wrapped(one_line(headline(report))), ""]
    if report.scope != "health":
        parts += _runs_and_verdicts(report)
    for h in report.health:
        parts.append(_wrapped(one_line(f"CI health: {h.suite} (last {h.runs} run(s), hardware "
                                       f"{h.fingerprint or '-'})")))
        sections = health_tables(h)
        if not sections:
            parts += ["  nothing to report", ""]
        for title, head, rows, note in sections:
            parts += [f"  {title}", grid(rows, head, TEXT_WIDTH)]
            if note:
                parts.append(_wrapped(one_line(f"  {note}")))
            parts.append("")
    return neutralise_commands("\n".join(one_line(p) if "\n" not in p else p
                                          for p in parts).rstrip() + "\n")
