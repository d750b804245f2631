"""Fourteenth round, second part: corroboration on small positive rho_lo
(``twelfth_corr_rho``) with and without a consistency level of LEVEL (0.02).
Modes: shipped; corroboration; corroboration + consistency LEVEL.
(MODES=shipped,corr to run a subset)
python benchmarks/attempts/fourteenth_combined.py SEEDS REPS MODELS EFFECTS [MS]
"""
import os
import sys

sys.path.insert(0, "benchmarks/attempts")
import fourteenth_consistency as fc  # noqa: E402
import twelfth_corr_rho as cr  # noqa: E402
import variants  # noqa: E402

LEVEL = float(os.environ.get("LEVEL", "0.02"))


def shipped():
    cr.shipped()
    fc.at(fc.SHIPPED)


def corr():
    cr.variant()
    fc.at(fc.SHIPPED)


def corr_consistency():
    cr.variant()
    fc.at(LEVEL)


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    modes = {"shipped": shipped, "corr": corr, f"corr+cons {LEVEL}": corr_consistency}
    keep = os.environ.get("MODES", ",".join(modes)).split(",")  # a subset, in this order
    variants.compare([(k, modes[k]) for k in keep], seeds, reps, models, effects, ms)
