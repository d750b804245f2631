"""The sentence a confirm stage writes into its verdict: what decided, in words.

``gates.attempts`` judges a metric at its confirm stage (``decisions.Stage``) and sets
the verdict; these functions only word what its judgement found (the stage's
figures and the boundary it was held to), for the verdict's ``message`` that every
report surface shows. No decision is made here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gates.model import stats
from gates.model.decisions import CORROBORATE_RANK, EARLY_HOLD, FUTILITY, mixture_hold_p

__all__ = ["corroborate_message", "quantile_message", "rerun_message", "reruns_message"]


def _num(x: float | None) -> float:
    return float("nan") if x is None or not math.isfinite(x) else float(x)


def _chain_note(j: stats.Judgement, root: float | None, n: int) -> str:
    """The clause for a hold the first attempt's split test turned into a pass."""
    if not j.extras.chain_transient:
        return ""
    return (f"; but the first attempt {_num(root):.6g} is a transient against the mean of "
            f"its {n} reruns (p {j.extras.p_split:.2g}) and they are not clear on their own: "
            "pass")


def quantile_message(j: stats.Judgement, verdict: str, params: stats.GateParams) -> str:
    """A quantile trip's rerun (stage RERUN or RERUNS): the reruns' own quantile test."""
    k, n, a = j.extras.q_reruns, params.confirm_attempts, params.confirm_level
    what = {"regression": f"held at p <= {a:g}", "suspect": f"on track: {n} reruns decide at {a:g}"}
    return (f"the quantile test tripped; the least bad of {k} rerun(s) alone against its "
            f"baseline: p {j.extras.p_q_reruns:.2g}, "
            + what.get(verdict, f"pass (held only at p <= {a:g} after {n} reruns)"))


def rerun_message(j: stats.Judgement, verdict: str, value: float, first: float | None, *,
                  level: float, another: bool, transient: bool) -> str | None:
    """The first rerun's (stage RERUN) sentence, or None where it has none to say."""
    if transient:
        return (f"first attempt {_num(first):.6g} a transient against this rerun "
                f"(p {j.extras.p_split:.2g}): later baselines take this rerun's value")
    if verdict == "suspect" and j.extras.corroborate:
        kind = "a heavy-tailed" if j.extras.heavy else "a slightly autocorrelated"
        return (f"rerun {_num(value):.6g} beyond every run of {kind} baseline: "
                f"held only if the next rerun ranks among the worst "
                f"{CORROBORATE_RANK:g} of them")
    if (verdict == "regression" and another and stats.independent(j)
            and j.extras.p_run_worse <= mixture_hold_p(level)):
        return (f"rerun alone p {j.extras.p_run_worse:.2g}: holds alone at the "
                f"sequential rule's first boundary ({mixture_hold_p(level):.2g})")
    if verdict == "suspect":
        return (f"rerun alone p {j.extras.p_run_worse:.2g}"
                + (": beyond every baseline run, where that p rests on the fitted "
                   "tail; another rerun decides" if j.extras.beyond else
                   ": borderline, another rerun decides"))
    return None


def corroborate_message(j: stats.Judgement, previous: float | None, root: float | None) -> str:
    """The corroborating rerun's (stage CORROBORATE) sentence."""
    return (f"previous rerun {_num(previous):.6g} beyond every baseline run; this "
            f"rerun ranks p {j.extras.rank_worse:.2g} among them: held at "
            f"<= {CORROBORATE_RANK:g}" + _chain_note(j, root, 2))


def reruns_message(j: stats.Judgement, earlier: Sequence[float], carried: int,
                   roots: Sequence[str], root: float | None) -> str:
    """The sequential confirm's (stage RERUNS) sentence: ``earlier`` reruns before this
    one, ``carried`` reruns from the unheld confirms of ``roots``."""
    prev = ", ".join(f"{_num(e):.6g}" for e in earlier)
    n_all = len(earlier) + 1 + int(j.extras.carried)
    if j.extras.carried:
        prev += f"; {carried} carried from the unheld confirms of " + ", ".join(roots)
    level = j.extras.rerun_level  # set where these reruns decided outright
    return (f"mean of {n_all} reruns (earlier: {prev}) against means of "
            f"{n_all} baseline runs: "
            + (f"held at p <= {level:g}" if level is not None else
               f"held at p <= {EARLY_HOLD:g}, pass above "
               f"{FUTILITY:g}, else another rerun")
            + _chain_note(j, root, len(earlier) + 1))
