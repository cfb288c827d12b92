#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Assemble and disassemble the patch series.

The repository keeps the series in two forms:
  * whole files we wrote, at their kernel path (drivers/, include/, ...);
  * changes to upstream files, as git format-patch files in patches/.
patches/series orders the entries. One line per commit:

    0001-dma-buf-add-a-mock-exporter.patch drivers/dma-buf/dmabuf_mock.c ...

The first word is the patch (its mail header carries author, date and the
commit message; its diff may be empty when the commit only adds files), the
rest are the new files of ours that belong to that commit.

usage: series.py tree   [--repo R] [--tree T] [--base-src S] [--force]
       series.py export [--repo R] [--tree T]
       series.py mail   [--repo R] [--tree T] --out DIR
"""

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

BASE_TAG = "v7.3-base"
BRANCH = "series"
# Commits are made with a fixed committer so that tree -> export -> tree
# reproduces the same commit ids.
IDENT = {
    "GIT_COMMITTER_NAME": "series",
    "GIT_COMMITTER_EMAIL": "series@localhost",
}


def die(msg):
    print(f"series: {msg}", file=sys.stderr)
    sys.exit(1)


def git(tree, *args, env=None, check=True, input=None):
    e = dict(os.environ)
    e.update(IDENT)
    if env:
        e.update(env)
    r = subprocess.run(["git", "-C", tree, *args], env=e, input=input,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if check and r.returncode:
        die(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def read_series(repo):
    path = os.path.join(repo, "patches", "series")
    entries = []
    if not os.path.exists(path):
        return entries
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            if not words[0].endswith(".patch"):
                die(f"{path}:{n}: entry must start with a .patch file")
            entries.append((words[0], words[1:]))
    return entries


def drop_debian_ignore(path):
    """Debian appends a block to .gitignore that ignores every top-level
    path ("/*", "!/debian/"): in a tree meant for `git add` of new files that
    hides them all. The base commit leaves that block out; it is Debian
    packaging, not part of v7.3, and no patch of ours touches it."""
    with open(path) as f:
        lines = f.read().split("\n")
    out, skip = [], False
    for i, line in enumerate(lines):
        if line.startswith("# Debian packaging"):
            skip = True
            while out and out[-1] == "#":
                out.pop()
        if skip:
            if line == "!/debian/":
                skip = False
            continue
        out.append(line)
    with open(path, "w") as f:
        f.write("\n".join(out))


def make_base(tree, base_src):
    """Turn a pristine source tree into a git repo with the base tag."""
    if os.path.isdir(os.path.join(tree, ".git")):
        if git(tree, "tag", "-l", BASE_TAG).strip():
            return
        die(f"{tree} is a git repo without tag {BASE_TAG}; remove it")
    if not os.path.isdir(base_src):
        die(f"no pristine source at {base_src}: run make fetch")
    print(f"series: creating {tree} from {base_src}")
    shutil.copytree(base_src, tree, symlinks=True)
    drop_debian_ignore(os.path.join(tree, ".gitignore"))
    git(tree, "init", "-q", "-b", BRANCH)
    git(tree, "config", "core.autocrlf", "false")
    git(tree, "config", "user.name", IDENT["GIT_COMMITTER_NAME"])
    git(tree, "config", "user.email", IDENT["GIT_COMMITTER_EMAIL"])
    # The tarball ships no .gitignore-d files, so add everything: -f keeps
    # files that upstream's .gitignore patterns would otherwise hide.
    git(tree, "add", "-A", "-f", ".")
    version = subprocess.run(["make", "-s", "-C", tree, "kernelversion"],
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    date = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
            "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    git(tree, "commit", "-q", "--no-verify", "-m",
        f"Linux {version} (Debian linux-source-7.3)",
        "--author", "Debian <debian-kernel@lists.debian.org>", env=date)
    git(tree, "tag", BASE_TAG)


def read_state(tree):
    """(HEAD, series digest) as the last tree or export left them."""
    state = []
    for name in ("series-head", "series-digest"):
        path = os.path.join(tree, ".git", name)
        value = ""
        if os.path.exists(path):
            with open(path) as f:
                value = f.read().strip()
        state.append(value)
    return tuple(state)


def record_state(tree, repo):
    """Remember that tree's HEAD and the repo's series are in step."""
    head = git(tree, "rev-parse", "HEAD").strip()
    for name, value in (("series-head", head),
                        ("series-digest", series_digest(repo))):
        with open(os.path.join(tree, ".git", name), "w") as f:
            f.write(value + "\n")
    return head


def apply_entry(repo, tree, patch, files):
    """Apply one series entry as one commit with the patch's metadata."""
    ppath = os.path.join(repo, "patches", patch)
    if not os.path.exists(ppath):
        die(f"patches/series names {patch}, which does not exist")
    with tempfile.TemporaryDirectory() as tmp:
        msg, diff = os.path.join(tmp, "msg"), os.path.join(tmp, "diff")
        with open(ppath) as f:
            info = git(tree, "mailinfo", "-k", "-b", msg, diff,
                       input=f.read())
        hdr = {}
        for line in info.splitlines():
            k, _, v = line.partition(": ")
            hdr[k] = v
        with open(diff) as f:
            has_diff = any(line.startswith("diff --git ") for line in f)
        if has_diff:
            r = subprocess.run(["git", "-C", tree, "apply", "--index",
                                "--whitespace=nowarn", diff],
                               stderr=subprocess.PIPE, text=True)
            if r.returncode:
                die(f"{patch} does not apply:\n{r.stderr}")
        for rel in files:
            src = os.path.join(repo, rel)
            dst = os.path.join(tree, rel)
            if not os.path.exists(src):
                die(f"{patch}: listed file {rel} is missing from the repo")
            if os.path.lexists(dst):
                die(f"{patch}: {rel} already exists in the tree; a file "
                    "that upstream (or an earlier entry) has must be "
                    "changed by a patch")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
            git(tree, "add", "-f", rel)
        with open(msg) as f:
            body = f.read()
        message = hdr.get("Subject", "").strip() + "\n\n" + body
        author = f"{hdr.get('Author', '')} <{hdr.get('Email', '')}>"
        date = hdr.get("Date", "")
        git(tree, "commit", "-q", "--no-verify", "--allow-empty",
            "--cleanup=strip", "-F", "-", "--author", author,
            env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
            input=message)


