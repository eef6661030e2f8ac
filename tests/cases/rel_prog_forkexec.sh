#!/usr/bin/env bash
# A bash script under LD_PRELOAD=build/libhakmem.so that forks and execs
# 3000 processes: 1500 command substitutions $(echo $i) (fork of the
# hakmem-using shell, no exec) and 1500 execs of /bin/true (each a new
# process that loads hakmem), plus a pipeline every 100 iterations.  The
# count must come out exact, and equal to the run without hakmem.
set -euo pipefail
. tests/cases/core_lib.sh
command -v bash >/dev/null || skip "bash not installed"
[[ -x /bin/true ]] || skip "/bin/true missing"
need "$SO"
script='
grep -q libhakmem /proc/$$/maps && echo "hakmem=yes" || echo "hakmem=no"
n=0 s=0
for ((i = 0; i < 1500; i++)); do
  x=$(echo $i)
  [[ $x == "$i" ]] && n=$((n + 1))
  /bin/true && n=$((n + 1))
  s=$((s + x))
  if ((i % 100 == 0)); then
    y=$(printf "%s\n" $i a b c | sort)
    y=${y%%$'\n'*}
    [[ $y == "$i" ]] || echo "bad pipeline output: $y"
  fi
done
echo "processes=$n sum=$s"
'
t0=$(date +%s.%N)
ref=$(bash -c "$script") || die "the script fails without hakmem"
t1=$(date +%s.%N)
out=$(env LD_PRELOAD="$SO" bash -c "$script") || die "the script fails under hakmem: $out"
t2=$(date +%s.%N)
echo "without hakmem: $(tr '\n' ' ' <<<"$ref") ($(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')s)"
echo "with hakmem:    $(tr '\n' ' ' <<<"$out") ($(awk -v a="$t1" -v b="$t2" 'BEGIN{printf "%.1f", b-a}')s)"
grep -qx 'hakmem=yes' <<<"$out" || die "libhakmem.so was not loaded in the shell"
grep -qx 'processes=3000 sum=1124250' <<<"$out" || die "wrong count under hakmem"
[[ ${ref#hakmem=no} == "${out#hakmem=yes}" ]] || die "output differs from the run without hakmem"
