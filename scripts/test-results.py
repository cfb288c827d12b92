#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host tests of the result accounting, on made-up input, as TAP.

scripts/tap-sum.py (what counts as passed), scripts/ktap-flatten.py (a
program's exit code), scripts/tap-close.py (a host step's exit code and
plan), scripts/manifest.py (the expected results: counts, case names,
skips, the kselftest build, the README's table), scripts/guest-times.py
(time used of each limit), the result class of
scripts/vm/rdma-core-tests.sh, and scripts/test.sh and .ci/run themselves
in a copy of the repository's scripts whose steps, make and QEMU
(scripts/vm.sh) are stand-ins: what a run that ran less, or whose guest
command failed, sums to. Each case feeds good or bad input and checks the
verdict; most cases are bad input that must fail.
"""
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
S = os.path.join(TOP, "scripts")
results = []


def ok(cond, name, detail=""):
    results.append((bool(cond), name, detail))


def run(*args, stdin=None):
    r = subprocess.run([sys.executable, *args], capture_output=True,
                       text=True, input=stdin)
    return r.returncode, r.stdout, r.stderr


def names_hash(*names):
    """The manifest's hash of case names (scripts/test-manifest.txt's
    header), written out again here."""
    text = "".join(f"{n}\n" for n in sorted(names))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def tapsum(tmp, text):
    rc, out, _ = run(os.path.join(S, "tap-sum.py"),
                     write(os.path.join(tmp, "t.tap"), text))
    return rc, out.strip()


def nots(out):
    return [x for x in out.splitlines() if x.startswith("not ok")]


A_HASH = names_hash("f.one", "f.two", "f.three")
MANIFEST = f"""\
# a comment
program | all | rdma:a.sh | 3 | rdma/a
cases | rdma:a.sh | {A_HASH}
program | all | rdma:up.sh | 1 | rdma/up.sh
program | debian | drivers/dma-buf:m | 1 | -
program | debug | drivers/dma-buf:m | 2 | -
case | drivers/dma-buf:m | x
case | drivers/dma-buf:m | y
program | debug | kunit:suite | 2 | -
case | kunit:suite | case_a
case | kunit:suite | rmmod suite_kunit
program | all | rdmatool | 1 | -
case | rdmatool | shows the MR (lkey *)
skip | all | rdma:a.sh | f.one | no word | atomics need a word
skip | base,debug | rdma:a.sh | f.two | no tracefs | no tracing here
skip | debian | drivers/dma-buf:m | - | - | the whole program skips
"""

GOOD_DEBUG = """\
ok - kunit:suite: case_a
ok - kunit:suite: rmmod suite_kunit
ok - drivers/dma-buf:m: x
ok - drivers/dma-buf:m: y
ok - rdma:up.sh
ok - rdma:a.sh: f.one # SKIP no word in the MR
ok - rdma:a.sh: f.two # SKIP no tracefs instances
ok - rdma:a.sh: f.three
ok - rdmatool: shows the MR (lkey 7)
"""


def check(tmp, guest, raw, manifest=MANIFEST, *extra):
    m = write(os.path.join(tmp, "manifest"), manifest)
    r = write(os.path.join(tmp, "raw"), raw)
    rc, out, err = run(os.path.join(S, "manifest.py"), "--manifest", m,
                       "check", guest, r, *extra)
    return rc, out + err


with tempfile.TemporaryDirectory() as tmp:
    # tap-sum
    rc, out = tapsum(tmp, "TAP version 13\n1..2\nok 1 a\nok 2 b # XFAIL\n")
    ok(rc == 1 and out == "1 passed, 1 failed", "tap-sum: XFAIL is a failure", out)
    rc, out = tapsum(tmp, "TAP version 13\nok 1 a\n")
    ok(rc == 1 and out == "1 passed, 1 failed", "tap-sum: no plan is a failure", out)
    rc, out = tapsum(tmp, "TAP version 13\n1..3\nok 1 a\n")
    ok(rc == 1 and out == "1 passed, 2 failed",
       "tap-sum: results missing from the plan are failures", out)
    rc, out = tapsum(tmp, "1..3\nok 1 a\nok 2 b # SKIP x\n    not ok 1 nested\nok 3 c\n")
    ok(rc == 0 and out == "2 passed, 0 failed, 1 skipped",
       "tap-sum: passes, skips, nested lines not counted", out)
    for directive in ("expected failure", "TODO not done yet", "XPASS",
                      "xfail"):
        rc, out = tapsum(tmp, f"TAP version 13\n1..2\nok 1 a\n"
                              f"ok 2 - b # {directive}\n")
        ok(rc == 1 and out == "1 passed, 1 failed",
           f"tap-sum: an ok with the directive {directive!r} is a failure",
           out)
    rc, out = tapsum(tmp, "TAP version 13\n1..2\nok 1 a\nnot ok 2 b # SKIP x\n")
    ok(rc == 1 and out == "1 passed, 1 failed",
       "tap-sum: a not ok with a SKIP directive is a failure, not a skip",
       out)
    rc, out = tapsum(tmp, "TAP version 13\n1..1\nok 1 issue#23 fixed\n")
    ok(rc == 0 and out == "1 passed, 0 failed",
       "tap-sum: a hash sign inside a word is no directive", out)
    for plan, what in (("1..0", "a 1..0 plan"),
                       ("1..0 # SKIP nothing to do", "a 1..0 plan that skips")):
        rc, out = tapsum(tmp, f"TAP version 13\n{plan}\n")
        ok(rc == 1 and out == "0 passed, 1 failed",
           f"tap-sum: {what}, no result, is a failure", out)
    rc, out, err = run(os.path.join(S, "tap-sum.py"))
    ok(rc == 1 and out.strip() == "0 passed, 1 failed",
       "tap-sum: no TAP file at all is a failure", out + err)
    rc, out, err = run(os.path.join(S, "tap-sum.py"),
                       os.path.join(tmp, "results", "*.tap"))
    ok(rc == 1 and out.strip() == "0 passed, 1 failed",
       "tap-sum: a TAP file that is not there is a failure", out + err)
    p1 = write(os.path.join(tmp, "e1.tap"), "TAP version 13\n1..0\n")
    p2 = write(os.path.join(tmp, "e2.tap"), "TAP version 13\n1..0\n")
    rc, out, err = run(os.path.join(S, "tap-sum.py"), p1, p2)
    ok(rc == 1 and out.strip() != "0 passed, 0 failed",
       "tap-sum: files that hold zero results in all do not sum to 0/0",
       out + err)

    # ktap-flatten: exit code 2 (XFAIL) after passing cases
    log = write(os.path.join(tmp, "k.log"), """\
