#!/bin/bash
# scripts/test.sh's progress lines, with a stand-in for make on PATH (its
# userspace step then runs for a few seconds and builds nothing) and a
# results directory of its own: the step's heading gives its expected time,
# from a fresh clone's times when it never ran here and from its own last
# time once it has; the command says where its log is; a heartbeat line
# names the time so far and that log; and the heartbeat is gone when the
# step ends (a leftover would keep test.sh's output open). Prints TAP.
# shellcheck disable=SC2016 # the checks are eval'd
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/tap-check.sh
. "$top/scripts/tap-check.sh"

mkdir -p "$tmp/bin" "$tmp/res"
cat > "$tmp/bin/make" <<'FAKE'
#!/bin/bash
echo "stand-in make $*" >&2
sleep "$FAKE_MAKE_SECS"
FAKE
chmod +x "$tmp/bin/make"
echo "userspace 200" > "$tmp/fresh-times"

# run HEARTBEAT SECS: the userspace step, output in $tmp/out, and in
# $tmp/secs how long until that output ended (read through a pipe, as make
# test's output often is; at most 40 s). test.sh runs in a process group
# of its own, killed afterwards with whatever it left behind.
run() {
	local t0=$EPOCHSECONDS pg
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	PATH=$tmp/bin:$PATH TEST_RESULTS=$tmp/res TEST_STEP_TIMES=$tmp/fresh-times \
		TEST_HEARTBEAT=$1 FAKE_MAKE_SECS=$2 \
		setsid "$top/scripts/test.sh" userspace > "$tmp/fifo" 2>&1 &
	pg=$!
	timeout 40 cat "$tmp/fifo" > "$tmp/out"
	echo $((EPOCHSECONDS - t0)) > "$tmp/secs"
	kill -- -"$pg" 2>/dev/null
	wait "$pg" 2>/dev/null
}

echo "TAP version 13"
echo "1..7"
run 1 4
check "a step that never ran here: its heading gives a fresh clone's time" \
	eval 'grep -q "^### build: project tools.*(about 3 min on a fresh clone with 2 cores)$" "$tmp/out"'
check "the command says where its log is as it starts" \
	eval 'grep -qF "  > build: userspace tools (revoke_demo, revoke_bench) (log: $tmp/res/build-userspace.log)" "$tmp/out"'
check "a heartbeat every TEST_HEARTBEAT seconds: time so far, expected time, the log" \
	eval '[ "$(grep -c "^  \.\.\. userspace: [0-9]* s so far (about 3 min on a fresh clone with 2 cores); log: $tmp/res/build-userspace.log$" "$tmp/out")" -ge 2 ]'
check "the step's time is kept for the next run" \
	eval 'awk "\$1 == \"userspace\" && \$2 >= 4 { f = 1 } END { exit !f }" "$tmp/res/step-times.last"'
check "the step passed (the stand-in make succeeded)" \
	eval 'grep -q "^ok 1 build: userspace tools" "$tmp/res/build-userspace.tap"'

echo "userspace 150" >> "$tmp/res/step-times.last"
run 0 1
check "once it ran here: its own last time, and no heartbeat with TEST_HEARTBEAT=0" \
	eval 'grep -q "^### build: project tools.*(about 3 min the last time here)$" "$tmp/out" &&
	      ! grep -q "so far" "$tmp/out"'

# A heartbeat left running would hold the pipe for its 30 s sleep.
run 30 1
check "the heartbeat is stopped with its step (test.sh's output ends at once)" \
	eval '[ "$(cat "$tmp/secs")" -lt 20 ]'
[ "$failed" = 0 ]
