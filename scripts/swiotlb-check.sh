#!/bin/bash
# dma-buf MRs on a kernel whose DMA bounces: Debian's trixie-backports 7.3
# kernel with our modules, booted with swiotlb=force (every streaming DMA
# mapping goes through a bounce buffer, as in a confidential-computing guest),
# runs dmabuf_mr_real, the dma-buf MRs of exporters we did not write. There a
# CPU sync by the exporter can copy a bounce buffer over what a peer wrote
# through rxe: rxe must refuse udmabuf and the system heap (EOPNOTSUPP,
# nothing attached) and keep every byte of vgem's, qxl's and vivid's
# buffers, in both directions. One guest, about a minute.
# Prints TAP: that the guest booted with swiotlb=force and ran every case,
# then one result per case.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
fixture=dmabuf_mr_real
# The cases, from the manifest's list of the kselftest's -l output.
cases=$(python3 "$top/scripts/manifest.py" cases "$top/build/kselftest" rdma:rxe_dmabuf_mr.sh 2>/dev/null |
	grep "^$fixture\.")
want=$(grep -c . <<< "$cases")
out=$(mktemp) guest=$(mktemp)
trap 'rm -f "$out" "$guest"' EXIT
VM_APPEND=swiotlb=force VM_TIMEOUT=${VM_TIMEOUT:-900} \
	"$top/scripts/test-one.sh" -k debian rdma:rxe_dmabuf_mr.sh -f "$fixture" \
	> "$out" 2>&1
rc=$?
log=$top/build/vm/test-one
tr -d '\r' < "$log/out.log" > "$guest" 2>/dev/null
got=$(grep -Eac "^(not )?ok [0-9]+ $fixture\." "$guest")
echo "TAP version 13"
echo "1..$((want + 1))"
if grep -q "Kernel command line:.* swiotlb=force" "$log/console.log" 2>/dev/null &&
	[ "$want" -gt 0 ] && [ "$got" = "$want" ] && [ "$rc" != 1 ]; then
	echo "ok 1 swiotlb: the guest booted with swiotlb=force and ran the $want cases of $fixture"
else
	echo "not ok 1 swiotlb: the guest booted with swiotlb=force and ran the $want cases of $fixture (ran $got; test-one exit $rc)"
	tail -n 40 "$out" | sed 's/^/# /'
fi
# Each case as the guest gave it; the ones that did not run (or skipped:
# "ok N CASE # SKIP ...") fail.
n=1
while read -r name; do
	n=$((n + 1))
	line=$(grep -aE "^(not )?ok [0-9]+ $name\$" "$guest" | head -n1)
	case $line in
	ok*) echo "ok $n swiotlb: $name" ;;
	not*) echo "not ok $n swiotlb: $name (failed)" ;;
	*) echo "not ok $n swiotlb: $name (did not run)" ;;
	esac
done <<< "$cases"
[ "$rc" = 0 ]
