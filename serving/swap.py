"""A checkpoint swap judged against its full-precision baseline (pure).

miles' story: a session test's checkpoint is swapped to its FP8 twin while metric gates
must stay green. Within one CI session there is no history of the twin yet, so its
accuracy is held to a floor derived from the baseline measured in the same session:

    floor = baseline - max_drop - z(level) * sqrt(2 p (1 - p) / n)

the allowed drop, less the binomial noise of two independent runs of ``n`` questions
(p the baseline accuracy). The floor travels with the recorded metric as its
``min_value``, so the gate plugin's ``threshold-fail`` verdict (naming the metric key,
which names the variant) fails the session; across sessions the same key meets the
binomial history gate like any other accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

__all__ = ["SwapBand", "SwapVerdict", "judge_swap", "swap_floor"]


@dataclass(frozen=True)
class SwapBand:
    max_drop: float = 0.05  # accuracy (absolute) the twin may lose beyond the noise
    level: float = 0.01  # one-sided: how often a faithful twin is failed by noise alone

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_drop < 1.0:
            raise ValueError(f"max_drop must be in [0, 1), got {self.max_drop}")
        if not 0.0 < self.level < 0.5:
            raise ValueError(f"level must be in (0, 0.5), got {self.level}")


@dataclass(frozen=True)
class SwapVerdict:
    metric: str
    variant: str
    value: float
    floor: float
    baseline: float
    n: int

    @property
    def passed(self) -> bool:
        return self.value >= self.floor

    @property
    def message(self) -> str:
        state = "passes" if self.passed else "FAILS"
        cmp = ">=" if self.passed else "<"
        return (f"swap variant {self.variant!r} {state} {self.metric}: {self.value:.3f} {cmp} "
                f"floor {self.floor:.3f} (baseline {self.baseline:.3f}, n={self.n})")


def swap_floor(baseline: float, n: int, band: SwapBand = SwapBand()) -> float:
    """The twin's accuracy floor from the baseline's accuracy on ``n`` questions."""
    if n < 1 or not 0.0 <= baseline <= 1.0 or math.isnan(baseline):
        raise ValueError(f"need an accuracy in [0, 1] on n >= 1 questions, got {baseline} on {n}")
    z = NormalDist().inv_cdf(1.0 - band.level)
    noise = z * math.sqrt(2.0 * baseline * (1.0 - baseline) / n)
    return max(0.0, baseline - band.max_drop - noise)


def judge_swap(metric: str, variant: str, value: float, baseline: float, n: int,
               band: SwapBand = SwapBand()) -> SwapVerdict:
    return SwapVerdict(metric, variant, value, swap_floor(baseline, n, band), baseline, n)