def series_digest(repo):
    """A hash of everything the series is made of, to skip a rebuild."""
    h = hashlib.sha256()
    entries = read_series(repo)
    names = ["patches/series"] + [f"patches/{p}" for p, _ in entries]
    names += [f for _, files in entries for f in files]
    for name in names:
        h.update(name.encode() + b"\0")
        path = os.path.join(repo, name)
        if os.path.exists(path):
            with open(path, "rb") as f:
                h.update(f.read())
            h.update(b"x" if os.access(path, os.X_OK) else b"-")
    return h.hexdigest()


def cmd_tree(a):
    make_base(a.tree, a.base_src)
    head = git(a.tree, "rev-parse", "HEAD").strip()
    known, known_digest = read_state(a.tree)
    if not a.force:
        # Untracked files count: `git clean` below would delete them.
        if git(a.tree, "status", "--porcelain"):
            die(f"{a.tree} has uncommitted changes or untracked files: "
                "commit and `make export`, or FORCE=1 to discard them")
        if known and head != known:
            die(f"{a.tree} has commits that were not exported "
                f"(HEAD {head[:12]}, last tree/export {known[:12]}): "
                "`make export` first, or FORCE=1 to discard them")
        # Nothing changed since the last tree: leave the files (and the
        # kernel builds' timestamps) alone.
        if known == head and known_digest == series_digest(a.repo):
            print(f"series: {a.tree} is up to date, HEAD {head[:12]}")
            return
    git(a.tree, "checkout", "-q", "-f", "-B", BRANCH, BASE_TAG)
    git(a.tree, "clean", "-q", "-fd")
    entries = read_series(a.repo)
    for patch, files in entries:
        apply_entry(a.repo, a.tree, patch, files)
    head = record_state(a.tree, a.repo)
    print(f"series: {a.tree}: {BASE_TAG} + {len(entries)} commits, "
          f"HEAD {head[:12]}")


def commit_files(tree, c):
    """(added, other) paths of commit c, renames counted as add + delete."""
    out = git(tree, "diff-tree", "--no-commit-id", "-r", "--no-renames",
              "--name-status", "-z", c)
    words = out.split("\0")
    added, other = [], []
    for st, path in zip(words[0::2], words[1::2]):
        (added if st == "A" else other).append(path)
    return added, other


def patch_name(tree, c, n):
    subj = git(tree, "log", "-1", "--format=%s", c).strip()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", subj).strip("-")[:52].rstrip("-")
    return f"{n:04d}-{slug}.patch"


