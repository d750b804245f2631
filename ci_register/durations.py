"""Expected file durations from the history: a robust recent figure, else ``est_time``.

A file's figure on a suite is the p90 of its last 15 trusted, complete, passing
runs on the same hardware fingerprint (``gates.history.History.file_durations``).
p90 rather than the mean: a shard's makespan is hurt by the slow runs, and one
outlier in 15 cannot move p90 far. With fewer than 3 runs the declared
``est_time`` stands.

The history is optional. A missing file means "nothing measured yet" (silent); a
corrupt, locked, foreign or newer-schema file, or gates not being importable,
gives one warning line on stderr and every file falls back to ``est_time``:
planning must never fail because of the history.

:func:`figure` and :func:`choose` are pure; :func:`lookup` is the I/O edge.
"""

from __future__ import annotations

import math
import os
import sqlite3
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci_register.catalog import Suite
from ci_register.collect import Registration

__all__ = [
    "LATEST",
    "MIN_RUNS",
    "QUANTILE",
    "WINDOW",
    "Figure",
    "Lookup",
    "choose",
    "figure",
    "history_path",
    "lookup",
    "measured",
    "this_fingerprint",
]

WINDOW = 15  # most recent runs considered per file
MIN_RUNS = 3  # fewer than this: trust the declared est_time
QUANTILE = 0.9
LATEST = "latest"  # fingerprint of the suite's newest trusted run (planning off the GPU box)
FINGERPRINT_ENV = "CI_REGISTER_FINGERPRINT"
_LOCK_PROBE_S = 2.0  # History waits 60 s on a lock; a planner should not


@dataclass(frozen=True)
class Figure:
    seconds: float
    runs: int  # how many measured runs the figure rests on


@dataclass
class Lookup:
    figures: dict[str, Figure] = field(default_factory=dict)
    fingerprint: str | None = None
    problem: str | None = None  # why the history could not be read (None: read, or absent)

    @property
    def warning(self) -> str | None:
        """What a planner says when it falls back to ``est_time``."""
        return f"{self.problem}; planning with est_time" if self.problem else None


def figure(samples: Sequence[float], q: float = QUANTILE) -> float:
    """The q-quantile of the samples, linearly interpolated (numpy's default method)."""
    if not samples:
        raise ValueError("figure() needs at least one sample")
    xs = sorted(samples)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def choose(
    paths: Sequence[str],
    samples: Mapping[str, Sequence[float]],
    *,
    min_runs: int = MIN_RUNS,
    window: int = WINDOW,
    q: float = QUANTILE,
) -> dict[str, Figure]:
    """Figures for the paths with at least ``min_runs`` samples (newest first, ``window`` used)."""
    out: dict[str, Figure] = {}
    for path in paths:
        recent = [float(s) for s in list(samples.get(path, ()))[:window] if s is not None and math.isfinite(s) and s >= 0]
        if len(recent) >= min_runs:
            out[path] = Figure(figure(recent, q), len(recent))
    return out


def history_path(history: str | os.PathLike[str] | None, root: Path | None = None) -> Path:
    """The history the runner would write: --history, else $GATES_HISTORY, else ROOT/history.db."""
    if history:
        return Path(history)
    env = os.environ.get("GATES_HISTORY")
    if env:
        return Path(env)
    return (root or Path(".")) / "history.db"


def this_fingerprint() -> str:
    """This machine's hardware key, computed exactly as the gates plugin records it."""
    override = os.environ.get(FINGERPRINT_ENV)
    if override:
        return override
    from gates.provenance import detect_hardware, fingerprint_key  # noqa: PLC0415 - optional edge

    # Only the GPUs matter for the key: no torch child process where nvidia-smi answers.
    return fingerprint_key(detect_hardware(versions=False))


def _probe_lock(path: Path) -> None:
    # A short read first: History's own busy timeout would stall planning for a minute.
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=_LOCK_PROBE_S)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        conn.close()


def _latest_fingerprint(hist: object, suite: str) -> str | None:
    rows = hist._rows(  # type: ignore[attr-defined]
        "SELECT fingerprint FROM runs WHERE suite = ? AND status = 'complete' AND trusted = 1 "
        "ORDER BY started_at DESC, run_id LIMIT 1",
        (suite,),
    )
    return rows[0]["fingerprint"] if rows else None


def lookup(
    regs: Sequence[Registration],
    suite: Suite | str,
    history: str | os.PathLike[str] | None,
    *,
    fingerprint: str | None = None,
    root: Path | None = None,
) -> Lookup:
    """Measured figures for ``regs`` on ``suite``; never raises on a bad history.

    ``fingerprint=None`` means this machine's; :data:`LATEST` means the fingerprint
    of the suite's newest trusted run (for planning GPU suites from a CPU runner).
    """
    name = suite if isinstance(suite, str) else suite.name
    path = history_path(history, root)
    result = Lookup()
    if not path.exists():
        return result
    try:
        from gates.history import History, HistoryError, check_file  # noqa: PLC0415 - sqlite-utils is optional here
    except ImportError as exc:
        result.problem = f"{path}: cannot read durations (gates not importable: {exc})"
        return result
    try:
        check_file(path, create=False)  # a directory or a non-SQLite file, with its fix
        _probe_lock(path)
        with History(path, create=False, readonly=True) as hist:
            hist.conn.execute(f"PRAGMA busy_timeout = {int(_LOCK_PROBE_S * 1000)}")
            if fingerprint == LATEST:
                fp = _latest_fingerprint(hist, name)
            else:
                fp = fingerprint or this_fingerprint()
            result.fingerprint = fp
            if fp is None:
                return result
            samples = hist.file_durations(name, fp, limit=WINDOW)
    except (HistoryError, sqlite3.Error, OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        if not reason.startswith(str(path)):
            reason = f"{path}: {reason}"
        result.problem = reason
        return result
    result.figures = choose([r.path for r in regs], samples)
    return result


def measured(
    regs: Sequence[Registration],
    suite: Suite | str,
    history: str | os.PathLike[str] | None,
    *,
    fingerprint: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """{path: seconds} for files with enough history (what the runner plans with)."""
    found = lookup(regs, suite, history, fingerprint=fingerprint)
    if found.warning:
        (warn or (lambda m: print(f"warning: {m}", file=sys.stderr)))(found.warning)
    return {p: f.seconds for p, f in found.figures.items()}
