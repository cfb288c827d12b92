#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sum TAP results: top-level "ok"/"not ok" lines of each file given.

Only a plain "ok" passes. An "ok" with a "# SKIP" directive counts as
skipped; an "ok" with any other directive counts as failed: no test here
expects a failure, so "# XFAIL" (the kselftest runner's name for a
program's exit code 2, also what bash exits with on a syntax error or on
`exit "$KSFT_FAIL"` when ktap_helpers.sh was not sourced), "# TODO",
"# XPASS" and unittest's "# expected failure" are failures. Every "not
ok" is a failure, whatever its directive. Nested (indented or
"# "-prefixed) lines are the subtests of a kselftest or KUnit suite and
are already summed in their parent line.

Nothing that did not run sums to a pass or to 0/0: a file whose plan
("1..N") promises more results than it holds counts the missing ones as
failed; a file with no plan at all (a crash before it), a file without a
single result (a "1..0" plan), a file that cannot be read, and no file at
all each count as one failure.

usage: tap-sum.py FILE...   prints "N passed, N failed[, N skipped]"
"""
import re
import sys


def directive(rest):
    """The directive of a result line's text after "ok"/"not ok": what
    follows its first " #" (a "#" inside a word is part of the
    description), upper-cased; "" when there is none."""
    m = re.search(r"(?:^|\s)#\s*(.*)$", rest)
    return m.group(1).strip().upper() if m else ""


def sum_file(path):
    """(passed, failed, skipped, complaints) of one TAP file."""
    passed = failed = skipped = 0
    plan = None
    seen = 0
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return 0, 1, 0, [f"{path}: cannot read it ({e.strerror}): counted "
                         f"as one failure"]
    for line in lines:
        m = re.match(r"^1\.\.(\d+)", line)
        if m and plan is None:
            plan = int(m.group(1))
            continue
        m = re.match(r"^(not ok|ok)\b(.*)$", line)
        if not m:
            continue
        seen += 1
        d = directive(m.group(2))
        if m.group(1) == "not ok":
            failed += 1
        elif d == "":
            passed += 1
        elif d.startswith("SKIP"):
            skipped += 1
        else:
            failed += 1
    why = []
    if plan is None:
        why.append(f"{path}: no plan (1..N): counted as one failure")
        failed += 1
    elif seen < plan:
        why.append(f"{path}: plan 1..{plan}, {seen} results")
        failed += plan - seen
    elif seen == 0:
        why.append(f"{path}: no result at all (plan 1..0): counted as one "
                   f"failure")
        failed += 1
    return passed, failed, skipped, why


def main(paths):
    passed = failed = skipped = 0
    if not paths:
        print("tap-sum: no TAP file: counted as one failure", file=sys.stderr)
        failed = 1
    for path in paths:
        p, f, s, why = sum_file(path)
        passed, failed, skipped = passed + p, failed + f, skipped + s
        for w in why:
            print(f"tap-sum: {w}", file=sys.stderr)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
