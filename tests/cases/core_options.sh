#!/usr/bin/env bash
# Options: profiles, explicit variables winning over the profile, one warning
# line for an unknown HAKMEM_* name or a malformed value (and the program
# still works), silence for valid settings, HAKMEM_STATS=1 report at exit.
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-opts-release $T/test-opts-glibc "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# opts PROGRAM ENV... -- NAMES...: run, stdout to $tmp/out, stderr to $tmp/err
opts() {
  local prog=$1 rc=0
  shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$prog" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if ((rc != 0)) || ! grep -q '^workload ok$' "$tmp/out"; then
    bad "${envs[*]} $prog: exit status $rc, workload did not finish"
    cat "$tmp/out" "$tmp/err" >"$tmp/both"
    head -n 20 "$tmp/both" | sed 's/^/    /'
    return 1
  fi
}
value() { sed -n "s/^$1=//p" "$tmp/out"; }
nlines() { wc -l <"$tmp/err"; }

echo "== profiles (hak_option_get(\"HAKMEM_PROFILE\"): speed 0, balanced 1, lean 2; default balanced)"
for p in "" speed balanced lean; do
  e=()
  [[ -n $p ]] && e=(HAKMEM_PROFILE=$p)
  opts $T/test-opts-release "${e[@]}" -- HAKMEM_PROFILE HAKMEM_NO_SUCH_OPTION || continue
  want=1
  case $p in speed) want=0 ;; lean) want=2 ;; esac
  got=$(value HAKMEM_PROFILE)
  [[ $got == "$want" ]] || bad "HAKMEM_PROFILE=${p:-(unset)}: hak_option_get = '$got', want $want"
  [[ $(value HAKMEM_NO_SUCH_OPTION) == -1 ]] || bad "unknown option name: hak_option_get != -1"
  (($(nlines) == 0)) || bad "HAKMEM_PROFILE=${p:-(unset)}: unexpected stderr: $(head -n 3 "$tmp/err")"
  echo "ok   HAKMEM_PROFILE=${p:-(unset)} -> $got, no stderr output"
done

echo "== an explicitly set variable wins over the profile"
for p in speed balanced lean; do
  for d in off free dontneed; do
    opts $T/test-opts-release HAKMEM_PROFILE=$p HAKMEM_DECOMMIT=$d -- HAKMEM_DECOMMIT || continue
    want=0
    case $d in free) want=1 ;; dontneed) want=2 ;; esac
    got=$(value HAKMEM_DECOMMIT)
    [[ $got == "$want" ]] || bad "HAKMEM_PROFILE=$p HAKMEM_DECOMMIT=$d: hak_option_get = '$got', want $want"
    (($(nlines) == 0)) || bad "HAKMEM_PROFILE=$p HAKMEM_DECOMMIT=$d: unexpected stderr: $(head -n 3 "$tmp/err")"
  done
  echo "ok   HAKMEM_PROFILE=$p with HAKMEM_DECOMMIT=off|free|dontneed -> 0|1|2"
done

echo "== one warning line for an unknown name or a malformed value"
for setting in HAKMEM_FOOBAR=1 HAKMEM_DECOMMIT=banana HAKMEM_PROFILE=fast HAKMEM_STATS=maybe HAKMEM_DECOMMIT= \
  HAKMEM_SEG_CACHE=; do
  var=${setting%%=*}
  for prog in $T/test-opts-release preload; do
    if [[ $prog == preload ]]; then
      opts $T/test-opts-glibc LD_PRELOAD="$SO" "$setting" -- HAKMEM_PROFILE || continue
    else
      opts "$prog" "$setting" -- HAKMEM_PROFILE || continue
    fi
    n=$(nlines)
    if ((n != 1)); then
      bad "$setting ($prog): $n lines on stderr, want exactly 1"; sed 's/^/    /' "$tmp/err"
    elif ! grep -q "$var" "$tmp/err"; then
      bad "$setting ($prog): the warning does not name $var: $(cat "$tmp/err")"
    else
      echo "ok   $setting ($(basename "$prog")): $(cat "$tmp/err")"
    fi
  done
done
echo "== an empty value is malformed: one warning line, the default kept"
for var in HAKMEM_DECOMMIT HAKMEM_PROFILE HAKMEM_STATS HAKMEM_SEG_CACHE HAKMEM_PREWARM HAKMEM_LEARN_FORCE \
  HAKMEM_STATS_FILE HAKMEM_BIGCACHE_MAX_MB; do
  opts $T/test-opts-release -- $var || continue
  want=$(value $var)
  opts $T/test-opts-release "$var=" -- $var || continue
  got=$(value $var)
  if (($(nlines) != 1)) || ! grep -q "^hakmem: warning: .*: $var=\$" "$tmp/err"; then
    bad "$var= (empty): want one warning line naming it, got: $(cat "$tmp/err")"
  elif [[ $got != "$want" ]]; then
    bad "$var= (empty): value $got, want the default $want"
  else
    echo "ok   $var= -> $got (default), $(cat "$tmp/err")"
  fi
done
# a malformed profile falls back to the default
opts $T/test-opts-release HAKMEM_PROFILE=fast -- HAKMEM_PROFILE &&
  { [[ $(value HAKMEM_PROFILE) == 1 ]] || bad "HAKMEM_PROFILE=fast: profile $(value HAKMEM_PROFILE), want 1 (default)"; }

echo "== HAKMEM_STATS=1 prints a report at exit with an 'os:' line"
for prog in $T/test-opts-release preload; do
  if [[ $prog == preload ]]; then
    opts $T/test-opts-glibc LD_PRELOAD="$SO" HAKMEM_STATS=1 -- || continue
  else
    opts "$prog" HAKMEM_STATS=1 -- || continue
  fi
  if grep -Eq '^[[:space:]]*os:' "$tmp/err" "$tmp/out"; then
    echo "ok   HAKMEM_STATS=1 ($(basename "$prog")): $(grep -Eh -m 1 '^[[:space:]]*os:' "$tmp/err" "$tmp/out")"
  else
    bad "HAKMEM_STATS=1 ($prog): no line starting with 'os:' in the output"
    head -n 20 "$tmp/err" | sed 's/^/    /'
  fi
done
opts $T/test-opts-release HAKMEM_STATS=0 -- || true
(($(nlines) == 0)) || bad "HAKMEM_STATS=0 printed something: $(head -n 2 "$tmp/err")"

((fails == 0)) || die "$fails option checks failed"
echo "all option checks passed"
