"""The machine part of the noise model: runs on several machines of one hardware class.

Model (one-way random effects; Searle, Casella & McCulloch, *Variance
Components*, 1992, sec. 3.5): a run summary is x = mu + m_machine + e_run, with
machine offsets m ~ (0, tau^2) and run noise e ~ (0, sigma_w^2). A run on a
machine with runs before it is predicted from that machine's level, shrunk toward
the baseline's centre (``MachineModel.own_level``, the best linear unbiased
predictor); a run on a machine not seen before is centred on the baseline's centre
with prediction variance sigma_w^2 + tau^2 (``MachineModel.run_var``). Runs of one
machine in a window share their offset (they are not independent).

Identity: a run names its machine by its GPUs (``provenance.host_key``). In a
history where runs name their machines, a run that names none could have run
anywhere: it counts as a machine of its own (a group of one, never "known"),
so the spread between such runs is read as between-machine spread and the
run judged, if unnamed, is a machine not seen before. Where tau^2 cannot be
estimated (the runs before span one machine) a run can only be compared with
runs of its own machine; against any other the verdict is ``unguarded``
(``gates.model.judge``). A history in which no run names a machine is judged as one
machine (the model without the machine term).

Row-wise like ``gates.model.robust``: the variance components of every metric of a run
(one a row, same machines) at once. Pure numpy/scipy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import special

from gates.model.robust import MAD_K, row_medians

__all__ = [
    "MACHINE_BOUND", "MachineModel", "machine_model", "host_variance", "chi2_median_factor",
]

# A metric whose spread between machines (tau) has a CV above this spans about 2x
# between its +-2.5 SD (1 - 2.5 x 0.2 = 0.5 to 1.5): the smallest change the first
# attempt can call on a machine change is then larger than any change worth guarding;
# reported ``unguarded``. Spread within a machine is the tests' business, as on one.
UNGUARDED_CV = 0.2
# The largest spread between machines of one model the histories have shown, as a share
# of the level: the range of the machine medians of the committed history's named H200s
# (8 machines; SDPA causal prefill s2048 TFLOPS 11.9%, FlashInfer decode 3-3.6%; the
# M=128 block GEMMs' 26-52% are their within-machine slow mode, tau ~0 by moments) and
# 4 between-machine SDs of the largest tau there (2.8%: 11.3%). A first run on a machine
# whose spread the baseline cannot tell (it spans one machine) is judged beyond this: a
# change that no machine change seen anywhere has made still fails (docs/gates/design.md).
MACHINE_BOUND = 0.12
MAD_EFF = 0.37  # Gaussian efficiency of the MAD: its scale is worth ~0.37 (n - 1) df


@dataclass(frozen=True)
class MachineModel:
    """The machine terms of one baseline (``machine_model``); the variances are one per
    metric (arrays) or a float."""

    tau2: np.ndarray | float | None  # between-machine variance; None: one machine
    within2: np.ndarray | float  # within-machine run variance (the one-run scale^2 if unknown)
    known: frozenset[str]  # machines with runs in the baseline (unnamed runs: their own)
    groups: int  # machines the baseline spans
    # Every named machine's runs before the judged one: (runs, their mean, a row per metric)
    levels: dict[str, tuple[int, np.ndarray]] = field(default_factory=dict)
    within_df: float = 0.0  # degrees of freedom of within2 (0: it is the baseline's scale^2)
    # Leave-one-out residuals of the runs of machines with 2+ runs (a run minus the mean of
    # its machine's other runs), a row per metric: what a known machine's run deviates by
    within_dev: np.ndarray | None = None

    @property
    def _tau2(self) -> np.ndarray | float:
        return 0.0 if self.tau2 is None else self.tau2

    @property
    def total(self) -> np.ndarray | float:
        """Run-to-run variance across the baseline's machines, sigma_w^2 + tau^2."""
        return self.within2 + self._tau2

    def inflation(self) -> float:
        """df / median chi^2(df) of tau^2 with one df per machine beyond the first:
        with few machines the spread of a machine not yet seen is mostly unknown."""
        return chi2_median_factor(self.groups - 1)

    def run_var(self, label: str) -> np.ndarray | float:
        """Prediction variance of one run on machine ``label`` about the baseline's centre."""
        tau2 = self._tau2
        return self.within2 + (tau2 if label in self.known else tau2 * self.inflation())

    def own_level(self, label: str, centre: np.ndarray, cvar: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray] | None:
        """A machine with runs before the judged one: its level, shrunk toward the
        baseline's ``centre`` (the best linear unbiased predictor of its offset), and the
        variance a new run of it has beyond within2 about that level. None for a machine
        without runs, or where tau^2 is unknown.

        offset m_M given the mean of its n runs: w (mean - centre), w = tau^2 / (tau^2 +
        within2 / n), posterior variance (1 - w) tau^2; the centre enters with weight
        1 - w (Searle, Casella & McCulloch 1992, sec. 3.4 and 7.4)."""
        if self.tau2 is None or label not in self.levels:
            return None
        n, mean = self.levels[label]
        w = self._shrinkage(n)
        return centre + w * (mean - centre), (1.0 - w) * self.tau2 + (1.0 - w) ** 2 * cvar

    def _shrinkage(self, n: int) -> np.ndarray:
        """w = tau^2 / (tau^2 + within2 / n): the weight of a machine's mean of n runs in
        its level (0 where both variances are 0)."""
        tau2 = np.asarray(self.tau2, dtype=float)
        v = np.asarray(self.within2, dtype=float) / n
        return np.where(tau2 + v > 0, tau2 / np.where(tau2 + v > 0, tau2 + v, 1.0), 0.0)

    def offsets(self, x: np.ndarray, labels: Sequence[str], centre: np.ndarray,
                ) -> np.ndarray:
        """Each run's machine offset about ``centre`` as the model predicts it from the
        runs ``x`` (a row per metric, a column per run of ``labels``): w (mean_M -
        centre), the shrinkage of ``own_level``, for every machine, a run that names
        none being a machine of one run. Zero where tau^2 is unknown."""
        x = np.asarray(x, dtype=float)
        out = np.zeros(x.shape)
        if self.tau2 is None:
            return out
        for g in _machine_groups(tuple(labels))[0]:
            out[:, g] = (self._shrinkage(g.size) * (_row_mean(x, g) - centre))[:, None]
        return out

    def window_extra(self, labels: Sequence[str]) -> np.ndarray | float:
        """Variance a window's runs add beyond k independent draws: runs of one machine
        share its offset, sum_M tau_M^2 (n_M / k)^2 - tau^2 / k (the iid part)."""
        tau2 = self._tau2
        k = len(labels)
        if self.tau2 is None or k == 0:
            return 0.0
        counts = Counter(labels)
        f = self.inflation()
        shared = sum((n / k) ** 2 * (tau2 if m in self.known else tau2 * f)
                     for m, n in counts.items())
        return np.maximum(0.0, shared - tau2 / k)


