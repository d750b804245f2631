"""Support library of the registered suites: quantisation oracles, timing, references.

Modules are imported by the test files under ``suites/``; nothing here touches a GPU or
the network at import time, so every suite collects on a CPU-only machine.
"""

from __future__ import annotations

__all__ = ["quant"]
