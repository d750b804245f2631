"""gates.record.declarations: merging recorded gates with register_ci_gate options."""

from __future__ import annotations

import pytest

from gates.record.declarations import (
    DeclarationError,
    effective_mode,
    gate_for,
    parse_plan_gates,
    validate_options,
)

REC = {"better": "lower", "unit": "ms", "n": None, "min_value": None, "max_value": 2.0}


def decl(key="lat", line=5, **options):
    return {"path": "suites/a/test_a.py", "line": line, "metric_key": key, "options": options}


def test_recorded_attributes_are_the_default_gate():
    g = gate_for("lat", REC, None)
    assert (g.better, g.unit, g.max_value, g.mode, g.declared) == ("lower", "ms", 2.0, "enforce",
                                                                   False)


def test_declaration_refines_the_recorded_gate():
    d = parse_plan_gates([decl(better="higher", min_change=0.05, max_value=3.0, level=0.01,
                               mode="warn")])
    g = gate_for("lat", REC, d["lat"])
    assert g.better == "higher" and g.min_change == 0.05 and g.max_value == 3.0
    assert g.level == 0.01 and g.mode == "warn" and g.declared_at == "suites/a/test_a.py:5"


def test_declared_but_not_recorded_keeps_options():
    d = parse_plan_gates([decl(key="acc", better="higher", min_value=0.85)])
    g = gate_for("acc", None, d["acc"])
    assert g.better == "higher" and g.min_value == 0.85 and g.unit is None


def test_session_mode_caps_the_gate():
    assert effective_mode("enforce", "warn") == "warn"
    assert effective_mode("warn", "enforce") == "warn"
    assert effective_mode("enforce", "off") == "off"
    assert gate_for("lat", REC, None, "warn").mode == "warn"
    with pytest.raises(DeclarationError, match="--mode"):
        gate_for("lat", REC, None, "loud")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"better": "up"}, "better='up'; use 'higher' or 'lower'"),
        ({"mode": "strict"}, "mode='strict'; use one of enforce, warn, off"),
        ({"min_change": -0.1}, "min_change=-0.1 is relative"),
        ({"level": 0.9}, "level=0.9; use a value in (0, 0.5]"),
        ({"level": True}, "level=True must be a finite number"),
        ({"max_value": float("nan")}, "must be a finite number"),
        ({"min_value": 2, "max_value": 1}, "min_value=2.0 > max_value=1.0; swap them"),
        ({"tolerance": 3}, "unknown option 'tolerance'; known: better, min_change"),
    ],
)
def test_bad_options_are_one_line_errors_naming_the_place(options, message):
    with pytest.raises(DeclarationError) as e:
        validate_options(options, "suites/a/test_a.py:5", "lat")
    text = str(e.value)
    assert message in text and "\n" not in text
    assert text.startswith("suites/a/test_a.py:5: register_ci_gate(metric_key='lat')")


def test_duplicate_declarations_must_agree():
    d = parse_plan_gates([decl(min_change=0.05), decl(line=9, mode="warn")])
    assert d["lat"].min_change == 0.05 and d["lat"].mode == "warn"
    with pytest.raises(DeclarationError, match="sets min_change=0.1 but suites/a/test_a.py:5"):
        parse_plan_gates([decl(min_change=0.05), decl(line=9, min_change=0.1)])


def test_plan_entries_need_a_key():
    with pytest.raises(DeclarationError, match="needs metric_key"):
        parse_plan_gates([{"path": "x.py", "line": 1, "options": {}}])
    assert parse_plan_gates(None) == {}


def test_recorded_bounds_conflicting_with_declared_ones():
    d = parse_plan_gates([decl(min_value=5.0)])
    with pytest.raises(DeclarationError, match="min_value=5.0 > max_value=2.0"):
        gate_for("lat", REC, d["lat"])
