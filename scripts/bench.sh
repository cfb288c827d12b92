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
#                guest (no plugin) and write build/bench/profile-S*.txt;
#                BENCH_ARGS passes options (--only N, --traffic-only 1),
#                BENCH_PIN=1 profiles CPU 0 of a 2-vCPU guest with the
#                revoker pinned there; BENCH_FTRACE=FUNCTION traces that
#                kernel function (function_graph) instead of perf, and
#                scripts/bench-ftrace.py sums up its callees per sample kind
#                into build/bench/ftrace-S.txt
# Environment: KERNEL=debian|base|debug (default debian: Debian's
# trixie-backports 7.3 with
#   our modules), BENCH_PAIRS (default 31), BENCH_SECTIONS (default abcde),
#   VM_CPUS (default 1: under TCG all vCPUs share one host thread, so a
#   second vCPU only adds contention), BENCH_INSNS=0 to skip instruction
#   counting (it is skipped anyway where QEMU runs with KVM), BENCH_OUT
#   (default build/bench) for the results.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
out=${BENCH_OUT:-$build/bench}
profile=
if [ "${1:-}" = --profile ]; then
	profile=${2:?--profile needs a section, a..e}
	case $profile in [a-e]) ;; *) echo "bench: section must be a..e" >&2; exit 2 ;; esac
fi
mkdir -p "$out"
export VM_CPUS=${VM_CPUS:-1}
# Section c holds three 1 GiB buffers at once (two exporters, plain).
export VM_MEM=${VM_MEM:-6G}
kind=${KERNEL:-debian}
log=$build/vm/bench/out.log
pairs=${BENCH_PAIRS:-31}

# guest ENV... : one guest run of scripts/vm/bench.sh with these settings;
# the files it prints stay in $log.
guest() {
	local rc
	"$top/scripts/vm.sh" -k "$kind" -n bench -t 5400 -- env "$@" \
		"$top/scripts/vm/bench.sh" | grep -v '^@@'
	rc=${PIPESTATUS[0]}
	return "$rc"
}
# pick NAME FILE: the guest's file NAME out of the last run's output.
pick() { sed -n "s/^@@$1@@ //p" "$log" > "$2"; }

# The revoker's wait for the copy in flight, which wall time under TCG
# cannot isolate: a function_graph trace of rxe's revoke callback.
ftrace_b() {
	VM_PLUGIN_OUT='' VM_CPUS=2 VM_TCG_THREAD=multi VM_BOOT_RETRY=1 guest BENCH_PROFILE=b \
		BENCH_FTRACE=rxe_dmabuf_mr_revoke BENCH_PIN=1 \
		BENCH_PAIRS="${1:-15}" BENCH_ARGS="'--only 1'"
	pick ftrace.txt "$out/ftrace-raw-b.txt"
	python3 "$top/scripts/bench-ftrace.py" rxe_dmabuf_mr_revoke \
		"$out/ftrace-raw-b.txt" > "$out/ftrace-b.txt"
}

if [ -n "$profile" ]; then
	if [ "${BENCH_PIN:-0}" = 1 ]; then
		export VM_CPUS=2 VM_TCG_THREAD=multi VM_BOOT_RETRY=1
	fi
	if [ -n "${BENCH_FTRACE:-}" ]; then
		guest BENCH_PROFILE="$profile" BENCH_PAIRS="${BENCH_PAIRS:-5}" \
			BENCH_PIN="${BENCH_PIN:-0}" BENCH_ARGS="'${BENCH_ARGS:-}'" \
			BENCH_FTRACE="$BENCH_FTRACE" > /dev/null
		pick ftrace.txt "$out/ftrace-raw-$profile.txt"
		python3 "$top/scripts/bench-ftrace.py" "$BENCH_FTRACE" \
			"$out/ftrace-raw-$profile.txt" | tee "$out/ftrace-$profile.txt"
		exit 0
	fi
	guest BENCH_PROFILE="$profile" BENCH_PAIRS="${BENCH_PAIRS:-5}" \
		BENCH_PIN="${BENCH_PIN:-0}" BENCH_ARGS="'${BENCH_ARGS:-}'" > /dev/null
	for f in "profile-$profile.txt" "profile-$profile-flat.txt"; do
		pick "$f" "$out/$f"
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
fi
start=$(date +%s)
rc=0
VM_PLUGIN_OUT=$([ "$insns" = - ] || echo "$insns") guest BENCH_PAIRS="$pairs" \
	BENCH_SECTIONS="${BENCH_SECTIONS:-abcde}" || rc=$?
pick raw.csv "$out/raw.csv"
pick guest.txt "$out/guest.txt"
[ "$rc" = 0 ] || { echo "bench: the guest run failed (exit $rc)" >&2; exit "$rc"; }
smp=- ftrace=-
if [[ ${BENCH_SECTIONS:-abcde} == *b* ]]; then
	VM_PLUGIN_OUT='' VM_CPUS=2 VM_TCG_THREAD=multi VM_BOOT_RETRY=1 guest BENCH_PAIRS="$pairs" \
		BENCH_SECTIONS=b BENCH_PIN=1 ||
		{ echo "bench: the 2-vCPU guest run failed" >&2; exit 1; }
	pick raw.csv "$out/raw-smp.csv"
	smp=$out/raw-smp.csv
	ftrace_b "$(( pairs < 15 ? pairs : 15 ))" || { echo "bench: the ftrace guest run failed" >&2; exit 1; }
	ftrace=$out/ftrace-raw-b.txt
fi
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "host: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), $(nproc) cores, $(. /etc/os-release; echo "$PRETTY_NAME")"
	echo "qemu: $(qemu-system-x86_64 --version | head -n1), accel $accel, $VM_CPUS vCPU(s), $VM_MEM"
	echo "section b again with 2 vCPUs (MTTCG), revoker and traffic pinned apart; and traced (function_graph) there"
	echo "instructions: $([ "$insns" = - ] && echo "not counted" || echo "markcount plugin")"
	echo "pairs: $pairs, guest runs: $(( $(date +%s) - start )) s"
	sed 's/^/guest /' "$out/guest.txt"
} > "$out/machine.txt"
cat "$out/machine.txt"
python3 "$top/scripts/bench-report.py" --raw "$out/raw.csv" --insns "$insns" \
	--smp-raw "$smp" --ftrace "$ftrace" --out "$out"
echo "bench: $out/table.txt, $out/summary.csv, $out/bench.svg, $out/bench.png"
