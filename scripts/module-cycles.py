#!/usr/bin/env python3
"""Import circles between the proxy crate's top-level modules (src/*, not the binary): every
`crate::MODULE` reference outside comments and test modules is an edge. Prints each circle and
the lines that make it, and exits 1 when there is one (ARCHITECTURE.md: no room uses a room
listed after it)."""
import re,glob,sys
mods={};where={}
for f in glob.glob('src/**/*.rs',recursive=True):
    if f.startswith('src/bin'): continue
    rel=f[4:]; top=rel.split('/')[0].replace('.rs','')
    if top=='lib': continue
    s=open(f).read().split('#[cfg(test)]')[0]
    for ln,line in enumerate(s.split('\n'),1):
        if line.strip().startswith('//'): continue
        for m in re.findall(r'crate::([a-z_]+)',line):
            if m!=top:
                mods.setdefault(top,set()).add(m); where.setdefault((top,m),[]).append(f"{f}:{ln}")
sys.setrecursionlimit(10000)
idx={};low={};st=[];on=set();res=[];c=[0]
def sc(v):
    idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
    for w in mods.get(v,()):
        if w not in idx: sc(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        comp=[]
        while True:
            w=st.pop();on.discard(w);comp.append(w)
            if w==v: break
        if len(comp)>1: res.append(comp)
for v in list(mods):
    if v not in idx: sc(v)
for comp in res:
    print(sorted(comp))
    for a in sorted(comp):
        for b in sorted(x for x in mods[a] if x in comp):
            print(f"  {a} -> {b}: {where[(a,b)][:2]}")
sys.exit(1 if res else 0)
