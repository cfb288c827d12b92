#!/bin/bash
# What make test needs of the machine, checked before it downloads or
# builds anything (make test and .ci/run call it first):
#
#   disk    20 GiB for build/: a fresh clone's make test filled 10 GB
#           (Debian's packages, three kernel trees, the debug kernel's
#           build, the mail trees), and ccache may grow to 8 GB
#           (CCACHE_MAXSIZE). What build/ already holds counts as free.
#   memory  8 GiB: each guest has 4 GiB (the benchmark's 6 GiB), and the
#           debug kernel's build runs beside the guests.
#   cores   2: with one, every step runs one after the other (a warning).
#   host    Debian bookworm, the only release it was tested on: deps.sh
#           installs bookworm's packages. Elsewhere (a warning) it may
#           fail in deps.sh or in a build, and no result of it was seen.
#
# A shortage of disk or memory fails (exit 1) unless REQUIREMENTS=warn.
# REQ_* stand in for the machine (scripts/test-requirements.sh):
# REQ_OS_RELEASE, REQ_MEMINFO (files), REQ_NPROC, REQ_AVAIL_KB, REQ_BUILD_KB.
#
# usage: scripts/requirements.sh [BUILD_DIR]
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
mkdir -p "$build"
gib=$((1024 * 1024))
need_disk=$((20 * gib)) need_mem=$((8 * gib))
bad=0

say() { echo "requirements: $*"; }
short() {
	if [ "${REQUIREMENTS:-}" = warn ]; then
		say "warning: $* (REQUIREMENTS=warn: going on)"
	else
		say "$* (REQUIREMENTS=warn tries anyway)"
		bad=1
	fi
}
g() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1048576 }'; }

avail=${REQ_AVAIL_KB:-$(df -Pk "$build" | awk 'NR == 2 { print $4 }')}
held=${REQ_BUILD_KB:-$(du -sk "$build" 2>/dev/null | cut -f1)}
if [ $((avail + held)) -lt "$need_disk" ]; then
	short "disk: $(g "$avail") GiB free and $(g "$held") GiB in build/ ($build); make test needs $(g "$need_disk") GiB for build/"
fi

mem=$(awk '/^MemTotal:/ { print $2 }' "${REQ_MEMINFO:-/proc/meminfo}")
if [ "${mem:-0}" -lt "$need_mem" ]; then
	short "memory: $(g "${mem:-0}") GiB; make test needs $(g "$need_mem") GiB (4-6 GiB guests beside a kernel build)"
fi

cores=${REQ_NPROC:-$(nproc)}
if [ "$cores" -lt 2 ]; then
	say "warning: $cores core: the builds and the guests run one after the other, and make test takes longer than its hour"
fi

# shellcheck source=/dev/null
codename=$(. "${REQ_OS_RELEASE:-/etc/os-release}" && echo "${VERSION_CODENAME:-${ID:-unknown}}")
if [ "$codename" != bookworm ]; then
	say "warning: host $codename: make test was tested on Debian bookworm only; scripts/deps.sh installs bookworm's package names, and here a package, a build or a guest may fail where it did not there"
fi

[ "$bad" = 0 ] || exit 1
say "ok: $(g $((avail + held))) GiB for build/, $(g "$mem") GiB of memory, $cores cores, $codename"
