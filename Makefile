# SPDX-License-Identifier: GPL-2.0
# Pinned-but-revocable dma-buf MRs for RDMA: harness. `make help` lists the
# targets. Everything lands in build/ (ignored by git).
#
# This file is the harness. The out-of-tree module build reads ./Kbuild
# (kbuild prefers it over this Makefile when called with M=).

SHELL := /bin/bash
TOP := $(CURDIR)
B := $(TOP)/build
KSELFTEST_TARGETS ?= rdma drivers/dma-buf
export KSELFTEST_TARGETS

.PHONY: help deps fetch pin tree export series modules kernel kernel-debug \
	rdma-core-pr base-check \
	kselftest docs rdma-core iproute2 userspace demo vm test check \
	bisect-check stress qemu-plugin qemu-plugin-check bench bench-profile \
	two-host dkms dkms-check deb deb-check clean test-base test-one vm-shell kunit-py coverage \
	repro-cq-overflow blktests

help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## deps          install the missing host packages make test needs
##               (bookworm; needs root; make test and make demo call it)
deps:
	scripts/deps.sh

## fetch         every download: the base, Debian's Linux 7.3 (source,
##               image, headers) as configs/base.pin names it, by version
##               and SHA256 (DEBIAN_MIRROR=URL: another Debian mirror), and
##               the sources the other steps build (rdma-core, iproute2,
##               sparse, QEMU's plugin header) and base-check's indices;
##               the steps after it run without the network
fetch: $(B)/.unpacked
	FETCH_ONLY=1 scripts/rdma-core-pr.sh > /dev/null
	FETCH_ONLY=1 scripts/iproute2.sh > /dev/null
	FETCH_ONLY=1 scripts/sparse.sh > /dev/null
	FETCH_ONLY=1 scripts/qemu-plugin.sh > /dev/null
	FETCH_ONLY=1 scripts/base-check.sh
$(B)/.unpacked: configs/base.pin scripts/fetch.sh scripts/unpack.sh
	scripts/fetch.sh $(B)
	scripts/unpack.sh $(B)

## pin           move the base on purpose: rewrite configs/base.pin with
##               the newest 7.3.x of trixie-backports (then commit it)
pin:
	scripts/fetch.sh --pin

## tree          build/linux: v7.3 + patches/series as git commits
##               (refuses to drop unexported work; FORCE=1 drops it)
tree: $(B)/.unpacked
	python3 scripts/series.py tree $(if $(FORCE),--force)

## export        write build/linux's commits back to patches/ + new files,
##               and mail/: each mail series as `git am` takes it
export:
	python3 scripts/series.py export
	python3 scripts/takeable.py write

## series        build/series/<name>/: the mail series of patches/mail-series
##               with b4 (cover letter + patches, To/Cc from get_maintainer),
##               as the sender (git config user.name/email); then read back:
##               checkpatch, git am onto the base. Sends nothing
series: tree
	scripts/series-check.sh

## modules       out-of-tree build of our modules against Debian's headers
##               (KDIR=... for another kernel; W=1 / C=1 via OOT_W, OOT_C;
##               OOT_HW=1 adds the hardware drivers, compile tests)
modules: tree
	scripts/oot.sh

## kernel        in-tree kernel, small config (configs/base+rdma)
kernel: tree
	scripts/kernel.sh base

## kernel-debug  in-tree kernel with KASAN, lockdep, kmemleak, KUnit, ...
##               and the hardware drivers the series changes (hw.config)
kernel-debug: tree
	scripts/kernel.sh debug

## kselftest     install the selftests ($KSELFTEST_TARGETS) in build/kselftest
##               (against the tree's uapi headers: KHDR_INCLUDES); fails if
##               any target fails to build (FORCE_TARGETS: without it the
##               selftests Makefile succeeds when one target builds)
kselftest: tree
	rm -rf $(B)/kselftest $(B)/kselftest-build
	$(MAKE) -s -C $(B)/linux O=$(B)/kselftest-build headers >/dev/null
	$(MAKE) -s -C $(B)/linux/tools/testing/selftests FORCE_TARGETS=1 \
		TARGETS="$(KSELFTEST_TARGETS)" O=$(B)/kselftest-build \
		INSTALL_PATH=$(B)/kselftest install >/dev/null

## docs          Sphinx build of Documentation/infiniband (dmabuf_revoke.rst
##               and the kernel-doc it includes) in build/htmldocs
docs: tree
	scripts/docs.sh

## rdma-core     rdma-core 65.0 + rdma-core/upstream-pr, in place with
##               pyverbs: the guests' rdma-core when built (ibv_reg_dmabuf_mr
##               on rxe), and its tests/test_mr.py dma-buf tests
##               (rdma-core-pr: the same)
rdma-core rdma-core-pr:
	scripts/rdma-core-pr.sh

## iproute2      iproute2's rdma tool with iproute2/patches (`rdma resource
##               show mr` shows dma-buf MRs and revoke; the guests use it)
iproute2:
	scripts/iproute2.sh

