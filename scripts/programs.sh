#!/usr/bin/env bash
# scripts/programs.sh — real programs under hakmem and its peers (issue #14).
#
#   scripts/programs.sh          every program, RUNS interleaved runs each
#   scripts/programs.sh list     programs and the allocators found
#   scripts/programs.sh --help
#
# Each program runs under each allocator (LD_PRELOAD; glibc: libc.so.6 itself,
# since Debian's redis-server is linked with jemalloc), run k of every
# allocator before run k+1 of any:
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
# Environment (all optional):
#   RUNS=3             runs per program and allocator
#   PROGRAMS="..."     programs to run (default: all above)
#   ALLOCS="..."       allocators (default: hakmem glibc mimalloc jemalloc tcmalloc,
#                      and mi241 when ../shared/peers is beside the checkout); absent
#                      ones are skipped and named
#                      (also known: mi343, snmalloc, and for the secure builds
#                      hakmem_secure, mi241_secure, hardened, scudo)
#   LIB_<alloc>=path   use this library for an allocator
#   OUTDIR=dir         where to write (default results/<date>-<time>-<host>-programs)
#   NO_BUILD=1         do not run make (use the existing build/)
# Output: OUTDIR/runs.csv (program,alloc,run,figure,unit,peak_rss_kib,status) and
# OUTDIR/report.md: per program the median figure of each allocator, its ratio
# to glibc's (time: lower is better; redis: requests/s, higher is better) and
# the median peak RSS.  Needs redis-server, redis-tools, ruby, sqlite3, g++,
# perl, xz-utils and python3 (scripts/setup.sh installs them); a program whose
# command is missing is skipped and named.
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
  run | list) ;;
  *)
    log "${0##*/}: unknown mode '$MODE_ARG' (list, --help; settings go in the environment)"
    exit 2
    ;;
esac
[[ $# -le 1 ]] || die "too many arguments (settings go in the environment; see --help)"

RUNS=${RUNS:-3}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer (got '$RUNS')"
ALL_PROGRAMS=(redis python ruby sqlite g++ perl xz)
read -r -a PROG_LIST <<<"${PROGRAMS:-${ALL_PROGRAMS[*]}}"
for p in "${PROG_LIST[@]}"; do
  [[ " ${ALL_PROGRAMS[*]} " == *" $p "* ]] || die "unknown program '$p' (known: ${ALL_PROGRAMS[*]})"
done
DEFAULT_ALLOCS="hakmem glibc mimalloc jemalloc tcmalloc"
[[ -d $PEERS_DIR ]] && DEFAULT_ALLOCS+=" mi241"
read -r -a ALLOC_LIST <<<"${ALLOCS:-$DEFAULT_ALLOCS}"

# The command a program needs, for the "missing" check.
prog_cmd() {
  case $1 in
    redis) echo redis-server ;;
    python) echo /usr/bin/python3 ;;
    ruby) echo ruby ;;
    sqlite) echo sqlite3 ;;
    g++) echo g++ ;;
    perl) echo perl ;;
    xz) echo xz ;;
  esac
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
PROGS=() missing=()
for p in "${PROG_LIST[@]}"; do
  if command -v "$(prog_cmd "$p")" >/dev/null 2>&1 && { [[ $p != redis ]] || command -v redis-benchmark >/dev/null 2>&1; }; then
    PROGS+=("$p")
  else
    missing+=("$p")
  fi
