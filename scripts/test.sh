#!/bin/bash
# The project's test command (`make test`, run by .ci/run): host tests, the
# builds, and the guest runs, each as TAP in build/results/, then one line
# "N passed, N failed" summed over all of them. Keeps going after a failure
# so that one run shows everything that is broken; exits 1 if anything
# failed.
#
# usage: scripts/test.sh [STEP...]   (default: all but the base kernel's)
#   steps: manifest series oot kselftest rdma-core iproute2 userspace docs
#          kernel-debug kernel-base kernels (both) lint bench guest-debian
#          guest-debug guest-base guest-dkms (scripts/deb-check.sh's)
#   Steps given are run in that order, one at a time. The default run
#   (no steps given) runs the debug kernel's build, lint and series next
#   to the guests, on the core QEMU's one TCG thread leaves idle (at a
#   lower priority; the race tests force their windows, so a busy second
#   core changes no result); TEST_OVERLAP=0, or a machine with one core,
#   runs every step one after the other.
#   A step that was to run and did not (the default run with fewer steps
#   through TEST_*_STEPS, below) is a failure, and so are no results at
#   all: only the whole run sums to a pass.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
# TEST_RESULTS: another results directory (scripts/test-progress.sh).
res=${TEST_RESULTS:-$top/build/results}
mkdir -p "$res"
# The default run: prep_steps, then bg_steps next to vm_steps (below).
# The base kernel (kernel-base, guest-base) is not in it: results/README.md,
# "Measurements".
# (TEST_PREP_STEPS, TEST_BG_STEPS, TEST_VM_STEPS replace them, to try the
# overlap with fewer steps; each default step they leave out then counts
# as a failure. .ci/run unsets them.)
default_prep="manifest oot kselftest rdma-core iproute2 userspace docs"
default_bg="kernel-debug lint series"
default_vm="guest-debian bench guest-debug"
prep_steps=${TEST_PREP_STEPS-$default_prep}
bg_steps=${TEST_BG_STEPS-$default_bg}
vm_steps=${TEST_VM_STEPS-$default_vm}
steps=${*:-$prep_steps $bg_steps $vm_steps}
# The steps that must have run, each written to step-times when it ends.
want_steps=${*:-$default_prep $default_bg $default_vm}
export KSELFTEST_TARGETS=${KSELFTEST_TARGETS:-rdma drivers/dma-buf}
# What the guests run: kselftest collections, or COLLECTION:TEST. Not
# drivers/dma-buf:udmabuf, upstream's, which needs 2 GiB of 2 MiB huge
# pages reserved (its test 6) and fails without them.
KSELFTEST_RUN=${KSELFTEST_RUN:-rdma drivers/dma-buf:dmabuf_mock drivers/dma-buf:udmabuf_cpu_access}
# KUnit test modules and their suites, for the debug kernel.
KUNIT_SUITES=${KUNIT_SUITES:-dmabuf_kunit:dmabuf_mock umem_dmabuf_kunit:ib_umem_dmabuf rxe_dmabuf_kunit:rxe_dmabuf mana_ib_kunit:mana_ib_dmabuf_mr efa_kunit:efa_dmabuf_mr mlx5_ib_kunit:mlx5_dd_dmabuf_mr ionic_kunit:ionic_dmabuf_mr bnxt_re_kunit:bnxt_re_dmabuf_mr irdma_kunit:irdma_dmabuf_mr}
log() { printf '\n### %s\n' "$*"; }

