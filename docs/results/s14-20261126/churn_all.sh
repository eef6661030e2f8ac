#!/bin/bash
# all churn variants x peers, N runs interleaved
N=${N:-5}
P=/work/shared/peers
L="hakmem=/tmp/s14/base.so glibc= mi241=$P/mimalloc-2.4.1/libmimalloc.so mi343=$P/mimalloc-3.4.3/libmimalloc.so snmalloc=$P/snmalloc-0.7.5/libsnmallocshim.so jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
for v in churn churn_small churn_tasks churn8 churn64; do
  bash /work/main/docs/results/successor-20261124/run.sh $N $v $L
done
