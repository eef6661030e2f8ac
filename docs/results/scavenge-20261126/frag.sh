#!/bin/bash
# frag.sh N name=lib[:ENV=V,...] ... : fragment, interleaved; rss_final medians
N=$1; shift
out=/tmp/s12/frag.out; : > $out
for i in $(seq $N); do for a in "$@"; do n=${a%%=*}; r=${a#*=}; lib=${r%%:*}; ev=""; [[ $r == *:* ]] && ev=$(echo ${r#*:} | tr ',' ' ')
  [ "$lib" = glibc ] && lib=
  l=$(env $ev LD_PRELOAD=$lib /work/main/build/bench/fragment 2>&1 | grep RESULT)
  echo "$n $(echo "$l" | grep -o 'rss_final_kb=[0-9]*\|rss_grow_kb=[0-9]*\|elapsed_s=[0-9.]*\|minflt=[0-9]*' | tr '\n' ' ')" >> $out
done; done
python3 - $out <<'PY'
import sys, statistics as st, re
d = {}
for l in open(sys.argv[1]):
    f = l.split(); n = f[0]; kv = dict(x.split('=') for x in f[1:])
    d.setdefault(n, []).append(kv)
g = None
for n, v in d.items():
    r = [int(x['rss_final_kb'])/1024 for x in v]; t = [float(x['elapsed_s']) for x in v]; fl = [int(x['minflt']) for x in v]
    m = st.median(r)
    if n == 'glibc': g = m
    print(f"{n:10s} rss_final {m:7.1f} MB ({min(r):.1f}-{max(r):.1f}) time {st.median(t):.3f} s faults {int(st.median(fl))} n={len(v)}")
if g:
    for n, v in d.items():
        print(f"  {n} / glibc = {st.median([int(x['rss_final_kb'])/1024 for x in v])/g:.3f}")
PY
