import os

CACHE = os.environ.get("GATE_ATTEMPTS_CACHE", "/tmp/gate-attempts")
os.makedirs(CACHE, exist_ok=True)

import math
import sys

import numpy as np

sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parents[2]))
from gates import stats

CLIP=2.0; KMAX=10; KMIN=2
_rng=np.random.default_rng(0)
_sim=_rng.standard_normal((400000,KMAX))
def _scanstat(v):  # v: (..., KMAX) newest last -> max_k>=KMIN of backward partial sums / sqrt(k)
    cs=np.cumsum(v[..., ::-1], axis=-1)
    k=np.arange(1,KMAX+1)
    z=cs/np.sqrt(k)
    return z[..., KMIN-1:].max(axis=-1)
_null=np.sort(_scanstat(_sim))
def p_gauss(S):
    n=_null.size; c=n-np.searchsorted(_null,S,side='left')
    if c>=50: return c/n
    # tail beyond simulated: exponential fit on the top 2000
    top=_null[-2000:]; u=top[0]; beta=float((top-u).mean())
    return 2000/n*math.exp(-(S-u)/beta)
BOOT=np.random.default_rng(1).integers(0,30,(256,KMAX))
def scan(x_hist, value, rerun=None, params=stats.DEFAULTS):
    full=np.append(x_hist,value)
    W=params.window
    base=full[-KMAX-W:-KMAX]; n=base.size
    c=stats._median(base); s=stats.robust_scale(base); s=max(s,1e-9*abs(c),1e-15)
    rho,rho_hi=stats._rho_corrected(base,c,s)
    ub=np.clip((base-c)/s,-CLIP,CLIP); mu=ub.mean(); sd=ub.std(ddof=1)
    if sd<=0: return 1.0, 0, 0, 0
    v=(np.clip((full[-KMAX:]-c)/s,-CLIP,CLIP)-mu)/sd
    k=np.arange(1,KMAX+1)
    vf=np.array([stats.ar1_variance_factor(rho_hi,int(kk)) for kk in k])
    wts=np.ones(KMAX)
    if rerun is not None:
        vr=(np.clip((rerun-c)/s,-CLIP,CLIP)-mu)/sd
        v=v.copy(); v[-1]=0.5*(v[-1]+vr); wts[-1]=0.5
    cs=np.cumsum(v[::-1]); var=np.cumsum(wts[::-1])  # iid variance of backward sums
    z=cs/np.sqrt(var*vf*(1+k/n))
    S=float(z[KMIN-1:].max())
    p=p_gauss(S)
    # bootstrap bound over the baseline's own standardized clipped residuals
    vb=(ub-mu)/sd
    bs=_scanstat(vb[BOOT[:, :]] if n==30 else vb[np.random.default_rng(n).integers(0,n,(256,KMAX))])
    cnt=int((bs>=S).sum())
    if cnt: p=max(p,(cnt+1)/257)
    own=(value-c)/abs(c); rown=(rerun-c)/abs(c) if rerun is not None else None
    return p, own, rown, 0.5*s/abs(c)
