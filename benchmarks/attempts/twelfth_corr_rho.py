"""Twelfth round, fourth part: corroboration where rho_lo is small but above 0.

After the second part the on-spike Student-t m=1 alarms left are one-rerun holds of a
rerun beyond every baseline run on baselines with rho_lo 0.03-0.05 (no sequential
confirm there). Variant: ``_outlier_check`` also asks for corroboration on baselines
that are not heavy but have 0 < rho_lo <= ``QUANTILE_RHO`` (0.2). Monkeypatches
``gates.decisions._outlier_check``; compares with the shipped (``variants.compare``).
python benchmarks/attempts/twelfth_corr_rho.py SEEDS REPS MODELS EFFECTS [MS]
Adopted in the fourteenth round: from 77851d8 on both modes run the shipped gate.
"""
import sys

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates import decisions  # noqa: E402
from gates.judge import QUANTILE_RHO  # noqa: E402

SHIPPED = decisions._outlier_check


def small_rho_too(j, v, another):
    rho_lo = j.extras.get("rho_lo", 0.0)
    if (another and v == "regression" and j.extras.get("beyond")
            and (j.extras.get("heavy") or 0.0 < rho_lo <= QUANTILE_RHO)):
        j.extras["corroborate"] = 1.0
        return "suspect"
    return v


def shipped():
    decisions._outlier_check = SHIPPED


def variant():
    decisions._outlier_check = small_rho_too


if __name__ == "__main__":
    seeds, reps, models, effects, _, ms = variants.args()
    variants.compare([("shipped", shipped), ("variant", variant)],
                     seeds, reps, models, effects, ms)
