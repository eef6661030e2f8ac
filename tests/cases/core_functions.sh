#!/usr/bin/env bash
# No function of src/ is longer than 60 lines, counted from the line with its
# name to the line with its closing brace: every function of src/*.c and
# every inline function of src/*.h.  A longer one mixes mechanisms that want
# names of their own (large.c's _hak_large_alloc was 123 lines of site
# strategy, secure placement, BigCache, fresh mappings, trimming,
# accounting, prefault, learning and profiling).  Prints each offender with
# its file:line and length.  The checks read code, not comments.
set -euo pipefail
cd "$(dirname "$0")/../.."

python3 - <<'PY'
import re, glob, sys
LIMIT = 60
allow = set()   # EXCEPTIONS, each to be split and then taken out of this line

def code(t):   # comments, strings, character constants and preprocessor lines out; lines kept
    t = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), t, flags=re.S)
    t = re.sub(r'//[^\n]*', '', t)
    t = re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', '""', t)
    t = re.sub(r'^[ \t]*#(\w*)(?:[^\n]*\\\n)*[^\n]*', lambda m: '#' + m.group(1) + '\n' * m.group(0).count('\n'), t, flags=re.M)
    out, stack = [], []   # of each #if chain only the first branch: the others may open braces of their own
    for line in t.split('\n'):
        d = re.match(r'#(\w*)', line)
        if d and d.group(1) in ('if', 'ifdef', 'ifndef'): stack.append(False)
        elif d and d.group(1) in ('else', 'elif') and stack: stack[-1] = True
        elif d and d.group(1) == 'endif' and stack: stack.pop()
        out.append('' if d or any(stack) else line)
    return '\n'.join(out)

NOT_NAMES = {"__attribute__", "__attribute", "__asm__", "asm", "_Alignas", "alignas", "__declspec"}
def name_before(t, i):   # t[i] == ')': the function's name before the parameter list it closes, else None
    while True:
        depth = 0
        while i >= 0:   # back to the matching '('
            depth += {')': 1, '(': -1}.get(t[i], 0)
            if depth == 0: break
            i -= 1
        m = re.search(r'(\w+)\s*$', t[:i])
        if not m: return None, 0
        if m.group(1) not in NOT_NAMES: return m.group(1), m.start(1)
        j = m.start(1) - 1   # an attribute after the parameter list: the list is before it
        while j >= 0 and t[j].isspace(): j -= 1
        if j < 0 or t[j] != ')': return None, 0   # a struct's attribute, not a function
        i = j

def functions(path):
    t = code(open(path).read())
    depth, out = 0, []
    for m in re.finditer(r'[{}]', t):
        if m.group(0) == '}':
            depth -= 1
            if depth == 0 and out and out[-1][3] is None:
                out[-1][3] = t.count('\n', 0, m.start()) + 1
            continue
        if depth == 0:
            j = m.start() - 1
            while j >= 0 and t[j].isspace(): j -= 1
            if j >= 0 and t[j] == ')':
                name, at = name_before(t, j)
                if name: out.append([name, path, t.count('\n', 0, at) + 1, None])
        depth += 1
    if depth != 0: sys.exit(f"FAIL: {path}: braces do not balance ({depth}): the parse cannot be trusted")
    return out

found, long, allowed = 0, [], set()
for path in sorted(glob.glob('src/*.c') + glob.glob('src/*.h')):
    for name, p, first, last in functions(path):
        found += 1
        n = last - first + 1
        if n > LIMIT and name in allow:
            allowed.add(name)
            print(f"allowed for now: {p}:{first}: {name} is {n} lines")
        elif n > LIMIT:
            long.append(f"{p}:{first}: {name} is {n} lines")
if found < 200: sys.exit(f"FAIL: only {found} functions found in src/: the parse is broken")
stale = sorted(allow - allowed)
if long:
    print(f"FAIL: functions longer than {LIMIT} lines (from the line with the name to the closing brace):")
    print('\n'.join(long))
if stale: print("FAIL: in the exceptions but no longer too long (take them out): " + ' '.join(stale))
if long or stale: sys.exit(1)
print(f"ok   no function of src/ is longer than {LIMIT} lines ({found} functions read, {len(allow)} excepted)")
PY
