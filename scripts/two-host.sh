#!/bin/bash
# Two guests at once, joined by a wire: guest A runs Debian's trixie-backports
# 7.3 kernel with our out-of-tree modules (scripts/vm.sh -k debian), guest B
# Debian's stock trixie-backports 7.3 kernel, modules and rdma-core (-k stock).
# Each is its own QEMU process under single-threaded TCG with one virtio-net
# NIC; the NICs are joined by QEMU's stream netdev over a unix socket (A
# listens, B connects), no host bridge or tap. In each guest
# scripts/vm/two-host-guest.sh puts rxe on the NIC and runs userspace/two_host
# against the other.
#
# usage: scripts/two-host.sh
# Environment: TWO_HOST_TIMEOUT (per guest, seconds, default 600),
#   TWO_HOST_GRACE (seconds the second guest gets to finish after the first
#   ended, default 75: longer than two_host's 60 s message timeout, so a
#   guest still running then is stuck; the runner stops it), TWO_HOST_CPUS
#   (vCPUs per guest, default 1), TWO_HOST_MEM (per guest, default 2G),
#   VM_LOCK (held for the whole pair: no other VM runs meanwhile),
#   TWO_HOST_RAW=1 (side A registers through the raw uverbs ioctl, as with
#   a distro rdma-core); TWO_HOST_MSG_TIMEOUT, TWO_HOST_CONNECT_TIMEOUT and
#   TWO_HOST_DEADLINE go to two_host in both guests (keep the message
#   timeout below TWO_HOST_GRACE).
# Prints each guest's output prefixed with [A] or [B] and the seconds since
# both were started, then one verdict per side and "two-host: PASSED" or
# "two-host: FAILED: ..." naming the side that failed first; exits 0 only
# if both sides passed.
set -eu

