"""gates.store.metrics: the validation rules behind metrics.record."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from gates.store.metrics import (
    MAX_KEY_LENGTH,
    Metric,
    MetricBook,
    MetricError,
    median,
    validate_metric,
)


def ok(key="decode/b32:l8k=x+y_z.v-1", values=(1.0, 2.0), **kw):
    kw.setdefault("unit", "s")
    kw.setdefault("better", "lower")
    return validate_metric(key, values, **kw)


def test_valid_metric_keeps_samples_in_order():
    m = ok(values=[3, 1.5, Fraction(1, 2)])
    assert m.samples == (3.0, 1.5, 0.5)
    assert m.count == 3 and m.median == 1.5
    assert isinstance(m, Metric) and m.better == "lower" and m.unit == "s"


def test_single_number_is_one_sample():
    assert ok(values=7).samples == (7.0,)


def test_metric_error_is_value_error():
    assert issubclass(MetricError, ValueError)


@pytest.mark.parametrize("values", [
    float("nan"), float("inf"), -math.inf, [1.0, float("nan")], [1, "2"], "1.5", None,
    True, [1, False], [], (), {"a": 1}, object(), [complex(1, 2)],
])
def test_bad_values_rejected(values):
    with pytest.raises(MetricError, match="decode"):
        ok(values=values)


@pytest.mark.parametrize("key", [
    "", "-lead", "/lead", "has space", "tab\t", "quote'", "semi;colon", "é", "a" * 201, 12,
])
def test_bad_keys_rejected(key):
    with pytest.raises(MetricError, match="key"):
        ok(key=key)


def test_key_length_limit_is_inclusive():
    assert ok(key="a" * MAX_KEY_LENGTH).key == "a" * MAX_KEY_LENGTH


def test_values_beyond_what_the_statistics_hold_are_rejected():
    for bad in (1e200, -1e101, 1e-101):
        with pytest.raises(MetricError, match="another unit"):
            validate_metric("k", [1.0, bad], unit="s", better="lower")
    for good in (0.0, 1e-99, -1e99):
        assert validate_metric("k", [good], unit="s", better="lower").samples == (good,)


@pytest.mark.parametrize("kw,match", [
    ({"better": "up"}, "better"),
    ({"better": None}, "better"),
    ({"unit": ""}, "unit"),
    ({"unit": "x" * 33}, "unit"),
    ({"unit": 3}, "unit"),
    ({"n": 0}, "n must"),
    ({"n": 2.5}, "n must"),
    ({"n": True}, "n must"),
    ({"min_value": float("nan")}, "min_value"),
    ({"max_value": "1"}, "max_value"),
    ({"min_value": 2, "max_value": 1}, "above"),
])
def test_bad_options_rejected(kw, match):
    with pytest.raises(MetricError, match=match):
        ok(**kw)


def test_n_requires_proportions():
    assert ok(values=[0.9, 0.88], n=1319, better="higher", unit="ratio").n == 1319
    with pytest.raises(MetricError, match=r"\[0, 1\]"):
        ok(values=[88.0], n=1319)


def test_array_like_values_accepted_without_numpy_import():
    class Arr:
        def tolist(self):
            return [1.0, 2.0]

    class Scalar:
        def tolist(self):
            return 4.0

    assert ok(values=Arr()).samples == (1.0, 2.0)
    assert ok(values=Scalar()).samples == (4.0,)


def test_book_appends_same_key():
    book = MetricBook()
    book.add(ok(values=[1]))
    merged = book.add(ok(values=[2, 3]))
    assert merged.samples == (1.0, 2.0, 3.0)
    assert len(book) == 1


@pytest.mark.parametrize("change", [{"unit": "ms"}, {"better": "higher"}, {"max_value": 9.0}])
def test_book_rejects_conflicting_redefinition_and_keeps_state(change):
    book = MetricBook()
    book.add(ok(values=[1]))
    with pytest.raises(MetricError, match="twice"):
        book.add(ok(values=[2], **change))
    assert [m.samples for m in book] == [(1.0,)]


def test_median():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(MetricError):
        median([])
