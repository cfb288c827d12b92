#!/bin/bash
# scripts/test-one.sh as a person uses it, on Debian's trixie-backports 7.3
# kernel with our modules (four guests, about 30 s each): one case of dmabuf_mr
# through its rxe wrapper runs alone and passes; a filter that matches no case
# fails (kselftest_harness itself passes it); an unknown program is a usage
# error; a program without a wrapper gets its arguments (dmabuf_mock -l,
# which exits 4 after listing, as every kselftest_harness program does).
# And make vm-shell, on a terminal (script(1)'s): what is typed runs in the
# guest, with our modules loaded, and exit ends the guest.
# Prints TAP.
# shellcheck disable=SC2016 # the checks are eval'd
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/tap-check.sh
. "$top/scripts/tap-check.sh"
one() {
	"$top/scripts/test-one.sh" "$@" > "$tmp/out" 2>&1
	echo $? > "$tmp/rc"
	tr -d '\r' < "$top/build/vm/test-one/out.log" > "$tmp/guest" 2>/dev/null || : > "$tmp/guest"
}
rc() { [ "$(cat "$tmp/rc")" = "$1" ]; }

case1=dmabuf_mr_data.off0_len1.rdma_write_to_mr
echo "TAP version 13"
echo "1..5"
one rdma:dmabuf_mr -r "$case1"
check "rdma:dmabuf_mr -r $case1: that case alone runs, through rxe_dmabuf_mr.sh, and passes (exit 0)" \
	eval 'rc 0 && grep -qx "test-one: ./rxe_dmabuf_mr.sh -r $case1" "$tmp/guest" &&
	      grep -qx "1..1" "$tmp/guest" && grep -qx "ok 1 $case1" "$tmp/guest" &&
	      grep -q "^test-one: rdma:dmabuf_mr passed" "$tmp/out"'
one rdma:dmabuf_mr -r no_such.case
check "a filter that matches no case fails (exit 1), saying so" \
	eval 'rc 1 && grep -q "^test-one: no case of dmabuf_mr ran" "$tmp/guest" &&
	      grep -q "^test-one: rdma:dmabuf_mr exited 1" "$tmp/out"'
one rdma:no_such_program
check "an unknown program is a usage error (exit 2) that lists the installed ones" \
	eval 'rc 2 && grep -q "^test-one: no program no_such_program in rdma (installed: .*dmabuf_mr" "$tmp/guest"'
one drivers/dma-buf:dmabuf_mock -l
check "a program without an rxe wrapper gets the arguments (dmabuf_mock -l lists its cases and exits 4, KSFT_SKIP, as kselftest_harness does)" \
	eval 'rc 4 && grep -qx "test-one: ./dmabuf_mock -l" "$tmp/guest" &&
	      grep -q "^dmabuf_mock  *revoke_without_importers$" "$tmp/guest" &&
	      grep -q "^  *cmd_size$" "$tmp/guest"'
printf 'echo MARK-$((6 * 7)); ls /dev/dmabuf_mock; uname -r\nexit\n' > "$tmp/typed"
timeout 600 script -qec "make -s -C $top vm-shell" "$tmp/typescript" < "$tmp/typed" > "$tmp/out" 2>&1
echo $? > "$tmp/rc"
# Without the terminal's escape sequences (bash's bracketed paste).
tr -d '\r\000' < "$tmp/typescript" 2>/dev/null |
	sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' > "$tmp/guest"
. "$top/build/versions.mk"
check "make vm-shell: what is typed on the terminal runs in the guest (Debian's kernel, the mock loaded), exit ends it" \
	eval 'rc 0 && grep -qx "MARK-42" "$tmp/guest" && grep -qx "/dev/dmabuf_mock" "$tmp/guest" &&
	      grep -qx "$KREL" "$tmp/guest" && grep -q "^vm: ok" "$tmp/guest"'
[ "$failed" = 0 ]
