"""Re-judge every first attempt of a history with this checkout's gate, read-only.

    python benchmarks/rejudge_history.py [history.db] [--suite NAME] [--attempts-left N]

What the gate as it is now would say about runs already recorded: verdict
counts, and every judgement that differs from the stored first-attempt verdict.
The history is copied to a temporary file first (``evaluate_run`` with
``save=False`` writes nothing, but the copy also keeps a concurrent writer's
lock out of the way). Each run is judged against the runs started before it,
as on the day, except that runs merged in later with earlier start times are
part of its baseline now. ``--attempts-left`` (default: the runner's default
confirm attempts) sets the first attempt's level as a suite session would
(``gates.model.stats.level_for``); 0 judges at the gate's own level.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gates.gate import evaluate_run  # noqa: E402
from gates.model import stats  # noqa: E402
from gates.store.open import open_history  # noqa: E402


def rejudge(path: Path, suite: str | None = None,
            attempts_left: int = stats.DEFAULTS.confirm_attempts) -> tuple[Counter, list[tuple]]:
    """(verdict counts, [(run_id, key, stored, now, p, message)] where they differ)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "history.db"
        shutil.copyfile(path, copy)
        con = sqlite3.connect(copy)
        runs = [r[0] for r in con.execute(
            "SELECT run_id FROM runs WHERE status = 'complete' AND confirm_of IS NULL"
            + (" AND suite = ?" if suite else "") + " ORDER BY started_at",
            (suite,) if suite else ())]
        stored = {(r, k): v for r, k, v in con.execute(
            "SELECT run_id, key, verdict FROM verdicts WHERE attempt = 1")}
        con.close()
        counts: Counter = Counter()
        diff = []
        with open_history(copy) as h:
            for rid in runs:
                for v in evaluate_run(h, rid, save=False, attempts_left=attempts_left).verdicts:
                    counts[v.verdict] += 1
                    old = stored.get((rid, v.key))
                    if old != v.verdict:
                        diff.append((rid, v.key, old, v.verdict, v.p_value, v.message))
    return counts, diff


NOT_JUDGED = ("insufficient-history", "unguarded")  # the model declined to judge, and says why


def non_pass_line(counts: Counter) -> str:
    """The share of judged first attempts that did not pass (the issue's <= 1% target)."""
    judged = sum(n for k, n in counts.items() if k not in NOT_JUDGED)
    bad = sum(n for k, n in counts.items() if k not in (*NOT_JUDGED, "pass"))
    share = 100.0 * bad / judged if judged else 0.0
    return (f"non-pass first attempts: {bad} of {judged} judged ({share:.2f}%); "
            f"{counts.get('unguarded', 0)} unguarded, "
            f"{counts.get('insufficient-history', 0)} insufficient-history")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", nargs="?", default="history.db")
    ap.add_argument("--suite", default=None)
    ap.add_argument("--attempts-left", type=int, default=stats.DEFAULTS.confirm_attempts)
    a = ap.parse_args(argv)
    path = Path(a.history)
    if not path.is_file():
        print(f"error: {path}: no such history file; give the path of a history.db",
              file=sys.stderr)
        return 2
    counts, diff = rejudge(path, a.suite, a.attempts_left)
    print("verdicts now: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    print(non_pass_line(counts))
    print(f"{len(diff)} judgement(s) differ from the stored first-attempt verdict:")
    for rid, key, old, new, p, msg in diff:
        ps = "-" if p is None else f"{p:.2g}"
        print(f"  {rid[:12]}  {key}: {old or '(none)'} -> {new} (p {ps}){'  ' + msg if msg else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