# Progress. Each step's heading says how long it took the last time
# (build/results/step-times.last: every step's time, appended as it ends),
# or on a fresh clone on the 2-core CI machine (results/step-times.txt)
# when it never ran here; each command says where its log is as it
# starts; and a foreground step prints a line every TEST_HEARTBEAT
# seconds (default 60; 0: none) with its time so far and its log. The
# background steps' lines go to background.log, printed at the end.
in_bg= hb=
dur() {
	if [ "$1" -lt 90 ]; then echo "$1 s"; else echo "$(( ($1 + 30) / 60 )) min"; fi
}
# The last "STEP SECONDS" line of STEP in FILE.
step_time() { awk -v s="$2" '$1 == s { t = $2 } END { print t }' "$1" 2>/dev/null; }
expected() {
	local t
	t=$(step_time "$res/step-times.last" "$1")
	if [ -n "$t" ]; then
		echo "$(dur "$t") the last time here"
		return
	fi
	t=$(step_time "${TEST_STEP_TIMES:-$top/results/step-times.txt}" "$1")
	[ -z "$t" ] || echo "$(dur "$t") on a fresh clone with 2 cores"
}
# The heading of step $step (run_step), and its heartbeat.
begin() {
	local e
	e=$(expected "$step")
	log "$1${e:+ (about $e)}"
	hb_start "$step" "$e"
}
# The log the heartbeat names: the command running in the foreground.
running() {
	echo "  > $1 (log: ${2#"$top"/})"
	[ -n "$in_bg" ] || echo "${2#"$top"/}" > "$res/.running"
}
hb_start() {
	local every=${TEST_HEARTBEAT:-60}
	[ -z "$in_bg" ] && [ "$every" != 0 ] || return 0
	hb_stop
	rm -f "$res/.running"
	(
		t0=$EPOCHSECONDS s=
		trap 'kill $s 2>/dev/null; exit 0' TERM
		while :; do
			sleep "$every" &
			s=$!
			wait "$s"
			cur=$(cat "$res/.running" 2>/dev/null)
			echo "  ... $1: $(dur $((EPOCHSECONDS - t0))) so far${2:+ (about $2)}${cur:+; log: $cur}"
		done
	) &
	hb=$!
}
hb_stop() {
	[ -n "$hb" ] || return 0
	kill "$hb" 2>/dev/null
	wait "$hb" 2>/dev/null
	hb=
}

# One TAP file for a command: "ok 1 NAME" or "not ok 1 NAME" with the tail
# of its log.
single() {
	local file=$1 name=$2
	shift 2
	local start=$(date +%s)
	running "$name" "$res/$file.log"
	"$@" > "$res/$file.log" 2>&1
	local rc=$?
	local secs=$(( $(date +%s) - start ))
	{
		echo "TAP version 13"
		echo "1..1"
		if [ $rc = 0 ]; then
			echo "ok 1 $name (${secs}s)"
		else
			echo "not ok 1 $name (exit $rc, ${secs}s)"
			tail -n 40 "$res/$file.log" | sed 's/^/# /'
		fi
	} > "$res/$file.tap"
	cat "$res/$file.tap"
	return $rc
}

# A step that prints its own TAP: FILE.tap (stderr in FILE.log). A script
# that exits non-zero with no failed result, or dies before its plan, gets
# one failed result more (scripts/tap-close.py), so that it cannot sum to
# a pass or to 0/0.
tapstep() {
	local file=$1 name=$2
	shift 2
	running "$name" "$res/$file.log"
	"$@" > "$res/$file.tap" 2> "$res/$file.log"
	local rc=$?
	python3 "$top/scripts/tap-close.py" "$res/$file.tap" "$name" "$rc"
	cat "$res/$file.tap"
	return $rc
}

# The kselftest runner's time limit in the guests: run-tests.sh's
# run_kselftest.sh -o (which overrides the collections' settings files).
# dmabuf_mr_stress runs for its default 20 s (make test sets no
# DMABUF_MR_STRESS_SECS) within its own limit of that + 300 s.
runner_limit=$(sed -n 's/.*run_kselftest\.sh -o \([0-9][0-9]*\).*/\1/p' \
	"$top/scripts/vm/run-tests.sh" | head -n1)
limits=(--limit "rdma:rxe_dmabuf_mr_stress.sh=$((20 + 300))")

