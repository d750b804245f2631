"""Cache stage-1 and confirm judgements per cell for fast rule search."""
import os

CACHE = os.environ.get("GATE_ATTEMPTS_CACHE", "/tmp/gate-attempts")
os.makedirs(CACHE, exist_ok=True)

import math
import pickle
import sys

import numpy as np

sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parents[2])); sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parents[1]))
from series import EFFECTS, make_series

from gates import stats

GATED=list(range(30,60)); AFTER=list(range(40,50))
LOOSE=0.2
def rec(j):
    e=j.extras
    return dict(pw=j.p_worse, k=j.window, rel=j.rel_change, own=j.own_change, floor=j.floor,
                p1=e.get('p_run_worse',1.0), p3=e.get('p_w3_worse',1.0), p10=e.get('p_w10_worse',1.0),
                s1c=e.get('s1c',e.get('s1',0.0)), nb=j.n_baseline, z=j.z)
def one(s, ts):
    x=s.summaries; tw=s.twin_summaries; out=[]
    for t in ts:
        j=stats.judge_summaries(x[:t], float(x[t]), sign=1)
        r=dict(t=t, j1=rec(j))
        if j.p_worse<=LOOSE and j.own_change is not None and j.own_change>0:
            jr=stats.judge_summaries(x[:t], float(tw[t]), sign=1)
            s1c=r['j1']['s1c']
            jp=stats.judge_summaries(x[:t], 0.5*(float(x[t])+float(tw[t])), sign=1, extra_var=-0.5*s1c*s1c)
            se_d=math.sqrt(max(2*s1c*s1c,1e-300)); df=max(stats.QN_EFF*(j.n_baseline-1),2.0)
            r.update(jr=rec(jr), jp=rec(jp), pcons=stats.predictive_z_pvalue((x[t]-tw[t])/se_d, df))
        out.append(r)
    return out
def cell(args):
    model,m,reps,seed=args
    rng=np.random.default_rng([seed, ["gauss1","gauss3","gauss8","student_t","bimodal","ar1","h200"].index(model), m])
    res={}
    for e in EFFECTS:
        ss=[make_series(model,e,rng,tau=40,m=m) for _ in range(reps)]
        ts=AFTER if e not in ('null','spike') else GATED
        res[e]=[one(s,ts) for s in ss]
    pickle.dump(res, open(f'{CACHE}/c_{model}_{m}_{seed}.pkl','wb'))
    return model,m
if __name__=='__main__':
    from multiprocessing import Pool
    reps=int(sys.argv[1]); seed=int(sys.argv[2])
    models=sys.argv[3].split(',') if len(sys.argv)>3 else ["gauss1","gauss3","gauss8","student_t","bimodal","ar1","h200"]
    jobs=[(mo,m,reps,seed) for mo in models for m in (1,5)]
    with Pool(2) as p:
        for r in p.imap_unordered(cell, jobs): print(r, flush=True)
