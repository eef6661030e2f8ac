import sys, statistics as st, collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<7: continue
    d[(f[0],f[1])].append((float(f[2]),int(f[3])/1024,float(f[5])+float(f[6])))
vs=[]; als=[]
for (v,a) in d:
    if v not in vs: vs.append(v)
    if a not in als: als.append(a)
for v in vs:
    med={a:(st.median(x[0] for x in d[(v,a)]),st.median(x[1] for x in d[(v,a)])) for a in als if (v,a) in d}
    lean=min(med['glibc'][1],med['mi241'][1])
    print(v, ' '.join(f"{a}:{med[a][0]:.2f}s/{med[a][1]:.1f}MB" for a in als if a in med))
    h=med['hakmem']; print('   hakmem time/mi241 %.2f  rss/leaner %.2f'%(h[0]/med['mi241'][0], h[1]/lean), ' ranges hak t', min(x[0] for x in d[(v,'hakmem')]), max(x[0] for x in d[(v,'hakmem')]), 'mi241 t', min(x[0] for x in d[(v,'mi241')]), max(x[0] for x in d[(v,'mi241')]))
