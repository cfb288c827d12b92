#!/bin/bash
# scripts/vm.sh's VM_BOOT_RETRY and exit status, with a stand-in for
# qemu-system-x86_64 on PATH (no guest boots): a guest that dies with
# "Oops: int3" before its init ran is booted once more under MTTCG with
# VM_BOOT_RETRY=1, and only then; a second such death, or the same without
# VM_BOOT_RETRY or under single-threaded TCG, fails the run. A guest whose
# command exits non-zero gives exit status 3, unless it also splats (1).
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
	esac
done
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
echo "1..$n"
exit $failed
