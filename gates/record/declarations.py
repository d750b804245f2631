"""Gate declarations: what each metric's gate is, from what was recorded and declared.

Pure logic, no I/O. A metric's recorded ``better`` / ``unit`` / ``n`` /
``min_value`` / ``max_value`` (``metrics.record(...)``) are its default gate.
A literal ``register_ci_gate(metric_key=..., **options)`` at a test file's top
level, carried in the plan JSON's ``gates`` list, refines it:

- ``better``: "higher" or "lower" (overrides the recorded direction);
- ``min_change``: relative practical floor in [0, 10] (0.05 = 5%), added to the
  noise-aware floor (the larger wins);
- ``min_value`` / ``max_value``: absolute bounds (override recorded ones),
  checked as ``threshold-fail``; eval configs' ``accuracy_threshold -
  tolerance`` arrives here as a recorded ``min_value``;
- ``level``: significance / FDR level in (0, 0.5];
- ``mode``: "enforce", "warn" or "off";
- ``owner``: "@team-or-person" (GitHub handles or emails, space separated), named
  in the report's regression rows and annotations (else CODEOWNERS, ``gates.report.owners``);
- ``expect``: "pass" (the default) or "fail": a negative control, a metric recorded from
  a deliberately broken input (the checkpoint swap's noisy twin). The gate must flag it
  (``threshold-fail`` or ``regression``): then its verdict is shown as a warning and
  the session passes; any other verdict fails the session (``gates.gate``), since a
  gate that lets a broken input through proves nothing about the real ones.

The session mode (``--gate``) caps every gate: a session in warn mode never
fails, a gate declared ``warn`` never fails an enforcing session.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gates.model.stats import DEFAULTS

__all__ = [
    "BETTER",
    "MODES",
    "OPTIONS",
    "DeclarationError",
    "Gate",
    "effective_mode",
    "gate_for",
    "parse_plan_gates",
    "validate_options",
]

BETTER = ("higher", "lower")
MODES = ("enforce", "warn", "off")
EXPECT = ("pass", "fail")
OPTIONS = ("better", "min_change", "min_value", "max_value", "level", "mode", "owner", "expect")
_MODE_RANK = {"off": 0, "warn": 1, "enforce": 2}


class DeclarationError(ValueError):
    """A gate declaration that cannot be used; the message is one line naming the fix."""


@dataclass(frozen=True)
class Gate:
    """The effective gate of one metric key."""

    key: str
    better: str | None = None  # None: not known yet (nothing recorded, nothing declared)
    unit: str | None = None
    n: int | None = None  # trials behind a proportion (binomial noise)
    min_change: float = DEFAULTS.min_change
    min_value: float | None = None
    max_value: float | None = None
    level: float = DEFAULTS.level
    mode: str = "enforce"
    declared_at: str | None = None  # "path:line" of the register_ci_gate call
    owner: str | None = None  # who is told when it regresses (gates.report.owners)
    expect: str = "pass"  # "fail": a negative control the gate must flag

    @property
    def declared(self) -> bool:
        return self.declared_at is not None


def _where(decl: Mapping[str, Any]) -> str:
    path = decl.get("path") or "<plan>"
    line = decl.get("line")
    return f"{path}:{line}" if line else str(path)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def validate_options(options: Mapping[str, Any], where: str, key: str = "") -> dict[str, Any]:
    """Check a register_ci_gate option dict; return a clean copy or raise DeclarationError."""
    what = f"{where}: register_ci_gate(metric_key={key!r})" if key else f"{where}: register_ci_gate"
    if not isinstance(options, Mapping):
        raise DeclarationError(f"{what}: options must be a mapping, got {type(options).__name__}")
    out: dict[str, Any] = {}
    for name, v in options.items():
        if name not in OPTIONS:
            raise DeclarationError(f"{what}: unknown option {name!r}; known: {', '.join(OPTIONS)}")
        if v is None:
            continue
        if name == "better":
            if v not in BETTER:
                raise DeclarationError(f"{what}: better={v!r}; use 'higher' or 'lower'")
        elif name == "mode":
            if v not in MODES:
                raise DeclarationError(f"{what}: mode={v!r}; use one of {', '.join(MODES)}")
        elif name == "expect":
            if v not in EXPECT:
                raise DeclarationError(f"{what}: expect={v!r}; use 'pass' or 'fail' (a "
                                       "negative control the gate must flag)")
        elif name == "owner":
            if not isinstance(v, str) or not all("@" in o for o in v.split()) or not v.split():
                raise DeclarationError(f"{what}: owner={v!r}; use '@team-or-person' (or an "
                                       "email), several separated by spaces")
        elif not _number(v):
            raise DeclarationError(f"{what}: {name}={v!r} must be a finite number")
        elif name == "min_change" and not 0 <= v <= 10:
            raise DeclarationError(f"{what}: min_change={v!r} is relative (0.05 = 5%); "
                                   "use a value in [0, 10]")
        elif name == "level" and not 0 < v <= 0.5:
            raise DeclarationError(f"{what}: level={v!r}; use a value in (0, 0.5], e.g. 0.01")
        out[name] = float(v) if name in ("min_change", "min_value", "max_value", "level") else v
    lo, hi = out.get("min_value"), out.get("max_value")
    if lo is not None and hi is not None and lo > hi:
        raise DeclarationError(f"{what}: min_value={lo} > max_value={hi}; swap them")
    return out


def parse_plan_gates(gates: Iterable[Mapping[str, Any]] | None) -> dict[str, Gate]:
    """Declared gates by metric key from a plan's ``gates`` list (validated).

    Two declarations of one key must agree option by option; a conflict is an
    error naming both places.
    """
    out: dict[str, Gate] = {}
    seen: dict[str, tuple[str, dict[str, Any]]] = {}
    for decl in gates or ():
        if not isinstance(decl, Mapping):
            raise DeclarationError(f"plan gates: expected objects, got {type(decl).__name__}")
        where = _where(decl)
        key = decl.get("metric_key")
        if not isinstance(key, str) or not key:
            raise DeclarationError(f"{where}: register_ci_gate needs metric_key=\"...\"")
        opts = validate_options(decl.get("options") or {}, where, key)
        if key in seen:
            first_where, first = seen[key]
            for name in set(first) | set(opts):
                if name in first and name in opts and first[name] != opts[name]:
                    raise DeclarationError(
                        f"{where}: register_ci_gate(metric_key={key!r}) sets {name}={opts[name]!r}"
                        f" but {first_where} sets {first[name]!r}; declare it once")
            opts = {**first, **opts}
        else:
            seen[key] = (where, opts)
        base = out.get(key, Gate(key=key, declared_at=where))
        out[key] = replace(base, **opts)
    return out


def gate_for(
    key: str,
    recorded: Mapping[str, Any] | None,
    declared: Gate | None,
    session_mode: str = "enforce",
) -> Gate:
    """Merge a metric's recorded attributes with its declaration and the session mode.

    ``recorded`` is a history ``metrics`` row (better, unit, n, min_value,
    max_value) or None when the run did not record the key.
    """
    if session_mode not in MODES:
        raise DeclarationError(f"--mode {session_mode!r}; use one of {', '.join(MODES)}")
    fields: dict[str, Any] = {"key": key}
    if recorded:
        fields.update(
            better=recorded.get("better") or None,
            unit=recorded.get("unit") or None,
            n=int(recorded["n"]) if recorded.get("n") else None,
            min_value=recorded.get("min_value"),
            max_value=recorded.get("max_value"),
        )
    if declared is not None:
        fields.update(declared_at=declared.declared_at, min_change=declared.min_change,
                      level=declared.level, mode=declared.mode, expect=declared.expect)
        for name in ("better", "min_value", "max_value"):
            v = getattr(declared, name)
            if v is not None:
                fields[name] = v
    lo, hi = fields.get("min_value"), fields.get("max_value")
    if lo is not None and hi is not None and lo > hi:
        raise DeclarationError(f"{declared.declared_at if declared else key}: {key}: "
                               f"min_value={lo} > max_value={hi}; fix the bounds")
    fields["mode"] = effective_mode(fields.get("mode", Gate.mode), session_mode)
    return Gate(**fields)


def effective_mode(gate_mode: str, session_mode: str) -> str:
    """The weaker of a gate's mode and the session's mode (off < warn < enforce)."""
    return min(gate_mode, session_mode, key=_MODE_RANK.__getitem__)
