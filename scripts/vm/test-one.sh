#!/bin/bash
# Runs in the guest (scripts/test-one.sh): load our modules and run one
# test, its arguments passed through, and exit with its status.
#
# usage: test-one.sh COLLECTION:PROGRAM [ARG...]
#        test-one.sh kunit:MODULE:SUITE
#   COLLECTION:PROGRAM  a kselftest program of KSELFTEST_DIR (a program
#       that has an rxe wrapper, rxe_PROGRAM.sh, runs through it: the
#       wrapper sets up the rxe devices and passes the arguments on, e.g.
#       -r FIXTURE.VARIANT.TEST for one case of a kselftest_harness test)
#   kunit:MODULE:SUITE  a KUnit suite (kernels with KUnit: debug)
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d' >&2; exit 2; }
what=$1
shift
modprobe -a ib_core ib_uverbs rdma_ucm rdma_rxe dmabuf_mock ||
	echo "test-one: not every module loaded (ib_core ib_uverbs rdma_ucm rdma_rxe dmabuf_mock)"
case $what in
kunit:*:*)
	out=$("$here/kunit.sh" "${what#kunit:}")
	echo "$out"
	[ -n "$out" ] && ! grep -q "^kunit: not ok" <<< "$out"
	exit
	;;
*:*) ;;
*) echo "test-one: $what: COLLECTION:PROGRAM or kunit:MODULE:SUITE" >&2; exit 2 ;;
esac
coll=${what%%:*} prog=${what#*:}
dir=$KSELFTEST_DIR/$coll
[ -d "$dir" ] || { echo "test-one: no collection $coll in $KSELFTEST_DIR" >&2; exit 2; }
cd "$dir" || exit 2
if [ -x "rxe_$prog.sh" ]; then
	run=("./rxe_$prog.sh" "$@")
elif [ -x "$prog" ]; then
	run=("./$prog" "$@")
else
	echo "test-one: no program $prog in $coll (installed: $(echo *))" >&2
	exit 2
fi
echo "test-one: ${run[*]}"
out=$(mktemp)
"${run[@]}" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
# kselftest_harness passes when a filter (-r, -t, ...) matches no case.
if [ "$rc" = 0 ] && grep -qx '1\.\.0' "$out"; then
	echo "test-one: no case of $prog ran: no match for $*?"
	rc=1
fi
exit "$rc"
