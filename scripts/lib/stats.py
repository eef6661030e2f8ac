#!/usr/bin/env python3
"""Statistics and reports for hakmem's benchmark runners (standard library only).

Subcommands:
  summary V...                 n, median, mean, stddev, CV of numbers (one line)
  report DIR                   suite report: DIR/raw.tsv + DIR/meta.tsv ->
                               runs.csv, report.md, verdict.txt, charts;
                               prints report.md
  syscalls DIR                 syscall budget: DIR/syscalls.tsv -> syscalls.csv,
                               report.md; prints report.md
  soak DIR                     soak summary: DIR/soak.csv (+ meta.tsv, result.txt)
                               -> summary.md, soak.png; prints summary.md
  ab DIR                       A/B verdict: DIR/ab.tsv (+ meta.tsv) -> report.md;
                               prints it; exit status 1 on NO-GO

Definitions (used by every mode):
  median   middle value of the sorted sample; mean of the two middle ones for even n
  mean     arithmetic mean
  stddev   sample standard deviation (divisor n - 1); 0 when n = 1
  CV       stddev / mean * 100 (%); 0 when the mean is 0
  ratio    (suite report) the geometric mean of the paired ratios X_k / baseline_k,
           round k of X against round k of the baseline (the runner interleaves
           them: A B C A B C ..., so the two runs of a round saw the same state of
           the machine); for lower-is-better figures a ratio below 1 is better
           (charts plot baseline/X for those so up is better); the report adds the
           ratios to a second baseline (meta baseline2) when it was measured
  interval the confidence interval of a ratio (level: meta ci_level, default 95 %),
           a Student t interval on the paired log ratios d_k = ln(X_k / base_k):
           mean(d) +- t(n-1) * s(d) / sqrt(n), exponentiated.  A ratio is
           significant when its interval excludes 1; otherwise the report shows it
           with "≈".  The verdict at the top of the report is hakmem's geometric
           mean over the benchmarks, G = exp(mean over b of mean(d_b)), with the
           interval exp(ln G +- t(df) * sqrt(sum over b of s_b^2 / n_b) / B), df by
           Welch-Satterthwaite: the benchmarks are fixed, the rounds are the sample.
           Why t and not a bootstrap or a rank test: with RUNS=3 a 95 % percentile
           bootstrap of 3 pairs is the range of the 3 ratios (its coverage is about
           75 %, not 95), and a sign or Wilcoxon interval cannot reach 95 % below 6
           pairs (3 pairs that all agree give p = 0.25), so no cell could ever be
           significant; t accounts for estimating the spread from 3 pairs (t(2) =
           4.30) and is exact when the log ratios are normal.  A round disturbed by
           the machine widens the interval: it errs towards "not distinguishable".
  no interval  from one paired round (RUNS=1): the ratio is shown as "(1 round)"
"""
import csv
import math
import os
import shutil
import subprocess
import sys

# ----------------------------------------------------------------- statistics


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    m = n // 2
    return s[m] if n % 2 else (s[m - 1] + s[m]) / 2.0


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def stddev(xs):
    n = len(xs)
    if n < 2:
        return 0.0
    mu = mean(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (n - 1))


def cv_pct(xs):
    mu = mean(xs)
    if not xs or mu == 0:
        return 0.0
    return stddev(xs) / mu * 100.0


def describe(xs):
    return {
        "n": len(xs),
        "median": median(xs),
        "mean": mean(xs),
        "stddev": stddev(xs),
        "cv_pct": cv_pct(xs),
        "min": min(xs) if xs else float("nan"),
        "max": max(xs) if xs else float("nan"),
    }


# Confidence intervals: Student's t from the regularized incomplete beta
# function (continued fraction, as in Numerical Recipes' betacf), all in the
# standard library; no random numbers, so the same runs give the same report.


def _betacf(a, b, x):
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_sf(t, df):
    """P(T > t) for Student's t with df degrees of freedom (df > 0, real)."""
    p = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return p if t >= 0 else 1.0 - p


def t_quantile(p, df):
    """The p-quantile of Student's t (0.5 < p < 1), by bisection."""
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1.0 - p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return (lo + hi) / 2.0


def log_interval(groups, level=95.0):
    """The mean over the groups of each group's mean, and its t interval.

    groups: lists of paired log ratios, one list per benchmark (one list: the
    paired t interval, df = n - 1; several: Welch-Satterthwaite's df).
    Returns (estimate, low, high); low and high are None when a group has fewer
    than 2 values (no spread to judge by)."""
    groups = [g for g in groups if g]
    if not groups:
        return None, None, None
    nb = float(len(groups))
    est = sum(mean(g) for g in groups) / nb
    if any(len(g) < 2 for g in groups):
        return est, None, None
    terms = [stddev(g) ** 2 / len(g) / nb ** 2 for g in groups]
    var = sum(terms)
    if var <= 0.0:
        return est, est, est
    df = var ** 2 / sum(t * t / (len(g) - 1) for t, g in zip(terms, groups) if t > 0)
    half = t_quantile(0.5 + level / 200.0, df) * math.sqrt(var)
    return est, est - half, est + half


def significant(lo, hi):
    """An interval of log ratios that excludes 0 (the ratio 1)."""
    return lo is not None and (lo > 0.0 or hi < 0.0)


def g(x):
    """Exact-enough text of a number for machine-readable output."""
    if isinstance(x, int):
        return str(x)
    if x != x:
        return "nan"
    return "%.10g" % x


# ----------------------------------------------------------------- formatting


def unit_of(key):
    if key.endswith("_kb") or key.endswith("_bytes"):
        return "MB"
    if key.endswith("_s"):
        return "s"
    if key in ("ops_per_sec", "ops_per_cpu_sec"):
        return "M ops/s"
    if key.endswith("_ns") or key == "ns_per_op":
        return "ns"
    return ""