TAP version 13
1..2
# selftests: rdma: a.sh
# TAP version 13
# 1..1
# ok 1 one
ok 1 selftests: rdma: a.sh # XFAIL
# selftests: rdma: b.sh
# rxe_b.sh: line 3: syntax error near unexpected token `)'
ok 2 selftests: rdma: b.sh # XFAIL
""")
    rc, out, _ = run(os.path.join(S, "ktap-flatten.py"), log)
    ok("not ok - rdma:a.sh: program failed: exit code 2 (the runner's XFAIL)" in out,
       "ktap-flatten: a program with passing cases that exits 2 fails", out)
    rc2, tot = tapsum(tmp, out)
    ok(rc2 == 1 and tot == "1 passed, 2 failed",
       "ktap-flatten + tap-sum: a wrapper with a syntax error fails", tot)

    log = write(os.path.join(tmp, "s.log"), """\
# selftests: rdma: c.sh\r
# 1..0 # SKIP c was not built (no libibverbs)\r
ok 1 selftests: rdma: c.sh # SKIP\r
""")
    rc, out, _ = run(os.path.join(S, "ktap-flatten.py"), log)
    ok("ok - rdma:c.sh # SKIP c was not built (no libibverbs)\n" in out,
       "ktap-flatten: a program that skips as a whole keeps its reason", out)

    # tap-close
    def close(text, rc):
        p = write(os.path.join(tmp, "c.tap"), text)
        run(os.path.join(S, "tap-close.py"), p, "step", str(rc))
        with open(p) as f:
            return f.read()
    c = close("TAP version 13\n", 1)
    ok("1..1\n" in c and "not ok - step: no TAP plan" in c,
       "tap-close: a step that died before its plan fails", c)
    c = close("TAP version 13\n1..1\nok 1 a\n", 2)
    ok("1..2\n" in c and "not ok - step: exited 2 with no failed result" in c,
       "tap-close: a step that exits non-zero after passes fails", c)
    t = "TAP version 13\n1..1\nok 1 a\n"
    ok(close(t, 0) == t, "tap-close: a passing step is left alone")
    t = "TAP version 13\n1..1\nnot ok 1 a\n"
    ok(close(t, 1) == t, "tap-close: a failure already reported is not doubled")

    # The installed kselftests: rdma/a lists f.one, f.two, f.three.
    kdir = os.path.join(tmp, "ks")
    os.makedirs(os.path.join(kdir, "rdma"))
    write(os.path.join(kdir, "kselftest-list.txt"),
          "rdma:a.sh\nrdma:up.sh\ndrivers/dma-buf:m\n")
    listing = ("# FIXTURE            VARIANT                   TEST\n"
               + "global".ljust(47) + "\n" + "-" * 80 + "\n"
               + "f".ljust(21) + "".ljust(26) + "one\n"
               + "".ljust(47) + "two\n"
               + "".ljust(47) + "three\n")
    for name, text in (("rdma/a", "#!/bin/sh\ncat <<'EOF' >&2\n" + listing + "EOF\n"),
                       ("rdma/up.sh", "#!/bin/sh\n")):
        p = write(os.path.join(kdir, name), text)
        os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR)

    # manifest check
    rc, out = check(tmp, "debug", GOOD_DEBUG)
    ok(rc == 0 and not nots(out), "manifest: the expected results pass", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace("ok - rdma:a.sh: f.three\n", ""))
    ok(rc == 1 and any("rdma:a.sh: 2 results, the manifest expects 3" in x
                       for x in nots(out)),
       "manifest: a missing result fails", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG + "ok - rdma:new.sh\n")
    ok(rc == 1 and any("rdma:new.sh: not in the manifest" in x for x in nots(out)),
       "manifest: a program it does not list fails", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - drivers/dma-buf:m: y", "ok - drivers/dma-buf:m: y # SKIP no device"))
    ok(rc == 1 and any("m: y: unexpected skip on debug: no device" in x
                       for x in nots(out)), "manifest: an unexpected skip fails", out)
    ok("# SKIP no device" not in out,
       "manifest: an unexpected skip is not counted as a skip", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace("SKIP no word in the MR",
                                                     "SKIP no device"))
    ok(rc == 1 and any("f.one: skipped on debug for another reason" in x
                       for x in nots(out)),
       "manifest: a skip for another reason fails", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "f.two # SKIP no tracefs instances", "f.two"))
    ok(rc == 1 and any("f.two: passed, but the manifest expects a skip" in x
                       for x in nots(out)),
       "manifest: a listed skip that passed fails", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "f.two # SKIP no tracefs instances", "f.renamed"))
    ok(rc == 1 and any("f.two: no result, the manifest expects a skip" in x
                       for x in nots(out)),
       "manifest: a listed skip without a result fails (same count)", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - rdma:a.sh: f.one # SKIP no word in the MR\n"
        "ok - rdma:a.sh: f.two # SKIP no tracefs instances\n"
        "ok - rdma:a.sh: f.three\n",
        "ok - rdma:a.sh # SKIP dmabuf_mr was not built (no libibverbs)\n"))
    ok(rc == 1 and any("rdma:a.sh: 1 results, the manifest expects 3" in x
                       for x in nots(out)) and
       any("rdma:a.sh: unexpected skip" in x for x in nots(out)),
       "manifest: a wrapper that skips as a whole fails", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - rdma:up.sh", "ok - rdma:up.sh # XFAIL"))
    rc2, tot = tapsum(tmp, out)
    ok(rc2 == 1, "manifest + tap-sum: an XFAIL result still fails", tot)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - kunit:suite: rmmod suite_kunit\n", ""))
    ok(rc == 1 and any("kunit:suite: 1 results" in x for x in nots(out)),
       "manifest: a KUnit suite without its rmmod result fails", out)
    raw = "".join(x + "\n" for x in GOOD_DEBUG.splitlines()
                  if "kunit:" not in x)
    rc, out = check(tmp, "base", raw.replace(
        "ok - drivers/dma-buf:m: x\nok - drivers/dma-buf:m: y\n", ""))
    ok(rc == 0 and not nots(out), "manifest: another guest, its own programs "
       "and skips", out)
    rc, out = check(tmp, "base", raw)
    ok(rc == 1 and any("drivers/dma-buf:m: not in the manifest for base" in x
                       for x in nots(out)),
       "manifest: a program that is not expected on that guest fails", out)
    rc, out = check(tmp, "debian", raw.replace(
        "ok - drivers/dma-buf:m: x\nok - drivers/dma-buf:m: y\n", "")
        .replace("ok - rdma:a.sh: f.two # SKIP no tracefs instances\n",
                 "ok - rdma:a.sh: f.two\n"), MANIFEST)
    ok(rc == 1 and any("drivers/dma-buf:m: no result, the manifest expects 1" in x
                       for x in nots(out)),
       "manifest: a program that did not run fails", out)
    rc, out = check(tmp, "debian", raw.replace(
        "ok - drivers/dma-buf:m: x\nok - drivers/dma-buf:m: y\n",
        "ok - drivers/dma-buf:m # SKIP\n")
        .replace("f.two # SKIP no tracefs instances", "f.two"))
    ok(rc == 0, "manifest: a whole-program skip without a message, as listed",
       out)
    rc, out = check(tmp, "debian", raw.replace(
        "ok - drivers/dma-buf:m: x\nok - drivers/dma-buf:m: y\n",
        "ok - drivers/dma-buf:m # SKIP no device\n")
        .replace("f.two # SKIP no tracefs instances", "f.two"))
    ok(rc == 1 and any("skipped on debian for another reason: no device" in x
                       for x in nots(out)),
       "manifest: a skip listed without a message that has one fails", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace("ok - rdma:up.sh\n", ""),
                    MANIFEST, "--select", "rdma:a.sh drivers/dma-buf",
                    "--kunit", "suite_kunit:suite")
    ok(rc == 0, "manifest: --select leaves out the programs not run", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG, MANIFEST, "--kunit", "")
    ok(rc == 1 and any("kunit:suite: results, but the run did not select it" in x
                       for x in nots(out)),
       "manifest: results of a program the run did not select fail", out)

    # Which cases ran, not only how many.
    ks = ("--kselftest-dir", kdir)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - drivers/dma-buf:m: y", "ok - drivers/dma-buf:m: x"))
    ok(rc == 1 and any("drivers/dma-buf:m: 2 results, but" in x and
                       "x: 2 results" in x and "y: missing" in x
                       for x in nots(out)),
       "manifest: a case twice and another missing (same count) fails, "
       "naming both", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - drivers/dma-buf:m: y", "ok - drivers/dma-buf:m: z"))
    ok(rc == 1 and any("z: not a case of it" in x and "y: missing" in x
                       for x in nots(out)),
       "manifest: a case the manifest does not name (same count) fails, "
       "naming it", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - rdma:a.sh: f.three\n", ""), MANIFEST, *ks)
    ok(rc == 1 and any("rdma:a.sh: 2 results, the manifest expects 3: "
                       "f.three: missing" in x for x in nots(out)),
       "manifest: a missing case of a hashed program is named from its -l",
       out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - rdma:a.sh: f.two # SKIP no tracefs instances",
        "ok - rdma:a.sh: f.three"), MANIFEST, *ks)
    ok(rc == 1 and any("rdma:a.sh: 3 results, but f.three: 2 results; "
                       "f.two: missing" in x for x in nots(out)),
       "manifest: a case twice in a hashed program fails, named from its -l",
       out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - rdma:a.sh: f.three", "ok - rdma:a.sh: f.four"), MANIFEST, *ks)
    ok(rc == 1 and any("f.three: missing; f.four: not a case of it" in x
                       for x in nots(out)),
       "manifest: an unknown case of a hashed program fails, named", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - rdma:a.sh: f.three", "ok - rdma:a.sh: f.four"))
    ok(rc == 1 and any("rdma:a.sh: 3 results, but its cases are not those "
                       f"of the manifest's {A_HASH}" in x for x in nots(out)),
       "manifest: without the binary, other case names than the hash fail",
       out)
    rc, out = check(tmp, "debug", GOOD_DEBUG, MANIFEST, *ks)
    ok(rc == 0, "manifest: the expected cases pass, named from -l", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG, MANIFEST.replace(
        A_HASH, names_hash("f.one", "f.two", "f.four")), *ks)
    ok(rc == 1 and any("rdma/a -l lists other cases than the manifest's" in x
                       for x in nots(out)),
       "manifest: a binary whose -l is not the manifest's hash fails", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG +
                    "ok - rdmatool: shows the MR (lkey 9)\n")
    ok(rc == 1 and any("rdmatool: 2 results, the manifest expects 1: "
                       "shows the MR (lkey *): 2 results (shows the MR "
                       "(lkey 7), shows the MR (lkey 9))" in x
                       for x in nots(out)),
       "manifest: a \"*\" case matched twice fails, naming both", out)
    many = "program | all | rdmatool | 10 | -\n" + "".join(
        f"case | rdmatool | c{i}\n" for i in range(10))
    rc, out = check(tmp, "debug", "ok - rdmatool: d1\nok - rdmatool: d2\n",
                    many)
    rc2, tot = tapsum(tmp, out)
    ok(rc == 1 and "and 4 more" in out and "#   c9: missing" in out and
       "#   d2: not a case of it" in out and tot == "2 passed, 1 failed",
       "manifest: past 8 wrong cases, the rest are named on diagnostic "
       "lines, which the plan does not count", out)
    rc, out = check(tmp, "debug", GOOD_DEBUG.replace(
        "ok - kunit:suite: rmmod suite_kunit",
        "not ok - kunit:suite: rmmod suite_kunit: module still loaded "
        "(refcnt 1)"))
    rc2, tot = tapsum(tmp, out)
    ok(rc == 1 and "ok - debug: kunit:suite: 2 results, as the manifest "
       "expects" in out and tot == "11 passed, 1 failed, 2 skipped",
       "manifest: a failed case that says why after its name counts once",
       out)

    again = MANIFEST + "program | debug | rdma:a.sh[X=1] | 3 | rdma/a\n"
    rc, out = check(tmp, "debug", GOOD_DEBUG + "".join(
        f"ok - rdma:a.sh[X=1]: f.{n}\n" for n in ("one", "two", "three")),
                    again, "--select", "rdma:a.sh drivers/dma-buf:m rdma:up.sh")
    ok(rc == 0 and "rdma:a.sh[X=1]: 3 results, as the manifest expects" in out,
       "manifest: a second run (program[VAR=VALUE]) is selected with its "
       "program, and has its cases", out)

    # manifest syntax
    for bad, why in (
            ("program | all | rdma:a.sh | 3\n", "a program line without BINARY"),
            ("program | alll | rdma:a.sh | 3 | -\n", "an unknown guest"),
            ("program | all | rdma:a.sh | three | -\n", "a count that is no number"),
            ("program | all | rdma:a.sh | 0 | -\n", "a count of 0"),
            ("program | all | rdma:a.sh | 3 | -\nprogram | debug | rdma:a.sh | 3 | -\n",
             "a program twice on a guest"),
            ("program | debug | rdma:a.sh | 3 | -\nskip | all | rdma:a.sh | x | - | why\n",
             "a skip on a guest the program does not run on"),
            ("program | all | rdma:a.sh | 3 | -\nskip | all | rdma:a.sh | x | m | -\n",
             "a skip without a reason"),
            ("program | all | rdma:a.sh | 3 | -\nskip | all | rdma:a.sh | x | m\n",
             "a skip line without REASON"),
            ("skipped | all | rdma:a.sh | x | m | why\n", "an unknown line"),
            ("program | all | rdma:a.sh | 3 | -\n",
             "a program of 3 results without case names"),
            ("program | all | rdma:a.sh | 3 | -\ncase | rdma:a.sh | x\n"
             "case | rdma:a.sh | y\n", "3 results but 2 case lines"),
            ("program | all | rdma:a.sh | 1 | -\ncase | rdma:b.sh | x\n",
             "case lines of a program it does not list"),
            ("program | all | rdma:a.sh | 1 | -\ncase | rdma:a.sh | x\n"
             "case | rdma:a.sh | x\n", "a case line twice"),
            (f"program | all | rdma:a.sh | 1 | -\ncase | rdma:a.sh | x\n"
             f"cases | rdma:a.sh | {A_HASH}\n", "case lines and a hash"),
            ("program | all | rdma:a.sh | 3 | -\ncases | rdma:a.sh | abc\n",
             "a hash that is no sha256:<16 hex digits>"),
            ("program | all | rdma:a.sh | 1 | -\ncase | rdma:a.sh | x\n"
             "skip | all | rdma:a.sh | y | - | why\n",
             "a skip of a case it does not name"),
            ("program | all | rdma:a.sh | 2 | -\ncase | rdma:a.sh | x\n"
             "case | rdma:a.sh | y\nskip | all | rdma:a.sh | - | - | why\n",
             "a whole-program skip of a program of 2 results")):
        rc, out = check(tmp, "debug", GOOD_DEBUG, bad)
        ok(rc == 1 and "not ok - manifest:" in out,
           f"manifest: refused: {why}", out)

    # manifest build: installed programs and their -l lists (the fixture
    # is made above, before the checks that name cases from it)
    m = write(os.path.join(tmp, "manifest"), MANIFEST)

    def build():
        rc, out, err = run(os.path.join(S, "manifest.py"), "--manifest", m,
                           "build", kdir)
        return rc, out + err
    rc, out = build()
    ok(rc == 0 and "rdma/a lists 3 cases" in out,
       "manifest build: everything installed, -l lists the cases", out)
    os.rename(os.path.join(kdir, "rdma/a"), os.path.join(kdir, "rdma/a.off"))
    rc, out = build()
    ok(rc == 1 and any("rdma/a is not installed" in x for x in nots(out)),
       "manifest build: a missing test binary fails", out)
    os.rename(os.path.join(kdir, "rdma/a.off"), os.path.join(kdir, "rdma/a"))
    write(os.path.join(kdir, "rdma/a"), "#!/bin/sh\ncat <<'EOF' >&2\n" +
          listing.replace("".ljust(47) + "three\n", "") + "EOF\n")
    rc, out = build()
    ok(rc == 1 and any("lists 2 cases, the manifest expects 3" in x
                       for x in nots(out)),
       "manifest build: a binary with other cases than listed fails", out)
    write(os.path.join(kdir, "rdma/a"), "#!/bin/sh\ncat <<'EOF' >&2\n" +
          listing.replace("three\n", "four\n") + "EOF\n")
    rc, out = build()
    ok(rc == 1 and "rdma/a lists 3 cases, the manifest expects 3" in out and
       any("rdma/a -l names the manifest's cases: other names than the "
           f"manifest's {A_HASH}: `cases | rdma:a.sh | "
           f"{names_hash('f.one', 'f.two', 'f.four')}`" in x
           for x in nots(out)),
       "manifest build: a binary with a case renamed (same count) fails, "
       "giving the new cases line", out)
    write(os.path.join(kdir, "rdma/a"), "#!/bin/sh\ncat <<'EOF' >&2\n" +
          listing + "EOF\n")
    write(os.path.join(kdir, "kselftest-list.txt"), "rdma:a.sh\n")
    rc, out = build()
    ok(rc == 1 and any("rdma:up.sh: installed" in x for x in nots(out)),
       "manifest build: a program missing from kselftest-list.txt fails", out)

    # Regenerating the case names: from the binaries, from a run.
    rc, out, err = run(os.path.join(S, "manifest.py"), "--manifest", m,
                       "cases", kdir)
    ok(rc == 0 and out == f"cases | rdma:a.sh | {A_HASH}\n",
       "manifest cases: the cases lines, from the binaries' -l", out + err)
    rc, out, err = run(os.path.join(S, "manifest.py"), "--manifest", m,
                       "cases", kdir, "rdma:a.sh", "rdmatool")
    ok(rc == 0 and out == "f.one\nf.two\nf.three\nshows the MR (lkey *)\n",
       "manifest cases NAME...: the names, from -l or the case lines",
       out + err)
    raw = write(os.path.join(tmp, "raw"), GOOD_DEBUG.replace(
        "ok - kunit:suite: case_a", "ok - kunit:suite: case_b") +
        "ok - rdma:a.sh[X=1]: f.one\nok - rdma:a.sh[X=1]: f.two\n"
        "ok - rdma:a.sh[X=1]: f.three\n")
    rc, out, err = run(os.path.join(S, "manifest.py"), "--manifest", m,
                       "suggest", "debug", raw)
    want = [f"cases | rdma:a.sh | {A_HASH}",
            "case | drivers/dma-buf:m | x", "case | drivers/dma-buf:m | y",
            "case | kunit:suite | case_b",
            "case | kunit:suite | rmmod suite_kunit",
            "case | rdmatool | shows the MR (lkey *)"]
    lines = out.splitlines()
    ok(rc == 0 and all(x in lines for x in want) and
       not any(x.startswith("case | rdma:up.sh") or "[X=1]" in x and
               x.startswith("case") for x in lines),
       "manifest suggest: case lines (keeping a \"*\"), a hash for a "
       "kselftest_harness program, none for a script or a second run",
       out + err)

    # the README's table
    rd = os.path.join(tmp, "README.md")
    rc, tbl, _ = run(os.path.join(S, "manifest.py"), "--manifest", m, "table")
    ok(rc == 0 and "| `rdma:a.sh` (`rdma/a`) | 3, 1 skip | 3, 2 skips | 3, 2 skips |" in tbl,
       "manifest table: cases and skips per guest", tbl)
    begin = "<!-- manifest table: generated by scripts/manifest.py table; do not edit -->"
    end = "<!-- manifest table: end -->"
    write(rd, f"intro\n{begin}\n{tbl}{end}\nmore\n")

    def readme(*extra):
        rc, out, err = run(os.path.join(S, "manifest.py"), "--manifest", m,
                           "readme", rd, *extra)
        return rc, out + err
    rc, out = readme()
    ok(rc == 0, "manifest readme: the generated table agrees", out)
    write(rd, f"intro\n{begin}\n{tbl.replace('3, 1 skip', '4, 1 skip')}{end}\nmore\n")
    rc, out = readme()
    ok(rc == 1, "manifest readme: a table that says other counts fails", out)
    rc, out = readme("--update")
    rc2, out2 = readme()
    with open(rd) as f:
        text = f.read()
    ok(rc == 0 and rc2 == 0 and text.startswith("intro\n") and
       text.endswith(f"{end}\nmore\n"),
       "manifest readme --update: rewrites only the block", text)
    write(rd, "no block\n")
    rc, out = readme()
    ok(rc == 1, "manifest readme: a README without the block fails", out)

    # scripts/vm/rdma-core-tests.sh's result class, on made-up unittest
    # tests: an expected failure is no pass.
    with open(os.path.join(S, "vm", "rdma-core-tests.sh")) as f:
        script = f.read()
    runner = script.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    src = os.path.join(tmp, "rc-src")
    os.makedirs(os.path.join(src, "tests"))
    write(os.path.join(src, "args_parser.py"),
          "import argparse\nparser = argparse.ArgumentParser()\n"
          "parser.add_argument('--dev')\n")
    write(os.path.join(src, "tests", "__init__.py"), "")
    write(os.path.join(src, "tests", "test_mr.py"), """\
