"""A 3% regression planted into the committed history on each of its machines: does the gate
still fail? Read-only on the history (every plant is judged on a temporary copy).

    python benchmarks/plant_history.py [history.db] [--change 0.03] [--out FILE.md]

The companion of ``rejudge_history.py``, which shows what machine changes alone do
(non-pass first attempts on unchanged kernels). Here, for each machine the history
names (its GPUs' uuids; runs without identity have no machine to plant on) and each
of two places a change can land:

- ``first``: on the machine's first run and every later run of it (a change that
  lands as the fleet moves to a machine it has not seen: only the new-machine
  allowance stands between it and the fleet's spread);
- ``later``: on the machine's second run on (a change that lands on a machine the
  history already knows: its own level is the reference);

every metric of those runs is made ``change`` worse (latency x 1.03, throughput / 1.03,
samples and medians alike), and the first planted run is judged as a suite session
judges a first attempt (``evaluate_run``, the runner's default confirm attempts). The
session fails when any metric says ``regression`` or ``suspect`` (a suspect earns a
rerun, and a rerun on the same machine carries the same change). Also reported: of the
metrics the history measures as "sensitive" to the change (between-machine spread, SD
over the machines' means, at most a third of the change, and within-machine scale at
most a sixth of it), the share that trips.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates.gate import evaluate_run  # noqa: E402
from gates.store.open import open_history  # noqa: E402
from gates.store.provenance import host_key  # noqa: E402
from gates.store.schema import pack_samples, unpack_samples  # noqa: E402

TRIPS = ("regression", "suspect")


def machines_of(con: sqlite3.Connection) -> dict[tuple[str, str], list[str]]:
    """{(suite, machine): its complete first-attempt runs, oldest first}."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for rid, suite, hw in con.execute(
            "SELECT run_id, suite, hardware FROM runs WHERE status = 'complete' "
            "AND confirm_of IS NULL ORDER BY started_at"):
        m = host_key(hw)
        if m is not None:
            out[(suite, m)].append(rid)
    return dict(out)


def sensitive_keys(con: sqlite3.Connection, suite: str, change: float) -> set[str]:
    """Metrics whose between-machine SD (of machine means) is at most change / 3 and whose
    within-machine scale is at most change / 6, both relative, over the whole history."""
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for key, med, hw in con.execute(
            "SELECT m.key, m.median, r.hardware FROM metrics m JOIN runs r USING (run_id) "
            "WHERE r.suite = ? AND r.confirm_of IS NULL AND m.attempt = 1 "
            "AND r.status = 'complete'", (suite,)):
        m = host_key(hw)
        if m is not None and med is not None and med > 0:
            by[key][m].append(float(med))
    keys = set()
    for key, ms in by.items():
        reps = [v for v in ms.values() if len(v) >= 2]
        if len(ms) < 3 or not reps:
            continue
        means = np.array([np.mean(v) for v in ms.values()])
        centre = float(np.median(means))
        between = float(np.std(means, ddof=1)) / centre
        within = float(np.sqrt(np.mean([np.var(v, ddof=1) for v in reps]))) / centre
        if between <= change / 3 and within <= change / 6:
            keys.add(key)
    return keys


def plant(con: sqlite3.Connection, run_ids: list[str], change: float) -> None:
    """Make every metric of ``run_ids`` ``change`` worse, samples and summaries alike."""
    for rid in run_ids:
        for mid, better, blob in con.execute(
                "SELECT m.id, m.better, m.samples FROM metric_rows m JOIN runs r "
                "ON r.num = m.run_num WHERE r.run_id = ?", (rid,)).fetchall():
            f = 1.0 + change if better == "lower" else 1.0 / (1.0 + change)
            new = None if blob is None else pack_samples([f * v for v in unpack_samples(blob)])
            con.execute("UPDATE metric_rows SET median = median * ?, min_value = min_value * ?, "
                        "max_value = max_value * ?, samples = ? WHERE id = ?",
                        (f, f, f, new, mid))
    con.commit()


def judge_plant(path: Path, suite: str, runs: list[str], change: float,
                sensitive: set[str]) -> dict:
    """Plant on ``runs`` in a copy of the history and judge the first of them."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "history.db"
        shutil.copyfile(path, copy)
        con = sqlite3.connect(copy)
        plant(con, runs, change)
        con.close()
        with open_history(copy) as h:
            res = evaluate_run(h, runs[0], save=False)
    trips = [v for v in res.verdicts if v.verdict in TRIPS]
    sens = [v for v in res.verdicts if v.key in sensitive]
    return {"fails": bool(trips), "trips": len(trips),
            "sensitive": len(sens),
            "sensitive_caught": sum(v.verdict in TRIPS for v in sens),
            "missed": sorted(v.key for v in sens if v.verdict not in TRIPS)}


def run(path: Path, change: float) -> list[dict]:
    con = sqlite3.connect(path)
    ms = machines_of(con)
    sens = {s: sensitive_keys(con, s, change) for s in {s for s, _ in ms}}
    con.close()
    rows = []
    for (suite, m), rids in ms.items():
        for where, planted in (("first", rids), ("later", rids[1:])):
            if not planted:
                continue
            r = judge_plant(path, suite, planted, change, sens[suite])
            rows.append({"suite": suite, "machine": m.split(",")[0][:12], "where": where,
                         "runs": len(planted), **r})
    return rows


def render(rows: list[dict], change: float, cmd: str) -> str:
    from tabulate import tabulate

    lines = [f"# A {100 * change:.0f}% regression planted on each machine of the history\n",
             f"Command: `{cmd}`\n",
             "Each row: the change planted on the machine's runs from its first (`first`) "
             "or second (`later`) run on, and the first planted run judged as a suite "
             "session's first attempt. `fails`: any metric says regression or suspect; "
             "`sensitive`: metrics whose between-machine SD is at most a third of the "
             "change and within-machine scale at most a sixth (measured over the whole "
             "history), and how many of them trip.\n"]
    table = [[r["suite"], r["machine"], r["where"], r["runs"], "yes" if r["fails"] else "NO",
              r["trips"], f"{r['sensitive_caught']}/{r['sensitive']}",
              ", ".join(r["missed"][:4]) + (" ..." if len(r["missed"]) > 4 else "")]
             for r in rows]
    lines.append(tabulate(table, headers=["suite", "machine", "planted from", "runs", "fails",
                                          "metrics tripped", "sensitive caught", "missed"],
                          tablefmt="github"))
    n = len(rows)
    ok = sum(r["fails"] for r in rows)
    sc = sum(r["sensitive_caught"] for r in rows)
    st = sum(r["sensitive"] for r in rows)
    lines.append(f"\nSessions failed: {ok} of {n}; sensitive metrics caught: {sc} of {st}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("history", nargs="?", default="history.db")
    ap.add_argument("--change", type=float, default=0.03)
    ap.add_argument("--out", default=None, help="also write the Markdown table here")
    a = ap.parse_args(argv)
    path = Path(a.history)
    if not path.is_file():
        print(f"error: {path}: no such history file; give the path of a history.db",
              file=sys.stderr)
        return 2
    if not 0 < a.change < 1:
        print(f"error: --change {a.change}: give a fraction in (0, 1), such as 0.03",
              file=sys.stderr)
        return 2
    cmd = "python benchmarks/plant_history.py " + " ".join(argv if argv is not None
                                                          else sys.argv[1:])
    md = render(run(path, a.change), a.change, cmd.strip())
    print(md)
    if a.out:
        Path(a.out).write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
