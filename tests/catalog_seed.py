"""Suite catalogs (``suites/catalog.toml`` text) for the framework's tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["SUITE_DEFAULTS", "catalog_text"]

SUITE_DEFAULTS: dict[str, Any] = {"backend": "cpu", "schedule": "per-commit",
                                  "shard_budget_s": 600}


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def catalog_text(suites: Mapping[str, Mapping[str, Any]], *,
                 markers: Mapping[str, str] | None = None,
                 collect: Mapping[str, Any] | None = None,
                 defaults: Mapping[str, Any] = SUITE_DEFAULTS) -> str:
    """A suite catalog (``suites/catalog.toml``) for ``{name: {key: value}}``.

    Each suite gets ``defaults`` and ``description = name`` unless given; a dict value
    (``hardware = {"gpu_count": 1}``) becomes the ``[suites.NAME.KEY]`` table.
    ``markers`` and ``collect`` become those tables.
    """
    lines = []
    if collect:
        lines += ["[collect]"] + [f"{k} = {_toml(v)}" for k, v in collect.items()]
    if markers:
        lines += ["[markers]"] + [f"{k} = {_toml(v)}" for k, v in markers.items()]
    for name, given in suites.items():
        spec = {"description": name, **defaults, **given}
        tables = {k: v for k, v in spec.items() if isinstance(v, Mapping)}
        lines.append(f"[suites.{name}]")
        lines += [f"{k} = {_toml(v)}" for k, v in spec.items() if k not in tables]
        for table, body in tables.items():
            lines.append(f"[suites.{name}.{table}]")
            lines += [f"{k} = {_toml(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"
