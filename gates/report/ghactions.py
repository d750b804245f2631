"""GitHub Actions edge: the step summary and `::error` annotations.

With ``GITHUB_ACTIONS=true`` the CLI appends the Markdown report to
``$GITHUB_STEP_SUMMARY`` (cut to GitHub's 1 MiB per-step cap, with a note) and
emits at most `MAX_ANNOTATIONS` ``::error file=...,line=...::`` annotations,
one per failing verdict, pointing at the test function that recorded the
metric (found statically with `ast`; nothing is imported).
"""

from __future__ import annotations

import ast
import io
import os
import re
import sys
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import IO

from ci_register.running.redact import mask_secrets, show_controls
from gates.report.build import Report, VerdictRow
from gates.report.render_text import fmt_change, fmt_pq, fmt_value

__all__ = [
    "MAX_ANNOTATIONS",
    "SUMMARY_CAP",
    "annotations",
    "append_step_summary",
    "escape_data",
    "escape_property",
    "fit_summary",
    "locate_test",
    "on_github",
    "summary_room",
]

SUMMARY_CAP = 1024 * 1024  # bytes GitHub accepts per step summary
MAX_ANNOTATIONS = 10  # GitHub shows about 10 annotations of a kind per step
_PARAMS = re.compile(r"\[.*\]$")


def on_github(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """Workflow-command message escaping (the runner decodes %25, %0D, %0A), of text with
    its secrets masked and invisible characters shown (`ci_register.running.redact`)."""
    text = show_controls(mask_secrets(text))
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def fit_summary(markdown: str, budget: int = SUMMARY_CAP) -> str:
    """`markdown` cut at a line boundary to at most `budget` UTF-8 bytes, with a note.

    The report lists failing verdicts first, so a cut drops passing rows and health
    details; an open ``<details>`` block is closed so the page still renders.
    """
    data = markdown.encode("utf-8")
    if len(data) <= budget:
        return markdown
    note_template = ("\n\n> **Note:** this report was cut to fit GitHub's 1 MiB step-summary "
                     "limit; {n} bytes were left out. Run `gate-report --format md` or "
                     "`--format html` for the full report.\n")
    reserve = len(note_template.encode()) + 40 + len("\n</details>\n")
    if budget <= reserve:
        return ""
    head = data[:budget - reserve].decode("utf-8", errors="ignore")
    head = head[:head.rfind("\n")] if "\n" in head else ""
    if head.count("<details>") > head.count("</details>"):
        head += "\n\n</details>"
    left_out = len(data) - len(head.encode("utf-8"))
    return head + note_template.format(n=left_out)


def append_step_summary(markdown: str, env: Mapping[str, str] | None = None) -> str:
    """Append to ``$GITHUB_STEP_SUMMARY``; returns a one-line note of what was done."""
    env = os.environ if env is None else env
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return "GITHUB_STEP_SUMMARY is not set; no step summary written"
    path = Path(target)
    used = path.stat().st_size if path.exists() else 0
    text = fit_summary(markdown, SUMMARY_CAP - used)
    if not text:
        return f"{path}: already {used} bytes of the 1 MiB cap; no room for the report"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
    cut = " (cut to fit 1 MiB)" if text != markdown else ""
    return f"appended {len(text.encode())} bytes to the step summary{cut}"


def summary_room(stream: IO[str] | None = None,
                 env: Mapping[str, str] | None = None) -> int | None:
    """Bytes left under the cap when `stream` (default stdout) IS the step summary file
    (`gate-report --format md >> "$GITHUB_STEP_SUMMARY"`), else None.

    Then the CLI cuts its own output to fit and does not append a second copy."""
    env = os.environ if env is None else env
    target = env.get("GITHUB_STEP_SUMMARY")
    stream = sys.stdout if stream is None else stream
    if not target:
        return None
    try:
        mine = os.fstat(stream.fileno())
        theirs = os.stat(target)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None
    if not os.path.samestat(mine, theirs):
        return None
    return max(0, SUMMARY_CAP - theirs.st_size)


@lru_cache(maxsize=256)
def _functions(path: str) -> dict[str, int]:
    """{"test_x": line, "TestC::test_y": line} of a test file, parsed, never imported."""
    try:
        from ci_register.registered.paths import read_regular  # noqa: PLC0415 - a FIFO is never opened

        tree = ast.parse(read_regular(path, 16 * 1024 * 1024).decode("utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return {}
    out: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            out[node.name] = node.lineno
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    out[f"{node.name}::{sub.name}"] = sub.lineno
    return out


def locate_test(nodeid: str, root: Path = Path(".")) -> tuple[str, int]:
    """(path, line) of the test function behind a pytest node id (line 1 if not found)."""
    path, _, rest = nodeid.partition("::")
    rest = _PARAMS.sub("", rest)
    lines = _functions(os.path.abspath(root / path))  # cached: a relative key would outlive a chdir
    line = lines.get(rest) or lines.get(rest.split("::")[0]) or 1
    return path, line


def _message(v: VerdictRow) -> str:
    text = (f"{v.verdict}: {v.key} {fmt_change(v)} (new {fmt_value(v.new, v.unit)}, baseline "
            f"{fmt_value(v.baseline, v.unit)}, {fmt_pq(v)}")
    if v.floor is not None:
        text += f", floor {v.floor * 100:.1f}%"
    text += f"; suite {v.suite}, run {v.run_id[:12]})"
    if v.change is not None:
        text += f"; changed in {v.change.commit_range}"
    if v.owner:
        text += f"; owner {v.owner}"
    return text


def annotations(report: Report, locate: Callable[[str], tuple[str, int]] | None = None,
                limit: int = MAX_ANNOTATIONS) -> list[str]:
    """``::error`` lines for the failing verdicts, worst first, at most `limit`,
    plus one plain line saying how many more there were."""
    locate = locate or locate_test
    failing = report.failing
    out = []
    for v in failing[:limit]:
        props = []
        if v.nodeid:
            path, line = locate(v.nodeid)
            props = [f"file={escape_property(path)}", f"line={line}"]
        props.append(f"title={escape_property('gate ' + v.verdict + ': ' + v.key)}")
        out.append(f"::error {','.join(props)}::{escape_data(_message(v))}")
    if len(failing) > limit:
        out.append(f"{len(failing) - limit} more failing gate(s) not annotated; see the "
                   "step summary")
    return out
