#!/bin/bash
# Build the patched v7.3 tree (build/linux, from `make tree`) as bzImage +
# modules for the guest, from the config fragments in configs/.
#
# usage: scripts/kernel.sh base|debug|coverage
#   base:  allnoconfig + configs/base.config + configs/rdma.config
#   debug: the same + configs/debug.config (KASAN, lockdep, kmemleak, ...)
#          + configs/hw.config (the RDMA hardware drivers the series
#          changes, compile tests only)
#   coverage: debug + configs/coverage.config (gcov), with only the
#          objects in the hardware drivers' directories (gcov_dirs below)
#          profiled; for scripts/coverage.sh (make coverage)
# Output: build/kbuild-FLAVOUR/{arch/x86/boot/bzImage,mod-root/}
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
flavour=${1:?usage: kernel.sh base|debug|coverage}
src=$top/build/linux
out=$top/build/kbuild-$flavour
frags=("$top/configs/base.config" "$top/configs/rdma.config")
case $flavour in
base) ;;
debug) frags+=("$top/configs/debug.config" "$top/configs/hw.config") ;;
coverage) frags+=("$top/configs/debug.config" "$top/configs/hw.config"
		  "$top/configs/coverage.config") ;;
*) echo "usage: kernel.sh base|debug|coverage" >&2; exit 2 ;;
esac
# Coverage: gcov for the objects of these directories only (the tree's
# Makefiles are left alone). A GCOV_PROFILE on make's command line
# overrides every Makefile's; this one is expanded per object, in the
# directory it is built from ($(obj)), and is empty elsewhere: no
# profiling there (not "n": a GCOV_PROFILE_file.o := n still wins).
gcov_dirs="drivers/infiniband/hw/% drivers/net/ethernet/microsoft/mana drivers/net/ethernet/broadcom/bnxt drivers/net/ethernet/pensando/ionic"
extra=()
if [ "$flavour" = coverage ]; then
	extra=("GCOV_PROFILE=\$(if \$(filter $gcov_dirs,\$(obj)),y)")
fi
[ -f "$src/Makefile" ] || { echo "kernel: no tree at $src: run make tree" >&2; exit 1; }
# One kernel build at a time on a 2-core machine (BUILD_LOCK: the lock file,
# shared by every checkout on the machine).
exec 9>"${BUILD_LOCK:-$top/build/.build.lock}"
flock -n 9 || { echo "kernel: waiting for another build to finish" >&2; flock 9; }

export CCACHE_DIR=${CCACHE_DIR:-$top/build/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
# ccache hits across trees and time need stable inputs.
export KBUILD_BUILD_TIMESTAMP=${KBUILD_BUILD_TIMESTAMP:-2026-01-01}
export KBUILD_BUILD_USER=revoke KBUILD_BUILD_HOST=ci
# No "+" suffix on the release for a tree that is not at a tag.
export LOCALVERSION=
cc="gcc"
command -v ccache >/dev/null && cc="ccache gcc"
mk=(make -s -C "$src" O="$out" CC="$cc" HOSTCC="$cc" -j"$(nproc)" ${extra[@]+"${extra[@]}"})

mkdir -p "$out"
cat "${frags[@]}" > "$out/fragment.config"
# allnoconfig with KCONFIG_ALLCONFIG forces the fragment's values; what the
# fragment does not name stays off.
"${mk[@]}" KCONFIG_ALLCONFIG="$out/fragment.config" allnoconfig
# Fail loudly when a symbol did not take (renamed, or a dependency is off).
bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=n) sym=${line%=n}
		if grep -q "^$sym=" "$out/.config"; then
			echo "kernel: $sym is set, fragment wants it off" >&2; bad=1
		fi ;;
	CONFIG_*=*)
		if ! grep -qxF "$line" "$out/.config"; then
			echo "kernel: fragment wants $line, .config has:" \
			     "$(grep "^${line%%=*}=" "$out/.config" || echo 'not set')" >&2
			bad=1
		fi ;;
	esac
done < "$out/fragment.config"
[ $bad = 0 ] || exit 1

start=$(date +%s)
"${mk[@]}" bzImage modules
rm -rf "$out/mod-root"
"${mk[@]}" INSTALL_MOD_PATH="$out/mod-root" modules_install
end=$(date +%s)
kver=$(cat "$out/include/config/kernel.release")
echo "kernel: $flavour $kver built in $((end - start)) s ($(ccache -s 2>/dev/null | grep -iE 'hits|misses' | tr -s ' ' | paste -sd' ' || true))"
echo "$flavour $kver $((end - start))s $(date -u +%FT%TZ)" >> "$top/build/build-times"
