#!/usr/bin/env bash
# scripts/programs.sh — real programs and servers under hakmem and its peers
# (issues #14, #27).
#
#   scripts/programs.sh          every program, RUNS interleaved runs each
#   scripts/programs.sh servers  the servers users run, under their load generators
#   scripts/programs.sh list     programs, servers and the allocators found
#   scripts/programs.sh --help
#
# Each program runs under each allocator (LD_PRELOAD; glibc: libc.so.6 itself,
# since Debian's redis-server is linked with jemalloc), run k of every
# allocator before run k+1 of any, in an order that turns by one each run:
#   redis    redis-server on 127.0.0.1 (a free port, no persistence) under the
#            allocator; redis-benchmark (glibc) sends SET, GET, INCR, LPUSH,
#            LPOP, SADD, HSET and MSET, 50,000 requests each from 50 clients;
#            figure: requests per second (all tests together), and the
#            server's peak RSS
#   python   /usr/bin/python3 with PYTHONMALLOC=malloc: 300,000 dict entries
#            of lists, strings and dicts, half deleted, the rest sorted
#   ruby     a job runner: 8 worker threads (taking turns under Ruby's global
#            lock) build, serialise to JSON, parse and cache 16,000 documents
#   sqlite   sqlite3 :memory:: 300,000 rows of text, an index, GROUP BY
#   g++      g++ -O2 of a file that includes <bits/stdc++.h>
#   perl     a hash of 1,000,000 strings, summed
#   xz       xz -6 -T1 of 6 MB of text
# The servers mode (the preload on the server only; each server started by the
# script and stopped by its process id; a fixed data set, a warm-up, timed
# phases, a check of the results; figures: throughput, the server's CPU time
# per operation in the timed phase, its peak RSS):
#   mariadb    mariadbd on a unix socket, a datadir in a temporary folder:
#              sysbench oltp_point_select and oltp_read_write, 16 clients, on
#              TABLES tables of TABLE_SIZE rows (rows mariadb_ps, mariadb_rw)
#   memcached  memcached on 127.0.0.1, 4 threads: memaslap (libmemcached-tools),
#              32 connections, 90 % gets, values of 1 byte to 16 KiB
#   redis      the redis program's load after a data set of 20,000 values and
#              a warm-up (row redis_server)
#   ruby       the ruby program (the server CPU is the job runner's)
# Environment (all optional):
#   RUNS=3             runs per program and allocator
#   PROGRAMS="..."     programs (servers) to run (default: all of the mode)
#   ALLOCS="..."       allocators (default: hakmem glibc mimalloc jemalloc tcmalloc,
#                      and mi241 when ../shared/peers is beside the checkout); absent
#                      ones are skipped and named
#                      (also known: mi343, snmalloc, and for the secure builds
#                      hakmem_secure, mi241_secure, hardened, scudo)
#   LIB_<alloc>=path   use this library for an allocator
#   ENV_<alloc>="VAR=value ..."  set these in the environment of an allocator's
#                      runs (e.g. ALLOCS="glibc hakmem hakprof" LIB_hakprof=build/libhakmem.so
#                      ENV_hakprof="HAKMEM_PROF=1 HAKMEM_PROF_PREFIX=/tmp/p": hakmem with
#                      heap profiling, beside hakmem without)
#   OUTDIR=dir         where to write (default results/<date>-<time>-<host>-programs
#                      or -servers)
#   NO_BUILD=1         do not run make (use the existing build/)
#   servers mode: DURATION=20 seconds of each timed phase (mariadb, memcached);
#   WARMUP=5 seconds of warm-up before them; TABLES=4, TABLE_SIZE=25000 (the
#   MariaDB data set); REQUESTS=50000 (redis-benchmark, per test, also in the
#   redis program); JOBS=16000 (the Ruby job runner, also in the ruby program)
# Output: OUTDIR/runs.csv
# (program,alloc,run,figure,unit,cpu_s,ops,peak_rss_kib,status) and
# OUTDIR/report.md: per program the median figure of each allocator, its ratio
# to glibc's (time: lower is better; /s: higher is better), its CV and range;
# the CPU time (servers: per operation); the median peak RSS.  status is ok,
# failed (no figure) or check_failed (the results were wrong); the servers mode
# exits with status 1 when a run failed or a check did not pass.  Needs
# redis-server, redis-tools, ruby, sqlite3, g++, perl, xz-utils and python3,
# and for the servers mariadb-server, sysbench, memcached and libmemcached-tools
# (scripts/setup.sh installs them); a program whose command is missing is
# skipped and named.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$ROOT/scripts/lib/common.sh"

