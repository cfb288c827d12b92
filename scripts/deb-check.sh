#!/bin/bash
# `make deb-check`: the DKMS .deb of scripts/deb.sh on a stock Debian
# trixie-backports 7.3 system, as its user installs it:
#   - a trixie root (debootstrap, dkms) with the base's 7.3 kernel, image,
#     modules and headers (configs/base.pin's, as scripts/fetch.sh got
#     them), installed with apt from trixie-backports
#     (scripts/dkms-root.sh -n trixie-7.3);
#   - in a throw-away overlay on it, in a chroot: `apt-get install
#     ./PACKAGE.deb`, whose postinst has DKMS build and install the modules
#     for that kernel; dkms status says installed; no compiler warning;
#   - QEMU boots that kernel with the root's module tree as the install
#     left it: every module of the package is the one in updates/dkms,
#     the core, rxe and dmabuf_mock load from there, stock modules that
#     need the core (mlx5_ib, ib_ipoib, rpcrdma, nvme-rdma) are refused
#     for the namespace REVOKE_RDMA; then the kselftests of the Debian
#     guest, with the same expected results (scripts/test.sh guest-dkms);
#   - `apt-get purge` of the package: dkms status says nothing, no module
#     is left in updates/dkms; a second guest loads the kernel's own
#     modules, and the stock ones refused before.
# DEB_HW=1 checks the revoke-rdma-hw-dkms package instead: mlx5_ib,
# ib_ipoib, irdma, bnxt_en, bnxt_re, mana, mana_ib, ionic and ionic_rdma
# then load from updates/dkms (all but ionic_rdma, which Debian does not
# build, from the kernel's tree after the purge); rpcrdma, nvme-rdma and
# qedr (a driver it does not ship) are refused.
# TAP in build/deb/results/, then "N passed, N failed". Needs root, `make
# fetch`, `make modules`, `make kselftest`, rdma-core and iproute2 (what
# the Debian guest needs), and the network for the root's first build.
#
# usage: scripts/deb-check.sh
#   DEB_FILE=PATH: check that .deb (revoke-rdma-dkms or revoke-rdma-hw-dkms)
#   instead of building one
# Environment: VM_LOCK, BUILD_LOCK, ACCEL as for vm.sh; DEBIAN_MIRROR.
set -eu

[ "$(id -u)" = 0 ] || { echo "deb-check: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
# The overlay and chroot mounts live in a mount namespace of our own.
if [ -z "${DEB_CHECK_UNSHARED:-}" ]; then
	DEB_CHECK_UNSHARED=1 exec unshare --mount --propagation private "$0" "$@"
fi

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
db=$build/deb
res=$db/results
start=$(date +%s)
mkdir -p "$res"
rm -f "$res"/*.tap "$res"/*.log "$res"/*.results
. "$build/versions.mk"

# shellcheck source=scripts/tap-step.sh
. "$top/scripts/tap-step.sh"
totals() {
	log "totals ($(since "$start") s)"
	python3 "$top/scripts/tap-sum.py" "$res"/*.tap
}
# "debguest: ok|not ok NAME" lines of a guest's out.log as TAP; a guest
# that did not get to "debguest: end" fails.
guest_tap() {
	local out=$1 what=$2
	python3 - "$out" "$what" <<-'EOF'
	import sys
	out, what = sys.argv[1], sys.argv[2]
	try:
	    lines = open(out, errors="replace").read().splitlines()
	except OSError:
	    lines = []
	res, end = [], False
	for l in lines:
	    l = l.replace("\r", "")
	    if l.startswith("debguest: ok "):
	        res.append("ok %d - " + what + ": " + l[len("debguest: ok "):])
	    elif l.startswith("debguest: not ok "):
	        res.append("not ok %d - " + what + ": " + l[len("debguest: not ok "):])
	    elif l == "debguest: end":
	        end = True
	if not end:
	    res.append("not ok %d - " + what + ": the guest's checks ran to their end")
	print("TAP version 13")
	print("1..%d" % len(res))
	for i, r in enumerate(res, 1):
	    print(r % i)
	EOF
}

name=revoke-rdma
[ "${DEB_HW:-0}" = 1 ] && name=revoke-rdma-hw

if [ -n "${DEB_FILE:-}" ]; then
	deb=$(realpath "$DEB_FILE")
	name=$(dpkg-deb -f "$deb" Source)
else
	log "package: scripts/deb.sh${DEB_HW:+ (DEB_HW=$DEB_HW)}"
	if ! step package "package: scripts/deb.sh builds $name-dkms" "$top/scripts/deb.sh"; then
		totals
		exit 1
	fi
	deb=$(tail -n1 "$res/package.log")
fi
version=$(dpkg-deb -f "$deb" Version)
echo "# $deb"
# Stock modules that use the RDMA core: refused for the namespace unless
# the package ships them (then they load from it).
if [ "$name" = revoke-rdma-hw ]; then
	refused=(rpcrdma nvme-rdma qedr) loads=(mlx5_ib ib_ipoib irdma bnxt_en bnxt_re mana mana_ib ionic)
	# Not in Debian's kernel: loads from the package, not after the purge
	own=(ionic_rdma)
else
	refused=(mlx5_ib ib_ipoib rpcrdma nvme-rdma) loads=() own=()
fi
# The package's modules, as its dkms.conf names them.
list=$res/modules.list
dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards "./usr/src/$name-$version/dkms.conf" |
	sed -n 's/^BUILT_MODULE_NAME\[[0-9]*\]="\(.*\)"$/\1.ko/p' > "$list"
[ -s "$list" ] || { echo "deb-check: no module in $deb's dkms.conf" >&2; exit 1; }

log "root: trixie with the base's 7.3 kernel and dkms"
# The base's kernel, as scripts/dkms-fetch.sh lays out a suite's.
kd=$db/kernel
check_kernel_dir() {
	rm -rf "$kd"
	mkdir -p "$kd"
	echo "KREL=$KREL" > "$kd/kernel"
	local pkg ver sha path
	while read -r _ pkg ver _ sha path; do
		[ "$pkg" = linux-source-7.3 ] && continue
		ln "$build/debs/${path##*/}" "$kd/" || return 1
		echo "$pkg $ver $sha" >> "$kd/kernel"
	done < <(grep '^deb ' "$top/configs/base.pin")
	cat "$kd/kernel"
}
step kernel "root: the base's kernel packages (configs/base.pin)" check_kernel_dir || { totals; exit 1; }
rname=trixie-7.3
step root "root: debootstrap trixie + dkms + the base's $KREL" \
	"$top/scripts/dkms-root.sh" -n "$rname" trixie "trixie-backports=$kd" || { totals; exit 1; }
