# shellcheck shell=bash
# Sourced by scripts/fetch.sh and scripts/dkms-fetch.sh: apt with its own
# state in a directory of ours, so that the host's apt configuration, lists
# and status are never read or changed.
#
# usage: apt_private DIR SUITE...   sets the array apt_opts (pass it to
#   apt-get and apt-cache) and writes DIR/sources.list for SUITE... of
#   $DEBIAN_MIRROR (default deb.debian.org); then run apt_private_update.
#   With APT_PRIVATE_SRC=1 the list has deb-src lines too (apt-get source).

apt_private() {
	local dir suite
	dir=$(realpath -m "$1")
	shift
	local mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
	local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/parts"
	: > "$dir/sources.list.new"
	for suite in "$@"; do
		echo "deb [signed-by=$keyring] $mirror $suite main" >> "$dir/sources.list.new"
		[ "${APT_PRIVATE_SRC:-}" != 1 ] ||
			echo "deb-src [signed-by=$keyring] $mirror $suite main" >> "$dir/sources.list.new"
	done
	# A new file, not a rewrite in place: a build directory made with
	# `cp -al` shares its inodes with another checkout's.
	mv "$dir/sources.list.new" "$dir/sources.list"
	rm -f "$dir/status"
	: > "$dir/status"
	apt_opts=(
		-o "Dir::Etc::SourceList=$dir/sources.list"
		-o "Dir::Etc::SourceParts=$dir/parts"
		-o "Dir::Etc::Preferences=/dev/null"
		-o "Dir::Etc::PreferencesParts=$dir/parts"
		-o "Dir::State=$dir"
		-o "Dir::State::Lists=$dir/lists"
		-o "Dir::State::status=$dir/status"
		-o "Dir::Cache=$dir/cache"
		-o "APT::Architecture=amd64"
		-o "APT::Architectures=amd64"
		-o "Debug::NoLocking=1"
		-o "APT::Sandbox::User=root"
	)
}

# apt-get update with the options above; fails on any error or warning.
apt_private_update() {
	local dir
	dir=$(realpath -m "$1")
	rm -f "$dir/update.err"
	if ! apt-get "${apt_opts[@]}" -qq update 2>"$dir/update.err" ||
	   grep -q '^[EW]:' "$dir/update.err"; then
		cat "$dir/update.err" >&2
		echo "apt: cannot read $(sed 's/.*\] //' "$dir/sources.list" | tr '\n' ' ')(is the Debian archive reachable?)" >&2
		return 1
	fi
}