def fmt(key, v):
    """A value in the unit of its key (KiB -> MB, ops/s -> M ops/s)."""
    if v is None or v != v:
        return "—"
    if key.endswith("_kb"):
        return "%.1f" % (v / 1024.0)
    if key.endswith("_bytes"):
        return "%.1f" % (v / 1048576.0)
    if key.endswith("_s"):
        return "%.3f" % v
    if key in ("ops_per_sec", "ops_per_cpu_sec"):
        return "%.2f" % (v / 1e6)
    if key.endswith("_ns") or key == "ns_per_op":
        return "{:,.0f}".format(v) if abs(v) >= 1000 else "%.1f" % v
    if abs(v) >= 1e6:
        return "{:,.0f}".format(v)
    if v == int(v):
        return "%d" % v
    return "%.3g" % v


FIGURE_NAMES = {
    "ops_per_sec": "throughput",
    "ns_per_op": "time per operation",
    "p99_ns": "p99 latency of malloc and free",
    "rss_final_kb": "RSS after regrowth",
    "elapsed_s": "elapsed time",
}


def figure_name(key):
    """`throughput [M ops/s] (ops_per_sec)`: the name, unit and key of a figure."""
    u = unit_of(key)
    name = FIGURE_NAMES.get(key)
    if name:
        return "%s%s (`%s`)" % (name, " [%s]" % u if u else "", key)
    return "`%s`%s" % (key, " [%s]" % u if u else "")


def is_memory(key):
    """A figure of memory (RSS, bytes, overhead), not of time."""
    return key.endswith("_kb") or key.endswith("_bytes") or key.endswith("overhead")


def fmt_ratio(x, digits=2):
    """A ratio with `digits` decimals; small ratios with as many significant digits."""
    if x != x:
        return "—"
    return "%.*f" % (digits, x) if x >= 0.1 else "%.*g" % (digits, x)


def label(key, better):
    return "%s, %s is better" % (figure_name(key), better)


def md_table(header, rows, align=None):
    out = ["| " + " | ".join(header) + " |"]
    if align is None:
        align = ["l"] + ["r"] * (len(header) - 1)
    out.append("|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|")
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def num(s):
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return v if v == v else None


def read_meta(d):
    meta = {}
    p = os.path.join(d, "meta.tsv")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                line = line.rstrip("\n")
                if "\t" in line:
                    k, v = line.split("\t", 1)
                    meta[k] = v
    return meta


def parse_result(line):
    kv = {}
    for w in line.split()[1:]:
        if "=" in w:
            k, v = w.split("=", 1)
            kv[k] = v
    return kv


# ----------------------------------------------------------------- gnuplot


def gnuplot(script, cwd):
    """Run a gnuplot script (pngcairo, falling back to png).  Returns an
    error text or None."""
    if not shutil.which("gnuplot"):
        return "gnuplot not installed (scripts/setup.sh installs gnuplot-nox)"
    last = ""
    for term in ("pngcairo noenhanced font ',10'", "png noenhanced"):
        text = script.replace("@TERM@", term)
        r = subprocess.run(["gnuplot"], input=text, text=True, cwd=cwd, capture_output=True)
        if r.returncode == 0:
            return None
        last = r.stderr.strip().splitlines()[-1:] or ["gnuplot failed"]
        last = last[0]
    return last


def gp_quote(s):
    return "'" + s.replace("'", "''") + "'"


def histogram_chart(cwd, png, datafile, ncols, title, ylabel, logscale=False, refline=None, errorbars=False,
                    ymax=None):
    """A clustered bar chart of datafile: column 1 the x labels, then ncols - 1
    series (with errorbars: each series three columns, value, low and high, drawn
    as a bar with an error bar from low to high; the series' first column header
    names it).  ymax: the top of the y axis (default: the data's)."""
    lines = [
        "set terminal @TERM@ size 1100,520",
        "set output %s" % gp_quote(png),
        "set title %s" % gp_quote(title),
        "set style data histograms",
        "set style histogram %s gap 1%s" % (("errorbars", " lw 1") if errorbars else ("clustered", "")),
        "set style fill solid 0.85 border -1",
        "set boxwidth 0.9",
        "set datafile missing '?'",
        "set key outside right top",
        "set ylabel %s" % gp_quote(ylabel),
        "set grid ytics",
        "set xtics rotate by -25 nomirror",
    ]
    if logscale:
        lines.append("set logscale y")
    else:
        lines.append("set yrange [0:%s]" % ("*" if ymax is None else "%g" % ymax))
    if refline is not None:
        lines.append("set arrow from graph 0, first %g to graph 1, first %g nohead dt 2 lw 1.5 lc rgb 'black'"
                     % (refline, refline))
    if errorbars:
        lines.append("plot for [i=0:%d] %s using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) "
                     "title columnheader(2+3*i)" % (ncols - 2, gp_quote(datafile)))
    else:
        lines.append("plot for [i=2:%d] %s using i:xtic(1) title columnheader(i)" % (ncols, gp_quote(datafile)))
    return gnuplot("\n".join(lines) + "\n", cwd)


def chart_top(datafile):
    """The top of a chart of bars with error bars (datafile as histogram_chart's
    with errorbars): the data's when the error bars are short; else 1.6 times the
    highest bar, with a note for the title, so that a wide interval from 3 rounds
    does not flatten every bar."""
    bars, highs = [1.0], [1.0]
    with open(datafile) as f:
        next(f, None)
        for line in f:
            vs = [num(x) for x in line.split()[1:]]
            bars += [v for v in vs[0::3] if v is not None]
            highs += [v for v in vs[2::3] if v is not None]
    top = 1.6 * max(bars)
    if max(highs) <= top:
        return None, ""
    return top, " (error bars cut at %.3g)" % top


# ----------------------------------------------------------------- summary


def one_dir(args, cmd):
    """The one DIR argument of a report command, or None after a usage line."""
    if len(args) != 1:
        sys.stderr.write("usage: stats.py %s DIR\n" % cmd)
        return None
    return args[0]


def write_report(d, name, out):
    """Write the report lines to DIR/name and print them."""
    text = "\n".join(out) + "\n"
    with open(os.path.join(d, name), "w") as f:
        f.write(text)
    sys.stdout.write(text)


