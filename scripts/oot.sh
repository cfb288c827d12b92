#!/bin/bash
# Out-of-tree build of the modules the series changes or adds, compiled from
# the patched tree (build/linux) against a distro kernel's headers.
#
# usage: scripts/oot.sh [make args...]
#   KDIR=...   kernel build dir to build against (default: Debian's
#   trixie-backports 7.3
#              headers from `make fetch`, made usable on bookworm first)
#   OOT_W=1    pass W=1; OOT_C=1 run sparse (C=1) on what is rebuilt
#   OOT_HW=1   also build the hardware drivers the series changes (mlx5,
#              efa, irdma, bnxt_re, mana, ionic) and the Ethernet drivers whose
#              calls they use (bnxt_en, mana, ionic): compile tests, never
#              loaded
#   OOT_DIRS="dir ..."  build only these directories of the tree
#   OOT_TREE=build/NAME   build another work tree of the series (a git
#              worktree under build/); output then in build/oot/out-NAME
#   OOT_STAGE_ONLY=1  only stage the headers the series changes, as the
#              build would, and print the directory (build/oot/include)
# Output: build/oot/out/**/*.ko and build/oot/modules.list (OOT_HW=1:
# build/oot/out-hw, build/oot/out-hw.list)
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
rel=${OOT_TREE:-build/linux}
case $rel in build/*) ;; *) echo "oot: OOT_TREE must be under build/" >&2; exit 2 ;; esac
tree=$top/$rel
oot=$build/oot
outdir=$oot/out
[ "$rel" = build/linux ] || outdir=$oot/out-${rel#build/}
dirs="drivers/infiniband/core drivers/infiniband/sw/rxe drivers/dma-buf"
hw="drivers/infiniband/hw/mlx5 drivers/infiniband/hw/efa drivers/infiniband/hw/irdma drivers/infiniband/hw/bnxt_re drivers/infiniband/hw/mana drivers/infiniband/hw/ionic drivers/net/ethernet/broadcom/bnxt drivers/net/ethernet/microsoft/mana drivers/net/ethernet/pensando/ionic"
if [ "${OOT_HW:-0}" = 1 ]; then
	dirs="$dirs $hw"
	outdir=$outdir-hw
fi
# OOT_DIRS="drivers/infiniband/core drivers/infiniband/hw/efa": just those.
dirs=${OOT_DIRS:-$dirs}
[ -f "$tree/Makefile" ] || { echo "oot: no tree at $tree: run make tree" >&2; exit 1; }

# Debian's headers need three changes to build modules here (pipeline.md):
# absolute /usr/src paths, host tools linked against glibc 2.38 (bookworm
# has 2.36), and gcc-14-only flags. Make a private, fixed copy once.
prepare_debian_kdir() {
	. "$build/versions.mk"
	local kdir=$oot/kdir-$KREL
	local hdr=$build/deb-root/usr/src/linux-headers-$KREL
	local common=$build/deb-root/usr/src/linux-headers-$KABI-common
	local kbuild=$build/deb-root/usr/lib/linux-kbuild-$KABI
	if [ -f "$kdir/.prepared" ]; then
		echo "$kdir"
		return
	fi
	rm -rf "$kdir" "$oot/hosttools"
	mkdir -p "$oot"
	cp -a "$hdr" "$kdir"
	rm "$kdir/scripts" "$kdir/tools"
	cp -a "$kbuild/scripts" "$kbuild/tools" "$kdir/"
	cat > "$kdir/Makefile" <<-MK
	KBUILD_OUTPUT=$kdir
	include $common/Makefile
	MK
	# The host tools, rebuilt from the pristine 7.3 source with the same
	# config, replace the package's binaries.
	mkdir -p "$oot/hosttools"
	cp "$hdr/.config" "$oot/hosttools/.config"
	make -s -C "$build/linux-src" O="$oot/hosttools" olddefconfig >&2
	make -s -C "$build/linux-src" O="$oot/hosttools" -j"$(nproc)" \
		KBUILD_MODPOST_WARN=1 modules_prepare >&2
	local f
	for f in $(cd "$kdir" && find scripts tools certs -type f 2>/dev/null); do
		[ -f "$oot/hosttools/$f" ] || continue
		file -b "$kdir/$f" | grep -q '^ELF' || continue
		cp "$oot/hosttools/$f" "$kdir/$f"
	done
	# Debian's wrappers pick modpost.real-*/objtool.real-* by target: ours
	# are native, so the wrapper names now hold the real tools.
	touch "$kdir/.prepared"
	echo "$kdir"
}