import unittest


class DmaBufMRTest(unittest.TestCase):
    def test_a_pass(self):
        pass

    @unittest.expectedFailure
    def test_b_xfail(self):
        self.assertTrue(False)

    @unittest.skip("no udmabuf")
    def test_c_skip(self):
        pass

    @unittest.expectedFailure
    def test_d_xpass(self):
        pass
""")
    r = subprocess.run([sys.executable, "-", src, "rctest",
                        "test_mr.DmaBufMRTest"], input=runner,
                       capture_output=True, text=True)
    out = r.stdout + r.stderr
    tid = "tests.test_mr.DmaBufMRTest."
    rc2, tot = tapsum(tmp, "1..4\n" + r.stdout)
    ok(f"ok - {tid}test_a_pass\n" in out and
       f"not ok - {tid}test_b_xfail: expected failure: " in out and
       f"ok - {tid}test_c_skip # SKIP no udmabuf\n" in out and
       f"not ok - {tid}test_d_xpass: unexpected success\n" in out and
       tot == "1 passed, 2 failed, 1 skipped",
       "rdma-core-tests.sh: a test marked to fail is not ok, whether it "
       "fails or passes", out)

    # scripts/guest-times.py: time used of each limit.
    otimes = write(os.path.join(tmp, "out.times"), """\
