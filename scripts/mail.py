#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The mail series: patches/mail-series checked against the stack, and b4.

The stack is build/linux's commits v7.3-base..series. patches/mail-series
splits it into the series that go to different maintainers (README, "How to
send"). `check` proves the split is sound: every listed subject is in the
stack, every commit of the stack is in exactly one series, each series is a
contiguous range, and each applies on the base plus the series it depends
on. `write` then makes the mails with b4, one directory per series:

  * a b4 work repository, build/mail/linux (a --shared clone of the tree), so
    that b4's branches and its git-filter-repo runs never touch build/linux;
  * per series, a branch mail/base/<name> (the base plus its dependencies),
    then `b4 prep -n <name>` on it, the cover letter through
    `b4 prep --edit-cover`, `--set-prefixes`, `--force-revision`, the
    series' commits, `b4 prep --auto-to-cc` (get_maintainer.pl --nogit);
  * `b4 send --output-dir build/series/<name> --no-sign`, which writes the
    mails to files and cannot send (b4 turns -o into a dry run).

Every commit is re-made with the sender's identity (git config user.name and
user.email, or MAIL_TEST_IDENTITY for tests) in place of the placeholder
Signed-off-by, and as author unless someone else (a real address) wrote it. Invented identities (example.org, .example,
localhost, noreply, ...) are refused, except MAIL_TEST_IDENTITY, which must
be one.

Nothing here sends mail: b4 is only ever run as `prep` or as `send` with
--output-dir, and with sendemail.smtpserver=/bin/false and no web endpoint
in its configuration on top of that.

usage: mail.py check [--tree T] [--defs F]
       mail.py write [--tree T] [--defs F] [--out DIR]
       mail.py list  [--tree T] [--defs F]   (name, depends, commits: JSON)