# Headers the series changes or adds must win over the headers package's:
# stage each one (with its directory's other headers, below) in a
# directory searched first.
inc=$oot/include
[ "$rel" = build/linux ] || inc=$outdir-include
rm -rf "$inc"
mkdir -p "$inc/std" "$inc/uapi"
changed=$(git -C "$tree" diff --name-only --diff-filter=AMR v7.3-base -- include/ arch/x86/include/ 2>/dev/null || true)
changed="$changed $(git -C "$tree" ls-files --others --exclude-standard -- include/ 2>/dev/null || true)"
for f in $changed; do
	case $f in
	include/uapi/*)
		# <uapi/...> from the kernel header of the same name; <...>
		# only when no kernel header has that name (rdma/rdma_netlink.h
		# has both: the kernel one must win).
		mkdir -p "$(dirname "$inc/std/${f#include/}")"
		ln -sf "$tree/$f" "$inc/std/${f#include/}"
		[ -e "$tree/include/${f#include/uapi/}" ] && continue
		d=$inc/uapi/${f#include/uapi/} ;;
	include/*) d=$inc/std/${f#include/} ;;
	*) echo "oot: warning: $f changed; arch headers are not staged" >&2; continue ;;
	esac
	mkdir -p "$(dirname "$d")"
	ln -sf "$tree/$f" "$d"
	# A sibling that includes it as "name.h" (net/mana/mana.h:
	# "gdma.h") looks in its own directory first: stage the
	# directory's other headers too, the tree's (same 7.3), so that
	# such an include finds the changed one.
	case $f in
	include/uapi/*) ;;
	include/*)
		for s in "$tree/$(dirname "$f")"/*.h; do
			[ -e "$(dirname "$d")/${s##*/}" ] ||
				ln -s "$s" "$(dirname "$d")/${s##*/}"
		done ;;
	esac
done

# OOT_STAGE_ONLY=1: stage the headers and print where (scripts/deb.sh
# copies them into its package).
if [ -n "${OOT_STAGE_ONLY:-}" ]; then
	echo "$inc"
	exit 0
fi

if [ -n "${KDIR:-}" ]; then
	kdir=$KDIR
	extra=()
else
	kdir=$(prepare_debian_kdir)
	extra=(CC=gcc HOSTCC=gcc
	       CONFIG_CC_HAS_MIN_FUNCTION_ALIGNMENT=
	       CONFIG_DEBUG_INFO_BTF_MODULES=)
fi

# Anything the series changes outside what we build here reaches only the
# in-tree kernel: say so rather than test a half-patched stack. The
# Ethernet drivers built here (OOT_HW) are not outside.
built_net=()
for d in $dirs; do
	case $d in drivers/net/*) built_net+=(":!$d/") ;; esac
done
outside=$(git -C "$tree" diff --name-only v7.3-base -- . \
	':!include/' ':!drivers/infiniband/' ':!drivers/dma-buf/dmabuf_mock*' \
	${built_net[@]+"${built_net[@]}"} \
	':!Documentation/' ':!tools/' ':!MAINTAINERS' ':!**/Kconfig' \
	':!**/Makefile' ':!**/.kunitconfig' 2>/dev/null || true)
for f in $outside; do
	echo "oot: note: $f is changed by the series but built into the kernel: only the in-tree kernel has it" >&2
done

# Trace headers name themselves by a path relative to include/trace/
# (TRACE_INCLUDE_PATH ../../drivers/infiniband/core): searched last, this
# resolves them in the patched tree instead of the headers package.
trace_inc="-idirafter $tree/include/trace"
# bnxt_re and ionic find their Ethernet drivers' headers through $(srctree),
# which here is the headers package: give them the tree's, searched last.
[ "${OOT_HW:-0}" = 1 ] && trace_inc="$trace_inc -idirafter $tree/drivers/net/ethernet/broadcom/bnxt -idirafter $tree/drivers/net/ethernet/pensando/ionic"

# Symbols the series adds: on for kbuild (make variable) and for the C
# preprocessor (IS_ENABLED() sees CONFIG_X_MODULE).
flags=()
cppflags=
while IFS== read -r sym val; do
	case $sym in CONFIG_*) ;; *) continue ;; esac
	flags+=("$sym=$val")
	[ "$val" = m ] && cppflags="$cppflags -D${sym}_MODULE=1"
done < "$top/configs/oot.config"
[ "${OOT_W:-0}" = 1 ] && flags+=(W=1)
[ "${OOT_C:-0}" = 1 ] && flags+=(C=1)
# Objects depend on the header files they were compiled against: one the
# series starts to change gets staged under a new path, which make cannot
# know about. Start over when the staged set (or the kernel) changed.
stamp=$(cd "$inc" && { find . -type l | sort; echo "$kdir"; })
if [ "$(cat "$outdir.staged" 2>/dev/null)" != "$stamp" ]; then
	rm -rf "$outdir"
fi
mkdir -p "$outdir"
printf '%s\n' "$stamp" > "$outdir.staged"
make -C "$kdir" M="$top" MO="$outdir" -j"$(nproc)" "${extra[@]}" \
	OOT_TREE="$rel" OOT_DIRS="$dirs" \
	NOSTDINC_FLAGS="-I$inc/std -I$inc/uapi $trace_inc$cppflags" "${flags[@]}" "$@" modules
list=$oot/modules.list
[ "$outdir" = "$oot/out" ] || list=$outdir.list
(cd "$outdir" && find . -name '*.ko' | sort) > "$list"
echo "oot: $(wc -l < "$list") modules in $outdir (against $kdir)"
