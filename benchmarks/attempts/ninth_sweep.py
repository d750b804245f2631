"""Ninth round (2026-12-01): the gate with a windowed CUSUM path, over cached gate runs.

Exploration harness, not part of the product (see README.md here). Steps (2 cores):

    python benchmarks/attempts/ninth_cache_gate.py 0 200        # the gate's runs, seed 0 (~4 min)
    python benchmarks/attempts/ninth_sweep.py 0 4,5 2.5 0.5     # beside the gate: H, clip, k
    REPLACE=1 python benchmarks/attempts/ninth_sweep.py 0 4 2.5 0.5   # instead of its windows
    ALONE=1 ALL=1 python benchmarks/attempts/ninth_sweep.py 0 4 2.5 0.5   # alone, every baseline
    ALONE=1 GUARD=1 python benchmarks/attempts/ninth_sweep.py 0 4 2.5 0.5 # alone, guarded
    python benchmarks/attempts/ninth_standin.py base,winhold,iid 0 gauss1,gauss3 det  # confirm rules

Cache files go to $GATE_ATTEMPTS_CACHE/ninth (default /tmp/gate-attempts/ninth).
"""
import sys, pickle, glob, itertools
sys.path[:0] = [str(__import__("pathlib").Path(__file__).resolve().parents[1]), str(__import__("pathlib").Path(__file__).resolve().parents[2])]
import numpy as np
import bench_gates as B
import os
REPLACE = bool(os.environ.get('REPLACE'))
ALONE = bool(os.environ.get('ALONE'))

def load(model, m, seed):
    d = pickle.load(open(os.environ.get("GATE_ATTEMPTS_CACHE", "/tmp/gate-attempts") + f"/ninth/{model}_{m}_{seed}.pkl", "rb"))
    out = {}
    for e, rows in d.items():
        X = np.array([r[0] for r in rows]); T = np.array([r[1] for r in rows])
        A = np.array([r[2] for r in rows]); C = np.array([r[3] for r in rows])
        S = np.array([r[4] for r in rows]); I = np.array([r[5] for r in rows]); R = np.array([r[6] for r in rows]); Wn = np.array([r[7] for r in rows])
        out[e] = (X, T, A, C, S, I, R, Wn)
    return out

def cusum_first(X, T, C, S, I, R, ts, H, G=None, k=0.5, clip=2.5, J=10, above=True, onlyind=True, gate_rr=True):
    X = X.copy(); n = len(X); first = np.full(n, -1)
    for i, t in enumerate(ts):
        lo = t - J + 1
        def stat(Xm):
            z = (Xm[:, lo:t + 1] - C[:, i:i + 1]) / S[:, i:i + 1]
            zc = np.clip(z, -3, clip) - k
            return np.max(np.cumsum(zc[:, ::-1], axis=1), axis=1)
        ok = G[:, i] if G is not None else (I[:, i] if (onlyind and not os.environ.get("ALL")) else np.ones(n, bool))
        trip = (stat(X) > H) & ok
        if not trip.any():
            if gate_rr: X[R[:, i], t] = T[R[:, i], t]
            continue
        X2 = X.copy(); X2[:, t] = T[:, t]
        alarm = trip & (stat(X2) > H)
        if above: alarm &= T[:, t] > C[:, i]
        si = trip & ~alarm; X[si, t] = T[si, t]
        first[alarm & (first < 0)] = i
        if gate_rr: X[R[:, i], t] = T[R[:, i], t]
    return first

from gates.robust import center_scale, rho_lower
_GC = {}
def guard(X, ts, key):
    if key in _GC: return _GC[key]
    G = np.zeros((len(X), len(ts)), bool)
    for r in range(len(X)):
        for i, t in enumerate(ts):
            base = X[r, max(0, t - 49): t - 9]
            c, s = center_scale(base, None); z = (base - c) / s
            nb, ng = int((z > 2).sum()), int((z < -2).sum())
            G[r, i] = rho_lower(base, c, s) <= RHO and nb - ng <= 2
    _GC[key] = G
    return G
RHO = float(os.environ.get("RHO", "0.2"))
def evaluate(d, **kw):
    r = {}
    for e, (X, T, A, C, S, I, R, Wn) in d.items():
        ts0 = B.GATED if e in ("null", "spike") else B.AFTER
        G = guard(X, ts0, (id(d), e)) if os.environ.get("GUARD") else None
        if G is not None: kw = {**kw, "G": G}
        g0 = np.array([np.argmax(a) if a.any() else -1 for a in A])
        if REPLACE: A = A & ((Wn == 1) | ~(G if G is not None else I))
        if ALONE: A = np.zeros_like(A)
        ts = B.GATED if e in ("null", "spike") else B.AFTER
        cf = cusum_first(X, T, C, S, I, R, ts, **kw) if kw.get("H", 0) < 1e8 else np.full(len(X), -1)
        gf = np.array([np.argmax(a) if a.any() else -1 for a in A])
        both = np.where((gf >= 0) & (cf >= 0), np.minimum(gf, cf), np.maximum(gf, cf))
        if e in ("null", "spike"):
            r[e] = (np.mean(both >= 0), np.mean(g0 >= 0))
        else:
            r[e] = (np.mean(both >= 0), np.mean(g0 >= 0), np.mean(both == 0), np.mean(g0 == 0))
    return r

if __name__ == "__main__":
    seed = int(sys.argv[1]); Hs = [float(h) for h in sys.argv[2].split(",")]
    clip = float(sys.argv[3]) if len(sys.argv) > 3 else 2.5
    k = float(sys.argv[4]) if len(sys.argv) > 4 else 0.5
    models = sys.argv[5].split(",") if len(sys.argv) > 5 else list(B.NOISE_MODELS)
    for model in models:
        for m in (1, 5):
            _GC.clear()
            try: d = load(model, m, seed)
            except FileNotFoundError: continue
            for H in Hs:
                r = evaluate(d, H=H, clip=clip, k=k)
                print(f"{model:9s} m={m} H={H}: null {r['null'][1]*100:.1f}->{r['null'][0]*100:.1f} spike {r['spike'][1]*100:.1f}->{r['spike'][0]*100:.1f} | "
                      + " ".join(f"{e} {r[e][1]*100:.0f}->{r[e][0]*100:.0f}" for e in B.DETECT_EFFECTS), flush=True)