MODE_ARG=${1:-run}
case $MODE_ARG in
  -h | --help | help)
    script_help
    exit 0
    ;;
  run | servers | list) ;;
  *)
    log "${0##*/}: unknown mode '$MODE_ARG' (servers, list, --help; settings go in the environment)"
    exit 2
    ;;
esac
[[ $# -le 1 ]] || die "too many arguments (settings go in the environment; see --help)"
# shellcheck source=scripts/lib/servers.sh
. "$ROOT/scripts/lib/servers.sh"

posint() { [[ ${!1} =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer (got '${!1}')"; }
RUNS=${RUNS:-3} DURATION=${DURATION:-20} WARMUP=${WARMUP:-5} TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-25000} REQUESTS=${REQUESTS:-50000} JOBS=${JOBS:-16000}
for v in RUNS DURATION WARMUP TABLES TABLE_SIZE REQUESTS JOBS; do posint $v; done
ALL_PROGRAMS=(redis python ruby sqlite g++ perl xz)
ALL_SERVERS=(mariadb memcached redis ruby)
if [[ $MODE_ARG == servers ]]; then KNOWN=("${ALL_SERVERS[@]}"); else KNOWN=("${ALL_PROGRAMS[@]}"); fi
read -r -a PROG_LIST <<<"${PROGRAMS:-${KNOWN[*]}}"
for p in "${PROG_LIST[@]}"; do
  [[ " ${KNOWN[*]} " == *" $p "* ]] || die "unknown program '$p' (known: ${KNOWN[*]})"
done
DEFAULT_ALLOCS="hakmem glibc mimalloc jemalloc tcmalloc"
[[ -d $PEERS_DIR ]] && DEFAULT_ALLOCS+=" mi241"
read -r -a ALLOC_LIST <<<"${ALLOCS:-$DEFAULT_ALLOCS}"

# The commands a program (or server) needs, for the "missing" check.
prog_cmds() {
  case $1 in
    redis) echo redis-server redis-cli redis-benchmark ;;
    python) echo /usr/bin/python3 ;;
    ruby) echo ruby ;;
    sqlite) echo sqlite3 ;;
    g++) echo g++ ;;
    perl) echo perl ;;
    xz) echo xz ;;
    mariadb) echo mariadb-install-db mariadb sysbench ;;
    memcached) echo memcached memcstat memccp memccat ;;
  esac
}
have_prog() {
  local c
  for c in $(prog_cmds "$1"); do command -v "$c" >/dev/null 2>&1 || return 1; done
  case $1 in
    mariadb) mariadbd_bin >/dev/null ;;
    memcached) memaslap_bin >/dev/null ;;
  esac
}
# PROGS: the selected programs that are installed; MISSING the others.
installed_of() {
  local p
  PROGS=() MISSING=()
  for p in "$@"; do
    if have_prog "$p"; then PROGS+=("$p"); else MISSING+=("$p"); fi
  done
}

if [[ ${NO_BUILD:-0} != 1 && " ${ALLOC_LIST[*]} " == *" hakmem"[\ _]* ]]; then
  build_hakmem || die "building hakmem failed"
fi
ACTIVE=() absent=()
declare -A LIB=()
for a in "${ALLOC_LIST[@]}"; do
  if lib=$(alloc_lib "$a"); then
    ACTIVE+=("$a")
    LIB[$a]=$lib
  else
    absent+=("$a")
  fi
