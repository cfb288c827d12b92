#!/bin/bash
# make test's bench step: make bench with 2 pairs per comparison (about 2
# minutes), to keep the benchmark and its report working. Checks that the
# runs pass (revoke_bench itself checks every completion, the data the
# bounce landed, the peer's error after REVOKE and the exporter's counters
# after dereg; scripts/vm.sh fails on a guest splat) and that the report
# covers every comparison, with instruction counts. Asserts no speed: two
# pairs judge nothing. TAP on stdout.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/bench-smoke
n=0 failed=0
check() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n bench smoke: $2"
	else
		echo "not ok $n bench smoke: $2"
		failed=$((failed + 1))
	fi
}
# count PREFIX: the summary's comparisons whose name starts with PREFIX.
count() {
	python3 - "$out/summary.csv" "$1" <<'PY' 2>/dev/null || echo 0
import csv, sys
print(sum(r["comparison"].startswith(sys.argv[2]) for r in csv.DictReader(open(sys.argv[1]))))
PY
}

echo "TAP version 13"
echo "1..7"
rm -rf "$out"
BENCH_PAIRS=2 BENCH_OUT=$out "$top/scripts/bench.sh" > "$top/build/bench-smoke.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -n 30 "$top/build/bench-smoke.log" | sed 's/^/# /'
check $rc "make bench runs: 3 guests, every sample as expected, report written"
a=$(count "a ")
[ "$a" = 36 ]; check $? "(a) 4 cases x 9 sizes, 64 B..4 MiB (got $a)"
b=$(( $(count "b revoke/dereg (idle)") +
      $(count "b 2 vCPUs pinned: 64 KiB traffic-idle (wall)") +
      $(count "b 2 vCPUs pinned: 1 MiB traffic-idle (wall)") ))
[ "$b" = 12 ]; check $? "(b) 1..1000 MRs: idle vs dereg, both traffic kinds (got $b)"
f=$(( $(count "b ftrace, 64 KiB traffic-idle: wait") +
      $(count "b ftrace, 1 MiB traffic-idle: wait") ))
[ "$f" = 2 ]; check $? "(b) the traced wait for the copy in flight (got $f)"
cde=$(( $(count "c reg ") + $(count "d ") + $(count "e bounce/direct") ))
[ "$cde" = 19 ]; check $? "(c) 2 x 6 sizes, (d) 4, (e) 3 (got $cde)"
# Every comparison of a, c, d and e has an instruction ratio.
missing=$(python3 - "$out/summary.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["comparison"][0] in "acde"]
print(sum(1 for r in rows if r["insn_ratio"] == "") if rows else -1)
PY
)
[ "$missing" = 0 ]; check $? "instruction counts for every a, c, d, e comparison (missing: $missing)"
[ -s "$out/bench.svg" ] && [ -s "$out/bench.png" ] && [ -s "$out/table.txt" ]
check $? "table, SVG and PNG written"
[ $failed = 0 ]