"""

import argparse
import email.policy
import email.utils
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BASE_TAG = "v7.3-base"
KEYS = {"prefix", "depends", "to", "cc", "cover", "change-id", "revision",
        "patch"}
MULTI = {"to", "cc", "patch"}
# The trailer b4 prep's cover commit carries its tracking JSON under.
B4_MAGIC = "--- b4-submit-tracking ---"
RESERVED_DOMAINS = ("example.org", "example.com", "example.net")
RESERVED_TLDS = (".example", ".test", ".invalid", ".localhost", ".local",
                 ".localdomain", ".internal", ".lan", ".home.arpa")


def die(msg):
    print(f"mail: {msg}", file=sys.stderr)
    sys.exit(1)


def note(msg):
    print(f"mail: {msg}", file=sys.stderr)


def run(cmd, cwd=None, env=None, input=None, check=True):
    r = subprocess.run(cmd, cwd=cwd, env=env, input=input, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and r.returncode:
        die(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr.strip()}")
    return r


def git(repo, *args, env=None, input=None, check=True):
    return run(["git", "-C", repo, *args], env=env, input=input,
               check=check).stdout


# ---- patches/mail-series ---------------------------------------------------

class Series:
    def __init__(self, name, line):
        self.name, self.line = name, line
        self.prefix, self.depends, self.to, self.cc = [], [], [], []
        self.cover, self.change_id, self.revision = None, None, 1
        self.subjects, self.commits = [], []


def read_defs(path):
    """The stanzas of patches/mail-series, in file order."""
    series, cur, errors = [], None, []
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            where = f"{path}:{n}"
            m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line.strip())
            if m:
                cur = Series(m.group(1), where)
                if any(s.name == cur.name for s in series):
                    errors.append(f"{where}: series {cur.name} defined twice")
                series.append(cur)
                continue
            key, sep, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if not sep or key not in KEYS:
                errors.append(f"{where}: expected '[name]' or one of "
                              f"{', '.join(sorted(KEYS))}: got {line!r}")
                continue
            if cur is None:
                errors.append(f"{where}: {key}: before any [series]")
                continue
            if key == "prefix":
                cur.prefix = value.split()
            elif key == "depends":
                cur.depends = value.split()
            elif key == "to" and value:
                cur.to.append(value)
            elif key == "cc" and value:
                cur.cc.append(value)
            elif key == "cover":
                cur.cover = value or None
            elif key == "change-id":
                cur.change_id = value or None
            elif key == "revision":
                if not value.isdigit() or int(value) < 1:
                    errors.append(f"{where}: revision must be a number >= 1")
                else:
                    cur.revision = int(value)
            elif key == "patch":
                if not value:
                    errors.append(f"{where}: empty patch subject")
                else:
                    cur.subjects.append(value)
    return series, errors


def read_stack(tree):
    """[(commit, subject)] of BASE_TAG..HEAD, oldest first."""
    out = git(tree, "log", "--reverse", "--format=%H %s", f"{BASE_TAG}..HEAD")
    return [tuple(line.split(" ", 1)) for line in out.splitlines()]


def check_defs(series, errors, stack, repo):
    """Tie the definitions to the stack; all problems at once."""
    pos = {}
    for i, (c, subj) in enumerate(stack):
        if subj in pos:
            errors.append(f"stack commits {pos[subj] + 1} and {i + 1} have "
                          f"the same subject {subj!r}: a series lists "
                          "commits by subject, so subjects must be unique")
        pos[subj] = i
    owner = {}
    for s in series:
        if not s.subjects:
            errors.append(f"{s.line}: series {s.name} has no patch:")
        idx = []
        for subj in s.subjects:
            if subj not in pos:
                errors.append(f"series {s.name}: patch {subj!r} is not in "
                              f"the stack ({BASE_TAG}..series)")
                continue
            if subj in owner:
                errors.append(f"series {s.name}: patch {subj!r} is already "
                              f"in series {owner[subj]}")
                continue
            owner[subj] = s.name
            idx.append(pos[subj])
        if idx != sorted(idx):
            errors.append(f"series {s.name}: patches are not listed in "
                          "stack order")
        idx.sort()
        s.commits = [stack[i][0] for i in idx]
        s.pos = idx
        if idx and idx[-1] - idx[0] + 1 != len(idx):
            gaps = [i for i in range(idx[0], idx[-1]) if i not in idx]
            what = "; ".join(
                f"{i + 1} {stack[i][1]!r}"
                + (f" (series {owner[stack[i][1]]})"
                   if stack[i][1] in owner else "")
                for i in gaps[:4])
            more = f" and {len(gaps) - 4} more" if len(gaps) > 4 else ""
            errors.append(f"series {s.name} is not contiguous in the stack: "
                          f"its patches are commits "
                          f"{', '.join(str(i + 1) for i in idx)}, with "
                          f"{what}{more} in between")
        if s.cover and not os.path.isfile(os.path.join(repo, s.cover)):
            errors.append(f"series {s.name}: cover {s.cover} does not exist")
        if not s.cover:
            errors.append(f"series {s.name} has no cover: (for one patch, "
                          "the notes below its ---)")
        for a in s.to + s.cc:
            if invented(email.utils.parseaddr(a)[1]):
                errors.append(f"series {s.name}: recipient {a} cannot be "
                              "mailed")
    for i, (c, subj) in enumerate(stack):
        if subj not in owner:
            errors.append(f"stack commit {i + 1} {c[:12]} {subj!r} belongs "
                          "to no series of patches/mail-series")
    names = {s.name: s for s in series}
    for s in series:
        for d in s.depends:
            if d not in names:
                errors.append(f"series {s.name} depends on {d}, which is "
                              "not defined")
            elif d == s.name:
                errors.append(f"series {s.name} depends on itself")
            elif (names[d].pos and s.pos
                  and names[d].pos[-1] > s.pos[0]):
                errors.append(f"series {s.name} depends on {d}, whose "
                              "patches come later in the stack")


def closure(s, names):
    """The series s depends on, directly or not."""
    seen, todo = [], list(s.depends)
    while todo:
        d = todo.pop()
        if d in seen or d not in names:
            continue
        seen.append(d)
        todo.extend(names[d].depends)
    return seen


# ---- identity ----------------------------------------------------------------

def invented(addr):
    """An address no mail may carry: reserved for examples, local, or
    no-reply."""
    addr = addr.strip().lower()
    local, at, domain = addr.rpartition("@")
    if not at or not local or not domain:
        return True
    if "." not in domain or domain in ("localhost", "localdomain"):
        return True
    if domain in RESERVED_DOMAINS or any(domain.endswith("." + d)
                                         for d in RESERVED_DOMAINS):
        return True
    if domain.endswith(RESERVED_TLDS):
        return True
    if re.search(r"no-?reply", local) or re.search(r"no-?reply", domain):
        return True
    return False


def assisted_by(repo, test):
    """The sender's Assisted-by: value, or None when the sender says no AI
    tool contributed. Documentation/process/coding-assistants.rst asks for
    the trailer (and lets no AI add a Signed-off-by); only the sender can
    decide it, so mails are refused until the sender has."""
    if test:
        value = os.environ.get("MAIL_TEST_ASSISTED_BY", "").strip()
    else:
        value = run(["git", "-C", repo, "config", "revoke.assistedBy"],
                    check=False).stdout.strip()
    if not value:
        die("the sender has not decided the Assisted-by: trailer "
            "(Documentation/process/coding-assistants.rst, "
            "generated-content.rst): git config revoke.assistedBy "
            "'LLM [TOOL...]' (for example 'LLM sparse coccinelle'), or "
            "'none' if no AI tool contributed to what you send; README, "
            "\"How to send\"")
    if value == "none":
        return None
    if not re.fullmatch(r"[\w.:/+-]+(?: [\w.:/+-]+)*", value) or \
            value.lower().startswith(("signed-off-by", "assisted-by")):
        die(f"revoke.assistedBy {value!r}: want the trailer's value, "
            "'LLM [TOOL1] [TOOL2]', or 'none'")
    return value


def sender_identity(repo):
    """(name, email, test, assisted-by) of whoever makes the mails."""
    test = os.environ.get("MAIL_TEST_IDENTITY")
    if test:
        name, addr = email.utils.parseaddr(test)
        if not name or not addr or not invented(addr):
            die("MAIL_TEST_IDENTITY must be 'Name <address>' with an "
                "address that can never be mailed (under example.org); "
                f"got {test!r}")
        return name, addr, True, assisted_by(repo, True)
    name = run(["git", "-C", repo, "config", "user.name"],
               check=False).stdout.strip()
    addr = run(["git", "-C", repo, "config", "user.email"],
               check=False).stdout.strip()
    if not name or not addr:
        die("no sender identity: the mails carry the sender as author and "
            "Signed-off-by; set yours with git config user.name and "
            "user.email")
    if invented(addr):
        die(f"the sender identity {name} <{addr}> is not a mailable "
            "address (example domain, localhost, no-reply, ...): set yours "
            "with git config user.name and user.email")
    return name, addr, False, assisted_by(repo, False)


def rewrite_message(msg, ident):
    """The commit message with the sender's Signed-off-by in place of the
    placeholder; any other invented address is an error."""
    me = f"{ident[0]} <{ident[1]}>"
    out, signed = [], False
    for line in msg.rstrip("\n").split("\n"):
        m = re.match(r"(?i)signed-off-by:\s*(.*)$", line)
        if m and invented(email.utils.parseaddr(m.group(1))[1]):
            line = f"Signed-off-by: {me}"
        if line == f"Signed-off-by: {me}":
            if signed:
                continue
            signed = True
        for a in re.findall(r"<([^<>@\s]+@[^<>\s]+)>", line):
            if invented(a) and a != ident[1]:
                die(f"a commit message carries the address {a}: "
                    f"{msg.splitlines()[0]!r}")
        out.append(line)
    if not signed:
        out.append(f"Signed-off-by: {me}")
    # The sender's Assisted-by: right before the sender's Signed-off-by
    if ident[3]:
        out.insert(out.index(f"Signed-off-by: {me}"),
                   f"Assisted-by: {ident[3]}")
    return "\n".join(out) + "\n"


# ---- the work repository and its commits ---------------------------------------

class Work:
    """build/mail/linux: where the re-made commits and b4's branches live."""

    def __init__(self, top, tree, ident):
        self.top, self.tree, self.ident = top, tree, ident
        self.dir = os.path.join(top, "build", "mail", "linux")
        self.home = os.path.join(top, "build", "mail", "home")
        self.index = os.path.join(top, "build", "mail", "index")
        self.picks = {}
        os.makedirs(self.home, exist_ok=True)
        if not os.path.isdir(os.path.join(self.dir, ".git")):
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(os.path.dirname(self.dir), exist_ok=True)
            run(["git", "clone", "-q", "--shared", "--no-checkout",
                 tree, self.dir])
        # The stack's objects come through the alternate; a ref keeps them.
        head = git(tree, "rev-parse", "HEAD").strip()
        base = git(tree, "rev-parse", f"{BASE_TAG}^{{commit}}").strip()
        self.git("update-ref", "refs/mail/stack", head)
        self.git("update-ref", "refs/mail/base", base)
        self.base = base

    def env(self, extra_config=()):
        """The environment of every git and b4 run here: the sender's
        identity, no user or system configuration, and a configuration in
        which b4 has nothing to send with."""
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("GIT_") and k != "EDITOR"}
        name, addr = self.ident[0], self.ident[1]
        cfg = [("user.name", name), ("user.email", addr),
               ("sendemail.smtpserver", "/bin/false"),
               ("sendemail.from", f"{name} <{addr}>"),
               ("b4.send-endpoint-web", "none"),
               ("b4.send-no-patatt-sign", "yes"),
               ("b4.prep-cover-strategy", "commit"),
               ("core.editor", "false"), *extra_config]
        e.update({"HOME": self.home, "XDG_CONFIG_HOME": self.home,
                  "XDG_DATA_HOME": self.home, "XDG_CACHE_HOME": self.home,
                  "GIT_CONFIG_NOSYSTEM": "1",
                  "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": addr,
                  "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": addr,
                  "GIT_CONFIG_COUNT": str(len(cfg))})
        for i, (k, v) in enumerate(cfg):
            e[f"GIT_CONFIG_KEY_{i}"] = k
            e[f"GIT_CONFIG_VALUE_{i}"] = v
        return e

    def git(self, *args, input=None, env=None, check=True):
        return git(self.dir, *args, env=env or self.env(), input=input,
                   check=check)

    def pick(self, parent, c, what):
        """Commit c's change on top of parent, made by the sender."""
        key = (parent, c)
        if key in self.picks:
            return self.picks[key]
        e = self.env()
        e["GIT_INDEX_FILE"] = self.index
        git(self.dir, "read-tree", parent, env=e)
        diff = git(self.dir, "diff", "--binary", "--full-index",
                   "--no-renames", f"{c}^", c, env=e)
        r = run(["git", "-C", self.dir, "apply", "--cached"], env=e,
                input=diff, check=False)
        subj = git(self.dir, "log", "-1", "--format=%s", c, env=e).strip()
        if r.returncode:
            die(f"{what}: {subj!r} does not apply:\n{r.stderr.strip()}")
        tree = git(self.dir, "write-tree", env=e).strip()
        msg = rewrite_message(
            git(self.dir, "log", "-1", "--format=%B", c, env=e), self.ident)
        e["GIT_AUTHOR_DATE"] = git(self.dir, "log", "-1", "--format=%aD",
                                   c, env=e).strip()
        # A patch someone else wrote keeps its author (b4 then puts a
        # From: line for it in the body); ours get the sender's.
        an, ae = git(self.dir, "log", "-1", "--format=%an%x00%ae", c,
                     env=e).strip().split("\0")
        if not invented(ae):
            e["GIT_AUTHOR_NAME"], e["GIT_AUTHOR_EMAIL"] = an, ae
        new = git(self.dir, "commit-tree", tree, "-p", parent, env=e,
                  input=msg).strip()
        self.picks[key] = new
        return new

    def b4(self, *args, editor=None):
        """Run b4: prep, or send to a directory (it only writes files)."""
        args = list(args)
        if args[:1] == ["send"]:
            # The one form of send we run: to a directory (a dry run).
            if (len(args) != 4 or args[1] != "--output-dir"
                    or args[3] != "--no-sign"):
                die(f"refusing b4 {' '.join(args)}: only "
                    "`b4 send --output-dir DIR --no-sign` is run here")
        elif args[:1] != ["prep"]:
            die(f"refusing b4 {args[0]}")
        extra = [("core.editor", editor)] if editor else []
        r = run(["b4", "--offline-mode", *args], cwd=self.dir,
                env=self.env(extra), check=False)
        if r.returncode:
            die(f"b4 {' '.join(args)} failed ({r.returncode}):\n"
                f"{r.stderr.strip()}")
        return r.stderr