# A guest run: its results, KUnit (debug kernel), kselftests, the rdma
# tool check and rdma-core's tests, one line each named "PROGRAM: CASE"
# (NAME.results), are checked against scripts/test-manifest.txt into
# NAME.tap: the number of results of each program, which cases they are,
# and every skip must be what it says for this kernel. The run itself is
# NAME-vm.tap: it passes when the guest booted, ran its command to its end
# with no splat and no timeout (scripts/vm.sh exit 0), or when only the
# command failed (exit 3) and a failed result in NAME.tap says why, so
# that one failing test counts once. How long each kselftest took, against
# its limit, is NAME.times (and build/results/times.md, for
# results/README.md): a warning for one that used more than half.
guest() {
	local kind=$1 name=guest-$1
	local kunit=
	# guest-dkms (scripts/deb-check.sh): Debian's kernel with the modules
	# the DKMS package installed (DKMS_GUEST_IMAGE, DKMS_GUEST_MODULES),
	# checked against Debian's expected results; DKMS_GUEST_PRE runs first
	# in the guest.
	local vmargs=(-k "$kind") mkind=$kind pre=
	if [ "$kind" = dkms ]; then
		vmargs=(-K "${DKMS_GUEST_IMAGE:?}" -M "${DKMS_GUEST_MODULES:?}")
		mkind=debian pre=${DKMS_GUEST_PRE:+$DKMS_GUEST_PRE; }
	fi
	# KUnit suites run on kernels that have KUnit (the debug flavour).
	[ "$kind" = debug ] && kunit=$KUNIT_SUITES
	# rxe_netns_names.sh tests rdma netns naming, which the series does
	# not change: on the debug kernel it took 227-318 s of make test's
	# hour, spent in net namespace teardown; the other guests run it.
	local exclude=
	[ "$kind" = debug ] && exclude=rdma:rxe_netns_names.sh
	local cmd="KSELFTEST_DIR=$top/build/kselftest KSELFTEST_RUN='$KSELFTEST_RUN'"
	cmd="$cmd KUNIT_SUITES='$kunit' KSELFTEST_EXCLUDE='$exclude'"
	# rdma-core's dma-buf tests test the provider and the uverbs calls
	# that dmabuf_mr's cases make too: on the debug kernel they took
	# 450-600 s (25 s on Debian's), and in a CI run of 2026-12-07 ran the
	# debug guest out of its limit. The other guests run them.
	[ "$kind" = debug ] && cmd="$cmd RDMA_CORE_TESTS=0"
	# The guests have the patched rxe provider; the base kernel's run
	# registers through the raw uverbs ioctl instead, the path dmabuf_mr
	# takes with a distribution's rdma-core.
	[ "$kind" = base ] && cmd="$cmd DMABUF_MR_RAW=1"
	# The base guest is not in the default run: Debian's runs dmabuf_mr
	# a second time through the raw ioctl.
	[ "$mkind" = debian ] &&
		cmd="$cmd KSELFTEST_AGAIN='rdma:rxe_dmabuf_mr.sh:DMABUF_MR_RAW=1'"
	# Every kernel runs the dmabuf_mr fixture's cases through all three
	# registration paths (its variants verbs, reg_dmabuf_mr, reg_mr_fd),
	# and fail_nth's sweeps through both raw ones; the rest register the
	# way the environment above says.
	cmd="$pre$cmd $top/scripts/vm/run-tests.sh"
	if [ ! -x "$top/build/kselftest/run_kselftest.sh" ]; then
		single "$name" "guest $kind: kselftests installed" false
		return
	fi
	local start=$EPOCHSECONDS rc
	running "guest $kind (its console: build/vm/$name/console.log)" \
		"$top/build/vm/$name/out.log"
	"$top/scripts/vm.sh" "${vmargs[@]}" -n "$name" -t "${VM_TIMEOUT:-1500}" -- "$cmd" \
		> "$res/$name-vm.log" 2>&1
	rc=$?
	local secs=$((EPOCHSECONDS - start))
	local log=$top/build/vm/$name/out.log
	{
		# scripts/vm/kunit.sh: "kunit: ok - SUITE: CASE"
		sed -n 's/^kunit: \(not ok\|ok\) - /\1 - kunit:/p' "$log"
		python3 "$top/scripts/ktap-flatten.py" "$log" | grep -aE '^(not )?ok'
		# scripts/vm/rdma-tool-check.sh: "rdmatool: ok N - CHECK"
		sed -n 's/^rdmatool: \(not ok\|ok\) [0-9]* - /\1 - rdmatool: /p' "$log"
		# scripts/vm/rdma-core-tests.sh: "rdmacore: ok N - TEST"
		sed -n 's/^rdmacore: \(not ok\|ok\) [0-9]* - /\1 - rdmacore: /p' "$log"
	} 2>/dev/null | tr -d '\r' > "$res/$name.results"
	python3 "$top/scripts/manifest.py" check "$mkind" "$res/$name.results" \
		--select "$KSELFTEST_RUN" --kunit "$kunit" \
		--kselftest-dir "$top/build/kselftest" > "$res/$name.tap"
	{
		echo "TAP version 13"
		echo "1..1"
		local what="guest $kind: boots, runs, no splat, no timeout"
		local cmd_rc
		cmd_rc=$(sed -n 's/^REVOKE-VM-EXIT \([0-9]*\).*/\1/p' "$log" 2>/dev/null | tail -n1)
		if [ $rc = 0 ]; then
			echo "ok 1 $what (${secs}s)"
		elif [ $rc = 3 ] && ! python3 "$top/scripts/tap-sum.py" "$res/$name.tap" > /dev/null 2>&1; then
			echo "ok 1 $what (${secs}s; its command exited $cmd_rc: the failures are $name's)"
		else
			if [ $rc = 3 ]; then
				echo "not ok 1 $what: its command exited $cmd_rc with no failed result (${secs}s)"
			else
				echo "not ok 1 $what (vm.sh exit $rc, ${secs}s)"
			fi
			tail -n 40 "$res/$name-vm.log" | sed 's/^/# /'
		fi
	} > "$res/$name-vm.tap"
	cat "$res/$name-vm.tap"
	grep -v '^TAP' "$res/$name.tap" | sed "s/^/  [$kind] /"
	# How long each kselftest took (scripts/vm.sh's out.times).
	python3 "$top/scripts/guest-times.py" times "$top/build/vm/$name/out.times" \
		${runner_limit:+--override "$runner_limit"} \
		--kselftest-dir "$top/build/kselftest" "${limits[@]}" > "$res/$name.times"
	sed "s/^/  [$kind] time: /" "$res/$name.times"
	python3 "$top/scripts/guest-times.py" warn "$res/$name.times" | sed 's/^/  /'
}

