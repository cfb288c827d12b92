#!/bin/bash
# scripts/vm.sh's VM_BOOT_RETRY and exit status, with a stand-in for
# qemu-system-x86_64 on PATH (no guest boots): a guest that dies with
# "Oops: int3" before its init ran is booted once more under MTTCG with
# VM_BOOT_RETRY=1, and only then; a second such death, or the same without
# VM_BOOT_RETRY or under single-threaded TCG, fails the run. A guest whose
# command exits non-zero gives exit status 3, unless it also splats (1).
# Ctrl-C (SIGINT to the process group, as a terminal sends it) or a SIGTERM
# to vm.sh alone while the guest runs: vm.sh stops QEMU and dies of the same
# signal, QEMU is gone, and the VM lock is free at once for the next run.
# Prints TAP.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$top/build/vm/test-vm-retry" "$top/build/vm/test-vm-retry.boot-crash.log"' EXIT
cat > "$tmp/qemu-system-x86_64" <<'FAKE'
#!/bin/bash
for a in "$@"; do
	case $a in
	file:*console.log) con=${a#file:} ;;
	*path=*out.log) out=${a##*path=} ;;
	*/qemu.pid) pidfile=$a ;;
	esac
done
echo $$ > "$pidfile"
if [ -n "${FAKE_HANG:-}" ]; then
	# A guest that runs until it is stopped: what QEMU does on SIGTERM
	trap 'echo "$$ TERM" >> "$FAKE_DIR/signals"; exit 0' TERM
	echo "[    1.000000] booted" >> "$con"
	while :; do sleep 0.1; done
