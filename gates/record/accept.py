"""Acceptances: a metric's new level declared right, so the gate judges it from there on.

Two homes, one table (``acceptances`` in the history):

- the repo file ``gates-accept.toml`` at the repository root, reviewed with the
  change that moves the metric; an entry is in force in every run whose
  checkout carries it (``AfterWrites.carry_acceptances``), so it travels with the
  PR, does not apply to main until the PR lands, and needs no commit sha (a
  commit cannot name itself)::

      [[accept]]
      key = "serving/ttft_ms*"          # a metric key or glob (fnmatch)
      suite = "stage-c-4gpu"            # optional: only this suite
      test = "suites/serving/*"         # optional: nodeid or file glob
      reason = "chunked prefill (#1234): TTFT +10% by design"
      # from = "abc1234"                # optional: in force from this commit on instead

- ``gate-report accept KEY-or-glob --from COMMIT --reason "..."`` for operators:
  in force for the runs of COMMIT and every run started after its first run.

A judged run's key under an acceptance is compared only with baseline runs
inside it (``gates.store.gate_inputs``): the runs before stay in history, untouched. Until
``min_history`` such runs exist the verdict is ``insufficient-history`` with a
message naming the acceptance; it never fails.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# What a key is judged under is read with the gate's inputs (gates.store.gate_inputs).
from gates.store.acceptances import Cut, applies_to

__all__ = [
    "ACCEPT_FILE",
    "HELD_RUNS",
    "AcceptFileError",
    "Cut",
    "accept_command",
    "applies_to",
    "entry_id",
    "held_since",
    "read_accept_file",
]

ACCEPT_FILE = "gates-accept.toml"
HELD_RUNS = 3  # a confirmed change held this many runs: the report prints `accept`
_FIELDS = {"key", "suite", "test", "reason", "from"}
_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")


class AcceptFileError(ValueError):
    """A bad ``gates-accept.toml``; the message names file, line and fix."""


def entry_id(entry: Mapping[str, Any]) -> str:
    """A repo file entry's identity: its content (an edited entry is a new acceptance)."""
    blob = json.dumps({k: entry.get(k) for k in sorted(_FIELDS)}, sort_keys=True)
    return "file:" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_accept_file(root: Path) -> list[dict[str, Any]]:
    """The entries of ``root/gates-accept.toml`` as ``AfterWrites.carry_acceptances`` rows.

    A missing file is no entries; a bad one raises `AcceptFileError` naming the line.
    """
    path = root / ACCEPT_FILE
    if not path.is_file():
        return []
    from ci_register.registered.paths import read_regular  # noqa: PLC0415 - never a FIFO

    try:
        text = read_regular(path, 4 * 1024 * 1024).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AcceptFileError(f"{path}: cannot read it ({exc}); make it a UTF-8 text "
                              "file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AcceptFileError(f"{path}: {exc}; fix the TOML syntax") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise AcceptFileError(f"{path}: arrays or tables nested too deeply to read; fix the "
                              "TOML (an entry holds strings)") from None
    heads = [i + 1 for i, line in enumerate(text.splitlines())
             if line.strip().startswith("[[accept]]")]
    extra = sorted(set(data) - {"accept"})
    if extra:
        raise AcceptFileError(f"{path}:1: unknown table {extra[0]!r}; use [[accept]] entries")
    entries = data.get("accept", [])
    if not isinstance(entries, list):
        raise AcceptFileError(f"{path}:1: 'accept' must be [[accept]] entries")
    out = []
    for n, e in enumerate(entries):
        line = heads[n] if n < len(heads) else 1
        where = f"{path}:{line}"
        unknown = sorted(set(e) - _FIELDS)
        if unknown:
            raise AcceptFileError(f"{where}: unknown field {unknown[0]!r}; known: "
                                  f"{', '.join(sorted(_FIELDS))}")
        for name in _FIELDS:
            if name in e and not isinstance(e[name], str):
                raise AcceptFileError(f"{where}: {name} must be a string")
        if not e.get("key"):
            raise AcceptFileError(f'{where}: an entry needs key = "METRIC-KEY-or-glob"')
        if not (e.get("reason") or "").strip():
            raise AcceptFileError(f'{where}: an entry needs reason = "why the new level is '
                                  'right"')
        if e.get("from") and not _SHA.match(e["from"]):
            raise AcceptFileError(f"{where}: from = {e['from']!r} is not a commit sha (7-40 "
                                  "hex digits); give one or leave it out")
        out.append({"pattern": e["key"], "suite": e.get("suite"), "test": e.get("test"),
                    "reason": e["reason"], "from_commit": e.get("from"),
                    "entry_id": entry_id(e), "source": f"{ACCEPT_FILE}:{line}",
                    "who": None})
    return out


def held_since(rows: Sequence[Mapping[str, Any]], verdict: str) -> tuple[int, str | None]:
    """(runs in a row whose final verdict is ``verdict``, the commit of the first of them)
    from ``ReportReads.key_verdicts`` rows (newest first); a confirm rerun's verdict is
    its first attempt's final word."""
    parent = {r["run_id"]: r.get("confirm_of") for r in rows}
    root: dict[str, str] = {}
    for rid in parent:
        seen, cur = set(), rid
        while parent.get(cur) and cur not in seen:
            seen.add(cur)
            cur = parent[cur]
        root[rid] = cur
    final: dict[str, tuple[int, str]] = {}
    order: list[str] = []
    commit: dict[str, str | None] = {}
    for r in rows:
        top = root[r["run_id"]]
        if top not in order and not r.get("confirm_of"):
            order.append(top)
            commit[top] = r.get("commit")
        if top not in final or r["id"] > final[top][0]:
            final[top] = (r["id"], r["verdict"])
    n, first = 0, None
    for top in order:  # newest first
        if final[top][1] != verdict:
            break
        n, first = n + 1, commit.get(top)
    return n, first


def accept_command(key: str, suite: str | None, commit: str | None, *,
                   verdict: str = "regression") -> str:
    """The exact `gate-report accept` command for a change that held (``HELD_RUNS``)."""
    what = "slower/worse" if verdict == "regression" else "faster/better"
    parts = ["gate-report", "accept", shlex.quote(key)]
    if suite:
        parts += ["--suite", shlex.quote(suite)]
    parts += ["--from", shlex.quote((commit or "COMMIT")[:12]),
              "--reason", shlex.quote(f"intended: {what} by design (say why)")]
    return " ".join(parts)
