import os

CACHE = os.environ.get("GATE_ATTEMPTS_CACHE", "/tmp/gate-attempts")
os.makedirs(CACHE, exist_ok=True)

import pickle
import sys

import numpy as np

sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parent)); sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parents[1]))
from scan import scan
from series import EFFECTS, make_series

MODELS=["gauss1","gauss3","gauss8","student_t","bimodal","ar1","h200"]
def cell(args):
    model,m,reps,seed=args
    res=pickle.load(open(f'{CACHE}/c_{model}_{m}_{seed}.pkl','rb'))
    rng=np.random.default_rng([seed, MODELS.index(model), m])
    for e in EFFECTS:
        ss=[make_series(model,e,rng,tau=40,m=m) for _ in range(reps)]
        for s,recs in zip(ss,res[e]):
            x=s.summaries; tw=s.twin_summaries
            for r in recs:
                t=r['t']
                r['sc']=scan(x[:t],float(x[t]))[0]
                if 'jr' in r or r['sc']<=0.05:
                    p,own,rown,fl=scan(x[:t],float(x[t]),rerun=float(tw[t]))
                    r['scp']=p; r['sown']=own; r['srown']=rown; r['sfl']=fl
    pickle.dump(res, open(f'{CACHE}/d_{model}_{m}_{seed}.pkl','wb'))
    return model,m
if __name__=='__main__':
    from multiprocessing import Pool
    reps=int(sys.argv[1]); seed=int(sys.argv[2])
    jobs=[(mo,m,reps,seed) for mo in MODELS for m in (1,5)]
    with Pool(2) as p:
        for r in p.imap_unordered(cell, jobs): print(r, flush=True)
