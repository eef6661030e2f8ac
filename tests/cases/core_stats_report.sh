#!/usr/bin/env bash
# The HAKMEM_STATS=1 report reaches the user: from programs that close stderr
# before exit (ls, cat, sort, awk, echo) through the duplicate of stderr taken
# at start-up; not from a descriptor an exec'd program inherited, nor when the
# program closed or dup2'd over that duplicate (then on fd 2); and with
# HAKMEM_STATS_FILE=PATH (%p = pid), one file per process of a pipeline and
# of a fork.  Without HAKMEM_STATS no descriptor is taken.
set -euo pipefail
. tests/cases/core_lib.sh
need "$SO"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
nreports() { grep -c '^hakmem: stats (' "$1" || true; }
# the interpreter itself, not a wrapper that runs other programs first (pyenv)
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3) || skip "python3 not installed"

echo "== programs that close stderr before exit print the report"
printf 'b\na\nc\n' >"$tmp/in"
progs=("ls /" "cat $tmp/in" "sort $tmp/in" "awk {print} $tmp/in" "/bin/echo x")
for cmd in "${progs[@]}"; do
  read -r -a argv <<<"$cmd"
  command -v "${argv[0]}" >/dev/null || { echo "--   ${argv[0]} not installed"; continue; }
  "${argv[@]}" >"$tmp/want" 2>&1
  rc=0
  env HAKMEM_STATS=1 LD_PRELOAD="$SO" "${argv[@]}" >"$tmp/out" 2>"$tmp/err" || rc=$?
  n=$(nreports "$tmp/err")
  if ((rc != 0)); then bad "$cmd: exit status $rc"
  elif ! cmp -s "$tmp/want" "$tmp/out"; then bad "$cmd: output differs under hakmem"
  elif ((n != 1)); then bad "$cmd: $n reports on stderr, want 1"; sed 's/^/    /' "$tmp/err"
  else echo "ok   $cmd: $(grep '^os:' "$tmp/err")"
  fi
done