3 guest: rdma-core: pull request (/work/build/rdma-core-pr/obj)
10 # selftests: rdma: fast.sh\r
15 ok 1 selftests: rdma: fast.sh\r
20 # selftests: rdma: slow.sh
40 # # time: revoke window 6000 ms of 10000 ms
171 ok 2 selftests: rdma: slow.sh
171 # selftests: rdma: cap.sh
400 not ok 3 selftests: rdma: cap.sh # TIMEOUT 300 seconds
400 # selftests: rdma: fast.sh[X=1]
450 ok 4 selftests: rdma: fast.sh[X=1]
451 # time: setup 500 ms of 1000 ms
""")

    def gtimes(*extra):
        rc, out, err = run(os.path.join(S, "guest-times.py"), "times",
                           otimes, *extra)
        return rc, out + err
    rc, out = gtimes("--override", "300", "--limit", "rdma:cap.sh=320",
                     "--limit", "rdma:fast.sh=100")
    ok(rc == 0 and out.splitlines() == [
        "rdma:fast.sh 5 s of 100 s",
        "rdma:slow.sh: revoke window 6000 ms of 10000 ms",
        "rdma:slow.sh 151 s of 300 s",
        "rdma:cap.sh 229 s of 300 s",
        "rdma:fast.sh[X=1] 50 s of 100 s",
        "setup 500 ms of 1000 ms"],
       "guest-times: each kselftest's time and limit (-o, a lower limit of "
       "its own, a second run), and the tests' own time lines", out)
    os.makedirs(os.path.join(tmp, "ks-settings", "rdma"))
    write(os.path.join(tmp, "ks-settings", "rdma", "settings"),
          "# comment\ntimeout=200\n")
    rc, out = gtimes("--kselftest-dir", os.path.join(tmp, "ks-settings"))
    ok(rc == 0 and "rdma:slow.sh 151 s of 200 s" in out,
       "guest-times: without -o, the collection's settings file's timeout",
       out)
    rc, out = gtimes()
    ok(rc == 0 and "rdma:slow.sh 151 s of 45 s" in out,
       "guest-times: without either, the runner's 45 s", out)
    td = os.path.join(tmp, "times")
    os.makedirs(td)
    rc, out = gtimes("--override", "300", "--limit", "rdma:fast.sh=100")
    gd = write(os.path.join(td, "guest-debian.times"), out)
    gg = write(os.path.join(td, "guest-debug.times"),
               "rdma:fast.sh 90 s of 100 s\nrdma:only.sh 1 s of 300 s\n")
    rc, out, err = run(os.path.join(S, "guest-times.py"), "warn", gd, gg)
    ok(rc == 0 and out.splitlines() == [
        "warning: guest debian: rdma:slow.sh: revoke window took 6000 ms of "
        "its 10000 ms limit (60%, more than half)",
        "warning: guest debian: rdma:slow.sh took 151 s of its 300 s limit "
        "(50%, more than half)",
        "warning: guest debian: rdma:cap.sh took 229 s of its 300 s limit "
        "(76%, more than half)",
        "warning: guest debug: rdma:fast.sh took 90 s of its 100 s limit "
        "(90%, more than half)"],
       "guest-times warn: more than half a limit, and only that (50 of 100 "
       "and 500 of 1000 ms are not)", out + err)
    rc, out, err = run(os.path.join(S, "guest-times.py"), "table", gd, gg)
    ok(rc == 0 and "| program | debian | debug |" in out and
       "| `rdma:fast.sh` | 5 s of 100 (5%) | **90 s of 100 (90%)** |" in out
       and "| `rdma:only.sh` | - | 1 s of 300 (0%) |" in out,
       "guest-times table: a row per program, a column per guest", out + err)

    # scripts/test.sh and .ci/run, in a copy of the scripts with stand-ins
    # for every step's work, make and scripts/vm.sh (QEMU).
    def standin(name):
        """A copy of the accounting scripts; everything else stands in."""
        root = os.path.join(tmp, name)
        sd = os.path.join(root, "scripts")
        os.makedirs(os.path.join(sd, "vm"))
        os.makedirs(os.path.join(root, ".ci"))
        for f in ("test.sh", "tap-sum.py", "tap-close.py", "manifest.py",
                  "dkms-tap.py", "ktap-flatten.py", "guest-times.py"):
            if os.path.exists(os.path.join(S, f)):
                shutil.copy(os.path.join(S, f), sd)
        shutil.copy(os.path.join(TOP, ".ci", "run"),
                    os.path.join(root, ".ci"))
        passing = "echo 'TAP version 13'; echo 1..1; echo 'ok 1 stand-in'\n"
        for f in ("test-vm-retry.sh", "test-fetch.sh", "test-progress.sh",
                  "test-series.sh", "series-check.sh",
                  "base-check.sh", "oot.sh", "kernel.sh", "lint.sh",
                  "docs.sh", "rdma-core-pr.sh", "iproute2.sh",
                  "bench-smoke.sh", "deps.sh", "requirements.sh",
                  "test-requirements.sh", "test-one-check.sh",
                  "swiotlb-check.sh"):
            write(os.path.join(sd, f), "#!/bin/bash\n" + passing)
        # The debug kernel's build takes FAKE_KERNEL_SECS (the guests
        # wait for it).
        write(os.path.join(sd, "kernel.sh"), "#!/bin/bash\n"
              'sleep "${FAKE_KERNEL_SECS:-0}"\n' + passing)
        for f in ("test-results.py", "test-bench-report.py", "takeable.py"):
            write(os.path.join(sd, f), "import os\nos.system(%r)\n" % passing)
        write(os.path.join(sd, "vm", "run-tests.sh"),
              'cd "$KSELFTEST_DIR" && ./run_kselftest.sh -o 300 "${args[@]}"\n')
        write(os.path.join(sd, "vm.sh"), """#!/bin/bash
