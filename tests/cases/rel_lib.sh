# shellcheck shell=bash disable=SC2034
# Helpers of the rel_probes and rel_exploits cases (not a test: not
# executable, so tests/run.sh does not run it): core_lib.sh's, and the check
# of scripts/probes.sh's outcomes.   . tests/cases/rel_lib.sh
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  echo "skip: rel_lib.sh is a helper library, not a test"
  exit 77
fi
. tests/cases/core_lib.sh

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
