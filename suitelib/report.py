"""Per-test notes that are not gate metrics (JIT first-call times, resolved backends).

``record_property`` warns under the junit_family xunit2 that the suite runner writes;
appending to ``user_properties`` stores the same pair without the warning, for junit
and for any plugin that reads it.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["note"]


def note(request: pytest.FixtureRequest, key: str, value: Any) -> None:
    request.node.user_properties.append((key, value))
