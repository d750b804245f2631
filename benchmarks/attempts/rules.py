import os

CACHE = os.environ.get("GATE_ATTEMPTS_CACHE", "/tmp/gate-attempts")
os.makedirs(CACHE, exist_ok=True)

import json
import pickle
import sys

import numpy as np

MODELS=["gauss1","gauss3","gauss8","student_t","bimodal","ar1","h200"]
EFF=["step1","step2","step5","step10","step20","drift"]
def load(seed):
    return {(mo,m):pickle.load(open(f'{CACHE}/c_{mo}_{m}_{seed}.pkl','rb')) for mo in MODELS for m in (1,5)}
def ref():
    d=json.load(open(str(__import__('pathlib').Path(__file__).resolve().parents[1]/'results'/'bench_gates.json')))
    return d
def peff(j,w):
    return min(j['p1']/w[0], j['p3']/w[1], j['p10']/w[2])
def alarm(r, R):
    j=r['j1']
    if j['own'] is None or peff(j,R['w'])>R['L1'] or j['own']<=j['floor']: return False
    if 'jr' not in r: return False
    return R['confirm'](r, R)
def conf_current(r,R):
    jr=r['jr']; j=r['j1']
    if not (jr['pw']<=0.05 and jr['own']>jr['floor'] and jr['rel']>jr['floor']): return False
    if r['pcons']<=0.01: return False
    k=min(((j['p1']/R['w'][0],1),(j['p3']/R['w'][1],3),(j['p10']/R['w'][2],10)))[1]
    if jr['k']>1 and r['jp']['p1']>0.05: return False
    return True
def conf_pooled(r,R):
    jr=r['jr']; jp=r['jp']
    if r['pcons']<=R['Lcons']: return False
    if jr['own']<=R['a']*jr['floor']: return False
    if R.get('pooled_k1'):
        return jp['p1']<=R['Lp']
    return peff(jp,R['w'])<=R['Lp'] and jp['p1']<=R.get('Lp1',1.0)
def evaluate(C, R):
    out={}
    for key,res in C.items():
        fa=np.mean([any(alarm(r,R) for r in s) for s in res['null']])
        sp=np.mean([any(alarm(r,R) for r in s) for s in res['spike']])
        det={}
        for e in EFF:
            firsts=[]
            for s in res[e]:
                f=None
                for i,r in enumerate(s):
                    if alarm(r,R): f=i;break
                firsts.append(f)
            det[e]=(np.mean([f==0 for f in firsts]), np.mean([f is not None for f in firsts]))
        out[key]=dict(fa=fa,sp=sp,det=det)
    return out
def summary(out, refd=None, verbose=False):
    worst=max(v['fa'] for v in out.values()); worst_sp=max(v['sp']-v['fa'] for v in out.values())
    w10=np.mean([v['det'][e][1] for v in out.values() for e in EFF])
    first=out[('gauss1',5)]['det']['step5'][0]
    line=f"worstFA {worst:.3f} spikeExcess {worst_sp:+.3f} meanW10 {w10:.3f} g1m5first {first:.2f}"
    if refd:
        miss_peer=miss_or=0
        for (mo,m),v in out.items():
            c=refd['cells'].get(f'{mo}|{m}') if isinstance(refd.get('cells'),dict) else None
    return line
def table(out):
    for (mo,m),v in out.items():
        print(f"{mo:9s} m={m} FA {v['fa']:.3f} sp {v['sp']:.3f} | "+" ".join(f"{e}:{v['det'][e][0]*100:.0f}/{v['det'][e][1]*100:.0f}" for e in EFF))
sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parents[1])); sys.path.insert(0,str(__import__('pathlib').Path(__file__).resolve().parents[2]))
import bench_gates as B

_REF=B._load(json.load(open(str(__import__('pathlib').Path(__file__).resolve().parents[1]/'results'/'bench_gates.json')))['results'])['cells']
def targets():
    T={}
    for (mo,m),c in _REF.items():
        for e in EFF:
            peer=B._best_peer(c,e,2); cus=c[('cusum-oracle','matched')].det[e][2]
            T[(mo,m,e)]=(peer, 0.9*cus)
    return T
TG=targets()
def score(out):
    miss=[];short=0
    for (mo,m),v in out.items():
        for e in EFF:
            peer,orc=TG[(mo,m,e)]; g=v['det'][e][1]; t=max(peer,orc)
            if g< t-1e-9: miss.append((mo,m,e,round(g,2),round(t,2))); short+=t-g
    return len(miss), short, miss
def report(name,out):
    n,sh,_=score(out)
    print(f"{name:40s} {summary(out)} miss {n} short {sh:.2f}", flush=True)
def conf_pool2(r,R):
    jr=r['jr']; jp=r['jp']
    if r['pcons']<=R['Lcons']: return False
    if jr['own']<=R['a']*jr['floor']: return False
    if jp['own']<=jp['floor']: return False
    return peff(jp,R['wp'])<=R['Lp']
from scipy.stats import norm


def loadd(seed):
    return {(mo,m):pickle.load(open(f'{CACHE}/d_{mo}_{m}_{seed}.pkl','rb')) for mo in MODELS for m in (1,5)}
def alarm_s(r,R):
    j=r['j1']
    if j['own'] is None: return False
    p1=R['w1']*0+j['p1']/R['w1']; ps=r['sc']/(1-R['w1'])
    if min(p1,ps)>R['L1'] or j['own']<=j['floor']: return False
    if 'scp' not in r: return False
    own,rown,fl=r['sown'],r['srown'],r['sfl']
    # transient?
    zc=(own-rown)/(np.sqrt(2)*2*fl) if fl>0 else 0
    if norm.sf(zc)<=R['Lcons']: return False
    if rown<=R['a']*fl: return False
    if 0.5*(own+rown)<=fl: return False
    pp1=r['jp']['p1']/R['w1'] if 'jp' in r else 1.0
    pps=r['scp']/(1-R['w1'])
    return min(pp1,pps)<=R['Lp']
def evaluate_s(C,R):
    global alarm
    old=alarm
    def a2(r,R): return alarm_s(r,R)
    alarm=a2
    try: return evaluate(C,R)
    finally: alarm=old
def conf_or(r,R):
    if conf_current(r,R): return True
    jr=r['jr']; jp=r['jp']
    if r['pcons']<=R['Lcons']: return False
    if jr['own']<=R['a']*jr['floor'] or jp['own']<=jp['floor']: return False
    return jp['p1']<=R['Lx']
def conf_pool3(r,R):
    jr=r['jr']; jp=r['jp']
    if r['pcons']<=R['Lcons']: return False
    if jr['own']<=R['a']*jr['floor']: return False
    if jp['own']<=jp['floor']: return False
    if jr['p1']>R['Lr']: return False
    return peff(jp,R['wp'])<=R['Lp']