echo "== the duplicate: taken only with HAKMEM_STATS, at a high number, not inherited across exec"
plain=$(ls /proc/self/fd | tr '\n' ' ')
pre=$(env LD_PRELOAD="$SO" ls /proc/self/fd | tr '\n' ' ')
[[ $pre == "$plain" ]] || bad "without HAKMEM_STATS the descriptors differ: '$pre' vs '$plain'"
with=$(env HAKMEM_STATS=1 LD_PRELOAD="$SO" ls /proc/self/fd 2>/dev/null | tr '\n' ' ')
extra=$(comm -13 <(tr ' ' '\n' <<<"$plain" | sort) <(tr ' ' '\n' <<<"$with" | sort) | tr '\n' ' ')
read -r -a extra_a <<<"$extra"
if ((${#extra_a[@]} != 1)) || ((extra_a[0] < 10)); then
  bad "with HAKMEM_STATS: extra descriptors '$extra', want one numbered 10 or more"
fi
child=$(env HAKMEM_STATS=1 LD_PRELOAD="$SO" env -u LD_PRELOAD ls /proc/self/fd 2>/dev/null | tr '\n' ' ')
[[ $child == "$plain" ]] || bad "an exec'd program inherited descriptors: '$child' vs '$plain'"
echo "ok   descriptors without stats: $pre; with stats: $with; exec'd child: $child"

echo "== the program closes the duplicate, or dup2s a file onto its number: the report goes to fd 2"
for how in close dup2; do
  rc=0
  env HAKMEM_STATS=1 LD_PRELOAD="$SO" "$PY" -c '
import os, sys
mine = [int(f) for f in os.listdir("/proc/self/fd") if int(f) >= 10]
null = os.open("/dev/null", os.O_WRONLY)
for fd in mine:
    if fd == null: continue
    if sys.argv[1] == "close": os.close(fd)
    else: os.dup2(null, fd)
print(len(mine))
' "$how" >"$tmp/out" 2>"$tmp/err" || rc=$?
  n=$(nreports "$tmp/err")
  if ((rc != 0)); then bad "$how: python3 exit status $rc: $(head -n 3 "$tmp/err")"
  elif (($(cat "$tmp/out") < 1)); then bad "$how: python3 saw no descriptor numbered 10 or more"
  elif ((n != 1)); then bad "$how: $n reports on stderr, want 1"
  else echo "ok   $how: report on stderr"
  fi
done

echo "== HAKMEM_STATS_FILE=DIR/r.%p: one file per process"
mkdir "$tmp/pipe"
rc=0
env HAKMEM_STATS=1 HAKMEM_STATS_FILE="$tmp/pipe/r.%p" LD_PRELOAD="$SO" PIDS="$tmp/pids" PY="$PY" sh -c '
  sh -c "echo \$\$ >>\$PIDS; exec ls /" | sh -c "echo \$\$ >>\$PIDS; exec sort" |
    sh -c "echo \$\$ >>\$PIDS; exec cat" >/dev/null
  "$PY" -c "
import os, sys
pid = os.fork()
open(os.environ[\"PIDS\"], \"a\").write(\"%d\n\" % os.getpid())
if pid: os.waitpid(pid, 0)
sys.exit(0)"' >"$tmp/out" 2>"$tmp/err" || rc=$?
((rc == 0)) || bad "pipeline: exit status $rc: $(head -n 3 "$tmp/err")"
[[ ! -s $tmp/err ]] || bad "pipeline wrote to stderr: $(head -n 3 "$tmp/err")"
npids=$(wc -l <"$tmp/pids")
((npids == 5)) || bad "pipeline: $npids processes recorded their pid, want 5"
while read -r p; do
  f=$tmp/pipe/r.$p
  if [[ ! -f $f ]]; then bad "no report file for pid $p"; continue; fi
  [[ $(nreports "$f") == 1 ]] || bad "$f: $(nreports "$f") reports, want 1"
done <"$tmp/pids"
for f in "$tmp"/pipe/r.*; do
  [[ $(nreports "$f") == 1 ]] || bad "$f: $(nreports "$f") reports, want 1"
  grep -q "^hakmem: stats (version [^,]*, pid ${f##*.}," "$f" || bad "$f: the report is not from pid ${f##*.}"
done
echo "ok   $(ls "$tmp/pipe" | wc -l) files (sh, ls, sort, cat, python3 and its forked child among them), one report each"

echo "== %% is a percent sign; the report is appended"
for _ in 1 2; do env HAKMEM_STATS=1 HAKMEM_STATS_FILE="$tmp/pct%%" LD_PRELOAD="$SO" /bin/true; done
[[ -f $tmp/pct% ]] && [[ $(nreports "$tmp/pct%") == 2 ]] || bad "HAKMEM_STATS_FILE=pct%%: want two reports in $tmp/pct%"
echo "ok   two runs, two reports in pct%"

echo "== HAKMEM_STATS_FILE that cannot be opened: one warning, the report on stderr"
env HAKMEM_STATS=1 HAKMEM_STATS_FILE="$tmp/no/such/dir/r" LD_PRELOAD="$SO" /bin/true 2>"$tmp/err"
if [[ $(grep -c '^hakmem: warning: cannot open HAKMEM_STATS_FILE' "$tmp/err") != 1 || $(nreports "$tmp/err") != 1 ]]; then
  bad "unopenable file: want one warning and one report on stderr"; sed 's/^/    /' "$tmp/err"
else
  echo "ok   $(head -n 1 "$tmp/err")"
fi

echo "== HAKMEM_STATS_FILE without HAKMEM_STATS: no report, no file"
env HAKMEM_STATS_FILE="$tmp/off.%p" LD_PRELOAD="$SO" /bin/true 2>"$tmp/err"
if compgen -G "$tmp/off.*" >/dev/null || [[ -s $tmp/err ]]; then bad "HAKMEM_STATS_FILE alone wrote something"; fi
echo "ok   nothing written"

checks_done report
echo "all report checks passed"
