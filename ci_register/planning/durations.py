"""Expected file durations from the history: a robust recent figure, else ``est_time``.

A file's figure on a suite is the p90 of its last 15 trusted, complete, passing
runs on the same hardware fingerprint, leaving out runs that skipped every test of the
file (``gates.store.planning_reads.PlanningReads.file_durations``,
read through ``python -m gates.store.durations``, or in process where the caller passes
gates' reader (`DurationsReader`): ci_register never imports gates).
p90 rather than the mean: a shard's makespan is hurt by the slow runs, and one
outlier in 15 cannot move p90 far. With fewer than 3 runs the declared
``est_time`` stands.

The history is optional. A missing file means "nothing measured yet" (silent); a
corrupt, locked, foreign or newer-schema file, or gates not being importable,
gives one warning line on stderr and every file falls back to ``est_time``:
planning must never fail because of the history.

:func:`figure`, :func:`choose` and :func:`expected` are pure; :func:`lookup` is the
I/O edge. :func:`expected` is the one rule behind every duration a command shows (run
plans, ``plan``, ``matrix``, ``rerun``, ``est-time``, ``gate-report health``): for one
file on one fingerprint they all print the same figure. Commands that plan away from the
suite's hardware (``matrix``, ``plan``, ``rerun``) read the fingerprint of the suite's
newest trusted run (:data:`LATEST`, as ``health`` does); a suite run reads its own
machine's.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ci_register.planning.history_value import history_argv
from ci_register.registered.machine import FINGERPRINT_ENV, this_fingerprint

if TYPE_CHECKING:  # types only: the report's health section imports this module
    from ci_register.registered.catalog import Suite
    from ci_register.registered.collect import Registration

__all__ = [
    "FINGERPRINT_ENV",
    "LATEST",
    "LOCK_PROBE_S",
    "MIN_RUNS",
    "QUANTILE",
    "WINDOW",
    "Figure",
    "DatabaseUrl",
    "DurationsReader",
    "Lookup",
    "choose",
    "expected",
    "figure",
    "history_path",
    "lookup",
    "lookup_all",
    "measured",
    "read_by_process",
    "this_fingerprint",
]

WINDOW = 15  # most recent runs considered per file
MIN_RUNS = 3  # fewer than this: trust the declared est_time
QUANTILE = 0.9
LATEST = "latest"  # fingerprint of the suite's newest trusted run (planning off the GPU box)
LOCK_PROBE_S = 2.0  # History waits 60 s on a lock; a planner should not
_READ_TIMEOUT_S = 120.0  # the reader process as a whole (a cold start on a slow disk)
_REPO = Path(__file__).resolve().parents[2]  # where gates sits beside ci_register


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


def expected(regs: Sequence[Registration], figures: Mapping[str, Figure]
             ) -> tuple[dict[str, float], dict[str, str]]:
    """Each file's expected seconds and where the figure came from (``history``: the
    p90 rule of :func:`choose`; ``est_time``: the literal, too few runs measured)."""
    seconds = {r.path: r.est_time for r in regs}
    source = dict.fromkeys(seconds, "est_time")
    for r in regs:
        fig = figures.get(r.path)
        if fig is not None:
            seconds[r.path], source[r.path] = fig.seconds, "history"
    return seconds, source


class DatabaseUrl(str):
    """A ``postgresql://`` history: kept a string (a Path folds its ``//``); whether it
    holds a history is the database's to say, so it always "exists"."""

    __slots__ = ()

    def exists(self) -> bool:
        return True


def history_path(history: str | os.PathLike[str] | None,
                 root: Path | None = None) -> Path | DatabaseUrl:
    """The history the runner would write: --history, else $GATES_HISTORY, else ROOT/history.db
    (a file path, or a PostgreSQL URL)."""
    value = os.fspath(history) if history else os.environ.get("GATES_HISTORY")
    if value:
        if value.lower().startswith(("postgresql://", "postgres://")):
            return DatabaseUrl(value)
        return Path(value)
    return (root or Path(".")) / "history.db"


class DurationsReader(Protocol):
    """Reads the history's durations: ``(path, suites, fingerprint, limit=, lock_wait_s=)``
    -> {suite: {"fingerprint": str | None, "durations": {path: [seconds, newest first]}}}
    (the reply of ``python -m gates.store.durations``); raises ValueError with a one-line
    reason when the history cannot be read. ci_register never imports gates, so the
    default (`read_by_process`) runs that command; a caller that may import both passes
    gates' own in-process reader (``gates.commands.planner``)."""

    def __call__(self, path: Path | DatabaseUrl, suites: Sequence[str], fingerprint: str, *,
                 limit: int, lock_wait_s: float) -> Mapping[str, Mapping[str, object]]: ...


def read_by_process(path: Path | DatabaseUrl, suites: Sequence[str], fingerprint: str, *,
                    limit: int = WINDOW, lock_wait_s: float = LOCK_PROBE_S
                    ) -> dict[str, dict[str, object]]:
    """{suite: reply} of one ``python -m gates.store.durations`` for every suite (its module doc);
    raises ValueError with its one-line reason when the history cannot be read."""
    history_args, history_env = history_argv("--history", str(path))
    cmd = [sys.executable, "-m", "gates.store.durations", *history_args,
           *(a for s in suites for a in ("--suite", s)),
           "--fingerprint", fingerprint, "--limit", str(limit),
           "--lock-wait", str(lock_wait_s)]
    env = dict(os.environ, **history_env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO), env.get("PYTHONPATH")) if p)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=_READ_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ValueError(f"cannot read durations ({exc})") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        last = lines[-1] if lines else f"exit {done.returncode}"
        if "No module named" in last:
            last = f"cannot read durations (gates not importable: {last})"
        raise ValueError(last)
    reply = json.loads(done.stdout)
    if isinstance(reply, dict) and len(suites) > 1:
        reply = reply.get("suites")
    elif isinstance(reply, dict):
        reply = {suites[0]: reply}
    if not isinstance(reply, dict) or not all(isinstance(reply.get(s), dict) for s in suites):
        raise ValueError("cannot read durations (a reply that is not a JSON object per suite)")
    return reply


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
    return lookup_all([(name, regs)], history, fingerprint=fingerprint, root=root)[name]


def lookup_all(
    plan: Sequence[tuple[Suite | str, Sequence[Registration]]],
    history: str | os.PathLike[str] | None,
    *,
    fingerprint: str | None = None,
    root: Path | None = None,
    read: DurationsReader | None = None,
) -> dict[str, Lookup]:
    """:func:`lookup` for several suites, the history read once for all of them.

    ``root``: the tree whose ``history.db`` is the default (not the current folder's).
    ``read``: how (`DurationsReader`); by default one reader process (`read_by_process`)."""
    names = [s if isinstance(s, str) else s.name for s, _ in plan]
    results = {name: Lookup() for name in names}
    path = history_path(history, root)
    if not names or not path.exists():
        return results
    fp = fingerprint if fingerprint == LATEST else (fingerprint or this_fingerprint())
    try:
        replies = (read or read_by_process)(path, list(dict.fromkeys(names)), fp,
                                            limit=WINDOW, lock_wait_s=LOCK_PROBE_S)
    except ValueError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        problem = reason if reason.startswith(str(path)) else f"{path}: {reason}"
        for result in results.values():
            result.problem = problem
        return results
    for name, (_, regs) in zip(names, plan, strict=True):
        reply = replies[name]
        results[name] = Lookup(figures=choose([r.path for r in regs], reply.get("durations") or {}),
                               fingerprint=reply.get("fingerprint"))  # type: ignore[arg-type]
    return results


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
