#!/bin/bash
# make coverage: how many of the lines the series adds or changes in the RDMA
# hardware drivers their KUnit suites execute, per driver, and which of them
# do not run. Not part of make test.
#
#  1. kernel: scripts/kernel.sh coverage, in build/kbuild-coverage: the debug
#     flavour + configs/coverage.config (gcov), only the objects of the
#     hardware drivers' directories profiled (kernel.sh: gcov_dirs); then
#     checks that the drivers' objects have gcov notes and counters, and
#     nothing else has. The drivers' sources are copied before the build
#     (build/coverage/src/) and must be the same after it (else it builds
#     again, 3 times at most): build/linux is edited while we run, and the
#     lines must be those that were built.
#  2. guest: that kernel in QEMU (scripts/vm.sh) runs the drivers' KUnit
#     suites (scripts/vm/kunit.sh; the hardware drivers' entries of
#     KUNIT_SUITES in scripts/test.sh), then prints the drivers' gcov data
#     from debugfs, a base64 tar, on its output
#  3. analysis: the host's gcov (the compiler that built the kernel) reads
#     the build's .gcno files with that data. A driver's lines counted are
#     those the series adds or modifies (`git diff BASE..HEAD`) in its
#     non-test files (not *_kunit.c) and that gcov considers executable:
#     lines gcov marks '-' (comments, blank lines, declarations, code the
#     compiler left no line of) are in neither column.
# Output: build/coverage/report.md (the table also on stdout); guest.log (the
# guest's output), gcda/ (its gcov data), data/ (the .gcno and .gcda files
# gcov read), gcov.json (gcov's output), kernel.log (the build's), src/
# (the drivers' sources as built).
# Fails with "coverage: FAILED: ..." when the build fails, the drivers'
# sources change during 3 builds in a row, a suite fails or has no results, the
# guest splats or times out, or no gcov data comes back.
#
# usage: scripts/coverage.sh [--no-build | --analyse]
#   --no-build  use build/kbuild-coverage as it is (no kernel build); the
#               drivers' sources are taken as they are now (the report
#               names any that are newer than the build)
#   --analyse   only step 3, on the data and sources of the last run
# Environment: COVERAGE_BASE (default v7.3-base), COVERAGE_HEAD (default
#   series), COVERAGE_VM_TIMEOUT (seconds, default 600), KUNIT_SUITES
#   (MODULE:SUITE..., default scripts/test.sh's; only the hardware drivers'
#   modules are run).
# In the guest: scripts/coverage.sh --guest OBJTREE MODULE:SUITE...
set -eu
set -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)

# --- in the guest ---------------------------------------------------------
# Run the suites, then print every .gcda file under gcov's debugfs directory
# (gcov_persist=1, the default, keeps the data of an unloaded module) as a
# base64 tar between two marker lines: the host root is read-only here, and
# this output (hvc0) is the way out. Exit 1 when a suite failed.
if [ "${1:-}" = --guest ]; then
	objtree=$2
	shift 2
	sh "$top/scripts/vm/kunit.sh" "$@" | tee /tmp/coverage-kunit.out
	rc=0
	grep -q '^kunit: not ok' /tmp/coverage-kunit.out && rc=1
	g=/sys/kernel/debug/gcov
	if [ ! -d "$g$objtree" ]; then
		echo "coverage: no $g$objtree in the guest: no gcov data (CONFIG_GCOV_KERNEL, profiled objects?)"
		exit 1
	fi
	d=/tmp/coverage-gcda
	rm -rf "$d"
	mkdir -p "$d"
	# cat, not cp or tar: debugfs gives these files no size.
	(cd "$g" && find . -name '*.gcda') | while IFS= read -r f; do
		mkdir -p "$d/${f%/*}"
		cat "$g/$f" > "$d/$f"
	done
	echo "coverage: $(find "$d" -name '*.gcda' | wc -l) gcov data files"
	echo "COVERAGE-GCDA-BEGIN"
	tar -C "$d" -cz . | base64 -w 120
	echo "COVERAGE-GCDA-END"
	exit $rc
