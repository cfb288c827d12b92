#!/bin/bash
# Build rdma-core as its pull request would leave it: rdma-core 65.0 (the
# newest in Debian, sid's orig tarball, checked against the SHA256 of the
# archive's signed Sources index) with rdma-core/upstream-pr/*.patch, in
# place (cmake -DIN_PLACE=1) with pyverbs. It is the guests' one rdma-core:
# scripts/vm/guest-init mounts its libraries over the host's of the same
# soname (libibverbs, librdmacm, and libmlx5, libefa, libmana and libmlx4,
# which use libibverbs' private ABI, the build's own: perftest loads two of
# them), and this libibverbs, built in place, loads its providers, rxe's
# with reg_dmabuf_mr among them, from the build tree; rdma-core's own tests
# (build/bin/run_tests.py, tests/test_mr.py's dma-buf tests) run from it
# too (scripts/vm/rdma-core-tests.sh). Builds what they load: those
# libraries, every provider and pyverbs, and checks that each library
# exports every versioned symbol the host's of its name does.
#
# usage: scripts/rdma-core-pr.sh [BUILD_DIR]
# Output: BUILD_DIR/rdma-core-pr/obj/bin/run_tests.py (prints its path).
# Does nothing when it is built from the same source and patches.
# FETCH_ONLY=1 (make fetch): only download the tarball, if not cached.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$top/build}
SUITE=${RDMA_CORE_PR_SUITE:-sid}
VERSION=${RDMA_CORE_PR_VERSION:-65.0}
out=$BUILD/rdma-core-pr
src=$out/src
obj=$out/obj
pdir=$top/rdma-core/upstream-pr
die() { echo "rdma-core-pr: $*" >&2; exit 1; }

