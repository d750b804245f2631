"""Twelfth round, third part: the sequential confirm on baselines with a small rho_lo.

``decisions.independent`` asks rho_lo == 0; rho_lo, a cautious lower bound, is above 0
by chance in about a quarter of independent Gaussian 40-run baselines, whose trips then
get the one-rerun confirm and the gate's plain level. Variant: rho_lo <= R counts as
independent. Monkeypatches ``gates.decisions.independent``; compares R = 0 (shipped)
with the given values (``variants.compare``).
python benchmarks/attempts/twelfth_rho.py SEEDS REPS MODELS EFFECTS R1,R2 [MS]
"""
import sys
from functools import partial

sys.path.insert(0, "benchmarks/attempts")
import variants  # noqa: E402

from gates import decisions  # noqa: E402


def _independent(j, r):
    return (j.status == "ok" and j.extras.get("rho_lo", 0.0) <= r
            and not j.extras.get("heavy", 0.0) and j.extras.get("machines", 0.0) <= 1)


def independent_at(r):
    decisions.independent = partial(_independent, r=r)


if __name__ == "__main__":
    seeds, reps, models, effects, (rs,), ms = variants.args(extra=1)
    modes = [(f"rho_lo<={r:g}", partial(independent_at, r))
             for r in [0.0] + [float(x) for x in rs.split(",")]]
    variants.compare(modes, seeds, reps, models, effects, ms)
