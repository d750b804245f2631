"""What is good enough: metric history, the pytest plugin that fills it, and the gates.

Import-light on purpose: this package is imported by the pytest plugin in every
test session, so only the pure metric rules load eagerly. The history store
(sqlite-utils, which pulls numpy) and provenance load on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gates.store.metrics import Metric, MetricError

if TYPE_CHECKING:
    from gates.store.history import History, HistoryError, RunRecord, TestResult
    from gates.store.merge import MergeConflict, MergeReport, merge_histories
    from gates.store.open import open_history
    from gates.store.provenance import Provenance, collect_provenance, fingerprint_key

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
    "History": "gates.store.history",
    "HistoryError": "gates.store.history",
    "MergeConflict": "gates.store.merge",
    "MergeReport": "gates.store.merge",
    "RunRecord": "gates.store.history",
    "TestResult": "gates.store.history",
    "merge_histories": "gates.store.merge",
    "open_history": "gates.store.open",
    "Provenance": "gates.store.provenance",
    "collect_provenance": "gates.store.provenance",
    "fingerprint_key": "gates.store.provenance",
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
