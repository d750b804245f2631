"""The attempt harnesses' shared runner: the benchmark's gate under named variants.

A harness names its modes, (label, install): ``install()`` monkeypatches the gate into
that mode (a module-level function, so the worker processes can receive it; every mode
installs its own pieces, the shipped one included). ``compare`` then runs, per cell
(model, m) and mode, the benchmark's own series and ``bench_gates.gate_alarms``: null
and spike series give false alarms per series, the other effects detection within 10
runs (first alarm at or after the change; ``EFFECT:first`` on the first bad run), each averaged over the seeds, and prints one
line per cell with the modes' rates side by side (percent).

Command line of a harness: SEEDS REPS MODELS EFFECTS [harness arguments] [MS], where
SEEDS, MODELS, EFFECTS and MS are comma lists (MS defaults to 1,5).
"""
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, "benchmarks")
sys.path.insert(0, ".")
import bench_gates as bg  # noqa: E402

__all__ = ["args", "compare", "HISTORY", "history_judge", "install_judge"]

Mode = tuple[str, Callable[[], None]]
HISTORY: dict = {}  # "h": the history the wrapped judge_summaries is judging now


def history_judge(judge_summaries: Callable) -> Callable:
    """``judge_summaries`` wrapped so that patched internals (which see only the
    baseline) can read the whole history being judged, ``HISTORY["h"]``."""
    def wrapped(history, value, **kw):
        HISTORY["h"] = history
        try:
            return judge_summaries(history, value, **kw)
        finally:
            HISTORY.pop("h", None)
    return wrapped


def install_judge(f: Callable) -> None:
    """``f`` as the judge the confirm stages and the benchmark's gate call."""
    from gates import decisions, stats

    decisions.judge_summaries = stats.judge_summaries = f


def args(extra: int = 0) -> tuple[list[int], int, list[str], list[str], list[str], list[int]]:
    """(seeds, reps, models, effects, the harness's ``extra`` arguments, ms) from argv."""
    a = sys.argv[1:]
    ms = a[4 + extra] if len(a) > 4 + extra else "1,5"
    return ([int(x) for x in a[0].split(",")], int(a[1]), a[2].split(","), a[3].split(","),
            a[4:4 + extra], [int(x) for x in ms.split(",")])


def _cell(task: tuple) -> tuple[str, int, dict]:
    model, m, seeds, reps, effects, modes = task
    out = {}
    for label, install in modes:
        install()
        acc: dict[str, list[float]] = {e: [] for e in effects}
        for seed in seeds:
            ser = bg._cell_series(model, m, reps, seed)
            for e in effects:
                if e in ("null", "spike"):
                    acc[e].append(np.mean([bg.gate_alarms(s, bg.GATED, first_only=True).any()
                                           for s in ser[e]]))
                else:  # "step5" within 10 runs, "step5:first" on the first bad run
                    name, _, when = e.partition(":")
                    f = [bg._first(bg.gate_alarms(s, bg.AFTER, first_only=True))
                         for s in ser[name]]
                    acc[e].append(bg._detect_stats(f)[0 if when == "first" else 2])
        for e in effects:
            out[(label, e)] = float(np.mean(acc[e]))
    return model, m, out


def compare(modes: Sequence[Mode], seeds: Sequence[int], reps: int, models: Sequence[str],
            effects: Sequence[str], ms: Sequence[int] = (1, 5)) -> None:
    t0 = time.time()
    labels = [label for label, _ in modes]
    tasks = [(mo, m, list(seeds), reps, list(effects), list(modes)) for mo in models for m in ms]
    with ProcessPoolExecutor(2) as ex:
        for model, m, out in ex.map(_cell, tasks):
            print(f"{model:9s} m={m}", "  ".join(
                f"{e}:" + "/".join(f"{100 * out[(k, e)]:.2f}" for k in labels)
                for e in effects), flush=True)
    print(f"{time.time() - t0:.0f} s")