run_step() {
	local step=$1 t0=$EPOCHSECONDS
	case $step in
	manifest)
		begin "host: result accounting (tap-sum, ktap-flatten, the manifest) and the README's table"
		tapstep manifest-tests "scripts/test-results.py" python3 "$top/scripts/test-results.py"
		tapstep manifest-readme "scripts/manifest.py readme" \
			python3 "$top/scripts/manifest.py" readme "$top/README.md"
		# scripts/vm.sh's retry of a guest that died in boot-time code
		# patching under MTTCG (no guest boots: a stand-in for QEMU).
		tapstep vm-retry "scripts/test-vm-retry.sh" "$top/scripts/test-vm-retry.sh"
		# scripts/fetch.sh on a made-up pin from file:// mirrors.
		tapstep fetch "scripts/test-fetch.sh" "$top/scripts/test-fetch.sh"
		# Its own progress lines, with a stand-in for make.
		tapstep progress "scripts/test-progress.sh" "$top/scripts/test-progress.sh"
		# The machine's requirements, on made-up machines.
		tapstep requirements "scripts/test-requirements.sh" "$top/scripts/test-requirements.sh"
		;;
	series)
		begin "host: series round trip; the mail series (b4), read back"
		tapstep series-roundtrip "scripts/test-series.sh" "$top/scripts/test-series.sh"
		# mail/: fresh, and git am of each series onto the base.
		tapstep takeable "scripts/takeable.py check" \
			python3 "$top/scripts/takeable.py" check
		# The mail series with a test identity that can never be mailed.
		tapstep series-check "scripts/series-check.sh" \
			env MAIL_TEST_IDENTITY='Mail Test <mail-test@example.org>' \
			MAIL_TEST_ASSISTED_BY='LLM sparse' \
			MAIL_NEGATIVE=1 "$top/scripts/series-check.sh" \
			"$top/build/test-mail/series"
		# The base: no file of the series excluded or patched by Debian.
		tapstep base-check "scripts/base-check.sh" "$top/scripts/base-check.sh"
		;;
	oot)
		begin "build: out-of-tree modules against Debian's trixie-backports 7.3 headers"
		single build-oot "build: out-of-tree modules" "$top/scripts/oot.sh"
		;;
	kernels)
		run_step kernel-base
		run_step kernel-debug
		;;
	kernel-base)
		begin "build: in-tree base kernel"
		single build-base "build: in-tree base kernel" "$top/scripts/kernel.sh" base
		;;
	kernel-debug)
		begin "build: in-tree debug kernel"
		single build-debug "build: in-tree debug kernel" "$top/scripts/kernel.sh" debug
		;;
	lint)
		begin "static checks of our new files: W=1, sparse, kernel-doc"
		tapstep lint "scripts/lint.sh" "$top/scripts/lint.sh"
		;;
	docs)
		begin "docs: Sphinx build of Documentation/infiniband"
		tapstep docs "scripts/docs.sh" "$top/scripts/docs.sh"
		;;
	kselftest)
		begin "build: kselftests ($KSELFTEST_TARGETS) from the patched tree"
		single build-kselftest "build: kselftests" make -s -C "$top" kselftest
		# Every program scripts/test-manifest.txt expects is installed,
		# and lists the cases it expects (the rdma programs are not
		# built without libibverbs: a warning, and their scripts skip).
		tapstep kselftest-installed "scripts/manifest.py build" \
			python3 "$top/scripts/manifest.py" build "$top/build/kselftest" \
			--select "$KSELFTEST_RUN"
		;;
	rdma-core)
		# rdma-core 65.0 + its pull request, in place with pyverbs: the
		# guests' one rdma-core (scripts/vm/guest-init mounts its
		# libraries over the host's) and its tests/test_mr.py dma-buf
		# tests, which the guests run from it.
		begin "build: rdma-core 65.0 + rdma-core/upstream-pr, in place, with pyverbs"
		single build-rdma-core-pr "build: rdma-core 65.0 + upstream-pr with pyverbs (in place)" \
			"$top/scripts/rdma-core-pr.sh"
		;;
	iproute2)
		# Like rdma-core: the guests use it when built, the distro's
		# rdma tool otherwise, and rdma-tool-check.sh then skips.
		begin "build: iproute2 rdma tool with iproute2/patches"
		single build-iproute2 "build: iproute2 rdma tool (iproute2/patches)" \
			"$top/scripts/iproute2.sh" ||
			echo "# iproute2: build failed (log: $res/build-iproute2.log); the guests fall back to the distro's rdma tool"
		;;
	userspace)
		begin "build: project tools in userspace/ (revoke_demo, revoke_bench)"
		single build-userspace "build: userspace tools (revoke_demo, revoke_bench)" \
			make -s -C "$top" userspace
		;;
	bench)
		# The report's arithmetic on made-up samples (host), then make
		# bench with 2 pairs (guests): that it runs and reports, not
		# how fast anything is.
		begin "bench: report tests (host), then a 2-pair make bench (QEMU)"
		tapstep bench-report "scripts/test-bench-report.py" \
			python3 "$top/scripts/test-bench-report.py"
		tapstep bench-smoke "scripts/bench-smoke.sh" "$top/scripts/bench-smoke.sh"
		;;
	guest-debian)
		begin "guest: Debian trixie-backports 7.3 kernel + our out-of-tree modules"
		guest debian
		# make test-one and make vm-shell, as a person uses them (five
		# guests).
		tapstep test-one "scripts/test-one-check.sh" "$top/scripts/test-one-check.sh"
		# dmabuf_mr_real on the same kernel booted with swiotlb=force.
		tapstep swiotlb "scripts/swiotlb-check.sh" "$top/scripts/swiotlb-check.sh"
		;;
	guest-base)
		begin "guest: in-tree base kernel"
		guest base ;;
	guest-debug)
		begin "guest: in-tree debug kernel (KASAN, lockdep, kmemleak, ...)"
		guest debug ;;
	guest-dkms)
		begin "guest: Debian trixie-backports 7.3 kernel + the modules the DKMS package installed"
		guest dkms ;;
	*) echo "test: unknown step $step" >&2; exit 2 ;;
	esac
	hb_stop
	echo "$step $((EPOCHSECONDS - t0))" | tee -a "$res/step-times" "$res/step-times.last" > /dev/null
}


