#!/usr/bin/env bash
# docs/DESIGN.md's layering, checked on the code: (1) only src/os.c calls the
# OS's memory calls (mmap, munmap, madvise, mprotect, mremap, mincore), so
# every call is counted in one place under one contract, the clocks and
# the page size (clock_gettime, sysconf), and the file calls (open, read,
# write, close, ...: no allocation, async-signal-safe); (2) no file of
# src/ calls a function of a higher layer ("Layers": the table of files and
# the named calls up), and every named call up is still one.  The checks
# read code, not comments.  (2) fails on a tree where a lower file calls up
# without being named (large.c's realloc called hak_malloc and hak_free of
# alloc.c before the one realloc by copy).
set -euo pipefail
cd "$(dirname "$0")/../.."
calls=$(grep -nE '\b(mmap|munmap|madvise|mprotect|mremap|mincore|clock_gettime|sysconf|open|read|write|pwrite|close|lseek|fstat|fcntl|ftruncate|fallocate)[[:space:]]*\(' src/*.c src/*.h |
  grep -vE '^src/os\.c:' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|/\*|//)' || true)
if [[ -n $calls ]]; then
  echo "FAIL: OS memory calls, clocks, sysconf or file calls outside src/os.c:"
  echo "$calls"
  exit 1
fi
echo "ok   OS memory calls, clocks, sysconf and file calls only in src/os.c ($(ls src/*.c src/*.h | wc -l) files read)"

python3 - <<'PY'
import re, glob, os, sys
doc = open('docs/DESIGN.md').read()
sec = re.search(r'^## Layers\n(.*?)(?=^## )', doc, re.S | re.M)
if not sec: sys.exit("FAIL: docs/DESIGN.md has no '## Layers' section")
sec = sec.group(1)
layer, named = {}, set()
for line in sec.splitlines():
    m = re.match(r'\|\s*(\d+)\b[^|]*\|(.*)\|\s*$', line)
    if m:
        for f in re.findall(r'`([\w.]+\.[ch])`', m.group(2)): layer[f] = int(m.group(1))
    elif not line.startswith('|'):
        named |= set(re.findall(r'`(_?hak_\w+)`', line))
bound = re.search(r'at most (\d+) pairs of files', sec)
if not bound: sys.exit("FAIL: docs/DESIGN.md's 'Layers' does not say 'at most N pairs of files'")
bound = int(bound.group(1))
files = sorted(os.path.basename(p) for p in glob.glob('src/*.[ch]') if not p.endswith('/unity.c'))
bad = [f for f in files if f not in layer] + [f for f in layer if f not in files]
if bad: sys.exit("FAIL: src files and docs/DESIGN.md's layer table disagree: " + ' '.join(bad))
def code(t):   # comments, strings and character constants out; lines kept
    t = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), t, flags=re.S)
    t = re.sub(r'//[^\n]*', '', t)
    return re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', '""', t)
def noproto(t):   # a declaration is not a use: prototypes out, lines kept
    return re.sub(r'^[A-Za-z_][\w \t*]*?\b\w+\s*\((?:[^;{}()]|\([^;{}()]*\))*\)\s*(?:__attribute__\(\((?:[^()]|\([^()]*\))*\)\)\s*)*;',
                  lambda m: '\n' * m.group(0).count('\n'), t, flags=re.M)
src = {f: noproto(code(open('src/' + f).read())) for f in files}
defd = {}
for f, t in src.items():   # function definitions (a header's: its inline functions): a name at the start of a line's declaration, then a body
    for m in re.finditer(r'^[A-Za-z_][\w \t*()]*?\b(\w+)\s*\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*(?:__attribute__\(\(.*?\)\)\s*)?\{', t, re.M):
        defd.setdefault(m.group(1), set()).add(f)
def owner_of(fs):   # a header's definition beside a .c's is the other build's stub (secure.h): the .c owns the name
    cs = [f for f in fs if f.endswith('.c')]
    return cs[0] if len(cs) == 1 else next(iter(fs)) if len(fs) == 1 else None
owner = {n: o for n, fs in defd.items() if (o := owner_of(fs))}   # static namesakes in two files: not followed
up, used, pairs = [], set(), {}
for f, t in src.items():
    for i, line in enumerate(t.split('\n'), 1):
        for m in re.finditer(r'\b(\w+)\s*\(', line):
            g = owner.get(m.group(1))
            if g is None or g == f or f in defd[m.group(1)]: continue   # (a stub's own definition)
            pairs.setdefault((f, g), set()).add(m.group(1))
            if layer[g] <= layer[f]: continue
            if m.group(1) in named: used.add(m.group(1)); continue
            up.append(f"src/{f}:{i}: {m.group(1)} (src/{g}, layer {layer[g]}) called from layer {layer[f]}")
stale = sorted(named - used)
ups = sorted(k for k in pairs if layer[k[1]] > layer[k[0]])
if up: print("FAIL: calls up the layers not named in docs/DESIGN.md's 'Layers':\n" + '\n'.join(up))
if stale: print("FAIL: named in docs/DESIGN.md's 'Layers' but no longer a call up: " + ' '.join(stale))
if len(ups) > bound:
    print(f"FAIL: {len(ups)} pairs of files run up the layers (bound {bound}):")
    for f, g in ups: print(f"    {f} -> {g}: {' '.join(sorted(pairs[(f, g)]))}")
if up or stale or len(ups) > bound: sys.exit(1)
print(f"ok   no call runs up the layers but the {len(named)} named, in {len(ups)} of the {len(pairs)} pairs of files that call each other (bound {bound}; {len(files)} files, headers' inline functions counted)")
PY
