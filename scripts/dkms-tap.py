#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""TAP for one kernel of the DKMS check, from its guest's output.

The guest (scripts/vm/dkms-selftest.sh) prints "dkmsguest: ok|not ok NAME"
checks, the mock kselftest's TAP as "selftest: LINE", and "dkmsguest: end"
when it got to its end (a run that did not fails). Every case the
kselftest binary has (its -l listing) must pass, or skip on this kernel for
the reason scripts/dkms/expected-skips gives; an unexpected skip, a
failure, a case with no result, and a listed skip that did not happen each
fail.

usage: dkms-tap.py KREL LIST_FILE EXPECTED_SKIPS GUEST_LOG
  LIST_FILE: what `dmabuf_mock -l` printed
  EXPECTED_SKIPS: lines "KERNEL_REGEX CASE REASON", REASON a substring of
  the skip message
"""
import re
import sys


def harness_cases(lines):
    """Case names from the kselftest harness's -l table (fixed columns
    "%-20s %-25s %s": fixture, variant, test, zipped per fixture).
    scripts/manifest.py uses it too."""
    fixtures = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("# FIXTURE"):
            continue
        if set(line) == {"-"}:
            continue
        if len(line) > 46 and (line[20] != " " or line[46] != " "):
            raise ValueError(f"cannot parse -l line: {line!r}")
        fix, var, test = line[:20].strip(), line[21:46].strip(), line[47:].strip()
        if fix:
            fixtures.append([fix, [], []])
        if not fixtures:
            raise ValueError(f"-l line before a fixture: {line!r}")
        if var:
            fixtures[-1][1].append(var)
        if test:
            fixtures[-1][2].append(test)
    cases = []
    for fix, variants, tests in fixtures:
        for v in variants or [None]:
            for t in tests:
                cases.append(f"{fix}.{v}.{t}" if v else f"{fix}.{t}")
    return cases


def parse_list(path):
    """Case names from a file holding the -l table."""
    with open(path, errors="replace") as f:
        return harness_cases(f)


def parse_skips(path, krel):
    skips = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                raise ValueError(f"{path}:{n}: want KERNEL_REGEX CASE REASON")
            if re.search(parts[0], krel):
                skips[parts[1]] = parts[2]
    return skips


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("\n\n")[-1])
    krel, list_file, skips_file, log = sys.argv[1:]
    out = []

    def result(ok, text):
        out.append(("ok" if ok else "not ok", text))

    try:
        cases = parse_list(list_file)
        expected = parse_skips(skips_file, krel)
    except (OSError, ValueError) as e:
        result(False, f"{krel}: case list and expected skips: {e}")
        cases, expected = [], {}

    plan = None
    results = {}
    ended = False
    with open(log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n").rstrip("\r")
            if line == "dkmsguest: end":
                ended = True
                continue
            m = re.match(r"^dkmsguest: (ok|not ok) (.*)$", line)
            if m:
                result(m.group(1) == "ok", f"{krel}: {m.group(2)}")
                continue
            if not line.startswith("selftest: "):
                continue
            line = line[len("selftest: "):]
            m = re.match(r"^1\.\.(\d+)", line)
            if m and plan is None:
                plan = int(m.group(1))
                continue
            m = re.match(r"^(ok|not ok) \d+ (\S+)(.*)$", line)
            if m:
                skip = re.match(r"\s*#\s*SKIP\s*(.*)$", m.group(3), re.I)
                results[m.group(2)] = ("skip", skip.group(1)) if skip else \
                    ("pass" if m.group(1) == "ok" else "fail", "")

    result(ended, f"{krel}: the guest's checks ran to their end")
    result(plan == len(cases) and len(cases) > 0,
           f"{krel}: kselftest plan 1..{plan} matches the binary's "
           f"{len(cases)} cases")
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for case in cases:
        name = f"{krel}: {case}"
        if case not in results:
            result(False, f"{name}: no result")
            counts["fail"] += 1
            continue
        status, msg = results[case]
        counts[status] += 1
        want = expected.get(case)
        if status == "fail":
            result(False, name)
        elif status == "pass" and want is None:
            result(True, name)
        elif status == "pass":
            result(False, f"{name}: passed, but scripts/dkms/expected-skips "
                          f"says it skips here ({want}): update the list")
        elif want is None:
            result(False, f"{name}: unexpected skip: {msg}")
        elif want not in msg:
            result(False, f"{name}: skipped for another reason: {msg} "
                          f"(expected: {want})")
        else:
            out.append(("ok", f"{name} # SKIP {msg}"))
    for case in sorted(set(results) - set(cases)):
        result(False, f"{krel}: {case}: not in the binary's case list")
    for case in sorted(set(expected) - set(cases)):
        result(False, f"{krel}: {case}: in scripts/dkms/expected-skips, "
                      f"not in the binary")

    print("TAP version 13")
    print(f"1..{len(out)}")
    for n, (status, text) in enumerate(out, 1):
        print(f"{status} {n} {text}")
    print(f"# {krel}: kselftest dmabuf_mock: {counts['pass']} passed, "
          f"{counts['fail']} failed, {counts['skip']} skipped")


if __name__ == "__main__":
    main()
