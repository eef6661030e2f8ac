#!/usr/bin/env bash
# A short soak of hakmem (balanced): random_mixed in one process (10 s of
# small blocks, 20 s of a large-block variant) must keep RSS within a bound:
# peak RSS under 16 MB, and the last sample within 1 MB of the first after
# warm-up.  Warm-up ends when both 4.5 s have passed (free pages are
# decommitted after 2 s of disuse, page by page: two delays) and 24 M
# operations have run (the large variant's working set fills with operations,
# not time: 10.1 -> 12.4 MB over the first ~22 M, then flat).  A warm-up set
# by time alone failed on a loaded machine, whose slower ramp it cut in half.
# A memory bound, not a time: throughput is not asserted.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all bench-progs >/dev/null
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() {   # label, seconds, extra env...
  local label=$1 seconds=$2; shift 2
  env NO_BUILD=1 DURATION_SEC=${SOAK_SECONDS:-$seconds} STEP_ITERS=2M ALLOC=hakmem HAKMEM_PROFILE=balanced "$@" \
    OUTDIR="$tmp/$label" bash scripts/soak.sh >"$tmp/$label.out" 2>&1 || { tail -5 "$tmp/$label.out"; exit 1; }
  local line; line=$(grep '^SOAK ' "$tmp/$label/summary.md")
  echo "$label: $line"
  python3 - "$tmp/$label/soak.csv" "$label" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rss = [int(r["rss_kb"]) for r in rows]
ops, steady = 0, []
for r in rows:
    ops += int(r["ops"])
    if float(r["t_s"]) >= 4.5 and ops >= 24_000_000:
        steady.append(int(r["rss_kb"]))
if len(steady) < 4:
    print(f"{sys.argv[2]}: only {len(steady)} samples after warm-up ({ops} operations in all): machine too slow for the run's length")
    sys.exit(1)
peak, first, last = max(rss), steady[0], steady[-1]
print(f"{sys.argv[2]}: samples {len(rss)} ({len(steady)} after warm-up), peak {peak} KiB, first steady {first} KiB, last {last} KiB")
ok = peak < 16 * 1024 and abs(last - first) <= 1024
sys.exit(0 if ok else 1)
PY
}
check small 10
check large 20 WS=400 MIN=16 MAX=512Ki
echo "short soak: RSS bounded"
