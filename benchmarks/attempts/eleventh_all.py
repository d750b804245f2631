"""Eleventh round, third part: corroboration on every baseline, not only heavy-tailed ones.

Monkeypatches ``gates.decisions._outlier_check`` to drop its ``heavy`` condition and
runs the benchmark's own ``gate_alarms`` (shipped gate otherwise), against the shipped
(``variants.compare``).
python benchmarks/attempts/eleventh_all.py SEEDS REPS MODELS EFFECTS [MS]
"""
import sys

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates import decisions  # noqa: E402

SHIPPED = decisions._outlier_check


def everywhere(j, v, another):
    if another and v == "regression" and j.extras.get("beyond"):
        j.extras["corroborate"] = 1.0
        return "suspect"
    return v


def shipped():
    decisions._outlier_check = SHIPPED


def on_every_baseline():
    decisions._outlier_check = everywhere


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    variants.compare([("shipped", shipped), ("all", on_every_baseline)],
                     seeds, reps, models, effects, ms)
