#!/bin/bash
# One test in a guest, for a person at a terminal: a kselftest program
# (optionally one case; its own arguments passed through) or a KUnit suite,
# on one kernel, with its output as it runs and its exit status.
#
# usage: scripts/test-one.sh [-k debian|base|debug | -K IMAGE -M MODDIR]
#                            TEST [ARG...]
#   TEST  COLLECTION:PROGRAM, e.g. rdma:dmabuf_mr, drivers/dma-buf:dmabuf_mock
#         (a program with an rxe wrapper runs through it, which sets up the
#         rxe devices); the ARGs go to the program, e.g. -r
#         FIXTURE.VARIANT.TEST for one case, -l to list them
#         kunit:MODULE:SUITE, e.g. kunit:efa_kunit:efa_dmabuf_mr (-k debug)
#   -k    the kernel (default debian: Debian's trixie-backports 7.3 with our
#   modules);
#         -K/-M a kernel image of your own and its modules (scripts/vm.sh)
# make test-one T=TEST [ARGS="..."] [KERNEL=debug] builds what it needs
# first. Exit status: the test's (0 passed, 4 skipped, else failed), or 1
# when the guest did not boot, timed out or splatted (scripts/vm.sh).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
kind=debian image='' moddir='' name=test-one
while getopts k:K:M: o; do
	case $o in
	k) kind=$OPTARG ;;
	K) image=$OPTARG ;;
	M) moddir=$OPTARG ;;
	*) sed -n '2,/^set -u/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d' >&2; exit 2; }
kernel=(-k "$kind")
if [ -n "$image$moddir" ]; then
	if [ -z "$image" ] || [ -z "$moddir" ]; then
		echo "test-one: -K and -M go together" >&2
		exit 2
	fi
	kernel=(-K "$image" -M "$moddir")
fi
[ -x "$top/build/kselftest/run_kselftest.sh" ] ||
	{ echo "test-one: no kselftests in build/kselftest: run make kselftest" >&2; exit 1; }

args=
for a in "$@"; do args+=" $(printf '%q' "$a")"; done
cmd="KSELFTEST_DIR=$top/build/kselftest $top/scripts/vm/test-one.sh$args"
"$top/scripts/vm.sh" "${kernel[@]}" -n "$name" -t "${VM_TIMEOUT:-900}" -- "$cmd"
rc=$?
log=$top/build/vm/$name
case $rc in
0) echo "test-one: $1 passed (output: ${log#"$top"/}/out.log, kernel log: console.log)" ;;
3)
	rc=$(sed -n 's/^REVOKE-VM-EXIT \([0-9]*\).*/\1/p' "$log/out.log" | tail -n1)
	echo "test-one: $1 exited ${rc:-?} (output: ${log#"$top"/}/out.log, kernel log: console.log)"
	[ -n "$rc" ] || rc=1
	;;
*) echo "test-one: the guest failed (scripts/vm.sh exit $rc; ${log#"$top"/}/console.log)"; rc=1 ;;
esac
exit "$rc"
