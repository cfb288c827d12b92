#!/bin/bash
# Sphinx build of Documentation/infiniband (our dmabuf_revoke.rst and the
# kernel-doc it pulls from umem_dmabuf.c) from the patched tree. Prints TAP:
# not ok when Sphinx warns about a file the series adds or changes there.
# Warnings about the rest of the tree (no dot(1), upstream ABI duplicates)
# are listed as comments and do not count.
#
# usage: scripts/docs.sh   (output in build/htmldocs)
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
out=$top/build/htmldocs
exec 9>"${BUILD_LOCK:-$top/build/.build.lock}"
flock -n 9 || { echo "docs: waiting for another build to finish" >&2; flock 9; }

echo "TAP version 13"
echo "1..1"
if ! command -v sphinx-build >/dev/null; then
	echo "not ok 1 htmldocs SPHINXDIRS=infiniband: no sphinx-build (make deps)"
	exit 1
fi
rm -rf "$out"
start=$(date +%s)
make -s -C "$tree" O="$out" SPHINXDIRS=infiniband htmldocs > "$out.log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
# Ours: the files the series adds or changes under Documentation/, and the
# sources whose kernel-doc they include.
ours='dmabuf_revoke\.rst|umem_dmabuf\.c|ib_umem\.h'
grep -Ei 'warning|error' "$out.log" > "$out.warn" || true
if [ $rc = 0 ] && ! grep -Eq "$ours" "$out.warn" &&
   [ -f "$out/Documentation/output/infiniband/dmabuf_revoke.html" ]; then
	echo "ok 1 htmldocs SPHINXDIRS=infiniband: no warning in our files (${secs}s)"
	sed 's/^/# not ours: /' "$out.warn"
else
	echo "not ok 1 htmldocs SPHINXDIRS=infiniband (exit $rc, ${secs}s)"
	sed 's/^/# /' "$out.warn" | head -n 40
	exit 1
fi