def cmd_summary(args):
    xs = []
    for a in args:
        v = num(a)
        if v is None:
            sys.stderr.write("stats.py summary: not a number: %r\n" % a)
            return 2
        xs.append(v)
    if not xs:
        sys.stderr.write("stats.py summary: no numbers\n")
        return 2
    d = describe(xs)
    print(" ".join("%s=%s" % (k, g(d[k])) for k in ("n", "median", "mean", "stddev", "cv_pct", "min", "max")))
    return 0


# ----------------------------------------------------------------- suite report

ALLOC_ORDER = ["hakmem", "glibc", "mimalloc", "mi241", "mi343", "jemalloc", "tcmalloc", "snmalloc"]
BENCH_ORDER = ["random_mixed", "vm", "vm_cold", "larson", "xthread", "latency", "fragment",
               "churn", "churn8", "churn64", "churn_small", "churn_tasks", "turns"]
DESCRIPTION = {
    "random_mixed": "1 thread, WS live slots, free + malloc of a uniform size in [MIN, MAX] per op",
    "vm": "malloc(2 MiB) + write every page + free, per iteration",
    "vm_cold": "random sizes 256 KiB..8 MiB over 4 live slots, every page written",
    "larson": "THREADS threads replace blocks in arrays that move between threads each round",
    "xthread": "producers malloc, consumers free (every free remote), batched queue",
    "latency": "per-call latency of malloc and free on the mixed workload (timer overhead subtracted)",
    "fragment": "grow to FRAG_MB MiB, free 90 % scattered, regrow with larger sizes: RSS",
    "churn": "threads that come and go: each round THREADS threads (main included) allocate CHURN_ALLOCS x "
             "(t%8+1) blocks (powers of two in [MIN, MAX], a few 100x-10000x larger), keep half, free random "
             "ones and swap some with 1,000 shared slots, then free the rest and exit",
    "churn8": "churn with 8 threads a round",
    "churn64": "churn with 64 threads a round (oversubscribed), fewer and smaller rounds",
    "churn_small": "churn with small blocks only (LARGE=0)",
    "churn_tasks": "one short thread per task, THREADS alive at most: each frees the blocks earlier threads left "
                   "in the shared slots and a hand-off slot, and leaves new ones there",
    "turns": "THREADS threads take turns (one runs at a time, as under a global lock): a turn builds WS blocks "
             "of 16 B..2 KiB, keeps a tenth in a shared cache (the oldest freed: remote frees), frees the rest; "
             "TURNS turns in all, whatever THREADS: peak RSS is the figure",
}
CHURN_DETAILS = ["cpu_s", "sys_s", "minflt", "nivcsw", "peak_live_bytes", "peak_overhead"]
DETAILS = {
    "vm": ["ns_per_op", "minflt_per_op", "sys_s", "rss_loop_end_kb"],
    "vm_cold": ["ns_per_op", "minflt_per_op", "sys_s", "rss_loop_end_kb"],
    "latency": ["malloc_p50_ns", "malloc_p99_ns", "malloc_p999_ns", "malloc_max_ns",
                "free_p50_ns", "free_p99_ns", "free_p999_ns", "free_max_ns", "p999_ns"],
    "fragment": ["rss_grow_kb", "rss_after_free_kb", "rss_final_kb", "rss_end_kb", "final_overhead",
                 "lazyfree_after_free_kb"],
    "larson": ["ns_per_op", "ops_per_cpu_sec", "nivcsw"],
    "xthread": ["ns_per_op", "ops_per_cpu_sec", "nivcsw"],
    "random_mixed": ["ns_per_op"],
    "churn": CHURN_DETAILS, "churn8": CHURN_DETAILS, "churn64": CHURN_DETAILS, "churn_small": CHURN_DETAILS,
    "churn_tasks": CHURN_DETAILS,
    "turns": ["elapsed_s", "cpu_s", "minflt"],
}


def ordered(names, order):
    return [x for x in order if x in names] + sorted(x for x in names if x not in order)


def load_raw(d):
    runs = []
    p = os.path.join(d, "raw.tsv")
    if not os.path.exists(p):
        return runs
    with open(p) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 6:
                continue
            bench, alloc, run, status, wall, params = parts[:6]
            res = parts[6] if len(parts) > 6 else ""
            kv = parse_result(res) if res.startswith("RESULT") else {}
            runs.append({"bench": bench, "alloc": alloc, "run": run, "status": status, "wall_s": wall,
                         "params": params, "kv": kv})
    return runs


