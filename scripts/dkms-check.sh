#!/bin/bash
# `make dkms-check`: the dmabuf_mock DKMS package on Debian's kernels.
# For each of bookworm's 6.1, trixie's 6.12 and trixie-backports' 7.3:
#   - the kernel (image, modules, headers) is fetched (scripts/dkms-fetch.sh)
#     and installed, with dkms, in a stock Debian root of its release made
#     with debootstrap (scripts/dkms-root.sh; the 7.3 one is trixie with
#     backports enabled);
#   - in a throw-away overlay on that root, as root in a chroot:
#     dkms add (the tree scripts/dkms.sh generates), dkms build -k,
#     dkms install -k, dkms status;
#   - QEMU boots that kernel (scripts/vm.sh -K/-M) with the root's module
#     tree as dkms left it, loads the installed module and runs the mock's
#     kselftest (scripts/vm/dkms-selftest.sh), checked against
#     scripts/dkms/expected-skips (scripts/dkms-tap.py).
# TAP per kernel in build/dkms/results/, then "N passed, N failed".
# Needs root (debootstrap, chroot, mounts) and `make fetch` (the 7.3
# source, for the kselftest harness and uapi headers).
#
# usage: scripts/dkms-check.sh [KERNEL...]   (default: all; KERNEL is a
#   substring of a release, e.g. 6.1.0 or 7.3)
# Environment: DKMS_SRC=DIR take dmabuf_mock.{c,h} from DIR (scripts/dkms.sh
#   -s), DKMS_SELFTEST_SRC=DIR the kselftest's dmabuf_mock.c and
#   dmabuf_mock_utils.h from DIR; VM_LOCK, BUILD_LOCK, ACCEL as for vm.sh.
set -eu

[ "$(id -u)" = 0 ] || { echo "dkms-check: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
# The overlays and chroot mounts live in a mount namespace of our own and
# vanish with it, whatever happens.
if [ -z "${DKMS_CHECK_UNSHARED:-}" ]; then
	DKMS_CHECK_UNSHARED=1 exec unshare --mount --propagation private "$0" "$@"
fi

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
dk=$build/dkms
res=$dk/results
start=$(date +%s)
# release of the root, then the suites whose kernels it gets
roots=("bookworm bookworm" "trixie trixie trixie-backports")
mkdir -p "$res"
rm -f "$res"/*.tap "$res"/*.log

# shellcheck source=scripts/tap-step.sh
. "$top/scripts/tap-step.sh"

log "package: generate the DKMS tree"
if ! step package "package: scripts/dkms.sh${DKMS_SRC:+ -s $DKMS_SRC}" \
	"$top/scripts/dkms.sh" ${DKMS_SRC:+-s "$DKMS_SRC"}; then
	python3 "$top/scripts/tap-sum.py" "$res"/*.tap
	exit 1
fi
pkg=$(tail -n1 "$res/package.log")
version=${pkg##*/dmabuf-mock-}
echo "# $pkg"

log "kernels: fetch, and the Debian roots that install them"
suites=()
for r in "${roots[@]}"; do
	read -ra s <<< "$r"
	suites+=("${s[@]:1}")
done
step fetch "fetch: Debian kernels of ${suites[*]}" \
	"$top/scripts/dkms-fetch.sh" "${suites[@]}" || true
for r in "${roots[@]}"; do
	read -ra s <<< "$r"
	step "root-${s[0]}" "root: debootstrap ${s[0]} + dkms + kernels of ${s[*]:1}" \
		"$top/scripts/dkms-root.sh" "${s[@]}" || true
done