rm -f "$res"/*.tap "$res"/guest-*.times "$res/times.md" "$res/step-times" \
	"$res/background.log" "$res/.running"
overlap=${TEST_OVERLAP:-1}
[ "$(nproc)" -ge 2 ] || overlap=0
if [ -n "$*" ] || [ "$overlap" = 0 ]; then
	for step in $steps; do
		run_step "$step"
	done
else
	# The default on two cores: the quick host steps, then the debug
	# kernel's build, lint and the series checks (CPU, no VM) at a lower
	# priority next to the guests (one TCG vCPU thread, no build): the
	# build uses the core the guest leaves idle. Never two builds or two
	# VMs at once.
	for step in $prep_steps; do
		run_step "$step"
	done
	log "background, at nice 10: $bg_steps (output at the end)"
	(
		in_bg=1
		renice -n 10 -p "$BASHPID" > /dev/null
		for step in $bg_steps; do
			run_step "$step"
			[ "$step" = kernel-debug ] && : > "$res/.kernel-debug.done"
		done
	) > "$res/background.log" 2>&1 &
	bg=$!
	rm -f "$res/.kernel-debug.done"
	for step in $vm_steps; do
		if [ "$step" = guest-debug ] && [ ! -e "$res/.kernel-debug.done" ]; then
			e=$(expected kernel-debug)
			log "waiting for the debug kernel's build, in the background${e:+ (the whole build: about $e)}"
			hb_start "the debug kernel's build" "$e"
			echo "${res#"$top"/}/build-debug.log" > "$res/.running"
			while [ ! -e "$res/.kernel-debug.done" ] && kill -0 "$bg" 2>/dev/null; do
				sleep 5
			done
			hb_stop
		fi
		run_step "$step"
	done
	wait "$bg"
	log "background steps: $bg_steps"
	cat "$res/background.log"
	rm -f "$res/.kernel-debug.done"
fi

# Every step that was to run did (the default run: all of make test's).
missing=()
for step in $want_steps; do
	grep -q "^$step " "$res/step-times" 2>/dev/null || missing+=("$step")
done
if [ ${#missing[@]} -gt 0 ]; then
	{
		echo "TAP version 13"
		echo "1..${#missing[@]}"
		for step in "${missing[@]}"; do
			echo "not ok - step $step did not run (TEST_PREP_STEPS, TEST_BG_STEPS or TEST_VM_STEPS left it out?): no TAP file of it"
		done
	} > "$res/steps-not-run.tap"
fi

log "totals"
echo "  seconds per step (wall; background steps overlap the guests):"
sed 's/^/    /' "$res/step-times" 2>/dev/null
times=$(ls "$res"/guest-*.times 2>/dev/null)
if [ -n "$times" ]; then
	# shellcheck disable=SC2086 # one file per word
	python3 "$top/scripts/guest-times.py" table $times > "$res/times.md"
	echo "  time per program and guest: $res/times.md"
	# shellcheck disable=SC2086
	python3 "$top/scripts/guest-times.py" warn $times | sed 's/^/  /'
fi
files=$(ls "$res"/*.tap 2>/dev/null)
for f in $files; do
	printf '  %-28s %s\n' "$(basename "$f" .tap)" "$(python3 "$top/scripts/tap-sum.py" "$f" 2>/dev/null)"
done
# No TAP file at all is a failure too (tap-sum.py).
# shellcheck disable=SC2086
python3 "$top/scripts/tap-sum.py" $files
