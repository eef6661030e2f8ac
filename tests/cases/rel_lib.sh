# shellcheck shell=bash disable=SC2034
# Helpers sourced by the rel_*.sh cases (not a test: not executable, so
# tests/run.sh does not run it).   . tests/cases/rel_lib.sh
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  echo "skip: rel_lib.sh is a helper library, not a test"
  exit 77
fi
set -euo pipefail

RT=build/tests/rel          # programs of the rel_* cases
SO=$PWD/build/libhakmem.so
mkdir -p "$RT"

# A clean, deterministic environment: no HAKMEM_* settings from the caller.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^HAKMEM_' || true)
export LC_ALL=C
ulimit -c 0

die() { echo "FAILED: $*" >&2; exit 1; }
skip() { echo "skip: $*"; exit 77; }
need() {
  local f
  for f in "$@"; do [[ -e $f ]] || die "missing $f (run make all debug asan first)"; done
}

# Every sanitizer report is fatal.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:halt_on_error=1:detect_leaks=0:exitcode=66}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:exitcode=66}

# build OUT COMPILER SOURCE [ARGS...]: compile unless OUT is newer than the
# source, the public header, this file and every existing file in ARGS (the
# libraries it links).  The command is printed.
build() {
  local out=$1 cc=$2 src=$3 dep stale=0
  shift 3
  if [[ ! -e $out || $src -nt $out || include/hakmem.h -nt $out || tests/cases/rel_lib.sh -nt $out ]]; then
    stale=1
  else
    for dep in "$@"; do
      [[ -f $dep && $dep -nt $out ]] && stale=1
    done
  fi
  ((stale)) || return 0
  mkdir -p "$(dirname "$out")"
  echo "\$ $cc $src $* -o $out" >&2
  "$cc" "$src" "$@" -o "$out" || die "cannot build $out"
}
# shellcheck disable=SC2054
WHOLE_RELEASE=(-Wl,--whole-archive build/libhakmem.a -Wl,--no-whole-archive)

# probe_outcomes TSV TABLE: check scripts/probes.sh's outcomes (TSV, from -o)
# of the libraries hakmem and hakmem-secure against TABLE, one "NAME SIZE
# DEFAULT SECURE" a line, C = must be caught, - = may be missed.  Prints a
# line per failed requirement (and a note per catch beyond the table), dies
# if the table and the list differ, and sets PROBE_FAILS and the catches of
# each build, PROBE_CAUGHT_DEFAULT and PROBE_CAUGHT_SECURE.  A hakmem abort
# must come with exactly one "hakmem:" line naming an address.
probe_outcomes() {
  local tsv=$1 want=$2 listed tabled lib name size outcome addr nerr line col need_caught
  listed=$(awk -F'\t' '$1 == "hakmem" { print $2, $3 }' "$tsv" | sort)
  tabled=$(awk '{ print $1, $2 }' <<<"$want" | sort)
  [[ $listed == "$tabled" ]] || die "the table and the list differ: $(diff <(echo "$listed") <(echo "$tabled") | tr '\n' ' ')"
  PROBE_FAILS=0 PROBE_CAUGHT_DEFAULT=0 PROBE_CAUGHT_SECURE=0
  while IFS=$'\t' read -r lib name size outcome addr nerr line; do
    col=3; [[ $lib == hakmem-secure ]] && col=4
    need_caught=$(awk -v p="$name" -v s="$size" -v c=$col '$1 == p && $2 == s { print $c }' <<<"$want")
    if [[ $outcome == caught-* ]]; then
      if ((col == 3)); then PROBE_CAUGHT_DEFAULT=$((PROBE_CAUGHT_DEFAULT + 1)); else PROBE_CAUGHT_SECURE=$((PROBE_CAUGHT_SECURE + 1)); fi
    fi
    if [[ $outcome == error* ]]; then
      echo "FAIL $lib $name $size: $outcome ($line)"; PROBE_FAILS=$((PROBE_FAILS + 1))
    elif [[ $need_caught == C && $outcome != caught-* ]]; then
      echo "FAIL $lib $name $size: $outcome, want caught"; PROBE_FAILS=$((PROBE_FAILS + 1))
    elif [[ $outcome == caught-ABRT ]] && { ((nerr != 1)) || ! grep -Eq '^hakmem: .*0x[0-9a-f]+' <<<"$line"; }; then
      echo "FAIL $lib $name $size: abort with $nerr stderr lines, first: $line"; PROBE_FAILS=$((PROBE_FAILS + 1))
    elif [[ $need_caught == - && $outcome == caught-* ]]; then
      echo "note $lib $name $size: $outcome beyond the table${line:+: $line}"
    fi
  done <"$tsv"
}
