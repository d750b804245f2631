"""Property tests with generated hostile input: the collector, the catalog, metric
validation, merge and the text renderers never crash, never take a bad row, and never
print a workflow command."""

from __future__ import annotations

import contextlib
import io
import math
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_history import hostile_input, make_history, write_run

from ci_register.registered.catalog import CatalogError, parse_catalog
from ci_register.registered.collect import parse_file
from gates.commands.cli import main as gate_report
from gates.report.build import build_report
from gates.report.render_md import render_md
from gates.report.render_text import render_text
from gates.store.history import HistoryError
from gates.store.merge import merge_histories
from gates.store.metrics import (
    MAX_MAGNITUDE,
    MIN_MAGNITUDE,
    UNIT_PATTERN,
    MetricError,
    validate_metric,
)
from gates.store.open import open_history

FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CAT = parse_catalog('[suites.cpu]\nbackend = "cpu"\ndescription = "c"\nschedule = "per-commit"\n'
                    "shard_budget_s = 600\n", Path("suites/catalog.toml"))

# ------------------------------------------------------------------ collector

literals = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=20) | st.sampled_from(["1e999", "-1e999", "10**400", "1" * 500]),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner), max_leaves=6)


def _src(value: object) -> str:
    return value if isinstance(value, str) and value[:1] in "1-" and value.replace(
        "e", "").replace("*", "").lstrip("-").isdigit() else repr(value)


@st.composite
def python_files(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 4))):
        kwargs = draw(st.dictionaries(
            st.sampled_from(["est_time", "suite", "nightly", "disabled", "stage", "labels",
                             "runner_config", "bogus"]), literals, max_size=4))
        call = "register_cpu_ci(" + ", ".join(f"{k}={_src(v)}" for k, v in kwargs.items()) + ")"
        where = draw(st.sampled_from(["{}", "def f():\n    {}", "if True:\n    {}",
                                      "class T:\n    {}", "x = {}", "{} ; {}"]))
        lines.append(where.format(call, call))
    if draw(st.booleans()):
        lines.append("register_ci_gate(metric_key=" + _src(draw(literals)) + ")")
    if draw(st.booleans()):
        lines.append("def test_a():\n    pass")
    lines.append(draw(st.sampled_from(["", "(((", "\ufeff", "x = '\\x00'", "\x00", "é = 1",
                                       "async def test_b(): pass", "lambda: register_cpu_ci"])))
    return "\n".join(lines) + "\n"


@FAST
@given(python_files())
def test_the_collector_never_crashes_and_speaks_in_one_line(source):
    regs, _, issues = parse_file(source, "suites/test_x.py", CAT)
    for issue in issues:
        text = str(issue)
        assert text.startswith("suites/test_x.py:") and "\n" not in text and issue.line >= 1
    for r in regs:
        assert r.suite == "cpu" and 0 < r.est_time <= 7 * 86400 and math.isfinite(r.est_time)


@FAST
@given(st.binary(max_size=300))
def test_the_collector_takes_any_bytes(data):
    text = data.decode("utf-8", errors="replace")
    parse_file("register_cpu_ci(est_time=1, suite='cpu')\n" + text, "suites/t.py", CAT)


# -------------------------------------------------------------------- catalog

toml_values = st.sampled_from(['"cpu"', '"cuda"', "inf", "nan", "-1", "0", "1e400", "[]",
                               '["a", 1]', "true", '"x\\ny"', "{a = 1}", "600", '"9.0"',
                               '"10.x"', '"99"'])
toml_keys = st.sampled_from(["backend", "description", "schedule", "shard_budget_s", "shards",
                             "runner_labels", "install", "pytest_args", "typo"])


@FAST
@given(st.lists(st.tuples(toml_keys, toml_values), max_size=8),
       st.sampled_from(["cpu", "tests", "A", "x y", "lint", "a.b"]),
       st.lists(st.tuples(st.sampled_from(["gpu_count", "gpu_models", "min_capability",
                                           "max_capability", "gpus"]), toml_values),
                max_size=3))
def test_the_catalog_fails_only_with_catalog_errors(fields, name, hardware):
    body = "\n".join(f"{k} = {v}" for k, v in dict(fields).items())
    hw = "\n".join(f"{k} = {v}" for k, v in dict(hardware).items())
    text = f'[suites."{name}"]\n{body}\n' + (f'[suites."{name}".hardware]\n{hw}\n' if hw else "")
    try:
        cat = parse_catalog(text, Path("c.toml"))
    except CatalogError as exc:
        assert "\n" not in str(exc)
        return
    for suite in cat.suites.values():
        assert 0 < suite.shard_budget_s <= 7 * 86400


# -------------------------------------------------------------------- metrics

anything = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5),
    st.lists(st.floats(), max_size=5), st.lists(st.integers(), max_size=5),
    st.lists(st.one_of(st.floats(), st.text(max_size=2), st.none()), max_size=4))