def format_entry(tree, c, paths):
    """The commit's mail, diff restricted to paths (may have none)."""
    args = ["format-patch", "-1", "--stdout", "--zero-commit",
            "--no-signature", "--full-index", "-k", c]
    if paths:
        return git(tree, *args, "--", *paths)
    # No change to upstream files: the mail is header and message only.
    mail = git(tree, "show", "-s", "--format=email", c)
    mail = re.sub(r"^From [0-9a-f]{40} ", "From " + "0" * 40 + " ", mail)
    # As format-patch -k writes it: no "[PATCH] " added to the subject.
    mail = re.sub(r"^Subject: \[PATCH\] ", "Subject: ", mail, count=1,
                  flags=re.M)
    return mail.rstrip("\n") + "\n---\n"


def cmd_export(a):
    if not os.path.isdir(os.path.join(a.tree, ".git")):
        die(f"no tree at {a.tree}: run make tree")
    if git(a.tree, "status", "--porcelain", "--untracked-files=no"):
        die(f"{a.tree} has uncommitted changes: commit them first")
    commits = git(a.tree, "rev-list", "--reverse", "--topo-order",
                  f"{BASE_TAG}..HEAD").split()
    for c in commits:
        if len(git(a.tree, "rev-list", "--parents", "-1", c).split()) > 2:
            die(f"merge commit {c[:12]} cannot be exported")
    old = read_series(a.repo)
    pdir = os.path.join(a.repo, "patches")
    os.makedirs(pdir, exist_ok=True)
    for patch, files in old:
        for rel in files:
            p = os.path.join(a.repo, rel)
            if os.path.exists(p):
                os.unlink(p)
        p = os.path.join(pdir, patch)
        if os.path.exists(p):
            os.unlink(p)
    lines = []
    owned = set()
    for n, c in enumerate(commits, 1):
        added, other = commit_files(a.tree, c)
        name = patch_name(a.tree, c, n)
        with open(os.path.join(pdir, name), "w") as f:
            f.write(format_entry(a.tree, c, other))
        for rel in added:
            dst = os.path.join(a.repo, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            data = git(a.tree, "show", f"{c}:{rel}")
            mode = git(a.tree, "ls-tree", c, "--", rel).split()[0]
            with open(dst, "w") as f:
                f.write(data)
            os.chmod(dst, 0o755 if mode == "100755" else 0o644)
        for rel in other:
            if rel in owned:
                # Fine when the change needs a later commit (a test of
                # a later feature); otherwise fold it into the commit
                # that adds the file, so the repo copy is the code.
                print(f"series: note: {name} changes {rel}, added by an "
                      "earlier commit: the repo copy is that commit's, "
                      "this change stays a diff", file=sys.stderr)
        owned.update(added)
        lines.append(" ".join([name] + added))
    with open(os.path.join(pdir, "series"), "w") as f:
        f.write("# Generated by `make export`; see scripts/series.py.\n")
        f.write("# patch [new files of ours that belong to the commit]\n")
        for line in lines:
            f.write(line + "\n")
    record_state(a.tree, a.repo)
    print(f"series: exported {len(commits)} commits to {pdir}")


def cmd_mail(a):
    """The series as git send-email wants it: cover letter + patches."""
    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    n = len(git(a.tree, "rev-list", f"{BASE_TAG}..HEAD").split())
    if n == 0:
        print("series: the series is empty; nothing to mail")
        os.makedirs(a.out)
        return
    git(a.tree, "format-patch", "-q", "--cover-letter", "--no-signature",
        "--base", BASE_TAG, "-o", a.out, f"{BASE_TAG}..HEAD")
    cover = os.path.join(a.repo, "patches", "cover-letter.txt")
    cl = os.path.join(a.out, "0000-cover-letter.patch")
    if os.path.exists(cover):
        with open(cover) as f:
            subj, _, body = f.read().partition("\n")
        with open(cl) as f:
            text = f.read()
        text = text.replace("*** SUBJECT HERE ***", subj.strip())
        text = text.replace("*** BLURB HERE ***", body.strip())
        with open(cl, "w") as f:
            f.write(text)
    print(f"series: {n} patches + cover letter in {a.out}")


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cmd", choices=["tree", "export", "mail"])
    p.add_argument("--repo", default=top)
    p.add_argument("--tree", default=os.path.join(top, "build", "linux"))
    p.add_argument("--base-src",
                   default=os.path.join(top, "build", "linux-src"))
    p.add_argument("--force", action="store_true")
    p.add_argument("--out", default=os.path.join(top, "build", "series"))
    a = p.parse_args()
    {"tree": cmd_tree, "export": cmd_export, "mail": cmd_mail}[a.cmd](a)


if __name__ == "__main__":
    main()
