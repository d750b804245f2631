"""Thirteenth round: ``thirteenth_min_base.level_only_30`` and ``thirteenth_rho_seg`` together.
python benchmarks/attempts/thirteenth_combined.py SEEDS REPS MODELS EFFECTS [MS]
Measured at fb373e9 (the gate before this round).
"""
import sys

sys.path.insert(0, "benchmarks/attempts")
import thirteenth_min_base as mb  # noqa: E402
import thirteenth_rho_seg as seg  # noqa: E402
import variants  # noqa: E402


def shipped():
    mb.shipped()
    seg.shipped()


def both():
    mb.level_only_30()
    seg.variant()


def rho_seg():
    mb.shipped()
    seg.variant()


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    variants.compare([("shipped", shipped), ("both", both)],
                     seeds, reps, models, effects, ms)
