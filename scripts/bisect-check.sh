#!/bin/bash
# Bisectability: build every commit of the series on its own. For each
# commit from v7.3-base to build/linux's HEAD, in order, in one git
# worktree (build/bisect): the out-of-tree modules, hardware drivers
# included (scripts/oot.sh with OOT_HW=1; kbuild rebuilds only what the
# commit changed), the rdma and dma-buf selftests, and, in tree with the
# debug kernel's config fragments, the objects of drivers/infiniband,
# drivers/dma-buf and mana's net driver: the KUnit tests and the helpers
# they share are built only there (Debian's config has none of their
# options). The whole in-tree kernel is not rebuilt per commit (minutes
# each); `make kernel-debug` builds the tip.
# Then every mail series (patches/mail-series) the same way on the base
# plus only the series it names before it (scripts/mail.py list: its
# dependency closure), its commits cherry-picked from build/linux in stack
# order: a driver series on the core alone, without the tests series, etc.
# A series whose tree is the tree of a commit built above is not built
# again. Prints TAP, one line per commit and per series.
#
# usage: scripts/bisect-check.sh [all|commits|series]   (default all)
#   BISECT_SERIES="name ..."  only these mail series
#   BISECT_COMMITS="rev ..."   only these commits (of any branch), in
#                              this order, instead of the whole stack
set -eu
what=${1:-all}
case $what in all|commits|series) ;; *) echo "usage: $0 [all|commits|series]" >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
wt=$top/build/bisect
logs=$top/build/bisect-logs
if [ -n "${BISECT_COMMITS:-}" ]; then
	read -r -a commits <<< "$BISECT_COMMITS"
else
	mapfile -t commits < <(git -C "$tree" rev-list --reverse v7.3-base..HEAD)
fi
[ "$what" != series ] || commits=()
# name, then the commits of its closure and its own, in stack order
series=()
if [ "$what" != commits ]; then
	mapfile -t series < <(python3 "$top/scripts/mail.py" list | python3 -c '
import json, os, subprocess, sys
tree = sys.argv[1]
stack = subprocess.run(["git", "-C", tree, "rev-list", "--reverse",
                        "v7.3-base..HEAD"], capture_output=True, text=True,
                       check=True).stdout.split()
defs = json.load(sys.stdin)
by = {d["name"]: d for d in defs}
only = os.environ.get("BISECT_SERIES", "").split()
for d in defs:
    if only and d["name"] not in only:
        continue
    want = set(d["commits"])
    for n in d["closure"]:
        want |= set(by[n]["commits"])
    assert want <= set(stack), d["name"]
    print(d["name"], *[c for c in stack if c in want])
' "$tree")
	[ ${#series[@]} -gt 0 ] || { echo "bisect-check: no series from scripts/mail.py list" >&2; exit 1; }
fi
git -C "$tree" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
git -C "$tree" worktree prune
git -C "$tree" worktree add -q --detach "$wt" v7.3-base
trap 'git -C "$tree" worktree remove --force "$wt"' EXIT
rm -rf "$logs"
mkdir -p "$logs"

# The in-tree objects: the debug kernel's fragments, as scripts/kernel.sh
# debug writes them (options a commit does not have yet are ignored).
kbuild=$top/build/bisect-kbuild
mkdir -p "$kbuild"
cat "$top/configs/base.config" "$top/configs/rdma.config" \
    "$top/configs/debug.config" "$top/configs/hw.config" > "$kbuild/fragment.config"
export CCACHE_DIR=${CCACHE_DIR:-$top/build/ccache}
export KBUILD_BUILD_TIMESTAMP=${KBUILD_BUILD_TIMESTAMP:-2026-01-01}
export LOCALVERSION=
cc="gcc"
command -v ccache >/dev/null && cc="ccache gcc"
intree=(make -s -C "$wt" O="$kbuild" CC="$cc" HOSTCC="$cc" -j"$(nproc)")

# build_here LOG: build what the work tree holds; 0 when clean.
build_here() {
	local ok=1
	{
		OOT_TREE=build/bisect OOT_HW=1 "$top/scripts/oot.sh" || ok=0
		"${intree[@]}" KCONFIG_ALLCONFIG="$kbuild/fragment.config" \
			allnoconfig >/dev/null || ok=0
		"${intree[@]}" drivers/infiniband/ drivers/dma-buf/ \
			drivers/net/ethernet/microsoft/ || ok=0
		# The selftests build against this tree's uapi headers.
		make -s -C "$wt" O="$top/build/bisect-kselftest" headers \
			>/dev/null || ok=0
		make -s -C "$wt/tools/testing/selftests" \
			TARGETS="rdma drivers/dma-buf" O="$top/build/bisect-kselftest" \
			>/dev/null || ok=0
	} >> "$1" 2>&1
	# Warnings count too: everything must build as cleanly as the tip.
	grep -E "(warning|error):" "$1" | grep -v "pahole version" | grep -q . && ok=0
	[ $ok = 1 ]
}

echo "TAP version 13"
echo "1..$((${#commits[@]} + ${#series[@]}))"
n=0
declare -A built	# tree id -> test number, of commits that built clean
for c in "${commits[@]}"; do
	n=$((n + 1))
	git -C "$wt" checkout -q --detach "$c"
	subject=$(git -C "$wt" log -1 --format=%s)
	log=$logs/$(printf %02d $n).log
	echo "### $n $c $subject" > "$log"
	if build_here "$log"; then
		built[$(git -C "$wt" rev-parse "HEAD^{tree}")]=$n
		echo "ok $n builds alone: $subject"
	else
		echo "not ok $n builds alone: $subject (log: $log)"
	fi
done

pick_env=(env GIT_AUTHOR_NAME=bisect GIT_AUTHOR_EMAIL=bisect@localhost
	  GIT_COMMITTER_NAME=bisect GIT_COMMITTER_EMAIL=bisect@localhost)
for line in "${series[@]}"; do
	n=$((n + 1))
	read -r name picks <<< "$line"
	log=$logs/$(printf %02d $n)-$name.log
	echo "### $n series $name: v7.3-base + $picks" > "$log"
	git -C "$wt" checkout -q --detach v7.3-base
	# shellcheck disable=SC2086 # one commit id per word
	if ! "${pick_env[@]}" git -C "$wt" cherry-pick --allow-empty $picks > "$log.pick" 2>&1; then
		git -C "$wt" cherry-pick --abort >/dev/null 2>&1 || true
		echo "not ok $n series $name does not apply on the base + its dependencies (log: $log.pick)"
		continue
	fi
	t=$(git -C "$wt" rev-parse "HEAD^{tree}")
	npicks=$(wc -w <<< "$picks")
	if [ -n "${built[$t]:-}" ]; then
		echo "ok $n series $name on the base + its dependencies ($npicks commits) builds: the tree of commit ${built[$t]}, built above"
	elif build_here "$log"; then
		echo "ok $n series $name on the base + its dependencies ($npicks commits) builds"
	else
		echo "not ok $n series $name on the base + its dependencies ($npicks commits) builds (log: $log)"
	fi
done
