#!/bin/bash
# Runs in the guest (scripts/vm/run-tests.sh): rdma-core's own dma-buf MR
# tests (tests/test_mr.py: DmaBufMRTest, DmaBufTestCase and, from the
# IBV_EVENT_MR_REVOKED RFC, DmaBufMRRevokeTest) from the in-place build of
# rdma-core 65.0 + rdma-core/upstream-pr (scripts/rdma-core-pr.sh), on an
# rxe device over a veth pair. There is no GPU here: pyverbs' DmaBuf takes
# its buffers from udmabuf (upstream-pr 0004).
#
# Prints one TAP line per test prefixed "rdmacore: " (scripts/test.sh
# collects them); a test unittest skipped is "ok ... # SKIP reason", so the
# manifest's list of expected skips decides. A test marked to fail
# (@unittest.expectedFailure) that fails is "not ok" too: no test here is
# expected to fail. When fewer tests ran than were loaded, or the runner
# fails, one more "not ok" says so. Exits 0 unless a test failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
run=$top/build/rdma-core-pr/obj/bin/run_tests.py
dev=rctest
classes="test_mr.DmaBufMRTest test_mr.DmaBufTestCase test_mr.DmaBufMRRevokeTest"
n=0 failed=0

tap() { # STATUS DESCRIPTION
	n=$((n + 1))
	echo "rdmacore: $1 $n - $2"
	case $1 in "not ok") failed=1 ;; esac
}
skip() {
	tap ok "rdma-core tests/test_mr.py dma-buf tests # SKIP $*"
	exit 0
}

[ -x "$run" ] || skip "no $run (scripts/rdma-core-pr.sh)"
modprobe -a ib_uverbs rdma_rxe dmabuf_mock 2>/dev/null
modprobe udmabuf 2>/dev/null
[ -c /dev/udmabuf ] || skip "no /dev/udmabuf"

ip link add rct0 type veth peer name rct1 || skip "cannot make a veth pair"
cleanup() {
	rdma link del "$dev" 2>/dev/null
	ip link del rct0 2>/dev/null
}
trap cleanup EXIT
ip addr add 192.0.2.77/24 dev rct0
ip link set rct0 up
ip link set rct1 up
rdma link add "$dev" type rxe netdev rct0 || skip "cannot add an rxe device"

# The runner: run_tests.py's (and its python3, scripts/rdma-core-pr.sh), with a result class that prints TAP lines
# ("ok - ID", "ok - ID # SKIP REASON", "not ok - ID: RESULT"), and one
# "not ok" more when fewer tests ran than were loaded.
res=/tmp/rdma-core-tests.tap
# The build tree is read-only here: no bytecode to write.
# shellcheck disable=SC2086 # one class per word
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$top/build/rdma-core-pr/obj/python \
	timeout 900 /usr/bin/python3 - "$top/build/rdma-core-pr/src" "$dev" $classes > "$res" 2>&1 <<'EOF'
import os, sys, traceback, unittest

src, dev, names = sys.argv[1], sys.argv[2], sys.argv[3:]
# After PYTHONPATH: pyverbs is the build's (src/pyverbs is its source).
sys.path += [src, os.path.join(src, "tests")]
sys.argv = ["run_tests.py", "--dev", dev]
from args_parser import parser
parser.parse_args()
import tests  # noqa: E402,F401 (after the arguments are parsed)


class Tap(unittest.TestResult):
    def out(self, line):
        print(line, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.out(f"ok - {test.id()}")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.out(f"ok - {test.id()} # SKIP {reason}")

    def bad(self, test, kind, err):
        lines = "".join(traceback.format_exception(*err)).rstrip().splitlines()
        for line in lines:
            self.out(f"# {line}")
        self.out(f"not ok - {test.id()}: {kind}: {lines[-1] if lines else ''}")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.bad(test, "FAIL", err)

    def addError(self, test, err):
        super().addError(test, err)
        self.bad(test, "ERROR", err)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.bad(test, "expected failure", err)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.out(f"not ok - {test.id()}: unexpected success")


suite = unittest.defaultTestLoader.loadTestsFromNames(
    [f"tests.{n}" for n in names])
want = suite.countTestCases()
r = Tap()
suite.run(r)
print(f"# {want} tests loaded, {r.testsRun} ran")
if r.testsRun != want or want == 0:
    print(f"not ok - {want} tests loaded, {r.testsRun} ran")
EOF
rc=$?
while IFS= read -r line; do
	case $line in
	"ok - "*) tap ok "${line#ok - }" ;;
	"not ok - "*) tap "not ok" "${line#not ok - }" ;;
	"#"*) echo "$line" ;;
	*) echo "# $line" ;;
	esac
done < "$res"
[ $rc = 0 ] || tap "not ok" "the test runner exited $rc"
exit $failed