done
if [[ $MODE_ARG == list ]]; then
  installed_of "${ALL_PROGRAMS[@]}"
  echo "programs: ${PROGS[*]:-none}${MISSING[*]:+ (missing: ${MISSING[*]})}"
  installed_of "${ALL_SERVERS[@]}"
  echo "servers: ${PROGS[*]:-none}${MISSING[*]:+ (missing: ${MISSING[*]})}"
  for a in "${ACTIVE[@]}"; do printf '  %-9s %s\n' "$a" "${LIB[$a]:-no preload}"; done
  ((${#absent[@]} == 0)) || echo "absent allocators: ${absent[*]}"
  exit 0
fi
installed_of "${PROG_LIST[@]}"
[[ " ${ACTIVE[*]} " == *" glibc "* ]] || die "glibc must be among ALLOCS (the ratios are taken against it)"
((${#PROGS[@]} > 0)) || die "none of the programs is installed (scripts/setup.sh installs them)"

SUFFIX=programs
[[ $MODE_ARG == servers ]] && SUFFIX=servers
OUT=${OUTDIR:-$ROOT/results/$(date +%Y%m%d-%H%M%S)-$(host_name)-$SUFFIX}
mkdir -p "$OUT/logs"
WORK=$(mktemp -d)
# An interrupted run is stopped, and its server, by their process ids.
RUN_PID=""
# shellcheck disable=SC2317 # the exit trap
cleanup() {
  local pid
  [[ -z $RUN_PID ]] || kill -TERM "$RUN_PID" 2>/dev/null || true
  pid=$(cat "$WORK/server.pid" 2>/dev/null || true)
  if [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- inputs
cat >"$WORK/prog.py" <<'EOF'
import random
r = random.Random(1)
d = {}
for i in range(300000):
    d[str(i)] = [i, str(i) * (1 + i % 7), {"k": i, "v": r.random()}]
for i in range(0, 300000, 2):
    del d[str(i)]
s = sorted(d.items(), key=lambda kv: (len(kv[1][1]), kv[0]))
print(len(s), s[0][0], s[-1][0])
EOF
# A job runner: 8 worker threads (Ruby's threads take turns under its global
# lock) take 16,000 jobs from a queue; each builds a document (hashes, arrays,
# strings of every size), serialises it to JSON, parses it back, checks it and
# caches the text in a shared cache of the last 2,000 documents, so much of
# what one thread made is freed by another.  Prints a checksum.
cat >"$WORK/prog.rb" <<'EOF'
require "json"
JOBS = (ENV["JOBS"] || 16_000).to_i
q = Queue.new
JOBS.times { |i| q << i }
8.times { q << nil }
cache = {}
order = []
lock = Mutex.new
sum = 0
workers = Array.new(8) do
  Thread.new do
    local = 0
    while (i = q.pop)
      r = Random.new(i)
      doc = { "id" => i, "name" => "job-#{i}" * (1 + i % 5),
              "items" => Array.new(5 + i % 40) { |k| { "k" => k, "v" => r.rand(1000), "s" => "x" * r.rand(300) } },
              "tags" => Array.new(i % 9) { |k| "tag#{k}" * (1 + k) } }
      text = JSON.generate(doc)
      back = JSON.parse(text)
      raise "job #{i}: round trip differs" unless back["items"].length == doc["items"].length && back["id"] == i
      local += text.bytesize
      lock.synchronize do
        cache[i] = text
        order << i
        cache.delete(order.shift) while order.length > 2000
      end
    end
    lock.synchronize { sum += local }
  end
end
workers.each(&:join)
puts "#{JOBS} jobs, #{cache.size} cached, #{sum} bytes"
EOF
cat >"$WORK/prog.sql" <<'EOF'
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v TEXT, n INTEGER);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
INSERT INTO t(k, v, n) SELECT printf('key%07d', (x * 7919) % 300000), hex(randomblob(1 + x % 40)), x % 1000 FROM c;
CREATE INDEX tk ON t(k);
SELECT n % 10, count(*), sum(length(v)) FROM t GROUP BY n % 10 ORDER BY 1 LIMIT 3;
SELECT count(*) FROM t a JOIN t b ON a.k = b.k WHERE a.n < 50;
EOF
printf '#include <bits/stdc++.h>\nint main() { std::map<std::string, std::vector<int>> m; m["a"].push_back(1); return (int)m.size() - 1; }\n' >"$WORK/prog.cc"
seq 1 900000 >"$WORK/xz.in"   # about 6 MB of text

# glibc's column preloads libc itself: Debian's redis-server is linked with
# jemalloc, and without a preload its malloc would be jemalloc's.
LIBC=$(find_lib libc.so.6 || true)

# One run of a program in the mode: prints one line per figure,
# "ROW FIGURE UNIT CPU_S OPS PEAK_RSS_KIB STATUS" (see scripts/lib/servers.sh);
# non-zero on failure.
run_one() {
  local prog=$1 lib=$2 log=$3 pre=() t
  [[ -z $lib ]] && lib=$LIBC
  [[ -n $lib ]] && pre=("LD_PRELOAD=$lib")
  case $MODE_ARG:$prog in
    servers:mariadb) run_mariadb "$lib" "$log"; return ;;
    servers:memcached) run_memcached "$lib" "$log"; return ;;
    servers:redis) run_redis redis_server "$lib" "$log"; return ;;
    *:redis) run_redis redis "$lib" "$log"; return ;;
    *:python) t=(env "${pre[@]}" PYTHONMALLOC=malloc /usr/bin/python3 "$WORK/prog.py") ;;
    *:ruby) t=(env "${pre[@]}" JOBS="$JOBS" ruby "$WORK/prog.rb") ;;
    *:sqlite) t=(env "${pre[@]}" sqlite3 :memory: ".read $WORK/prog.sql") ;;
    *:g++) t=(env "${pre[@]}" g++ -O2 -c "$WORK/prog.cc" -o "$WORK/prog.o") ;;
    *:perl) t=(env "${pre[@]}" perl -e 'my %h; $h{$_} = "x" x ($_ % 50) for 1 .. 1_000_000; my $n = 0; $n += length $h{$_} for keys %h; print "$n\n"') ;;
    *:xz) t=(env "${pre[@]}" xz -6 -T1 -c "$WORK/xz.in") ;;
  esac
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "${t[@]}" >"$log.out" 2>>"$log" || return 1
  local secs user sys rss status=ok
  read -r secs user sys rss <"$WORK/time"
  # servers mode: the job runner's output is the same in every run
  if [[ $MODE_ARG == servers ]]; then
    [[ -s $WORK/$prog.expect ]] || cp "$log.out" "$WORK/$prog.expect"
    cmp -s "$log.out" "$WORK/$prog.expect" ||
      { echo "check: output differs from the first run's ($(cat "$WORK/$prog.expect"))" >>"$log"; status=check_failed; }
  fi
  echo "$prog $secs s $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }') - $rss $status"
}

