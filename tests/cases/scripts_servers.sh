#!/usr/bin/env bash
# `scripts/programs.sh servers` in a short setting (RUNS=1, 2-second phases, a
# small data set) under glibc and hakmem: every row (mariadb_ps, mariadb_rw,
# memcached, redis_server, ruby) for both, in the interleaved order, with a
# positive figure, server CPU, operation count and peak RSS; every check of the
# results passed and logged; the report has its three tables; every server the
# script started is gone afterwards.  Then a library that does not preload is
# a failed run and exit status 1, not a figure.  Skipped when a server or its
# load generator is not installed (scripts/setup.sh installs them).
# serial: binds TCP ports on 127.0.0.1, starts servers, timing-sensitive
set -euo pipefail
. tests/cases/core_lib.sh
for c in mariadb-install-db sysbench memcached memcstat memccp redis-server redis-benchmark ruby python3; do
  command -v "$c" >/dev/null 2>&1 || skip "$c not installed (scripts/setup.sh installs the servers)"
done
command -v memaslap >/dev/null 2>&1 || command -v memcaslap >/dev/null 2>&1 || skip "memaslap not installed"
[[ -x /usr/sbin/mariadbd ]] || command -v mariadbd >/dev/null 2>&1 || skip "mariadbd not installed"
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
short=(NO_BUILD=1 RUNS=1 DURATION=2 WARMUP=1 TABLES=2 TABLE_SIZE=1000 REQUESTS=3000 JOBS=1000)

echo "== servers mode, glibc and hakmem"
O=$tmp/out
rc=0
env "${short[@]}" ALLOCS="glibc hakmem" OUTDIR="$O" bash scripts/programs.sh servers >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
sed 's/^/    /' "$tmp/stderr"
((rc == 0)) || bad "programs.sh servers: exit status $rc"
[[ -s $O/runs.csv ]] || die "no runs.csv"
got=$(awk -F, 'NR > 1 { printf "%s:%s ", $1, $2 }' "$O/runs.csv")
want="mariadb_ps:glibc mariadb_rw:glibc mariadb_ps:hakmem mariadb_rw:hakmem memcached:glibc memcached:hakmem "
want+="redis_server:glibc redis_server:hakmem ruby:glibc ruby:hakmem "
[[ $got == "$want" ]] || bad "rows: got '$got', want '$want'"
# program,alloc,run,figure,unit,cpu_s,ops,peak_rss_kib,status
wrong=$(awk -F, 'NR > 1 && !($4 > 0 && $6 > 0 && $8 > 0 && $9 == "ok" && ($1 == "ruby" || $7 > 0))' "$O/runs.csv")
[[ -z $wrong ]] || bad "rows without a figure, CPU, operations or RSS, or not ok: $wrong"
echo "ok   $(($(wc -l <"$O/runs.csv") - 1)) rows"
for s in mariadb memcached redis; do
  for a in glibc hakmem; do
    grep -q '^checked: ' "$O/logs/$s-$a-1" || bad "$s $a: no check logged"
    ! grep -q '^check: ' "$O/logs/$s-$a-1" || bad "$s $a: $(grep '^check: ' "$O/logs/$s-$a-1")"
  done
done
echo "ok   $(grep -h '^checked: ' "$O"/logs/*-hakmem-1 | tr '\n' ';')"
grep -q 'libhakmem.so' "$O/logs/memcached-hakmem-1.server" || bad "memcached was not started with hakmem preloaded"
for t in 'Figure: median, CV' 'CPU time of the server' 'Peak RSS of the server'; do
  grep -q "^## $t" "$O/report.md" || bad "report.md has no table '$t'"
done
grep -qx 'checks not passed (wrong results, left out of the tables): 0' "$O/report.md" || bad "report.md: checks not passed"
grep -q '^| mariadb_ps | \*\*[0-9.]*\*\* queries/s' "$O/report.md" || bad "report.md has no mariadb_ps row"
cmp -s "$O/report.md" "$tmp/stdout" || bad "the report is not printed"
pids=$(sed -n 's/^server pid \([0-9]*\).*/\1/p' "$O"/logs/*.server)
(($(wc -w <<<"$pids") == 6)) || bad "want 6 server pids logged, got: $pids"
for p in $pids; do
  ! kill -0 "$p" 2>/dev/null || bad "server pid $p still runs"
done
echo "ok   report; the $(wc -w <<<"$pids") servers stopped"

echo "== a library that does not preload: a failed run, exit status 1"
echo "not a library" >"$tmp/fake.so"
rc=0
env "${short[@]}" ALLOCS="glibc mimalloc" LIB_mimalloc="$tmp/fake.so" PROGRAMS=memcached OUTDIR="$tmp/fake" \
  bash scripts/programs.sh servers >/dev/null 2>"$tmp/stderr" || rc=$?
((rc == 1)) || bad "exit status $rc, want 1"
grep -q '^memcached,mimalloc,1,,,,,,failed$' "$tmp/fake/runs.csv" || bad "the run under the broken library did not fail"
grep -q 'is not mapped in the server' "$tmp/stderr" || bad "no message about the failed preload"
echo "ok   $(grep -m 1 'not mapped' "$tmp/stderr")"

echo "== bad settings: exit status 2"
for v in DURATION=0 TABLE_SIZE=x PROGRAMS=nope; do
  rc=0
  env NO_BUILD=1 "$v" OUTDIR="$tmp/x" bash scripts/programs.sh servers >/dev/null 2>&1 || rc=$?
  ((rc == 2)) || bad "$v: exit status $rc, want 2"
done
echo "ok"

checks_done servers
echo "servers mode checked"
