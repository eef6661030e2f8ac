#!/bin/bash
# usage: cr.sh N variant name=lib[:ENV=V,ENV2=V]...  ; prints variant name elapsed maxrssKB minflt user sys
cd /work/main
N=$1; shift; V=$1; shift
case $V in
 churn) E="THREADS=2 ROUNDS=400";; churn8) E="THREADS=8 ROUNDS=8";; churn64) E="THREADS=64 ROUNDS=10 CHURN_ALLOCS=500";;
 churn_small) E="THREADS=2 ROUNDS=800 LARGE=0";; churn_tasks) E="CHURN_MODE=tasks THREADS=2 TASKS=10000";; esac
for i in $(seq $N); do for a in "$@"; do n=${a%%=*}; r=${a#*=}; lib=${r%%:*}; ev=""; [[ $r == *:* ]] && ev=$(echo ${r#*:} | tr ',' ' ')
  /usr/bin/time -f "%e %M %R %U %S" -o /tmp/c10/t.$$ env $E $ev LD_PRELOAD=$lib build/bench/churn >/tmp/c10/o.$$ 2>&1 || { echo FAIL $n >&2; cp /tmp/c10/o.$$ /tmp/fails/cr.$V.$n.$$.$i; cp /tmp/c10/t.$$ /tmp/fails/cr.$V.$n.$$.$i.t; continue; }
  echo "$V $n $(cat /tmp/c10/t.$$)"
done; done
