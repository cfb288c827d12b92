#!/bin/bash
# Boot a kernel under QEMU with the host root as a read-only 9p root (tmpfs
# overlay on top), run a command inside, stream its output, and fail on a
# guest splat, a timeout or a non-zero exit.
# Exit status: 0 when all went well; 3 when the guest booted and reported,
# with no splat and no timeout, and only the command exited non-zero (a
# caller whose command's results say which test failed counts that once:
# scripts/test.sh); 2 for a usage error; 1 for everything else (no boot,
# a splat, a timeout, QEMU killed).
#
# usage: scripts/vm.sh [-k debian|stock|base|debug | -K IMAGE -M MODDIR]
#                      [-t SECONDS] [-n NAME] -- CMD...
#   -k debian  Debian's prebuilt trixie-backports 7.3 kernel + modules, our
#   out-of-tree
#              modules (build/oot) installed over the stock ones (default)
#   -k stock   Debian's prebuilt trixie-backports 7.3 kernel with only its own
#   modules, and
#              the distro's rdma-core and rdma tool (none of build/oot,
#              build/rdma-core-pr, build/iproute2): an unpatched peer
#   -k base    the in-tree kernel (make kernel), all modules from the tree
#   -k debug   the in-tree debug kernel (make kernel-debug)
#   -K IMAGE -M MODDIR  instead of -k: boot the kernel image IMAGE with the
#              modules in MODDIR (a lib/modules/KVER directory, named after
#              the kernel's release), as they are (e.g. a Debian root's)
#   -t         timeout in seconds for the whole run (default 900)
#   -n         name of the run: output in build/vm/NAME/ (default: kernel)
# Environment: ACCEL=auto|kvm|tcg (auto: try KVM once, fall back to TCG),
#   VM_MEM (default 4G), VM_CPUS (default 2),
#   VM_LOCK=FILE: the lock that keeps one VM at a time (default
#   build/.vm.lock; a second checkout on the same machine shares the first's),
#   VM_LOCK_HELD=1: the caller already holds VM_LOCK for this run (a runner
#   that boots two guests at once, scripts/two-host.sh); do not take it,
#   VM_NETDEV=SPEC: one virtio-net NIC on QEMU's `-netdev SPEC,id=wire`
#   (e.g. stream,server=on,addr.type=unix,addr.path=FILE), VM_MAC its MAC
#   address (default QEMU's); without VM_NETDEV the guest has no NIC,
#   VM_NETDEV_WAIT=SOCKET: start QEMU only once SOCKET exists (at most
#   120 s), for a NIC that connects to another guest's listening one,
#   VM_PLUGIN_OUT=FILE: count guest instructions with the markcount TCG
#   plugin (make qemu-plugin builds it) and write "<id> <count>" to FILE at
#   each marker of userspace/insn_marker.h; TCG only (ACCEL=kvm is refused,
#   auto means tcg). VM_CPUS=1 keeps other vCPUs out of the counts.
#   VM_TCG_THREAD=single|multi (default single): multi runs each vCPU in
#   its own host thread (MTTCG), so that work pinned to one vCPU does not
#   share a host CPU with another's; not with VM_PLUGIN_OUT (its counter
#   is not atomic).
#   VM_SHELL=1: the guest's second console (/dev/hvc1) is this terminal
#   (QEMU's stdio, raw: Ctrl-C goes to the guest), and QEMU stays in the
#   terminal's foreground process group to read it; CMD then runs a shell
#   there (make vm-shell). The guest ends when that shell exits.
#   VM_APPEND=ARGS: more kernel command line, e.g. swiotlb=force (every
#   streaming DMA mapping bounces, as in a confidential-computing guest;
#   scripts/swiotlb-check.sh).
#   VM_UPDATES="KO...": more modules for the guest's updates/ directory,
#   which depmod ranks above the kernel's own (e.g. one rebuilt module
#   on Debian's stock kernel: scripts/blktests.sh).
#   VM_BOOT_RETRY=1: with VM_TCG_THREAD=multi, boot once more when the
#   guest died in boot-time code patching ("Oops: int3" on the console)
#   before its init wrote anything: a known MTTCG failure (pipeline.md),
#   not one of the guest's command. The failed console log is kept as
#   build/vm/NAME.boot-crash.log.
# The command runs as root in the guest, in build/vm/NAME, with the host's
# programs; its output goes to stdout and build/vm/NAME/out.log (and, each
# line with the seconds since QEMU started, out.times), the kernel log to
# build/vm/NAME/console.log; QEMU's pid is in build/vm/NAME/qemu.pid.
set -eu
vm_args=("$@")

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
# Instruction counting (VM_PLUGIN_OUT): a TCG plugin, which KVM cannot run.
# Checked before waiting for the VM lock.
plugin=
if [ -n "${VM_PLUGIN_OUT:-}" ]; then
	plugin=$build/qemu-plugin/libmarkcount.so
	[ -f "$plugin" ] ||
		{ echo "vm: VM_PLUGIN_OUT: no $plugin: run make qemu-plugin" >&2; exit 1; }
	case ${ACCEL:-auto} in
	kvm) echo "vm: VM_PLUGIN_OUT needs TCG (plugins do not run under KVM): unset ACCEL or set ACCEL=tcg" >&2
	     exit 2 ;;
	*) ACCEL=tcg ;;
	esac
	[ "${VM_TCG_THREAD:-single}" = single ] ||
		{ echo "vm: VM_PLUGIN_OUT needs VM_TCG_THREAD=single" >&2; exit 2; }
	plugin_out=$(realpath -m "$VM_PLUGIN_OUT")
	[ -d "$(dirname "$plugin_out")" ] ||
		{ echo "vm: VM_PLUGIN_OUT: no directory $(dirname "$plugin_out")" >&2; exit 1; }
