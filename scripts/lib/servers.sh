# shellcheck shell=bash
# scripts/lib/servers.sh — the servers of `scripts/programs.sh servers` (issue #27):
# each started under one allocator (LD_PRELOAD on the server only), loaded by
# its usual client, its results checked, its CPU time and peak RSS read from
# /proc, and stopped by its process id (never by name: other runs may share
# the machine).  Sourced by programs.sh, which sets WORK (a temporary folder),
# DURATION, WARMUP, TABLES, TABLE_SIZE and REQUESTS before it runs them.
#
# A run prints one line per figure: ROW FIGURE UNIT CPU_S OPS PEAK_RSS_KIB STATUS,
# where CPU_S is the server's CPU time (user + system, all threads) during the
# timed phase, OPS the operations it served then ("-" for a batch program), and
# STATUS ok or check_failed (the results were wrong: see the log).

CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
IS_ROOT=0
[[ $(id -u) == 0 ]] && IS_ROOT=1

# CPU seconds (user + system, every thread) the process has used so far.
proc_cpu() {
  awk -v t="$CLK_TCK" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t }' "/proc/$1/stat"
}
# The process's peak RSS (VmHWM, KiB).
proc_hwm() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
# The process exists and has not exited (a child that exited stays a zombie
# until bash reaps it, which may happen at any moment: a state that cannot be
# read is "gone").
alive() {
  local st
  st=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $st && $st != Z ]]
}
cpu_diff() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# server_start LIB LOG CMD...: CMD in the background with LIB preloaded (none
# when LIB is empty), its stdin, stdout and stderr away from the caller's
# pipes; SRV_PID is its process id, also written to $WORK/server.pid for
# programs.sh's exit trap.
server_start() {
  SRV_LIB=$1
  local log=$2 pre=()
  shift 2
  [[ -n $SRV_LIB ]] && pre=("LD_PRELOAD=$SRV_LIB")
  env "${pre[@]}" "$@" </dev/null >>"$log" 2>&1 &
  SRV_PID=$!
  echo "$SRV_PID" >"$WORK/server.pid"
  echo "server pid $SRV_PID${SRV_LIB:+, LD_PRELOAD=$SRV_LIB}: $*" >>"$log"
}

# server_wait WHAT PROBE...: wait up to 60 s for PROBE to succeed while the
# server lives; then the preloaded library must be mapped in it (a library
# that fails to load leaves the server on its own malloc).
server_wait() {
  local what=$1 i
  shift
  for i in $(seq 600); do
    alive "$SRV_PID" || { log "$what: the server exited at start"; return 1; }
    if "$@" >/dev/null 2>&1; then
      [[ -z $SRV_LIB ]] || grep -qF "$(realpath "$SRV_LIB")" "/proc/$SRV_PID/maps" && return 0
      log "$what: $SRV_LIB is not mapped in the server (the preload failed)"
      return 1
    fi
    sleep 0.1
  done
  log "$what: the server did not answer within 60 s"
  return 1
}

# server_stop: SIGTERM to the server's process id, SIGKILL after 60 s.
server_stop() {
  local i
  kill -TERM "$SRV_PID" 2>/dev/null || true
  for i in $(seq 600); do
    alive "$SRV_PID" || break
    sleep 0.1
  done
  if alive "$SRV_PID"; then kill -KILL "$SRV_PID" 2>/dev/null || true; fi
  wait "$SRV_PID" 2>/dev/null || true
  rm -f "$WORK/server.pid"
}

