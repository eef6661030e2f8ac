#!/usr/bin/env bash
# Everyday programs under LD_PRELOAD=libhakmem.so (start-up, threads, big
# buffers, fork/exec): each gives the same output as without hakmem.
# A program that is not installed is left out; with none at all, skip.
set -euo pipefail
. tests/cases/core_lib.sh
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# input: a tar of the top-level C headers, at most 800 files, padded with
# generated text to a few MB
(cd /usr/include 2>/dev/null && ls -1 | grep '\.h$' | LC_ALL=C sort) >"$tmp/all" || true
head -n 800 "$tmp/all" >"$tmp/list"
tar -C /usr/include -cf "$tmp/in.tar" -T "$tmp/list" 2>/dev/null || tar -cf "$tmp/in.tar" -T /dev/null
awk 'BEGIN { for (i = 0; i < 40000; i++) printf "%d %x the quick brown fox %d\n", i, i * 2654435761 % 4294967296, i % 977 }' >"$tmp/gen.txt"
tar -C "$tmp" -rf "$tmp/in.tar" gen.txt
cat >"$tmp/t.sql" <<'SQL'
create table t(a integer primary key, b text);
with recursive c(x) as (select 1 union all select x + 1 from c where x < 200000)
  insert into t select x, printf('%08x', x * 2654435761 % 4294967296) || x from c;
create index ib on t(b);
select count(*), sum(length(b)), max(b) from t;
SQL
echo "input: $(wc -c <"$tmp/in.tar") bytes"
# name|program|command (run with bash -c; $IN is the input file)
progs=(
  "xz -T2|xz|head -c 2000000 \$IN | xz -T2 -2 -c | sha256sum"
  "xz roundtrip|xz|xz -0 -c \$IN | xz -dc | sha256sum"
  "bzip2|bzip2|bzip2 -c \$IN | sha256sum"
  "zstd -T2|zstd|zstd -q -T2 -12 -c \$IN | sha256sum"
  "gzip|gzip|gzip -c \$IN | sha256sum"
  "tar list|tar|tar -tvf \$IN | sort | sha256sum"
  "perl hash|perl|perl -e 'my %h; for my \$i (1..400000) { \$h{\"k\$i\"} = [\$i, \"v\" x (\$i % 40)] } my \$s = 0; \$s += length(\$h{\$_}[1]) + \$h{\$_}[0] for keys %h; print scalar(keys %h), \" \$s\\n\"'"
  "sqlite3|sqlite3|sqlite3 :memory: <\$SQL"
  "jq|jq|jq -n '[range(200000) | {k: (. | tostring), v: (. * 3)}] | map(select(.v % 7 == 0)) | length'"
  "bc|bc|echo 'scale=1200; 4*a(1)' | bc -l | sha256sum"
  "find+sort|find|find /usr/include -name '*.h' | sort | sha256sum"
  "awk|awk|tar -xOf \$IN | awk '{ n[\$1]++ } END { for (k in n) c++; print c, NR }'"
  "sh pipeline|sh|sh -c 'for i in 1 2 3 4 5 6 7 8; do echo \$i; done | while read x; do expr \$x \\* 3; done' | sha256sum"
)
ran=0
for entry in "${progs[@]}"; do
  IFS='|' read -r name bin cmd <<<"$entry"
  if ! command -v "$bin" >/dev/null; then
    echo "--   $name: $bin not installed"
    continue
  fi
  export IN=$tmp/in.tar SQL=$tmp/t.sql
  t0=$SECONDS
  ref=$(bash -c "$cmd" 2>&1) || die "$name failed without hakmem: $ref"
  out=$(LD_PRELOAD="$SO" bash -c "$cmd" 2>&1) || die "$name failed under hakmem: $out"
  [[ $ref == "$out" ]] || die "$name: output differs under hakmem: '$out' vs '$ref'"
  echo "ok   $name ($((SECONDS - t0))s): ${out:0:70}"
  ran=$((ran + 1))
done
((ran > 0)) || skip "none of the programs is installed"
echo "$ran programs gave the same output under hakmem"
