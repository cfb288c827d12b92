#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn revoke_bench's raw samples into ratios, a table, a CSV and a plot.

usage: bench-report.py --raw RAW_CSV [--insns INSNS_LOG]
                       [--smp-raw RAW_CSV] --out OUT_DIR

RAW_CSV is revoke_bench's output, INSNS_LOG the markcount plugin's log of
the same run (optional: "-" or a missing file means wall time only). The
k-th begin/end marker pair of the log belongs to the sample with seq k.
--smp-raw is a second run of section b with --pin 1 on 2 CPUs: its
revoke-under-traffic figures are reported beside the main run's.
--ftrace is a function_graph trace of rxe_dmabuf_mr_revoke over section b
(bench-ftrace.py): the time its down_write() takes under traffic beyond
idle is the wait for the copy in flight.
Section b's samples are divided by their ops (REVOKE calls, or buffers
deregistered) first.

Every comparison is a set of pairs (A and B measured back to back); the
ratio is computed per pair, then summarised by its median and interquartile
range. A goal counts as met only if the whole interquartile range of every
metric meets it; missed if the whole range of some metric misses it;
otherwise the spread does not decide ("unclear").

Writes OUT_DIR/table.txt (perftest-style), OUT_DIR/summary.csv,
OUT_DIR/bench.svg and bench.png (gnuplot) and the plot's data files. Exits 1 if the raw
samples are inconsistent (a pair missing its partner, markers that do not
match the samples).
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
from collections import defaultdict


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]


