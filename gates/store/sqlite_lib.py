"""sqlite-utils, imported without pandas.

sqlite-utils imports pandas at import time when it is installed, to accept DataFrames
and pandas' timestamps in its inserts; the history never hands it either, yet every
command that opens a history paid for loading pandas. The GPU image has pandas, and a
one-run `gate-report` took 1.18 s wall there (benchmarks/results/bench_startup.md; how
much of it pandas was is not measured). pandas stays importable for everyone else: it
is kept out only while sqlite-utils loads.
"""

from __future__ import annotations

import sys

_KEPT_OUT = ("pandas",)


def _load() -> None:
    kept = [m for m in _KEPT_OUT if m not in sys.modules]
    for name in kept:
        sys.modules[name] = None  # type: ignore[assignment]  # `import pandas` raises ImportError
    try:
        import sqlite_utils.db  # noqa: F401, PLC0415 - its pandas probe runs now, once
    finally:
        for name in kept:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


_load()

from sqlite_utils import Database, Migrations  # noqa: E402

__all__ = ["Database", "Migrations"]