fi

# One VM at a time on a 2-core machine: a second run waits for the first.
mkdir -p "$build"
if [ "${VM_LOCK_HELD:-}" != 1 ]; then
	exec 9>"${VM_LOCK:-$build/.vm.lock}"
	flock -n 9 || { echo "vm: waiting for another VM to finish" >&2; flock 9; }
fi
kind=debian timeout=900 name=
image_opt='' mods_opt=''
while getopts k:t:n:K:M: o; do
	case $o in
	k) kind=$OPTARG ;;
	K) image_opt=$OPTARG ;;
	M) mods_opt=$OPTARG ;;
	t) timeout=$OPTARG ;;
	n) name=$OPTARG ;;
	*) sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "vm: no command given" >&2; exit 2; }
if [ -n "$image_opt$mods_opt" ]; then
	if [ -z "$image_opt" ] || [ -z "$mods_opt" ]; then
		echo "vm: -K and -M go together" >&2
		exit 2
	fi
	[ -d "$mods_opt" ] || { echo "vm: no modules directory $mods_opt" >&2; exit 1; }
	kind=custom
fi
name=${name:-$kind}
run=$build/vm/$name
root=$run/root

case $kind in
debian|stock)
	. "$build/versions.mk"
	kver=$KREL
	image=$build/deb-root/usr/lib/modules/$kver/vmlinuz
	mods=$build/deb-root/usr/lib/modules/$kver
	;;
base|debug)
	kb=$build/kbuild-$kind
	[ -f "$kb/include/config/kernel.release" ] ||
		{ echo "vm: no $kind kernel: run make kernel${kind#base}" >&2; exit 1; }
	kver=$(cat "$kb/include/config/kernel.release")
	image=$kb/arch/x86/boot/bzImage
	mods=$kb/mod-root/lib/modules/$kver
	;;
custom)
	[ -n "$image_opt" ] || { echo "vm: -k custom: use -K and -M" >&2; exit 2; }
	image=$(realpath "$image_opt")
	mods=$(realpath "$mods_opt")
	kver=${mods##*/}
	;;
*) echo "vm: unknown kernel $kind" >&2; exit 2 ;;
esac
[ -f "$image" ] || { echo "vm: no kernel image $image" >&2; exit 1; }

# Modules: a hard-linked copy of the kernel's, plus (Debian kernel) ours in
# updates/, which depmod ranks above the stock ones.
rm -rf "$run"
mkdir -p "$root/lib/modules"
# (Across file systems the links fail after cp has made the directories:
# start again from nothing, or cp -a copies into them, one level down.)
cp -al "$mods" "$root/lib/modules/$kver" 2>/dev/null ||
	{ rm -rf "$root/lib/modules/$kver"; cp -a "$mods" "$root/lib/modules/$kver"; }
rm -f "$root/lib/modules/$kver/build" "$root/lib/modules/$kver/source"
if [ "$kind" = debian ] && [ -s "$build/oot/modules.list" ]; then
	mkdir -p "$root/lib/modules/$kver/updates"
	while read -r ko; do
		cp "$build/oot/out/$ko" "$root/lib/modules/$kver/updates/"
	done < "$build/oot/modules.list"
fi
for ko in ${VM_UPDATES:-}; do
	mkdir -p "$root/lib/modules/$kver/updates"
	cp "$ko" "$root/lib/modules/$kver/updates/" ||
		{ echo "vm: VM_UPDATES: no module $ko" >&2; exit 1; }
done
depmod -b "$root" "$kver"

