#!/bin/bash
# `make deb`: the series' RDMA modules as a Debian DKMS package, built with
# dh-dkms, for Debian's trixie-backports 7.3 kernel: the RDMA core modules
# (drivers/infiniband/core), rxe and dmabuf_mock, compiled from the patched
# tree (build/linux) on the system that installs the package, into
# /lib/modules/KVER/updates/dkms, where modprobe prefers them to the stock
# ones. Removing the package brings the stock modules back.
#
# The series changes struct ib_mr and struct ib_umem_dmabuf, and Debian's
# kernel has no CONFIG_MODVERSIONS: a stock module built against the old
# layouts (mlx5_ib, irdma, ib_ipoib, nvme-rdma, ...) would load against
# this ib_core and corrupt memory. So every symbol the package's modules
# export goes into the symbol namespace REVOKE_RDMA and each of its
# modules imports it: a stock module that uses them is refused at load
# ("uses symbol ... from namespace REVOKE_RDMA, but does not import it").
# DEB_HW=1 ships the hardware drivers the series changes (and their
# Ethernet halves, bnxt_en, mana and ionic), irdma and the InfiniBand ULPs, built
# against the same core, as the package revoke-rdma-hw-dkms (it conflicts
# with revoke-rdma-dkms).
#
# usage: scripts/deb.sh [-o DIR]     (default build/deb)
# Needs make tree, make modules (the prepared Debian headers the host build
# of the package uses to list its modules) and debhelper, dh-dkms
# (scripts/deps.sh --deb). Writes DIR/NAME_VERSION_all.deb and prints its
# path; DIR/src/NAME-VERSION/ is the source package. VERSION is
# 0.DATE.gHASH of the last commit that changed what goes into it, "+" a
# hash of the sources when they differ from that commit's; DEB_VERSION=...
# overrides it. DEB_MAINTAINER="Name <mail>" names the maintainer
# (default: DEBFULLNAME/DEBEMAIL, else git's user.name/user.email).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
out=$build/deb
while getopts o: o; do
	case $o in
	o) out=$(realpath -m "$OPTARG") ;;
	*) sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 0 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2; }
tree=$build/linux
[ -f "$tree/Makefile" ] || { echo "deb: no $tree: run make tree" >&2; exit 1; }
. "$build/versions.mk"
kdir=$build/oot/kdir-$KREL
[ -f "$kdir/.prepared" ] || { echo "deb: no $kdir: run make modules" >&2; exit 1; }
command -v dh_dkms > /dev/null ||
	{ echo "deb: no dh_dkms: run scripts/deps.sh --deb (as root)" >&2; exit 1; }

dirs=(drivers/infiniband/core drivers/infiniband/sw/rxe drivers/dma-buf)
name=revoke-rdma
conflicts=revoke-rdma-hw-dkms
what="the RDMA core, rxe and dmabuf_mock"
if [ "${DEB_HW:-0}" = 1 ]; then
	# The drivers the series changes, irdma (the first user of the
	# revocable import), the Ethernet halves the series changes, and the
	# ULPs. Other RDMA drivers reach into their Ethernet drivers' private
	# headers through $(srctree), which a headers package does not have.
	dirs+=(drivers/infiniband/hw/mlx5 drivers/infiniband/hw/efa
	       drivers/infiniband/hw/bnxt_re drivers/infiniband/hw/mana
	       drivers/infiniband/hw/ionic drivers/infiniband/hw/irdma
	       drivers/infiniband/ulp
	       drivers/net/ethernet/broadcom/bnxt drivers/net/ethernet/microsoft/mana
	       drivers/net/ethernet/pensando/ionic)
	name=revoke-rdma-hw
	conflicts=revoke-rdma-dkms
	what="the RDMA core, rxe, dmabuf_mock, mlx5_ib, efa, bnxt_re, mana_ib, ionic_rdma, irdma, bnxt_en, mana, ionic and the InfiniBand ULPs"
fi

# The package's version follows what goes into it: the patches, our files,
# this script.
paths=(patches drivers include tools Kbuild configs/oot.config scripts/deb.sh scripts/oot.sh)
commit=$(git -C "$top" log -1 --format=%H -- "${paths[@]}" 2>/dev/null || true)
if [ -n "$commit" ]; then
	version=0.$(git -C "$top" log -1 --format=%cd.g%h --date=format:%Y%m%d "$commit")
	mtime=$(git -C "$top" log -1 --format=%ct "$commit")
	dirty=$(git -C "$top" status --porcelain -- "${paths[@]}")
	if [ -n "$dirty" ]; then
		version=$version+$(git -C "$top" diff "$commit" -- "${paths[@]}" | sha256sum | cut -c1-8)
	fi
else
	version=0.0+$(date +%Y%m%d)
	mtime=$(date +%s)
