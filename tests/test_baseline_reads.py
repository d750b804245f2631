"""The gate's baseline read, on SQLite and PostgreSQL: a judged run's baselines come in
one statement whatever the number of metrics and runs (two where a key is recorded in
some runs only), the same series the per-metric reference reads."""

from __future__ import annotations

import numpy as np
import pytest
from test_gate import NODE, add_run

from gates.gate import evaluate_run
from gates.model import stats
from gates.store import baseline_reads, baselines
from gates.store.open import open_history

KEYS = [f"k{i:02d}" for i in range(40)]
NEED = stats.DEFAULTS.window + max(stats.DEFAULTS.windows)


@pytest.fixture
def h(store_location):
    with open_history(store_location) as history:
        yield history


def _metrics(rng, keys):
    return {k: (1.0 + 0.01 * rng.standard_normal(3), {"unit": "ms", "better": "lower"})
            for k in keys}


def _fill(h, n=70):
    """``n`` runs of every key in KEYS; "odd" in every other run only, "new" in the last
    five; run 60 is a confirm rerun (never a baseline run)."""
    rng = np.random.default_rng(5)
    for i in range(n):
        extra = (["odd"] if i % 2 else []) + (["new"] if i >= n - 5 else [])
        add_run(h, i, _metrics(rng, KEYS + extra), confirm_of="run059" if i == 60 else None)
    return rng


def _statements(h) -> list[str]:
    """Every statement ``h`` sends from now on (SQLite's trace; the PostgreSQL adapter)."""
    sent: list[str] = []
    if h.dialect == "sqlite":
        h.conn.set_trace_callback(sent.append)
    else:
        execute, executemany = h.conn.execute, h.conn.executemany
        h.conn.execute = lambda sql, params=(): (sent.append(sql), execute(sql, params))[1]
        h.conn.executemany = lambda sql, rows: (sent.append(sql), executemany(sql, rows))[1]
    return sent


def _bulk(h, run, keys):
    rid = run["run_id"]
    ids: dict[str, list[str]] = {}
    hosts: dict[str, str | None] = {}
    seen: dict[str, set[str] | None] = {}
    out = baselines.bulk_baselines(h.baseline_reads, run, set(keys), {rid}, NEED, ids_out=ids,
                                   hosts_out=hosts, units_out=seen)
    return out, ids, hosts, seen


@pytest.fixture(params=["by key", "every row"])
def filtered(request, monkeypatch):
    """Both ways the read selects the keys' rows: in SQL (a few keys), or all rows of the
    runs with other keys dropped after (a whole run's keys)."""
    if request.param == "every row":
        monkeypatch.setattr(baseline_reads, "_FEW_KEYS", 0)


def test_every_key_in_every_run_is_one_statement(h, filtered):
    rng = _fill(h)
    rid = add_run(h, 100, _metrics(rng, KEYS))
    run = h.report_reads.run(rid)
    sent = _statements(h)
    out, ids, hosts, seen = _bulk(h, run, KEYS)
    assert len(sent) == 1, sent
    assert all(len(ids[k]) == NEED and "run060" not in ids[k] for k in KEYS)
    assert set(hosts) == set(ids["k00"]) and seen == {k: {"ms"} for k in KEYS}
    run = h.report_reads.run(rid)
    for key in ("k00", "k39"):
        ref = baselines.baseline_runs(h.baseline_reads, "s", key, run["fingerprint"], run, {rid})
        assert [r["run_id"] for r in ref][-NEED:] == ids[key]
        probe = np.array([1.0, 1.01, 0.99])
        want = stats.summarize([r["samples"] for r in ref], probe)
        got = stats.summarize(out[key], probe)
        assert np.array_equal(got[0], want[0]) and got[1:] == want[1:]


def test_keys_recorded_in_some_runs_only_take_a_second_statement(h, filtered):
    rng = _fill(h)
    rid = add_run(h, 100, _metrics(rng, [*KEYS, "odd", "new"]))
    run = h.report_reads.run(rid)
    sent = _statements(h)
    _, ids, _, seen = _bulk(h, run, [*KEYS, "odd", "new"])
    assert len(sent) == 2, sent
    for key in ("odd", "new"):
        ref = baselines.baseline_runs(h.baseline_reads, "s", key, run["fingerprint"], run, {rid})
        assert ids[key] == [r["run_id"] for r in ref][-NEED:] and seen[key] == {"ms"}
    assert len(ids["odd"]) == 35 and len(ids["new"]) == 5  # all they have: fewer than NEED


def test_a_judged_run_issues_as_many_statements_for_40_metrics_as_for_4(h):
    # The whole gate of a run: its own rows, plan, acceptances, the baseline read, the
    # verdicts saved, the failed chains' read (one statement where none failed); none of
    # it grows with the metrics (no metric trips here).
    rng = _fill(h)
    counts = []
    for i, keys in ((100, KEYS), (101, KEYS[:4])):
        rid = add_run(h, i, _metrics(rng, keys))
        sent = _statements(h)
        res = evaluate_run(h, rid)
        assert {v.verdict for v in res.verdicts} == {"pass"}
        if h.dialect == "sqlite":
            h.conn.set_trace_callback(None)
            sent = [s for s in sent if not s.startswith("INSERT")]  # a trace line per row
        counts.append(len(sent))
        assert res.verdicts[0].nodeid == NODE
    assert counts[0] == counts[1] <= 17, counts
