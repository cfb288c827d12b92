#!/bin/sh
# Runs in the guest: load KUnit test modules (their suites run at load),
# print each test case's result from the kernel log as a top-level TAP line
# "kunit: ok|not ok - SUITE: CASE", so that the host can tell them from
# kselftest's, then unload the module: "kunit: ok - SUITE: rmmod MODULE"
# when rmmod succeeds and the module is gone, "not ok" otherwise (a test
# that leaks a reference to its module, or whose exit hangs or fails).
#
# Only SUITE of each MODULE runs (kunit.filter_glob), whatever else the
# module holds.
#
# usage: kunit.sh MODULE:SUITE...
set -u
dir=/sys/kernel/debug/kunit
for spec in "$@"; do
	mod=${spec%%:*}
	suite=${spec#*:}
	if [ ! -d "$dir" ]; then
		echo "kunit: not ok - $suite: no KUnit in this kernel"
		continue
	fi
	# Only the suite named: a module may hold others (dmabuf_kunit holds
	# dma-buf's own fence and reservation suites, which are not ours to
	# judge here: in v7.3 the unwrap merge order test leaks its fences,
	# which kmemleak reports). KUnit filters a module's suites as it
	# loads, by this parameter.
	glob=/sys/module/kunit/parameters/filter_glob
	if [ -w "$glob" ]; then
		printf %s "$suite" > "$glob"	# no newline: it would be part of the glob
	else
		echo "kunit: not ok - $suite: no $glob to run only this suite"
		continue
	fi
	# The modules loaded before the modprobe, as " a b c "
	loaded=" $(echo $(ls /sys/module)) "
	if ! modprobe "$mod"; then
		echo "kunit: not ok - $suite: modprobe $mod failed"
		continue
	fi
	# The suite's KTAP, as the kernel log has it (the debugfs results
	# file holds only the suite's own line): from its last "# Subtest:"
	# header to its result line.
	dmesg --notime | awk -v s="$suite" '
		$0 ~ "^ *# Subtest: " s "$" { buf = ""; on = 1 }
		on { buf = buf $0 "\n" }
		on && $0 ~ "^ *(not )?ok [0-9]+ " s "$" { on = 0; last = buf }
		END { printf "%s", last }' > /tmp/kunit-$suite.ktap
	sed 's/^/# /' /tmp/kunit-$suite.ktap
	# Test cases are the result lines one level (4 spaces) in; deeper
	# ones are parameters of a case and already in its result.
	n=$(grep -cE '^    (not )?ok ' /tmp/kunit-$suite.ktap)
	if [ "$n" = 0 ]; then
		echo "kunit: not ok - $suite: no test case ran"
	else
		grep -E '^    (not )?ok ' /tmp/kunit-$suite.ktap |
			sed -E "s/^    (not ok|ok) [0-9]+ /kunit: \1 - $suite: /"
	fi
	# rmmod, not modprobe -r: that would also unload the modules the test
	# module uses (dmabuf_mock), which later tests need.
	mname=$(echo "$mod" | tr - _)
	if out=$(rmmod "$mod" 2>&1) && [ ! -e "/sys/module/$mname" ]; then
		echo "kunit: ok - $suite: rmmod $mod"
	else
		refs=$(cat "/sys/module/$mname/refcnt" 2>/dev/null || echo '?')
		echo "kunit: not ok - $suite: rmmod $mod: ${out:-module still loaded} (refcnt $refs)"
	fi
	# And the KUnit helper modules it pulled in (ib_kunit_mr, which holds
	# ib_kunit_helpers), now unused: they hold dmabuf_mock, whose unload a
	# later test checks. A pass frees what held the next one's modules.
	for _ in 1 2 3; do
		for m in $(ls /sys/module); do
			case $loaded in *" $m "*) continue ;; esac
			case $m in
			*kunit*)
				[ "$(cat "/sys/module/$m/refcnt" 2>/dev/null)" = 0 ] &&
					rmmod "$m" ;;
			esac
		done
	done
done
[ -w /sys/module/kunit/parameters/filter_glob ] &&
	printf %s "*" > /sys/module/kunit/parameters/filter_glob
exit 0
