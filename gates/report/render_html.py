"""A self-contained HTML page for a `gates.report.build.Report`.

Inline CSS and inline SVG only: no script, no font, no image, nothing from the
network (a Content-Security-Policy of ``default-src 'none'`` makes the browser
refuse anything else anyway). Every piece of text from the history goes
through `html_text` (`html.escape`, invisibles shown), so a metric or test named
``<script>...`` shows as text.
"""

from __future__ import annotations

from collections.abc import Sequence

from ci_register.running.redact import html_text
from gates.report.build import Report, Trend, VerdictRow
from gates.report.health import HealthReport
from gates.report.render_text import (
    FAILED_TESTS_HEAD,
    LABELS,
    NEXT_STEPS_HEAD,
    WHERE_CHANGED_HEAD,
    change_parts,
    failed_tests,
    fmt_change,
    fmt_pq,
    fmt_value,
    headline,
    health_tables,
    next_steps,
    run_table,
    several_runs,
    where_changed,
)

__all__ = ["MAX_CHARTS", "chart_svg", "render_html", "spark_svg"]

MAX_CHARTS = 60  # big charts for the most important rows; every row keeps a sparkline
SPARK_POINTS = 40

_CSS = """
:root{--fail:#c62828;--warn:#b26a00;--ok:#2e7d32;--info:#455a64;--line:#1565c0;--mut:#666}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:16px 24px;color:#111;background:#fafafa}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.meta{color:var(--mut);margin:0 0 12px}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;color:#fff;font-weight:600;font-size:12px}
.b-fail{background:var(--fail)}.b-pass{background:var(--ok)}
table{border-collapse:collapse;margin:4px 0 12px;background:#fff;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:middle}
th{background:#f0f0f0;position:sticky;top:0}
td{white-space:nowrap}td.w{white-space:normal;min-width:12em}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
tr.fail td:first-child{border-left:4px solid var(--fail)}
tr.warn td:first-child{border-left:4px solid var(--warn)}
tr.improved td:first-child{border-left:4px solid var(--ok)}
.v-fail{color:var(--fail);font-weight:700}.v-warn{color:var(--warn);font-weight:700}
.v-improved{color:var(--ok)}.v-info{color:var(--info)}
.charts{display:flex;flex-wrap:wrap;gap:12px}
figure{margin:0;background:#fff;border:1px solid #ddd;padding:6px 8px;width:620px}
figcaption{font-size:12px;margin-bottom:2px;word-break:break-all}
svg text{font:10px system-ui,sans-serif;fill:#444}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
details.runs>summary{font-size:16px;margin:24px 0 8px}
.note{color:var(--mut)}.sub{display:block;color:var(--mut);font-size:11px}
table.verdicts td.w{min-width:16em}table.verdicts td.w code{word-break:normal}
"""


def _e(x: object) -> str:
    return html_text(x)


def _scale(values: Sequence[float], lo_px: float, hi_px: float) -> tuple[float, float, float]:
    lo, hi = min(values), max(values)
    if hi == lo:
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    return lo, hi, (hi_px - lo_px) / (hi - lo)


def spark_svg(trend: Trend | None, width: int = 120, height: int = 24) -> str:
    """A small inline chart of the last points, the change point marked in red.

    Drawn in a 10x user space with integer coordinates: a 10,000-row table has
    400,000 points, and integers format several times faster than floats.
    """
    if trend is None or len(trend) < 2:
        return ""
    vals = trend.values[-SPARK_POINTS:]
    offset = len(trend) - len(vals)
    w, h = width * 10, height * 10
    lo, hi = min(vals), max(vals)
    k = (h - 40) / (hi - lo) if hi > lo else 0.0
    mid = h // 2 if hi == lo else 0
    step = (w - 40) / (len(vals) - 1)
    coords = " ".join([f"{int(20 + i * step)},{mid or int(h - 20 - (v - lo) * k)}"
                       for i, v in enumerate(vals)])
    mark = ""
    change = trend.change
    if change is not None and change.index - offset >= 1:
        x = int(20 + (change.index - offset - 0.5) * step)
        mark = (f'<line x1="{x}" y1="0" x2="{x}" y2="{h}" stroke="#c62828" '
                'stroke-width="15" stroke-dasharray="20 20"/>')
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {w} {h}" '
            f'role="img" aria-label="trend">{mark}<polyline fill="none" stroke="#1565c0" '
            f'stroke-width="12" points="{coords}"/></svg>')