fi
version=${DEB_VERSION:-$version}
case $version in
[0-9]*) ;;
*) echo "deb: a version starts with a digit: '$version'" >&2; exit 2 ;;
esac
case $version in *[!A-Za-z0-9.+~]*) echo "deb: bad version '$version'" >&2; exit 2 ;; esac
maint=${DEB_MAINTAINER:-}
if [ -z "$maint" ] && [ -n "${DEBFULLNAME:-}" ] && [ -n "${DEBEMAIL:-}" ]; then
	maint="$DEBFULLNAME <$DEBEMAIL>"
fi
if [ -z "$maint" ]; then
	n=$(git -C "$top" config user.name || true)
	e=$(git -C "$top" config user.email || true)
	[ -n "$n" ] && [ -n "$e" ] && maint="$n <$e>"
fi
[ -n "$maint" ] || { echo "deb: who maintains it? set DEB_MAINTAINER='Name <mail>'" >&2; exit 2; }

pkg=$out/src/$name-$version
rm -rf "$out/src"
mkdir -p "$pkg/src" "$pkg/debian/source"
src=$pkg/src

# The sources: each directory of the patched tree as it is.
for d in "${dirs[@]}"; do
	mkdir -p "$src/$(dirname "$d")"
	cp -a "$tree/$d" "$src/$d"
done
# Only what kbuild reads and compiles: no KUnit configs, docs or objects.
find "$src" \( -name '*.o' -o -name '*.cmd' -o -name '.kunitconfig' \) -delete
# The headers the series changes, staged as scripts/oot.sh stages them
# (include/std, include/uapi), as copies.
inc=$(OOT_STAGE_ONLY=1 "$top/scripts/oot.sh")
mkdir -p "$src/include"
cp -rL "$inc/std" "$inc/uapi" "$src/include/"
# Trace headers name themselves by a path relative to include/trace
# (TRACE_INCLUDE_PATH ../../drivers/infiniband/core): searched last, the
# package's include/trace resolves them in the package.
mkdir -p "$src/include/trace"
cat > "$src/include/trace/README" <<'EOF'
Searched last (-idirafter): a trace header's TRACE_INCLUDE_PATH
../../drivers/... resolves from here into the package's drivers/.
EOF
# Ethernet drivers whose headers bnxt_re and ionic find through $(srctree)
# (both are in the package with DEB_HW=1).
idirafter="-idirafter \$(P)/include/trace"
if [ "${DEB_HW:-0}" = 1 ]; then
	idirafter="$idirafter -idirafter \$(P)/drivers/net/ethernet/broadcom/bnxt -idirafter \$(P)/drivers/net/ethernet/pensando/ionic"
fi

# Symbols the series adds (configs/oot.config): on for kbuild and for the
# preprocessor, as scripts/oot.sh sets them.
configs="" cppdefs=""
while IFS="=" read -r sym val; do
	case $sym in CONFIG_*) ;; *) continue ;; esac
	configs="$configs $sym=$val"
	[ "$val" = m ] && cppdefs="$cppdefs -D${sym}_MODULE=1"
done < "$top/configs/oot.config"

subdirs=$(printf '%s/ ' "${dirs[@]}")
cat > "$src/Kbuild" <<EOF
# SPDX-License-Identifier: GPL-2.0
# $name $version: generated by scripts/deb.sh. The directories of the
# patched tree, built as modules against the installed kernel's headers.
obj-m += $subdirs

# Every symbol the package exports goes into the namespace REVOKE_RDMA and
# every module of the package imports it: a stock module built against
# the old struct layouts is refused at load instead of corrupting memory.
subdir-ccflags-y += -DDEFAULT_SYMBOL_NAMESPACE='"REVOKE_RDMA"'
subdir-ccflags-y += -include \$(REVOKE_RDMA_SRC)/revoke_rdma_ns.h
EOF
cat > "$src/revoke_rdma_ns.h" <<'EOF'
/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Force-included into every object of the package: its module imports the
 * namespace all of the package's exports are in (Kbuild). A modinfo entry
 * without <linux/module.h>, which would come before the file's own pr_fmt.
 */
static const char __revoke_rdma_import_ns[]
	__attribute__((__used__, __section__(".modinfo"), __aligned__(1))) =
	"import_ns=REVOKE_RDMA";
EOF
cat > "$src/Makefile" <<EOF
# SPDX-License-Identifier: GPL-2.0
# DKMS runs \`make KVER=... KDIR=...\`; without DKMS, \`make\` builds for the
# running kernel and \`make modules_install\` (as root) installs into
# updates/. Kbuild reads ./Kbuild, not this file.
KVER ?= \$(shell uname -r)
KDIR ?= /lib/modules/\$(KVER)/build
P := \$(CURDIR)

modules modules_install clean:
	\$(MAKE) -C \$(KDIR) M=\$(P) REVOKE_RDMA_SRC=\$(P) \\
		NOSTDINC_FLAGS="-I\$(P)/include/std -I\$(P)/include/uapi $idirafter$cppdefs" \\
		$configs \$@

.PHONY: modules modules_install clean
EOF