# ---------------------------------------------------------------- runs
echo "program,alloc,run,figure,unit,cpu_s,ops,peak_rss_kib,status" >"$OUT/runs.csv"
log "$SUFFIX: ${PROGS[*]}${MISSING[*]:+ (missing, skipped: ${MISSING[*]})}; allocators: ${ACTIVE[*]}${absent[*]:+ (absent: ${absent[*]})}; $RUNS runs"
if [[ $MODE_ARG == servers && " ${PROGS[*]} " == *" mariadb "* ]]; then
  log "preparing the MariaDB data set: $TABLES tables of $TABLE_SIZE rows"
  mariadb_template || die "the MariaDB data set could not be made"
fi
bad=0
for p in "${PROGS[@]}"; do
  for k in $(seq "$RUNS"); do
    # the order turns by one each run: in a fixed order the allocator run
    # second was up to 20 % slower in python and perl whichever it was
    # (2026-11-28), a place effect the runs must spread over all of them
    for ((j = 0; j < ${#ACTIVE[@]}; j++)); do
      a=${ACTIVE[$(((j + k - 1) % ${#ACTIVE[@]}))]}
      # in the background, so that a signal reaches the exit trap at once
      (
        set -E
        trap 'log "$p $a run $k: status $? at line $LINENO: $BASH_COMMAND"' ERR
        envvar=ENV_$a
        # shellcheck disable=SC2086  # (words: VAR=value pairs)
        [[ -z ${!envvar:-} ]] || export ${!envvar}
        run_one "$p" "${LIB[$a]}" "$OUT/logs/$p-$a-$k"
      ) >"$WORK/res" &
      RUN_PID=$!
      rc=0
      wait "$RUN_PID" || rc=$?
      RUN_PID=""
      if ((rc == 0)); then
        res=$(<"$WORK/res")
        while read -r row fig unit cpu ops rss status; do
          [[ $ops == - ]] && ops=""
          echo "$row,$a,$k,$fig,$unit,$cpu,$ops,$rss,$status" >>"$OUT/runs.csv"
          [[ $status == ok ]] || bad=1
          log "$(printf '%-12s %-9s run %d  %10s %-9s cpu %6ss %8s KiB' "$row" "$a" "$k" "$fig" "$unit" "$cpu" \
            "$rss")$([[ $status == ok ]] || echo "  $status")"
        done <<<"$res"
      else
        bad=1
        echo "$p,$a,$k,,,,,,failed" >>"$OUT/runs.csv"
        log "$p $a run $k: FAILED, status $rc (see $OUT/logs/$p-$a-$k*)"
      fi
    done
  done
done

# ---------------------------------------------------------------- report
python3 - "$OUT/runs.csv" "${ACTIVE[*]}" "$ROOT/scripts/lib" "$MODE_ARG" >"$OUT/report.md" <<'EOF'
import csv, sys
sys.path.insert(0, sys.argv[3])
from stats import median, cv_pct   # the suite's definitions (scripts/lib/stats.py)
all_rows = list(csv.DictReader(open(sys.argv[1])))
rows = [r for r in all_rows if r["status"] == "ok"]
allocs = sys.argv[2].split()
servers = sys.argv[4] == "servers"
what = "Servers" if servers else "Real programs"
print(f"# {what}: median of the runs; ratio to glibc's median (time: lower is better; /s: higher is better)\n")

def table(title, cell):
    print(f"{title}\n")
    print("| program | " + " | ".join(allocs) + " |")
    print("|---|" + "---|" * len(allocs))
    for prog in dict.fromkeys(r["program"] for r in rows):
        mine = {a: [r for r in rows if r["program"] == prog and r["alloc"] == a] for a in allocs}
        base = cell(mine["glibc"]) if mine.get("glibc") else None
        cells = []
        for a in allocs:
            if not mine[a]:
                cells.append("—")
                continue
            v, text = cell(mine[a])
            cells.append(text + (f" ({v / base[0]:.2f}×)" if base and base[0] else ""))
        print(f"| {prog} | " + " | ".join(cells) + " |")
    print()

def figure(rs):
    v = [float(r["figure"]) for r in rs]
    m = median(v)
    return m, f"**{m:g}** {rs[0]['unit']}, CV {cv_pct(v):.1f} %, {min(v):g}–{max(v):g}"

def cpu(rs):   # per operation when the run counts them, else seconds
    if all(r["ops"] for r in rs):
        m = median([float(r["cpu_s"]) / float(r["ops"]) * 1e6 for r in rs])
        return m, f"{m:.2f} µs/op"
    m = median([float(r["cpu_s"]) for r in rs])
    return m, f"{m:.2f} s"

def rss(rs):
    m = median([float(r["peak_rss_kib"]) for r in rs]) / 1024
    return m, f"{m:.1f} MB"

table("## Figure: median, CV, range of the runs (ratio of the medians)", figure)
table("## CPU time" + (" of the server in the timed phase" if servers else " (user + system)"), cpu)
table("## Peak RSS" + (" of the server (VmHWM)" if servers else ""), rss)
failed = [f"{r['program']} {r['alloc']} run {r['run']}" for r in all_rows if r["status"] == "failed"]
badc = [f"{r['program']} {r['alloc']} run {r['run']}" for r in all_rows if r["status"] == "check_failed"]
print(f"failed runs: {len(failed)}{': ' + ', '.join(failed) if failed else ''}")
if servers:
    print(f"\nchecks not passed (wrong results, left out of the tables): {len(badc)}"
          f"{': ' + ', '.join(badc) if badc else ''}")
EOF
cat "$OUT/report.md"
log "written: $OUT/runs.csv, $OUT/report.md"
if [[ $MODE_ARG == servers ]] && ((bad)); then
  log "a run failed or a check did not pass (see the report)"
  exit 1
fi
exit 0
