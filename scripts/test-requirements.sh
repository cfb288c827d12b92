#!/bin/bash
# scripts/requirements.sh on made-up machines (REQ_* stand in for df, du,
# /proc/meminfo, nproc and /etc/os-release): enough passes; too little disk
# or memory fails and says how much is needed, unless REQUIREMENTS=warn;
# one core and another release than bookworm are warnings; what build/
# already holds counts as free. Prints TAP.
# shellcheck disable=SC2016 # the checks are eval'd
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/tap-check.sh
. "$top/scripts/tap-check.sh"

gib=$((1024 * 1024))
printf 'ID=debian\nVERSION_CODENAME=bookworm\n' > "$tmp/bookworm"
printf 'ID=debian\nVERSION_CODENAME=trixie\n' > "$tmp/trixie"
mem() { echo "MemTotal:       $(($1 * gib)) kB" > "$tmp/meminfo"; }
# req AVAIL_GIB BUILD_GIB MEM_GIB CORES RELEASE [VAR=VALUE...]
req() {
	mem "$3"
	env REQ_AVAIL_KB=$(($1 * gib)) REQ_BUILD_KB=$(($2 * gib)) \
		REQ_MEMINFO="$tmp/meminfo" REQ_NPROC="$4" REQ_OS_RELEASE="$tmp/$5" \
		"${@:6}" "$top/scripts/requirements.sh" "$tmp/build" > "$tmp/out" 2>&1
}

echo "TAP version 13"
echo "1..8"
check "enough of everything on bookworm passes, with no warning" \
	eval 'req 30 0 16 2 bookworm && grep -q "^requirements: ok: 30.0 GiB for build/, 16.0 GiB of memory, 2 cores, bookworm$" "$tmp/out" &&
	      ! grep -q warning "$tmp/out"'
check "too little disk fails, saying what is free and what is needed" \
	eval '! req 12 0 16 2 bookworm &&
	      grep -q "^requirements: disk: 12.0 GiB free and 0.0 GiB in build/ .*needs 20.0 GiB" "$tmp/out"'
check "what build/ already holds counts as free" \
	eval 'req 8 14 16 2 bookworm'
check "too little memory fails, saying what is needed" \
	eval '! req 30 0 4 2 bookworm && grep -q "^requirements: memory: 4.0 GiB; make test needs 8.0 GiB" "$tmp/out"'
check "REQUIREMENTS=warn turns a shortage into a warning" \
	eval 'req 30 0 4 2 bookworm REQUIREMENTS=warn &&
	      grep -q "^requirements: warning: memory: 4.0 GiB" "$tmp/out"'
check "one core is a warning, not a failure" \
	eval 'req 30 0 16 1 bookworm && grep -q "^requirements: warning: 1 core:" "$tmp/out"'
check "another release than bookworm is a warning that says what was tested" \
	eval 'req 30 0 16 2 trixie && grep -q "^requirements: warning: host trixie: make test was tested on Debian bookworm only" "$tmp/out"'
check "this machine, as it is, has what make test needs" \
	eval '"$top/scripts/requirements.sh" > "$tmp/out" 2>&1'
[ "$failed" = 0 ]