if [ $# -gt 0 ]; then
	sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2
	exit 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
dir=$build/vm/two-host
timeout=${TWO_HOST_TIMEOUT:-600}
grace=${TWO_HOST_GRACE:-75}

[ -x "$build/userspace/two_host" ] ||
	{ echo "two-host: no $build/userspace/two_host: run make userspace" >&2; exit 1; }
[ -s "$build/oot/modules.list" ] ||
	{ echo "two-host: no out-of-tree modules: run make modules" >&2; exit 1; }

# Both guests together are one VM run as far as the machine is concerned.
mkdir -p "$dir"
exec 9>"${VM_LOCK:-$build/.vm.lock}"
flock -n 9 || { echo "two-host: waiting for another VM to finish" >&2; flock 9; }
export VM_LOCK_HELD=1 ACCEL=tcg VM_TCG_THREAD=single
export VM_CPUS=${TWO_HOST_CPUS:-1} VM_MEM=${TWO_HOST_MEM:-2G}

sock=$dir/wire.sock
if [ ${#sock} -gt 100 ]; then
	# sun_path holds 108 bytes.
	sock=$(mktemp -d /tmp/two-host.XXXXXX)/wire.sock
fi
rm -f "$sock" "$dir"/*.out
declare -A pid name kind what
name[A]=two-host-a kind[A]=debian what[A]="Debian trixie-backports 7.3 + our modules"
name[B]=two-host-b kind[B]=stock what[B]="Debian trixie-backports 7.3 stock, distro rdma-core"
stopped=

# Each line of a guest's run as "[A 12s] line": seconds since the start.
stamp() {
	local l
	while IFS= read -r l; do
		printf '[%s %3ds] %s\n' "$1" "$SECONDS" "$l"
	done
}

# What two_host reads from its environment, for the guests' command line.
genv="TWO_HOST_RAW=${TWO_HOST_RAW:-0}"
for v in TWO_HOST_MSG_TIMEOUT TWO_HOST_CONNECT_TIMEOUT TWO_HOST_DEADLINE; do
	[ -z "${!v:-}" ] || genv="$genv $v=${!v}"
done

guest() {
	local s=$1 netdev=$2 mac=$3 wait=${4:-} lower
	lower=$(echo "$s" | tr AB ab)
	VM_NETDEV=$netdev VM_MAC=$mac VM_NETDEV_WAIT=$wait \
		"$top/scripts/vm.sh" -k "${kind[$s]}" -n "${name[$s]}" -t "$timeout" \
		-- "$genv $top/scripts/vm/two-host-guest.sh $lower" \
		> >(tee "$dir/$s.out" | stamp "$s") 2>&1 &
	pid[$s]=$!
}

running() { kill -0 "${pid[$1]}" 2>/dev/null; }

# Ends a guest's QEMU (and so its vm.sh run) by the pid QEMU wrote, or
# its vm.sh when QEMU has not started yet.
stop() {
	local s=$1 qpid
	qpid=$(cat "$build/vm/${name[$s]}/qemu.pid" 2>/dev/null) || qpid=${pid[$s]}
	kill -TERM "$qpid" 2>/dev/null || return 0
	for _ in $(seq 20); do
		running "$s" || return 0
		sleep 0.5
	done
	kill -KILL "$qpid" 2>/dev/null || true
}

# shellcheck disable=SC2317  # a trap handler
cleanup() {
	for s in A B; do
		[ -n "${pid[$s]:-}" ] && running "$s" && stop "$s"
	done
	return 0
}
trap cleanup EXIT
trap 'echo "two-host: interrupted" >&2; exit 130' INT TERM

start=$(date +%s)
SECONDS=0
echo "two-host: guest A (${what[A]}) listens on $sock, guest B (${what[B]}) connects; ${VM_CPUS} vCPU, $VM_MEM each, TCG single-threaded, ${timeout}s each" >&2
# Both prepare at once; B's QEMU starts once A's listens (VM_NETDEV_WAIT).
guest A "stream,server=on,addr.type=unix,addr.path=$sock" 52:54:00:18:00:0a
guest B "stream,server=off,addr.type=unix,addr.path=$sock" 52:54:00:18:00:0b "$sock"

# The first guest to end; the other then has $grace seconds.
first=
rc_first=0
wait -n -p first "${pid[A]}" "${pid[B]}" || rc_first=$?
[ "$first" = "${pid[A]}" ] && first=A || first=B
other=$([ "$first" = A ] && echo B || echo A)
for _ in $(seq $(( grace * 2 ))); do
	running "$other" || break
	sleep 0.5
done
if running "$other"; then
	echo "two-host: guest $other still running ${grace}s after guest $first ended: stopping it" >&2
	stopped=$other
	stop "$other"
fi
rc_other=0
wait "${pid[$other]}" || rc_other=$?
declare -A rc
rc[$first]=$rc_first rc[$other]=$rc_other
secs=$(( $(date +%s) - start ))
sleep 0.2	# the tee/sed of the last lines

# A side's verdict. "cause": its failure started here (its own check, a
# lost, stuck or timed-out guest, a kernel splat); "effect": it only saw
# the other side fail.
declare -A verdict role
for s in A B; do
	out=$(tr -d '\r' < "$build/vm/${name[$s]}/out.log" 2>/dev/null || true)
	last() { grep -a "^two-host $s: $1" <<< "$out" | tail -n1 || true; }
	passed=$(last PASSED)
	own=$(last "FAILED (this side")
	peer=$(last "FAILED (peer")
	vm=$(sed -n 's/^vm: FAILED: //p' "$dir/$s.out" 2>/dev/null | tail -n1 |
	     sed 's/ ([0-9]* s); guest kernel log (last [0-9]* lines):$//')
	if [ "${rc[$s]}" = 0 ] && [ -n "$passed" ]; then
		verdict[$s]="PASSED (${passed#"two-host $s: PASSED: "})" role[$s]=ok
	elif [ "$stopped" = "$s" ]; then
		# Longer than the program's message timeout: stuck.
		verdict[$s]="FAILED (guest $s): still running ${grace}s after guest $first ended (stuck), stopped by the runner"
		role[$s]=cause
	elif [ -n "$own" ]; then
		verdict[$s]="FAILED ${own#"two-host $s: FAILED "}" role[$s]=cause
	elif [ -n "$peer" ]; then
		verdict[$s]="FAILED ${peer#"two-host $s: FAILED "}" role[$s]=effect
	elif [ -n "$vm" ]; then
		verdict[$s]="FAILED (guest $s): $vm" role[$s]=cause
	else
		verdict[$s]="FAILED: vm.sh exit ${rc[$s]} and no verdict from the guest" role[$s]=cause
	fi
	# A kernel splat is this side's fault whatever the program said.
	case $vm in
	*splat*) [ "${role[$s]}" = cause ] || verdict[$s]="${verdict[$s]}; guest $s: $vm"
		 role[$s]=cause ;;
	esac
	echo "two-host: side $s (${what[$s]}): ${verdict[$s]}"
done
if [ "${role[A]}" = ok ] && [ "${role[B]}" = ok ]; then
	echo "two-host: PASSED in ${secs}s (both guests, boot to shutdown)"
	exit 0
fi
blame=
for s in "$first" "$other"; do
	[ "${role[$s]}" = cause ] && blame="$blame${blame:+ and }$s"
done
[ -n "$blame" ] || blame=$first
case $blame in
*and*) echo "two-host: FAILED in ${secs}s: sides $blame failed (guest $first ended first)" ;;
*) echo "two-host: FAILED in ${secs}s: side $blame failed (guest $first ended first)" ;;
esac
exit 1
