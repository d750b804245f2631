"""Which acceptance a metric is judged under: plain rules, no I/O and no numpy.

An acceptance (``gates.record.accept``) names metrics by key glob, suite and test
glob (`applies_to`); a judged run's key under one is judged only against the runs
inside it (`Cut`: the acceptance and the baseline runs it drops). The gate reads
them with its inputs (``gates.store.gate_inputs``); ``gate-report accept`` and the
report's hints use the same rule. Kept apart so a command that only names the
accept file never loads the statistics (``tests/test_startup.py``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Cut", "applies_to"]


@dataclass(frozen=True)
class Cut:
    """The acceptance a key of a run is judged under, and the baseline runs it drops."""

    acceptance: Mapping[str, Any]
    drop: frozenset[str] = field(default_factory=frozenset)

    def message(self, kept: int, need: int) -> str:
        a = self.acceptance
        where = (f"from {str(a['from_commit'])[:10]}" if a.get("from_commit")
                 else f"by {a.get('source') or 'gates-accept.toml'}")
        who = f" ({a['who']})" if a.get("who") else ""
        return (f"accepted {where}{who}: {a['reason']}; insufficient history after "
                f"acceptance: {kept} run(s) since, {need} needed")



def applies_to(acc: Mapping[str, Any], key: str, suite: str, nodeid: str | None) -> bool:
    """Whether an acceptance names this metric (key glob, suite, test glob)."""
    if not fnmatch.fnmatchcase(key, acc["pattern"]):
        return False
    if acc.get("suite") and acc["suite"] != suite:
        return False
    test = acc.get("test")
    if test:
        if not nodeid:
            return False
        path = nodeid.split("::", 1)[0]
        return fnmatch.fnmatchcase(nodeid, test) or fnmatch.fnmatchcase(path, test)
    return True
