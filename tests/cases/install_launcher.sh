#!/bin/sh
# install_launcher: the installed `hakmem` launcher (and the in-tree
# build/hakmem) preloads the library, sets HAKMEM_* from its options, passes
# the exit status through, and fails with 2 on usage errors and 127 on a
# missing command.
set -eu
. "$(dirname "$0")/../install.sh"
install_prefix
h=$prefix/bin/hakmem lib=$prefix/lib/libhakmem.so

# run CMD...: status in $rc, output in $tmp/out and $tmp/err
run() { rc=0; "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?; }
expect() {  # expect STATUS WHAT
  [ "$rc" = "$1" ] || fail "$2: exit $rc, expected $1; stderr: $(cat "$tmp/err")"
}
has() { grep -q -- "$1" "$tmp/out" || fail "$2: output lacks '$1': $(cat "$tmp/out")"; }

run "$h" --help; expect 0 "--help"
for w in --stats --secure libhakmem-secure.so --profile= --lib= --guard --version HAKMEM_PROFILE HAKMEM_STATS HAKMEM_GUARD docs/TUNING.md; do
  has "$w" "--help"
done
run "$h" --version; expect 0 "--version"
[ "$(cat "$tmp/out")" = "hakmem $ver" ] || fail "--version printed '$(cat "$tmp/out")', header says $ver"

run "$h" -- true; expect 0 "hakmem -- true"
run "$h" sh -c 'exit 42'; expect 42 "exit status passthrough"

run "$h" --profile=lean env; expect 0 "--profile=lean env"
has "^HAKMEM_PROFILE=lean\$" "--profile=lean"
has "^LD_PRELOAD=$lib\$" "--profile=lean"
run "$h" --profile speed --stats -- env; expect 0 "--profile speed --stats"
has "^HAKMEM_PROFILE=speed\$" "--profile speed"
has "^HAKMEM_STATS=1\$" "--stats"
run "$h" --guard env; expect 0 "--guard"
has "^HAKMEM_GUARD=1000\$" "--guard"
run "$h" --guard=7 env; expect 0 "--guard=7"
has "^HAKMEM_GUARD=7\$" "--guard=7"
run "$h" --guard=x env; expect 2 "--guard=x"
# prepended to an existing LD_PRELOAD (ld.so warns about the bogus entry)
run env LD_PRELOAD=/nonexistent/other.so "$h" env; expect 0 "existing LD_PRELOAD"
has "^LD_PRELOAD=$lib:/nonexistent/other.so\$" "existing LD_PRELOAD"

# library lookup: --lib (file or directory) over HAKMEM_LIB over the install dir
run env HAKMEM_LIB="$tmp/none.so" "$h" true; expect 1 "HAKMEM_LIB missing file"
grep -q "not found" "$tmp/err" || fail "no message for a missing library"
run env HAKMEM_LIB="$tmp/none.so" "$h" --lib="$prefix/lib" env; expect 0 "--lib=DIR"
has "^LD_PRELOAD=$lib\$" "--lib=DIR"
cp "$lib" "$tmp/copy.so"
run env HAKMEM_LIB="$tmp/copy.so" "$h" env; expect 0 "HAKMEM_LIB"
has "^LD_PRELOAD=$tmp/copy.so\$" "HAKMEM_LIB"
(cd "$tmp" && run "$h" --lib copy.so env && expect 0 "--lib relative" \
  && has "^LD_PRELOAD=$tmp/copy.so\$" "--lib relative (made absolute)")

# --stats: the library prints its report on stderr at exit
run "$h" --stats -- /bin/true; expect 0 "--stats -- /bin/true"
if grep -q hakmem "$tmp/err"; then :
elif command -v nm >/dev/null 2>&1 && nm -D --defined-only "$lib" | grep -q ' hakmem_stats_print$'; then
  fail "HAKMEM_STATS=1 printed no report mentioning hakmem on stderr"
else
  echo "note: library has no statistics report yet; --stats report not checked"
fi

# --secure: the secure build from the install dir, really loaded, and with a
# behaviour only it has (a one-byte heap overflow is detected at free)
sec=$prefix/lib/libhakmem-secure.so
run "$h" --secure env; expect 0 "--secure env"
has "^LD_PRELOAD=$sec\$" "--secure"
run "$h" --secure -- cat /proc/self/maps; expect 0 "--secure -- cat /proc/self/maps"
has " $prefix/lib/libhakmem-secure\.so\.$ver\$" "--secure maps"
! grep -q "/libhakmem\.so" "$tmp/out" || fail "--secure also mapped the default library: $(cat "$tmp/out")"
run "$h" -- cat /proc/self/maps; expect 0 "default maps"
has " $prefix/lib/libhakmem\.so\.$ver\$" "default maps"
if command -v cc >/dev/null 2>&1; then
  printf '%s\n' '#include <stdlib.h>' \
    'int main(void) { volatile char* p = malloc(20); p[20] = 1; free((void*)p); return 0; }' >"$tmp/ovf.c"
  cc -O0 -fno-builtin "$tmp/ovf.c" -o "$tmp/ovf" || fail "cc ovf.c"
  run "$h" -- "$tmp/ovf"; expect 0 "overflow by one byte, default build (not detected)"
  run "$h" --secure -- "$tmp/ovf"; expect 134 "overflow by one byte under --secure"
  grep -q "^hakmem: heap overflow detected" "$tmp/err" || fail "--secure: no overflow report: $(cat "$tmp/err")"
else
  echo "note: no cc; --secure overflow detection not checked"
fi
# --secure with --lib=DIR / HAKMEM_LIB=DIR; the run-time name NAME.so.MAJOR when
# NAME.so (a development symlink) is absent; a --lib file is refused
mkdir "$tmp/rt"
cp "$sec" "$tmp/rt/libhakmem-secure.so.${ver%%.*}"
run "$h" --secure --lib="$tmp/rt" env; expect 0 "--secure --lib=DIR"
has "^LD_PRELOAD=$tmp/rt/libhakmem-secure.so.${ver%%.*}\$" "--secure --lib=DIR (run-time name)"
run env HAKMEM_LIB="$prefix/lib/" "$h" --secure env; expect 0 "--secure HAKMEM_LIB=DIR"
has "^LD_PRELOAD=$sec\$" "--secure HAKMEM_LIB=DIR"
run "$h" --secure --lib="$lib" true; expect 2 "--secure --lib=FILE"

# usage errors -> 2, missing command -> 127
run "$h" --bogus true; expect 2 "unknown option"
run "$h" --profile=fast true; expect 2 "bad profile"
run "$h" --lib; expect 2 "--lib without a value"
run "$h"; expect 2 "no command"
run "$h" --stats --; expect 2 "no command after --"
run "$h" hakmem-no-such-command-xyz; expect 127 "missing command"
grep -q "hakmem-no-such-command-xyz" "$tmp/err" || fail "no message for a missing command"
run "$h" -- ./no/such/program; expect 127 "missing command path"

# the in-tree launcher uses the library beside it, also through a symlink
run "$root/build/hakmem" env; expect 0 "build/hakmem env"
has "^LD_PRELOAD=$root/build/libhakmem.so\$" "build/hakmem"
run "$root/build/hakmem" --secure env; expect 0 "build/hakmem --secure env"
has "^LD_PRELOAD=$root/build/libhakmem-secure.so\$" "build/hakmem --secure"
ln -s "$root/build/hakmem" "$tmp/hakmem-link"
run "$tmp/hakmem-link" env; expect 0 "symlinked build/hakmem"
has "^LD_PRELOAD=$root/build/libhakmem.so\$" "symlinked build/hakmem"
echo "launcher ok"
