#!/bin/bash
# make bench: boot a guest, run revoke_bench (userspace/revoke_bench.cpp) on
# two rxe devices, count the guest instructions of every sample with the
# markcount TCG plugin, and write the table, CSV and plot to build/bench/.
# A second guest (2 vCPUs, one host thread each) repeats section b with the
# revoker and the traffic on different vCPUs: under one vCPU, revoke under
# traffic mostly measures the CPU it shares with the traffic.
#
# usage: scripts/bench.sh [--profile SECTION]
#   --profile S  instead, run section S (a..e) under perf record in the
#                guest (no plugin) and write build/bench/profile-S*.txt
# Environment: KERNEL=debian|base|debug (default debian: Debian's 7.3 with
#   our modules), BENCH_PAIRS (default 31), BENCH_SECTIONS (default abcde),
#   VM_CPUS (default 1: under TCG all vCPUs share one host thread, so a
#   second vCPU only adds contention), BENCH_INSNS=0 to skip instruction
#   counting (it is skipped anyway where QEMU runs with KVM).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
out=$build/bench
profile=
if [ "${1:-}" = --profile ]; then
	profile=${2:?--profile needs a section, a..e}
	case $profile in [a-e]) ;; *) echo "bench: section must be a..e" >&2; exit 2 ;; esac
fi
mkdir -p "$out"
export VM_CPUS=${VM_CPUS:-1}
kind=${KERNEL:-debian}
log=$build/vm/bench/out.log

if [ -n "$profile" ]; then
	"$top/scripts/vm.sh" -k "$kind" -n bench -t 3600 -- env \
		BENCH_PROFILE="$profile" BENCH_PAIRS="${BENCH_PAIRS:-5}" \
		"$top/scripts/vm/bench.sh" > /dev/null
	for f in "profile-$profile.txt" "profile-$profile-flat.txt"; do
		sed -n "s/^@@$f@@ //p" "$log" > "$out/$f"
	done
	echo "bench: profile of section $profile in $out/profile-$profile.txt"
	head -n 40 "$out/profile-$profile-flat.txt"
	exit 0
fi

insns=-
accel=$(cat "$build/vm/accel" 2>/dev/null || echo tcg)
if [ "${BENCH_INSNS:-1}" != 0 ] && [ "${ACCEL:-$accel}" != kvm ]; then
	"$top/scripts/qemu-plugin.sh"
	insns=$out/insns.log
	rm -f "$insns"
	export VM_PLUGIN_OUT=$insns
fi
start=$(date +%s)
"$top/scripts/vm.sh" -k "$kind" -n bench -t 5400 -- env \
	BENCH_PAIRS="${BENCH_PAIRS:-31}" BENCH_SECTIONS="${BENCH_SECTIONS:-abcde}" \
	"$top/scripts/vm/bench.sh" | grep -v '^@@' || true
rc=${PIPESTATUS[0]}
for f in raw.csv guest.txt; do
	sed -n "s/^@@$f@@ //p" "$log" > "$out/$f"
done
[ "$rc" = 0 ] || { echo "bench: the guest run failed (exit $rc)" >&2; exit "$rc"; }
smp=-
if [[ ${BENCH_SECTIONS:-abcde} == *b* ]]; then
	VM_PLUGIN_OUT= VM_CPUS=2 VM_TCG_THREAD=multi \
	"$top/scripts/vm.sh" -k "$kind" -n bench -t 3600 -- env \
		BENCH_PAIRS="${BENCH_PAIRS:-31}" BENCH_SECTIONS=b BENCH_PIN=1 \
		"$top/scripts/vm/bench.sh" | grep -v '^@@' || true
	rc=${PIPESTATUS[0]}
	sed -n "s/^@@raw.csv@@ //p" "$log" > "$out/raw-smp.csv"
	[ "$rc" = 0 ] || { echo "bench: the 2-vCPU guest run failed (exit $rc)" >&2; exit "$rc"; }
	smp=$out/raw-smp.csv
fi
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "host: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), $(nproc) cores, $(. /etc/os-release; echo "$PRETTY_NAME")"
	echo "qemu: $(qemu-system-x86_64 --version | head -n1), accel $(cat "$build/vm/accel" 2>/dev/null || echo tcg), $VM_CPUS vCPU(s); section b again with 2 vCPUs (MTTCG), revoker and traffic pinned apart"
	echo "instructions: $([ "$insns" = - ] && echo "not counted" || echo "markcount plugin")"
	echo "pairs: ${BENCH_PAIRS:-31}, guest runs: $(( $(date +%s) - start )) s"
	sed 's/^/guest /' "$out/guest.txt"
} > "$out/machine.txt"
cat "$out/machine.txt"
python3 "$top/scripts/bench-report.py" --raw "$out/raw.csv" --insns "$insns" \
	--smp-raw "$smp" --out "$out"
echo "bench: $out/table.txt, $out/summary.csv, $out/bench.svg, $out/bench.png"
