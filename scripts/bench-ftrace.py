#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sum up a function_graph trace of one kernel function per sample kind.

usage: bench-ftrace.py FUNCTION TRACE

TRACE is ftrace's function_graph output (one CPU, or several with the CPU
column), with revoke_bench's trace_marker lines ("revoke_bench: seq=N
case=C param=P variant=V") naming the sample that follows. Every call of
FUNCTION is attributed to the last marker before it; for each
(case, param, variant) the script prints how many calls there were and the
median (and quartiles) of the whole call and of each of its direct callees
in microseconds (callees that appear in fewer than half of the calls,
such as interrupts, are only named). Calls before the first marker are
left out.
"""
import re
import statistics
import sys
from collections import defaultdict

MARK = re.compile(r"revoke_bench: seq=\d+ case=(\S+) param=(\d+) variant=(\S+)")
DUR = re.compile(r"([\d.]+) us")


def parse(func, path):
    kind = None
    calls = defaultdict(list)   # kind -> [{"total": us, callee: us}]
    cur, base = None, None
    open_callees = []
    with open(path) as f:
        for line in f:
            m = MARK.search(line)
            if m:
                kind = (m.group(1), int(m.group(2)), m.group(3))
                continue
            if "|" not in line:
                continue
            fields = line.rstrip("\n").split("|")
            body = fields[-1]
            dur = DUR.search(fields[-2]) if len(fields) >= 2 else None
            us = float(dur.group(1)) if dur else None
            text = body.strip()
            indent = len(body) - len(body.lstrip(" "))
            if cur is None:
                if text.startswith(func) and text.endswith("{") and kind:
                    cur, base = {}, indent
                    open_callees = []
                continue
            if text.startswith("}") and indent == base:
                cur["total"] = us
                calls[kind].append(cur)
                cur = None
                continue
            if indent != base + 2:
                continue
            name = re.sub(r"\s*\[.*?\]", "", text).split("(")[0].strip()
            if text.endswith(";"):
                cur[name] = cur.get(name, 0) + (us or 0)
            elif text.endswith("{"):
                open_callees.append(name)
            elif text.startswith("}") and open_callees:
                name = open_callees.pop()
                cur[name] = cur.get(name, 0) + (us or 0)
    return calls


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    func, path = sys.argv[1:]
    calls = parse(func, path)
    if not calls:
        sys.exit(f"bench-ftrace: no call of {func} after a revoke_bench marker in {path}")
    print(f"{func}: microseconds per call, median [q1, q3]; callees as traced "
          "(function_graph adds its own overhead to every call)")
    for kind in sorted(calls):
        cs = calls[kind]
        seen = defaultdict(int)
        for c in cs:
            for k in c:
                seen[k] += 1
        # Callees in most calls; the rest (interrupts landing in a few
        # calls) only counted.
        common = [k for k in seen if k != "total" and 2 * seen[k] >= len(cs)]
        rare = sorted(k for k in seen if k != "total" and k not in common)
        names = ["total"] + sorted(common, key=lambda k: -statistics.median(
            c.get(k, 0) for c in cs))
        print(f"\n{kind[0]} {kind[1]} {kind[2]}: {len(cs)} calls")
        for n in names:
            xs = sorted(c.get(n, 0) for c in cs if c.get(n) is not None)
            if not xs:
                continue
            q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
            print(f"  {n:36s} {statistics.median(xs):9.1f} [{q[0]:.1f}, {q[2]:.1f}]")
        if rare:
            print(f"  (in fewer than half of the calls: {', '.join(rare)})")


if __name__ == "__main__":
    main()