# A TCP port of 127.0.0.1 that nothing listens on.
free_port() {
  local p i
  for i in $(seq 100); do
    p=$((16379 + (RANDOM + i) % 2000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# ---------------------------------------------------------------- MariaDB
# The server's settings: no options files, a unix socket only, an InnoDB
# buffer pool that holds the data set (64 MB), small redo log and MyISAM/Aria
# caches (those are touched at start-up and would hide the heap in the RSS),
# commits flushed once a second (the load measures the server, not the disk),
# no binary log, no buffer-pool dump.
mdb_opts() {
  local dir=$1
  MDB_OPTS=(--no-defaults --datadir="$dir/data" --socket="$dir/sock" --skip-networking --pid-file="$dir/pid"
    --log-error="$dir/error.log" --innodb-buffer-pool-size=64M --innodb-log-file-size=32M
    --aria-pagecache-buffer-size=8M --key-buffer-size=8M
    --innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-dump-at-shutdown=0
    --innodb-buffer-pool-load-at-startup=0 --skip-log-bin --max-connections=100 --skip-name-resolve)
  ((IS_ROOT)) && MDB_OPTS+=(--user=root)
  return 0
}
# mariadbd is in /usr/sbin, outside a user's PATH.
mariadbd_bin() { command -v mariadbd 2>/dev/null || { [[ -x /usr/sbin/mariadbd ]] && echo /usr/sbin/mariadbd; }; }
sb_opts() {
  SB_OPTS=(--db-driver=mysql --mysql-socket="$1/sock" --mysql-user=root --mysql-db=sbtest
    --tables="$TABLES" --table-size="$TABLE_SIZE")
}
mdb_sql() { mariadb --no-defaults -S "$1/sock" -uroot -N -B -e "$2"; }

# The data set, made once under glibc: an empty server (mariadb-install-db),
# the sbtest database filled by `sysbench oltp_read_write prepare`, stopped.
# Every run starts from a copy of it.
mariadb_template() {
  local d=$WORK/mariadb-template log=$WORK/mariadb-template.log
  mkdir -p "$d"
  mdb_opts "$d"
  local u=()
  ((IS_ROOT)) && u=(--user=root)
  mariadb-install-db --no-defaults --datadir="$d/data" "${u[@]}" --auth-root-authentication-method=normal \
    --skip-test-db "${MDB_OPTS[@]:2}" >"$log" 2>&1 || { log "mariadb-install-db failed (see $log)"; return 1; }
  server_start "" "$log" "$(mariadbd_bin)" "${MDB_OPTS[@]}"
  if server_wait "mariadb (template)" mdb_sql "$d" "select 1" && mdb_sql "$d" "create database sbtest" &&
    sb_opts "$d" && sysbench oltp_read_write "${SB_OPTS[@]}" prepare >>"$log" 2>&1; then
    server_stop
    return 0
  fi
  log "preparing the MariaDB data set failed (see $log, $d/error.log)"
  server_stop
  return 1
}

# sysbench TEST for SECONDS with 16 clients; prints "QPS QUERIES ERRORS RECONNECTS".
sb_phase() {
  local dir=$1 test=$2 secs=$3 log=$4 out
  out=$(timeout -k 5 $((secs + 120)) sysbench "$test" "${SB_OPTS[@]}" --threads=16 --time="$secs" \
    --report-interval=0 run 2>&1) || { printf '%s\n' "$out" >>"$log"; return 1; }
  printf '%s\n' "$out" >>"$log"
  awk '/^ *queries:/ { n = $2; q = substr($3, 2) } /ignored errors:/ { e = $3 } /reconnects:/ { r = $2 }
    END { if (n == "") exit 1; print q, n, e + 0, r + 0 }' <<<"$out"
}

# run_mariadb LIB LOG: a copy of the data set, the server under LIB, a warm-up of
# read/write, then point select and read/write for DURATION s each; rows
# mariadb_ps and mariadb_rw.  The check: sysbench ends without error or
# reconnect, and every table still holds ids 1..TABLE_SIZE (read/write deletes
# and re-inserts rows).
run_mariadb() {
  local lib=$1 log=$2 d=$WORK/mariadb-run
  rm -rf "$d"
  cp -a "$WORK/mariadb-template" "$d"
  rm -f "$d/sock" "$d/pid"
  mdb_opts "$d"
  sb_opts "$d"
  server_start "$lib" "$log.server" "$(mariadbd_bin)" "${MDB_OPTS[@]}"
  local ps rw c0 c1 c2 hwm status=ok t n
  if server_wait mariadb mdb_sql "$d" "select 1" && sb_phase "$d" oltp_read_write "$WARMUP" "$log" >/dev/null &&
    c0=$(proc_cpu "$SRV_PID") && ps=$(sb_phase "$d" oltp_point_select "$DURATION" "$log") &&
    c1=$(proc_cpu "$SRV_PID") && rw=$(sb_phase "$d" oltp_read_write "$DURATION" "$log") &&
    c2=$(proc_cpu "$SRV_PID") && hwm=$(proc_hwm "$SRV_PID"); then
    read -r -a ps <<<"$ps"
    read -r -a rw <<<"$rw"
    log_check() { echo "check: $*" >>"$log"; status=check_failed; }
    ((ps[2] + ps[3] + rw[3] == 0)) || log_check "point select errors ${ps[2]}, reconnects ${ps[3]}; read/write reconnects ${rw[3]}"
    for t in $(seq "$TABLES"); do
      n=$(mdb_sql "$d" "select count(*), sum(id) from sbtest.sbtest$t" | tr '\t' ' ')
      [[ $n == "$TABLE_SIZE $((TABLE_SIZE * (TABLE_SIZE + 1) / 2))" ]] || log_check "sbtest$t: count, sum(id) = $n"
    done
    echo "checked: $TABLES tables of $TABLE_SIZE rows; read/write ignored errors ${rw[2]} (deadlocks)" >>"$log"
    server_stop
    rm -rf "$d"
    echo "mariadb_ps ${ps[0]} queries/s $(cpu_diff "$c0" "$c1") ${ps[1]} $hwm $status"
    echo "mariadb_rw ${rw[0]} queries/s $(cpu_diff "$c1" "$c2") ${rw[1]} $hwm $status"
    return 0
  fi
  server_stop
  cat "$d/error.log" >>"$log" 2>/dev/null || true
  rm -rf "$d"
  return 1
}

# ---------------------------------------------------------------- memcached
# Debian 12 names memaslap memcaslap.
memaslap_bin() { command -v memaslap 2>/dev/null || command -v memcaslap; }

# memaslap for SECONDS, 2 threads, 32 connections, 5 % of the gets verified;
# prints "TPS OPS VERIFY_FAILED".
mc_phase() {
  local port=$1 secs=$2 log=$3 out cfg=$WORK/memaslap.cfg
  # keys of 16-64 bytes; values of 1 byte to 16 KiB (half up to 128 bytes); 10 % sets, 90 % gets
  printf 'key\n16 64 1\nvalue\n1 128 0.5\n129 2048 0.4\n2049 16384 0.1\ncmd\n0 0.1\n1 0.9\n' >"$cfg"
  out=$(timeout -k 5 $((secs + 120)) "$(memaslap_bin)" -s "127.0.0.1:$port" -F "$cfg" -T 2 -c 32 -w 1k \
    -v 0.05 -t "${secs}s" 2>&1) || { printf '%s\n' "$out" >>"$log"; return 1; }
  printf '%s\n' "$out" >>"$log"
  awk '/^Run time:/ { o = $5; t = $7 } /verify_failed:/ { f = $2 }
    END { if (t == "") exit 1; print t, o, f + 0 }' <<<"$out"
}

# run_memcached LIB LOG: memcached (4 worker threads, 256 MB of cache) on a free port of
# 127.0.0.1 under LIB; a warm-up of WARMUP s, then DURATION s of memaslap.
# The check: no verified get differed, and files of 1 byte to 900 KiB stored
# with memccp come back byte for byte from memccat.
run_memcached() {
  local lib=$1 log=$2 port u=() r c0 c1 hwm status=ok f
  port=$(free_port) || return 1
  ((IS_ROOT)) && u=(-u root)
  server_start "$lib" "$log.server" memcached -l 127.0.0.1 -p "$port" -U 0 -m 256 -c 1024 -t 4 "${u[@]}"
  # shellcheck disable=SC2317 # called through server_wait
  mc_pid_is_ours() { [[ $(memcstat --servers="127.0.0.1:$port" 2>/dev/null | awk '/pid:/ { print $2 }') == "$SRV_PID" ]]; }
  if server_wait memcached mc_pid_is_ours && mc_phase "$port" "$WARMUP" "$log" >/dev/null &&
    c0=$(proc_cpu "$SRV_PID") && r=$(mc_phase "$port" "$DURATION" "$log") && c1=$(proc_cpu "$SRV_PID"); then
    read -r -a r <<<"$r"
    ((r[2] == 0)) || { echo "check: memaslap: ${r[2]} verified gets differed" >>"$log"; status=check_failed; }
    mkdir -p "$WORK/mc"
    for f in 1 100 5000 70000 900000; do head -c "$f" /dev/urandom >"$WORK/mc/v$f"; done
    (cd "$WORK/mc" && memccp --servers="127.0.0.1:$port" v*) >>"$log" 2>&1 ||
      { echo "check: memccp failed" >>"$log"; status=check_failed; }
    for f in "$WORK"/mc/v*; do
      cmp -s <(memccat --servers="127.0.0.1:$port" "${f##*/}" 2>>"$log") <(cat "$f"; echo) ||
        { echo "check: memccat ${f##*/} differs from what memccp stored" >>"$log"; status=check_failed; }
    done
    echo "checked: memaslap verify_failed ${r[2]}; memccp/memccat of 5 values" >>"$log"
    hwm=$(proc_hwm "$SRV_PID")
    server_stop
    echo "memcached ${r[0]} ops/s $(cpu_diff "$c0" "$c1") ${r[1]} $hwm $status"
    return 0
  fi
  server_stop
  return 1
}

# ---------------------------------------------------------------- Redis
RDS_KEYS=20000
# The data set: RDS_KEYS strings data:I of 1 to 2,000 bytes (RESP for redis-cli
# --pipe with ARG=pipe; the GET of every 50th and its reply with ARG=check).
rds_data() {
  awk -v n="$RDS_KEYS" -v what="$1" 'BEGIN {
    for (i = 0; i < n; i++) {
      if (what == "check" && i % 50) continue
      len = 1 + (i * 37) % 2000; v = ""; chunk = sprintf("%c%d", 97 + i % 26, i)
      while (length(v) < len) v = v chunk
      v = substr(v, 1, len); k = "data:" i
      if (what == "pipe") printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, len, v
      else { print "GET " k > "/dev/stderr"; print v }
    }
  }'
}
rds_bench() {
  local port=$1 n=$2 log=$3
  redis-benchmark -p "$port" -q -n "$n" -c 50 -t set,get,incr,lpush,lpop,sadd,hset,mset --csv 2>>"$log" |
    awk -F'"' -v n="$n" 'NR > 1 && $4 + 0 > 0 { s += n / $4 } END { if (s > 0) printf "%.0f", 8 * n / s }'
}

# run_redis ROW LIB LOG: redis-server on a free port of 127.0.0.1, no persistence, under LIB
# (glibc: libc.so.6 preloaded, since Debian's redis-server is linked with
# jemalloc); redis-benchmark's eight tests, REQUESTS requests each from 50
# clients.  ROW is redis (the program: nothing more) or redis_server (first
# the data set and a warm-up of a fifth of the requests; the check: DBSIZE is
# the data set plus the benchmark's 4 keys, and every 50th value reads back
# as written).
run_redis() {
  local row=$1 lib=$2 log=$3 port rps c0 c1 hwm status=ok got
  port=$(free_port) || return 1
  server_start "$lib" "$log.server" redis-server --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --daemonize no --dir "$WORK"
  # shellcheck disable=SC2317 # called through server_wait
  rds_pid_is_ours() { [[ $(redis-cli -p "$port" info server 2>/dev/null | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }') == "$SRV_PID" ]]; }
  server_wait redis rds_pid_is_ours || { server_stop; return 1; }
  if [[ $row == redis_server ]] && ! { rds_data pipe | redis-cli -p "$port" --pipe >>"$log" 2>&1 &&
    rds_bench "$port" $((REQUESTS / 5)) "$log" >/dev/null; }; then
    server_stop
    return 1
  fi
  c0=$(proc_cpu "$SRV_PID")
  rps=$(rds_bench "$port" "$REQUESTS" "$log")
  c1=$(proc_cpu "$SRV_PID")
  if [[ $row == redis_server && -n $rps ]]; then
    got=$(redis-cli -p "$port" dbsize)
    [[ $got == $((RDS_KEYS + 4)) ]] || { echo "check: dbsize $got, want $((RDS_KEYS + 4))" >>"$log"; status=check_failed; }
    rds_data check 2>"$WORK/rds.cmds" >"$WORK/rds.want"
    redis-cli -p "$port" <"$WORK/rds.cmds" >"$WORK/rds.got" 2>>"$log"
    cmp -s "$WORK/rds.want" "$WORK/rds.got" || { echo "check: values read back differ" >>"$log"; status=check_failed; }
    echo "checked: dbsize $got; $(wc -l <"$WORK/rds.cmds") values read back" >>"$log"
  fi
  hwm=$(proc_hwm "$SRV_PID")
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  server_stop
  [[ -n $rps ]] || return 1
  echo "$row $rps req/s $(cpu_diff "$c0" "$c1") $((8 * REQUESTS)) $hwm $status"
}
