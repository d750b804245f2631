"""One key, one unit: the gate never pools a baseline recorded in another unit.

The recorder refuses a second unit for a key within a run and against the newest
run in the history (``gates.record.plugin``), and merge refuses a shard in another unit
(``gates.store.merge``). A history written before those checks, or by hand, can still hold
a key in ``s`` in some runs and in ``ms`` in others, and the gate would pool 0.5 "s"
with 500 "ms". So the gate checks the runs it judges against: where the units of a
key disagree (this run's rows, or its baseline runs among themselves) the key's
verdict is ``error`` with a message naming both units and a run of each (exit 2 when
enforced).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from gates.store.gate_inputs import unit_facts

if TYPE_CHECKING:
    from gates.store.history import History

__all__ = ["UnitMismatch", "conflicts", "unit_conflicts"]


class UnitMismatch(ValueError):
    """A key whose run and baseline (or baseline runs) are in different units."""


def unit_conflicts(history: History, suite: str, run_units: Mapping[str, Iterable[str]],
                   base_ids: Mapping[str, Sequence[str]],
                   seen: Mapping[str, set[str] | None] | None = None) -> dict[str, str]:
    """{key: why} for each key of ``run_units`` (key -> the units this run recorded it in)
    whose units disagree with each other or across its baseline runs ``base_ids[key]``.

    ``seen``: each key's units over its baseline runs as the baseline read found them
    (``baselines.bulk_baselines(units_out=...)``; None: not all read). Without it, one
    grouped read over every baseline run at once. A key that shows another unit there
    (or was not read whole) is read again over its own runs only: the message's counts
    (``gates.store.gate_inputs.unit_facts``).
    """
    wide = (seen if seen is not None else
            history.baseline_reads.units_of_keys([r for ids in base_ids.values() for r in ids],
                                                 suite, list(run_units)))
    return conflicts(run_units, wide, unit_facts(history.baseline_reads, suite, run_units,
                                                 base_ids, wide))


def conflicts(run_units: Mapping[str, Iterable[str]],
              seen: Mapping[str, Iterable[str] | None],
              counts: Mapping[str, Mapping[str, tuple[int, str]]]) -> dict[str, str]:
    """{key: why} from what was read: ``seen`` (key -> its baseline's units, None: not all
    read) and ``counts`` (key -> unit -> (baseline runs in it, the newest), for the keys
    whose units may disagree)."""
    out: dict[str, str] = {}
    for key, units in run_units.items():
        mine = set(units)
        known = seen.get(key, set())
        if len(mine) == 1 and known is not None and set(known) <= mine:
            continue
        base = counts.get(key, {})
        if len(mine | set(base)) > 1:
            out[key] = _why(key, mine, base)
    return out


def _why(key: str, mine: set[str], base: Mapping[str, tuple[int, str]]) -> str:
    parts = [f"this run in {', '.join(repr(u) for u in sorted(mine))}"]
    parts += [f"{n} baseline run(s) in {unit!r} (newest {run_id[:12]})"
              for unit, (n, run_id) in sorted(base.items())]
    return (f"metric {key!r}: units disagree ({'; '.join(parts)}), so its values are not "
            "pooled; one key has one unit: record the new unit under a new key, or mark "
            "the runs in the other unit untrusted (gate-report untrust)")
