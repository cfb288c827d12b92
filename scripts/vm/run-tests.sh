#!/bin/bash
# Runs in the guest (scripts/test.sh): load our modules, run the KUnit
# suites (KUNIT_SUITES, "module:suite ..."), then the kselftests
# (KSELFTEST_RUN, "collection" or "collection:test" ...) from KSELFTEST_DIR,
# then those of KSELFTEST_AGAIN ("collection:test:VAR=VALUE" ...) once more
# with VAR=VALUE in their environment, reported as "test[VAR=VALUE]" (when
# KSELFTEST_RUN selects them), then rdma-tool-check.sh and
# rdma-core-tests.sh (rdma-core's own dma-buf MR tests; RDMA_CORE_TESTS=0:
# not those).
# Exits non-zero if a module is missing, the kselftest runner fails or a
# check of rdma-tool-check.sh or a test of rdma-core-tests.sh fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rc=0
modprobe -a ib_core ib_uverbs rdma_ucm rdma_rxe dmabuf_mock || rc=1
if [ -n "${KUNIT_SUITES:-}" ]; then
	# shellcheck disable=SC2086
	"$here/kunit.sh" $KUNIT_SUITES
fi
# Our selftests skip without the mock, as they should on a user's machine;
# here the mock must be loaded, so its absence fails the run.
if [ ! -c /dev/dmabuf_mock ]; then
	echo "guest: /dev/dmabuf_mock is missing before the kselftests"
	rc=1
fi
# The stress test's random choices: one fixed seed in make test, so that
# every run tests the same thing (dmabuf_mr_stress prints it; make stress,
# scripts/stress.sh, leaves it to the clock).
export DMABUF_MR_STRESS_SEED=${DMABUF_MR_STRESS_SEED:-20261202}
echo "guest: DMABUF_MR_STRESS_SEED=$DMABUF_MR_STRESS_SEED"
# KSELFTEST_EXCLUDE: "collection:program" ... that this guest does not run
# (scripts/test.sh says which and why); a collection is then expanded into
# its programs, in run_kselftest.sh's order.
excluded() {
	case " ${KSELFTEST_EXCLUDE:-} " in *" $1 "*) return 0 ;; esac
	return 1
}
args=()
for t in $KSELFTEST_RUN; do
	case $t in
	*:*) excluded "$t" || args+=(-t "$t") ;;
	*)
		if [ -z "${KSELFTEST_EXCLUDE:-}" ]; then
			args+=(-c "$t")
			continue
		fi
		for p in $(cd "$KSELFTEST_DIR" && ./run_kselftest.sh -l); do
			[ "${p%%:*}" = "$t" ] || continue
			excluded "$p" || args+=(-t "$p")
		done
		;;
	esac
done
[ -z "${KSELFTEST_EXCLUDE:-}" ] || echo "guest: not run here: $KSELFTEST_EXCLUDE"
# 450 s a program: on the debug kernel rxe_dmabuf_mr.sh took 190-437 s
# (2026-12-02); each program's time of it is in results/<guest>.times.
cd "$KSELFTEST_DIR" && ./run_kselftest.sh -o 450 "${args[@]}" || rc=1
for again in ${KSELFTEST_AGAIN:-}; do
	coll=${again%%:*} rest=${again#*:}
	test=${rest%%:*} var=${rest#*:}
	case " $KSELFTEST_RUN " in
	*" $coll "*|*" $coll:$test "*) ;;
	*) continue ;;
	esac
	# shellcheck disable=SC2086
	env "$var" ./run_kselftest.sh -o 450 -t "$coll:$test" |
		sed -u "s|selftests: $coll: $test\b|selftests: $coll: $test[$var]|"
	[ "${PIPESTATUS[0]}" = 0 ] || rc=1
done
# The patched rdma tool on a dma-buf MR, through revoke and dereg: TAP
# lines prefixed "rdmatool: " (scripts/test.sh counts them).
"$here/rdma-tool-check.sh" || rc=1
# rdma-core 65.0 + its pull request, in place: tests/test_mr.py's dma-buf
# tests, TAP lines prefixed "rdmacore: " (not with RDMA_CORE_TESTS=0).
if [ "${RDMA_CORE_TESTS:-1}" != 0 ]; then
	"$here/rdma-core-tests.sh" || rc=1
fi
exit $rc
