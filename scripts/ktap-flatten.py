#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Flatten the kselftest runner's output into one TAP line per test case.

run_kselftest.sh prints one top-level result per test program and the
program's own TAP one level down, prefixed "# ". A program with its own
results (kselftest_harness, ksft_test_result_*) contributes those, named
"collection:program: case"; if it then failed as a whole anyway (a crash,
an exit code its results do not explain, or exit code 2, which the runner
reports as "ok ... # XFAIL": bash's exit code for a syntax error), one
more failed line says so.
A program without results of its own (a shell script) contributes its
top-level line, with the reason of its "1..0 # SKIP reason" when it
skipped as a whole.

usage: ktap-flatten.py LOG > TAP
"""
import re
import sys

top = re.compile(r"^(not ok|ok) \d+ selftests: (\S+): (\S+)(.*)$")
start = re.compile(r"^# selftests: (\S+): (\S+)\s*$")
nested = re.compile(r"^# (not ok|ok) \d+ (.*)$")
skip_all = re.compile(r"^# 1\.\.0\s*#\s*SKIP\s*(.*?)\s*$", re.I)

out = []
cases = []
why = ""
with open(sys.argv[1], errors="replace") as f:
    for line in f:
        line = line.rstrip("\n").rstrip("\r")
        if start.match(line):
            cases = []
            why = ""
            continue
        m = skip_all.match(line)
        if m:
            why = m.group(1)
            continue
        m = nested.match(line)
        if m:
            cases.append((m.group(1), m.group(2)))
            continue
        m = top.match(line)
        if not m:
            continue
        status, coll, prog, rest = m.groups()
        name = f"{coll}:{prog}"
        if not cases:
            # A program that skipped as a whole ("1..0 # SKIP why"): the
            # runner's line has no reason; give it the program's.
            if why and re.fullmatch(r"\s*#\s*SKIP\s*", rest, re.I):
                rest = f" # SKIP {why}"
            out.append(f"{status} - {name}{rest}")
        else:
            for st, desc in cases:
                out.append(f"{st} - {name}: {desc}")
            xfail = status == "ok" and re.search(r"#\s*XFAIL", rest, re.I)
            if (status == "not ok" or xfail) and \
               all(st == "ok" for st, _ in cases):
                why = ": exit code 2 (the runner's XFAIL)" if xfail else rest
                out.append(f"not ok - {name}: program failed{why}")
        cases = []

print("TAP version 13")
print(f"1..{len(out)}")
for line in out:
    print(line)