@lru_cache(maxsize=256)
def labels_of(hosts: tuple[str | None, ...]) -> tuple[str, ...]:
    """Machine labels: a run that names no machine gets a label no other run has."""
    return tuple(h if h is not None else f"{UNNAMED}{i}" for i, h in enumerate(hosts))


UNNAMED = "?"  # label prefix of runs that name no machine


def machine_model(x: np.ndarray, labels: Sequence[str], scale: np.ndarray,
                  n_base: int) -> MachineModel:
    """The machine terms of runs ``x`` (a row per metric) on machines ``labels``, the
    first ``n_base`` of
    them the baseline (the machines it knows); the rest (the runs between it and the
    run judged) inform the variance components only.

    ``scale``: the baseline's robust one-run scale, the within-machine scale
    where no machine has two runs.
    """
    x = np.asarray(x, dtype=float)
    labels = tuple(labels)
    tau2, within2, df, loo = _components(x, labels, scale)
    known = frozenset(labels[:n_base])
    # Named machines' levels over every run before the judged one (a machine's clean
    # runs just before a change are where its own level is read).
    levels = {labels[g[0]]: (int(g.size), _row_mean(x, g))
              for g in _machine_groups(labels)[0] if not labels[g[0]].startswith(UNNAMED)}
    return MachineModel(tau2, within2, known, len(known), levels, df, loo)


