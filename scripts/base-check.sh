#!/bin/bash
# The base (README "The base"): v7.3-base is Debian's linux-source-7.3,
# which is upstream v7.3.4 minus the files of its Files-Excluded plus
# Debian's patches. The series applies to upstream v7.3.4 exactly as to
# that tree when it touches no excluded file and no file a Debian patch
# changes. This checks both, with what the Debian archive offers:
#
#  - Files-Excluded: from the copyright file of the linux-source-7.3 .deb
#    that the base was made from (build/debs);
#  - Debian's patches: linux's debian.tar.xz of the base's own version when
#    the mirror serves it, else of the newest version before it that it
#    serves (its Sources index lists every version with its SHA256; the
#    mirror holds the files of a few), checked against that hash; every
#    patch of debian/patches (all series files, featuresets included);
#  - what Debian changed between that version and the base's: its own
#    changelog entries (not the upstream stable lists) from the .deb's
#    changelog.Debian.gz, which must name none of the series' subsystems.
#
# Upstream v7.3.4 itself is not reachable from this machine (no kernel.org,
# no GitHub; the mirror lacks linux_7.3.4.orig.tar.xz), so the series is
# not applied to it here. Prints TAP.
#
# Each check is also run on a deliberately bad input (an
# excluded path, a file a Debian patch touches, a word of one of Debian's
# items) and must fail there: the negative controls.
#
# make fetch runs it with FETCH_ONLY=1: the indices and the debian.tar.xz
# only, kept in build/base-check; without the network a later run uses
# those (and says so).
#
# usage: scripts/base-check.sh
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
out=$build/base-check
tree=$build/linux
[ "${FETCH_ONLY:-}" = 1 ] || [ -d "$tree/.git" ] ||
	{ echo "base-check: no tree at $tree: run make tree" >&2; exit 1; }
# shellcheck source=/dev/null
. "$build/versions.mk"
deb=$(ls "$build/debs/linux-source-7.3_${SRCVER}_all.deb" 2>/dev/null) ||
	{ echo "base-check: no linux-source-7.3 $SRCVER in build/debs: run make fetch" >&2; exit 1; }

mkdir -p "$out"
rm -rf "$out/src"
dpkg-deb -x "$deb" "$out/src"
doc=$out/src/usr/share/doc/linux-source-7.3

# shellcheck source=scripts/apt-private.sh disable=SC2154 # apt_opts
. "$top/scripts/apt-private.sh"
APT_PRIVATE_SRC=1 apt_private "$out/apt" trixie-backports trixie sid >/dev/null
if ! apt_private_update "$out/apt" 2> "$out/update.log"; then
	if [ "${FETCH_ONLY:-}" != 1 ] && ls "$out/apt/lists/"*Sources* > /dev/null 2>&1; then
		echo "base-check: offline: the Sources indices make fetch kept ($(date -r "$(ls -t "$out/apt/lists/"*Sources* | head -n1)" -u +%FT%TZ))" >&2
	else
		cat "$out/update.log" >&2
		exit 1
	fi
fi

# Versions of the source package linux, newest first, not newer than the
# base's; take the first whose debian.tar.xz the mirror serves.
mapfile -t versions < <(apt-cache "${apt_opts[@]}" showsrc linux 2>/dev/null |
	sed -n 's/^Version: //p' | sort -u | while read -r v; do
		dpkg --compare-versions "$v" le "$SRCVER" && echo "$v"
	done | sort -V -r)
