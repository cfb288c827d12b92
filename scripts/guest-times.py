#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""How long each program of a guest run took, against its time limit.

scripts/vm.sh's out.times holds each line of the guest's output after the
seconds since QEMU started. A kselftest runs from its "# selftests: C: P"
line to its result line ("ok|not ok N selftests: C: P"), and the runner
kills it at its limit: run_kselftest.sh's -o when given (it overrides the
collection's settings file: kselftest/runner.sh), else the "timeout=" of
the collection's settings file, else the runner's 45 s; --limit lowers it
for a program whose own limit is lower. A test with a time limit of its
own reports how close it came in a line "time: WHAT USED_MS ms of LIMIT_MS
ms" (after any "# " prefixes of kselftest nesting); inside a kselftest it
is named after it ("C:P: WHAT").

A program that used more than half its limit gets a warning: a margin to
watch on a slower machine, not a failure.

usage: guest-times.py times OUT_TIMES [--override SECS]
                            [--kselftest-dir DIR] [--limit PROGRAM=SECS]...
         one line per program: "NAME USED s of LIMIT s" ("ms" for a test's
         own limit); the guest-KIND.times file of scripts/test.sh
       guest-times.py warn FILE...
         a warning line for each entry of the guest-KIND.times FILEs that
         used more than half its limit
       guest-times.py table FILE...
         the FILEs as a markdown table, a column per guest (for
         results/README.md)
"""
import os
import re
import sys

DEFAULT = 45    # kselftest/runner.sh's kselftest_default_timeout
START = re.compile(r"^# selftests: (\S+): (\S+)\s*$")
END = re.compile(r"^(?:not ok|ok) \d+ selftests: (\S+): (\S+)")
OWN = re.compile(r"^[# ]*time: (.+?) (\d+) ms of (\d+) ms\s*$")
ENTRY = re.compile(r"^(.+) (\d+) (s|ms) of (\d+) (s|ms)$")


def settings_timeout(kdir, coll):
    try:
        with open(os.path.join(kdir, coll, "settings")) as f:
            for line in f:
                m = re.match(r"^\s*timeout=(\d+)\s*$", line)
                if m:
                    return int(m.group(1))
    except OSError:
        pass
    return None


def times(lines, override=None, kdir=None, limits=None):
    """Entries (name, used, limit, unit) of a guest's out.times lines."""
    limits = limits or {}
    out, start, current = [], {}, None
    for raw in lines:
        raw = raw.rstrip("\n").rstrip("\r")
        t, _, line = raw.partition(" ")
        if not t.isdigit():
            continue
        t = int(t)
        m = START.match(line)
        if m:
            current = f"{m.group(1)}:{m.group(2)}"
            start[current] = (t, m.group(1))
            continue
        m = END.match(line)
        if m:
            name = f"{m.group(1)}:{m.group(2)}"
            if name in start:
                t0, coll = start.pop(name)
                limit = override
                if limit is None:
                    limit = (kdir and settings_timeout(kdir, coll)) or DEFAULT
                base = re.sub(r"\[[^]]*\]$", "", name)
                limit = min([limit] + [limits[n] for n in (name, base)
                                       if n in limits])
                out.append((name, t - t0, limit, "s"))
            current = None
            continue
        m = OWN.match(line)
        if m:
            what = f"{current}: {m.group(1)}" if current else m.group(1)
            out.append((what, int(m.group(2)), int(m.group(3)), "ms"))
    return out


def fmt(entry):
    name, used, limit, unit = entry
    return f"{name} {used} {unit} of {limit} {unit}"


def read(path):
    """Entries of a guest-KIND.times file."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = ENTRY.match(line.rstrip("\n"))
            if m:
                out.append((m.group(1), int(m.group(2)), int(m.group(4)),
                            m.group(3)))
    return out


def guest_of(path):
    base = os.path.basename(path)
    m = re.match(r"^guest-(.+)\.times$", base)
    return m.group(1) if m else base


def over_half(entry):
    return entry[1] * 2 > entry[2]


def warn(paths):
    out = []
    for path in paths:
        for e in read(path):
            if over_half(e):
                out.append(f"warning: guest {guest_of(path)}: {e[0]} took "
                           f"{e[1]} {e[3]} of its {e[2]} {e[3]} limit "
                           f"({100 * e[1] // max(e[2], 1)}%, more than half)")
    return out


def table(paths):
    guests = [guest_of(p) for p in paths]
    rows, cells = [], {}
    for g, path in zip(guests, paths):
        for e in read(path):
            if e[0] not in cells:
                rows.append(e[0])
                cells[e[0]] = {}
            pct = 100 * e[1] // max(e[2], 1)
            cell = f"{e[1]} {e[3]} of {e[2]} ({pct}%)"
            cells[e[0]][g] = f"**{cell}**" if over_half(e) else cell
    out = ["| program | " + " | ".join(guests) + " |",
           "| --- |" + " --- |" * len(guests)]
    for r in rows:
        out.append(f"| `{r}` | " + " | ".join(cells[r].get(g, "-")
                                             for g in guests) + " |")
    out += ["", "Time used of each limit (scripts/guest-times.py); bold: "
            "more than half."]
    return out


def main(argv):
    if not argv:
        sys.exit(__doc__[__doc__.index("usage:"):])
    cmd, args = argv[0], argv[1:]
    if cmd == "times" and args:
        path, override, kdir, limits = args[0], None, None, {}
        rest = args[1:]
        while rest:
            if rest[0] == "--override" and len(rest) > 1:
                override = int(rest[1])
            elif rest[0] == "--kselftest-dir" and len(rest) > 1:
                kdir = rest[1]
            elif rest[0] == "--limit" and len(rest) > 1 and "=" in rest[1]:
                name, secs = rest[1].rsplit("=", 1)
                limits[name] = int(secs)
            else:
                sys.exit(__doc__[__doc__.index("usage:"):])
            rest = rest[2:]
        try:
            with open(path, errors="replace") as f:
                lines = f.readlines()
        except OSError:
            lines = []
        for e in times(lines, override, kdir, limits):
            print(fmt(e))
    elif cmd == "warn":
        for line in warn(args):
            print(line)
    elif cmd == "table":
        print("\n".join(table(args)))
    else:
        sys.exit(__doc__[__doc__.index("usage:"):])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