## userspace     project tools in userspace/ (C++17): build/userspace/
USERSPACE_BINS := $(B)/userspace/revoke_demo $(B)/userspace/revoke_bench \
	$(B)/userspace/two_host
userspace: $(USERSPACE_BINS)
$(B)/userspace/%: userspace/%.cpp userspace/rdma_util.h userspace/insn_marker.h \
		drivers/dma-buf/dmabuf_mock.h
	@mkdir -p $(@D)
	g++ -std=c++17 -O2 -Wall -Wextra -Werror -o $@ $< -libverbs

## repro-cq-overflow  the upstream reproducer of rxe's receive-CQ
##               overflow (userspace/repro) in QEMU: on Debian's stock
##               trixie-backports 7.3 kernel and rdma-core (KERNEL=base or
##               debug: the patched in-tree kernels); prints how long
##               ibv_dereg_mr() took, fails past 10 s (the stock kernel: 51 s
##               and a WARNING)
$(B)/userspace/rxe_cq_overflow: userspace/repro/rxe_cq_overflow.c
	@mkdir -p $(@D)
	gcc -O2 -Wall -Wextra -Werror -o $@ $< -libverbs
repro-cq-overflow: $(B)/userspace/rxe_cq_overflow
	scripts/vm.sh -k $(or $(filter-out debian,$(KERNEL)),stock) -n repro -t 600 -- \
		$(TOP)/userspace/repro/rxe_cq_overflow.sh $<

## blktests      blktests' nvme and srp groups over rxe (use_rxe=1) on
##               Debian's stock trixie-backports 7.3 kernel with rdma_rxe
##               rebuilt from v7.3.4 plus the stack's rdma-rc fixes of rxe;
##               BLKTESTS_DIR=a blktests checkout (not packaged, no network
##               fetch here), BLKTESTS_RXE="fixed stock" also on the stock
##               rdma_rxe; an hour or more under TCG, not part of make test
blktests: tree
	scripts/blktests.sh $(T)

## demo          boot Debian's trixie-backports 7.3 in QEMU with our modules:
##               the revoke demo (dma-buf MR on rxe, traffic, revoke, the
##               peer's error); installs the host packages it needs first
##               (root)
demo:
	scripts/deps.sh --demo
	$(MAKE) modules rdma-core userspace
	scripts/vm.sh -n demo -t 600 -- $(TOP)/scripts/vm/demo.sh

## two-host      two guests at once over a QEMU wire: Debian's trixie-backports
##               7.3 kernel with our modules (dma-buf MR, revoke) against the
##               same kernel stock, with distro rdma-core; not part of
##               `make test` (README)
two-host: modules rdma-core userspace
	scripts/two-host.sh

## vm            boot a guest and run CMD (KERNEL=debian|base|debug)
vm:
	scripts/vm.sh -k $(or $(KERNEL),debian) -t 1800 -- $(or $(CMD),true)

## vm-shell      an interactive shell in a guest (KERNEL=debian, base or
##               debug), with our modules loaded and the kselftests in
##               build/kselftest; exit the shell to end the guest
vm-shell:
	VM_SHELL=1 scripts/vm.sh -k $(or $(KERNEL),debian) -n shell -t 7200 -- \
		'modprobe -a ib_core ib_uverbs rdma_ucm rdma_rxe dmabuf_mock; \
		cd $(B)/kselftest && TERM=$(or $(TERM),linux) setsid -c bash -i </dev/hvc1 >/dev/hvc1 2>&1'

## test          everything CI runs: host tests, builds, guest runs, totals;
##               installs the host packages it needs first (root)
test:
	scripts/requirements.sh
	scripts/deps.sh
	$(MAKE) tree
	scripts/test.sh

## test-one      one test in a guest: T=COLLECTION:PROGRAM (e.g.
##               rdma:dmabuf_mr) with ARGS for it (e.g. "-r FIXTURE.VARIANT.TEST"
##               for one case), or T=kunit:MODULE:SUITE; KERNEL=debian
##               (default), base or debug; builds what that kernel needs
KERNEL ?= debian
test-one: tree
	@[ -n "$(T)" ] || { echo "make test-one T=COLLECTION:PROGRAM [ARGS=...] [KERNEL=debian|base|debug]" >&2; exit 2; }
	@[ -x $(B)/kselftest/run_kselftest.sh ] || $(MAKE) kselftest
	$(MAKE) userspace rdma-core $(if $(filter debian,$(KERNEL)),modules,kernel$(if $(filter debug,$(KERNEL)),-debug))
	scripts/test-one.sh -k $(KERNEL) $(T) $(ARGS)

## kunit-py      tools/testing/kunit/kunit.py run with the series'
##               .kunitconfig files (core, dma-buf; or KUNITCONFIG=DIR), on
##               x86_64 under QEMU (about 6 min each the first time)
kunit-py: tree
	scripts/kunit-py.sh $(KUNITCONFIG)