def _row_mean(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Each row's mean over columns ``g``, summed in column order: a row's value does not
    depend on how many rows are judged with it (numpy's reductions may pair differently)."""
    s = x[:, g[0]].copy()
    for i in g[1:]:
        s += x[:, i]
    return s / g.size


def _components(x: np.ndarray, labels: tuple[str, ...], scale: np.ndarray,
                ) -> tuple[np.ndarray | None, np.ndarray, float, np.ndarray | None]:
    """(tau^2 or None, within2, its degrees of freedom (0: the baseline's scale), the
    leave-one-out residuals of machines with 2+ runs or None)."""
    groups, sizes = _machine_groups(labels)
    within2, df, loo = scale * scale, 0.0, None
    # The spread of machine means that their own runs' noise puts there (below): the
    # variance of a run about its machine's mean, slow-mode runs included.
    noise2 = within2
    rep = sizes >= 2
    if int(sizes[rep].sum()) >= 4:
        # Residuals about each machine's mean, scaled by sqrt(n / (n - 1)) so that each
        # has the variance of one run (about a mean of 2 they have half of it); their MAD
        # keeps a slow-mode run from setting the scale.
        rg = [g for g, r in zip(groups, rep, strict=True) if r]
        dev = [x[:, g] - _row_mean(x, g)[:, None] for g in rg]
        resid = np.concatenate([d * math.sqrt(g.size / (g.size - 1))
                                for d, g in zip(dev, rg, strict=True)], axis=-1)
        within2 = (MAD_K * row_medians(np.abs(resid))) ** 2
        df = max(MAD_EFF * (resid.shape[-1] - len(rg)), 1.0)
        # A run against the mean of its machine's other runs: (n / (n - 1)) (x - mean).
        loo = np.concatenate([d * (g.size / (g.size - 1)) for d, g in zip(dev, rg, strict=True)],
                             axis=-1)
        noise2 = _row_mean(resid * resid, np.arange(resid.shape[-1]))  # unbiased: E = sigma_w^2
    if len(groups) < 2:
        return None, within2, df, loo
    # One-way ANOVA by moments: E var(machine means) = tau^2 + sigma_w^2 mean(1 / n_M),
    # with sigma_w^2 the same moment of the runs about their machine's mean. The robust
    # within2 would leave a two-mode metric's slow runs (which move the means of the
    # machines they land on) in tau^2: within-machine modes read as machine spread.
    means = np.stack([_row_mean(x, g) for g in groups], axis=-1)
    noise = noise2 * float(np.mean(1.0 / sizes))
    return np.maximum(0.0, np.var(means, ddof=1, axis=-1) - noise), within2, df, loo


def host_variance(x: Sequence[float] | np.ndarray, hosts: Sequence[str | None] | None,
                  ) -> float | None:
    """Between-host variance component of run summaries, or None when not estimable.

    The ANOVA (moments) estimator of the one-way random-effects model:
    tau^2 = max(0, var(host means) - s_w^2 mean(1 / n_host)), s_w^2 the mean
    square of runs about their host's mean (``_components``). Needs 2 hosts with
    2 runs each; runs without a host left out.
    """
    if hosts is None:
        return None
    x = np.asarray(x, dtype=float)
    keep = [i for i, h in enumerate(hosts) if h is not None and np.isfinite(x[i])]
    labels = tuple(hosts[i] for i in keep)
    groups = [g for g in _machine_groups(labels)[0] if g.size >= 2]
    if len(groups) < 2:
        return None
    xs = x[keep]
    sub = np.concatenate(groups)
    tau2, *_ = _components(xs[sub][None, :], tuple(labels[i] for i in sub), np.zeros(1))
    return None if tau2 is None else float(tau2[0])


@lru_cache(maxsize=64)
def chi2_median_factor(df: int) -> float:
    """df / median of chi^2(df): scales a variance estimated with df degrees of freedom
    to a median-unbiased value (2.2 for 1 df, 1.44 for 2, 1.19 for 4)."""
    if df <= 0:
        return 1.0
    return df / (2.0 * float(special.gammaincinv(df / 2.0, 0.5)))


@lru_cache(maxsize=256)
def _machine_groups(labels: tuple[str, ...]) -> tuple[list[np.ndarray], np.ndarray]:
    """Run indices per machine and their sizes (the same for every metric of a run)."""
    idx: dict[str, list[int]] = {}
    for i, hk in enumerate(labels):
        idx.setdefault(hk, []).append(i)
    groups = [np.array(v, dtype=np.intp) for v in idx.values()]
    return groups, np.array([g.size for g in groups])