root=$build/dkms/roots/$rname

ov=$db/run
rm -rf "$ov"
mkdir -p "$ov/upper" "$ov/work" "$ov/merged"
m=$ov/merged
mount -t overlay -o "lowerdir=$root,upperdir=$ov/upper,workdir=$ov/work" deb-check "$m"
mount -t proc proc "$m/proc"
mount --rbind /dev "$m/dev"
in_root() {
	chroot "$m" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}
cp "$deb" "$m/root/"
mods=$m/usr/lib/modules/$KREL
image=$m/boot/vmlinuz-$KREL
[ -f "$image" ] || image=$mods/vmlinuz

log "install: apt-get install ./${deb##*/}"
step install "install: apt-get install ./${deb##*/} (dkms builds and installs for $KREL)" \
	in_root apt-get install -y "/root/${deb##*/}" || true
in_root dkms status > "$res/status-installed.txt" 2>&1 || true
step status "dkms status: $(tr '\n' ' ' < "$res/status-installed.txt")" \
	grep -q "^$name/$version, $KREL, x86_64: installed" "$res/status-installed.txt" || true
make_log=$m/var/lib/dkms/$name/$version/$KREL/x86_64/log/make.log
cp "$make_log" "$res/dkms-make.log" 2>/dev/null || true
# shellcheck disable=SC2317 # called through step
no_warnings() {
	[ -f "$1" ] || { echo "no $1" >&2; return 1; }
	! grep -i 'warning:' "$1"
}
step warnings "no compiler warning in dkms's make.log" no_warnings "$res/dkms-make.log" || true

log "guest: the installed modules, then the Debian guest's kselftests"
# scripts/test.sh guest-dkms: the kselftests (the manifest's debian
# results), with deb-guest.sh's checks first; its TAP (guest-dkms.tap,
# guest-dkms-vm.tap) joins ours.
rm -rf "$res/guest"
DKMS_GUEST_IMAGE=$image DKMS_GUEST_MODULES=$mods \
	DKMS_GUEST_PRE="$top/scripts/vm/deb-guest.sh installed $list --refused ${refused[*]} --loads ${loads[*]} ${own[*]}" \
	TEST_RESULTS=$res/guest TEST_HEARTBEAT=0 "$top/scripts/test.sh" guest-dkms \
	> "$res/guest-installed.log" 2>&1 || true
cp "$res/guest/guest-dkms.tap" "$res/guest/guest-dkms-vm.tap" "$res/" 2>/dev/null ||
	printf 'TAP version 13\n1..1\nnot ok 1 - scripts/test.sh guest-dkms wrote its TAP\n' \
		> "$res/guest-dkms-missing.tap"
grep -E '^ *(not )?ok' "$res/guest/guest-dkms-vm.tap" 2>/dev/null | sed 's/^/  /'
echo "  kselftests: $(python3 "$top/scripts/tap-sum.py" "$res/guest/guest-dkms.tap" 2>&1)"
guest_tap "$build/vm/guest-dkms/out.log" "installed" > "$res/guest-installed-checks.tap"
grep -E '^(not )?ok' "$res/guest-installed-checks.tap" | sed 's/^/  /'

log "purge: apt-get purge $name-dkms"
step purge "purge: apt-get purge $name-dkms" in_root apt-get purge -y "$name-dkms" || true
in_root dkms status > "$res/status-purged.txt" 2>&1 || true
step status-purged "dkms status names no $name" \
	eval "! grep -q '^$name/' '$res/status-purged.txt'" || true
step updates-empty "no module of the package left in updates/dkms" \
	eval "! find '$mods/updates' -name '*.ko*' 2>/dev/null | grep ." || true
step guest-purged-vm "guest after the purge: boots, runs, no splat, no timeout" \
	"$top/scripts/vm.sh" -K "$image" -M "$mods" -n deb-purged -t "${VM_TIMEOUT:-600}" -- \
	"$top/scripts/vm/deb-guest.sh removed $list --loads ${refused[*]} ${loads[*]}" || true
guest_tap "$build/vm/deb-purged/out.log" "purged" > "$res/guest-purged.tap"
grep -E '^(not )?ok' "$res/guest-purged.tap" | sed 's/^/  /'

umount -R "$m/dev"; umount "$m/proc" "$m"
totals