# Stage-1 initramfs: busybox plus the modules the 9p root needs (built in
# for our kernels; modules in Debian's), decompressed for busybox insmod;
# and the virtio console that carries the command's output (a module in
# Debian's 6.1).
ird=$run/initramfs
mkdir -p "$ird/bin" "$ird/modules" "$ird/proc" "$ird/sys" "$ird/dev"
cp /bin/busybox "$ird/bin/busybox"
cp "$top/scripts/vm/stage1-init" "$ird/init"
: > "$ird/modules.order"
for line in $(modprobe -d "$root" -S "$kver" --show-depends -a \
		virtio_pci 9pnet_virtio 9p overlay virtio_console 2>/dev/null |
	      sed -n 's/^insmod //p' | awk '{print $1}'); do
	base=$(basename "$line")
	case $base in
	*.xz) xz -dc "$line" > "$ird/modules/${base%.xz}"; base=${base%.xz} ;;
	*.zst) zstd -qdc "$line" > "$ird/modules/${base%.zst}"; base=${base%.zst} ;;
	*) cp "$line" "$ird/modules/$base" ;;
	esac
	grep -qx "$base" "$ird/modules.order" || echo "$base" >> "$ird/modules.order"
done
(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) > "$run/initramfs.cpio.gz"

printf '%s\n' "$*" > "$run/cmd"

# -device qxl: a TTM GPU (no display), one of the exporters dmabuf_mr
# registers buffers of (dmabuf_mr_real.qxl_*, dmabuf_mr_qxl_vram).
qemu=(qemu-system-x86_64 -nodefaults -display none -no-reboot
      -m "${VM_MEM:-4G}" -smp "${VM_CPUS:-2}"
      -kernel "$image" -initrd "$run/initramfs.cpio.gz"
      -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
      -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
      -device virtio-rng-pci
      -device qxl
      -pidfile "$run/qemu.pid"
      -serial "file:$run/console.log"
      -device virtio-serial-pci
      -chardev "file,id=out,path=$run/out.log"
      -device virtconsole,chardev=out)
tmo_fg=()
if [ "${VM_SHELL:-}" = 1 ]; then
	[ -t 0 ] || { echo "vm: VM_SHELL=1 needs a terminal on stdin" >&2; exit 2; }
	qemu+=(-chardev stdio,id=term,signal=off -device virtconsole,chardev=term)
	tmo_fg=(--foreground)
	# A background job's stdin is /dev/null unless it says otherwise.
	exec {term}<&0
fi
cmdline="console=ttyS0 panic=-1 oops=panic panic_on_warn=0 rdinit=/init \
revoke.init=$top/scripts/vm/guest-init revoke.dir=$run"
# An unpatched peer: the guest init leaves the distro's rdma-core and rdma
# tool in place.
if [ "$kind" = stock ]; then
	cmdline="$cmdline revoke.stock=1"
fi
cmdline="$cmdline${VM_APPEND:+ $VM_APPEND}"

# KVM here exists but cannot run a guest (pipeline.md): probe once, then
# remember the answer for this build directory.
accel=${ACCEL:-auto}
if [ "$accel" = auto ]; then
	if [ -f "$build/vm/accel" ]; then
		accel=$(cat "$build/vm/accel")
	else
		accel=tcg
		if [ -w /dev/kvm ] &&
		   timeout 60 "${qemu[@]}" -accel kvm -cpu host \
			-append "$cmdline revoke.probe=1" >/dev/null 2>&1 &&
		   grep -q REVOKE-PROBE-OK "$run/console.log"; then
			accel=kvm
		fi
		echo "$accel" > "$build/vm/accel"
		: > "$run/console.log"
	fi
fi
case $accel in
kvm) qemu+=(-accel kvm -cpu host) ;;
tcg)
	case ${VM_TCG_THREAD:-single} in
	single|multi) qemu+=(-accel "tcg,thread=${VM_TCG_THREAD:-single}") ;;
	*) echo "vm: VM_TCG_THREAD must be single or multi" >&2; exit 2 ;;
	esac ;;
*) echo "vm: ACCEL must be auto, kvm or tcg" >&2; exit 2 ;;
esac
# After the KVM probe, which must not open the wire's socket.
if [ -n "${VM_NETDEV:-}" ]; then
	qemu+=(-netdev "$VM_NETDEV,id=wire"
	       -device "virtio-net-pci,netdev=wire${VM_MAC:+,mac=$VM_MAC}")
fi
if [ -n "${VM_NETDEV_WAIT:-}" ]; then
	for _ in $(seq 240); do
		[ -S "$VM_NETDEV_WAIT" ] && break
		sleep 0.5
	done
	[ -S "$VM_NETDEV_WAIT" ] ||
		{ echo "vm: FAILED: no socket $VM_NETDEV_WAIT to connect to after 120 s" >&2; exit 1; }
fi
if [ -n "$plugin" ]; then
	# QEMU 7.2: -plugin [file=]FILE[,NAME=VALUE]..., the plugin gets
	# "NAME=VALUE"; a comma in an option value is written twice.
	qemu+=(-plugin "$plugin,out=${plugin_out//,/,,}")
	echo "vm: counting instructions (markcount) into $plugin_out" >&2
