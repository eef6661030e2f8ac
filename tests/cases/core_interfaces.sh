#!/usr/bin/env bash
# The interfaces between the files of src/ are written, not implied:
# (1) every src/*.c and src/*.h compiles on its own, in the release, secure,
# debug and no-override flags (`make syntax-check`: the unity build is how
# the library is built, not what holds it together); (2) no function
# defined `static` in a .c is called from another .c (before 2026-11-28 the
# small tier's helpers were, and five files compiled only inside unity.c);
# (3) no function has two names: an internal function whose whole body
# hands its parameters, in order, to another function is a second name for
# it (`_hak_slab_collect` was `slab_collect`'s).
set -euo pipefail
. tests/cases/core_lib.sh

echo "== every file compiles on its own (make syntax-check)" >&2
make -s syntax-check || die "a file of src/ does not compile on its own"
echo "ok   $(ls src/*.c src/*.h | grep -vc unity.c) files compile alone in 4 builds' flags"

python3 - <<'PY'
import re, glob, os, sys
def code(t):   # comments, strings and character constants out; lines kept
    t = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), t, flags=re.S)
    t = re.sub(r'//[^\n]*', '', t)
    return re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', '""', t)
files = sorted(p for p in glob.glob('src/*.c') if not p.endswith('/unity.c'))
src = {f: code(open(f).read()) for f in files}
fail = []
# (2) static functions of a .c called from another .c
head = r'^(?:hak_warm\s+|hak_cold\s+|hak_noinline\s+)*(?:static|hak_inline)\b[^;{=]*?\b(\w+)\s*\(([^;{]*)\)\s*(?:__attribute__\(\(.*?\)\)\s*)?\{'
for f, t in src.items():
    for m in re.finditer(head, t, re.M):
        n = m.group(1)
        users = [g for g, u in src.items() if g != f and re.search(r'\b' + n + r'\s*\(', u)]
        if users: fail.append(f"{f}: static {n} is called from {' '.join(users)}")
# (3) second names: f(a, b) { [return] g(a, b); }
wrap = re.compile(r'^[A-Za-z_][\w \t*]*?\b(\w+)\s*\(([^;{}()]*)\)\s*\{\s*(?:return\s+)?(\w+)\s*\(([^;{}()]*)\)\s*;\s*\}', re.M)
for f, t in src.items():
    for m in wrap.finditer(t):
        name, params, callee, args = m.groups()
        if not (name.startswith('_hak_') or re.search(r'\bstatic\b', t[m.start():m.start(1)])): continue   # public names are the API's
        pn = [re.findall(r'(\w+)\s*(?:\[\s*\])?$', p.strip())[0] for p in params.split(',') if p.strip() not in ('', 'void')]
        an = [a.strip() for a in args.split(',') if a.strip()]
        if pn == an: fail.append(f"{f}: {name} is a second name for {callee}")
if fail: sys.exit("FAIL:\n" + '\n'.join(fail))
print(f"ok   no static function called from another file, no function with two names ({len(files)} files)")
PY
