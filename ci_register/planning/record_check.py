"""Recorded import maps and executed-functions records are outside data: a history file
comes from a CI artifact, a merged shard, a hand edit. Selection trusts a record to say
what a run loaded or ran, so a record it cannot read as a sound description of a run of
this tree is refused (the static graph decides), and ``gate-report check`` and the merge
name it.

A row (``suite, path, commit_sha, run_id, recorded_at, files``) is refused when:

- ``files`` is not a JSON list of text, is empty (every test file's map holds the file
  itself; every executed record holds the runner's code), holds more than
  :data:`MAX_ENTRIES` entries or more than :data:`MAX_BYTES` of text;
- an entry is not a path inside the tree (absolute, ``..``, a drive, a backslash, NUL,
  over :data:`MAX_ENTRY_CHARS`), or an ``<incomplete: ...>`` mark stands beside entries;
- ``recorded_at`` is not an ISO time or lies in the future (past :data:`FUTURE_SLACK`): a
  future-dated row would outrank every later run's and never age out;
- an executed-functions record names no commit (its order among runs is the commit graph's).

Pure and stdlib only.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping

__all__ = ["EXECUTED", "FUTURE_SLACK", "MAX_BYTES", "MAX_ENTRIES", "MAX_ENTRY_CHARS", "RUNNER", "entry_problem",
           "row_problem"]

EXECUTED = "<executed>"  # ci_register.running.executed.EXECUTED_MAP_PATH
RUNNER = "<runner>"  # ci_register.running.runner_map.RUNNER_MAP_PATH
MAX_ENTRIES = 100_000  # ci_register.running.executed.MAX_ENTRIES: what a recorder stores at most
MAX_ENTRY_CHARS = 4096
MAX_BYTES = 32 << 20
FUTURE_SLACK = dt.timedelta(minutes=10)  # runners' clocks drift; a row later than this is refused
_SHA = re.compile(r"[0-9a-f]{7,64}")


def entry_problem(entry: object) -> str | None:
    """Why ``entry`` (``path``, ``path::qualname``, ``path::*``) is not a place in the tree."""
    if not isinstance(entry, str):
        return f"entry {str(entry)[:40]!r} is not text"
    if "\x00" in entry:
        return f"entry {entry[:40]!r} holds a NUL character"
    if len(entry) > MAX_ENTRY_CHARS:
        return f"an entry is longer than {MAX_ENTRY_CHARS} characters"
    path = entry.split("::", 1)[0]
    if not path or path.startswith("/") or "\\" in path or re.match(r"[A-Za-z]:", path):
        return f"entry {entry[:80]!r} is not a path inside the tree"
    if any(p in ("", ".", "..") for p in path.split("/")):
        return f"entry {entry[:80]!r} is not a path inside the tree ('..', '.' or an empty part)"
    return None


def _when(value: object) -> dt.datetime | None:
    try:
        stamp = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)


def row_problem(row: Mapping, now: dt.datetime) -> str | None:
    """Why a stored import-map row cannot be used, else None (see the module docstring).
    ``files`` may be the decoded list or the stored JSON text."""
    path = row.get("path")
    if path not in (EXECUTED, RUNNER) and (not isinstance(path, str) or "::" in path or entry_problem(path)):
        return f"its test file {str(path)[:80]!r} is not a path inside the tree"
    files = row.get("files")
    if isinstance(files, str | bytes):
        if len(files) > MAX_BYTES:
            return f"its entries are over {MAX_BYTES >> 20} MiB"
        try:
            files = json.loads(files)
        except (ValueError, RecursionError):
            return "its entries are not JSON (a damaged row)"
    if not isinstance(files, list):
        return "its entries are not a list (a damaged row)"
    if not files:
        return "it is empty (a run that loaded or ran nothing recorded nothing)"
    if len(files) > MAX_ENTRIES:
        return f"it holds {len(files)} entries, more than the {MAX_ENTRIES} a recorder stores"
    if sum(len(f) for f in files if isinstance(f, str)) > MAX_BYTES:
        return f"its entries are over {MAX_BYTES >> 20} MiB"
    marks = [f for f in files if isinstance(f, str) and f.startswith("<incomplete")]
    if marks and len(files) > 1:
        return "an <incomplete> mark stands beside entries (a damaged row)"
    if not marks:
        for f in files:
            if why := entry_problem(f):
                return why
    when = _when(row.get("recorded_at"))
    if when is None:
        return f"recorded_at {str(row.get('recorded_at'))[:40]!r} is not an ISO time"
    if when > now + FUTURE_SLACK:
        return f"recorded_at {row.get('recorded_at')} is in the future (now {now:%Y-%m-%dT%H:%M}Z)"
    if path == EXECUTED and not marks and not _SHA.fullmatch(str(row.get("commit_sha") or "")):
        return "it names no commit (a record is placed among runs by the commit graph)"
    return None