def write_runs_csv(d, runs):
    first = ["bench", "alloc", "run", "status", "wall_s", "params", "primary", "better", "value"]
    keys = set()
    for r in runs:
        keys.update(r["kv"].keys())
    keys.discard("bench")
    rest = sorted(k for k in keys if k not in first)
    with open(os.path.join(d, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(first + rest)
        for r in runs:
            kv = r["kv"]
            prim = kv.get("primary", "")
            w.writerow([r["bench"], r["alloc"], r["run"], r["status"], r["wall_s"], r["params"], prim,
                        kv.get("better", ""), kv.get(prim, "")] + [kv.get(k, "") for k in rest])


def cmd_report(args):
    d = one_dir(args, "report")
    if d is None:
        return 2
    meta = read_meta(d)
    runs = load_raw(d)
    write_runs_csv(d, runs)

    benches = ordered({r["bench"] for r in runs}, BENCH_ORDER)
    allocs = ordered({r["alloc"] for r in runs}, ALLOC_ORDER)
    want_base = meta.get("baseline", "mimalloc")
    ok = [r for r in runs if r["status"] == "ok"]
    base = want_base if any(r["alloc"] == want_base for r in ok) else ("glibc" if any(
        r["alloc"] == "glibc" for r in ok) else (allocs[0] if allocs else want_base))
    base2 = meta.get("baseline2")
    if base2 == base or not any(r["alloc"] == base2 for r in ok):
        base2 = None
    bases = [base] + ([base2] if base2 else [])

    def values(bench, alloc, key):
        out = []
        for r in ok:
            if r["bench"] == bench and r["alloc"] == alloc:
                v = num(r["kv"].get(key))
                if v is not None:
                    out.append(v)
        return out

    info = {}  # bench -> (primary, better)
    for b in benches:
        prim, better = "ops_per_sec", "higher"
        for r in ok:
            if r["bench"] == b and "primary" in r["kv"]:
                prim, better = r["kv"]["primary"], r["kv"].get("better", "higher")
                break
        info[b] = (prim, better)

    med = {}  # (bench, alloc) -> median of primary
    for b in benches:
        for a in allocs:
            xs = values(b, a, info[b][0])
            if xs:
                med[(b, a)] = median(xs)

    level = num(meta.get("ci_level"))
    if level is None or not 0 < level < 100:
        level = 95.0
    lvl = "%g %%" % level

    def rounds(bench, alloc, key):
        """run -> value of key, of the successful runs with a positive value."""
        out = {}
        for r in ok:
            if r["bench"] == bench and r["alloc"] == alloc:
                v = num(r["kv"].get(key))
                if v is not None and v > 0:
                    out[r["run"]] = v
        return out

    def paired(bench, alloc, to, key):
        """ln(alloc / to) of each round both ran successfully, in round order."""
        xa, xb = rounds(bench, alloc, key), rounds(bench, to, key)
        ks = sorted((k for k in xa if k in xb), key=lambda k: (len(k), k))
        return [math.log(xa[k] / xb[k]) for k in ks]

    pint = {}  # (bench, alloc, to) -> (estimate, low, high, pairs) of ln ratio of the primary

    def interval(b, a, to):
        if (b, a, to) not in pint:
            ds = paired(b, a, to, info[b][0])
            pint[(b, a, to)] = log_interval([ds], level) + (len(ds),)
        return pint[(b, a, to)]

    def ratio_cell(b, a, to, digits=2):
        """The ratio with its interval; "≈" when the interval holds 1."""
        if a == to:
            return "1." + "0" * digits if (b, a) in med else "—"
        est, lo, hi, n = interval(b, a, to)
        if est is None:
            return "—"
        r = fmt_ratio(math.exp(est), digits)
        if lo is None:
            return "%s (1 round)" % r
        iv = "[%s, %s]" % (fmt_ratio(math.exp(lo), digits), fmt_ratio(math.exp(hi), digits))
        return "%s %s" % (r, iv) if significant(lo, hi) else "≈%s %s" % (r, iv)

    # The verdict: hakmem against each peer, the geometric mean over the
    # benchmarks of the paired ratios (time: of the time figures and of
    # 1/throughput; peak RSS: of every benchmark's peak_rss_kb).
    verdict = []  # (peer, [(what, estimate, low, high, (better word, worse word), counts text, most rounds)])
    has = {a for a in allocs if any(r["alloc"] == a for r in ok)}
    if "hakmem" in has:
        for peer in [a for a in allocs if a != "hakmem" and a in has]:
            parts = []
            for what, words in (("time", ("faster", "slower")), ("peak RSS", ("smaller", "larger"))):
                groups, names = [], []
                for b in benches:
                    prim, better = info[b]
                    if what == "time":
                        if is_memory(prim):
                            continue
                        ds = paired(b, "hakmem", peer, prim)
                        if better == "higher":
                            ds = [-x for x in ds]
                    else:
                        ds = paired(b, "hakmem", peer, "peak_rss_kb")
                    if ds:
                        groups.append(ds)
                        names.append(b)
                if not groups:
                    continue
                full = [x for x in groups if len(x) >= 2]
                est, lo, hi = log_interval(full or groups, level)
                used = full or groups
                ns = sorted({len(x) for x in used})
                counts = ("%d benchmark%s × %d round%s" % (len(used), "s" if len(used) > 1 else "", ns[0],
                                                           "s" if ns[0] > 1 else "") if len(ns) == 1 else
                          "%d benchmarks, %d paired rounds" % (len(used), sum(len(x) for x in used)))
                if full and len(full) < len(groups):
                    counts += "; left out, one paired round: %s" % ", ".join(
                        b for b, x in zip(names, groups) if len(x) < 2)
                parts.append((what, est, lo, hi, words, counts, ns[-1]))
            if parts:
                verdict.append((peer, parts))

    def verdict_text(peer, parts, md):
        """hakmem vs PEER: time R× [LOW, HIGH] — faster; peak RSS ... (counts)."""
        txt = []
        one = len({p[5] for p in parts}) == 1  # the same benchmarks and rounds: said once, at the end
        for what, est, lo, hi, words, counts, nmax in parts:
            r = "%s×" % fmt_ratio(math.exp(est), 2)
            if lo is None:
                w = "no interval from one round (RUNS=2 or more)"
            elif significant(lo, hi):
                w = words[0] if hi < 0 else words[1]
                w = "**%s**" % w if md else w
            else:
                w = "not distinguishable at %d rounds" % nmax
            if lo is not None:
                r += " [%s, %s]" % (fmt_ratio(math.exp(lo), 2), fmt_ratio(math.exp(hi), 2))
            txt.append("%s %s — %s%s" % (what, r, w, "" if one else " (%s)" % counts))
        head = "hakmem vs %s" % peer
        return ("**%s**" % head if md else head) + ": " + "; ".join(txt) + (" (%s)" % parts[0][5] if one else "")

    verdict_head = ("hakmem relative to each peer: the geometric mean over the benchmarks of the ratios of runs "
                    "paired by round, with its %s confidence interval (time: the time figures and 1/throughput, "
                    "below 1 is faster; peak RSS: below 1 is smaller)" % lvl)

    out = []
    title = "# hakmem benchmark report — %s, %s" % (meta.get("date", "?"), meta.get("host", "?"))
    out.append(title)
    out.append("")
    if verdict:
        out.append("**Verdict** — " + verdict_head + ":")
        out.append("")
        for peer, parts in verdict:
            out.append("- " + verdict_text(peer, parts, True))
        out.append("")
    with open(os.path.join(d, "verdict.txt"), "w") as f:
        if verdict:
            f.write("Verdict: %s:\n" % verdict_head)
            for peer, parts in verdict:
                f.write("  " + verdict_text(peer, parts, False) + "\n")
    for k, lab in (("machine", "machine"), ("kernel", "kernel"), ("thp", "transparent huge pages"),
                   ("load", "load average (1 min) before / after"),
                   ("runs", "runs per allocator"), ("preset", "parameters preset"), ("order", "order"),
                   ("hakmem_env", "HAKMEM_* environment"), ("user_env", "benchmark variables set by the user"),
                   ("command", "command")):
        if meta.get(k):
            out.append("- %s: %s" % (lab, meta[k]))
    alloc_lines = []
    for a in allocs:
        if meta.get("lib_" + a) is not None:
            alloc_lines.append("%s %s (%s)" % (a, meta.get("ver_" + a, "?"), meta.get("lib_" + a) or "no preload"))
    if alloc_lines:
        out.append("- allocators: " + "; ".join(alloc_lines))
    if meta.get("absent"):
        out.append("- absent (not measured): " + meta["absent"])
    out.append("- statistics: median, mean, sample stddev and CV = stddev/mean over the runs; ratio to **%s**%s%s = "
               "the geometric mean of the ratios of the runs paired by round (run k of the allocator against run k "
               "of the baseline)" % (base, "" if base == want_base else " (%s absent)" % want_base,
                                     " and to **%s**" % base2 if base2 else ""))
    out.append("- significance: a ratio's %s confidence interval is a Student t interval on the paired log ratios "
               "(the verdict's: over the benchmarks, Welch–Satterthwaite degrees of freedom); a ratio whose interval "
               "excludes 1 is shown plainly, one whose interval holds 1 as ≈ (not distinguishable at this many "
               "rounds), one from a single round with no interval" % lvl)
    out.append("")

    # Summary tables.
    for to in bases if benches and allocs else []:
        out.append("## Summary: ratio to %s (paired by round, %s CI)" % (to, lvl))
        out.append("")
        rows = []
        nsig = 0
        for b in benches:
            prim, better = info[b]
            cells = [ratio_cell(b, a, to) for a in allocs]
            nsig += sum(1 for c in cells if c.startswith("≈"))
            rows.append([b, label(prim, better)] + cells)
        out.append(md_table(["benchmark", "figure"] + allocs, rows, ["l", "l"] + ["r"] * len(allocs)))
        out.append("")
        out.append("Each cell: the ratio to %s [its %s confidence interval]%s." % (
            to, lvl, "; ≈: the interval holds 1, the two are not distinguishable at this many rounds" if nsig
            else ""))
        out.append("")
    if benches and allocs:
        out.append("## Summary: medians")
        out.append("")
        rows = []
        for b in benches:
            prim, better = info[b]
            rows.append([b, figure_name(prim)] + [fmt(prim, med.get((b, a))) for a in allocs])
        out.append(md_table(["benchmark", "figure"] + allocs, rows, ["l", "l"] + ["r"] * len(allocs)))
        out.append("")

    # Per benchmark.
    for b in benches:
        prim, better = info[b]
        u = unit_of(prim)
        out.append("## %s — %s" % (b, label(prim, better)))
        out.append("")
        if b in DESCRIPTION:
            out.append(DESCRIPTION[b] + ".")
        params = sorted({r["params"] for r in runs if r["bench"] == b and r["params"]})
        if params:
            out.append("Parameters: `%s`." % "`, `".join(params))
        out.append("")
        rows = []
        for a in allocs:
            xs = values(b, a, prim)
            nruns = len([r for r in runs if r["bench"] == b and r["alloc"] == a])
            if not xs:
                if nruns:
                    rows.append([a, "failed"] + ["—"] * 7)
                continue
            ds = describe(xs)
            pk = values(b, a, "peak_rss_kb")
            mf = values(b, a, "minflt")
            rows.append([a, fmt(prim, ds["median"]), fmt(prim, ds["mean"]), fmt(prim, ds["stddev"]),
                         "%.2f %%" % ds["cv_pct"]] + [ratio_cell(b, a, to, 3) for to in bases] +
                        [fmt("peak_rss_kb", median(pk)) if pk else "—",
                         "%d" % median(mf) if mf else "—", "%d/%d" % (len(xs), nruns)])
        hdr = ["allocator", "median", "mean", "stddev", "CV"] + ["ratio vs %s [%s CI]%s" % (
            to, lvl, " (lower is better)" if better == "lower" else "") for to in bases] + [
            "peak RSS [MB]", "minor faults", "runs ok"]
        # Fix up rows of failed allocators to the header width.
        rows = [r + ["—"] * (len(hdr) - len(r)) if len(r) < len(hdr) else r[:len(hdr)] for r in rows]
        if u:
            hdr[1] = "median [%s]" % u
        out.append(md_table(hdr, rows))
        out.append("")
        det = [k for k in DETAILS.get(b, []) if k != prim]
        if det:
            rows = []
            for a in allocs:
                cells = []
                for k in det:
                    xs = values(b, a, k)
                    cells.append(fmt(k, median(xs)) if xs else "—")
                if any(c != "—" for c in cells):
                    rows.append([a] + cells)
            if rows:
                out.append("Details (medians; `_kb` and `_bytes` columns in MB, `_s` in s, `_ns` in ns, "
                           "`ops_per_*` in M ops/s):")
                out.append("")
                out.append(md_table(["allocator"] + det, rows))
                out.append("")

    # Charts.
    charts = []
    if benches and allocs:
        # ratio.dat: per allocator the ratio to the baseline and its interval
        # (up is better: baseline/X for lower-is-better figures); a ratio from
        # one round has its value as both ends.
        with open(os.path.join(d, "ratio.dat"), "w") as f:
            f.write("bench " + " ".join("%s %s_low %s_high" % (a, a, a) for a in allocs) + "\n")
            for b in benches:
                cells = []
                for a in allocs:
                    est, lo, hi, _ = interval(b, a, base) if a != base else (
                        (0.0, 0.0, 0.0, 0) if (b, a) in med else (None, None, None, 0))
                    if est is None:
                        cells.append("? ? ?")
                        continue
                    if lo is None:
                        lo = hi = est
                    if info[b][1] != "higher":
                        est, lo, hi = -est, -hi, -lo
                    cells.append("%.4f %.4f %.4f" % (math.exp(est), math.exp(lo), math.exp(hi)))
                f.write(b + " " + " ".join(cells) + "\n")
        with open(os.path.join(d, "peak_rss.dat"), "w") as f:
            f.write("bench " + " ".join(allocs) + "\n")
            for b in benches:
                cells = []
                for a in allocs:
                    pk = values(b, a, "peak_rss_kb")
                    cells.append("%.2f" % (median(pk) / 1024.0) if pk else "?")
                f.write(b + " " + " ".join(cells) + "\n")
        n = len(allocs) + 1
        errs = []
        top, cut = chart_top(os.path.join(d, "ratio.dat"))
        err = histogram_chart(d, "ratio.png", "ratio.dat", n,
                              "Performance relative to %s, %s CI (higher is better; time, latency and RSS figures "
                              "inverted: %s/X)%s" % (base, lvl, base, cut), "relative to %s" % base, refline=1.0,
                              errorbars=True, ymax=top)
        if err is None:
            charts.append(("ratio.png", "performance relative to %s" % base))
        errs.append(err)
        if verdict:
            # verdict.dat: hakmem / peer, time and peak RSS, as in the verdict lines.
            with open(os.path.join(d, "verdict.dat"), "w") as f:
                f.write('peer time time_low time_high "peak RSS" rss_low rss_high\n')
                for peer, parts in verdict:
                    cells = {}
                    for what, est, lo, hi, _, _, _ in parts:
                        lo, hi = (est, est) if lo is None else (lo, hi)
                        cells[what] = "%.4f %.4f %.4f" % (math.exp(est), math.exp(lo), math.exp(hi))
                    f.write("%s %s %s\n" % (peer, cells.get("time", "? ? ?"), cells.get("peak RSS", "? ? ?")))
            top, cut = chart_top(os.path.join(d, "verdict.dat"))
            err3 = histogram_chart(d, "verdict.png", "verdict.dat", 3,
                                   "hakmem / peer: geometric mean over the benchmarks, %s CI "
                                   "(below 1: hakmem faster, smaller)%s" % (lvl, cut), "hakmem / peer", refline=1.0,
                                   errorbars=True, ymax=top)
            if err3 is None:
                charts.insert(0, ("verdict.png", "hakmem relative to each peer"))
            errs.append(err3)
        err2 = histogram_chart(d, "peak_rss.png", "peak_rss.dat", n, "Peak RSS per benchmark (median, MB, log scale)",
                               "peak RSS [MB]", logscale=True)
        if err2 is None:
            charts.append(("peak_rss.png", "peak RSS per benchmark"))
        errs.append(err2)
        errs = [e for e in errs if e]
        if errs:
            out.append("Charts not drawn: %s" % errs[0])
            out.append("")
    if charts:
        out.append("## Charts")
        out.append("")
        for png, alt in charts:
            out.append("![%s](%s)" % (alt, png))
        out.append("")

    fails = [r for r in runs if r["status"] != "ok"]
    if fails:
        out.append("## Failed runs")
        out.append("")
        out.append(md_table(["benchmark", "allocator", "run", "status"],
                            [[r["bench"], r["alloc"], r["run"], r["status"]] for r in fails]))
        out.append("")
    out.append("Files: `runs.csv` (every run, every key), `logs/` (stdout/stderr of each run)%s%s." %
               (", `verdict.txt` (the verdict lines)" if verdict else "", "".join(", `%s`" % c[0] for c in charts)))
    write_report(d, "report.md", out)
    return 0


# ----------------------------------------------------------------- syscalls

SYSCALLS = ["mmap", "munmap", "madvise", "mprotect", "mremap", "brk"]


def cmd_syscalls(args):
    d = one_dir(args, "syscalls")
    if d is None:
        return 2
    meta = read_meta(d)
    # rows: alloc, source, phase(short|long), iters, status, counts...
    data = {}
    order = []
    with open(os.path.join(d, "syscalls.tsv")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 5 + len(SYSCALLS):
                continue
            alloc, source, phase, iters, status = p[:5]
            counts = [num(x) for x in p[5:5 + len(SYSCALLS)]]
            key = (alloc, source)
            if key not in data:
                data[key] = {}
                order.append(key)
            data[key][phase] = (num(iters), status, counts)
    target = num(meta.get("target")) or 1e-8
    rows = []
    csv_rows = []
    for key in order:
        alloc, source = key
        ph = data[key]
        s, lg = ph.get("short"), ph.get("long")
        if not s or not lg or s[1] != "ok" or lg[1] != "ok":
            st = (s[1] if s else "missing") + "/" + (lg[1] if lg else "missing")
            rows.append([alloc, source, "—", "—", "—", "—", "—", "failed (%s)" % st])
            csv_rows.append([alloc, source, "", "", "", "", "", st] + [""] * len(SYSCALLS))
            continue
        dn = lg[0] - s[0]
        per = []
        tot_s = sum(c or 0 for c in s[2])
        tot_l = sum(c or 0 for c in lg[2])
        delta = tot_l - tot_s
        for cs, cl in zip(s[2], lg[2]):
            per.append((cl or 0) - (cs or 0))
        perop = delta / dn if dn > 0 else float("nan")
        breakdown = " ".join("%s=%+d" % (n, v) for n, v in zip(SYSCALLS, per) if v)
        if delta <= 0:
            perop_txt = "0 (< %.1e)" % (1.0 / dn) if dn > 0 else "—"
        else:
            perop_txt = "%.2e" % perop
        verdict = "yes" if perop <= target else "no"
        rows.append([alloc, source, "%d" % tot_s, "%d" % tot_l, "%+d" % delta, perop_txt, breakdown or "—", verdict])
        csv_rows.append([alloc, source, int(s[0]), int(lg[0]), int(tot_s), int(tot_l), g(perop), "ok"] + per)
    with open(os.path.join(d, "syscalls.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["alloc", "source", "iters_short", "iters_long", "calls_short", "calls_long", "calls_per_op",
                    "status"] + ["delta_" + n for n in SYSCALLS])
        w.writerows(csv_rows)
    out = ["# hakmem syscall budget — %s, %s" % (meta.get("date", "?"), meta.get("host", "?")), ""]
    out.append("random_mixed (`%s`), OS memory calls (mmap + munmap + madvise + mprotect + mremap + brk) per "
               "operation in steady state." % meta.get("params", "?"))
    out.append("")
    out.append("Warm-up cancels out: each allocator runs the same seeded workload twice, short (%s ops) and long "
               "(%s ops); the long run repeats the short one's operations exactly and then goes on, so start-up, "
               "warm-up and exit calls appear in both and the difference is what %s steady-state operations cost."
               % (meta.get("short", "?"), meta.get("long", "?"), meta.get("diff", "?")))
    out.append("Source `counters`: hakmem's own OS counters (HAKMEM_STATS=1, the `os:` line; hakmem makes no brk "
               "calls); `strace`: `strace -f -c -e trace=memory` over the whole process (loader and libc included).")
    out.append("")
    out.append(md_table(["allocator", "source", "calls (short)", "calls (long)", "difference", "per op",
                         "difference by call", "≤ %.0e" % target], rows, ["l", "l", "r", "r", "r", "r", "l", "l"]))
    out.append("")
    if meta.get("notes"):
        out.append(meta["notes"])
        out.append("")
    write_report(d, "report.md", out)
    return 0


# ----------------------------------------------------------------- soak


def cmd_soak(args):
    d = one_dir(args, "soak")
    if d is None:
        return 2
    meta = read_meta(d)
    t, ops, rss, cpu_ops = [], [], [], []
    with open(os.path.join(d, "soak.csv")) as f:
        for row in csv.DictReader(f):
            t.append(float(row["t_s"]))
            ops.append(float(row["ops_per_sec"]))
            rss.append(float(row["rss_kb"]))
            c = num(row.get("cpu_ops_per_sec"))   # absent in older soaks
            if c:
                cpu_ops.append(c)
    if not t:
        sys.stderr.write("stats.py soak: no samples in soak.csv\n")
        return 1
    dur = t[-1]
    # Warm-up: the first 10 % of the run, at most 60 s, at least one sample.
    warm = min(60.0, 0.10 * dur)
    steady = [i for i in range(len(t)) if t[i] > warm]
    if len(steady) < 2:
        steady = list(range(1, len(t))) if len(t) > 1 else [0]
    # Comparison window: 5 minutes, scaled down to 1/12 of the run for short runs.
    win = min(300.0, dur / 12.0)
    t0 = t[steady[0]]
    first = [ops[i] for i in steady if t[i] <= t0 + win] or [ops[steady[0]]]
    last = [ops[i] for i in steady if t[i] >= dur - win] or [ops[steady[-1]]]
    s_rss = [rss[i] for i in steady]
    s_ops = [ops[i] for i in steady]
    peak = max(rss)
    pk_res = num(meta.get("peak_rss_kb"))
    if pk_res:
        peak = max(peak, pk_res)
    drift = (s_rss[-1] - s_rss[0]) / s_rss[0] * 100.0 if s_rss[0] else 0.0
    fm, lm = mean(first), mean(last)
    tdelta = (lm - fm) / fm * 100.0 if fm else 0.0
    rows = [
        ["duration", "%.1f s (%d samples, %s ops per step)" % (dur, len(t), meta.get("step_iters", "?"))],
        ["warm-up excluded", "first %.1f s (10 %% of the run, at most 60 s)" % warm],
        ["throughput median", "%.2f M ops/s" % (median(s_ops) / 1e6)],
        ["throughput CV", "%.2f %%" % cv_pct(s_ops)],
    ]
    s_cpu = [cpu_ops[i] for i in steady] if len(cpu_ops) == len(t) else []
    if s_cpu:
        rows.append(["throughput per CPU second: median, CV", "%.2f M ops/s, %.2f %% (leaves out time spent "
                     "waiting for a core)" % (median(s_cpu) / 1e6, cv_pct(s_cpu))])
    rows += [
        ["first window vs last window", "%.2f vs %.2f M ops/s (%+.2f %%), window %.1f s" % (fm / 1e6, lm / 1e6,
                                                                                            tdelta, win)],
        ["peak RSS", "%.1f MB" % (peak / 1024.0)],
        ["steady RSS (median after warm-up)", "%.1f MB" % (median(s_rss) / 1024.0)],
        ["RSS drift", "%+.2f %% (last sample %.1f MB vs first after warm-up %.1f MB)" % (
            drift, s_rss[-1] / 1024.0, s_rss[0] / 1024.0)],
    ]
    out = ["# hakmem soak — %s, %s, %s" % (meta.get("alloc", "?"), meta.get("date", "?"), meta.get("host", "?")), ""]
    out.append("random_mixed in one process, one sample per step: `%s`." % meta.get("params", "?"))
    out.append("")
    out.append(md_table(["figure", "value"], rows, ["l", "l"]))
    out.append("")
    out.append("SOAK alloc=%s duration_s=%.1f samples=%d ops_median=%.0f ops_cv_pct=%.3f first_ops=%.0f "
               "last_ops=%.0f ops_delta_pct=%.3f peak_rss_kb=%.0f steady_rss_kb=%.0f rss_drift_pct=%.3f%s" % (
                   meta.get("alloc", "?"), dur, len(t), median(s_ops), cv_pct(s_ops), fm, lm, tdelta, peak,
                   median(s_rss), drift, " cpu_ops_cv_pct=%.3f" % cv_pct(s_cpu) if s_cpu else ""))
    out.append("")
    script = "\n".join([
        "set terminal @TERM@ size 1100,520",
        "set output 'soak.png'",
        "set title %s" % gp_quote("soak: %s, random_mixed" % meta.get("alloc", "?")),
        "set datafile separator ','",
        "set key outside right top",
        "set xlabel 'time [s]'",
        "set ylabel 'throughput [M ops/s]'",
        "set y2label 'RSS [MB]'",
        "set ytics nomirror",
        "set y2tics",
        "set yrange [0:*]",
        "set y2range [0:*]",
        "set grid",
        "plot 'soak.csv' using 2:($4/1e6) skip 1 with lines lw 1.5 title 'ops/s' axes x1y1, "
        "'soak.csv' using 2:($5/1024) skip 1 with lines lw 1.5 title 'RSS' axes x1y2",
    ]) + "\n"
    err = gnuplot(script, d)
    if err is None:
        out.append("![soak](soak.png)")
    else:
        out.append("Chart not drawn: %s" % err)
    out.append("")
    write_report(d, "summary.md", out)
    return 0


# ----------------------------------------------------------------- A/B


def cmd_ab(args):
    d = one_dir(args, "ab")
    if d is None:
        return 2
    meta = read_meta(d)
    better = meta.get("better", "higher")
    thr = num(meta.get("threshold")) or 0.5
    spread_kind = meta.get("spread", "mad")
    runs = {"A": {}, "B": {}}
    with open(os.path.join(d, "ab.tsv")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) >= 3 and p[0] in runs and num(p[2]) is not None:
                runs[p[0]][int(p[1])] = num(p[2])
    a = [runs["A"][k] for k in sorted(runs["A"])]
    b = [runs["B"][k] for k in sorted(runs["B"])]
    if len(a) < 2 or len(b) < 2:
        sys.stderr.write("stats.py ab: too few successful runs (A %d, B %d)\n" % (len(a), len(b)))
        return 2
    ma, mb = median(a), median(b)
    delta = (mb / ma - 1.0) * 100.0  # change of the figure
    gain = delta if better == "higher" else -delta  # > 0: B is better
    # Paired per-run ratios (run k of B against run k of A, adjacent in time).
    pairs = [runs["B"][k] / runs["A"][k] for k in sorted(runs["A"]) if k in runs["B"] and runs["A"][k]]
    rpct = [(r - 1.0) * 100.0 for r in pairs]
    sd = stddev(rpct)
    ci = 2.0 * sd / math.sqrt(len(rpct)) if rpct else float("inf")  # ~95 % for the mean ratio
    mr = median(rpct)
    mad = 1.4826 * median([abs(x - mr) for x in rpct])  # robust stddev: one outlier run does not dominate
    spread = {"ci95": ci, "stddev": sd}.get(spread_kind, mad)
    if spread > abs(delta):
        verdict = "WITHIN NOISE"
        why = "spread %.2f %% > |delta| %.2f %%: rerun with more RUNS or on a quieter machine" % (spread, abs(delta))
    elif gain >= thr:
        verdict = "GO"
        why = "B is better by %.2f %% (threshold %.2f %%)" % (gain, thr)
    elif gain <= -thr:
        verdict = "NO-GO"
        why = "B is worse by %.2f %% (threshold %.2f %%)" % (-gain, thr)
    else:
        verdict = "NEUTRAL"
        why = "|delta| %.2f %% is below the threshold %.2f %%: no change" % (abs(delta), thr)
    fig = meta.get("figure", "ops_per_sec")
    da, db = describe(a), describe(b)
    out = ["# hakmem A/B — %s, %s" % (meta.get("date", "?"), meta.get("host", "?")), ""]
    out.append("- A: %s" % meta.get("a", "?"))
    out.append("- B: %s" % meta.get("b", "?"))
    out.append("- benchmark: %s `%s`, %d runs each, interleaved A B A B" % (meta.get("bench", "?"),
                                                                          meta.get("params", ""), len(a)))
    out.append("- figure: %s (%s is better)" % (fig, better))
    out.append("")
    out.append(md_table(["", "median", "mean", "stddev", "CV", "min", "max"], [
        ["A", fmt(fig, da["median"]), fmt(fig, da["mean"]), fmt(fig, da["stddev"]), "%.2f %%" % da["cv_pct"],
         fmt(fig, da["min"]), fmt(fig, da["max"])],
        ["B", fmt(fig, db["median"]), fmt(fig, db["mean"]), fmt(fig, db["stddev"]), "%.2f %%" % db["cv_pct"],
         fmt(fig, db["min"]), fmt(fig, db["max"])]]))
    out.append("")
    out.append("delta (B/A - 1, medians): **%+.2f %%**; per-run ratios B/A - 1: median %+.2f %%, MAD-based "
               "spread %.2f %%, stddev %.2f %%, min %+.2f %%, max %+.2f %%, 95 %% CI of the mean ±%.2f %%; "
               "verdict spread: %s" % (delta, mr, mad, sd, min(rpct), max(rpct), ci, spread_kind))
    out.append("")
    out.append("**%s** — %s" % (verdict, why))
    out.append("")
    out.append("AB verdict=%s delta_pct=%.3f spread_pct=%.3f spread=%s threshold_pct=%.3f median_a=%s median_b=%s "
               "runs=%d" % (verdict.replace(" ", "_"), delta, spread, spread_kind, thr, g(ma), g(mb), len(a)))
    write_report(d, "report.md", out)
    return 1 if verdict == "NO-GO" else 0


def main(argv):
    cmds = {"summary": cmd_summary, "report": cmd_report, "syscalls": cmd_syscalls, "soak": cmd_soak, "ab": cmd_ab}
    if len(argv) < 2 or argv[1] not in cmds:
        sys.stderr.write(__doc__)
        return 2
    return cmds[argv[1]](argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