# stand-in: the guest's output from $FAKE_GUEST, exit status $FAKE_VM_RC
while getopts k:t:n: o; do [ "$o" = n ] && name=$OPTARG; done
run=$(cd "$(dirname "$0")/.." && pwd)/build/vm/$name
mkdir -p "$run"
cp "$FAKE_GUEST/out.log" "$FAKE_GUEST/out.times" "$run/"
exit "${FAKE_VM_RC:-0}"
""")
        write(os.path.join(sd, "test-manifest.txt"),
              "program | all | rdma:up.sh | 1 | rdma/up.sh\n"
              "program | all | rdmatool | 1 | -\n"
              "case | rdmatool | shows the MR (lkey *)\n")
        bindir = os.path.join(root, "bin")
        os.makedirs(bindir)
        write(os.path.join(bindir, "make"), """#!/bin/bash
# stand-in: make kselftest installs one script; make test does what
# FAKE_MAKE_TEST says and records TEST_VM_STEPS
top=.
while [ $# -gt 0 ]; do
	case $1 in -C) top=$2; shift ;; -*) ;; *) target=$1 ;; esac
	shift
done
case $target in
kselftest)
	k=$top/build/kselftest
	mkdir -p "$k/rdma"
	printf '#!/bin/sh\\n' > "$k/rdma/up.sh"
	printf '#!/bin/sh\\n' > "$k/run_kselftest.sh"
	chmod +x "$k/rdma/up.sh" "$k/run_kselftest.sh"
	echo rdma:up.sh > "$k/kselftest-list.txt" ;;
