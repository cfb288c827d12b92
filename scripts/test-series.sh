#!/bin/bash
# Round trip of the series model with a throwaway fixture, on a scratch
# copy of the repo and a scratch clone of build/linux (the real ones are
# not touched): tree -> commit -> export -> tree must reproduce the same
# commits, export must be stable, and tree must refuse to discard work.
# Prints TAP.
#
# usage: scripts/test-series.sh
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
series="python3 $top/scripts/series.py"
scratch=$top/build/test-series
rm -rf "$scratch"
mkdir -p "$scratch/repo"
repo=$scratch/repo tree=$scratch/linux
# The repo's series as it is now, as the starting point.
(cd "$top" && git ls-files -z patches | xargs -0 -r cp --parents -t "$repo")
(cd "$top" && awk '!/^#/ {for (i = 2; i <= NF; i++) print $i}' patches/series 2>/dev/null |
	xargs -r cp --parents -t "$repo")
git clone -q --shared --no-checkout "$top/build/linux" "$tree"
git -C "$tree" config user.name fixture
git -C "$tree" config user.email fixture@localhost

n=0
check() {
	n=$((n + 1))
	local what=$1
	shift
	# A subshell that is not a condition, so that set -e holds inside the
	# step functions too.
	set +e
	(set -e; "$@") > "$scratch/log" 2>&1
	local rc=$?
	set -e
	if [ $rc = 0 ]; then
		echo "ok $n $what"
	else
		echo "not ok $n $what"
		sed 's/^/# /' "$scratch/log" | tail -n 20
	fi
}
echo "TAP version 13"
echo "1..12"

check "tree builds from the repo's series" $series tree --repo "$repo" --tree "$tree" --force
base_n=$(git -C "$tree" rev-list --count v7.3-base..HEAD)

# Fixture: one commit that changes an upstream file and adds one of ours,
# one that only adds, one that only changes (with a mode and a rename-free
# delete of nothing: keep it simple and common).
fixture() {
	cd "$tree"
	echo "/* fixture */" >> drivers/infiniband/sw/rxe/rxe.c
	mkdir -p drivers/infiniband/sw/rxe
	printf '// SPDX-License-Identifier: GPL-2.0\n/* fixture one */\n' > drivers/infiniband/sw/rxe/fixture_one.c
	git add drivers/infiniband/sw/rxe/rxe.c drivers/infiniband/sw/rxe/fixture_one.c
	GIT_AUTHOR_DATE="2026-11-01T10:00:00+01:00" git commit -q -m "RDMA/rxe: fixture change and add" \
		-m "Body line one.

Signed-off-by: Revoke Team <revoke@example.org>"
	mkdir -p tools/testing/selftests/rdma
	printf '#!/bin/sh\necho fixture\n' > tools/testing/selftests/rdma/fixture_two.sh
	chmod +x tools/testing/selftests/rdma/fixture_two.sh
	git add tools/testing/selftests/rdma/fixture_two.sh
	GIT_AUTHOR_DATE="2026-11-02T10:00:00Z" git commit -q -m "selftests/rdma: fixture only adds" \
		-m "Signed-off-by: Revoke Team <revoke@example.org>"
	sed -i '1a /* fixture three */' drivers/infiniband/core/umem_dmabuf.c
	git add drivers/infiniband/core/umem_dmabuf.c
	git commit -q --author "Someone Else <else@example.org>" -m "RDMA/core: fixture only changes" \
		-m "Signed-off-by: Someone Else <else@example.org>"
}
check "fixture commits made in the tree" fixture
# What must survive a round trip, commit by commit: the tree, the author,
# the author date and the message. (The committer is the tool's own.)
fingerprint() {
	git -C "$tree" log --reverse --format='%T %an <%ae> %aI%n%B' v7.3-base..HEAD
}
want=$(fingerprint)

check "tree refuses to discard unexported commits" \
	sh -c "! $series tree --repo '$repo' --tree '$tree'"
check "export writes the fixture" $series export --repo "$repo" --tree "$tree"

verify_export() {
	local s=$repo/patches/series
	[ "$(grep -vc '^#' "$s")" = $((base_n + 3)) ] || { echo "wrong entry count"; cat "$s"; return 1; }
	grep -q -- "-RDMA-rxe-fixture-change-and-add.patch drivers/infiniband/sw/rxe/fixture_one.c$" "$s"
	grep -q -- "-selftests-rdma-fixture-only-adds.patch tools/testing/selftests/rdma/fixture_two.sh$" "$s"
	grep -q -- "-RDMA-core-fixture-only-changes.patch$" "$s"
	[ -x "$repo/tools/testing/selftests/rdma/fixture_two.sh" ]
	cmp "$repo/drivers/infiniband/sw/rxe/fixture_one.c" \
	    <(git -C "$tree" show HEAD~2:drivers/infiniband/sw/rxe/fixture_one.c)
	local p
	p=$(ls "$repo"/patches/*-RDMA-rxe-fixture-change-and-add.patch)
	# The patch holds the change to the upstream file, not our new file.
	grep -q '^+++ b/drivers/infiniband/sw/rxe/rxe.c' "$p"
	! grep -q 'fixture_one' "$p"
}
check "export: one entry per commit, new files in the repo, changes in patches" verify_export

check "tree from the exported series" $series tree --repo "$repo" --tree "$tree"
check "round trip keeps every commit's tree, author, date and message" \
	test "$(fingerprint)" = "$want"
check "a second round trip reproduces the same commit ids" sh -c "
	h=\$(git -C '$tree' rev-parse HEAD)
	$series export --repo '$repo' --tree '$tree' &&
	$series tree --repo '$repo' --tree '$tree' &&
	test \"\$(git -C '$tree' rev-parse HEAD)\" = \"\$h\""

snapshot=$scratch/snapshot
cp -a "$repo" "$snapshot"
check "export again" $series export --repo "$repo" --tree "$tree"
check "export is stable (byte-identical repo)" diff -r "$snapshot" "$repo"

echo "/* dirty */" >> "$tree/drivers/infiniband/core/umem.c"
check "tree refuses to discard uncommitted changes" \
	sh -c "! $series tree --repo '$repo' --tree '$tree'"

# Rework with plain git (drop the middle commit) and export the result.
rework() {
	git -C "$tree" checkout -q -- drivers/infiniband/core/umem.c
	git -C "$tree" rebase -q --onto HEAD~2 HEAD~1
	$series export --repo "$repo" --tree "$tree"
	[ ! -e "$repo/tools/testing/selftests/rdma/fixture_two.sh" ]
	! grep -q fixture-only-adds "$repo/patches/series"
	[ "$(ls "$repo"/patches/*.patch | wc -l)" = $((base_n + 2)) ]
	local f
	f=$(fingerprint)
	$series tree --repo "$repo" --tree "$tree"
	[ "$(fingerprint)" = "$f" ]
}
check "a rebase in the tree exports and rebuilds losslessly" rework
rm -rf "$scratch"
