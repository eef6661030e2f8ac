#!/usr/bin/env bash
# sqlite3 under LD_PRELOAD=build/libhakmem.so: build a 200k-row database with
# two indexes (file database, small page cache so the pager works), run
# aggregate, join, sort and integrity queries; the output must be the same
# byte for byte as without hakmem.  HAKMEM_STATS=1 proves hakmem served it.
set -euo pipefail
. tests/cases/core_lib.sh
command -v sqlite3 >/dev/null || skip "sqlite3 not installed (apt-get install sqlite3)"
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/script.sql" <<'SQL'
PRAGMA cache_size = -4000;
PRAGMA journal_mode = WAL;
PRAGMA synchronous = OFF;
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, s TEXT, r REAL, b BLOB);
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
INSERT INTO t SELECT x, (x * 7919) % 1000,
       printf('%08x-%d-%s', (x * 2654435761) % 4294967296, x % 97, substr('abcdefghijklmnopqrstuvwxyz', x % 26 + 1, x % 23)),
       (x % 1000) / 7.0,
       zeroblob(x % 300)
FROM c;
COMMIT;
CREATE INDEX t_k ON t(k, s);
CREATE INDEX t_s ON t(s);
SELECT count(*), sum(k), round(avg(r), 6), sum(length(b)), min(s), max(s) FROM t;
SELECT k % 20 AS g, count(*), sum(id), round(sum(r), 3), max(length(s)) FROM t GROUP BY g ORDER BY g;
SELECT s FROM t ORDER BY s DESC LIMIT 5;
SELECT count(*) FROM t WHERE s LIKE '%-13-%';
SELECT a.k, count(*) FROM t AS a JOIN t AS b ON a.k = b.k AND b.id % 1000 = 0 WHERE a.id % 100 = 0
  GROUP BY a.k ORDER BY 2 DESC, 1 LIMIT 10;
SELECT k, group_concat(id, ',') FROM (SELECT k, id FROM t WHERE k < 3 ORDER BY id LIMIT 30) GROUP BY k;
UPDATE t SET s = s || '-updated', b = zeroblob(500) WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
SELECT count(*), sum(length(s)), sum(length(b)) FROM t;
SELECT count(DISTINCT s), count(DISTINCT k) FROM t;
VACUUM;
PRAGMA integrity_check;
SELECT k, count(*) FROM t INDEXED BY t_k WHERE k BETWEEN 500 AND 505 GROUP BY k;
SQL
run_sqlite() {   # run_sqlite OUT [env...]
  local out=$1
  shift
  rm -f "$tmp/db" "$tmp/db-wal" "$tmp/db-shm"
  env "$@" sqlite3 "$tmp/db" <"$tmp/script.sql" >"$out" 2>"$out.err" || die "sqlite3 failed ($*): $(tail -n 3 "$out.err")"
}
t0=$(date +%s.%N)
run_sqlite "$tmp/ref"
t1=$(date +%s.%N)
run_sqlite "$tmp/out" LD_PRELOAD="$SO" HAKMEM_STATS=1
t2=$(date +%s.%N)
grep -q '^hakmem: stats' "$tmp/out.err" || die "no hakmem statistics report: was hakmem preloaded? $(head -n 3 "$tmp/out.err")"
if ! cmp -s "$tmp/ref" "$tmp/out"; then
  diff "$tmp/ref" "$tmp/out" >"$tmp/diff" || true
  head -n 20 "$tmp/diff"
  die "sqlite3 output differs under hakmem"
fi
grep -qx ok "$tmp/out" || die "integrity_check did not say ok"
echo "sqlite3: $(wc -l <"$tmp/out") lines of output identical; glibc $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')s, hakmem $(awk -v a="$t1" -v b="$t2" 'BEGIN{printf "%.1f", b-a}')s"
grep -E '^(small|large|os):' "$tmp/out.err" | sed 's/^/  hakmem /'
head -n 3 "$tmp/out" | sed 's/^/  /'
