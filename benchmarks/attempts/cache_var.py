import os

CACHE = os.environ.get("GATE_ATTEMPTS_CACHE", "/tmp/gate-attempts")
os.makedirs(CACHE, exist_ok=True)

import math
import pickle
import sys

sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parent)); sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parents[2]))
from gates import stats

F=float(sys.argv[1]); tag=sys.argv[2]
def rc(x,c,s):
    r=stats.lag1_autocorr(x,c,s)
    if r<=0: return 0.0,0.0
    n=x.size; r=min(0.9,r+(1+3*r)/n)
    return r, min(0.9, r+F*math.sqrt(max(1-r*r,0.0)/n))
stats._rho_corrected=rc
import cache


def cell(args):
    model,m,reps,seed=args
    import numpy as np
    from series import EFFECTS, make_series
    rng=np.random.default_rng([seed, ["gauss1","gauss3","gauss8","student_t","bimodal","ar1","h200"].index(model), m])
    res={}
    for e in EFFECTS:
        ss=[make_series(model,e,rng,tau=40,m=m) for _ in range(reps)]
        ts=cache.AFTER if e not in ('null','spike') else cache.GATED
        res[e]=[cache.one(s,ts) for s in ss]
    pickle.dump(res, open(f'{CACHE}/c{tag}_{model}_{m}_{seed}.pkl','wb'))
    return model,m
if __name__=='__main__':
    from multiprocessing import Pool
    models=sys.argv[3].split(','); seeds=[int(x) for x in sys.argv[4].split(',')]
    jobs=[(mo,m,200,s) for mo in models for m in (1,5) for s in seeds]
    with Pool(2) as p:
        for r in p.imap_unordered(cell, jobs): print(r, flush=True)