mapfile -t patches < <(cd "$pdir" && ls [0-9][0-9][0-9][0-9]-*.patch)
[ ${#patches[@]} -gt 0 ] || die "no patches in $pdir"
# Debian's python3, whose cython3 builds pyverbs (not a python3 that PATH
# may find first, e.g. pyenv's, without Cython); the guests run the tests
# with it too.
cmake_flags=(-GNinja -DIN_PLACE=1 -DCMAKE_BUILD_TYPE=Release -DNO_MAN_PAGES=1
	     -DENABLE_STATIC=0 -DPYTHON_EXECUTABLE=/usr/bin/python3)
stamp=$({
	echo "$VERSION"
	echo "${cmake_flags[*]}"
	echo "libraries and providers for the guests"
	for p in "${patches[@]}"; do echo "$p"; cat "$pdir/$p"; done
} | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$obj/bin/run_tests.py" ]; then
	echo "$obj/bin/run_tests.py"
	exit 0
fi

# The orig tarball only: the pull request is made on upstream's source.
name=rdma-core_$VERSION.orig.tar.gz
mkdir -p "$out"
if ! [ -f "$out/$name.sha256" ] ||
   ! (cd "$out" && sha256sum --quiet -c "$name.sha256") >/dev/null 2>&1; then
	# shellcheck source=scripts/apt-private.sh
	. "$top/scripts/apt-private.sh"
	APT_PRIVATE_SRC=1 apt_private "$out/apt" "$SUITE"
	apt_private_update "$out/apt" || exit 1
	# shellcheck disable=SC2154 # apt_opts, from apt_private
	ver=$(apt-cache "${apt_opts[@]}" showsrc rdma-core 2>/dev/null |
		sed -n "s/^Version: \($VERSION-.*\)/\1/p" | sort -V | tail -n1)
	[ -n "$ver" ] || die "no rdma-core $VERSION-* in $SUITE's Sources"
	line=$(apt-get "${apt_opts[@]}" -qq --print-uris source \
		"rdma-core=$ver" 2>/dev/null | grep " $name ") ||
		die "no $name in $SUITE's Sources"
	read -r uri _ _ hash <<< "$line"
	uri=${uri#\'}
	uri=${uri%\'}
	[ "${hash%%:*}" = SHA256 ] || die "no SHA256 for $name in the index"
	rm -f "$out/$name"
	/usr/lib/apt/apt-helper "${apt_opts[@]}" -qq download-file "$uri" \
		"$out/$name" "$hash" >&2 || die "cannot fetch $uri"
	echo "${hash#SHA256:}  $name" > "$out/$name.sha256"
fi
if [ "${FETCH_ONLY:-}" = 1 ]; then
	echo "rdma-core-pr: $name fetched" >&2
	exit 0
fi
for t in cmake ninja cython3 pkg-config gcc patch; do
	command -v "$t" >/dev/null || die "$t is missing: run make deps"
done

rm -rf "$src" "$obj" "$out/.stamp"
mkdir -p "$src"
tar -xf "$out/$name" -C "$src" --strip-components=1
for p in "${patches[@]}"; do
	patch -d "$src" -p1 -s --no-backup-if-mismatch < "$pdir/$p" ||
		die "$p does not apply to rdma-core $VERSION"
done

mkdir -p "$top/build"
exec 9>"${BUILD_LOCK:-$top/build/.build.lock}"
flock -n 9 || { echo "rdma-core-pr: waiting for another build to finish" >&2; flock 9; }
echo "rdma-core-pr: building rdma-core $VERSION + ${#patches[@]} patches in place, with pyverbs" >&2
nice -n 10 cmake -S "$src" -B "$obj" "${cmake_flags[@]}" > "$out/cmake.log" 2>&1 || {
	tail -n 30 "$out/cmake.log" >&2
	die "cmake failed (log: $out/cmake.log)"
}
grep -q "^FIND_PACKAGE_MESSAGE_DETAILS_cython:" "$obj/CMakeCache.txt" ||
	die "cmake found no Cython: pyverbs would not be built (log: $out/cmake.log)"
# pyverbs (every python/ target), the providers (the guests' libibverbs
# loads every one its config names, and warns for each that is missing),
# the libraries of soname .so.1 and the test runner.
mapfile -t targets < <(ninja -C "$obj" -t targets all |
	sed -n 's/^\(python\/[^:]*\.so\): .*/\1/p; s/^\(lib\/lib[^:/]*-rdmav[0-9]*\.so\): .*/\1/p;
		s/^\(lib\/lib[a-z0-9_]*\.so\.1\): .*/\1/p;
		s/^\(bin\/run_tests\.py\): .*/\1/p; s/^\(etc\/libibverbs\.d\/rxe\.driver\): .*/\1/p' |
	sort -u)
[ ${#targets[@]} -gt 10 ] || die "no pyverbs targets in the build"
nice -n 10 ninja -C "$obj" -j2 "${targets[@]}" > "$out/ninja.log" 2>&1 || {
	tail -n 30 "$out/ninja.log" >&2
	die "build failed (log: $out/ninja.log)"
}
exec 9>&-
[ -x "$obj/bin/run_tests.py" ] || die "no $obj/bin/run_tests.py after the build"

# What the guests mount over the host's libraries must stand in for them:
# every versioned symbol a host library exports (the host's programs may
# use it) must be exported by the built one of the same soname, private
# ABIs aside (IBVERBS_PRIVATE_NN belongs to one build: every host library
# that uses it is replaced as well, and the built libibverbs loads only
# the built providers).
ma=$(gcc -dumpmachine)
exports() {
	objdump -T "$1" | awk '$0 !~ /\*UND\*/ && NF >= 3 {
		v = $(NF-1); gsub(/[()]/, "", v)
		if (v ~ /^[A-Z0-9]+_[0-9.]+$/) print $NF "@" v
	}' | sort -u
}
mounted=0
for built in "$obj"/lib/lib*.so.1; do
	host=/usr/lib/$ma/${built##*/}
	[ -e "$host" ] || continue
	missing=$(comm -23 <(exports "$(readlink -f "$host")") <(exports "$(readlink -f "$built")"))
	[ -z "$missing" ] || die "the built ${built##*/} lacks symbols of the host's: $missing"
	mounted=$((mounted + 1))
done
[ "$mounted" -gt 0 ] || die "no built library has the soname of a host library"
while read -r host; do
	[ -L "$host" ] && continue
	soname=$(objdump -p "$host" | awk '$1 == "SONAME" { print $2 }')
	[ -e "$obj/lib/$soname" ] ||
		die "$host uses libibverbs' private ABI and the build has no $soname to replace it"
done < <(grep -l 'IBVERBS_PRIVATE_' /usr/lib/"$ma"/lib*.so.* 2>/dev/null)
for d in "$obj"/etc/libibverbs.d/*.driver; do
	p=$(awk '$1 == "driver" { print $2 }' "$d")
	compgen -G "$p-rdmav*.so" > /dev/null || die "$d names $p, which was not built"
done
strings "$obj/lib/libibverbs.so.1" | grep -qxF "$obj/etc/libibverbs.d" ||
	die "the built libibverbs does not read its providers from $obj/etc/libibverbs.d"
echo "$stamp" > "$out/.stamp"
echo "rdma-core-pr: $obj/bin/run_tests.py" >&2
echo "$obj/bin/run_tests.py"