fi

# --- on the host ----------------------------------------------------------
mode=all
case ${1:-} in
'') ;;
--no-build) mode=no-build ;;
--analyse) mode=analyse ;;
*) sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;;
esac

src=$top/build/linux
kb=$top/build/kbuild-coverage
cov=$top/build/coverage
run=$top/build/vm/coverage
base=${COVERAGE_BASE:-v7.3-base}
head=${COVERAGE_HEAD:-series}
mkdir -p "$cov"

die() {
	echo "coverage: FAILED: $*" >&2
	exit 1
}
step_time() { printf '%s %s\n' "$1" "$2" >> "$cov/times"; }

# The drivers: NAME, then the paths (in the tree) whose changed lines count.
# mana_ib's, bnxt_re's and ionic's changes reach into their Ethernet
# drivers (the helpers they call there), which kernel.sh profiles too. A
# driver's KUnit module is the one whose source, MODULE.c, is in its first
# directory.
drivers=(
	"efa drivers/infiniband/hw/efa"
	"mana drivers/infiniband/hw/mana drivers/net/ethernet/microsoft/mana"
	"ionic drivers/infiniband/hw/ionic drivers/net/ethernet/pensando/ionic"
	"bnxt_re drivers/infiniband/hw/bnxt_re drivers/net/ethernet/broadcom/bnxt"
	"mlx5 drivers/infiniband/hw/mlx5"
	"irdma drivers/infiniband/hw/irdma"
)
driver_args=()
for d in "${drivers[@]}"; do
	driver_args+=("${d// /,}")
done

