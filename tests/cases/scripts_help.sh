#!/usr/bin/env bash
# Every script in scripts/ (and tests/run.sh) answers --help and -h with its
# usage and exit status 0 at once, without doing work: within 10 s, nothing
# written to results/, and neither make nor the package tools run.  An unknown argument
# is refused with exit status 2 where a script takes no arguments.
set -euo pipefail
. tests/cases/core_lib.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# A PATH where make and apt-get/dpkg record that they ran and do nothing.
mkdir "$tmp/bin"
for t in make apt-get dpkg dpkg-query git python3 cc gcc; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/ran"\nexit 1\n' "$t" "$tmp" >"$tmp/bin/$t"
  chmod +x "$tmp/bin/$t"
done
# what appeared in results/ (build/ is not watched: other cases may run meanwhile)
stamp() { find results -maxdepth 1 -newer "$tmp/ref" -print 2>/dev/null || true; }

scripts=(scripts/*.sh tests/run.sh)
((${#scripts[@]} >= 6)) || die "only ${#scripts[@]} scripts found"
for s in "${scripts[@]}"; do
  for opt in --help -h; do
    touch "$tmp/ref"
    rm -f "$tmp/ran"
    rc=0
    PATH="$tmp/bin:$PATH" timeout -k 2 10 bash "$s" "$opt" >"$tmp/out" 2>"$tmp/err" </dev/null || rc=$?
    lines=$(wc -l <"$tmp/out")
    if ((rc != 0)); then bad "$s $opt: exit status $rc$( ((rc == 124)) && echo ' (timed out: it did work)'): $(head -n 3 "$tmp/err")"
    elif ((lines < 3)); then bad "$s $opt: $lines lines of help on stdout"
    elif ! grep -q "${s##*/}" "$tmp/out"; then bad "$s $opt: the help does not name ${s##*/}"
    elif [[ -s $tmp/ran ]]; then bad "$s $opt ran: $(head -n 3 "$tmp/ran")"
    elif new=$(stamp) && [[ -n $new ]]; then bad "$s $opt wrote: $new"
    else continue
    fi
    sed 's/^/    /' "$tmp/err" | tail -n 5
  done
  echo "ok   $s --help, -h: $(head -n 1 "$tmp/out")"
done

echo "== an unknown argument is refused (exit 2) before any work"
for s in scripts/sites.sh scripts/soak.sh scripts/setup.sh scripts/programs.sh; do
  rc=0
  PATH="$tmp/bin:$PATH" timeout -k 2 10 bash "$s" --no-such-option >"$tmp/out" 2>"$tmp/err" </dev/null || rc=$?
  if ((rc != 2)); then bad "$s --no-such-option: exit status $rc, want 2"
  else echo "ok   $s --no-such-option: $(head -n 1 "$tmp/err")"
  fi
done

checks_done help
echo "every script answers --help and -h"