got=
missing=()
for v in "${versions[@]}"; do
	uris=$(apt-get "${apt_opts[@]}" -qq --print-uris source "linux=$v" 2>/dev/null) || continue
	line=$(grep "\.debian\.tar\.xz' " <<< "$uris" | head -n1) || continue
	read -r uri name _size hash <<< "$line"
	uri=${uri#\'}
	uri=${uri%\'}
	[ "${hash%%:*}" = SHA256 ] || continue
	if ! echo "${hash#SHA256:}  $out/$name" | sha256sum --quiet -c >/dev/null 2>&1; then
		rm -f "$out/$name"
		if ! /usr/lib/apt/apt-helper "${apt_opts[@]}" -qq download-file \
			"$uri" "$out/$name" "$hash" >/dev/null 2>&1; then
			rm -f "$out/$name"
			missing+=("$v")
			continue
		fi
	fi
	got=$v
	break
done
[ -n "$got" ] || { echo "base-check: the mirror serves no debian.tar.xz of linux <= $SRCVER" >&2; exit 1; }
if [ "${FETCH_ONLY:-}" = 1 ]; then
	echo "base-check: fetched linux_${got#*:}.debian.tar.xz and the Sources indices" >&2
	exit 0
fi
rm -rf "$out/debian-$got"
mkdir -p "$out/debian-$got"
tar -C "$out/debian-$got" -xJf "$out/linux_${got#*:}.debian.tar.xz"

git -C "$tree" diff --name-status v7.3-base..HEAD > "$out/series-files"
exec python3 - "$out" "$doc" "$got" "$SRCVER" "${missing[*]}" <<'EOF'
import fnmatch, gzip, os, re, subprocess, sys

out, doc, got, srcver, missing = sys.argv[1:6]
n = 0
failed = 0


def tap(ok, what, detail=""):
    global n, failed
    n += 1
    failed += not ok
    print(f"{'ok' if ok else 'not ok'} {n} {what}")
    for line in detail.splitlines():
        print(f"#   {line}")


files = {}
for line in open(os.path.join(out, "series-files")):
    st, *paths = line.rstrip("\n").split("\t")
    for p in paths:
        files[p] = st[0]
added = sorted(p for p, s in files.items() if s == "A")
print("TAP version 13")
print(f"# the series: {len(files) - len(added)} files changed, {len(added)} "
      f"added; base linux-source-7.3 {srcver}")

# 1. Files-Excluded (paths or globs; a directory excludes what is under it).
text = open(os.path.join(doc, "copyright")).read()
m = re.search(r"^Files-Excluded:(.*(?:\n[ \t].*)*)", text, re.M)
excl = m.group(1).split() if m else []


def excluded(paths):
    return [f"{p} matches {e}" for p in sorted(paths) for e in excl
            if fnmatch.fnmatch(p, e) or p.startswith(e.rstrip("/") + "/")]


# 2. Debian's patches: every series file under debian/patches and every
# patch file there, listed or not.
pdir = os.path.join(out, f"debian-{got}", "debian", "patches")
seriesfiles, patches = [], []
for root, _, names in os.walk(pdir):
    seriesfiles += [os.path.join(root, x) for x in names
                    if x == "series" or x.startswith("series-")]
for sf in sorted(seriesfiles):
    for line in open(sf):
        line = line.split("#")[0].strip()
        if line:
            patches.append(os.path.join(os.path.dirname(sf), line.split()[0]))
listed = set(patches)
for root, _, names in os.walk(pdir):
    patches += [os.path.join(root, x) for x in sorted(names)
                if x.endswith((".patch", ".diff"))
                and os.path.join(root, x) not in listed]
touched, unread = {}, []
for p in patches:
    try:
        body = open(p, errors="replace").read()
    except OSError:
        unread.append(os.path.relpath(p, pdir))
        continue
    for m in re.finditer(r"^(?:---|\+\+\+) (?:[ab]/)?(\S+)", body, re.M):
        if m.group(1) != "/dev/null":
            touched.setdefault(m.group(1), set()).add(os.path.relpath(p, pdir))


def patched(paths):
    return [f"{p}: {', '.join(sorted(touched[p]))}"
            for p in sorted(paths) if p in touched]


# 3. Debian's own changelog items (not the upstream stable lists) of the
# versions after that one, up to the base's.
WORDS = (r"rdma|infiniband|\bIB/|\bib_|\brxe\b|mlx5|\befa\b|bnxt|\bmana\b|"
         r"mana_ib|\bionic\b|dma-buf|dma_buf|dmabuf|udmabuf|\bvgem\b|"
         r"selftests?/(?:rdma|drivers/dma-buf)")
log = gzip.open(os.path.join(doc, "changelog.Debian.gz"), "rt").read()
own, seen, stable = [], [], []
for e in re.split(r"^(?=linux \()", log, flags=re.M):
    m = re.match(r"linux \(([^)]+)\)", e)
    if not m or subprocess.run(["dpkg", "--compare-versions", m.group(1),
                                "gt", got]).returncode:
        continue
    seen.append(m.group(1))
    for item in re.split(r"^(?=  \* |  \[)", e, flags=re.M)[1:]:
        if not item.startswith("  * "):
            continue
        item = item.split("\n -- ")[0].rstrip()
        if re.match(r"  \* New upstream (stable update|release)", item):
            stable += [x.strip() for x in item.splitlines()[1:]]
        else:
            own.append(item)


def named(items, words):
    w = re.compile(words, re.I)
    return [x for x in items if w.search(x)]


hits = excluded(files)
tap(excl and not hits, f"no file of the series is in Files-Excluded "
    f"({len(excl)} patterns of the base's copyright)",
    "\n".join(hits) if excl else "no Files-Excluded found")
hits = patched(files)
tap(patches and not hits and not unread,
    f"no patch of Debian's linux {got} touches a file of the series "
    f"({len(patches)} patches, {len(listed)} of them in "
    f"{len(seriesfiles)} series files; {len(touched)} files)",
    "\n".join(hits + [f"listed but missing: {u}" for u in unread]))
if missing:
    print(f"# the mirror lists but does not serve the debian.tar.xz of "
          f"{', '.join(missing.split())}")
hits = named(own, WORDS)
tap(srcver in seen and own and not hits,
    f"Debian's own changelog items from after {got} to {srcver} "
    f"({len(seen)} versions, {len(own)} items) name none of the series' "
    "subsystems", "\n".join(hits))
up = named(stable, WORDS)
print(f"# upstream stable changes in those versions that name them (in "
      f"v7.3.4 and the base, not in v7.3): {len(up)}")
for x in up:
    print(f"#   {x}")

# Negative controls: each check must fail on a bad input.
bad = excl[0] if excl else None
tap(bad is not None and bool(excluded(set(files) | {bad})),
    f"negative control: {bad} counts as excluded")
bad = min(touched) if touched else None
tap(bad is not None and bool(patched(set(files) | {bad})),
    f"negative control: {bad}, which a Debian patch touches, is found")
word = re.search(r"\* \[?(\w+)", own[0]).group(1) if own else None
tap(word is not None and bool(named(own, WORDS + "|" + re.escape(word))),
    f"negative control: an item naming '{word}' is found when it is a word "
    "to look for")
print(f"1..{n}")
sys.exit(1 if failed else 0)
EOF
