"""Metric validation: the pure rules behind `metrics.record(...)`.

No I/O here. The pytest plugin calls `validate_metric` for every `record` call and
keeps a `MetricBook` per test; the history store persists what the book holds.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "BETTER",
    "KEY_PATTERN",
    "MAX_KEY_LENGTH",
    "MAX_SAMPLES",
    "MAX_UNIT_LENGTH",
    "Metric",
    "MetricBook",
    "MetricError",
    "UNIT_PATTERN",
    "check_key",
    "check_unit",
    "median",
    "validate_metric",
]

# Letters, digits and `_ . : / = + -`; first character alphanumeric so keys sort
# and read well in reports and cannot start with a flag-like `-`.
KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/=+-]{0,199}$")
MAX_KEY_LENGTH = 200
MAX_UNIT_LENGTH = 32
# Units read like keys (s, ms, tok/s, GB/s, %, ratio, 1/s): no spaces, quotes, control
# characters or "::", so no unit printed in a report can be a workflow command or markup.
UNIT_PATTERN = re.compile(r"^[A-Za-z0-9%][A-Za-z0-9_./%^*+-]{0,31}$")
# A guard against a test recording a whole trace by mistake; gates need tens of
# samples, not millions.
MAX_SAMPLES = 100_000
# Non-zero values outside: an error (their squares, the statistics' variances, would
# overflow or underflow a float64).
MIN_MAGNITUDE, MAX_MAGNITUDE = 1e-100, 1e100
BETTER = ("higher", "lower")


class MetricError(ValueError):
    """Bad input to `metrics.record`: the test fails with this message, nothing is stored."""


@dataclass(frozen=True)
class Metric:
    """One validated metric of one test: key, samples and how to judge them."""

    key: str
    samples: tuple[float, ...]
    unit: str
    better: str
    n: int | None = None
    min_value: float | None = None
    max_value: float | None = None

    @property
    def count(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return median(self.samples)

    def extended(self, more: tuple[float, ...]) -> Metric:
        """The same metric with `more` samples appended."""
        if len(self.samples) + len(more) > MAX_SAMPLES:
            raise MetricError(
                f"metric {self.key!r}: more than {MAX_SAMPLES} samples in one test; "
                "record a summary or fewer repetitions"
            )
        return Metric(
            self.key, self.samples + more, self.unit, self.better,
            self.n, self.min_value, self.max_value,
        )


def median(values: Iterable[float]) -> float:
    """Median of a non-empty collection (mean of the middle two for even counts)."""
    ordered = sorted(values)
    if not ordered:
        raise MetricError("median of no samples")
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def _real(value: object, what: str) -> float:
    # bool is an int subclass; True as a sample is always a bug in the test.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise MetricError(f"{what} must be a real number, got {type(value).__name__} {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise MetricError(f"{what} must be finite, got {number!r}")
    if number and not MIN_MAGNITUDE <= abs(number) <= MAX_MAGNITUDE:
        raise MetricError(f"{what} is {number!r}, beyond the magnitudes {MIN_MAGNITUDE:g} to "
                          f"{MAX_MAGNITUDE:g} the gate's statistics hold; record it in another unit")
    return number


def _samples(key: str, values: object) -> tuple[float, ...]:
    if isinstance(values, (str, bytes, Mapping)):
        raise MetricError(
            f"metric {key!r}: values must be a number or a sequence of numbers, "
            f"got {type(values).__name__}"
        )
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        return (_real(values, f"metric {key!r}: value"),)
    # numpy scalars/arrays and torch tensors of one element expose .item()/tolist();
    # accept them without importing either library.
    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):
        values = values.tolist()  # type: ignore[union-attr]
        if isinstance(values, numbers.Real) and not isinstance(values, bool):
            return (_real(values, f"metric {key!r}: value"),)
    if not isinstance(values, Iterable):
        raise MetricError(
            f"metric {key!r}: values must be a number or a sequence of numbers, "
            f"got {type(values).__name__} {values!r}"
        )
    out: list[float] = []
    for i, value in enumerate(values):
        if i >= MAX_SAMPLES:
            raise MetricError(f"metric {key!r}: more than {MAX_SAMPLES} samples")
        out.append(_real(value, f"metric {key!r}: sample {i}"))
    if not out:
        raise MetricError(f"metric {key!r}: empty sample list; record at least one value")
    return tuple(out)


def check_key(key: object) -> None:
    """Raise `MetricError` unless `key` is a valid metric key (record and merge share it)."""
    if not isinstance(key, str):
        raise MetricError(f"metric key must be a string, got {type(key).__name__} {key!r}")
    if len(key) > MAX_KEY_LENGTH:
        raise MetricError(
            f"metric key {key[:40]!r}... is {len(key)} characters; at most {MAX_KEY_LENGTH}"
        )
    if not KEY_PATTERN.fullmatch(key):
        raise MetricError(
            f"metric key {key!r} is invalid: use letters, digits and _ . : / = + - "
            "starting with a letter or digit"
        )


def check_unit(unit: object, key: str = "?") -> None:
    """Raise `MetricError` unless `unit` is a valid unit (record and merge share it)."""
    if not isinstance(unit, str) or not UNIT_PATTERN.fullmatch(unit):
        raise MetricError(
            f"metric {key!r}: unit must be 1 to {MAX_UNIT_LENGTH} letters, digits or "
            f"_ . / % ^ * + - (e.g. 's', 'tok/s', 'ratio', '%'), got {unit!r}"
        )


def validate_metric(
    key: object,
    values: object,
    *,
    unit: object,
    better: object,
    n: object = None,
    min_value: object = None,
    max_value: object = None,
) -> Metric:
    """Check one `record` call and return the `Metric` it describes.

    Raises `MetricError` with a one-line message on the first problem found.
    """
    check_key(key)
    assert isinstance(key, str)
    samples = _samples(key, values)
    check_unit(unit, key)
    if better not in BETTER:
        raise MetricError(f"metric {key!r}: better must be 'higher' or 'lower', got {better!r}")
    trials: int | None = None
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 1:
            raise MetricError(f"metric {key!r}: n must be a positive integer, got {n!r}")
        trials = int(n)
        outside = [s for s in samples if not 0.0 <= s <= 1.0]
        if outside:
            raise MetricError(
                f"metric {key!r}: n is the trial count of a proportion, so values must lie "
                f"in [0, 1]; got {outside[0]!r}"
            )
    low = None if min_value is None else _real(min_value, f"metric {key!r}: min_value")
    high = None if max_value is None else _real(max_value, f"metric {key!r}: max_value")
    if low is not None and high is not None and low > high:
        raise MetricError(f"metric {key!r}: min_value {low!r} is above max_value {high!r}")
    return Metric(key, samples, unit, str(better), trials, low, high)


@dataclass
class MetricBook:
    """The metrics one test recorded, in recording order.

    Recording a key again with the same unit, direction, n and bounds appends the
    samples; anything else differing is a `MetricError` and the book is unchanged.
    """

    metrics: dict[str, Metric] = field(default_factory=dict)

    def add(self, metric: Metric) -> Metric:
        old = self.metrics.get(metric.key)
        if old is None:
            self.metrics[metric.key] = metric
            return metric
        for attr in ("unit", "better", "n", "min_value", "max_value"):
            before, now = getattr(old, attr), getattr(metric, attr)
            if before != now:
                raise MetricError(
                    f"metric {metric.key!r} recorded twice in one test with different "
                    f"{attr}: {before!r} then {now!r}; use one {attr} per key"
                )
        merged = old.extended(metric.samples)
        self.metrics[metric.key] = merged
        return merged

    def __len__(self) -> int:
        return len(self.metrics)

    def __iter__(self):
        return iter(self.metrics.values())
