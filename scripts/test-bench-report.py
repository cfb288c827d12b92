#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host tests of scripts/bench-report.py on made-up samples, as TAP.

Each case writes a raw CSV (and a marker log) whose ratios are known,
runs the report and checks the numbers and verdicts in summary.csv, or
that inconsistent input is refused.
"""
import csv
import os
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(TOP, "scripts", "bench-report.py")
HDR = "seq,section,case,param,variant,pair,wall_ns,thread_ns,busy_ns,bytes,ops"
results = []


def ok(cond, name, detail=""):
    results.append((bool(cond), name, detail))


def write_raw(path, samples):
    """samples: (section, case, param, variant, pair, wall_ns, ops)"""
    with open(path, "w") as f:
        f.write(HDR + "\n")
        for seq, (sec, cs, param, var, pair, wall, ops) in enumerate(samples):
            f.write(f"{seq},{sec},{cs},{param},{var},{pair},{wall},{wall},0,0,{ops}\n")


def run(tmp, raw, *extra):
    out = os.path.join(tmp, "out")
    r = subprocess.run([sys.executable, REPORT, "--raw", raw, "--out", out, *extra],
                       capture_output=True, text=True)
    rows = []
    if r.returncode == 0:
        with open(os.path.join(out, "summary.csv")) as f:
            rows = list(csv.DictReader(f))
    return r, rows


def row(rows, comparison, param):
    for r in rows:
        if r["comparison"] == comparison and r["param"] == str(param):
            return r
    return None


def pairs_a(size, ratios):
    """write_bw samples where plain/dmabuf time = ratio in each pair."""
    s = []
    for p, q in enumerate(ratios):
        s.append(("a", "write_bw", size, "dmabuf", p, 1000000, 1))
        s.append(("a", "write_bw", size, "plain", p, int(1000000 * q), 1))
    return s


with tempfile.TemporaryDirectory() as tmp:
    raw = os.path.join(tmp, "raw.csv")

    # (a): the median of per-pair ratios and the verdicts.
    s = (pairs_a(65536, [0.99, 0.995, 1.0, 1.01, 1.02]) +
         pairs_a(262144, [0.90, 0.95, 0.96, 0.97, 0.97]) +
         pairs_a(1048576, [0.95, 0.97, 0.99, 1.0, 1.01]) +
         pairs_a(64, [0.5, 0.5, 0.5]))
    write_raw(raw, s)
    r, rows = run(tmp, raw)
    ok(r.returncode == 0, "report runs on wall-time samples", r.stderr)
    a = row(rows, "a WRITE bw dmabuf/plain", 65536)
    ok(a and abs(float(a["wall_ratio"]) - 1.0) < 1e-9 and a["pairs"] == "5",
       "median of the per-pair ratios", a)
    ok(a and a["verdict"] == "met", "IQR above the goal: met", a)
    a = row(rows, "a WRITE bw dmabuf/plain", 262144)
    ok(a and a["verdict"] == "missed", "IQR below the goal: missed", a)
    a = row(rows, "a WRITE bw dmabuf/plain", 1048576)
    ok(a and a["verdict"] == "unclear", "IQR across the goal: unclear", a)
    a = row(rows, "a WRITE bw dmabuf/plain", 64)
    ok(a and a["goal"] == "-" and a["verdict"] == "-", "no goal below 64 KiB", a)
    ok(os.path.getsize(os.path.join(tmp, "out", "bench.svg")) > 1000 and
       os.path.getsize(os.path.join(tmp, "out", "bench.png")) > 1000,
       "plot drawn (SVG and PNG)")

    # Instruction counts: the k-th begin/end pair belongs to sample k.
    s = pairs_a(65536, [1.0, 1.0, 1.0])
    write_raw(raw, s)
    log = os.path.join(tmp, "insns.log")
    with open(log, "w") as f:
        count = 0
        for i in range(len(s)):
            # dmabuf samples cost 100 instructions, plain 97.
            f.write(f"1 {count}\n")
            count += 100 if i % 2 == 0 else 97
            f.write(f"2 {count}\n")
            count += 1000
    r, rows = run(tmp, raw, "--insns", log)
    a = row(rows, "a WRITE bw dmabuf/plain", 65536)
    ok(r.returncode == 0 and a and abs(float(a["insn_ratio"]) - 0.97) < 1e-9,
       "instruction ratio from the marker log", r.stderr or a)
    ok(a and a["verdict"] == "missed",
       "a goal missed on instructions is missed though met on wall", a)
    with open(log, "a") as f:
        f.write("1 0\n2 5\n")
    r, _ = run(tmp, raw, "--insns", log)
    ok(r.returncode != 0 and "marker pairs" in r.stderr,
       "more marker pairs than samples is refused", r.stderr)

    # A pair without its partner is refused.
    write_raw(raw, pairs_a(65536, [1.0, 1.0])[:-1])
    r, _ = run(tmp, raw)
    ok(r.returncode != 0 and "differ" in r.stderr, "a missing partner is refused",
       r.stderr)

    # (b): samples are per REVOKE call (ops), revoke/dereg and scaling.
    s = []
    for p in range(3):
        s.append(("b", "revoke", 100, "idle", p, 200000, 1))
        s.append(("b", "revoke", 100, "dereg", p, 400000, 1))
        s.append(("b", "revoke", 1000, "idle", p, 2400000, 1))
        s.append(("b", "revoke", 1000, "dereg", p, 4000000, 1))
        s.append(("b", "revoke", 1, "idle", p, 1000000, 100))
        s.append(("b", "revoke", 1, "dereg", p, 500000, 100))
    write_raw(raw, s)
    r, rows = run(tmp, raw)
    b = row(rows, "b revoke/dereg (idle)", 100)
    ok(r.returncode == 0 and b and abs(float(b["wall_ratio"]) - 0.5) < 1e-9 and
       b["verdict"] == "met", "revoke/dereg ratio", r.stderr or b)
    b = row(rows, "b revoke/dereg (idle)", 1)
    ok(b and abs(float(b["a_median"]) - 0.01) < 1e-9,
       "per-REVOKE time: a sample of 100 REVOKEs divided by 100", b)
    b = row(rows, "b revoke t(1000)/t(100) idle", "wall_ns")
    ok(b and abs(float(b["wall_ratio"]) - 12.0) < 1e-9 and b["verdict"] == "missed",
       "t(1000)/t(100) = 12 misses <= 11", b)

n_fail = 0
print("TAP version 13")
print(f"1..{len(results)}")
for i, (good, name, detail) in enumerate(results, 1):
    print(f"{'ok' if good else 'not ok'} {i} bench-report: {name}")
    if not good:
        n_fail += 1
        print(f"# {detail}")
sys.exit(1 if n_fail else 0)
