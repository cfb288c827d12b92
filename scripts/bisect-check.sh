#!/bin/bash
# Bisectability: build every commit of the series on its own. For each
# commit from v7.3-base to build/linux's HEAD, in order, in one git
# worktree (build/bisect): the out-of-tree modules, hardware drivers
# included (scripts/oot.sh with OOT_HW=1; kbuild rebuilds only what the
# commit changed), and the rdma and dma-buf selftests. The in-tree kernel is
# not rebuilt per commit (minutes each); `make kernel-debug` builds the tip.
# Prints TAP, one line per commit.
#
# usage: scripts/bisect-check.sh
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
wt=$top/build/bisect
logs=$top/build/bisect-logs
mapfile -t commits < <(git -C "$tree" rev-list --reverse v7.3-base..HEAD)
git -C "$tree" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
git -C "$tree" worktree prune
git -C "$tree" worktree add -q --detach "$wt" v7.3-base
trap 'git -C "$tree" worktree remove --force "$wt"' EXIT
rm -rf "$logs"
mkdir -p "$logs"

echo "TAP version 13"
echo "1..${#commits[@]}"
n=0
for c in "${commits[@]}"; do
	n=$((n + 1))
	git -C "$wt" checkout -q --detach "$c"
	subject=$(git -C "$wt" log -1 --format=%s)
	ok=1
	log=$logs/$(printf %02d $n).log
	{
		echo "### $n $c $subject"
		OOT_TREE=build/bisect OOT_HW=1 "$top/scripts/oot.sh" || ok=0
		# The selftests build against this commit's uapi headers.
		make -s -C "$wt" O="$top/build/bisect-kselftest" headers \
			>/dev/null || ok=0
		make -s -C "$wt/tools/testing/selftests" \
			TARGETS="rdma drivers/dma-buf" O="$top/build/bisect-kselftest" \
			>/dev/null || ok=0
	} > "$log" 2>&1
	# Warnings count too: every commit must build as cleanly as the tip.
	grep -E "(warning|error):" "$log" | grep -v "pahole version" | grep -q . && ok=0
	if [ $ok = 1 ]; then
		echo "ok $n builds alone: $subject"
	else
		echo "not ok $n builds alone: $subject (log: $log)"
	fi
done