fi

echo "vm: $kind kernel $kver, accel $accel, timeout ${timeout}s, run in $run" >&2
: > "$run/out.log"
: > "$run/out.times"
start=$EPOCHSECONDS
# QEMU runs under timeout, in timeout's own process group, where a
# terminal's Ctrl-C does not reach it, and it holds the VM lock (fd 9): on
# SIGINT, SIGTERM or SIGHUP stop it (timeout passes the SIGTERM on to QEMU,
# and kills it 10 s later if it is still there), wait for it, and only then
# exit, which lets the lock go.
qpid= tpid=
stop_guest() {
	trap '' INT TERM HUP
	if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
		echo "vm: SIG$1: stopping QEMU (pid $(cat "$run/qemu.pid" 2>/dev/null || echo '?'))" >&2
		kill -TERM "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
	fi
	# tail ends within a second of QEMU
	[ -z "$tpid" ] || wait "$tpid" 2>/dev/null || true
	# Die of the signal: a shell that waits for this one goes on with
	# its next command unless its child was killed by SIGINT.
	trap - "$1"
	kill "-$1" $$
}
trap 'stop_guest INT' INT
trap 'stop_guest TERM' TERM
trap 'stop_guest HUP' HUP
if [ "${VM_SHELL:-}" = 1 ]; then
	timeout "${tmo_fg[@]}" -k 10 "$timeout" "${qemu[@]}" -append "$cmdline" \
		<&"$term" 2> "$run/qemu.log" &
else
	timeout -k 10 "$timeout" "${qemu[@]}" -append "$cmdline" \
		> "$run/qemu.log" 2>&1 &
fi
qpid=$!
# Each line also goes to out.times with the seconds since QEMU started
# (scripts/test.sh reports how long each test took from it). In the
# background: a trap runs at once only while the shell waits with `wait`.
tail -n +1 --pid=$qpid -f "$run/out.log" |
	while IFS= read -r line; do
		printf '%d %s\n' $((EPOCHSECONDS - start)) "$line" >> "$run/out.times"
		case $line in REVOKE-VM-EXIT\ *) ;; *) printf '%s\n' "$line" ;; esac
	done 9>&- &
tpid=$!
set +e
wait $tpid
wait $qpid
qrc=$?
set -e
trap - INT TERM HUP
secs=$(( $(date +%s) - start ))

fail='' cmd_only=''
rc=$(sed -n 's/^REVOKE-VM-EXIT \([0-9]*\).*/\1/p' "$run/out.log" | tail -n1)
if [ "$qrc" = 124 ] || { [ "$qrc" = 137 ] && [ "$secs" -ge "$timeout" ]; }; then
	fail="timed out after ${timeout}s"
elif [ "$qrc" = 137 ]; then
	fail="QEMU was killed (SIGKILL), not by the timeout"
elif [ -z "$rc" ]; then
	fail="guest ended without reporting (qemu exit $qrc)"
elif [ "$rc" != 0 ]; then
	fail="command exited $rc"
	cmd_only=1
fi
# Splats (scripts/vm/splat-patterns, which the guest init also looks for
# in its own kernel log: a message below the console's log level, or one
# the console dropped, is in dmesg but not on the serial console).
if grep -aEq -f "$top/scripts/vm/splat-patterns" "$run/console.log"; then
	fail="${fail:+$fail; }kernel splat in the guest log"
	cmd_only=
fi
if grep -aq '^REVOKE-VM-SPLAT' "$run/out.log"; then
	fail="${fail:+$fail; }the guest found a kernel splat in its dmesg"
	cmd_only=
fi
if [ -n "$fail" ] && [ "${VM_BOOT_RETRY:-0}" = 1 ] &&
   [ "${VM_TCG_THREAD:-single}" = multi ] && [ ! -s "$run/out.log" ] &&
   grep -aq 'Oops: int3' "$run/console.log"; then
	cp "$run/console.log" "$run.boot-crash.log"
	echo "vm: the guest died in boot-time code patching under MTTCG before its init ran ($run.boot-crash.log); booting it once more" >&2
	# This process holds the VM lock (fd 9), and exec keeps it.
	VM_BOOT_RETRY=0 VM_LOCK_HELD=1 exec "$0" "${vm_args[@]}"
fi
if [ -n "$fail" ]; then
	echo "vm: FAILED: $fail ($secs s); guest kernel log (last 150 lines):" >&2
	tail -n 150 "$run/console.log" >&2
	[ -s "$run/qemu.log" ] && { echo "vm: qemu said:" >&2; cat "$run/qemu.log" >&2; }
	[ -n "$cmd_only" ] && exit 3
	exit 1
fi
echo "vm: ok ($secs s)" >&2
