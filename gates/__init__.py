"""What is good enough: metric history, the pytest plugin that fills it, and the gates.

Import-light on purpose: this package is imported by the pytest plugin in every
test session, so only the pure metric rules load eagerly. The history store
(sqlite-utils, which pulls numpy) and provenance load on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gates.metrics import Metric, MetricError

if TYPE_CHECKING:
    from gates.history import (
        History,
        HistoryError,
        RunRecord,
        TestResult,
        open_history,
    )
    from gates.merge import MergeConflict, MergeReport, merge_histories
    from gates.provenance import Provenance, collect_provenance, fingerprint_key

__all__ = [
    "History",
    "HistoryError",
    "MergeConflict",
    "MergeReport",
    "Metric",
    "MetricError",
    "Provenance",
    "RunRecord",
    "TestResult",
    "collect_provenance",
    "fingerprint_key",
    "merge_histories",
    "open_history",
]

_LAZY = {
    "History": "gates.history",
    "HistoryError": "gates.history",
    "MergeConflict": "gates.merge",
    "MergeReport": "gates.merge",
    "RunRecord": "gates.history",
    "TestResult": "gates.history",
    "merge_histories": "gates.merge",
    "open_history": "gates.history",
    "Provenance": "gates.provenance",
    "collect_provenance": "gates.provenance",
    "fingerprint_key": "gates.provenance",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gates' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
