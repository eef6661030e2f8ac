#!/usr/bin/env bash
# Every HAKMEM_* variable of the options table is documented in
# docs/TUNING.md, and the library knows every variable the doc lists.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s all >/dev/null
code=$(grep -o '"HAKMEM_[A-Z_]*"' src/options.h | tr -d '"' | sort -u)
doc=$(grep -o '^| `HAKMEM_[A-Z_]*`' docs/TUNING.md | grep -o 'HAKMEM_[A-Z_]*' | sort -u)
missing=$(comm -23 <(echo "$code") <(echo "$doc"))
extra=$(comm -13 <(echo "$code") <(echo "$doc"))
[[ -z $missing ]] || { echo "FAIL: not documented in docs/TUNING.md: $missing"; exit 1; }
[[ -z $extra ]] || { echo "FAIL: documented but unknown to the library: $extra"; exit 1; }
# each documented variable is accepted without a warning
# (in a directory of its own: HAKMEM_PROF=1 writes profiles where it runs)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for v in $code; do
  w=$(cd "$tmp" && env "$v=1" LD_PRELOAD=$OLDPWD/build/libhakmem.so /bin/true 2>&1 | grep -c "unknown variable" || true)
  [[ $w == 0 ]] || { echo "FAIL: $v is reported unknown"; exit 1; }
done
echo "$(wc -l <<<"$code") variables, all documented and known"