done
if [[ $MODE_ARG == list ]]; then
  echo "programs: ${PROGS[*]:-none}${missing[*]:+ (missing: ${missing[*]})}"
  for a in "${ACTIVE[@]}"; do printf '  %-9s %s\n' "$a" "${LIB[$a]:-no preload}"; done
  ((${#absent[@]} == 0)) || echo "absent allocators: ${absent[*]}"
  exit 0
fi
[[ " ${ACTIVE[*]} " == *" glibc "* ]] || die "glibc must be among ALLOCS (the ratios are taken against it)"
((${#PROGS[@]} > 0)) || die "none of the programs is installed (scripts/setup.sh installs them)"

OUT=${OUTDIR:-$ROOT/results/$(date +%Y%m%d-%H%M%S)-$(host_name)-programs}
mkdir -p "$OUT/logs"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

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
JOBS = 16_000
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

free_port() {
  local p
  for p in $(seq 16379 16479); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# glibc's column preloads libc itself: Debian's redis-server is linked with
# jemalloc, and without a preload its malloc would be jemalloc's.
LIBC=$(find_lib libc.so.6 || true)

# One run: prints "figure unit peak_rss_kib"; non-zero on failure.
run_one() {
  local prog=$1 lib=$2 log=$3 pre=() t
  [[ -z $lib ]] && lib=$LIBC
  [[ -n $lib ]] && pre=("LD_PRELOAD=$lib")
  case $prog in
    redis)
      local port pid rps i
      port=$(free_port) || return 1
      env "${pre[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize no --logfile "$log.server" >/dev/null 2>&1 &
      pid=$!
      for i in $(seq 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
      done
      rps=$(redis-benchmark -p "$port" -q -n 50000 -c 50 -t set,get,incr,lpush,lpop,sadd,hset,mset --csv 2>>"$log" |
        awk -F'"' 'NR > 1 && $4 + 0 > 0 { s += 50000 / $4 } END { if (s > 0) printf "%.0f", 8 * 50000 / s }')
      local hwm
      hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
      redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      [[ -n $rps ]] || return 1
      echo "$rps req/s ${hwm:-0}"
      return 0
      ;;
    python) t=(env "${pre[@]}" PYTHONMALLOC=malloc /usr/bin/python3 "$WORK/prog.py") ;;
    ruby) t=(env "${pre[@]}" ruby "$WORK/prog.rb") ;;
    sqlite) t=(env "${pre[@]}" sqlite3 :memory: ".read $WORK/prog.sql") ;;
    g++) t=(env "${pre[@]}" g++ -O2 -c "$WORK/prog.cc" -o "$WORK/prog.o") ;;
    perl) t=(env "${pre[@]}" perl -e 'my %h; $h{$_} = "x" x ($_ % 50) for 1 .. 1_000_000; my $n = 0; $n += length $h{$_} for keys %h; print "$n\n"') ;;
    xz) t=(env "${pre[@]}" xz -6 -T1 -c "$WORK/xz.in") ;;
  esac
  /usr/bin/time -f '%e %M' -o "$WORK/time" "${t[@]}" >"$log.out" 2>>"$log" || return 1
  read -r secs rss <"$WORK/time"
  echo "$secs s $rss"
}

# ---------------------------------------------------------------- runs
echo "program,alloc,run,figure,unit,peak_rss_kib,status" >"$OUT/runs.csv"
log "programs: ${PROGS[*]}${missing[*]:+ (missing, skipped: ${missing[*]})}; allocators: ${ACTIVE[*]}${absent[*]:+ (absent: ${absent[*]})}; $RUNS runs"
for p in "${PROGS[@]}"; do
  for k in $(seq "$RUNS"); do
    for a in "${ACTIVE[@]}"; do
      if res=$(run_one "$p" "${LIB[$a]}" "$OUT/logs/$p-$a-$k"); then
        read -r fig unit rss <<<"$res"
        echo "$p,$a,$k,$fig,$unit,$rss,ok" >>"$OUT/runs.csv"
        log "$(printf '%-7s %-9s run %d  %10s %-5s %8s KiB' "$p" "$a" "$k" "$fig" "$unit" "$rss")"
      else
        echo "$p,$a,$k,,,,failed" >>"$OUT/runs.csv"
        log "$p $a run $k: FAILED (see $OUT/logs/$p-$a-$k*)"
      fi
    done
  done
done

# ---------------------------------------------------------------- report
python3 - "$OUT/runs.csv" "${ACTIVE[*]}" "$ROOT/scripts/lib" >"$OUT/report.md" <<'EOF'
import csv, sys
sys.path.insert(0, sys.argv[3])
from stats import median   # the suite's definition (scripts/lib/stats.py)
all_rows = list(csv.DictReader(open(sys.argv[1])))
rows = [r for r in all_rows if r["status"] == "ok"]
allocs = sys.argv[2].split()
print("# Real programs: median of the runs; ratio to glibc (time: lower is better; redis: req/s, higher is better)\n")
print("| program | " + " | ".join(allocs) + " |")
print("|---|" + "---|" * len(allocs))
for prog in dict.fromkeys(r["program"] for r in rows):
    unit = next(r["unit"] for r in rows if r["program"] == prog)
    med = {}
    for a in allocs:
        mine = [r for r in rows if r["program"] == prog and r["alloc"] == a]
        if mine:
            v = [float(r["figure"]) for r in mine]
            med[a] = (median(v), median([float(r["peak_rss_kib"]) for r in mine]), min(v), max(v))
    base = med.get("glibc")
    cells = []
    for a in allocs:
        if a not in med:
            cells.append("—")
            continue
        f, m, lo, hi = med[a]
        ratio = f"{f / base[0]:.2f}×" if base else "?"
        cells.append(f"{f:g} {unit} ({ratio}; {lo:g}–{hi:g}), {m / 1024:.1f} MB")
    print(f"| {prog} | " + " | ".join(cells) + " |")
print(f"\nfailed runs: {len(all_rows) - len(rows)}")
EOF
cat "$OUT/report.md"
log "written: $OUT/runs.csv, $OUT/report.md"