## test-base     the in-tree base kernel (no debug options) and its guest,
##               which make test leaves out (README, "What was tested on what")
test-base:
	scripts/requirements.sh
	scripts/deps.sh
	$(MAKE) tree
	scripts/test.sh kselftest kernel-base guest-base

## coverage      KUnit line coverage of the series' changes in the hardware
##               drivers: a gcov kernel (build/kbuild-coverage, the debug
##               one + configs/coverage.config), the drivers' suites in a
##               guest, then per driver the changed executable lines that
##               ran and those that did not (build/coverage/report.md);
##               builds build/linux as it is (no make tree); not part of
##               `make test`
coverage:
	scripts/coverage.sh

## check         host-only tests (series round trip; mail series with a test
##               identity: subjects, To/Cc, checkpatch, git am)
check: tree
	scripts/test.sh series

## bisect-check  build every commit of the series alone, then every mail
##               series on the base + its dependencies (oot modules with
##               the hardware drivers, selftests, and in tree the RDMA and
##               dma-buf objects with the KUnit tests); not part of
##               `make test`
bisect-check: tree
	scripts/bisect-check.sh

## base-check    no file of the series is excluded or patched by Debian in
##               the base (also in `make test`'s series step)
base-check: tree
	scripts/base-check.sh

## dkms          build/dkms/src: dmabuf_mock as a DKMS package (tree and
##               tarball), generated from drivers/dma-buf/dmabuf_mock.[ch]
dkms:
	scripts/dkms.sh

## dkms-check    the DKMS package on Debian's kernels 6.1 (bookworm), 6.12
##               (trixie) and 7.3 (trixie-backports): dkms add, build,
##               install in a debootstrap'd root of each release, then
##               the mock's kselftest in QEMU on that kernel (root; about
##               2 minutes, 5 the first time); not part of `make test`
dkms-check: $(B)/.unpacked
	@scripts/deps.sh --check --dkms
	scripts/dkms-check.sh

## deb           the series' RDMA core modules, rxe and dmabuf_mock as a
##               Debian DKMS package for Debian's trixie-backports 7.3 kernel
##               (dh-dkms): build/deb/revoke-rdma-dkms_VERSION_all.deb;
##               DEB_HW=1: revoke-rdma-hw-dkms, also the RDMA hardware drivers,
##               bnxt_en, mana, ionic and the InfiniBand ULPs
deb: modules
	@scripts/deps.sh --check --deb
	scripts/deb.sh

## deb-check     the .deb as a user installs it: apt install in a trixie
##               root with Debian's trixie-backports 7.3 kernel, a guest on it
##               (the package's modules, the Debian guest's kselftests), apt
##               purge, a guest with the stock modules (root; about 6
##               minutes, 9 with DEB_HW=1, 1-2 more the first time); not part
##               of `make test`
deb-check: modules userspace rdma-core iproute2
	@scripts/deps.sh --check --deb
	@[ -x $(B)/kselftest/run_kselftest.sh ] || $(MAKE) kselftest
	scripts/deb-check.sh

## stress        the full dma-buf MR revoke stress run: debug kernel, 600 s
##               (DMABUF_MR_STRESS_SECS); needs make kernel-debug and make
##               kselftest first; not part of `make test`
stress:
	scripts/stress.sh

## qemu-plugin   the markcount TCG plugin (guest instruction counts between
##               the markers of userspace/insn_marker.h; VM_PLUGIN_OUT in
##               scripts/vm.sh), against the host QEMU's plugin header
qemu-plugin:
	scripts/qemu-plugin.sh

$(B)/userspace/insn_calib: userspace/insn_calib.c userspace/insn_marker.h
	@mkdir -p $(@D)
	gcc -O2 -Wall -Wextra -Werror -o $@ $<

## qemu-plugin-check  calibrate it in a guest (TCG): 2N instructions
##               between two markers must count as 2N..1.01*2N (N=1e7)
qemu-plugin-check: qemu-plugin $(B)/userspace/insn_calib
	scripts/insn-check.sh

## bench         benchmarks in a guest (rxe, TCG): dma-buf vs plain MRs,
##               revoke scaling, registration, vs ODP, vs a CPU bounce;
##               A/B pairs, wall time and guest instruction counts;
##               build/bench/{table.txt,summary.csv,bench.svg,png} (~5 min)
bench: modules rdma-core iproute2 userspace
	scripts/bench.sh

## bench-profile SECTION=a..e [FTRACE=kernel_function]  perf profile (or
##               function_graph trace) of one bench section in a guest
bench-profile: modules rdma-core iproute2 userspace
	BENCH_FTRACE=$(FTRACE) scripts/bench.sh --profile $(or $(SECTION),d)

.PHONY: deps-check
deps-check:
	@scripts/deps.sh --check

## clean         remove build outputs (keeps downloads and the ccache)
clean:
	rm -rf $(B)/oot $(B)/kbuild-* $(B)/vm $(B)/results $(B)/series \
		$(B)/mail $(B)/test-mail \
		$(B)/kselftest $(B)/kselftest-build