fi
n=$(( $(cat "$FAKE_DIR/boots" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$FAKE_DIR/boots"
if [ "$n" -le "$FAKE_CRASHES" ]; then
	echo "[    2.079792] Oops: int3: 0000 [#1] SMP NOPTI" >> "$con"
	echo "[    2.091295] Kernel panic - not syncing: Fatal exception in interrupt" >> "$con"
	exit 0
fi
echo "[    1.000000] booted" >> "$con"
[ -z "${FAKE_SPLAT:-}" ] || echo "[    1.500000] BUG: $FAKE_SPLAT" >> "$con"
echo "REVOKE-VM-EXIT ${FAKE_EXIT:-0}" >> "$out"
FAKE
chmod +x "$tmp/qemu-system-x86_64"
n=0 failed=0
echo "TAP version 13"
# case DESCRIPTION CRASHES WANT_RC WANT_BOOTS ENV...
case_() {
	local what=$1 crashes=$2 want_rc=$3 want_boots=$4 rc boots
	shift 4
	rm -f "$tmp/boots"
	env "$@" FAKE_DIR="$tmp" FAKE_CRASHES="$crashes" ACCEL=tcg \
		VM_LOCK="$tmp/lock" PATH="$tmp:$PATH" \
		"$top/scripts/vm.sh" -k debian -n test-vm-retry -t 60 -- true \
		> "$tmp/log" 2>&1
	rc=$?
	boots=$(cat "$tmp/boots" 2>/dev/null || echo 0)
	n=$((n + 1))
	if [ "$rc" = "$want_rc" ] && [ "$boots" = "$want_boots" ]; then
		echo "ok $n $what"
	else
		failed=1
		echo "not ok $n $what (exit $rc, $boots boots; want $want_rc, $want_boots)"
		sed 's/^/# /' "$tmp/log" | tail -n 20
	fi
}
case_ "a boot-time int3 death under MTTCG is booted again, and the run passes" \
	1 0 2 VM_TCG_THREAD=multi VM_BOOT_RETRY=1
case_ "a second such death fails the run" \
	2 1 2 VM_TCG_THREAD=multi VM_BOOT_RETRY=1
case_ "without VM_BOOT_RETRY the first death fails the run" \
	1 1 1 VM_TCG_THREAD=multi
case_ "under single-threaded TCG it is not retried" \
	1 1 1 VM_TCG_THREAD=single VM_BOOT_RETRY=1
case_ "a clean boot is booted once" \
	0 0 1 VM_TCG_THREAD=multi VM_BOOT_RETRY=1
case_ "a command that exits non-zero in a clean guest: exit status 3" \
	0 3 1 FAKE_EXIT=1
case_ "a command that exits non-zero in a guest that splats: exit status 1" \
	0 1 1 FAKE_EXIT=1 FAKE_SPLAT=oops
case_ "a command that exits 0 in a guest that splats: exit status 1" \
	0 1 1 FAKE_SPLAT=oops
# signal_case DESCRIPTION HOW: HOW is "group INT" (Ctrl-C) or "vm TERM"
signal_case() {
	local what=$1 how=$2 sig=$3 vm qpid i rc=ok why=
	rm -f "$tmp/signals" "$tmp/went-on" "$top/build/vm/test-vm-retry/qemu.pid"
	# Its own session: the signal reaches what a terminal's would, and
	# nothing of this script. A job started with & ignores SIGINT, and a
	# shell cannot trap what it was started ignoring: reset it, as for a
	# command run from a terminal. vm.sh runs under a shell, as in
	# test.sh, which must not go on to its next command after a Ctrl-C.
	FAKE_DIR="$tmp" FAKE_CRASHES=0 FAKE_HANG=1 ACCEL=tcg \
		VM_LOCK="$tmp/lock" PATH="$tmp:$PATH" \
		setsid env --default-signal=INT bash -c \
		'"$0" -k debian -n test-vm-retry -t 300 -- true; : > "$1"' \
		"$top/scripts/vm.sh" "$tmp/went-on" > "$tmp/log" 2>&1 &
	vm=$!
	for ((i = 0; i < 300; i++)); do
		qpid=$(cat "$top/build/vm/test-vm-retry/qemu.pid" 2>/dev/null)
		[ -n "$qpid" ] && break
		sleep 0.1
	done
	n=$((n + 1))
	if [ -z "$qpid" ]; then
		failed=1
		echo "not ok $n $what (the stand-in QEMU never started)"
		kill -KILL -- "-$vm" 2>/dev/null
		return
	fi
	if [ "$how" = group ]; then
		kill "-$sig" -- "-$vm"
	else
		kill "-$sig" "$(pgrep -P "$vm" -f scripts/vm.sh)"
	fi
	# A deadline against a hang, not a timing: vm.sh is to stop QEMU
	for ((i = 0; i < 300; i++)); do
		kill -0 "$vm" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$vm" 2>/dev/null; then
		rc=no why="vm.sh still running 30 s after SIG$sig"
	elif [ "$how" = group ] && [ -e "$tmp/went-on" ]; then
		# Bash goes on after a child that handled SIGINT and exited
		rc=no why="the shell that ran vm.sh went on to its next command"
	elif [ "$how" = vm ] && [ ! -e "$tmp/went-on" ]; then
		rc=no why="the shell that ran vm.sh did not go on"
	elif kill -0 "$qpid" 2>/dev/null; then
		rc=no why="QEMU (pid $qpid) still running after vm.sh ended"
	elif ! flock -n "$tmp/lock" true; then
		rc=no why="the VM lock is still held"
	elif ! grep -q "^$qpid TERM" "$tmp/signals" 2>/dev/null; then
		rc=no why="QEMU ended without a SIGTERM"
	fi
	if [ "$rc" = ok ]; then
		echo "ok $n $what"
	else
		failed=1
		echo "not ok $n $what ($why)"
		sed 's/^/# /' "$tmp/log" | tail -n 20
	fi
	# Whatever the outcome, nothing of the case outlives it
	kill -KILL "$qpid" 2>/dev/null
	kill -KILL -- "-$vm" 2>/dev/null
	wait "$vm" 2>/dev/null
}
signal_case "Ctrl-C while the guest runs: QEMU stopped, the VM lock free" \
	group INT
signal_case "SIGTERM to vm.sh alone: QEMU stopped, the VM lock free" \
	vm TERM
echo "1..$n"
exit $failed
