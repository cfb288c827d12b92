#!/bin/bash
# The full stress run of dma-buf MRs with revoke (`make stress`, not part
# of `make test`): boot the debug kernel (KASAN, lockdep, kmemleak, ...)
# with scripts/vm.sh, run the rdma kselftest rxe_dmabuf_mr_stress.sh for
# DMABUF_MR_STRESS_SECS seconds (default 600), print its TAP and summary.
# vm.sh fails the run on a guest splat, a timeout, a non-zero exit or (a
# final scan on the debug kernel) a kmemleak report.
#
# usage: scripts/stress.sh
# Environment: DMABUF_MR_STRESS_SECS (600), DMABUF_MR_STRESS_THREADS (4),
#   DMABUF_MR_STRESS_SEED, STRESS_KERNEL (debug), STRESS_KSELFTEST_DIR
#   (build/kselftest, from `make kselftest`). Output: build/stress/.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
secs=${DMABUF_MR_STRESS_SECS:-600}
kind=${STRESS_KERNEL:-debug}
ks=${STRESS_KSELFTEST_DIR:-$top/build/kselftest}
out=$top/build/stress
script=$ks/rdma/rxe_dmabuf_mr_stress.sh

[ -x "$script" ] || { echo "stress: no $script: run make kselftest" >&2; exit 1; }
[ -x "$ks/rdma/dmabuf_mr_stress" ] ||
	{ echo "stress: $ks/rdma/dmabuf_mr_stress was not built (libibverbs?)" >&2; exit 1; }
mkdir -p "$out"

env="DMABUF_MR_STRESS_SECS=$secs"
for v in DMABUF_MR_STRESS_THREADS DMABUF_MR_STRESS_SEED; do
	[ -n "${!v:-}" ] && env="$env $v=${!v}"
done
cmd="modprobe -a ib_core ib_uverbs rdma_ucm rdma_rxe dmabuf_mock &&"
cmd="$cmd cd $ks/rdma && start=\$(date +%s) && $env ./rxe_dmabuf_mr_stress.sh;"
cmd="$cmd rc=\$?; echo \"stress: exit \$rc after \$(( \$(date +%s) - start )) s\"; exit \$rc"

start=$(date +%s)
set +e
# The run, the guest's boot and teardown, and the kmemleak scan.
"$top/scripts/vm.sh" -k "$kind" -n stress -t $(( secs + 900 )) -- "$cmd" \
	> "$out/vm.log" 2>&1
rc=$?
set -e
log=$top/build/vm/stress/out.log
# The program's own TAP (kselftest_harness, one test).
tr -d '\r' < "$log" | grep -aE '^(TAP version|[0-9]+\.\.[0-9]+$|(not )?ok )' \
	> "$out/stress.tap" || true
cat "$out/stress.tap"
grep -a '^# summary:' "$log" || echo "stress: no summary line"
grep -a '^# FAIL:' "$log" || true
grep -a '^stress: exit' "$log" || true
tail -n 1 "$out/vm.log"
echo "stress: $kind kernel, ${secs}s requested, $(( $(date +%s) - start ))s in all; log $log"
if [ $rc != 0 ]; then
	echo "stress: FAILED (vm.sh exit $rc; see $out/vm.log)" >&2
	exit 1
fi
