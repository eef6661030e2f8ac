#!/bin/bash
# usage: run.sh N variant alloc...   prints: variant alloc elapsed maxrss_MB minflt user sys
cd /work/main
N=$1; shift; V=$1; shift
declare -A L=( [hakmem]=/work/main/build/libhakmem.so [mi241]=/work/shared/peers/mimalloc-2.4.1/libmimalloc.so [mi343]=/work/shared/peers/mimalloc-3.4.3/libmimalloc.so [glibc]= [tc]=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 )
for a in "$@"; do [[ $a == *=* ]] && L[${a%%=*}]=${a#*=}; done
case $V in
 churn) E="THREADS=2 ROUNDS=400";; churn8) E="THREADS=8 ROUNDS=8";; churn64) E="THREADS=64 ROUNDS=10 CHURN_ALLOCS=500";;
 churn_small) E="THREADS=2 ROUNDS=800 LARGE=0";; churn_tasks) E="CHURN_MODE=tasks THREADS=2 TASKS=10000";; esac
for i in $(seq $N); do for a in "$@"; do a=${a%%=*}
  /usr/bin/time -f "%e %M %R %U %S" -o /tmp/c10/t.$$ env $E $( [[ $a == *thp* ]] && echo XTHP=${XTHPV:-1} ) LD_PRELOAD=${L[$a]} ${EXTRA_ENV:-} build/bench/churn >/tmp/c10/o.$$ 2>&1 || echo FAIL $a
  echo "$V $a $(cat /tmp/c10/t.$$)"
done; done
