"""Score the tma=1 plans (lab/fewtile/tma_plan.py): tma=1 presets against tma=0 presets, 64 x 128, and each against the
best baseline, per class (best layout each, geomean over shapes).

    python3 -m lab.fewtile.tma_score RUN.parquet [RUN.parquet ...]
"""
import pandas as pd, numpy as np, sys
BASE=['torch','cublas','cublaslt','cublaslt-autotune']
def gm(x): return float(np.exp(np.log(x).mean()))
for f in sys.argv[1:]:
    d=pd.read_parquet(f)
    print(f, len(d), d.status.value_counts().to_dict())
    bad=d[d.status!='ok']; 
    if len(bad): print(bad[['shape','method','layout','status','status_reason']].to_string()[:2000])
    ok=d[d.status=='ok']
    g=ok.groupby(['shape','method']).device_us_median.min().unstack()
    ptr=[c for c in g.columns if c.startswith('triton_splitk') and 'tma=0' in c]
    tma=[c for c in g.columns if c.startswith('triton_splitk') and 'tma=1' in c and 'block_n=128' not in c]
    wide=[c for c in g.columns if 'block_n=128' in c and 'tma=1' in c]
    base=g[BASE].min(axis=1)
    r=g[ptr].min(axis=1)/g[tma].min(axis=1)
    print('  better tma=1 preset over better tma=0 preset: %.3fx (min %.3f max %.3f), tma faster on %d of %d'%(gm(r),r.min(),r.max(),(r>1).sum(),len(r)))
    for t,p in zip(sorted(tma),sorted(ptr)):
        rr=g[p]/g[t]; print('   same tile', t.split(',')[:2], '%.3fx'%gm(rr.dropna()))
    rw=g[ptr].min(axis=1)/g[wide].min(axis=1); print('  64x128 tma over better ptr preset: %.3fx, faster on %d'%(gm(rw.dropna()), (rw>1).sum()))
    print('  over best baseline: ptr presets %.3fx, tma presets %.3fx, wide %.3fx, library %.3fx, best of all ours %.3fx'%(
        gm(base/g[ptr].min(axis=1)), gm(base/g[tma].min(axis=1)), gm((base/g[wide].min(axis=1)).dropna()), gm(base/g['library']),
        gm(base/g[ptr+tma+wide+['library']].min(axis=1))))
    print('  best of library and tma=0 presets over best baseline: %.3fx; adding tma=1: %.3fx'%(gm(base/g[ptr+['library']].min(axis=1)), gm(base/g[ptr+tma+wide+['library']].min(axis=1))))

