# shellcheck shell=bash
# Sourced by the root-only checks that run host steps and guests in turn
# (scripts/dkms-check.sh, scripts/deb-check.sh): a heading, seconds since,
# and one TAP file per host step in $res (the caller sets it).
# shellcheck disable=SC2154 # $res is the caller's

log() { printf '\n### %s\n' "$*"; }
since() { echo "$(( $(date +%s) - $1 ))"; }

# step FILE NAME CMD...: run CMD with its output in $res/FILE.log; write
# $res/FILE.tap, "ok|not ok 1 NAME (Ns)" with the log's tail on failure,
# and print its result line. Returns CMD's status.
step() {
	local file=$1 name=$2
	shift 2
	local t0 rc
	t0=$(date +%s)
	"$@" > "$res/$file.log" 2>&1
	rc=$?
	{
		echo "TAP version 13"
		echo "1..1"
		if [ $rc = 0 ]; then
			echo "ok 1 $name ($(since "$t0")s)"
		else
			echo "not ok 1 $name (exit $rc, $(since "$t0")s)"
			tail -n 30 "$res/$file.log" | sed 's/^/# /'
		fi
	} > "$res/$file.tap"
	sed '/^TAP version/d; /^1\.\./d' "$res/$file.tap"
	return $rc
}