def base_of(s, names, stack, work):
    """The base plus every series s depends on, as re-made commits."""
    deps = set(closure(s, names))
    tip = work.base
    for c, subj in stack:
        if any(c in names[d].commits for d in deps):
            tip = work.pick(tip, c, f"series {s.name} on its dependencies "
                            f"({', '.join(sorted(deps))})")
    return tip, deps


def check_content(tree, stack, errors):
    """An invented address in what a commit adds would be mailed as it is
    (a MAINTAINERS entry, a comment): only the sender may be named."""
    cur = None
    log = git(tree, "log", "--reverse", "--format=commit %H", "-p",
              "--no-color", f"{BASE_TAG}..HEAD")
    subj = dict(stack)
    for line in log.splitlines():
        if line.startswith("commit "):
            cur = line.split()[1]
            continue
        if line.startswith("+") and not line.startswith("+++"):
            for a in re.findall(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", line):
                if invented(a):
                    errors.append(f"commit {cur[:12]} {subj[cur]!r} adds "
                                  f"the address {a} ({line[1:].strip()!r}):"
                                  " no invented identity may be mailed; name "
                                  "a real reviewer (R:) or none")


def load(a):
    series, errors = read_defs(a.defs)
    stack = read_stack(a.tree)
    check_defs(series, errors, stack, a.repo)
    check_content(a.tree, stack, errors)
    return series, errors, stack


def order(series):
    """Sending order: by place in the stack (dependencies come first)."""
    return sorted(series, key=lambda s: s.pos[0] if s.pos else 1 << 30)


def cmd_check(a, ident=None):
    series, errors, stack = load(a)
    if errors:
        for e in errors:
            note(e)
        die(f"{a.defs}: {len(errors)} problem(s) with the split of "
            f"{len(stack)} commits")
    names = {s.name: s for s in series}
    work = Work(a.repo, a.tree,
                ident or ("Check", "check@example.org", True, None))
    for s in order(series):
        tip, deps = base_of(s, names, stack, work)
        for c in s.commits:
            tip = work.pick(tip, c, f"series {s.name} on the base + "
                            f"{', '.join(sorted(deps)) or 'nothing'}")
        s.tip = tip
    note(f"{len(series)} series, {len(stack)} commits: each a contiguous "
         "range that applies on the base plus its dependencies")
    return series, stack, work


def cover_text(s, names, work, stack):
    subjects = {c: subj for c, subj in stack}
    with open(os.path.join(a_repo, s.cover)) as f:
        text = f.read().strip("\n")
    subj, _, body = text.partition("\n")
    body = re.sub(r"(?m)^#.*\n?", "", body)
    if not body.startswith("\n") or not body.strip():
        die(f"{s.cover}: a subject line, a blank line, then the text")
    body = body.strip("\n")
    if "EDITME" in text_of(subj, body):
        die(f"series {s.name}: the cover letter still says EDITME")
    if s.depends:
        lines = ["Applies on top of:"]
        for d in s.depends:
            dd = names[d]
            ds = (cover_subject(dd) if len(dd.commits) > 1
                  else subjects[dd.commits[0]])
            pfx = " ".join(["PATCH"] + dd.prefix)
            lines.append(f"  [{pfx}] {ds} ({d})")
        body = (body + "\n\n" if body else "") + "\n".join(lines)
    trailers = [f"To: {t}" for t in s.to] + [f"Cc: {c}" for c in s.cc]
    if trailers:
        body = (body + "\n\n" if body else "") + "\n".join(trailers)
    return text_of(subj, body)


def text_of(subj, body):
    return subj.strip() + "\n\n" + body.strip("\n") + "\n"


def cover_subject(s):
    with open(os.path.join(a_repo, s.cover)) as f:
        return f.readline().strip()


def set_change_id(work, change_id):
    """b4 prep made a change-id of its own: put the recorded one in the
    tracking JSON of the cover commit (HEAD, the branch's only commit)."""
    msg = work.git("log", "-1", "--format=%B", "HEAD")
    text, sep, js = msg.partition(B4_MAGIC)
    if not sep:
        die("b4 prep made no cover commit with tracking data")
    head, brace, rest = js.partition("{")
    data = json.loads(brace + rest)
    data["series"]["change-id"] = change_id
    new = text + sep + head + json.dumps(data, indent=2) + "\n"
    work.git("commit", "-q", "--amend", "--allow-empty", "-F", "-",
             input=new)


def cmd_write(a):
    ident = sender_identity(a.repo)
    series, stack, work = cmd_check(a, ident)
    names = {s.name: s for s in series}
    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    # A fresh start: b4's branches and our bases of the last run go.
    for ref in work.git("for-each-ref", "--format=%(refname)",
                        "refs/heads/").split():
        if ref.startswith(("refs/heads/b4/", "refs/heads/mail/")):
            work.git("update-ref", "-d", ref)
    for t in work.git("tag", "-l", "sent/*").split():
        work.git("tag", "-d", t)
    sent = []
    for s in order(series):
        fork, deps = base_of(s, names, stack, work)
        work.git("checkout", "-q", "-f", "-B", f"mail/base/{s.name}", fork)
        work.git("clean", "-q", "-fdx")
        work.b4("prep", "-n", s.name)
        branch = work.git("symbolic-ref", "--short", "HEAD").strip()
        if s.change_id:
            set_change_id(work, s.change_id)
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(cover_text(s, names, work, stack))
            f.flush()
            work.b4("prep", "--edit-cover", editor=f"cp {f.name}")
        if s.prefix:
            work.b4("prep", "--set-prefixes", *s.prefix)
        if s.revision > 1:
            work.b4("prep", "--force-revision", str(s.revision))
        tip = work.git("rev-parse", "HEAD").strip()
        for c in s.commits:
            tip = work.pick(tip, c, f"series {s.name}")
        work.git("reset", "-q", "--hard", tip)
        work.b4("prep", "--auto-to-cc")
        out = os.path.join(a.out, s.name)
        work.b4("send", "--output-dir", out, "--no-sign")
        fix_base(out, s, deps, names, stack, work, fork)
        cid = tracking(work)["series"]["change-id"]
        if not s.change_id:
            note(f"series {s.name}: b4 made change-id {cid}; record it in "
                 f"{os.path.relpath(a.defs, a.repo)} (change-id:) so that "
                 "the next version keeps it")
        sent.append({"name": s.name, "branch": branch,
                     "depends": s.depends, "change-id": cid,
                     "mails": sorted(os.listdir(out))})
    with open(os.path.join(a.out, "series.json"), "w") as f:
        json.dump({"sender": f"{ident[0]} <{ident[1]}>",
                   "test-identity": ident[2], "assisted-by": ident[3],
                   "base": work.base,
                   "series": sent}, f, indent=1)
        f.write("\n")
    scan(a.out, ident)
    note(f"{len(sent)} series in {a.out} (order: "
         f"{' '.join(x['name'] for x in sent)}); nothing was sent")


def tracking(work):
    msg = work.git("log", "-1", "--format=%B", "--grep", B4_MAGIC, "-F",
                   "HEAD")
    return json.loads("{" + msg.partition(B4_MAGIC)[2].partition("{")[2])


def fix_base(out, s, deps, names, stack, work, fork):
    """b4 0.12 names the fork point as base-commit. For a series with
    dependencies that is a local commit; say what git format-patch --base
    says instead: the real base and the patch-id of each prerequisite."""
    if not deps:
        return
    lines = [f"base-commit: {work.base}"]
    tip = work.base
    for c, subj in stack:
        if any(c in names[d].commits for d in deps):
            tip = work.pick(tip, c, "")
            show = work.git("show", "--format=", "--binary", tip)
            pid = run(["git", "-C", work.dir, "patch-id", "--stable"],
                      input=show, env=work.env()).stdout.split()[0]
            lines.append(f"prerequisite-patch-id: {pid}")
    want = f"base-commit: {fork}"
    done = 0
    for name in os.listdir(out):
        p = os.path.join(out, name)
        with open(p) as f:
            text = f.read()
        if want in text:
            with open(p, "w") as f:
                f.write(text.replace(want, "\n".join(lines)))
            done += 1
    if done != 1:
        die(f"series {s.name}: expected one mail with {want}, found {done} "
            "(b4's output is base64 or its layout changed?)")


def mail_addresses(path):
    """The addresses a mail names: headers and body, not message ids."""
    with open(path, "rb") as f:
        msg = email.message_from_binary_file(f,
                                             policy=email.policy.default)
    text = "".join(f"{k}: {v}\n" for k, v in msg.items()
                   if k.lower() not in ("message-id", "in-reply-to",
                                        "references", "x-b4-tracking"))
    body = msg.get_body(("plain",)) if msg.is_multipart() else msg
    text += body.get_content()
    return set(re.findall(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", text))


def scan(out, ident):
    """No mail may carry an invented address, but for the test identity
    when that is the sender."""
    bad = []
    for d, _, files in os.walk(out):
        for name in sorted(files):
            if not name.endswith(".eml"):
                continue
            for a in sorted(mail_addresses(os.path.join(d, name))):
                if invented(a) and not (ident[2] and a == ident[1]):
                    bad.append(f"{os.path.basename(d)}/{name}: {a}")
    if bad:
        die("mails carry invented addresses:\n  " + "\n  ".join(bad))


def cmd_list(a):
    series, errors, stack = load(a)
    if errors:
        for e in errors:
            note(e)
        die(f"{a.defs}: {len(errors)} problem(s)")
    print(json.dumps([{"name": s.name, "prefix": s.prefix,
                       "depends": s.depends,
                       "closure": closure(s, {x.name: x for x in series}),
                       "to": s.to, "cc": s.cc, "cover": s.cover,
                       "change-id": s.change_id,
                       "revision": s.revision, "commits": s.commits,
                       "subjects": s.subjects}
                      for s in order(series)], indent=1))


a_repo = None


def main():
    global a_repo
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cmd", choices=["check", "write", "list"])
    p.add_argument("--repo", default=top)
    p.add_argument("--tree", default=os.path.join(top, "build", "linux"))
    p.add_argument("--defs",
                   default=os.path.join(top, "patches", "mail-series"))
    p.add_argument("--out", default=os.path.join(top, "build", "series"))
    a = p.parse_args()
    # b4 runs in the work repository: relative paths would land there.
    for k in ("repo", "tree", "defs", "out"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    a_repo = a.repo
    if not os.path.isdir(os.path.join(a.tree, ".git")):
        die(f"no tree at {a.tree}: run make tree")
    {"check": cmd_check, "write": cmd_write, "list": cmd_list}[a.cmd](a)


if __name__ == "__main__":
    main()
