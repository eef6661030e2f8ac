#!/usr/bin/env bash
# redis-server under LD_PRELOAD=build/libhakmem.so on 127.0.0.1 (free port,
# no persistence): redis-benchmark -n 20000 -t set,get,lpush,lpop,incr, then
# a content check through redis-cli: 1500 SET/GET of values from 1 byte to
# 20 KB, strings grown by APPEND (realloc), lists, hashes, INCRBY, and the
# values read back must be exactly what was written.  The server is shut
# down cleanly (and killed on any exit); HAKMEM_STATS=1 proves hakmem served it.
# serial: binds a TCP port on 127.0.0.1 (tests/run.sh -j runs it alone)
set -euo pipefail
. tests/cases/core_lib.sh
for p in redis-server redis-cli redis-benchmark; do
  command -v $p >/dev/null || skip "$p not installed (apt-get install redis-server redis-tools)"
done
need "$SO"
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=""
for _ in $(seq 50); do
  p=$((20000 + RANDOM % 30000))
  if port_free $p; then port=$p; break; fi
done
[[ -n $port ]] || die "no free port found"
cli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }

env LD_PRELOAD="$SO" HAKMEM_STATS=1 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --protected-mode no --daemonize no --dir "$tmp" --logfile "$tmp/redis.log" 2>"$tmp/server.err" &
pid=$!
for _ in $(seq 100); do
  [[ $(cli ping 2>/dev/null) == PONG ]] && break
  kill -0 "$pid" 2>/dev/null || die "redis-server exited at start: $(tail -n 5 "$tmp/redis.log" "$tmp/server.err")"
  sleep 0.1
done
[[ $(cli ping) == PONG ]] || die "redis-server does not answer on port $port"
grep -q libhakmem "/proc/$pid/maps" || die "libhakmem.so is not mapped in redis-server"
echo "redis-server (pid $pid) on 127.0.0.1:$port, hakmem preloaded"

# ---- benchmark
redis-benchmark -h 127.0.0.1 -p "$port" -q -n 20000 -c 20 -t set,get,lpush,lpop,incr >"$tmp/bench" 2>&1 ||
  die "redis-benchmark failed: $(tail -n 5 "$tmp/bench")"
# the whole output is read first: `... | grep -q` under pipefail fails when grep
# stops reading early and the writer gets SIGPIPE
report=$(tr '\r' '\n' <"$tmp/bench")
grep -E 'requests per second' <<<"$report" | sed 's/^/  /'
for t in SET GET LPUSH LPOP INCR; do
  grep -q "^$t: .*requests per second" <<<"$report" || die "redis-benchmark did not report $t"
done

# ---- content check: commands, and the replies they must give
awk 'BEGIN {
  srand(7); cmd = ARGV[1]; ex = ARGV[2]; ARGV[1] = ARGV[2] = ""
  for (i = 0; i < 1500; i++) {
    n = (i % 10 == 0) ? 1000 + (i * 37) % 19000 : 1 + (i * 13) % 300
    v = ""; c = sprintf("%c", 97 + i % 26); chunk = sprintf("%s%d", c, i)
    while (length(v) < n) v = v chunk
    v = substr(v, 1, n)
    print "SET k:" i " " v > cmd;  print "OK" > ex
  }
  for (i = 0; i < 1500; i++) {
    n = (i % 10 == 0) ? 1000 + (i * 37) % 19000 : 1 + (i * 13) % 300
    v = ""; c = sprintf("%c", 97 + i % 26); chunk = sprintf("%s%d", c, i)
    while (length(v) < n) v = v chunk
    print "GET k:" i > cmd;  print substr(v, 1, n) > ex
  }
  for (i = 0; i < 200; i++) {
    s = ""
    for (j = 0; j < 25; j++) {
      piece = sprintf("<%d.%d:%s>", i, j, substr("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 1, (i * 7 + j * 11) % 50))
      s = s piece
      print "APPEND a:" i " " piece > cmd;  print length(s) > ex
    }
    print "GET a:" i > cmd;  print s > ex
  }
  for (i = 0; i < 50; i++) {
    for (j = 0; j < 40; j++) { print "RPUSH l:" i " e" i "-" j > cmd; print j + 1 > ex }
    print "LRANGE l:" i " 0 -1" > cmd; for (j = 0; j < 40; j++) print "e" i "-" j > ex
    print "LPOP l:" i > cmd; print "e" i "-0" > ex
    print "LLEN l:" i > cmd; print 39 > ex
  }
  for (i = 0; i < 50; i++) {
    for (j = 0; j < 20; j++) { print "HSET h:" i " f" j " v" i "." j > cmd; print 1 > ex }
    print "HGET h:" i " f7" > cmd; print "v" i ".7" > ex
    print "HLEN h:" i > cmd; print 20 > ex
  }
  for (i = 1; i <= 100; i++) { print "INCRBY ctr " i > cmd; print i * (i + 1) / 2 > ex }
  for (i = 0; i < 1500; i += 3) { print "DEL k:" i > cmd; print 1 > ex }
  print "EXISTS k:3 k:4 k:5" > cmd; print 2 > ex
}' "$tmp/cmds" "$tmp/expect"
cli <"$tmp/cmds" >"$tmp/got" 2>"$tmp/cli.err" || die "redis-cli failed: $(tail -n 3 "$tmp/cli.err")"
if ! cmp -s "$tmp/expect" "$tmp/got"; then
  diff "$tmp/expect" "$tmp/got" >"$tmp/diff" || true
  head -n 10 "$tmp/diff" | cut -c1-200
  die "redis replies differ from what was written"
fi
echo "content check: $(wc -l <"$tmp/cmds") commands, every reply as expected"
keys=$(cli dbsize)
echo "dbsize=$keys; $(cli info memory | tr -d '\r' | grep -E '^used_memory_human|^mem_allocator' | tr '\n' ' ')"

# ---- clean shutdown
cli shutdown nosave >/dev/null 2>&1 || true
rc=0
wait "$pid" || rc=$?
pid=""
((rc == 0)) || die "redis-server exit status $rc: $(tail -n 5 "$tmp/redis.log")"
grep -q '^hakmem: stats' "$tmp/server.err" || die "no hakmem statistics report from redis-server"
grep -E '^(small|large|os):' "$tmp/server.err" | sed 's/^/  hakmem /'
! grep -qiE 'crashed|segmentation|assert' "$tmp/redis.log" || die "redis log reports a crash: $(grep -m 3 -iE 'crashed|segmentation|assert' "$tmp/redis.log")"
echo "redis-server shut down cleanly"
