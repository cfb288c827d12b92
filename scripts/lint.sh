#!/bin/bash
# Static checks of the code the series adds or changes (the new files
# listed in patches/series and the upstream files its patches touch): W=1 and sparse (C=2) in the in-tree debug build, W=1 in
# the out-of-tree build, kernel-doc -Wall. Prints TAP.
#
# usage: scripts/lint.sh   (needs `make kernel-debug` and `make modules`)
set -u
# As scripts/kernel.sh: a make without it rewrites kernel.release with "+".
export LOCALVERSION=

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
kb=$top/build/kbuild-debug
# The new files, and the upstream files the series changes (they are clean
# at v7.3 too, so any diagnostic in them is the series').
mapfile -t files < <({ awk '!/^#/ {for (i = 2; i <= NF; i++) print $i}' \
	"$top/patches/series"; git -C "$tree" diff --name-only v7.3-base HEAD; } |
	grep -E '^(drivers|include|net|lib)/.*\.[ch]$' | sort -u)
mapfile -t objs < <(printf '%s\n' "${files[@]}" | sed -n 's/\.c$/.o/p')

echo "TAP version 13"
echo "1..3"
n=0
result() {
	n=$((n + 1))
	if [ -s "$2" ]; then
		echo "not ok $n $1"
		sed 's/^/# /' "$2" | head -n 40
	else
		echo "ok $n $1"
	fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# W=1 and sparse on each object, forced to rebuild; only our files' own
# diagnostics count (a header of upstream's may warn under W=1).
pat=$(printf '%s\n' "${files[@]}" | sed 's/[.]/[.]/g' | paste -sd'|')
# Only objects the debug config builds (odp.o needs ON_DEMAND_PAGING, ...).
built=()
for o in "${objs[@]}"; do [ -f "$kb/$o" ] && built+=("$o"); done
skipped=$(( ${#objs[@]} - ${#built[@]} ))
objs=("${built[@]}")
if [ ${#objs[@]} -gt 0 ]; then
	for o in "${objs[@]}"; do rm -f "$kb/$o"; done
	if ! sparse=$("$top/scripts/sparse.sh" 2> "$tmp/sparse.log"); then
		cat "$tmp/sparse.log" >&2
		sparse=no-sparse
	fi
	make -s -C "$tree" O="$kb" W=1 C=2 CHECK="$sparse" "${objs[@]}" \
		> "$tmp/intree.log" 2>&1 || echo "make failed" >> "$tmp/intree.log"
	grep -E "($pat).*(warning|error):|make failed|not available or not up to date" \
		"$tmp/intree.log" > "$tmp/intree.all" || true
	# Diagnostics upstream v7.3 already has in the files the series
	# changes (listed, with why, in scripts/lint-known-upstream.txt) do
	# not count; matched on "file: message", without line numbers.
	known=$(grep -v '^#' "$top/scripts/lint-known-upstream.txt" | grep . || true)
	while IFS= read -r l; do
		key=$(printf '%s\n' "$l" | sed -E "s|^$tree/||; s|:[0-9]+:[0-9]+: |: |")
		if [ -n "$known" ] && printf '%s\n' "$known" | grep -qxF "$key"; then
			echo "$key" >> "$tmp/intree.known"
		else
			echo "$l" >> "$tmp/intree"
		fi
	done < "$tmp/intree.all"
else
	: > "$tmp/intree"
fi
nknown=0; [ -f "$tmp/intree.known" ] && nknown=$(wc -l < "$tmp/intree.known")
result "in-tree W=1 + sparse: ${#objs[@]} objects ($skipped not in the debug config, $nknown known upstream diagnostics)" "$tmp/intree"

for f in "${files[@]}"; do
	case $f in *.c) touch "$tree/$f" ;; esac
done
OOT_HW=1 OOT_W=1 "$top/scripts/oot.sh" > "$tmp/oot.log" 2>&1 || echo "oot build failed" >> "$tmp/oot.log"
grep -E "($pat).*(warning|error):|failed" "$tmp/oot.log" > "$tmp/oot" || true
result "out-of-tree W=1 (hardware drivers included): our files" "$tmp/oot"

(cd "$tree" && PATH=/usr/bin:$PATH ./scripts/kernel-doc -none -Wall "${files[@]}") \
	> "$tmp/kdoc.all" 2>&1
# Upstream files (verbs.c, irdma) already warn at v7.3: only a warning the
# v7.3 version of the same file does not have counts, compared without
# line numbers.
mkdir -p "$tmp/base"
for f in "${files[@]}"; do
	git -C "$tree" cat-file -e "v7.3-base:$f" 2>/dev/null || continue
	mkdir -p "$tmp/base/$(dirname "$f")"
	git -C "$tree" show "v7.3-base:$f" > "$tmp/base/$f"
	(cd "$tmp/base" && PATH=/usr/bin:$PATH "$tree/scripts/kernel-doc" -none -Wall "$f") 2>&1
done | sed -E 's/:[0-9]+ / /' | sort -u > "$tmp/kdoc.base"
sed -E 's/:[0-9]+ / /' "$tmp/kdoc.all" | grep -vxFf "$tmp/kdoc.base" > "$tmp/kdoc" || true
result "kernel-doc -Wall: ${#files[@]} files" "$tmp/kdoc"
