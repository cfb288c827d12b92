#!/bin/bash
# Runs in the guest (make bench): the rxe pair of demo.sh, then
# revoke_bench with the dma-buf MR on rxa and traffic from rxb. The guest's
# writes stay in its tmpfs overlay, so the results (the raw samples, a
# description of the machine, profiles) are printed to stdout, each line
# prefixed with "@@NAME@@ ", for scripts/bench.sh to pick out of out.log.
#
# usage: bench.sh
# Environment: BENCH_SECTIONS (default abcde), BENCH_PAIRS (default 15),
#   BENCH_PIN=1: revoke_bench --pin 1 (measuring thread on CPU 0, traffic
#   on CPU 1), with the kernel's unbound workqueues kept on CPU 1;
#   BENCH_PROFILE=SECTION: instead, profile that section with perf record
#   (cpu-clock; all CPUs, or CPU 0 alone with BENCH_PIN=1) and print
#   profile-SECTION.txt (inclusive) and profile-SECTION-flat.txt (self);
#   with BENCH_FTRACE=FUNCTION as well, a function_graph trace of FUNCTION
#   (BENCH_FTRACE_DEPTH levels, default 3) instead of perf, each sample
#   labelled through trace_marker, printed as ftrace.txt;
#   BENCH_ARGS: more revoke_bench options (--only, --traffic-only).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=/tmp/bench
. "$top/scripts/vm/rxe-pair.sh"

emit() {
	[ -f "$out/$1" ] && sed "s/^/@@$1@@ /" "$out/$1"
	return 0
}

mkdir -p "$out"
rxe_pair_up
{
	echo "kernel: $(uname -r)"
	echo "cpus: $(nproc)"
	echo "memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
	echo "cpu: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)"
	for m in ib_core rdma_rxe dmabuf_mock; do
		echo "module $m: $(modinfo -n "$m")"
	done
} > "$out/guest.txt"

bench=$top/build/userspace/revoke_bench
t=/sys/kernel/tracing
# ftrace_on: function_graph on BENCH_FTRACE, not yet recording. Switching
# the tracer on rewrites the entry of every kernel function (int3, then
# the call); under multi-threaded TCG another vCPU once ran a function
# whose first byte was already the new call's while it trapped on the old
# int3 (oops at psi_group_change+0x1, 2026-12-04), so the other CPUs are
# offline while the text changes.
ftrace_on() {
	local c
	[ -e $t/trace ] || mount -t tracefs tracefs $t
	echo 0 > $t/tracing_on
	echo "$BENCH_FTRACE" > $t/set_graph_function
	echo "${BENCH_FTRACE_DEPTH:-3}" > $t/max_graph_depth
	echo 65536 > $t/buffer_size_kb
	for c in /sys/devices/system/cpu/cpu[1-9]*/online; do
		[ -e "$c" ] && echo 0 > "$c"
	done
	echo "bench: function_graph switched on with $(nproc) of $cpus CPU(s) online" >&2
	echo function_graph > $t/current_tracer
	for c in /sys/devices/system/cpu/cpu[1-9]*/online; do
		[ -e "$c" ] && echo 1 > "$c"
	done
	[ "$(nproc)" = "$cpus" ] ||
		{ echo "bench: $(nproc) of $cpus CPUs back online" >&2; exit 1; }
}
cpus=$(nproc)
# What this run does: time the sections (""), or profile one with perf or
# with a function_graph trace.
mode=
if [ -n "${BENCH_PROFILE:-}" ]; then
	mode=perf
	[ -n "${BENCH_FTRACE:-}" ] && mode=ftrace
fi
[ "$mode" = ftrace ] && ftrace_on
pin=0
if [ "${BENCH_PIN:-0}" = 1 ]; then
	[ "$(nproc)" -ge 2 ] || { echo "bench: BENCH_PIN=1 needs 2 CPUs" >&2; exit 1; }
	echo 2 > /sys/devices/virtual/workqueue/cpumask
	pin=1
fi
# shellcheck disable=SC2086 # BENCH_ARGS is a list of options
if [ "$mode" = ftrace ]; then
	echo 1 > $t/tracing_on
	"$bench" --sections "$BENCH_PROFILE" --pairs "${BENCH_PAIRS:-3}" \
		--pin "$pin" --trace-marker 1 ${BENCH_ARGS:-} \
		--raw "$out/ftrace.csv" rxa rxb
	echo 0 > $t/tracing_on
	if [ "$pin" = 1 ]; then
		cat $t/per_cpu/cpu0/trace > "$out/ftrace.txt"
	else
		cat $t/trace > "$out/ftrace.txt"
	fi
	grep -q 'LOST\|overrun' "$out/ftrace.txt" &&
		echo "bench: the trace buffer overflowed" >&2
	emit ftrace.txt
elif [ "$mode" = perf ]; then
	s=$BENCH_PROFILE
	cpus=-a
	[ "$pin" = 1 ] && cpus="-C 0"
	perf record -q $cpus -g -e cpu-clock -o /tmp/perf.data -- \
		"$bench" --sections "$s" --pairs "${BENCH_PAIRS:-3}" --pin "$pin" \
		${BENCH_ARGS:-} --raw "$out/profile-$s.csv" rxa rxb
	# Inclusive (children) and self time per symbol, no call chains.
	perf report -i /tmp/perf.data --stdio --children -g none \
		--sort symbol --percent-limit 1 > "$out/profile-$s.txt" 2>/dev/null
	perf report -i /tmp/perf.data --stdio --no-children -g none \
		--sort symbol --percent-limit 0.3 > "$out/profile-$s-flat.txt" 2>/dev/null
	emit "profile-$s.txt"
	emit "profile-$s-flat.txt"
else
	rc=0
	"$bench" --sections "${BENCH_SECTIONS:-abcde}" --pin "$pin" \
		--pairs "${BENCH_PAIRS:-15}" ${BENCH_ARGS:-} --raw "$out/raw.csv" \
		rxa rxb || rc=$?
	emit raw.csv
	[ "$rc" = 0 ] || exit "$rc"
fi
emit guest.txt
rxe_pair_down
