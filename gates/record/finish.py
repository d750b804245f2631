"""Close a run whose pytest never finished its session: what the suite runner calls after
a crash, a hang it killed, or a signal; or mark a run whose gate never finished.

    python -m gates.record.finish --history PATH --run-id ID --status crashed|interrupted
        --exit-status N --cause "pytest killed by SIGSEGV"
    python -m gates.record.finish --history PATH --run-id ID --status gate-unfinished|gate-error
        --cause "the gate was killed by SIGKILL"

``gate-unfinished`` marks a complete run whose gate was killed, crashed or ran past its
limit: its verdicts are missing, and every report reads it as not passed (exit 1).
``gate-error`` marks one whose gate refused its input (exit 2) and judged nothing; the
gate marks it itself with its error line, this is the runner's fallback. The cause is
kept in the run's ``gate_note``, which the reports show.

The plugin writes each test as it starts and finishes (`RunWrites.record_tests`), so
what finished is already in the history; this marks the run (never a baseline) and
appends the cause to the test that was running. A run the plugin did finish is left
alone and nothing is printed. Prints one line; exit 3 when it marked the run, 0
when the run had finished, 2 when the history cannot be written or holds no such run.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gates.store.history import GATE_ERROR, GATE_UNFINISHED, HistoryError
from gates.store.open import open_history

__all__ = ["MARKED", "close_run", "main"]

MARKED = 3  # exit status: the run was unfinished and is now marked


def close_run(history_path: str, run_id: str, status: str, exit_status: int | None,
              cause: str) -> str | None:
    """Mark the run and return the line to print (None when the run had finished).
    `HistoryError` when the history holds no such run: pytest stopped before the
    plugin began it (a conftest that exits at import), and nothing of it is recorded."""
    with open_history(history_path, create=False) as history:
        if not history.merge_reads.has_run(run_id):
            raise HistoryError(f"{cause}: no run {run_id} was recorded (pytest stopped "
                               "before its session began); nothing ran that a report can show")
        if status in (GATE_UNFINISHED, GATE_ERROR):
            if not history.run_writes.mark_not_judged(run_id, status, cause,
                                           if_no_verdicts=status == GATE_ERROR):
                return None
            return (f"{cause}; run {run_id} is marked {status}: its verdicts are "
                    "missing, it is never a baseline, and reports read it as failed")
        result = history.run_writes.close_unfinished(run_id, status, exit_status, cause)
    if result is None:
        return None
    where = (f" while running {', '.join(result['unfinished'])}" if result["unfinished"]
             else " outside any test (start-up, collection or recording)")
    return (f"{cause}{where}; {result['finished']} finished test(s) and {result['metrics']} "
            f"metric(s) kept in run {run_id} (status {status}, never a baseline)")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gates.record.finish",
                                 description="Mark a run whose pytest did not finish.")
    # A database URL comes in GATES_HISTORY, never on a command line (ci_register.planning.history_value.history_argv).
    ap.add_argument("--history", default=os.environ.get("GATES_HISTORY") or None,
                    required=not os.environ.get("GATES_HISTORY"), metavar="PATH",
                    help="history file or database URL (default $GATES_HISTORY)")
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--status", required=True, choices=("crashed", "interrupted", GATE_UNFINISHED,
                                                        GATE_ERROR))
    ap.add_argument("--exit-status", type=int, default=None)
    ap.add_argument("--cause", required=True)
    args = ap.parse_args(argv)
    try:
        line = close_run(args.history, args.run_id, args.status, args.exit_status, args.cause)
    except HistoryError as exc:
        print(f"error: run {args.run_id} could not be marked {args.status}: {exc}",
              file=sys.stderr)
        return 2
    if line is None:
        return 0
    print(("error: " if args.status != "interrupted" else "") + line, file=sys.stderr)
    return MARKED


if __name__ == "__main__":
    # The verdict table holds text a pull request wrote (an acceptance's reason, a test's
    # name): secrets masked, invisibles shown, no line a workflow command.
    from ci_register.running.redact import guarded_output

    with guarded_output():
        code = main()
    raise SystemExit(code)
