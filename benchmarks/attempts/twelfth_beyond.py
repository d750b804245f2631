"""Twelfth round, second part: no immediate hold for a rerun beyond every baseline run.

The sequential confirm's first stage held a rerun at once when its own p was <= 0.0005
(``rerun_hold_level``). On a baseline that looks light-tailed, that p rests on the
parametric tail alone when the rerun lies beyond every run seen, and Student-t (t3)
reruns get there far more often than 0.0005 (paired spike series: 6 of 7 extra Student-t
m=1 alarms were such holds). Variant: such a rerun is ``suspect``; another rerun follows
and the clipped mean of the reruns decides (``confirm_reruns``). Wraps
``gates.decisions.confirm`` as it was at commit 2a5bd5f (the code it measured, which
still held such a rerun at once; run it there) and compares with ``variants.compare``.
python benchmarks/attempts/twelfth_beyond.py SEEDS REPS MODELS EFFECTS [MS]
"""
import sys

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates import decisions, stats  # noqa: E402

SHIPPED = decisions.confirm
HOLD = 0.0005  # the rerun_hold_level this round took out


def no_hold_beyond(*a, **k):
    j, v = SHIPPED(*a, **k)
    if (v == "regression" and k.get("another") and not k.get("suspect")
            and decisions.independent(j) and j.extras.get("beyond")
            and j.extras["p_run_worse"] <= HOLD):
        return j, "suspect"
    return j, v


def shipped():
    stats.confirm = SHIPPED


def variant():
    stats.confirm = no_hold_beyond


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    variants.compare([("shipped", shipped), ("variant", variant)],
                     seeds, reps, models, effects, ms)
