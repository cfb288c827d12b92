#!/bin/bash
# Runs in a guest of scripts/dkms-check.sh: load the dmabuf_mock module that
# `dkms install` put in this kernel's updates/dkms, check that it is the
# package's, run the mock's kselftest, unload it. Checks are printed as
# "dkmsguest: ok|not ok NAME", the kselftest's TAP as "selftest: LINE".
#
# Then load COMPAT_TEST_KO (scripts/dkms/dmabuf_mock_compat_test.c), whose
# init runs the compat helpers that can run here.
#
# usage: dkms-selftest.sh VERSION SELFTEST_BINARY COMPAT_TEST_KO
set -u
version=$1 selftest=$2 compat_test=$3
check() {
	local name=$1
	shift
	if "$@"; then
		echo "dkmsguest: ok $name"
	else
		echo "dkmsguest: not ok $name"
	fi
}
# shellcheck disable=SC2317 # called through check()
is_dkms_path() {
	case $(modinfo -F filename dmabuf_mock 2>/dev/null) in
	*/updates/dkms/dmabuf_mock.ko*) return 0 ;;
	*) return 1 ;;
	esac
}
echo "dkmsguest: kernel $(uname -r), module $(modinfo -F filename dmabuf_mock 2>/dev/null)"
check "modinfo: dmabuf_mock is the one in updates/dkms" is_dkms_path
check "modinfo: version $version" \
	test "$(modinfo -F version dmabuf_mock 2>/dev/null)" = "$version"
check "modprobe dmabuf_mock" modprobe dmabuf_mock
check "loaded: /sys/module/dmabuf_mock/version is $version" \
	test "$(cat /sys/module/dmabuf_mock/version 2>/dev/null)" = "$version"
check "/dev/dmabuf_mock is a character device" test -c /dev/dmabuf_mock
echo "dkmsguest: taint $(cat /proc/sys/kernel/tainted) ($(cat /sys/module/dmabuf_mock/taint 2>/dev/null))"
"$selftest" 2>&1 | sed -u 's/^/selftest: /'
rc=${PIPESTATUS[0]}
check "kselftest exit status 0 (was $rc)" test "$rc" = 0
check "rmmod dmabuf_mock" rmmod dmabuf_mock
check "insmod dmabuf_mock_compat_test.ko (init runs the compat helpers)" \
	insmod "$compat_test"
check "rmmod dmabuf_mock_compat_test" rmmod dmabuf_mock_compat_test
# scripts/dkms-tap.py fails a run that did not get here.
echo "dkmsguest: end"
exit 0