units = st.one_of(st.text(max_size=40), st.sampled_from(["s", "ms", "tok/s", "%", "ratio",
                                                         "s\n::error::x", "::", " s"]))


@FAST
@given(st.text(max_size=30), anything, units, st.sampled_from(["higher", "lower", "up", None]),
       st.one_of(st.none(), st.integers(-2, 5000), st.floats()))
def test_validate_metric_takes_only_what_the_gate_can_judge(key, values, unit, better, n):
    try:
        m = validate_metric(key, values, unit=unit, better=better, n=n)
    except MetricError:
        return
    assert UNIT_PATTERN.fullmatch(m.unit) and "\n" not in m.key and m.samples
    for v in m.samples:
        assert math.isfinite(v) and (v == 0 or MIN_MAGNITUDE <= abs(v) <= MAX_MAGNITUDE)
    assert math.isfinite(m.median)


# ---------------------------------------------------------------------- merge

HOSTILE_VALUES = [None, "", "x", "s\n::error::x", -1, 0, 10**18, 1e308, -1e-320, 3.5,
                  "2999-01-01T00:00:00+00:00", "nan", b"\x00\xff", 2**63 - 1]
COLUMNS = {
    "runs": ["suite", "status", "started_at", "finished_at", "trusted", "shard_index",
             "fingerprint", "exit_status", "hardware", "commit_sha"],
    "test_rows": ["outcome", "duration", "nodeid_id", "attempt", "error", "path_id",
                  "run_num"],
    "metric_rows": ["key_id", "unit", "better", "median", "count", "n", "min_value",
                    "attempt", "samples", "nodeid_id", "run_num"],
    "texts": ["text"],
    "plan_file_rows": ["expected", "est_time", "path_id", "marker_id", "run_num"],
    "verdict_rows": ["verdict_id", "p_value", "baseline", "key_id", "mode_id", "detail_id",
                     "stage_id"],
}


@pytest.fixture(scope="module")
def merge_base(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzmerge")
    target = root / "target.db"
    make_history(target, runs=6)
    shard = root / "shard.db"
    with open_history(shard) as h:
        rid = write_run(h, 20, latency=1.0, run_id="z" * 32)
        h.run_writes.save_verdicts(rid, [{"key": "decode/b32/latency", "verdict": "pass", "p_value": 0.5,
                               "mode": "enforce"}])
    return target, shard


# Every (table, column) with every hostile value: 41 columns x 14 values, about 10 s of
# CPU. Hypothesis drew 40 of these 574 cases at random, so a bug in one case failed
# about one run in 14 and passed on rerun (a failure seen once in session 16 could not
# be reproduced by 25 seeds, 12 concurrent runs or this enumeration at five commits of
# that session); the space is small enough to walk whole, every time.
MERGE_CASES = [(table, column) for table in sorted(COLUMNS) for column in COLUMNS[table]]


@pytest.mark.parametrize(("table", "column"), MERGE_CASES,
                         ids=[f"{t}.{c}" for t, c in MERGE_CASES])
def test_merge_takes_a_mutated_shard_whole_and_sound_or_refuses_it(merge_base, tmp_path,
                                                                   table, column):
    target_src, shard_src = merge_base
    for value in HOSTILE_VALUES:
        case = Path(tempfile.mkdtemp(dir=tmp_path))
        target, shard = case / "t.db", case / "s.db"
        shutil.copy(target_src, target)
        shutil.copy(shard_src, shard)
        conn = sqlite3.connect(shard)
        try:
            row = "(run_num, path_id)" if table == "plan_file_rows" else "rowid"  # WITHOUT ROWID
            with conn:
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE {row} IN "
                             f"(SELECT {row.strip('()')} FROM {table} LIMIT 1)", (value,))
        except sqlite3.IntegrityError:
            continue  # the schema itself refuses it
        finally:
            conn.close()
        before = target.read_bytes()
        try:
            merge_histories([shard], target)
        except HistoryError as exc:
            assert "\n" not in str(exc), value
            assert target.read_bytes() == before, value
            continue
        # Accepted: every report and gate input still reads it.
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            codes = (gate_report(["--history", str(target), "--no-health", "--format", "json"]),
                     gate_report(["--history", str(target), "--since", "2000-01-01"]))
        assert set(codes) <= {0, 1}, (value, codes, err.getvalue()[-300:])


# ------------------------------------------------------------------ renderers

@FAST
@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=12))
def test_no_rendered_line_is_a_workflow_command(name, unit):
    data = hostile_input()
    data.metrics[0]["unit"] = unit
    data.metrics[0]["nodeid"] = name
    data.verdicts[0]["nodeid"] = name
    data.runs[0]["fingerprint"] = "::" + name
    data.runs[0]["branch"] = "\n::error::" + name
    for text in (render_text(build_report(data)), render_md(build_report(data))):
        for line in text.splitlines():
            assert not line.lstrip().startswith("::"), line
