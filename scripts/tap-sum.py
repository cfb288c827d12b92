#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sum TAP results: top-level "ok"/"not ok" lines of each file given.

A "# SKIP" directive counts as skipped. "# XFAIL" counts as failed: no
test here expects a failure, and the kselftest runner reports a program's
exit code 2 as XFAIL, which is also what bash exits with on a syntax error
or on `exit "$KSFT_FAIL"` when ktap_helpers.sh was not sourced. Nested
(indented or "# "-prefixed) lines are the subtests of a kselftest or KUnit
suite and are already summed in their parent line. A file whose plan
("1..N") promises more results than it holds counts the missing ones as
failed, so a run that died half-way cannot pass; a file with no plan at
all (a crash before it) counts as one failure.

usage: tap-sum.py FILE...   prints "N passed, N failed[, N skipped]"
"""
import re
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    plan = None
    seen = 0
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"^1\.\.(\d+)", line)
            if m and plan is None:
                plan = int(m.group(1))
                continue
            m = re.match(r"^(not ok|ok)\b(.*)$", line)
            if not m:
                continue
            seen += 1
            directive = m.group(2).split("#", 1)[1].strip().upper() \
                if "#" in m.group(2) else ""
            if directive.startswith("XFAIL"):
                failed += 1
            elif directive.startswith("SKIP"):
                skipped += 1
            elif m.group(1) == "ok":
                passed += 1
            else:
                failed += 1
    if plan is None:
        print(f"tap-sum: {path}: no plan (1..N): counted as one failure",
              file=sys.stderr)
        failed += 1
    elif seen < plan:
        print(f"tap-sum: {path}: plan 1..{plan}, {seen} results",
              file=sys.stderr)
        failed += plan - seen
line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed else 0)
