#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check the mails `scripts/mail.py write` wrote (b4's dry-run output).

For each series of patches/mail-series, from the .eml files alone: one mail
per commit (plus the cover letter for more than one), subjects
"[PATCH <prefix> n/m] <commit subject>" with the commit subject at most 75
characters, From and the last Signed-off-by the sender, the commit's other
trailers kept (rdma-rc: Fixes: and Cc: stable), To/Cc present, mailable and
covering what get_maintainer.pl --nogit names for each patch,
base-commit/change-id (and prerequisite-patch-id for a series with
dependencies), no invented identity anywhere; then `git am` of the mails of
its dependencies and its own, in order, onto the base gives exactly the tree
of the same commits taken from build/linux, and all series in sending order
give build/linux's HEAD tree; checkpatch.pl --strict on each patch mail.
Every Fixes: line must be a line of patches/fixes.txt (ids and subjects
checked against the kernel's history): build/linux has no upstream history,
so checkpatch runs with --ignore UNKNOWN_COMMIT_ID.
Then negative controls: the same checks must
fail on a series with a mail missing, on a mail with an invented From, on
mails whose To: lost the maintainers, on
a Fixes: id that is not in patches/fixes.txt, and checkpatch on a
duplicate Signed-off-by;
`mail.py check` must name a subject that is not in the stack, a commit in no
series, a series that is not contiguous and one that does not apply on its
dependencies, and `mail.py write` must refuse to run with no identity or an
invented one and to run b4 send in any other form than to a directory.
Prints TAP.

usage: test-mail.py [--out DIR] [--tree T] [--defs F] [--no-negative]
                    [--no-checkpatch]
"""

import argparse
import copy
import email
import email.policy
import email.utils
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mail  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
n = 0
failed = 0


def tap(ok, what, detail=""):
    global n, failed
    n += 1
    if not ok:
        failed += 1
    print(f"{'ok' if ok else 'not ok'} {n} {what}")
    if detail and not ok:
        for line in str(detail).rstrip().splitlines()[:30]:
            print(f"# {line}")
    sys.stdout.flush()


def run(cmd, **kw):
    return subprocess.run(cmd, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, **kw)


def git(repo, *args, **kw):
    r = run(["git", "-C", repo, *args], **kw)
    if r.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def read_mail(path):
    with open(path, "rb") as f:
        return email.message_from_binary_file(f, policy=email.policy.default)


def unfold(v):
    return re.sub(r"\s*\n\s*", " ", str(v)).strip()


def addrs(msg, *hdrs):
    out = []
    for h in hdrs:
        for v in msg.get_all(h, []):
            out += email.utils.getaddresses([str(v)])
    return out


def trailers(text):
    """The trailer block of a commit message (last paragraph)."""
    paras = text.strip().split("\n\n")
    return [line for line in paras[-1].splitlines()
            if re.match(r"[A-Za-z-]+: ", line)]


def expected_subject(s, i, total, subj):
    words = ["PATCH"] + s["prefix"]
    if s["revision"] > 1:
        words.append(f"v{s['revision']}")
    if total > 1:
        words.append(f"{i:0{len(str(total))}d}/{total}")
    return f"[{' '.join(words)}] {subj}"


def cover_subject(s):
    with open(os.path.join(TOP, s["cover"]) if "cover" in s else "") as f:
        return f.readline().strip()


def series_mails(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".eml"))


def check_series(s, out, ident, base, tree, defs_by_name):
    """Everything that can be read from one series' mails. Returns a list
    of problems (empty: fine)."""
    bad = []
    d = os.path.join(out, s["name"])
    if not os.path.isdir(d):
        return [f"no directory {d}"]
    files = series_mails(d)
    total = len(s["commits"])
    want = total + (1 if total > 1 else 0)
    if len(files) != want:
        bad.append(f"{len(files)} mails, want {want} ({total} patches"
                   f"{' + cover' if total > 1 else ''}): {files}")
    msgs = {f: read_mail(os.path.join(d, f)) for f in files}
    patches = [f for f in files if not f.startswith("0000-")]
    me = f"{ident[0]} <{ident[1]}>"
    for f, m in msgs.items():
        frm = email.utils.parseaddr(str(m["From"]))
        if frm != (ident[0], ident[1]):
            bad.append(f"{f}: From {m['From']}, want {me}")
        for name, a in addrs(m, "To", "Cc"):
            if mail.invented(a) and a != ident[1]:
                bad.append(f"{f}: recipient {a} cannot be mailed")
        for a in mail.mail_addresses(os.path.join(d, f)):
            if mail.invented(a) and a != ident[1]:
                bad.append(f"{f}: names the invented address {a}")
        if not addrs(m, "To"):
            bad.append(f"{f}: no To:")
    if total > 1:
        c = msgs.get(files[0]) if files and files[0].startswith("0000-") \
            else None
        if c is None:
            bad.append("no cover letter (0000-*.eml)")
        else:
            want_s = expected_subject(s, 0, total, s["cover_subject"])
            if unfold(c["Subject"]) != want_s:
                bad.append(f"cover subject {unfold(c['Subject'])!r}, want "
                           f"{want_s!r}")
    for i, c in enumerate(s["commits"], 1):
        subj = s["subjects"][i - 1]
        if len(subj) > 75:
            bad.append(f"commit subject longer than 75 characters "
                       f"({len(subj)}): {subj!r}")
        want_s = expected_subject(s, i, total, subj)
        hits = [f for f in patches if unfold(msgs[f]["Subject"]) == want_s]
        if len(hits) != 1:
            bad.append(f"no mail (or more than one) with subject {want_s!r}")
            continue
        m = msgs[hits[0]]
        body = m.get_body(("plain",)).get_content() if m.is_multipart() \
            else m.get_content()
        msgtext = body.split("\n---\n", 1)[0]
        got = trailers(msgtext)
        orig = trailers(git(tree, "log", "-1", "--format=%B", c))
        want_t = [t for t in orig if not t.lower().startswith(
            "signed-off-by:")]
        # The sender's decision (mail.py assisted_by()), on every patch
        if ident[3]:
            want_t.append(f"Assisted-by: {ident[3]}")
        have_t = [t for t in got if not t.lower().startswith(
            "signed-off-by:")]
        if have_t != want_t:
            bad.append(f"{hits[0]}: trailers {have_t}, want {want_t}")
        sob = [t for t in got if t.lower().startswith("signed-off-by:")]
        if not sob or sob[-1] != f"Signed-off-by: {me}":
            bad.append(f"{hits[0]}: last Signed-off-by {sob[-1:]}, want "
                       f"the sender's")
        if "rdma-rc" in s["prefix"]:
            if not any(t.startswith("Fixes: ") for t in got):
                bad.append(f"{hits[0]}: rdma-rc fix without Fixes:")
            if "Cc: stable@vger.kernel.org" not in got:
                bad.append(f"{hits[0]}: rdma-rc fix without "
                           "Cc: stable@vger.kernel.org")
    # The mail that carries base-commit: the cover, or the one patch.
    meta = files[0] if files else None
    if meta:
        text = open(os.path.join(d, meta)).read()
        bc = re.findall(r"(?m)^base-commit: (\S+)$", text)
        pre = re.findall(r"(?m)^prerequisite-patch-id: (\S+)$", text)
        cid = re.findall(r"(?m)^change-id: (\S+)$", text)
        if bc != [base]:
            bad.append(f"{meta}: base-commit {bc}, want [{base}]")
        want_pre = sum(len(defs_by_name[x]["commits"])
                       for x in s["closure"])
        if len(pre) != want_pre:
            bad.append(f"{meta}: {len(pre)} prerequisite-patch-id, want "
                       f"{want_pre}")
        if len(cid) != 1 or (s["change-id"] and cid != [s["change-id"]]):
            bad.append(f"{meta}: change-id {cid}, want one"
                       + (f" = {s['change-id']}" if s["change-id"] else ""))
        if s["closure"] and "Applies on top of:" not in text:
            bad.append(f"{meta}: does not name the series it depends on")
        to_cc = {a for _, a in addrs(msgs[meta], "To", "Cc")}
        for x in s["to"] + s["cc"]:
            if email.utils.parseaddr(x)[1] not in to_cc:
                bad.append(f"{meta}: {x} (patches/mail-series) not in To/Cc")
    return bad


class Am:
    """A work tree where mails are applied with git am."""

    def __init__(self, tree, dirpath):
        self.tree, self.dir = tree, dirpath
        if not os.path.isdir(os.path.join(dirpath, ".git")):
            shutil.rmtree(dirpath, ignore_errors=True)
            os.makedirs(os.path.dirname(dirpath), exist_ok=True)
            git(tree, "clone", "-q", "--shared", "--no-checkout", tree,
                dirpath)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("GIT_")}
        self.env.update({"GIT_CONFIG_NOSYSTEM": "1", "HOME": dirpath + ".home",
                         "GIT_COMMITTER_NAME": "am",
                         "GIT_COMMITTER_EMAIL": "am@localhost"})
        os.makedirs(self.env["HOME"], exist_ok=True)

    def reset(self, commit):
        run(["git", "-C", self.dir, "am", "--abort"], env=self.env)
        git(self.dir, "checkout", "-q", "-f", "--detach", commit,
            env=self.env)
        git(self.dir, "clean", "-q", "-fdx", env=self.env)

    def am(self, paths):
        if not paths:
            return True, ""
        r = run(["git", "-C", self.dir, "am", "-q", "--whitespace=error-all",
                 *paths], env=self.env)
        return r.returncode == 0, r.stderr + r.stdout

    def tree_id(self):
        return git(self.dir, "rev-parse", "HEAD^{tree}", env=self.env).strip()


def patch_paths(out, name):
    d = os.path.join(out, name)
    return [os.path.join(d, f) for f in series_mails(d)
            if not f.startswith("0000-")]


def expected_tree(tree, base, commits, stack, idx):
    """The tree of base + these stack commits, from build/linux: the
    commit's own tree when they are a prefix of the stack, else applied
    one by one in a scratch index."""
    pos = sorted(idx[c] for c in commits)
    if pos == list(range(len(pos))):
        return git(tree, "rev-parse", f"{stack[pos[-1]][0]}^{{tree}}").strip()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        git(tree, "read-tree", base, env=env)
        for p in pos:
            c = stack[p][0]
            diff = git(tree, "diff", "--binary", "--full-index", f"{c}^", c)
            r = run(["git", "-C", tree, "apply", "--cached"], input=diff,
                    env=env)
            if r.returncode:
                raise RuntimeError(f"{stack[p][1]!r} does not apply: "
                                   f"{r.stderr.strip()}")
        return git(tree, "write-tree", env=env).strip()


def am_check(am, out, s, defs, base, tree, stack, idx):
    """git am of the dependencies' and the series' own mails on the base;
    (ok, detail)."""
    names = {x["name"]: x for x in defs}
    order = [x["name"] for x in defs if x["name"] in s["closure"]]
    am.reset(base)
    for name in order + [s["name"]]:
        ok, log = am.am(patch_paths(out, name))
        if not ok:
            return False, f"git am of {name} failed:\n{log}"
    commits = [c for name in order + [s["name"]]
               for c in names[name]["commits"]]
    want = expected_tree(tree, base, commits, stack, idx)
    got = am.tree_id()
    if got != want:
        return False, (f"tree {got} after git am of "
                       f"{' '.join(order + [s['name']])}, want {want}")
    return True, ""


def maintainers_missing(am, out, name):
    d = os.path.join(out, name)
    files = series_mails(d)
    have = set()
    for f in files:
        have |= {x[1] for x in addrs(read_mail(os.path.join(d, f)),
                                      "To", "Cc")}
    miss = []
    for f in files:
        if f.startswith("0000-"):
            continue
        r = run([os.path.join(am.dir, "scripts", "get_maintainer.pl"),
                 "--nogit", "--nogit-fallback", "--nogit-chief-penguins",
                 "--norolestats", os.path.join(d, f)], cwd=am.dir)
        if r.returncode:
            miss.append(f"{f}: get_maintainer.pl failed: {r.stderr[-300:]}")
        for _, addr in email.utils.getaddresses(r.stdout.splitlines()):
            if addr and addr not in have:
                miss.append(f"{f}: {addr}")
    return miss


def checkpatch(tree, out, name):
    """checkpatch.pl --strict on each patch mail of a series; problems."""
    d = os.path.join(out, name)
    bad = []
    for f in series_mails(d):
        if f.startswith("0000-"):
            continue
        path = os.path.join(d, f)
        text = open(path, errors="replace").read()
        # checkpatch asks "does MAINTAINERS need updating?" for every
        # added file; answered when an existing entry covers each of them.
        ignore = []
        added = re.findall(r"(?m)^--- /dev/null\n\+\+\+ b/(\S+)$", text)
        if added and "\n+++ b/MAINTAINERS\n" not in text:
            ignore = ["--ignore=FILE_PATH_CHANGES"]
            for a in added:
                r = run(["./scripts/get_maintainer.pl", "--no-git",
                         "--no-git-fallback", "--nol", "--nor", "-f", a],
                        cwd=tree)
                if not [x for x in r.stdout.splitlines()
                        if "THE REST" not in x and x.strip()]:
                    ignore = []
        # build/linux is made from Debian's source tarball and has no
        # upstream history, so checkpatch cannot look up the ids of Fixes:
        # tags (UNKNOWN_COMMIT_ID); fixes_problems() checks them against
        # patches/fixes.txt instead. The format of the tag is still
        # checkpatch's (GIT_COMMIT_ID, BAD_FIXES_TAG).
        ignore.append("--ignore=UNKNOWN_COMMIT_ID")
        # /usr/bin first: spdxcheck.py needs python3-ply, which only the
        # distribution python has.
        env = dict(os.environ, PATH="/usr/bin:" + os.environ["PATH"])
        r = run(["./scripts/checkpatch.pl", "--strict", *ignore, path],
                cwd=tree, env=env)
        if r.returncode:
            bad.append(f"{f}:\n{r.stdout.strip()[-1500:]}")
    return bad


def read_fixes(path):
    """The Fixes: lines of patches/fixes.txt: upstream ids and subjects
    checked against the kernel's history."""
    with open(path) as f:
        return {line.rstrip("\n") for line in f
                if line.startswith("Fixes: ")}


def fixes_problems(out, names, fixes):
    """(number of Fixes: lines in the patch mails, those not in
    patches/fixes.txt)."""
    count, bad = 0, []
    for name in names:
        for path in patch_paths(out, name):
            m = read_mail(path)
            body = m.get_body(("plain",)).get_content() \
                if m.is_multipart() else m.get_content()
            for line in body.split("\n---\n", 1)[0].splitlines():
                if line.startswith("Fixes:"):
                    count += 1
                    if line not in fixes:
                        bad.append(f"{name}/{os.path.basename(path)}: "
                                   f"{line}")
    return count, bad


def mailpy(*args, env=None):
    return run([sys.executable, os.path.join(TOP, "scripts", "mail.py"),
                *args], env=env)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(TOP, "build", "series"))
    p.add_argument("--tree", default=os.path.join(TOP, "build", "linux"))
    p.add_argument("--defs",
                   default=os.path.join(TOP, "patches", "mail-series"))
    p.add_argument("--fixes",
                   default=os.path.join(TOP, "patches", "fixes.txt"))
    p.add_argument("--no-negative", action="store_true")
    p.add_argument("--no-checkpatch", action="store_true")
    a = p.parse_args()
    for k in ("out", "tree", "defs", "fixes"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    print("TAP version 13")
    sys.stdout.flush()

    r = mailpy("list", "--tree", a.tree, "--defs", a.defs)
    if r.returncode:
        tap(False, "patches/mail-series splits the stack", r.stderr)
        print(f"1..{n}")
        return 1
    defs = json.loads(r.stdout)
    for s in defs:
        s["cover_subject"] = cover_subject(
            {"cover": s["cover"]}) if s.get("cover") else ""
    by = {s["name"]: s for s in defs}
    with open(os.path.join(a.out, "series.json")) as f:
        made = json.load(f)
    ident = email.utils.parseaddr(made["sender"])
    ident = (ident[0], ident[1], made["test-identity"],
             made.get("assisted-by"))
    base = git(a.tree, "rev-parse", f"{mail.BASE_TAG}^{{commit}}").strip()
    stack = mail.read_stack(a.tree)
    idx = {c: i for i, (c, _) in enumerate(stack)}
    tap(made["base"] == base and [x["name"] for x in made["series"]]
        == [s["name"] for s in defs],
        f"{a.out} holds the {len(defs)} series of the split, in order",
        f"made {[x['name'] for x in made['series']]}, base {made['base']}")
    # The identity the mails were made with may never be mailed only when
    # it is the test identity; a sender's must be mailable.
    tap(mail.invented(ident[1]) == ident[2],
        f"the sender {ident[0]} <{ident[1]}> is "
        f"{'the test identity' if ident[2] else 'a mailable address'}")

    am = Am(a.tree, os.path.join(TOP, "build", "test-mail", "am"))
    for s in defs:
        bad = check_series(s, a.out, ident, base, a.tree, by)
        tap(not bad, f"{s['name']}: {len(s['commits'])} mails: subjects, "
            "From, trailers, To/Cc, base-commit, no invented identity",
            "\n".join(bad))
        ok, detail = am_check(am, a.out, s, defs, base, a.tree, stack, idx)
        deps = " + ".join(s["closure"]) or "nothing"
        tap(ok, f"{s['name']}: git am onto the base + {deps} gives the "
            "tree of those commits of build/linux", detail)
        # In that tree, as b4 saw it: what get_maintainer.pl names for
        # each patch is in the series' To/Cc.
        miss = maintainers_missing(am, a.out, s["name"]) if ok else ["-"]
        tap(not miss, f"{s['name']}: To/Cc hold everyone get_maintainer.pl "
            "--nogit names for its patches", "\n".join(miss))
        if not a.no_checkpatch:
            bad = checkpatch(a.tree, a.out, s["name"])
            tap(not bad, f"{s['name']}: checkpatch.pl --strict on each "
                "patch mail", "\n".join(bad))
    # checkpatch cannot check the ids of Fixes: tags here (no upstream
    # history): each must be a line of patches/fixes.txt.
    fixes = read_fixes(a.fixes)
    nfix, bad = fixes_problems(a.out, [s["name"] for s in defs], fixes)
    tap(nfix > 0 and not bad, f"all {nfix} Fixes: lines of the mails are "
        f"in {os.path.relpath(a.fixes, TOP)} (ids and subjects checked "
        "against the kernel's history)",
        "\n".join(bad) if bad else "no Fixes: line at all")
    # Every series in sending order gives build/linux's HEAD.
    am.reset(base)
    allok = True
    for s in defs:
        ok, log = am.am(patch_paths(a.out, s["name"]))
        allok = allok and ok
    want = git(a.tree, "rev-parse", "HEAD^{tree}").strip()
    got = am.tree_id()
    tap(allok and got == want, "git am of every series in sending order "
        "gives build/linux's HEAD tree", f"am ok={allok} tree {got}, want "
        f"{want}")
    if not a.no_negative:
        negative(a, defs, by, ident, base, stack, idx, am)
    print(f"1..{n}")
    return 1 if failed else 0


def negative(a, defs, by, ident, base, stack, idx, am):
    """The checks above must be able to fail."""
    scratch = os.path.join(TOP, "build", "test-mail", "negative")
    shutil.rmtree(scratch, ignore_errors=True)
    # A series whose mails miss a patch.
    s = next((x for x in defs if len(x["commits"]) > 1), None)
    if s:
        out = os.path.join(scratch, "missing")
        shutil.copytree(a.out, out)
        victim = patch_paths(out, s["name"])[-1]
        os.unlink(victim)
        bad = check_series(s, out, ident, base, a.tree, by)
        ok, _ = am_check(am, out, s, defs, base, a.tree, stack, idx)
        tap(bad and not ok, f"negative: {s['name']} without "
            f"{os.path.basename(victim)} fails the mail and git am checks",
            f"problems found: {bad}; am ok={ok}")
    # A Fixes: id that is not in patches/fixes.txt: checkpatch, which
    # cannot look ids up here, lets it pass, the fixes.txt check does not;
    # one of the wrong form (11 digits) fails both.
    fixes = read_fixes(a.fixes)
    s = next((x for x in defs if any(
        "\nFixes: " in open(p).read() for p in patch_paths(a.out, x["name"]))),
        None)
    if s:
        for what, new_id, cp_fails in (
                ("an unknown id", "0123456789ab", False),
                ("an 11-digit id", "0123456789a", True)):
            # (cp_fails True: checkpatch's verdict is not asserted)
            out = os.path.join(scratch, "fixes-" + new_id)
            shutil.copytree(a.out, out)
            victim = next(p for p in patch_paths(out, s["name"])
                          if "\nFixes: " in open(p).read())
            with open(victim) as f:
                text = f.read()
            with open(victim, "w") as f:
                f.write(re.sub(r"(?m)^Fixes: [0-9a-f]+ ",
                               f"Fixes: {new_id} ", text, count=1))
            _, bad = fixes_problems(out, [s["name"]], fixes)
            cp = checkpatch(a.tree, out, s["name"]) \
                if not a.no_checkpatch else ["skipped"]
            # checkpatch's verdict is part of the first case only: it
            # shows why the list is needed. With UNKNOWN_COMMIT_ID
            # ignored, checkpatch 7.3 lets the short id pass too.
            tap(bool(bad) and (cp_fails or not cp),
                f"negative: a Fixes: tag with {what} in {s['name']} fails "
                "the fixes.txt check"
                + ("" if cp_fails else
                   " (checkpatch, which cannot look ids up here, passes)"),
                f"fixes.txt problems: {bad}; checkpatch: {cp}")
    # A checkpatch problem in a mail is still caught with UNKNOWN_COMMIT_ID
    # ignored: a second Signed-off-by of the sender.
    if not a.no_checkpatch:
        s = defs[0]
        out = os.path.join(scratch, "checkpatch")
        shutil.copytree(a.out, out)
        victim = patch_paths(out, s["name"])[0]
        me = f"Signed-off-by: {ident[0]} <{ident[1]}>"
        with open(victim) as f:
            text = f.read()
        with open(victim, "w") as f:
            f.write(text.replace(me + "\n", me + "\n" + me + "\n", 1))
        cp = checkpatch(a.tree, out, s["name"])
        tap(any("DUPLICATE_SIGN_OFF" in x or "Duplicate signature" in x
                for x in cp),
            f"negative: checkpatch --strict catches a duplicate "
            f"Signed-off-by in {s['name']}", f"checkpatch: {cp}")
    # Mails whose To: lost the maintainers get_maintainer.pl names.
    s = defs[0]
    out = os.path.join(scratch, "to")
    shutil.copytree(a.out, out)
    for path in [os.path.join(out, s["name"], f)
                 for f in series_mails(os.path.join(out, s["name"]))]:
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(re.sub(r"(?m)^To: .*(?:\n[ \t].*)*",
                           "To: linux-rdma@vger.kernel.org", text, count=1))
    miss = maintainers_missing(am, out, s["name"])
    tap(bool(miss), f"negative: {s['name']} with only linux-rdma in To: "
        "misses maintainers get_maintainer.pl names", "nothing missing")
    # A mail that carries the placeholder identity.
    s = defs[0]
    out = os.path.join(scratch, "invented")
    shutil.copytree(a.out, out)
    victim = patch_paths(out, s["name"])[0]
    with open(victim) as f:
        text = f.read()
    with open(victim, "w") as f:
        f.write(re.sub(r"(?m)^From: .*$",
                       "From: Revoke Team <revoke@example.org>", text,
                       count=1))
    bad = check_series(s, out, ident, base, a.tree, by)
    tap(any("revoke@example.org" in b for b in bad),
        f"negative: a mail of {s['name']} from revoke@example.org is caught",
        f"problems found: {bad}")
    # The split's checks, each on a copy of the definitions.
    with open(a.defs) as f:
        text = f.read()
    first = defs[0]["subjects"][0]
    cases = [
        ("a subject that is not in the stack",
         text.replace(f"patch: {first}\n",
                      f"patch: {first}\npatch: RDMA/foo: No such commit\n"),
         "'RDMA/foo: No such commit' is not in the stack"),
        ("a commit in no series",
         text.replace(f"patch: {first}\n", "", 1),
         f"{first!r} belongs to no series"),
    ]
    multi = [x for x in defs if len(x["commits"]) > 1]
    if multi and len(defs) > 1:
        # Move a series' last patch into the first series: neither is a
        # contiguous range any more (unless they are neighbours).
        s = multi[-1]
        last = s["subjects"][-1]
        t = text.replace(f"patch: {last}\n", "")
        t = t.replace(f"patch: {first}\n", f"patch: {first}\npatch: {last}\n")
        cases.append(("a series that is not contiguous", t,
                      "is not contiguous"))
    dep = next((x for x in defs if x["depends"]), None)
    if dep:
        t = re.sub(rf"(?m)^(\[{re.escape(dep['name'])}\](?:\n(?!\[).*)*?"
                   r"\ndepends:)[^\n]*", r"\1", text)
        cases.append((f"{dep['name']} without the series it depends on", t,
                      "does not apply"))
    for what, t, expect in cases:
        path = os.path.join(scratch, "mail-series")
        os.makedirs(scratch, exist_ok=True)
        with open(path, "w") as f:
            f.write(t)
        r = mailpy("check", "--tree", a.tree, "--defs", path)
        tap(r.returncode != 0 and expect in r.stderr,
            f"negative: mail.py check refuses {what}",
            f"exit {r.returncode}, want a message with {expect!r}:\n"
            + r.stderr[-1500:])
    # Identities: none, the placeholder, a no-reply address; a test identity
    # that could be mailed.
    home = os.path.join(scratch, "home")
    os.makedirs(home, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith("GIT_") and k != "MAIL_TEST_IDENTITY"}
    base_env.update(HOME=home, XDG_CONFIG_HOME=home, GIT_CONFIG_NOSYSTEM="1")
    repo = os.path.join(scratch, "repo")
    git(TOP, "init", "-q", repo)
    for what, cfg, test, expect in [
            ("no identity", {}, None, "no sender identity"),
            ("the placeholder identity",
             {"user.name": "Revoke Team", "user.email": "revoke@example.org"},
             None, "not a mailable address"),
            ("a no-reply address",
             {"user.name": "A Sender",
              "user.email": "sender@users.noreply.github.com"},
             None, "not a mailable address"),
            ("a test identity that could be mailed", {},
             "A Sender <sender@kernel.org>", "can never be mailed"),
            ("a sender who has not decided the Assisted-by: trailer",
             {"user.name": "A Sender", "user.email": "sender@kernel.org"},
             None, "has not decided the Assisted-by: trailer"),
            ("an Assisted-by: value that is a whole trailer",
             {"user.name": "A Sender", "user.email": "sender@kernel.org",
              "revoke.assistedBy": "Assisted-by: LLM"},
             None, "want the trailer's value")]:
        env = dict(base_env)
        env.pop("MAIL_TEST_ASSISTED_BY", None)
        env["GIT_CONFIG_COUNT"] = str(len(cfg))
        for i, (k, v) in enumerate(cfg.items()):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
        if test:
            env["MAIL_TEST_IDENTITY"] = test
        out = os.path.join(scratch, "out")
        r = mailpy("write", "--repo", repo, "--tree", a.tree, "--defs",
                   a.defs, "--out", out, env=env)
        tap(r.returncode != 0 and expect in r.stderr
            and not os.path.exists(out),
            f"negative: make series refuses {what}",
            f"exit {r.returncode}, out exists: {os.path.exists(out)}\n"
            + r.stderr[-800:])
    # b4 send other than to a directory.
    refused = []
    for args in (["send"], ["send", "--dry-run"], ["send", "--reflect"],
                 ["send", "--output-dir", "x"], ["am"]):
        try:
            mail.Work.b4(None, *args)
        except SystemExit as e:
            refused.append(e.code != 0)
        except Exception:  # noqa: BLE001 (got past the guard)
            refused.append(False)
    tap(all(refused) and len(refused) == 5,
        "negative: mail.py runs b4 send only as --output-dir DIR --no-sign",
        f"refused: {refused}")
    # And no script of ours calls b4 send another way.
    calls = []
    pats = (r"^[^#]*\bb4\s+send\b", r"b4\(\s*[\"']send",
            r"[\"']b4[\"'].*[\"']send[\"']")
    files = [os.path.join("scripts", f) for f in os.listdir(
        os.path.join(TOP, "scripts"))] + ["Makefile"]
    for rel in sorted(files):
        path = os.path.join(TOP, rel)
        if not os.path.isfile(path) or rel.endswith("test-mail.py"):
            continue
        for i, line in enumerate(open(path, errors="replace"), 1):
            if any(re.search(p, line) for p in pats) and \
                    "--output-dir" not in line:
                calls.append(f"{rel}:{i}: {line.strip()}")
    tap(not calls, "no script of ours runs `b4 send` without --output-dir",
        "\n".join(calls))

if __name__ == "__main__":
    sys.exit(main())
