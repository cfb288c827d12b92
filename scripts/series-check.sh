#!/bin/bash
# `make series`: write the series for git send-email into build/series
# (0000-cover-letter.patch + numbered patches), run checkpatch --strict on
# each patch, and prove the series `git am`s onto a pristine v7.3 tree and
# yields exactly the tree of build/linux. Prints TAP.
#
# usage: scripts/series-check.sh
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
out=$top/build/series
python3 "$top/scripts/series.py" mail --out "$out" >&2

mapfile -t patches < <(cd "$out" && ls [0-9]*.patch 2>/dev/null | grep -v '^0000-' || true)
echo "TAP version 13"
echo "1..$(( ${#patches[@]} + 2 ))"
n=0
for p in "${patches[@]}"; do
	n=$((n + 1))
	# checkpatch asks "does MAINTAINERS need updating?" for every added
	# file; the question is answered when an existing entry names a
	# maintainer for each of them.
	ignore=
	added=$(awk '/^--- \/dev\/null$/ { getline; sub("^[+][+][+] b/", ""); print }' "$out/$p")
	if [ -n "$added" ] && ! grep -q '^+++ b/MAINTAINERS$' "$out/$p"; then
		ignore=--ignore=FILE_PATH_CHANGES
		for f in $added; do
			m=$(cd "$tree" && ./scripts/get_maintainer.pl --no-git \
				--no-git-fallback --nol --nor -f "$f" 2>/dev/null \
				| grep -v "THE REST" || true)
			[ -n "$m" ] || ignore=
		done
	fi
	# build/linux has no upstream history, so checkpatch cannot look up
	# the ids of Fixes: tags (UNKNOWN_COMMIT_ID): the test after this loop
	# checks them against patches/fixes.txt.
	ignore="$ignore --ignore=UNKNOWN_COMMIT_ID"
	# /usr/bin first: spdxcheck.py needs python3-ply, which only the
	# distribution python has.
	if log=$(cd "$tree" && PATH=/usr/bin:$PATH ./scripts/checkpatch.pl --strict $ignore "$out/$p" 2>&1); then
		echo "ok $n checkpatch --strict $p"
	else
		echo "not ok $n checkpatch --strict $p"
		printf '%s\n' "$log" | sed 's/^/# /'
	fi
done

# Every Fixes: tag names a commit checked against the kernel's history,
# with its subject as it is there (patches/fixes.txt).
n=$((n + 1))
bad=$(cd "$out" && grep -H '^Fixes:' "${patches[@]}" 2>/dev/null |
	while IFS= read -r l; do
		grep -qxF "${l#*:}" "$top/patches/fixes.txt" || printf '%s\n' "$l"
	done)
nfix=$(cd "$out" && cat "${patches[@]}" /dev/null | grep -c '^Fixes:' || true)
if [ -z "$bad" ] && [ "$nfix" -gt 0 ]; then
	echo "ok $n all $nfix Fixes: tags are in patches/fixes.txt"
else
	echo "not ok $n Fixes: tags not in patches/fixes.txt (or none at all)"
	printf '%s\n' "$bad" | sed 's/^/# /'
fi

# A pristine v7.3 work tree at the base tag, the series applied with git am.
n=$((n + 1))
am=$top/build/series-am
rm -rf "$am"
git -C "$tree" worktree prune
git -C "$tree" worktree add -q --detach "$am" v7.3-base
ok=1
if [ ${#patches[@]} -gt 0 ]; then
	(cd "$out" && git -C "$am" -c user.name=am -c user.email=am@localhost \
		am -q --whitespace=error-all "${patches[@]/#/$out/}") >&2 || ok=0
fi
want=$(git -C "$tree" rev-parse 'HEAD^{tree}')
got=$(git -C "$am" rev-parse 'HEAD^{tree}')
git -C "$tree" worktree remove --force "$am"
if [ $ok = 1 ] && [ "$want" = "$got" ]; then
	echo "ok $n git am of ${#patches[@]} patches onto pristine v7.3 gives the tree of build/linux"
else
	echo "not ok $n git am onto pristine v7.3 (am ok=$ok, tree $got, want $want)"
fi
