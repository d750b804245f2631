"""Markdown rendering (GitHub flavour) for `$GITHUB_STEP_SUMMARY` and PR comments.

Failing verdicts come first and passing ones sit in a collapsed block, so a cut
to the 1 MiB step-summary cap (see `gates.report.ghactions.fit_summary`) only ever
drops the least interesting rows. Every cell is escaped: metric keys and test
ids are shown as code, free text (skip reasons, branch names) has Markdown and
HTML specials backslash-escaped or turned into entities.
"""

from __future__ import annotations

import re

from ci_register.running.redact import masked_shown
from gates.report.build import Report
from gates.report.render_text import (
    FAILED_TESTS_HEAD,
    NEXT_STEPS_HEAD,
    WHERE_CHANGED_HEAD,
    failed_tests,
    headline,
    health_findings,
    health_tables,
    neutralise_commands,
    next_steps,
    run_table,
    several_runs,
    verdict_table,
    where_changed,
)

__all__ = ["ICONS", "md_code", "md_text", "render_md", "table"]

ICONS = {"fail": "❌", "warn": "⚠️", "improved": "✅", "info": "ℹ️", "pass": ""}
# One C-level pass per cell (a 10,000-metric report has 100,000 cells): Markdown
# specials backslash-escaped, HTML specials as entities, line breaks as spaces.
_MD_ESCAPE = str.maketrans({
    **{c: "\\" + c for c in "\\`*_[]|~"},
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": " ", "\n": " ",
})


# GitHub turns a bare ``https://...`` or ``www.`` in text into a link: a character of
# each as an entity keeps the text as it reads and no link is made of it.
_AUTOLINK = re.compile(r"(?i)://|www\.")
_AUTOLINK_BREAK = {"/": "&#47;", ".": "&#46;"}


def md_text(text: object) -> str:
    """Plain text safe in a Markdown table cell (no formatting, no HTML, no pipes, no
    link; secrets masked, bidi and other invisible characters shown as escapes,
    `show_controls`)."""
    text = masked_shown(str(text)).translate(_MD_ESCAPE)
    if "://" in text or "www." in text.lower():
        text = _AUTOLINK.sub(lambda m: m.group()[:-1] + _AUTOLINK_BREAK[m.group()[-1]], text)
    return text


def md_code(text: object) -> str:
    """Inline code safe in a table cell: pipes escaped, backtick runs fenced around."""
    s = masked_shown(str(text)).replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    if "`" not in s:
        return f"`{s}`"
    run = max(len(m) for m in re.findall(r"`+", s)) + 1
    fence = "`" * run
    return f"{fence} {s} {fence}"


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _verdict_rows(report: Report) -> tuple[list[str], list[list[str]], list[list[str]]]:
    head, raw = verdict_table(report)
    offset = 1 if several_runs(report) else 0
    top, passing = [], []
    for v, cells in zip(report.verdicts, raw, strict=True):
        out = [md_text(c) for c in cells]
        if offset:
            out[0] = md_code(cells[0])
        icon = ICONS.get(v.cls, "")
        out[offset] = (f"{icon} **{md_text(cells[offset])}**" if v.cls in ("fail", "warn")
                       else md_text(cells[offset]))
        out[offset + 1] = md_code(v.key)
        out[offset + 2] = md_code(cells[offset + 2]) if v.nodeid else "-"
        out[offset + 9] = cells[offset + 9]  # sparkline: plain Unicode, nothing to escape
        if v.change is not None:
            out[offset + 10] = md_code(cells[offset + 10])
        (passing if v.cls == "pass" else top).append(out)
    return [md_text(h) for h in head], top, passing




def _runs_and_verdicts(report: Report) -> list[str]:
    # Verdicts, owners and where metrics changed come first, the runs after them: a
    # range's runs table is long, and a reader (or the 1 MiB cut) needs the verdicts.
    parts: list[str] = []
    head, top, passing = _verdict_rows(report)
    parts += [f"### Verdicts ({len(top) + len(passing)})", ""]
    if not top and not passing:
        parts += ["No metrics recorded.", ""]
    if top:
        parts += [table(head, top), ""]
    if passing:
        parts += [f"<details><summary>{len(passing)} passing metric(s)</summary>", "",
                  table(head, passing), "", "</details>", ""]
    if report.omitted:
        parts += [f"_{report.omitted} older passing row(s) not listed; "
                  "`gate-report --all` lists them._", ""]

    failed = failed_tests(report)
    if failed:
        parts += [f"### Failed tests ({len(failed)})", "",
                  table([md_text(h) for h in FAILED_TESTS_HEAD],
                        [[md_code(n), md_text(o), md_text(e) or "-"] for n, o, e in failed]), ""]

    nxt = next_steps(report)
    if nxt:
        parts += ["### Owners and next steps", "",
                  table(NEXT_STEPS_HEAD,
                        [[md_code(k), md_text(vd), md_text(o), md_text(b),
                          md_code(c) if c != "-" else "-"] for k, vd, o, b, c in nxt]), ""]

    changed = where_changed(report)
    if changed:
        parts += ["### Where metrics changed", "",
                  table(WHERE_CHANGED_HEAD,
                        [[md_code(k), md_code(rng), md_text(ba), md_text(ch), md_text(p), md_code(run)]
                         for k, rng, ba, ch, p, run in changed]), ""]

    head, rows = run_table(report)
    cells = []
    for r, row in zip(report.runs, rows, strict=True):
        out = [md_text(c) for c in row]
        out[0] = md_code(row[0])
        out[3] = md_code(row[3]) if r.commit else "-"
        if r.ci_url and r.ci_url.startswith(("https://", "http://")):
            out[6] = f"[{md_text(row[6])}]({r.ci_url.replace(')', '%29').replace(' ', '%20')})"
        cells.append(out)
    runs_md = table([md_text(h) for h in head], cells)
    if len(cells) > 10:  # a range: a long table, folded
        runs_md = f"<details><summary>{len(cells)} runs</summary>\n\n{runs_md}\n\n</details>"
    parts += ["### Runs", "", runs_md, ""]
    return parts


def render_md(report: Report) -> str:
    if report.scope == "health":  # no runs or verdicts of its own: what health found
        icon = "⚠️" if health_findings(report) else "✅"
        parts = [f"## {icon} {md_text(headline(report))}", ""]
    else:
        icon = "❌" if report.exit_code else "✅"
        parts = [f"## {icon} {md_text(headline(report))}", ""]
        parts += _runs_and_verdicts(report)
    for h in report.health:
        sections = health_tables(h)
        parts += [f"### CI health: {md_text(h.suite)}", "",
                  f"_last {h.runs} run(s) on {md_code(h.fingerprint or '-')}_", ""]
        if not sections:
            parts += ["Nothing to report.", ""]
        for title, head, rows, note in sections:
            cells = [[md_code(r[0])] + [md_text(c) for c in r[1:]] for r in rows]
            parts += [f"<details><summary>{md_text(title)} ({len(rows)})</summary>", "",
                      table([md_text(x) for x in head], cells), ""]
            if note:
                parts += [md_text(note), ""]
            parts += ["</details>", ""]
    return neutralise_commands("\n".join(parts).rstrip() + "\n")
