"""miles' register_ci_gate keywords, mapped onto this tool's gate options (pure).

miles declares a metric gate as ``register_ci_gate(metric_key=..., steps=...,
constraint={...}, enforce=False, allowlist_reason=...)``: ``steps`` picks which points of
a series are compared ("last", "all" or indices), ``constraint`` is a two-sided band
(``rel_up`` / ``abs_floor_up`` / ``rel_down`` / ``abs_floor_down``), and a gate enforces
only with ``enforce=True``. Here ``enforce`` becomes ``mode`` and the band's relative
sides become ``min_change``; ``gates.record.declarations`` documents the options.
"""

from __future__ import annotations

__all__ = ["BAND_KEYS", "GATE_OPTIONS", "MILES_GATE_KEYS", "miles_options"]

GATE_OPTIONS = ("better", "min_change", "min_value", "max_value", "level", "mode", "owner",
                "expect")
MILES_GATE_KEYS = ("steps", "constraint", "enforce", "allowlist_reason")
BAND_KEYS = ("rel_up", "abs_floor_up", "rel_down", "abs_floor_down")


def miles_options(opts: dict[str, object], marker: str) -> str | None:
    """Map miles' gate keywords in ``opts`` onto ours, in place; an error line or None."""
    if "enforce" in opts and "mode" in opts:
        return f"{marker}() got both enforce= and mode=; pass one"
    enforce = opts.pop("enforce", None)
    if enforce is not None:
        if not isinstance(enforce, bool):
            return f"enforce must be True or False, got {enforce!r}"
        opts["mode"] = "enforce" if enforce else "warn"
    elif any(k in opts for k in MILES_GATE_KEYS) and "mode" not in opts:
        opts["mode"] = "warn"  # miles' default: the verdict is reported, never fails
    band = opts.pop("constraint", None)
    if band is not None:
        if not isinstance(band, dict) or not set(band) <= set(BAND_KEYS) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in band.values()
        ):
            return f"constraint must be a dict of {', '.join(BAND_KEYS)} (numbers >= 0), got {band!r}"
        rel = [float(band[k]) for k in ("rel_up", "rel_down") if k in band]
        # One relative floor for both directions: the band's tighter side.
        if rel and "min_change" not in opts:
            opts["min_change"] = min(rel)
    steps = opts.pop("steps", None)
    if steps is not None and steps not in ("last", "all") and not (
        isinstance(steps, list) and steps and all(isinstance(i, int) and not isinstance(i, bool) for i in steps)
    ):
        return f"steps must be \"last\", \"all\" or a non-empty list of step indices, got {steps!r}"
    reason = opts.pop("allowlist_reason", None)
    if reason is not None and not isinstance(reason, str):
        return f"allowlist_reason must be a string, got {reason!r}"
    return None