test)
	echo "${TEST_VM_STEPS-unset}" > "$FAKE_DIR/test-vm-steps"
	eval "$FAKE_MAKE_TEST" ;;
esac
""")
        for f in ("make", ):
            os.chmod(os.path.join(bindir, f), 0o755)
        for f in os.listdir(sd):
            if f.endswith(".sh"):
                os.chmod(os.path.join(sd, f), 0o755)
        os.chmod(os.path.join(sd, "vm", "run-tests.sh"), 0o755)
        os.chmod(os.path.join(root, ".ci", "run"), 0o755)
        rc, tbl, _ = run(os.path.join(sd, "manifest.py"), "table")
        write(os.path.join(root, "README.md"), f"{begin}\n{tbl}{end}\n")
        subprocess.run(["make", "-C", root, "kselftest"], env=dict(
            os.environ, PATH=f"{bindir}:{os.environ['PATH']}"))
        guest = os.path.join(root, "guest")
        os.makedirs(guest)
        return root, guest

    def fake_guest(guest, lines, times="0 # selftests: rdma: up.sh\n"
                   "5 ok 1 selftests: rdma: up.sh\n", rc=0):
        write(os.path.join(guest, "out.log"), "".join(
            x + "\n" for x in lines + [f"REVOKE-VM-EXIT {rc}"]))
        write(os.path.join(guest, "out.times"), times)

    GUEST_OK = ["# selftests: rdma: up.sh", "ok 1 selftests: rdma: up.sh",
                "rdmatool: ok 1 - shows the MR (lkey 7)"]

    def test_sh(root, guest, *steps, env=None, vm_rc=0):
        e = {k: v for k, v in os.environ.items()
             if k not in ("TEST_PREP_STEPS", "TEST_BG_STEPS",
                          "TEST_VM_STEPS", "TEST_OVERLAP", "KSELFTEST_RUN",
                          "KUNIT_SUITES", "KSELFTEST_TARGETS")}
        e.update(PATH=f"{root}/bin:{os.environ['PATH']}", FAKE_GUEST=guest,
                 FAKE_VM_RC=str(vm_rc), **(env or {}))
        r = subprocess.run([os.path.join(root, "scripts", "test.sh"),
                            *steps], env=e, capture_output=True, text=True)
        last = (r.stdout.strip().splitlines() or [""])[-1]
        return r.returncode, last, r.stdout + r.stderr

    def tap_of(root, name):
        try:
            with open(os.path.join(root, "build", "results",
                                   f"{name}.tap")) as f:
                return f.read()
        except OSError:
            return ""

    root, guest = standin("standin")
    fake_guest(guest, GUEST_OK)
    rc, last, out = test_sh(root, guest, env={"FAKE_KERNEL_SECS": "4",
                                              "TEST_HEARTBEAT": "1"})
    ok(rc == 0 and last.endswith(" passed, 0 failed") and
       tap_of(root, "guest-debug-vm").startswith("TAP") and
       not os.path.exists(os.path.join(root, "build", "results",
                                       "steps-not-run.tap")),
       "test.sh (stand-ins): the default run with every step passing passes",
       out)
    ok("\n### waiting for the debug kernel's build, in the background\n" in out
       and re.search(r"\n  \.\.\. the debug kernel's build: \d+ s so far; "
                     r"log: build/results/build-debug\.log\n", out),
       "test.sh (stand-ins): the guests' wait for the background debug "
       "kernel build has a heading and a heartbeat", out)
    rc, last, out = test_sh(root, guest, env={"TEST_VM_STEPS": ""})
    notrun = tap_of(root, "steps-not-run")
    ok(rc == 1 and not last.endswith(" 0 failed") and
       all(f"step {x} did not run" in notrun
           for x in ("guest-debian", "bench", "guest-debug")),
       "test.sh (stand-ins): TEST_VM_STEPS= (no guest) is no pass of the "
       "default run", out)
    rc, last, out = test_sh(root, guest, env={
        "TEST_PREP_STEPS": "", "TEST_BG_STEPS": "", "TEST_VM_STEPS": ""})
    ok(rc == 1 and last != "0 passed, 0 failed" and
       not last.endswith(" 0 failed"),
       "test.sh (stand-ins): every step list empty: no result is no pass",
       out)
    # (The guest-debian step also runs the stand-ins of
    # scripts/test-one-check.sh and scripts/swiotlb-check.sh: two passes
    # more in each total below.)
    fake_guest(guest, GUEST_OK[:2] + [
        "rdmatool: not ok 1 - shows the MR (lkey 7)"], rc=1)
    rc, last, out = test_sh(root, guest, "guest-debian", vm_rc=3)
    ok(rc == 1 and last == "6 passed, 1 failed" and
       tap_of(root, "guest-debian-vm").count("\nok 1 ") == 1,
       "test.sh (stand-ins): a test that fails in the guest counts once, "
       "not again in the run's own result (vm.sh exit 3)", out)
    fake_guest(guest, GUEST_OK, rc=1)
    rc, last, out = test_sh(root, guest, "guest-debian", vm_rc=3)
    ok(rc == 1 and last == "6 passed, 1 failed" and
       "its command exited 1 with no failed result" in
       tap_of(root, "guest-debian-vm"),
       "test.sh (stand-ins): a guest command that fails with no failed "
       "result fails the run's own result", out)
    fake_guest(guest, [], rc=1)
    rc, last, out = test_sh(root, guest, "guest-debian", vm_rc=3)
    ok(rc == 1 and "no result, the manifest expects" in
       tap_of(root, "guest-debian"),
       "test.sh (stand-ins): a guest command that fails before any result "
       "fails (the manifest check)", out)
    fake_guest(guest, GUEST_OK[:2] + [
        "rdmatool: not ok 1 - shows the MR (lkey 7)"], rc=1)
    rc, last, out = test_sh(root, guest, "guest-debian", vm_rc=1)
    ok(rc == 1 and last == "5 passed, 2 failed" and
       tap_of(root, "guest-debian-vm").count("\nnot ok 1 ") == 1,
       "test.sh (stand-ins): a splat, timeout or no boot (vm.sh exit 1) "
       "fails the run's own result too", out)
    fake_guest(guest, GUEST_OK, times="10 # selftests: rdma: up.sh\n"
               "50 # # time: revoke window 6000 ms of 10000 ms\n"
               "200 ok 1 selftests: rdma: up.sh\n")
    rc, last, out = test_sh(root, guest, "guest-debian", "guest-debug")
    md = os.path.join(root, "build", "results", "times.md")
    ok(rc == 0 and "warning: guest debian: rdma:up.sh took 190 s of its "
       "300 s limit (63%, more than half)" in out and
       "warning: guest debug: rdma:up.sh: revoke window took 6000 ms of "
       "its 10000 ms limit" in out and os.path.exists(md) and
       "| program | debian | debug |" in open(md).read(),
       "test.sh (stand-ins): a program over half its limit is a warning, "
       "not a failure; times.md has each guest's times", out)

    def ci(env=None, make_test=""):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("TEST_")}
        e.update(PATH=f"{root}/bin:{os.environ['PATH']}", FAKE_DIR=tmp,
                 FAKE_MAKE_TEST=make_test, **(env or {}))
        r = subprocess.run([os.path.join(root, ".ci", "run")], env=e,
                           capture_output=True, text=True)
        last = (r.stdout.strip().splitlines() or [""])[-1]
        return r.returncode, last, r.stdout + r.stderr
    res = os.path.join(root, "build", "results")
    write(os.path.join(res, "old.tap"), "TAP version 13\n1..1\nok 1 old\n")
    rc, last, out = ci(make_test="echo 'make: *** [tree] Error 2'; exit 2")
    ok(rc != 0 and last == "0 passed, 1 failed",
       ".ci/run (stand-ins): make test stopping before scripts/test.sh "
       "sums no earlier run's TAP files", out)
    rc, last, out = ci(env={"TEST_VM_STEPS": "", "TEST_BG_STEPS": ""},
                       make_test=f"cp {os.path.join(tmp, 'e1.tap')} "
                       f"{res}/ && printf 'TAP version 13\\n1..1\\nok 1 x\\n'"
                       f" > {res}/x.tap")
    with open(os.path.join(tmp, "test-vm-steps")) as f:
        seen = f.read().strip()
    ok(seen == "unset" and rc == 1 and last == "1 passed, 1 failed",
       ".ci/run (stand-ins): unsets TEST_*_STEPS; a TAP file without "
       "results fails", out)

    # the real manifest
    rc, out, err = run(os.path.join(S, "manifest.py"), "table")
    ok(rc == 0 and "| **all** |" in out, "scripts/test-manifest.txt loads",
       out + err)

# tap-sum.py reads a directive into a name with " #" in it.
bad = [name for _, name, _ in results if re.search(r"(^|\s)#", name)]
ok(not bad, "test-results.py: no test name holds a TAP directive",
   "\n".join(bad))
print("TAP version 13")
print(f"1..{len(results)}")
n_fail = 0
for i, (good, name, detail) in enumerate(results, 1):
    print(f"{'ok' if good else 'not ok'} {i} {name}")
    if not good:
        n_fail += 1
        for line in str(detail).splitlines()[:30]:
            print(f"# {line}")
sys.exit(1 if n_fail else 0)
