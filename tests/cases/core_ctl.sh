#!/usr/bin/env bash
# Figures on request (tests/test-ctl.c): hakmem_ctl's names and errors, the
# figures following mallocs and frees (also other threads' and an exited
# thread's), their order, mallopt; in the release, debug and secure builds,
# with the hak_ names, through LD_PRELOAD, and in each profile.  Then malloc_info's
# XML, parsed with python3: well formed, in glibc's shape, and its totals the
# ctl figures of the same moment.  HAKMEM_BACKGROUND=0: the background thread
# would move the figures between two readings; sampling and guarded blocks off
# but in one run (with HAKMEM_PROF=on, so that the unwinder is loaded at the
# start: loaded at a first sample, its dlopen's blocks would count).
set -euo pipefail
. tests/cases/core_lib.sh
need $T/test-ctl-release $T/test-ctl-debug $T/test-ctl-hak $T/test-ctl-glibc "$SO" build/libhakmem-secure.so
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export HAKMEM_BACKGROUND=0
sampling_off

run "test-ctl, standard names, build/libhakmem.a" $T/test-ctl-release api
run "test-ctl, debug library" $T/test-ctl-debug api
run "test-ctl, hak_ names" $T/test-ctl-hak api
run "test-ctl (glibc-linked) with LD_PRELOAD=$SO" env LD_PRELOAD="$SO" $T/test-ctl-glibc api --require-hakmem
run "test-ctl (glibc-linked), the secure build: blocks at their requests, the quarantine's not live" env LD_PRELOAD=build/libhakmem-secure.so $T/test-ctl-glibc api --require-hakmem
run "test-ctl, HAKMEM_PROFILE=speed" env HAKMEM_PROFILE=speed $T/test-ctl-release api
run "test-ctl, HAKMEM_PROFILE=lean" env HAKMEM_PROFILE=lean $T/test-ctl-release api
run "test-ctl, sampled and guarded blocks (HAKMEM_PROF=on, HAKMEM_GUARD=1000): in the figures" env HAKMEM_PROF=on HAKMEM_GUARD=1000 \
  HAKMEM_PROF_PREFIX="$tmp/p" $T/test-ctl-release api
run "test-ctl, the environment wins over mallopt" env HAKMEM_LEAN_TARGET_MB=7 HAKMEM_INVALID_FREE=warn $T/test-ctl-release api

echo "== every name of src/ctl.c's table is in docs/TUNING.md"
names=$(sed -n '/^static const ctl_t ctl_table/,/^};/p' src/ctl.c |
  sed -nE 's/.*(\{|FIG\(|FIG_U64\()"([^"]+)".*/\2/p; s/.*CLS\("([^"]+)".*/stats.class.#.\1/p' | sed 's/#/<i>/; s/\*/<name>/')
(($(wc -l <<<"$names") >= 30)) || bad "only $(wc -l <<<"$names") names read from src/ctl.c"
for n in $names; do grep -qF "\`$n\`" docs/TUNING.md || bad "$n is not in docs/TUNING.md"; done
echo "ok   $(wc -l <<<"$names") names"

PY=$(command -v python3) || skip "python3 not installed (the XML checks)"
check_xml() {   # check_xml NAME OUTPUT XML
  "$PY" - "$@" <<'EOF'
import sys, xml.etree.ElementTree as ET
name, out, path = sys.argv[1:4]
ctl, classes = {}, {}
for line in open(out):
    w = line.split()
    if w[:1] == ["ctl"]: ctl[w[1]] = int(w[2])
    if w[:1] == ["class"]: classes[int(w[1])] = (int(w[2]), int(w[3]))
bad = []
def want(cond, what):
    if not cond: bad.append(what)
root = ET.parse(path).getroot()   # raises on XML that is not well formed
want(root.tag == "malloc" and root.get("version") == "1", "root <malloc version=\"1\">")
heaps = root.findall("heap")
want(len(heaps) == 1 and heaps[0].get("nr") == "0", "one <heap nr=\"0\">")
heap = heaps[0]
def total(el, kind):
    t = [e for e in el.findall("total") if e.get("type") == kind]
    want(len(t) == 1, "one <total type=\"%s\"> in <%s>" % (kind, el.tag))
    return (int(t[0].get("count")), int(t[0].get("size"))) if t else (0, 0)
def system(el, kind, tag="system"):
    t = [e for e in el.findall(tag) if e.get("type") == kind]
    want(len(t) == 1, "one <%s type=\"%s\"> in <%s>" % (tag, kind, el.tag))
    return int(t[0].get("size")) if t else 0
sizes = heap.find("sizes")
rows = [(int(s.get("from")), int(s.get("to")), int(s.get("total")), int(s.get("count"))) for s in sizes.findall("size")]
fast = total(heap, "fast")
want(sum(r[2] for r in rows) == fast[1] and sum(r[3] for r in rows) == fast[0],
     "the <sizes> add up to the fast total %s" % (fast,))
want(fast == (ctl["stats.small.free_blocks"], ctl["stats.small.free_bytes"]),
     "fast %s = the ctl's free blocks and bytes %s" % (fast, (ctl["stats.small.free_blocks"], ctl["stats.small.free_bytes"])))
room = {size: n for size, n in classes.values() if n}
want({r[1]: r[3] for r in rows} == room, "one <size> per class with room, to = its size, count = its free blocks")
want(all(r[0] <= r[1] and r[2] == r[1] * r[3] for r in rows), "each <size>: from <= to, total = to x count")
rest = total(heap, "rest")
cur = system(heap, "current")
want(rest[1] <= ctl["stats.retained"], "rest %d <= stats.retained %d" % (rest[1], ctl["stats.retained"]))
want(rest[1] + fast[1] <= cur, "rest + fast <= the heap's system current %d" % cur)
want(system(heap, "max") == ctl["stats.peak_mapped"], "system max = stats.peak_mapped")
want(system(heap, "total", "aspace") == cur, "aspace total = system current")
for kind in ("fast", "rest"):
    want(total(root, kind) == total(heap, kind), "the overall %s total is the heap's" % kind)
mmap = total(root, "mmap")
want(mmap == (ctl["stats.large.live_blocks"], ctl["stats.large.mapped"]),
     "mmap %s = the live large blocks and their mappings %s" % (mmap, (ctl["stats.large.live_blocks"], ctl["stats.large.mapped"])))
want(mmap[0] >= 1, "the program's large blocks are there")
want(system(root, "current") + mmap[1] == ctl["stats.mapped"],
     "system current %d + mmap %d = stats.mapped %d" % (system(root, "current"), mmap[1], ctl["stats.mapped"]))
for b in bad: print("FAIL: %s: %s" % (name, b))
if not bad:
    print("ok   %s: %d <size> rows, fast %s, rest %s, mmap %s, system current %d, stats.mapped %d"
          % (name, len(rows), fast, rest, mmap, cur, ctl["stats.mapped"]))
sys.exit(1 if bad else 0)
EOF
}
for v in release debug glibc; do
  pre=()
  [[ $v == glibc ]] && pre=(env LD_PRELOAD="$SO")
  run "test-ctl-$v xml" "${pre[@]}" $T/test-ctl-$v xml "$tmp/$v.xml" >"$tmp/$v.out"
  check_xml "malloc_info of test-ctl-$v" "$tmp/$v.out" "$tmp/$v.xml" || bad "malloc_info of test-ctl-$v"
done
checks_done malloc_info
echo "all ctl checks passed"
