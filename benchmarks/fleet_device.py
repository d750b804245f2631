"""Judge a device experiment's runs against the committed history: a host new to it.

    python benchmarks/fleet_device.py CLEAN_DB BAD_DB [--history history.db] [--out FILE.md]
    python benchmarks/fleet_device.py --hosts DIR [DIR ...] [--history ...] [--out FILE.md]

``--hosts``: replay every recorded host (each DIR holds its ``fleet_clean.db`` and
``fleet_bad.db``, as ``benchmarks/data/fleet_h200*/``) in one report, a table a host;
no device needed.

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
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates.gate import evaluate_run  # noqa: E402
from gates.store.merge import merge_histories  # noqa: E402
from gates.store.open import open_history  # noqa: E402
from gates.store.provenance import host_key  # noqa: E402

SHAPES = ("attn/decode/fa2/b8_kv32768/latency", "attn/decode/fa2/b32_kv8192/latency",
          "attn/decode/fa2/b64_kv32768/latency")
CAUGHT = ("regression", "suspect")


def _copy_db(src: Path, dst: Path) -> None:
    """A copy of a history and its write-ahead log, if any: reading a WAL database in
    place would leave a -shm file beside a committed one."""
    shutil.copyfile(src, dst)
    wal = src.with_name(src.name + "-wal")
    if wal.is_file():
        shutil.copyfile(wal, dst.with_name(dst.name + "-wal"))


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
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "history.db"
        shutil.copyfile(history, copy)
        shards = []
        for db in (clean_db, bad_db):  # copies, brought to this code's schema
            shards.append(Path(tmp) / f"shard-{len(shards)}.db")
            _copy_db(db, shards[-1])
            with open_history(shards[-1], create=False):
                pass
        clean, bad = _runs(shards[0]), _runs(shards[1])
        merge_histories(shards, copy)
        with open_history(copy) as h:
            h.run_writes.set_trust(bad, trusted=False, reason="fleet_device: slowed runs, judged alone")
            for i, rid in enumerate(clean):
                rows.append(_row(f"clean {i + 1}", evaluate_run(h, rid, save=False)))
            for i, rid in enumerate(bad):
                h.run_writes.set_trust([rid], trusted=True, reason="fleet_device: judged now")
                rows.append(_row(f"slowed {i + 1}", evaluate_run(h, rid, save=False)))
                h.run_writes.set_trust([rid], trusted=False, reason="fleet_device: judged")
    return rows


def _tally(rows: list[dict]) -> tuple[int, int, int, int]:
    """(clean runs with any alarm, clean runs, slowed runs with all shapes caught, slowed)."""
    clean = [r for r in rows if r["label"].startswith("clean")]
    bad = [r for r in rows if r["label"].startswith("slowed")]
    fa = sum(bool(r["alarms"]) for r in clean)
    caught = sum(all(r["shapes"][k] is not None and r["shapes"][k][0] in CAUGHT
                     for k in SHAPES) for r in bad)
    return fa, len(clean), caught, len(bad)


def _table(rows: list[dict]) -> str:
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
    fa, n_clean, caught, n_bad = _tally(rows)
    return "\n".join([
        tabulate(table, headers=["run", "fa2 b8 kv32k", "fa2 b32 kv8k", "fa2 b64 kv32k",
                                 "other alarms"], tablefmt="github"),
        f"\nClean runs with any alarm: {fa} of {n_clean}. Slowed runs with all three "
        f"shapes caught: {caught} of {n_bad}.\n"])


_HEAD = ("Rows: each clean run judged against the committed history and the clean runs "
         "before it; each slowed run alone against the history and every clean run. "
         "Cells: first-attempt verdict (change against the decider's reference, p). "
         "`other alarms`: how many other metrics of the run are not `pass` (the first two).\n")


def render(rows: list[dict], cmd: str) -> str:
    return "\n".join([
        "# The gate on an H200 new to the history: clean and slowed decode runs\n",
        f"Command: `{cmd}`\n", _HEAD, _table(rows)])


def render_hosts(hosts: list[tuple[str, str, list[dict]]], cmd: str) -> str:
    """Every host's table (``hosts``: its folder, its GPUs, its rows) and the target's tally:
    a host meets it when no clean run alarms and every slowed run is caught on all three."""
    out = ["# The gate on H200s new to the history: every recorded host replayed\n",
           f"Command: `{cmd}`\n", _HEAD]
    met = 0
    for folder, gpu, rows in hosts:
        fa, n_clean, caught, n_bad = _tally(rows)
        met += fa == 0 and caught == n_bad
        out += [f"## {folder} ({gpu})\n", _table(rows)]
    out.append(f"Hosts with no clean alarm and every slowed run caught on all three shapes: "
               f"{met} of {len(hosts)}.\n")
    return "\n".join(out)


def host_gpus(db: Path) -> str:
    """The GPUs the runs of ``db`` name (their uuids), or "no GPU named"."""
    with tempfile.TemporaryDirectory() as tmp:
        _copy_db(db, Path(tmp) / "runs.db")
        con = sqlite3.connect(f"file:{Path(tmp) / 'runs.db'}?mode=ro", uri=True)
        try:
            keys = {host_key(json.loads(r[0]) if r[0] else None)
                    for r in con.execute("SELECT hardware FROM runs WHERE confirm_of IS NULL")}
        finally:
            con.close()
    keys.discard(None)
    return ", ".join(sorted(keys)) or "no GPU named"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clean_db", nargs="?")
    ap.add_argument("bad_db", nargs="?")
    ap.add_argument("--hosts", nargs="+", metavar="DIR",
                    help="folders of recorded hosts, each with fleet_clean.db and fleet_bad.db")
    ap.add_argument("--history", default="history.db")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if bool(a.hosts) == (a.clean_db is not None):
        ap.error("give CLEAN_DB BAD_DB or --hosts DIR ..., not both")
    if a.clean_db is not None and a.bad_db is None:
        ap.error("give BAD_DB after CLEAN_DB")
    pairs = ([(Path(a.clean_db), Path(a.bad_db))] if a.clean_db is not None else
             [(Path(d) / "fleet_clean.db", Path(d) / "fleet_bad.db") for d in a.hosts])
    for p in (*[x for pr in pairs for x in pr], Path(a.history)):
        if not p.is_file():
            print(f"error: {p}: no such history file", file=sys.stderr)
            return 2
    cmd = "python benchmarks/fleet_device.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    if a.hosts:
        md = render_hosts([(d, host_gpus(c), judge(Path(a.history), c, b))
                           for d, (c, b) in zip(a.hosts, pairs, strict=True)], cmd)
    else:
        md = render(judge(Path(a.history), *pairs[0]), cmd)
    print(md)
    if a.out:
        Path(a.out).write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