# Build it here once, against Debian's headers as scripts/oot.sh prepares
# them, for the list of modules dkms.conf must name (and to know it builds).
hb=$out/host-build
rm -rf "$hb"
cp -a "$src" "$hb"
echo "deb: building $name on the host for its module list (log: $out/host-build.log)" >&2
if ! make -C "$hb" KDIR="$kdir" -j"$(nproc)" CC=gcc HOSTCC=gcc \
	CONFIG_CC_HAS_MIN_FUNCTION_ALIGNMENT= CONFIG_DEBUG_INFO_BTF_MODULES= \
	modules > "$out/host-build.log" 2>&1; then
	tail -n 30 "$out/host-build.log" >&2
	echo "deb: the package does not build against $kdir" >&2
	exit 1
fi
mapfile -t kos < <(cd "$hb" && find . -name '*.ko' | sed 's|^\./||' | sort)
[ ${#kos[@]} -gt 0 ] || { echo "deb: the host build made no module" >&2; exit 1; }
printf '%s\n' "${kos[@]}" > "$out/modules.list"
rm -rf "$hb"

dkms=$pkg/debian/$name-dkms.dkms
{
	cat <<-EOF
	# $what, from the patched v7.3 tree, for Debian's
	# 7.3 kernel. Generated by scripts/deb.sh.
	PACKAGE_NAME="$name"
	PACKAGE_VERSION="#MODULE_VERSION#"
	MAKE[0]="make KVER=\${kernelver} KDIR=\${kernel_source_dir}"
	AUTOINSTALL="yes"
	# The sources are v7.3's: no other kernel.
	BUILD_EXCLUSIVE_KERNEL="^7\\.3\\."
	BUILD_EXCLUSIVE_CONFIG="CONFIG_INFINIBAND CONFIG_DMA_SHARED_BUFFER"
	EOF
	i=0
	for ko in "${kos[@]}"; do
		m=${ko##*/}
		echo "BUILT_MODULE_NAME[$i]=\"${m%.ko}\""
		echo "BUILT_MODULE_LOCATION[$i]=\"$(dirname "$ko")/\""
		echo "DEST_MODULE_LOCATION[$i]=\"/updates/dkms\""
		i=$((i + 1))
	done
} > "$dkms"

cat > "$pkg/debian/control" <<EOF
Source: $name
Section: kernel
Priority: optional
Maintainer: $maint
Build-Depends: debhelper-compat (= 13), dh-sequence-dkms
Standards-Version: 4.6.2
Rules-Requires-Root: no

Package: $name-dkms
Architecture: all
Depends: \${misc:Depends}
Conflicts: $conflicts
Replaces: $conflicts
Description: revocable dma-buf MRs for RDMA (DKMS source)
 $what,
 built from Linux v7.3 with the revocable dma-buf MR series, by DKMS
 for the 7.3 kernels of Debian 13 (trixie) backports. The modules go to
 updates/dkms, where modprobe prefers them to the kernel's own; removing
 the package brings those back.
 .
 What is built into the kernel (the dma-buf core, udmabuf) keeps the
 kernel's code. The package's modules export their symbols in the
 namespace REVOKE_RDMA: a stock module that uses them (another RDMA
 driver, nvme-rdma, rpcrdma, ...) is refused at load while it is
 installed, since it was built for the old layout of struct ib_mr.
EOF
cat > "$pkg/debian/rules" <<EOF
#!/usr/bin/make -f
include /usr/share/dpkg/pkg-info.mk

%:
	dh \$@

override_dh_install:
	dh_install src/. usr/src/$name-\$(DEB_VERSION_UPSTREAM)/

override_dh_dkms:
	dh_dkms -V \$(DEB_VERSION_UPSTREAM)
EOF
chmod +x "$pkg/debian/rules"
echo "3.0 (native)" > "$pkg/debian/source/format"
cat > "$pkg/debian/changelog" <<EOF
$name ($version) unstable; urgency=medium

  * Generated by scripts/deb.sh${commit:+ from commit ${commit:0:12}}.

 -- $maint  $(date -R -d "@$mtime")
EOF
cat > "$pkg/debian/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: Linux

Files: *
Copyright: The Linux kernel authors
License: GPL-2
 On Debian systems, the full text of the GNU General Public License
 version 2 can be found in /usr/share/common-licenses/GPL-2.
EOF

rm -f "$out/${name}-dkms_"*.deb "$out/${name}_"*
echo "deb: dpkg-buildpackage (log: $out/dpkg-buildpackage.log)" >&2
if ! (cd "$pkg" && SOURCE_DATE_EPOCH=$mtime dpkg-buildpackage -A -us -uc) \
	> "$out/dpkg-buildpackage.log" 2>&1; then
	tail -n 30 "$out/dpkg-buildpackage.log" >&2
	exit 1
fi
deb=$out/src/${name}-dkms_${version}_all.deb
[ -f "$deb" ] || { echo "deb: dpkg-buildpackage made no $deb" >&2; exit 1; }
mv "$deb" "$out/"
echo "$out/${deb##*/}"
