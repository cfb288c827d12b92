#!/bin/bash
# Calibrate the instruction counts of the markcount QEMU plugin: boot a
# guest under TCG with the plugin (VM_PLUGIN_OUT, scripts/vm.sh) and run
# build/userspace/insn_calib, which executes exactly 2N instructions
# between INSN_MARK_BEGIN and INSN_MARK_END for each N (plus END itself:
# 2N + 1 in an undisturbed run). Prints, per N, the measured delta
# (END - BEGIN) and what the guest added on top of 2N + 1 (timer
# interrupts, other vCPUs), and fails unless delta / 2N lies in
# [1.0, 1.01] for the largest N.
#
# usage: scripts/insn-check.sh [N...]   (default: 0 1000000 10000000)
# Environment: as scripts/vm.sh (VM_CPUS, VM_MEM); INSN_CHECK_KERNEL
# (default debian) is the -k of the run.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
log=$build/qemu-plugin/calib.log
name=insn-calib
ns=("$@")
[ ${#ns[@]} -gt 0 ] || ns=(0 1000000 10000000)
die() { echo "insn-check: $*" >&2; exit 1; }

"$top/scripts/qemu-plugin.sh" >/dev/null
make -s -C "$top" "$build/userspace/insn_calib"

rm -f "$log"
VM_PLUGIN_OUT=$log "$top/scripts/vm.sh" -k "${INSN_CHECK_KERNEL:-debian}" \
	-n "$name" -t 600 -- "$build/userspace/insn_calib" "${ns[@]}"

# The guest printed "insn_calib: N=<N>" after each pair of markers; the
# plugin logged "1 <count>" and "2 <count>" for each, in the same order.
grep -a '^insn_calib: N=' "$build/vm/$name/out.log" | sed 's/^insn_calib: N=//' > "$build/vm/$name/calib.n"
awk -v nfile="$build/vm/$name/calib.n" '
	BEGIN {
		k = 0
		while ((getline n < nfile) > 0)
			want[k++] = n + 0
		bad = 0; i = 0; last = 0
	}
	$1 == 1 && !open { begin = $2; open = 1; next }
	$1 == 2 && open {
		if (i >= k) { print "insn-check: more marker pairs than runs"; bad = 1; exit }
		n = want[i++]; d = $2 - begin; open = 0
		extra = d - (2 * n + 1)
		if (n > 0) {
			ratio = d / (2 * n)
			printf "insn-check: N=%.0f delta=%.0f expected=%.0f extra=%.0f delta/2N=%.6f\n",
			       n, d, 2 * n + 1, extra, ratio
		} else {
			printf "insn-check: N=0 delta=%.0f expected=1 extra=%.0f\n", d, extra
		}
		if (d < 2 * n + 1) { print "insn-check: delta below 2N + 1: the plugin miscounts"; bad = 1 }
		if (n > 0 && n >= last) { last = n; lastratio = ratio }
		next
	}
	{ print "insn-check: unexpected line in the plugin log: " $0; bad = 1; exit }
	END {
		if (bad) exit 1
		if (i != k || k == 0) { printf "insn-check: %d marker pairs for %d runs\n", i, k; exit 1 }
		if (last > 0 && (lastratio < 1.0 || lastratio > 1.01)) {
			printf "insn-check: FAILED: delta/2N = %.6f for N=%.0f, outside [1.0, 1.01]\n", lastratio, last
			exit 1
		}
		if (last > 0)
			printf "insn-check: ok: delta/2N = %.6f for N=%.0f\n", lastratio, last
	}
' "$log" || die "calibration failed (plugin log: $log)"
