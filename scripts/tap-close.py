#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Close the TAP file of a host step after its script has exited.

A script that dies before its plan line, or exits non-zero while every
result it printed passed, would otherwise sum to 0/0 or to a pass. This
adds one failed result for each such case and fixes the plan:

- no plan ("1..N") in FILE: "not ok - NAME: no TAP plan ...";
- EXIT_CODE non-zero and no failed result in FILE (and none missing from
  its plan): "not ok - NAME: exited EXIT_CODE with no failed result".

FILE is rewritten in place only when a result is added.

usage: tap-close.py FILE NAME EXIT_CODE
"""
import re
import sys


def close(lines, name, rc):
    """Return the lines of the closed TAP file (a list, no newlines)."""
    plan = None
    plan_at = None
    seen = failed = 0
    for i, line in enumerate(lines):
        m = re.match(r"^1\.\.(\d+)", line)
        if m and plan is None:
            plan, plan_at = int(m.group(1)), i
            continue
        m = re.match(r"^(not ok|ok)\b", line)
        if m:
            seen += 1
            if m.group(1) == "not ok":
                failed += 1
    extra = []
    if plan is None:
        extra.append(f"not ok - {name}: no TAP plan (exit {rc}; did it die "
                     f"before printing one?)")
    elif rc != 0 and failed == 0 and seen >= plan:
        extra.append(f"not ok - {name}: exited {rc} with no failed result")
    if not extra:
        return lines
    out = list(lines)
    new_plan = f"1..{(plan if plan is not None else seen) + len(extra)}"
    if plan_at is None:
        if out and out[0].startswith("TAP version"):
            out.insert(1, new_plan)
        else:
            out[0:0] = ["TAP version 13", new_plan]
    else:
        out[plan_at] = new_plan
    return out + extra


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[-1])
    path, name, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    out = close(lines, name, rc)
    if out is not lines:
        with open(path, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
