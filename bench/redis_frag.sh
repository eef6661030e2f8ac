#!/usr/bin/env bash
# redis_frag.sh — fragmentation of a real server: Debian's redis-server under
# each allocator (LD_PRELOAD; jemalloc = redis's own), on loopback, no
# persistence.
#   fill:    KEYS keys (default 1 M) with values of nine sizes 16 B .. 1 KiB
#   delete:  70 % of them, at random
#   refill:  new keys with values of nine other sizes until used_memory (the
#            live bytes by redis's own count) is back at the fill's, or, with
#            REFILL_KEYS=N, exactly N new keys (used_memory counts usable
#            sizes: an allocator that hands out larger blocks reaches the
#            fill's used_memory with fewer keys, so compare at equal keys too)
# After each phase: used_memory, the server's RSS (VmRSS) and PSS (a page
# mapped twice counts once: meshed pages, HAKMEM_MESH=1).
#   bench/redis_frag.sh [ALLOC ...]   ALLOC: glibc hakmem hakmem-mesh jemalloc mimalloc tcmalloc
# Environment: KEYS, ROUNDS (interleaved repeats, default 1), SO (libhakmem.so), REFILL_KEYS
# Output: one line per phase: "alloc round phase used_kb rss_kb pss_kb keys"
# (and hakmem's "small:", "scavenge:" and, with meshing, "mesh:" statistics lines).
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1000000}
ROUNDS=${ROUNDS:-1}
SO=${SO:-$PWD/build/libhakmem.so}
L=/usr/lib/x86_64-linux-gnu
allocs=("$@")
((${#allocs[@]})) || allocs=(glibc hakmem hakmem-mesh jemalloc mimalloc tcmalloc)
for p in redis-server redis-cli python3; do command -v $p >/dev/null || { echo "redis_frag: $p not installed" >&2; exit 77; }; done
tmp=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# RESP for SET/DEL of a key range; sizes from a fixed set, chosen per key.
cat >"$tmp/gen.py" <<'PY'
import random, sys
op, lo, hi, seed, sizes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
sizes = [int(s) for s in sizes]
rnd = random.Random(seed)
out = sys.stdout.buffer
val = {s: b"v" * s for s in sizes}
buf = []
for i in range(lo, hi):
    k = b"key:%d" % i
    if op == "set":
        v = val[sizes[rnd.randrange(len(sizes))]]
        buf.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
    elif op == "del":
        if rnd.random() < 0.70:
            buf.append(b"*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n" % (len(k), k))
    if len(buf) >= 4096:
        out.write(b"".join(buf)); buf = []
out.write(b"".join(buf))
PY
SIZES1="16 32 64 100 160 256 400 640 1024"
SIZES2="24 48 80 128 200 320 512 800 960"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
used_kb() { redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ { printf "%d", $2 / 1024 }'; }
measure() {   # phase
  local rss pss
  rss=$(awk '/^VmRSS:/ { print $2 }' /proc/$pid/status)
  pss=$(awk '/^Pss:/ { print $2 }' /proc/$pid/smaps_rollup)
  echo "$a $r $1 $(used_kb) $rss $pss $(redis-cli -p "$port" dbsize)"
}

for r in $(seq "$ROUNDS"); do
  for a in "${allocs[@]}"; do
    case $a in
      glibc | jemalloc) pre="" ;;
      hakmem | hakmem-mesh) pre=$SO ;;
      mimalloc) pre=$L/libmimalloc.so.2 ;;
      tcmalloc) pre=$L/libtcmalloc_minimal.so.4 ;;
      *) echo "redis_frag: unknown allocator $a" >&2; exit 2 ;;
    esac
    mesh=0; [[ $a == hakmem-mesh ]] && mesh=1
    # glibc: redis links jemalloc, so its malloc comes from LD_PRELOADing libc's own
    [[ $a == glibc ]] && pre=$(ldconfig -p | awk '/libc.so.6 .*x86-64/ { print $NF; exit }')
    port=""
    for _ in $(seq 50); do p=$((20000 + RANDOM % 30000)); if port_free $p; then port=$p; break; fi; done
    env ${pre:+LD_PRELOAD=$pre} HAKMEM_MESH=$mesh HAKMEM_STATS=1 redis-server --port "$port" --bind 127.0.0.1 --save "" \
      --appendonly no --daemonize no --dir "$tmp" >"$tmp/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    python3 "$tmp/gen.py" set 0 "$KEYS" 1 $SIZES1 | redis-cli -p "$port" --pipe >/dev/null
    measure fill
    target=$(used_kb)
    python3 "$tmp/gen.py" del 0 "$KEYS" 2 | redis-cli -p "$port" --pipe >/dev/null
    measure delete
    next=$KEYS batch=$((KEYS / 20))
    while if [[ -n ${REFILL_KEYS:-} ]]; then ((next < KEYS + REFILL_KEYS)); else (($(used_kb) < target)); fi; do
      n=$batch
      [[ -n ${REFILL_KEYS:-} ]] && ((next + n > KEYS + REFILL_KEYS)) && n=$((KEYS + REFILL_KEYS - next))
      python3 "$tmp/gen.py" set "$next" $((next + n)) $((next + 3)) $SIZES2 | redis-cli -p "$port" --pipe >/dev/null
      next=$((next + n))
    done
    measure refill
    redis-cli -p "$port" info server | grep -q "redis_version" || true
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    pid=""
    grep -E "^(mesh|scavenge|small):" "$tmp/server.log" | sed "s/^/$a $r /" || true
  done
done
