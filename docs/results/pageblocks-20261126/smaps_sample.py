import sys, subprocess, time, os, re
# usage: smaps_sample.py [--series] LIB cmd...
#   samples /proc/PID/smaps of cmd run under LIB ("glibc": no preload), mappings grouped
#   (4 MiB-aligned segments, 8 MiB thread stacks, other anonymous, files);
#   default: every 5 ms, prints the sample with the most RSS;
#   --series: every 0.5 s, prints each sample (MB).
series = sys.argv[1] == "--series"
args = sys.argv[2:] if series else sys.argv[1:]
lib, cmd = args[0], args[1:]
env = dict(os.environ)
if lib != "glibc": env["LD_PRELOAD"] = lib
p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
best = None
while p.poll() is None:
    try:
        txt = open(f"/proc/{p.pid}/smaps").read()
    except Exception: break
    cats = {}
    name = None; size = 0
    for line in txt.splitlines():
        m = re.match(r'^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$', line)
        if m:
            lo, hi = int(m.group(1),16), int(m.group(2),16)
            name = m.group(3) or ""
            size = hi - lo
            if name == "":
                if size == (8<<20): name = "stack8M"
                elif lo % (4<<20) == 0 and size >= (4<<20): name = "seg4M"
                elif size > (1<<20): name = "anon>1M"
                else: name = "anon-small"
            elif name.startswith("/"): name = "file"
            continue
        if line.startswith("Rss:") and name == "stack8M" and int(line.split()[1]) > 16: name = "seg8M"
        if line.startswith("Rss:"):
            cats[name] = cats.get(name, 0) + int(line.split()[1])
            if name == "stack8M": cats["nstacks"] = cats.get("nstacks",0)+1
    tot = sum(v for k, v in cats.items() if k != "nstacks")
    if series:
        print(int(tot/1024), {k:int(v/1024) for k,v in cats.items() if v>1000}, flush=True)
    elif best is None or tot > best[0]:
        best = (tot, cats)
    time.sleep(0.5 if series else 0.005)
p.wait()
if not series and best:
    print(lib.split("/")[-1], "maxrss_kB", best[0], sorted(best[1].items(), key=lambda x:-x[1]))
