#!/usr/bin/env bash
# A short soak of hakmem (balanced): 20 s of random_mixed in one process
# (plus a large-block variant) must keep RSS within a bound: peak RSS under
# 16 MB, and the last sample within 1 MB of the first after warm-up.  The
# warm-up is the first 40 % of the run: free pages are decommitted after 2 s
# (balanced) of disuse, page by page, so the resident set of the large
# variant settles after two delays (~4 s: 10.1 -> 12.4 MB, then flat).
# A memory bound, not a time: throughput is not asserted.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all bench-progs >/dev/null
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() {   # label, extra env...
  local label=$1; shift
  env NO_BUILD=1 DURATION_SEC=${SOAK_SECONDS:-10} STEP_ITERS=2M ALLOC=hakmem HAKMEM_PROFILE=balanced "$@" \
    OUTDIR="$tmp/$label" bash scripts/soak.sh >"$tmp/$label.out" 2>&1 || { tail -5 "$tmp/$label.out"; exit 1; }
  local line; line=$(grep '^SOAK ' "$tmp/$label/summary.md")
  echo "$label: $line"
  python3 - "$tmp/$label/soak.csv" "$label" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rss = [int(r["rss_kb"]) for r in rows]
steady = rss[len(rss) * 2 // 5:] or rss
peak, first, last = max(rss), steady[0], steady[-1]
print(f"{sys.argv[2]}: samples {len(rss)}, peak {peak} KiB, first steady {first} KiB, last {last} KiB")
ok = peak < 16 * 1024 and abs(last - first) <= 1024
sys.exit(0 if ok else 1)
PY
}
check small
check large WS=400 MIN=16 MAX=512Ki
echo "short soak: RSS bounded"