def chart_svg(row: VerdictRow, width: int = 600, height: int = 170) -> str:
    """A trend chart: values per run, baseline dashed, untrusted runs hollow,
    the change point as a red line labelled with its commit range."""
    trend = row.trend
    if trend is None or not len(trend):
        return ""
    left, right, top, bottom = 56, 10, 14, 22
    vals = trend.values
    extra = [row.baseline] if row.baseline is not None else []
    lo, hi, k = _scale(vals + extra, 0, height - top - bottom)

    def y(v: float) -> float:
        return height - bottom - (v - lo) * k

    n = len(vals)
    step = (width - left - right) / max(n - 1, 1)

    def x(i: float) -> float:
        return left + i * step if n > 1 else left + (width - left - right) / 2

    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} '
             f'{height}" role="img" aria-label="{_e("trend of " + row.key)}">',
             f'<rect x="{left}" y="{top}" width="{width - left - right}" '
             f'height="{height - top - bottom}" fill="#fff" stroke="#ccc"/>',
             f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{_e(f"{hi:.4g}")}</text>',
             f'<text x="{left - 4}" y="{height - bottom}" text-anchor="end">'
             f'{_e(f"{lo:.4g}")}</text>',
             f'<text x="{left}" y="{height - 6}">{_e(trend.started_at[0][:10])}</text>',
             f'<text x="{width - right}" y="{height - 6}" text-anchor="end">'
             f'{_e(trend.started_at[-1][:10])}</text>']
    if row.baseline is not None:
        yb = y(row.baseline)
        parts.append(f'<line x1="{left}" y1="{yb:.1f}" x2="{width - right}" y2="{yb:.1f}" '
                     'stroke="#888" stroke-dasharray="4 3"><title>baseline '
                     f'{_e(fmt_value(row.baseline, row.unit))}</title></line>')
    change = trend.change
    if change is not None:
        xc = x(change.index - 0.5)
        label = f"change {change.commit_range}"
        anchor = "end" if xc > width / 2 else "start"
        dx = -3 if anchor == "end" else 3
        parts.append(f'<line class="change" x1="{xc:.1f}" y1="{top}" x2="{xc:.1f}" '
                     f'y2="{height - bottom}" stroke="#c62828" stroke-width="1.5" '
                     f'stroke-dasharray="5 3"><title>{_e(label)} (change-point p='
                     f'{change.p:.2g})</title></line>')
        parts.append(f'<text x="{xc + dx:.1f}" y="{top + 10}" text-anchor="{anchor}" '
                     f'fill="#c62828">{_e(label)}</text>')
    coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(vals))
    parts.append(f'<polyline fill="none" stroke="#1565c0" stroke-width="1.5" '
                 f'points="{coords}"/>')
    for i, p in enumerate(trend.points):
        fill = "#1565c0" if p.trusted else "#fff"
        tip = (f"{p.started_at[:19]} {(p.commit or '-')[:10]} {fmt_value(p.value, row.unit)}"
               + ("" if p.trusted else " (untrusted)"))
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="2.5" fill="{fill}" '
                     f'stroke="#1565c0"><title>{_e(tip)}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = (),
           raw_cols: frozenset[int] = frozenset(), wrap_cols: frozenset[int] = frozenset(),
           css: str = "") -> str:
    """Cells are escaped unless their column is in `raw_cols` (already-built markup);
    cells keep to one line unless their column is in `wrap_cols` (long free text)."""
    table = f'<table class="{css}">' if css else "<table>"
    out = [f"{table}<thead><tr>", *(f"<th>{_e(h)}</th>" for h in head),
           "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if i < len(classes) and classes[i] else ""
        out.append(f"<tr{cls}>")
        for j, cell in enumerate(row):
            td = '<td class="w">' if j in wrap_cols else "<td>"
            out.append(td + (cell if j in raw_cols else _e(cell)) + "</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _breakable(text: str, *seps: str) -> str:
    """Escaped text that may wrap after each separator (``<wbr>``), not mid-word."""
    out = _e(text)
    for sep in seps:
        out = out.replace(_e(sep), _e(sep) + "<wbr>")
    return out


def _two(main: str, sub: str | None) -> str:
    """A cell of two lines: the main value and a muted second one (both markup)."""
    return main + (f'<span class="sub">{sub}</span>' if sub else "")


def _verdict_cells(report: Report, rows: Sequence[VerdictRow]) -> tuple[list[str], list[list[str]]]:
    # Second, muted lines (the run under its suite, the test under its metric, the
    # method under its statistic ...) keep a range report's table within a 1,400 px page.
    with_run = several_runs(report)
    head = (["suite / run"] if with_run else []) + [
        "verdict", "metric / test", "baseline", "new", "change",
        "decided by: change [interval] level", "p / q <= level", "floor", "trend",
        "changed in"]
    out = []
    for v in rows:
        label = v.verdict + (" (confirmed)" if v.confirmed_by else "")
        if v.mode and v.mode != "enforce" and v.cls == "warn":
            label += f" ({v.mode})"
        change, statement = change_parts(v)
        # "p=... q=...", then the level it was held to on a line of its own
        pq, _, level = fmt_pq(v).partition(" <= ")
        test = None
        if v.nodeid:
            path, sep, name = v.nodeid.partition("::")
            test = (f'<code title="{_e(v.nodeid)}">'
                    f"{_breakable(path.rsplit('/', 1)[-1] + sep + name, '::', '[')}</code>")
        c = v.change
        out.append(([_two(_e(v.suite), _e(v.run_id[:8]))] if with_run else []) + [
            _two(f'<span class="v-{_e(v.cls)}">{_e(LABELS.get(v.cls, v.cls))}</span>',
                 _e(label)),
            _two(f"<code>{_breakable(v.key, '/')}</code>", test),
            _e(fmt_value(v.baseline, v.unit)), _e(fmt_value(v.new, v.unit)),
            _e(change),
            _e(statement or "-"),
            _two(_e(pq), _e(f"<= {level}") if level else None),
            "-" if v.floor is None else _e(f"{v.floor * 100:.1f}%"),
            spark_svg(v.trend),
            _two(f"<code>{_breakable(c.commit_range, '..')}</code>",
                 _e(f"{(c.rel or 0) * 100:+.1f}%")) if c else "-",
        ])
    return head, out


def _health_html(h: HealthReport) -> str:
    parts = [f"<h2>CI health: {_e(h.suite)}</h2>",
             f'<p class="note">last {h.runs} run(s) on <code>{_e(h.fingerprint or "-")}'
             "</code></p>"]
    sections = health_tables(h)
    if not sections:
        parts.append("<p>Nothing to report.</p>")
    for title, head, rows, note in sections:
        parts.append(f"<details open><summary>{_e(title)} ({len(rows)})</summary>")
        parts.append(_table(head, rows, wrap_cols=frozenset({len(head) - 1})))
        if note:
            parts.append(f'<p class="note">{_e(note)}</p>')
        parts.append("</details>")
    return "".join(parts)


def _next_steps_html(report: Report) -> str:
    """What the text and Markdown reports say after the verdicts: who owns each
    failing metric and the command that accepts it, and where each series changed."""
    out = []
    nxt = next_steps(report)
    if nxt:
        rows = [[f"<code>{_breakable(k, '/')}</code>", _e(vd), _e(o), _e(b),
                 f"<code>{_e(c)}</code>" if c != "-" else "-"] for k, vd, o, b, c in nxt]
        out.append(f"<h2>Owners and next steps ({len(rows)})</h2>"
                   + _table(NEXT_STEPS_HEAD, rows, raw_cols=frozenset(range(5)),
                            wrap_cols=frozenset({4})))
    changed = where_changed(report)
    if changed:
        rows = [[f"<code>{_breakable(k, '/')}</code>", f"<code>{_breakable(rng, '..')}</code>",
                 _e(ba), _e(ch), _e(p), f"<code>{_e(run)}</code>"]
                for k, rng, ba, ch, p, run in changed]
        out.append(f"<h2>Where metrics changed ({len(rows)})</h2>"
                   + _table(WHERE_CHANGED_HEAD, rows, raw_cols=frozenset(range(6))))
    return "".join(out)


def _runs_html(report: Report) -> str:
    """The runs table, collapsed unless it is short (the runs with failed tests or that
    did not complete stay in view above it); hardware named by its GPUs (the full
    description in the cell's tooltip), so a row stays one line."""
    head, rows = run_table(report)
    run_rows = [[_e(c) for c in r] for r in rows]
    for r, cells in zip(report.runs, run_rows, strict=True):
        cells[0] = f'<code title="{_e(r.run_id)}">{_e(r.run_id[:12])}</code>'
        cells[-1] = f'<span title="{_e(r.hardware)}">{_e(r.hardware.split(", driver")[0])}</span>'
    raw = frozenset(range(len(head)))
    out = []
    if len(rows) > 3:
        bad = [cells for r, cells in zip(report.runs, run_rows, strict=True)
               if r.status != "complete" or r.counts.get("failed", 0) or r.counts.get("error", 0)]
        if bad:
            out.append(f"<h2>Runs with failed tests or not complete ({len(bad)})</h2>"
                       + _table(head, bad, raw_cols=raw))
    opened = " open" if len(rows) <= 3 else ""
    out.append(f'<details class="runs"{opened}><summary>Runs ({len(rows)})</summary>'
               + _table(head, run_rows, raw_cols=raw) + "</details>")
    return "".join(out)


def render_html(report: Report) -> str:
    badge = ('<span class="badge b-fail">FAILED</span>' if report.exit_code
             else '<span class="badge b-pass">PASSED</span>')
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # No script, no network: the page is a document, not an app.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e('gate-report: ' + report.title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{badge} {_e(headline(report))}</h1>",
        f'<p class="meta">generated {_e(report.generated_at or "-")} · scope '
        f"{_e(report.scope)}"
        + "</p>",
    ]
    # Failures first: what needs a reader sits at the top, the runs below it.
    top = [v for v in report.verdicts if v.cls != "pass"]
    passing = [v for v in report.verdicts if v.cls == "pass"]
    raw = frozenset(range(12))
    wrap = frozenset({2 if several_runs(report) else 1})  # metric / test
    failed = failed_tests(report)
    if failed:
        out.append(f"<h2>Failed tests ({len(failed)})</h2>"
                   + _table(FAILED_TESTS_HEAD, [list(f) for f in failed], wrap_cols=frozenset({2})))
    out.append(f"<h2>Verdicts ({len(report.verdicts)})</h2>")
    if not report.verdicts:
        out.append("<p>No metrics recorded.</p>")
    if top:
        h, cells = _verdict_cells(report, top)
        out.append(_table(h, cells, classes=[v.cls for v in top], raw_cols=raw,
                          wrap_cols=wrap, css="verdicts"))
    if passing:
        h, cells = _verdict_cells(report, passing)
        out.append(f"<details><summary>{len(passing)} passing metric(s)</summary>")
        out.append(_table(h, cells, raw_cols=raw, wrap_cols=wrap, css="verdicts"))
        out.append("</details>")
    if report.omitted:
        out.append(f'<p class="note">{report.omitted} older passing row(s) not listed; '
                   "<code>gate-report --all</code> lists them.</p>")
    out.append(_next_steps_html(report))
    out.append(_runs_html(report))

    charted = [v for v in top if v.trend is not None and len(v.trend)][:MAX_CHARTS]
    if len(charted) < MAX_CHARTS:
        charted += [v for v in passing if v.trend is not None
                    and len(v.trend) > 1][:MAX_CHARTS - len(charted)]
    if charted:
        out.append("<h2>Trends</h2><div class=\"charts\">")
        for v in charted:
            cap = (f'<span class="v-{_e(v.cls)}">{_e(v.verdict)}</span> '
                   f"<code>{_e(v.key)}</code> · {_e(v.suite)} · {_e(fmt_change(v))}")
            out.append(f"<figure><figcaption>{cap}</figcaption>{chart_svg(v)}</figure>")
        out.append("</div>")
        hidden = len(top) + len(passing) - len(charted)
        if hidden > 0:
            out.append(f'<p class="note">{hidden} more metric(s) have only the sparkline '
                       "in the table above.</p>")
    for h in report.health:
        out.append(_health_html(h))
    out.append("</body></html>")
    return "\n".join(out)