def load(raw_path, insn_path):
    with open(raw_path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("seq", "param", "pair", "wall_ns", "thread_ns", "busy_ns",
                  "bytes", "ops"):
            r[k] = int(r[k])
    insns = None
    if insn_path and insn_path != "-" and os.path.exists(insn_path):
        marks = []
        with open(insn_path) as f:
            for line in f:
                mid, count = line.split()
                marks.append((int(mid), int(count)))
        spans = []
        begin = None
        for mid, count in marks:
            if mid == 1:
                begin = count
            elif mid == 2 and begin is not None:
                spans.append(count - begin)
                begin = None
        if len(spans) != len(rows):
            sys.exit(f"bench-report: {len(spans)} marker pairs in {insn_path} "
                     f"but {len(rows)} samples in {raw_path}")
        insns = spans
    for r in rows:
        r["insns"] = insns[r["seq"]] if insns else None
        if r["section"] == "b":
            # Per REVOKE call (or per buffer's MRs deregistered).
            for k in ("wall_ns", "thread_ns", "busy_ns", "insns"):
                if r[k] is not None:
                    r[k] /= r["ops"]
    return rows, insns is not None


class Results:
    def __init__(self, rows):
        # (section, case, param, variant) -> {pair: row}
        self.by = defaultdict(dict)
        for r in rows:
            self.by[(r["section"], r["case"], r["param"], r["variant"])][r["pair"]] = r

    def params(self, section, case):
        return sorted({k[2] for k in self.by if k[0] == section and k[1] == case})

    def pairs(self, section, case, param, va, vb):
        a = self.by.get((section, case, param, va), {})
        b = self.by.get((section, case, param, vb), {})
        if not a or not b:
            return []
        if set(a) != set(b):
            sys.exit(f"bench-report: {section}/{case}/{param}: pairs of {va} "
                     f"and {vb} differ")
        return [(a[p], b[p]) for p in sorted(a)]

    def values(self, section, case, param, variant, metric):
        return [r[metric] for r in self.by.get((section, case, param, variant), {}).values()]


def ftrace_rows(path, pkt, lines, table):
    """The revoke callback's lock wait and a control, traffic vs idle."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "bench_ftrace", os.path.join(os.path.dirname(__file__), "bench-ftrace.py"))
    bf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bf)
    calls = bf.parse("rxe_dmabuf_mr_revoke", path)
    for n in sorted({k[1] for k in calls}):
        idle = calls.get(("revoke", n, "idle"), [])
        for tv, msg in (("traffic", "64 KiB"), ("traffic_1m", "1 MiB")):
            tr = calls.get(("revoke", n, tv), [])
            if not idle or not tr:
                continue
            for fn, goal in (("down_write", ("<=", pkt / 1e3) if pkt else None),
                             ("up_write", None), ("total", None)):
                a = [c.get(fn, 0) for c in tr]
                b = [c.get(fn, 0) for c in idle]
                a1, am, a3 = quartiles(a)
                b1, bm, b3 = quartiles(b)
                lo, med, hi = a1 - b3, am - bm, a3 - b1
                st = judge(lo, hi, goal) if goal else "-"
                what = {"down_write": "wait for the copy in flight (down_write)",
                        "up_write": "control: up_write, which cannot wait",
                        "total": "the whole callback"}[fn]
                name = f"b ftrace, {msg} traffic-idle: {what}"
                gs = f"<= {goal[1]:.1f} us" if goal else "-"
                lines.append({"comparison": name, "param": n, "a": tv,
                              "b": "idle", "pairs": f"{len(a)}/{len(b)} calls",
                              "a_median": am, "b_median": bm, "unit": "us",
                              "wall_ratio": med, "wall_q1": lo, "wall_q3": hi,
                              "insn_ratio": "", "insn_q1": "", "insn_q3": "",
                              "goal": gs, "verdict": st})
                table.append((name, str(n), f"{am:.1f} us", f"{bm:.1f} us", "-",
                              f"{med:.1f} us [{lo:.1f},{hi:.1f}]", "-",
                              f"{len(a)}/{len(b)}", gs, st))


def verdict(states):
    if not states:
        return "no data"
    if all(s == "met" for s in states):
        return "met"
    if any(s == "missed" for s in states):
        return "missed"
    return "unclear"


def judge(q1, q3, goal):
    op, g = goal
    ok = (lambda x: x >= g) if op == ">=" else (lambda x: x <= g)
    if ok(q1) and ok(q3):
        return "met"
    if not ok(q1) and not ok(q3):
        return "missed"
    return "unclear"


def fmt_ns(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e3:.0f} us"


def size_str(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--raw", required=True)
    ap.add_argument("--insns", default="-")
    ap.add_argument("--smp-raw", default="-")
    ap.add_argument("--ftrace", default="-")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = args.out
    rows, have_insns = load(args.raw, args.insns)
    res = Results(rows)
    smp = None
    if args.smp_raw != "-":
        smp = Results(load(args.smp_raw, None)[0])
    os.makedirs(out, exist_ok=True)
    metrics = ["wall_ns"] + (["insns"] if have_insns else [])
    lines = []      # summary.csv rows
    table = []      # text table rows
    plots = defaultdict(list)

    def compare(label, section, case, param, va, vb, ratio, goal, unit,
                metrics_used=None, absval=None, plot=None):
        """ratio(a_value, b_value) -> float, per pair, per metric."""
        prs = res.pairs(section, case, param, va, vb)
        if not prs:
            return None
        states, cells = [], {}
        for m in metrics_used or metrics:
            rs = [ratio(a[m], b[m]) for a, b in prs]
            q1, med, q3 = quartiles(rs)
            cells[m] = (med, q1, q3)
            if goal:
                states.append(judge(q1, q3, goal))
        v = verdict(states) if goal else "-"
        ma = statistics.median(absval(a) for a, _ in prs) if absval else None
        mb = statistics.median(absval(b) for _, b in prs) if absval else None
        goal_s = f"{goal[0]} {goal[1]:g}" if goal else "-"
        lines.append({
            "comparison": label, "param": param, "a": va, "b": vb,
            "pairs": len(prs), "a_median": ma, "b_median": mb, "unit": unit,
            "wall_ratio": cells["wall_ns"][0], "wall_q1": cells["wall_ns"][1],
            "wall_q3": cells["wall_ns"][2],
            "insn_ratio": cells["insns"][0] if "insns" in cells else "",
            "insn_q1": cells["insns"][1] if "insns" in cells else "",
            "insn_q3": cells["insns"][2] if "insns" in cells else "",
            "goal": goal_s, "verdict": v})

        def cell(m):
            if m not in cells:
                return "-"
            med, q1, q3 = cells[m]
            return f"{med:.3f} [{q1:.3f},{q3:.3f}]"
        table.append((label, size_str(param) if section in "acde" else str(param),
                      f"{ma:.4g}" if ma is not None else "-",
                      f"{mb:.4g}" if mb is not None else "-", unit,
                      cell("wall_ns"), cell("insns"), str(len(prs)), goal_s, v))
        if plot:
            plots[plot].append((param, cells, f"{label.split(' ', 1)[1]} {size_str(param)}"))
        return cells

    inv = lambda a, b: b / a        # B time / A time: A's speed relative to B
    fwd = lambda a, b: a / b        # A time / B time

    # (a) dma-buf vs plain: speed ratio = t_plain / t_dmabuf.
    for case, what in (("write_bw", "a WRITE bw dmabuf/plain"),
                       ("read_bw", "a READ bw dmabuf/plain"),
                       ("write_lat", "a WRITE lat plain/dmabuf"),
                       ("read_lat", "a READ lat plain/dmabuf")):
        for size in res.params("a", case):
            bw = case.endswith("bw")
            if bw:
                absval = lambda r: r["bytes"] / r["wall_ns"] * 1e3   # MB/s
                unit = "MB/s"
            else:
                absval = lambda r: r["wall_ns"] / r["ops"] / 1e3     # us
                unit = "us"
            compare(what, "a", case, size, "dmabuf", "plain", inv,
                    (">=", 0.98) if size >= 64 << 10 else None, unit,
                    absval=absval, plot="a_" + case)

    # (b) revoke: idle vs dereg, scaling, traffic vs idle.
    ms = lambda r: r["wall_ns"] / 1e6
    for n in res.params("b", "revoke"):
        compare("b revoke/dereg (idle)", "b", "revoke", n, "idle", "dereg",
                fwd, ("<=", 1.0), "ms", absval=ms, plot="b_ratio")
    ns = res.params("b", "revoke")
    if 100 in ns and 1000 in ns:
        for m in metrics:
            t100 = res.values("b", "revoke", 100, "idle", m)
            t1000 = res.values("b", "revoke", 1000, "idle", m)
            a1, am, a3 = quartiles(t1000)
            b1, bm, b3 = quartiles(t100)
            # The range: the extreme combinations of the two IQRs.
            lo, med, hi = a1 / b3, am / bm, a3 / b1
            st = judge(lo, hi, ("<=", 11))
            lines.append({"comparison": "b revoke t(1000)/t(100) idle",
                          "param": m, "a": "1000", "b": "100",
                          "pairs": min(len(t100), len(t1000)),
                          "a_median": am, "b_median": bm, "unit": m,
                          "wall_ratio": med, "wall_q1": lo, "wall_q3": hi,
                          "insn_ratio": "", "insn_q1": "", "insn_q3": "",
                          "goal": "<= 11", "verdict": st})
            table.append((f"b revoke t(1000)/t(100) [{m}]", "1000/100",
                          f"{am:.4g}", f"{bm:.4g}", m.replace("wall_ns", "ns"),
                          f"{med:.2f} [{lo:.2f},{hi:.2f}]" if m == "wall_ns" else "-",
                          f"{med:.2f} [{lo:.2f},{hi:.2f}]" if m == "insns" else "-",
                          str(min(len(t100), len(t1000))), "<= 11", st))
    # Under traffic: the extra time over idle, against one packet's copy
    # (the longest a revoke can wait for the accessor): the per-packet time
    # of a 64 KiB WRITE into the dma-buf MR (1 KiB MTU), from section a.
    pkt = None
    lat64k = res.values("a", "write_lat", 64 << 10, "dmabuf", "wall_ns")
    ops64k = res.values("a", "write_lat", 64 << 10, "dmabuf", "ops")
    if lat64k:
        pkt = statistics.median(t / o for t, o in zip(lat64k, ops64k)) / 64
    runs = [("1 vCPU", res)] + ([("2 vCPUs pinned", smp)] if smp else [])
    for run, rr in runs:
     for n in rr.params("b", "revoke"):
      for tv, msg in (("traffic", "64 KiB"), ("traffic_1m", "1 MiB")):
        prs = rr.pairs("b", "revoke", n, tv, "idle")
        if not prs:
            continue
        for m, label in (("wall_ns", "wall"), ("thread_ns", "revoker CPU")):
            d = [a[m] - b[m] for a, b in prs]
            q1, med, q3 = quartiles(d)
            goal = ("<=", pkt) if pkt else None
            st = judge(q1, q3, goal) if goal else "no data"
            name = f"b {run}: {msg} traffic-idle ({label})"
            lines.append({"comparison": name,
                          "param": n, "a": tv, "b": "idle",
                          "pairs": len(prs), "a_median": statistics.median(a[m] for a, _ in prs),
                          "b_median": statistics.median(b[m] for _, b in prs),
                          "unit": "ns", "wall_ratio": med, "wall_q1": q1,
                          "wall_q3": q3, "insn_ratio": "", "insn_q1": "",
                          "insn_q3": "", "goal": f"<= {pkt:.0f} ns" if pkt else "-",
                          "verdict": st})
            table.append((name, str(n),
                          fmt_ns(statistics.median(a[m] for a, _ in prs)),
                          fmt_ns(statistics.median(b[m] for _, b in prs)), "-",
                          f"{fmt_ns(med)} [{fmt_ns(q1)},{fmt_ns(q3)}]", "-",
                          str(len(prs)), f"<= {fmt_ns(pkt)}" if pkt else "-", st))
    if args.ftrace != "-":
        ftrace_rows(args.ftrace, pkt, lines, table)
    pr = smp or res
    if smp:
        plots["b_smp"] = []
    for n in pr.params("b", "revoke"):
        for v in ("idle", "traffic", "traffic_1m", "dereg"):
            vals = pr.values("b", "revoke", n, v, "wall_ns")
            if vals:
                q1, med, q3 = quartiles(vals)
                plots["b_abs_" + v].append((n, {"wall_ns": (med / 1e6, q1 / 1e6, q3 / 1e6)}, v))

    # (c) registration: t_dmabuf / t_plain; and with an exporter that
    # keeps its kernel mapping (no vmap at registration).
    for size in res.params("c", "reg"):
        compare("c reg dmabuf/plain", "c", "reg", size, "dmabuf", "plain",
                fwd, ("<=", 1.0) if size == 1 << 30 else None, "ms",
                absval=ms, plot="c")
    for size in res.params("c", "reg"):
        compare("c reg dmabuf(kept vmap)/plain", "c", "reg", size,
                "dmabuf_kmapped", "plain_2", fwd,
                ("<=", 1.0) if size == 1 << 30 else None, "ms",
                absval=ms, plot="c_kmapped")

    # (d) ODP: t_odp / t_dmabuf.
    for case, goal in (("first_pass", (">=", 2.0)), ("steady", (">=", 0.98))):
        for size in res.params("d", case):
            compare(f"d {case} odp/dmabuf", "d", case, size, "dmabuf", "odp",
                    inv, goal, "ms", absval=ms, plot="de")
            compare(f"d {case} odp(4 KiB pages)/dmabuf", "d", case, size,
                    "dmabuf_2", "odp_4k", inv, goal, "ms", absval=ms,
                    plot="de")

    # (e) bounce: t_bounce / t_direct.
    for size in res.params("e", "land"):
        compare("e bounce/direct", "e", "land", size, "direct", "bounce",
                inv, (">=", 1.5), "ms",
                absval=ms, plot="de")

    # Outputs.
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(lines[0].keys()))
        w.writeheader()
        w.writerows(lines)
    hdr = ("comparison", "size/n", "A", "B", "unit", "wall ratio [IQR]",
           "insn ratio [IQR]", "pairs", "goal", "verdict")
    widths = [max(len(str(r[i])) for r in table + [hdr]) for i in range(len(hdr))]
    with open(os.path.join(out, "table.txt"), "w") as f:
        fmtrow = lambda r: "  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)).rstrip()
        f.write(fmtrow(hdr) + "\n")
        f.write("  ".join("-" * w for w in widths) + "\n")
        prev = None
        for r in table:
            if prev and prev[0][0] != r[0][0]:
                f.write("\n")
            f.write(fmtrow(r) + "\n")
            prev = r
    plot(out, plots, have_insns)
    with open(os.path.join(out, "table.txt")) as f:
        sys.stdout.write(f.read())


SIZE_TICS = ("set xtics ('64 B' 64, '1 KiB' 1024, '4 KiB' 4096, '16 KiB' 16384, "
             "'256 KiB' 262144, '4 MiB' 4194304, '64 MiB' 67108864, "
             "'1 GiB' 1073741824)")
# Goals of the (d) and (e) points, by the first word of their label.
DE_GOALS = {"first_pass": 2.0, "steady": 0.98, "bounce/direct": 1.5}


def plot(out, plots, have_insns):
    def dat(name, rows, metric="wall_ns"):
        path = os.path.join(out, f"plot-{name}-{metric}.dat")
        with open(path, "w") as f:
            for param, cells, _ in rows:
                if metric in cells:
                    med, q1, q3 = cells[metric]
                    f.write(f"{param} {med} {q1} {q3}\n")
        return path

    def series(name, title, metric, pt):
        if name not in plots:
            return None
        return (f"'{dat(name, plots[name], metric)}' using 1:2:3:4 with "
                f"yerrorlines pt {pt} title '{title}'")

    m2 = ["wall_ns"] + (["insns"] if have_insns else [])
    gp = ["set termoption noenhanced", "set multiplot layout 2,2 title 'revoke_bench on rxe (median, IQR error bars)'",
          "set termoption noenhanced",
          "set logscale x 2", "set grid", "set key bottom right",
          SIZE_TICS]
    # (a)
    s = []
    for case, t in (("write_bw", "WRITE bw"), ("read_bw", "READ bw"),
                    ("write_lat", "WRITE lat"), ("read_lat", "READ lat")):
        for i, m in enumerate(m2):
            x = series("a_" + case, f"{t} ({'wall' if m == 'wall_ns' else 'insns'})", m, 5 + i)
            if x:
                s.append(x)
    if s:
        gp += ["set title '(a) dma-buf MR speed / plain MR speed'",
               "set xlabel 'message size'", "set ylabel 'ratio'",
               "set arrow 1 from graph 0, first 0.98 to graph 1, first 0.98 nohead dt 2",
               "set key top right maxrows 4 font ',8'",
               "plot " + ", ".join(s), "unset arrow 1", "set key bottom right font ',9'"]
    # (b)
    s = [series("b_abs_" + v, t, "wall_ns", pt) for v, t, pt in
         (("idle", "REVOKE, idle", 5), ("traffic", "REVOKE, 64 KiB WRITEs in flight", 7),
          ("traffic_1m", "REVOKE, 1 MiB WRITEs in flight", 11),
          ("dereg", "dereg of the same MRs", 9))]
    s = [x for x in s if x]
    if s:
        gp += ["set title '(b) REVOKE of n MRs on one buffer vs dereg (wall, %s)'"
               % ("2 vCPUs, revoker and traffic apart" if "b_smp" in plots else "1 vCPU"),
               "set xlabel 'MRs'", "set ylabel 'ms'", "set logscale xy 10",
               "set xtics auto", "set format x '%g'", "set key top left",
               "plot " + ", ".join(s), "unset logscale y", "set logscale x 2",
               SIZE_TICS, "set key bottom right"]
    # (c)
    s = [x for x in (series(n, f"{t} ({'wall' if m == 'wall_ns' else 'insns'})", m, pt + i)
                     for n, t, pt in (("c", "exporter vmaps at reg", 5),
                                      ("c_kmapped", "exporter keeps its vmap", 9))
                     for i, m in enumerate(m2)) if x]
    if s:
        gp += ["set title '(c) ibv_reg_dmabuf_mr time / ibv_reg_mr time'",
               "set xlabel 'MR size'", "set ylabel 'ratio'",
               "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2",
               "plot " + ", ".join(s), "unset arrow 1"]
    # (d) and (e): one point per comparison
    if "de" in plots:
        path = os.path.join(out, "plot-de.dat")
        names = []
        with open(path, "w") as f:
            for i, (param, cells, name) in enumerate(plots["de"]):
                med, q1, q3 = cells["wall_ns"]
                imed = cells["insns"][0] if "insns" in cells else med
                goal = DE_GOALS.get(name.split(" ")[0], "NaN")
                f.write(f"{i} {med} {q1} {q3} {imed} {goal}\n")
                names.append(name)
        xt = ", ".join(f"'{n}' {i}" for i, n in enumerate(names))
        gp += ["unset logscale", "set format x '%g'",
               "set title '(d) ODP time / dma-buf time, (e) bounce time / direct time'",
               "set xlabel ''", "set ylabel 'ratio'", f"set xtics ({xt}) rotate by -20",
               "set xrange [-0.5:%d]" % len(names), "set yrange [0:*]",
               "set key top right",
               f"plot '{path}' using 1:2:3:4 with yerrorbars pt 5 title 'wall', "
               f"'{path}' using 1:5 with points pt 7 title 'insns', "
               f"'{path}' using 1:6 with points pt 3 ps 2 title 'goal (at least)'"]
    gp.append("unset multiplot")
    for term, ext in (("svg size 1200,900 dynamic font 'sans,10'", "svg"),
                      ("pngcairo size 1200,900 font 'sans,9'", "png")):
        script = os.path.join(out, f"bench-{ext}.gp")
        with open(script, "w") as f:
            f.write(f"set terminal {term}\n"
                    f"set output '{os.path.join(out, 'bench.' + ext)}'\n")
            f.write("\n".join(gp) + "\n")
        r = subprocess.run(["gnuplot", script], capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"bench-report: gnuplot failed:\n{r.stderr}")


if __name__ == "__main__":
    main()
