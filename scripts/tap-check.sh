# shellcheck shell=bash
# Sourced by the harness's tests of its own scripts (scripts/test-fetch.sh,
# test-progress.sh, test-requirements.sh, test-one-check.sh): a scratch
# directory $tmp, removed at exit, and one TAP result per check.
#
#   check WHAT CMD...  "ok N WHAT" when CMD succeeds; else "not ok N WHAT"
#                      with the last 40 lines of $tmp/out (the output the
#                      test keeps there) as diagnostics
#   $failed            how many checks failed so far
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 failed=0
check() {
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n $what"
	else
		failed=$((failed + 1))
		echo "not ok $n $what"
		tail -n 40 "$tmp/out" 2>/dev/null | sed 's/^/# /'
	fi
}
