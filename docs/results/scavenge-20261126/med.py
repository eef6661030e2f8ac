import sys, statistics as st
# med.py file : groups by (variant, name): cols 3 elapsed, 4 maxrss KB, 5 minflt
d = {}
order = []
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) < 5: continue
    k = (f[0], f[1])
    if k not in d: d[k] = []; order.append(k)
    d[k].append((float(f[2]), float(f[3]) / 1024, int(f[4])))
for k in order:
    v = d[k]; t = [x[0] for x in v]; r = [x[1] for x in v]; fl = [x[2] for x in v]
    print(f"{k[0]:12s} {k[1]:6s} time {st.median(t):.3f} ({min(t):.3f}-{max(t):.3f}) rss {st.median(r):.1f} ({min(r):.1f}-{max(r):.1f}) faults {int(st.median(fl))} n={len(v)}")