# The Python half: "snapshot DIR" copies the drivers' sources (.c, .h)
# into DIR with what BASE and HEAD are; "compare
# DIR" names the files of the tree that differ from DIR's; "analyse" runs
# gcov and writes the report.
py() {
	python3 - "$@" "$src" "$kb" "$cov" "$base" "$head" "${driver_args[@]}" <<'EOF'
import filecmp, glob, json, os, re, shutil, subprocess, sys, tempfile, time

t_start = time.time()
cmd = sys.argv[1]
arg = sys.argv[2] if cmd in ("snapshot", "compare") else None
rest = sys.argv[3:] if arg is not None else sys.argv[2:]
src, kb, cov, base, head = rest[:5]
drivers = []
for a in rest[5:]:
    name, *paths = a.split(",")
    drivers.append((name, paths))


def git(*args, check=True):
    r = subprocess.run(["git", "-C", src, *args], capture_output=True)
    if check and r.returncode != 0:
        sys.exit(f"coverage: FAILED: git {' '.join(args)}: {r.stderr.decode()}")
    return r


def counted(path):
    """A non-test source file gcov can know."""
    return path.endswith((".c", ".h")) and not path.endswith("_kunit.c")


def tree_files(root, paths):
    """The C sources and headers under paths, test modules' too."""
    out = []
    for p in paths:
        full = os.path.join(root, p)
        if os.path.isdir(full):
            for d, _, fs in os.walk(full):
                out += [os.path.relpath(os.path.join(d, f), root) for f in fs]
        elif os.path.isfile(full):
            out.append(p)
    return sorted(f for f in out if f.endswith((".c", ".h")))


all_paths = [p for _, ps in drivers for p in ps]

if cmd == "snapshot":
    dst = arg
    shutil.rmtree(dst, ignore_errors=True)
    files = tree_files(src, all_paths)
    for f in files:
        os.makedirs(os.path.dirname(os.path.join(dst, f)), exist_ok=True)
        shutil.copy2(os.path.join(src, f), os.path.join(dst, f))
    head_sha = git("rev-parse", "--short=12", head).stdout.decode().strip()
    # Files that are not HEAD's: the working tree is what is built.
    dirty = []
    for f in files:
        r = git("cat-file", "blob", f"{head}:{f}", check=False)
        if r.returncode != 0 or r.stdout != open(os.path.join(dst, f), "rb").read():
            dirty.append(f)
    json.dump({"head_sha": head_sha, "dirty": dirty, "files": files,
               "taken": time.time()},
              open(os.path.join(dst, ".meta.json"), "w"))
    sys.exit(0)

if cmd == "compare":
    snap = arg
    meta = json.load(open(os.path.join(snap, ".meta.json")))
    now = tree_files(src, all_paths)
    diff = sorted(set(now) ^ set(meta["files"]))
    diff += [f for f in now if f in meta["files"] and not filecmp.cmp(
        os.path.join(src, f), os.path.join(snap, f), shallow=False)]
    print(" ".join(sorted(diff)))
    sys.exit(0)

# --- analyse ---
snap = os.path.join(cov, "src")
meta = json.load(open(os.path.join(snap, ".meta.json")))
gcda = os.path.join(cov, "gcda") + kb
outlog = os.path.join(cov, "out.txt")


def changed_lines(path):
    """Lines the snapshot's file adds or modifies against BASE's."""
    new = os.path.join(snap, path)
    r = git("cat-file", "blob", f"{base}:{path}", check=False)
    old = r.stdout if r.returncode == 0 else b""
    if old == open(new, "rb").read():
        return set()
    with tempfile.NamedTemporaryFile() as t:
        t.write(old)
        t.flush()
        out = subprocess.run(["git", "diff", "--no-index", "-U0", "--no-color",
                              "--no-ext-diff", t.name, new],
                             capture_output=True, text=True).stdout
    lines = set()
    for l in out.splitlines():
        m = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", l)
        if m:
            start, n = int(m.group(1)), int(m.group(2) or 1)
            lines.update(range(start, start + n))
    return lines


data = os.path.join(cov, "data")
shutil.rmtree(data, ignore_errors=True)
log = open(os.path.join(cov, "gcov.log"), "w")
all_json = open(os.path.join(cov, "gcov.json"), "w")
suites = {}
for l in open(os.path.join(cov, "suites")):
    d, spec, state = l.split()
    suites.setdefault(d, []).append((spec, state))
out_text = open(outlog, errors="replace").read() if os.path.exists(outlog) else ""
results = []

for name, paths in drivers:
    # Notes (.gcno) from the build and data (.gcda) from the guest, side
    # by side in data/, where gcov looks for them.
    gcnos = []
    for p in paths:
        full = os.path.join(kb, p)
        if os.path.isdir(full):
            gcnos += glob.glob(os.path.join(full, "**", "*.gcno"), recursive=True)
        elif os.path.exists(full[:-2] + ".gcno"):
            gcnos.append(full[:-2] + ".gcno")
    gcnos = sorted(g for g in gcnos if not g.endswith("_kunit.gcno"))
    args, no_data = [], 0
    for g in gcnos:
        rel = os.path.relpath(g, kb)
        dst = os.path.join(data, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(g, dst)
        da = os.path.join(gcda, rel[:-5] + ".gcda")
        if os.path.exists(da):
            shutil.copy2(da, dst[:-5] + ".gcda")
        else:
            no_data += 1
        args.append(dst)
    # {source path in the tree: {line: count summed over the objects}};
    # gcov lists only the lines it considers executable.
    lines = {}
    if args:
        r = subprocess.run(["gcov", "--json-format", "--stdout", *args],
                           cwd=data, capture_output=True, text=True)
        log.write(r.stderr)
        if r.returncode != 0:
            sys.exit(f"coverage: FAILED: gcov exited {r.returncode} for {name}:\n{r.stderr}")
        for j in r.stdout.splitlines():
            if not j.strip():
                continue
            all_json.write(j + "\n")
            doc = json.loads(j)
            cwd = doc.get("current_working_directory", kb)
            for f in doc["files"]:
                path = os.path.normpath(os.path.join(cwd, f["file"]))
                if not path.startswith(src + "/"):
                    continue
                per = lines.setdefault(path[len(src) + 1:], {})
                for ln in f["lines"]:
                    n = ln["line_number"]
                    per[n] = per.get(n, 0) + ln["count"]
    # Without a build in this run (--no-build), the sources were copied
    # after it: name those newer than the objects built from them.
    verified = os.path.exists(os.path.join(snap, ".built"))
    newest_note = max((os.path.getmtime(g) for g in gcnos), default=0)

    def newer_than_build(path):
        if verified:
            return False
        note = os.path.join(kb, path[:-2] + ".gcno")
        when = os.path.getmtime(note) if path.endswith(".c") and \
            os.path.exists(note) else newest_note
        return os.path.getmtime(os.path.join(snap, path)) > when

    files = [f for f in meta["files"] if counted(f)
             and any(f == p or f.startswith(p + "/") for p in paths)]
    total = executed = n_changed = 0
    missed, not_built, none_exec, newer = [], [], [], []
    for path in files:
        changed = changed_lines(path)
        if not changed:
            continue
        n_changed += len(changed)
        if newer_than_build(path):
            newer.append(path)
        per = lines.get(path)
        if per is None:
            # No object's notes name this file: a header with no code
            # (or none the drivers' objects use), or a file not built.
            (not_built if path.endswith(".c") else none_exec).append(path)
            continue
        text = open(os.path.join(snap, path), errors="replace").read().split("\n")
        ex = sorted(n for n in changed if n in per)
        if not ex:
            none_exec.append(path)
        for n in ex:
            total += 1
            if per[n] > 0:
                executed += 1
            else:
                missed.append((path, n, text[n - 1] if n <= len(text) else ""))
    ran = [s for s, st in suites.get(name, []) if st == "run"]
    absent = [s for s, st in suites.get(name, []) if st == "absent"]
    cases = {}
    for s in ran:
        suite = s.split(":", 1)[1]
        cases[s] = sum(1 for l in out_text.splitlines()
                       if l.startswith(f"kunit: ok - {suite}: ")
                       and not l.startswith(f"kunit: ok - {suite}: rmmod "))
    results.append(dict(name=name, paths=paths, total=total,
                        executed=executed, missed=missed, ran=ran,
                        absent=absent, cases=cases, objects=len(gcnos),
                        no_data=no_data, not_built=not_built,
                        none_exec=none_exec, newer=newer, changed=n_changed))
log.close()
all_json.close()


def pct(r):
    p = f"{100.0 * r['executed'] / r['total']:.1f}%" if r["total"] else "-"
    return p + (" (no suite)" if not r["ran"] else "")


table = ["| driver | changed executable lines | executed | % |",
         "|---|---:|---:|---|"]
for r in results:
    table.append(f"| {r['name']} | {r['total']} | {r['executed']} | {pct(r)} |")

times = {}
for l in open(os.path.join(cov, "times")):
    k, v = l.split()
    times[k] = v
times["analysis"] = f"{time.time() - t_start:.1f}"


def t(k, what):
    v = times.get(k, "-")
    if v == "-":
        return f"{what}: not in this run"
    if k == "guest" and times.get("qemu", "-") != "-":
        return f"{what} {v} s (QEMU {times['qemu']} s of it)"
    return f"{what} {v} s"


dirty = meta["dirty"]
md = ["# Coverage of the series' changed lines in the hardware RDMA drivers",
      "",
      f"`make coverage` (scripts/coverage.sh): the drivers' KUnit suites in a "
      f"guest on build/kbuild-coverage (the debug kernel + gcov on the "
      f"drivers' objects only), gcov on the host. Changed lines: the lines "
      f"`git diff {base}..{head}` ({head} = {meta['head_sha']}) adds or "
      f"modifies in each driver's non-test source files (not `*_kunit.c`), "
      f"and of those only the lines gcov considers executable: lines gcov "
      f"marks `-` (comments, blank lines, declarations, code the compiler "
      f"kept no line of) count in neither column.",
      ""]
if dirty:
    md += [f"**The working tree was not {head}** when it was built, in "
           + ", ".join(f"`{p}`" for p in dirty)
           + f": the lines are those of the files as built "
           f"(build/coverage/src/) against {base}.", ""]
md += table + [""]
md += [f"Wall time: {t('build', 'kernel build')}, {t('guest', 'guest run')}, "
       f"{t('analysis', 'analysis')}.", ""]
for r in results:
    md += [f"## {r['name']}", ""]
    md.append("Paths: " + ", ".join(f"`{p}`" for p in r["paths"])
              + f"; {r['changed']} changed lines in non-test .c/.h files, "
              f"{r['total']} of them executable; {r['objects']} profiled "
              f"objects (not the test module's)"
              + (f", {r['no_data']} with no data from the guest (not loaded)"
                 if r["no_data"] else "") + ".")
    if r["ran"]:
        md.append("Suites: " + ", ".join(
            f"`{s}` ({r['cases'].get(s, 0)} cases ok)" for s in r["ran"]) + ".")
    else:
        md.append("Suites: none (no suite): nothing of it runs.")
    if r["absent"]:
        md.append("Left out, no such suite in the driver's sources: "
                  + ", ".join(f"`{s}`" for s in r["absent"]) + ".")
    if r["none_exec"]:
        md.append("Changed, with no line gcov considers executable: "
                  + ", ".join(f"`{p}`" for p in r["none_exec"]) + ".")
    if r["not_built"]:
        md.append("**Changed but not built in this configuration** (no gcov "
                  "notes name them; not counted): "
                  + ", ".join(f"`{p}`" for p in r["not_built"]) + ".")
    if r["newer"]:
        md.append("**Newer than the build** (the sources were copied after "
                  "it, --no-build: the data may not match these lines): "
                  + ", ".join(f"`{p}`" for p in r["newer"]) + ".")
    md.append("")
    if r["missed"]:
        md += [f"Changed lines not executed ({len(r['missed'])}):", "", "```"]
        md += [f"{p}:{n}: {text.rstrip()}" for p, n, text in r["missed"]]
        md += ["```"]
    elif r["total"]:
        md.append("Every changed executable line ran.")
    md.append("")
md += ["## Caveats",
       "",
       "- gcov's lines come from the compiler's line table at -O2: code "
       "that was folded, moved or merged is attributed to one of the lines "
       "it came from (a function's opening line stands for its entry), and "
       "a line the compiler kept no code of is `-` (not counted) even when "
       "its statement \"ran\".",
       "- An inline function's or a macro's body counts at the lines of its "
       "definition when that is in the driver's files, summed over every "
       "object of the driver (not the test module's); a call of a macro or "
       "inline function defined elsewhere counts at the call's line.",
       "- Line coverage: a line counts as executed when any of its code "
       "ran (one arm of an `if (a || b)` is enough); branches are not "
       "counted.",
       "- Only the suites above ran: a line that runs on hardware, or on a "
       "path the stubs do not take, is \"not executed\" here.",
       "- Data: the guest's /sys/kernel/debug/gcov after the suites ran "
       "(gcov_persist=1 keeps an unloaded module's counts).",
       ""]
open(os.path.join(cov, "report.md"), "w").write("\n".join(md))
print("\n".join(table))
print(f"coverage: {os.path.join(cov, 'report.md')}; wall time: "
      f"{t('build', 'kernel build')}, {t('guest', 'guest run')}, "
      f"{t('analysis', 'analysis')}")
EOF
}

[ -f "$src/Makefile" ] || die "no tree at $src: run make tree"
for ref in "$base" "$head"; do
	git -C "$src" rev-parse -q --verify "$ref^{commit}" > /dev/null ||
		die "no $ref in $src (COVERAGE_BASE, COVERAGE_HEAD)"
done

# --- 1. kernel ------------------------------------------------------------
if [ "$mode" = all ]; then
	: > "$cov/times"
	t0=$EPOCHSECONDS
	# A build that saw the drivers' sources change is done again (it is
	# incremental), twice at most.
	for try in 1 2 3; do
		# Not while another build holds the lock (kernel.sh waits for it):
		# the copy is of what this build starts from.
		flock "${BUILD_LOCK:-$top/build/.build.lock}" true
		py snapshot "$cov/src.new"
		echo "coverage: building the coverage kernel (scripts/kernel.sh coverage; log: $cov/kernel.log)" >&2
		if ! nice -n 10 "$top/scripts/kernel.sh" coverage > "$cov/kernel.log" 2>&1; then
			tail -n 30 "$cov/kernel.log" >&2
			die "kernel build failed (scripts/kernel.sh coverage; log: $cov/kernel.log)"
		fi
		tail -n 1 "$cov/kernel.log" >&2
		changed=$(py compare "$cov/src.new")
		if [ -z "$changed" ]; then
			: > "$cov/src.new/.built"	# the copy is what was built
			break
		fi
		echo "coverage: build/linux changed during the build ($changed)" >&2
		[ $try != 3 ] ||
			die "build/linux's driver sources changed during each of 3 builds: the data would not match the lines"
	done
	step_time build $((EPOCHSECONDS - t0))
elif [ "$mode" = no-build ]; then
	: > "$cov/times"
	step_time build -
	py snapshot "$cov/src.new"
fi

# The suites: scripts/test.sh's KUNIT_SUITES (or the environment's), those of
# the drivers' modules; a suite that is not in its driver's sources as built
# (any more) is left out, and the report says so.
# shellcheck disable=SC2016 # the sed matches a literal ${
all_suites=${KUNIT_SUITES:-$(sed -n 's/^KUNIT_SUITES=\${KUNIT_SUITES:-\(.*\)}$/\1/p' "$top/scripts/test.sh")}
[ -n "$all_suites" ] || die "no KUNIT_SUITES in scripts/test.sh"
specs=()
if [ "$mode" != analyse ]; then
	: > "$cov/suites"	# DRIVER MODULE:SUITE run|absent
	for d in "${drivers[@]}"; do
		read -r name dir _ <<< "$d"
		for spec in $all_suites; do
			mod=${spec%%:*} suite=${spec#*:}
			[ -f "$cov/src.new/$dir/$mod.c" ] || continue
			if grep -rqsF --include='*.c' "\"$suite\"" "$cov/src.new/$dir"; then
				specs+=("$spec")
				echo "$name $spec run" >> "$cov/suites"
			else
				echo "coverage: $spec: no suite $suite in $dir: left out" >&2
				echo "$name $spec absent" >> "$cov/suites"
			fi
		done
	done
	[ ${#specs[@]} -gt 0 ] || die "none of KUNIT_SUITES ($all_suites) is a hardware driver's"
fi

if [ "$mode" != analyse ]; then
	{ [ -f "$kb/include/config/kernel.release" ] && [ -f "$kb/arch/x86/boot/bzImage" ]; } ||
		die "no coverage kernel in $kb: run scripts/kernel.sh coverage (or make coverage)"
	grep -qx CONFIG_GCOV_KERNEL=y "$kb/.config" || die "$kb/.config has no CONFIG_GCOV_KERNEL=y"
	! grep -qx CONFIG_GCOV_PROFILE_ALL=y "$kb/.config" ||
		die "$kb/.config profiles the whole kernel (CONFIG_GCOV_PROFILE_ALL)"
	# gcov notes (and so counters) for the drivers' objects only.
	for d in "${drivers[@]}"; do
		read -r name dir _ <<< "$d"
		[ -n "$(find "$kb/$dir" -name '*.gcno' -print -quit 2>/dev/null)" ] ||
			die "no gcov notes (.gcno) in $kb/$dir: not built with gcov"
	done
	stray=$(cd "$kb"; find . -name '*.gcno' | sed 's|^\./||' |
		grep -vE '^(drivers/infiniband/hw/|drivers/net/ethernet/(microsoft/mana|broadcom/bnxt|pensando/ionic)/)' | head -n 5 || true)
	[ -z "$stray" ] || die "objects outside the drivers are profiled, e.g.: $stray"
	# (grep -c, not -q: under pipefail nm's SIGPIPE would fail the pipe.)
	gcov_syms() { nm "$1" | grep -c ' __gcov0\.' || true; }
	[ "$(gcov_syms "$kb/vmlinux")" = 0 ] ||
		die "vmlinux has gcov counters (__gcov0.*): profiled beyond the drivers"
	for d in "${drivers[@]}"; do
		read -r name dir _ <<< "$d"
		while IFS= read -r ko; do
			[ "$(gcov_syms "$ko")" != 0 ] || die "$ko has no gcov counters (__gcov0.*)"
		done < <(find "$kb/$dir" -maxdepth 1 -name '*.ko')
	done
	# The sources as built, for the analysis (now and --analyse later).
	rm -rf "$cov/src"
	mv "$cov/src.new" "$cov/src"
fi

# --- 2. guest -------------------------------------------------------------
if [ "$mode" != analyse ]; then
	kver=$(cat "$kb/include/config/kernel.release")
	rm -rf "$cov/gcda" "$cov/report.md" "$cov/out.txt"
	t0=$EPOCHSECONDS
	echo "coverage: guest: ${specs[*]} (log: $cov/guest.log)" >&2
	set +e
	"$top/scripts/vm.sh" -K "$kb/arch/x86/boot/bzImage" \
		-M "$kb/mod-root/lib/modules/$kver" -n coverage \
		-t "${COVERAGE_VM_TIMEOUT:-600}" -- \
		"$top/scripts/coverage.sh --guest $kb ${specs[*]}" 2>&1 |
		tee "$cov/guest.log" | grep --line-buffered -E '^(kunit:|vm:|coverage:)'
	vrc=${PIPESTATUS[0]}
	set -e
	step_time guest $((EPOCHSECONDS - t0))
	# vm.sh's own time, from QEMU's start: the rest is waiting for the VM
	# lock (another guest) and setting up the guest's root.
	step_time qemu "$(sed -n 's/^vm: ok (\([0-9]*\) s)$/\1/p' "$cov/guest.log" | tail -n 1 | grep . || echo -)"
	# The data first: with it, --analyse can look at a failed run.
	mkdir -p "$cov/gcda"
	# (hvc0 ends lines with \r\n)
	tr -d '\r' < "$run/out.log" > "$cov/out.txt" 2>/dev/null || : > "$cov/out.txt"
	got=1
	sed -n '/^COVERAGE-GCDA-BEGIN$/,/^COVERAGE-GCDA-END$/p' "$cov/out.txt" | sed '1d;$d' |
		base64 -d 2>/dev/null | tar -C "$cov/gcda" -xz 2>/dev/null || got=0
	if [ "$vrc" != 0 ] && [ "$vrc" != 3 ]; then
		die "the guest failed (scripts/vm.sh exit $vrc: a kernel splat, a timeout or no boot); logs: $cov/guest.log, $run/console.log"
	fi
	failed=$(grep '^kunit: not ok' "$cov/out.txt" || true)
	[ -z "$failed" ] || die "a KUnit suite failed (log: $cov/guest.log):
$failed"
	for spec in "${specs[@]}"; do
		grep -q "^kunit: ok - ${spec#*:}: rmmod " "$cov/out.txt" ||
			die "no results of $spec in the guest's output ($cov/guest.log)"
	done
	[ "$vrc" = 0 ] || die "the guest's command exited non-zero (scripts/vm.sh exit $vrc); log: $cov/guest.log"
	[ "$got" = 1 ] || die "no gcov data in the guest's output ($run/out.log)"
fi

# --- 3. analysis ----------------------------------------------------------
{ [ -d "$cov/gcda" ] && [ -f "$cov/src/.meta.json" ] && [ -f "$cov/suites" ]; } ||
	die "no data of a guest run in $cov: run scripts/coverage.sh"
# The guest's files are named after the objects' paths in the build:
# gcda/<build directory>/drivers/...
[ -d "$cov/gcda$kb" ] ||
	die "the guest's gcov data is not under $kb (found: $(cd "$cov/gcda" && find . -name '*.gcda' | head -n 3 | tr '\n' ' '))"
[ -f "$cov/times" ] || : > "$cov/times"
py analyse
