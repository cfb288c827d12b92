#!/bin/bash
# Runs in a guest of scripts/deb-check.sh, on Debian's trixie-backports 7.3
# kernel with the module tree the DKMS package's install (or removal) left.
# Checks are printed as "debguest: ok|not ok NAME"; the last line is "debguest:
# end".
#
# usage: deb-guest.sh installed LIST [--refused MOD...] [--loads MOD...]
#        deb-guest.sh removed LIST [--loads MOD...]
#   LIST     file of the package's modules, one path per line (NAME.ko)
#   installed: every module of LIST resolves to updates/dkms and imports
#            REVOKE_RDMA; the RDMA core, rxe and dmabuf_mock load from
#            there; each --refused stock module is refused for the
#            namespace, and nothing of it stays loaded; each --loads one
#            loads (from updates/dkms, with DEB_HW=1)
#   removed: every module of LIST that the kernel ships resolves to its
#            kernel/ tree again, none to updates/dkms; each --loads module
#            loads against the stock core
set -u
mode=$1 list=$2
shift 2
refused=() loads=() cur=
for a in "$@"; do
	case $a in
	--refused) cur=refused ;;
	--loads) cur=loads ;;
	*) [ "$cur" = refused ] && refused+=("$a"); [ "$cur" = loads ] && loads+=("$a") ;;
	esac
done
check() {
	local name=$1
	shift
	if "$@"; then
		echo "debguest: ok $name"
	else
		echo "debguest: not ok $name"
	fi
}
mods=()
while read -r ko; do
	ko=${ko##*/}
	mods+=("${ko%.ko}")
done < "$list"
echo "debguest: kernel $(uname -r), ${#mods[@]} modules in the package"

# shellcheck disable=SC2317 # called through check()
from() {
	case $(modinfo -F filename "$1" 2>/dev/null) in
	*/"$2"/*) return 0 ;;
	*) return 1 ;;
	esac
}
# shellcheck disable=SC2317
imports_ns() { modinfo -F import_ns "$1" 2>/dev/null | grep -qx REVOKE_RDMA; }
# The module loaded is the file modinfo names (the same srcversion; sysfs
# spells a module's dashes as underscores).
# shellcheck disable=SC2317
loaded_is_file() {
	local s=/sys/module/${1//-/_}
	[ -e "$s" ] &&
	[ "$(cat "$s/srcversion" 2>/dev/null)" = "$(modinfo -F srcversion "$1" 2>/dev/null)" ]
}
# shellcheck disable=SC2317
refused_for_ns() {
	local m=$1 mark="debguest-refuse-$1"
	echo "$mark" > /dev/kmsg
	if modprobe "$m" 2>/dev/null; then
		return 1
	fi
	[ ! -e "/sys/module/${m//-/_}" ] || return 1
	# The kernel's message after the mark: the first module of the
	# stack that needs the RDMA core is refused for the namespace.
	dmesg | sed -n "/$mark/,\$p" |
		grep -q ": module uses symbol (.*) from namespace REVOKE_RDMA, but does not import it"
}

case $mode in
installed)
	for m in "${mods[@]}"; do
		check "$m: modinfo names updates/dkms" from "$m" updates/dkms
		check "$m: imports the namespace REVOKE_RDMA" imports_ns "$m"
	done
	for m in ib_core ib_uverbs rdma_ucm rdma_rxe dmabuf_mock; do
		check "modprobe $m" modprobe "$m"
		check "$m: the loaded module is updates/dkms's" loaded_is_file "$m"
	done
	for m in "${refused[@]}"; do
		check "stock $m: refused (namespace REVOKE_RDMA), not loaded" refused_for_ns "$m"
	done
	for m in "${loads[@]}"; do
		check "$m: modinfo names updates/dkms" from "$m" updates/dkms
		check "modprobe $m" modprobe "$m"
		check "$m: the loaded module is updates/dkms's" loaded_is_file "$m"
	done
	;;
removed)
	for m in "${mods[@]}"; do
		f=$(modinfo -F filename "$m" 2>/dev/null)
		case $f in
		*/updates/*) echo "debguest: not ok $m: still $f" ;;
		*/kernel/*) echo "debguest: ok $m: the kernel's own ($f)" ;;
		"") echo "debguest: ok $m: not in the kernel's tree (a module only the package has)" ;;
		*) echo "debguest: not ok $m: $f" ;;
		esac
	done
	for m in ib_core rdma_rxe "${loads[@]}"; do
		check "modprobe $m" modprobe "$m"
		check "$m: the loaded module is the kernel's" from "$m" kernel
		check "$m: imports no REVOKE_RDMA" eval "! imports_ns $m"
		check "$m: the loaded module is the file" loaded_is_file "$m"
	done
	;;
*) echo "deb-guest: unknown mode $mode" >&2; exit 2 ;;
esac
echo "debguest: end"
exit 0