log "kselftest: build tools/testing/selftests/drivers/dma-buf/dmabuf_mock"
sel=$dk/selftest
# (Called from step, where set -e does not act: each step checks itself.)
build_selftest() {
	local src=$build/linux-src
	local tsrc=${DKMS_SELFTEST_SRC:-$top/tools/testing/selftests/drivers/dma-buf}
	local hsrc=${DKMS_SRC:-$top/drivers/dma-buf}
	local st=$sel/stage/tools/testing/selftests
	[ -f "$src/Makefile" ] || { echo "no $src: run make fetch" >&2; return 1; }
	if [ ! -f "$sel/hdr/usr/include/linux/dma-buf.h" ]; then
		make -s -C "$src" O="$sel/hdr" headers || return 1
	fi
	rm -rf "$sel/stage" "$sel/dmabuf_mock" "$sel/cases"
	mkdir -p "$st/drivers/dma-buf" "$sel/stage/drivers/dma-buf" || return 1
	cp "$src"/tools/testing/selftests/*.h "$st/" &&
	cp "$tsrc/dmabuf_mock.c" "$tsrc/dmabuf_mock_utils.h" "$st/drivers/dma-buf/" &&
	cp "$hsrc/dmabuf_mock.h" "$sel/stage/drivers/dma-buf/" || return 1
	# As kselftest's lib.mk: _GNU_SOURCE, the tree's uapi headers.
	gcc -O2 -Wall -D_GNU_SOURCE= -isystem "$sel/hdr/usr/include" -I"$st" \
		-o "$sel/dmabuf_mock" "$st/drivers/dma-buf/dmabuf_mock.c" || return 1
	# -l lists the cases (on stderr) and exits with KSFT_SKIP.
	"$sel/dmabuf_mock" -l 2> "$sel/cases"
	grep -q '^# FIXTURE' "$sel/cases" || { cat "$sel/cases"; return 1; }
	cat "$sel/cases"
}
step selftest "kselftest: dmabuf_mock built (7.3 harness and uapi)" build_selftest || true

# A build log that exists and has no compiler warning (they are printed).
no_warnings() {
	[ -f "$1" ] || { echo "no $1" >&2; return 1; }
	! grep -i 'warning:' "$1"
}

# In the overlay of one root: dkms for each of its kernels, then a guest.
filters=("$@")
want() {
	[ ${#filters[@]} = 0 ] && return 0
	local k
	for k in "${filters[@]}"; do
		case $1 in *"$k"*) return 0 ;; esac
	done
	return 1
}
for r in "${roots[@]}"; do
	read -ra s <<< "$r"
	rel=${s[0]}
	root=$dk/roots/$rel
	[ -f "$root/.dkms-root" ] || continue
	ov=$dk/run/$rel
	rm -rf "$ov"
	mkdir -p "$ov/upper" "$ov/work" "$ov/merged"
	mount -t overlay -o "lowerdir=$root,upperdir=$ov/upper,workdir=$ov/work" \
		"dkms-$rel" "$ov/merged"
	m=$ov/merged
	mount -t proc proc "$m/proc"
	mount --bind /dev "$m/dev"
	in_root() {
		chroot "$m" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 "$@"
	}
	cp -a "$pkg" "$m/root/"
	log "$rel: dkms add dmabuf-mock/$version"
	step "dkms-$rel-add" "$rel: dkms add /root/dmabuf-mock-$version" \
		in_root dkms add "/root/dmabuf-mock-$version" || true
	for s1 in "${s[@]:1}"; do
		[ -f "$dk/debs/$s1/kernel" ] || continue
		krel=$(sed -n 's/^KREL=//p' "$dk/debs/$s1/kernel")
		want "$krel" || continue
		log "$krel ($s1): dkms build, install, status; the guest"
		step "dkms-$krel-build" "$krel: dkms build dmabuf-mock/$version -k $krel" \
			in_root dkms build "dmabuf-mock/$version" -k "$krel" || true
		cp "$m/var/lib/dkms/dmabuf-mock/$version/$krel/x86_64/log/make.log" \
			"$res/dkms-$krel-make.log" 2>/dev/null || true
		step "dkms-$krel-warnings" "$krel: no compiler warning in dkms's make.log" \
			no_warnings "$res/dkms-$krel-make.log" || true
		# Every helper of the compat header, built the way the package
		# builds (W=1, warnings are errors); the guest loads it.
		ct=$m/root/compat-test-$krel
		mkdir -p "$ct"
		cp "$pkg/dmabuf_mock_compat.h" "$pkg/dmabuf_mock_probe.sh" \
			"$top/scripts/dkms/dmabuf_mock_compat_test.c" "$ct/"
		# The headers an older kernel lacks, which Kbuild searches.
		cp -r "$pkg/compat-include" "$ct/"
		sed 's/^obj-m := dmabuf_mock\.o$/obj-m := dmabuf_mock_compat_test.o/' \
			"$pkg/Kbuild" > "$ct/Kbuild"
		rm -f "$dk/run/compat-test-$krel.ko"
		step "compat-$krel-build" "$krel: dmabuf_mock_compat_test.c builds (W=1, -Werror)" \
			in_root make -C "/lib/modules/$krel/build" M="/root/compat-test-$krel" \
			W=1 KCFLAGS=-Werror modules || true
		cp "$ct/dmabuf_mock_compat_test.ko" "$dk/run/compat-test-$krel.ko" 2>/dev/null || true
		step "dkms-$krel-install" "$krel: dkms install dmabuf-mock/$version -k $krel" \
			in_root dkms install "dmabuf-mock/$version" -k "$krel" || true
		in_root dkms status -k "$krel" > "$res/dkms-$krel-status.txt" 2>&1 || true
		step "dkms-$krel-status" "$krel: dkms status: $(tr '\n' ' ' < "$res/dkms-$krel-status.txt")" \
			grep -q "^dmabuf-mock/$version, $krel, x86_64: installed" \
			"$res/dkms-$krel-status.txt" || true
		image=$m/boot/vmlinuz-$krel
		[ -f "$image" ] || image=$m/usr/lib/modules/$krel/vmlinuz
		step "guest-$krel-vm" "$krel: guest boots, runs, no splat, no timeout" \
			env VM_MEM="${VM_MEM:-4G}" "$top/scripts/vm.sh" -K "$image" \
			-M "$m/usr/lib/modules/$krel" -n "dkms-$krel" -t "${VM_TIMEOUT:-900}" -- \
			"$top/scripts/vm/dkms-selftest.sh $version $sel/dmabuf_mock $dk/run/compat-test-$krel.ko" || true
		python3 "$top/scripts/dkms-tap.py" "$krel" "$sel/cases" \
			"$top/scripts/dkms/expected-skips" "$build/vm/dkms-$krel/out.log" \
			> "$res/guest-$krel.tap" 2>&1
		grep -v '^TAP' "$res/guest-$krel.tap" | sed "s/^/  /"
	done
	umount "$m/dev" "$m/proc" "$m"
done

log "totals ($(since "$start") s)"
for f in "$res"/*.tap; do
	printf '  %-36s %s\n' "$(basename "$f" .tap)" "$(python3 "$top/scripts/tap-sum.py" "$f" 2>/dev/null)"
done
python3 "$top/scripts/tap-sum.py" "$res"/*.tap
