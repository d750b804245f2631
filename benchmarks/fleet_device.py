"""Judge a device experiment's runs against the committed history: a host new to it.

    python benchmarks/fleet_device.py CLEAN_DB BAD_DB [--history history.db] [--out FILE.md]

``tools/fleet_device.sh`` records, on a lent GPU, clean runs of the FlashInfer decode
file (CLEAN_DB) and runs with every CUDA-timed sample made longer by a known share
(BAD_DB, ``SUITELIB_INJECT_SLOWDOWN``). Here, on a temporary copy of the history with
the clean runs merged in:

- each clean run is judged as its suite session's first attempt against the history
  and the clean runs before it (the first is a machine the history has not seen; the
  others know its earlier runs): any metric not ``pass`` is a false alarm;
- each slowed run is judged alone against the history and every clean run (the other
  slowed runs marked untrusted): is each sensitive decode shape caught on that run?

A ``suspect`` counts as caught: it earns a confirm rerun, which carries the same
slowdown. Read-only on every input.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates.gate import evaluate_run  # noqa: E402
from gates.store.merge import merge_histories  # noqa: E402
from gates.store.open import open_history  # noqa: E402

SHAPES = ("attn/decode/fa2/b8_kv32768/latency", "attn/decode/fa2/b32_kv8192/latency",
          "attn/decode/fa2/b64_kv32768/latency")
CAUGHT = ("regression", "suspect")


def _runs(db: Path) -> list[str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute(
            "SELECT run_id FROM runs WHERE status = 'complete' AND confirm_of IS NULL "
            "ORDER BY started_at")]
    finally:
        con.close()


def _row(label: str, res) -> dict:
    by = {v.key: v for v in res.verdicts}
    alarms = [v for v in res.verdicts if v.verdict not in ("pass", "insufficient-history",
                                                           "unguarded")]
    shapes = {}
    for k in SHAPES:
        v = by.get(k)
        shapes[k] = None if v is None else (v.verdict, v.p_value, v.rel_change, v.message)
    return {"label": label, "alarms": [(v.key, v.verdict) for v in alarms], "shapes": shapes}


def judge(history: Path, clean_db: Path, bad_db: Path) -> list[dict]:
    clean, bad = _runs(clean_db), _runs(bad_db)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "history.db"
        shutil.copyfile(history, copy)
        shards = []
        for db in (clean_db, bad_db):  # copies, brought to this code's schema
            shards.append(Path(tmp) / f"shard-{len(shards)}.db")
            shutil.copyfile(db, shards[-1])
            with open_history(shards[-1], create=False):
                pass
        merge_histories(shards, copy)
        with open_history(copy) as h:
            h.set_trust(bad, trusted=False, reason="fleet_device: slowed runs, judged alone")
            for i, rid in enumerate(clean):
                rows.append(_row(f"clean {i + 1}", evaluate_run(h, rid, save=False)))
            for i, rid in enumerate(bad):
                h.set_trust([rid], trusted=True, reason="fleet_device: judged now")
                rows.append(_row(f"slowed {i + 1}", evaluate_run(h, rid, save=False)))
                h.set_trust([rid], trusted=False, reason="fleet_device: judged")
    return rows


def render(rows: list[dict], cmd: str) -> str:
    from tabulate import tabulate

    table = []
    for r in rows:
        cells = []
        for k in SHAPES:
            s = r["shapes"][k]
            cells.append("-" if s is None else
                         f"{s[0]} ({'-' if s[2] is None else f'{100 * s[2]:+.2f}%'}, "
                         f"p {'-' if s[1] is None else f'{s[1]:.2g}'})")
        other = [f"{k} {v}" for k, v in r["alarms"] if k not in SHAPES]
        table.append([r["label"], *cells, f"{len(other)}: " + "; ".join(other[:2])
                      + (" ..." if len(other) > 2 else "") if other else "none"])
    clean = [r for r in rows if r["label"].startswith("clean")]
    bad = [r for r in rows if r["label"].startswith("slowed")]
    fa = sum(bool(r["alarms"]) for r in clean)
    caught = sum(all(r["shapes"][k] is not None and r["shapes"][k][0] in CAUGHT
                     for k in SHAPES) for r in bad)
    return "\n".join([
        "# The gate on an H200 new to the history: clean and slowed decode runs\n",
        f"Command: `{cmd}`\n",
        "Rows: each clean run judged against the committed history and the clean runs "
        "before it; each slowed run alone against the history and every clean run. "
        "Cells: first-attempt verdict (change against the decider's reference, p). "
        "`other alarms`: how many other metrics of the run are not `pass` (the first two).\n",
        tabulate(table, headers=["run", "fa2 b8 kv32k", "fa2 b32 kv8k", "fa2 b64 kv32k",
                                 "other alarms"], tablefmt="github"),
        f"\nClean runs with any alarm: {fa} of {len(clean)}. Slowed runs with all three "
        f"shapes caught: {caught} of {len(bad)}.\n"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clean_db")
    ap.add_argument("bad_db")
    ap.add_argument("--history", default="history.db")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    for p in (a.clean_db, a.bad_db, a.history):
        if not Path(p).is_file():
            print(f"error: {p}: no such history file", file=sys.stderr)
            return 2
    cmd = "python benchmarks/fleet_device.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    md = render(judge(Path(a.history), Path(a.clean_db), Path(a.bad_db)), cmd)
    print(md)
    if a.out:
        Path(a.out).write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
