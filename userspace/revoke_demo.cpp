// SPDX-License-Identifier: GPL-2.0
//
// revoke_demo: the revoke contract in one run, through plain verbs.
//
// A dmabuf_mock buffer stands in for accelerator memory. It is registered on
// one RDMA device with ibv_reg_dmabuf_mr(); a QP on a second device writes
// into it and reads it back with RDMA WRITE and READ. The exporter then
// revokes the buffer (and poisons its pages); the peer's next WRITE with the
// old rkey must complete with a remote access error, nothing may land in the
// buffer, and the exporter's pin, map and vmap counts must be back at zero.
// Exits 0 only if every step did what it should.
//
// usage: revoke_demo DEVICE PEER_DEVICE   (e.g. rxa rxb)
//        revoke_demo --hold DEVICE
//
// --hold registers a 1 MiB dmabuf_mock buffer on DEVICE, and a plain 4 KiB
// MR next to it, prints "hold: registered lkey=N plain_lkey=N" and then
// goes one step further at each line read from stdin: the exporter revokes
// ("hold: revoked"), the dma-buf MR is deregistered ("hold: deregistered"),
// then it exits. Scripts look at the MR between the steps (rdma resource
// show mr; scripts/vm/rdma-tool-check.sh). Every line it prints starts
// with "hold: "; a failure is "hold: error: ..." and a non-zero exit.

#include <cstdlib>
#include <string>
#include <vector>

#include "rdma_util.h"

namespace {

using namespace rdma_util;

constexpr size_t kBufSize = 1 << 20;
constexpr size_t kXfer = 64 << 10;

void print_query(const dmabuf_mock_query &q)
{
	say("   exporter: %s, attachments %u, pins %u, maps %u, vmaps %u, invalidates %u\n",
	    q.state & DMABUF_MOCK_STATE_REVOKED ? "revoked" : "live",
	    q.attachments, q.pins, q.maps, q.vmaps, q.invalidates);
}

bool check(bool ok, const char *what)
{
	say("   %s: %s\n", ok ? "ok" : "FAILED", what);
	return ok;
}

int run(const char *dev_name, const char *peer_name)
{
	bool ok = true;
	Mock mock;
	uint64_t buffers0 = mock.stats().buffers;

	say("\n== exporter: a 1 MiB dmabuf_mock buffer (it stands in for GPU memory)\n");
	mock.create(kBufSize);
	std::vector<uint8_t> pattern(kXfer), back(kXfer);
	for (size_t i = 0; i < kXfer; i++)
		pattern[i] = static_cast<uint8_t>(i * 7 + 3);

	End owner(dev_name), peer(peer_name);
	owner.connect(peer);
	peer.connect(owner);

	say("\n== %s: ibv_reg_dmabuf_mr(pd, 0, 1 MiB, iova 0, dma-buf fd %d)\n",
	    dev_name, mock.fd());
	ibv_mr *mr = ibv_reg_dmabuf_mr(owner.pd, 0, kBufSize, 0, mock.fd(),
				       kAccess);
	if (!mr) {
		int err = errno;

		if (err == EOPNOTSUPP)
			say("   this rdma-core's provider has no reg_dmabuf_mr: build the patched one (make rdma-core)\n");
		fail("ibv_reg_dmabuf_mr", err);
	}
	say("   lkey %#x rkey %#x; the exporter's pages are pinned and vmapped, not copied\n",
	    mr->lkey, mr->rkey);
	print_query(mock.query());

	void *local = aligned_alloc(4096, kXfer);
	ibv_mr *lmr = local ? ibv_reg_mr(peer.pd, local, kXfer, kAccess) : nullptr;
	if (!lmr)
		fail("peer buffer", errno);

	say("\n== %s -> %s: RDMA WRITE of 64 KiB into the dma-buf MR\n",
	    peer_name, dev_name);
	std::memcpy(local, pattern.data(), kXfer);
	ibv_wc_status st = peer.rdma(IBV_WR_RDMA_WRITE, lmr, 0, mr->rkey, kXfer);
	ok &= check(st == IBV_WC_SUCCESS,
		    (std::string("completion ") + ibv_wc_status_str(st)).c_str());
	mock.rw(0, back.data(), kXfer, false);
	ok &= check(back == pattern, "the exporter reads back what was written");

	say("\n== %s <- %s: RDMA READ of it back\n", peer_name, dev_name);
	std::memset(local, 0, kXfer);
	st = peer.rdma(IBV_WR_RDMA_READ, lmr, 0, mr->rkey, kXfer);
	ok &= check(st == IBV_WC_SUCCESS,
		    (std::string("completion ") + ibv_wc_status_str(st)).c_str());
	ok &= check(!std::memcmp(local, pattern.data(), kXfer),
		    "the peer reads the pattern");

	say("\n== exporter: revoke (invalidate, wait for importers, poison the pages)\n");
	auto t0 = std::chrono::steady_clock::now();
	mock.revoke(DMABUF_MOCK_REVOKE_POISON);
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
		std::chrono::steady_clock::now() - t0).count();
	say("   revoke returned after %lld ms\n", static_cast<long long>(ms));
	dmabuf_mock_query q = mock.query();
	print_query(q);
	ok &= check(q.pins == 0 && q.maps == 0 && q.vmaps == 0,
		    "no pin, map or vmap left");

	say("\n== %s -> %s: RDMA WRITE with the old rkey %#x\n", peer_name,
	    dev_name, mr->rkey);
	std::memcpy(local, pattern.data(), kXfer);
	st = peer.rdma(IBV_WR_RDMA_WRITE, lmr, 0, mr->rkey, kXfer);
	ok &= check(st == IBV_WC_REM_ACCESS_ERR,
		    (std::string("completion ") + ibv_wc_status_str(st) +
		     " (want remote access error)").c_str());
	mock.rw(0, back.data(), kXfer, false);
	bool poisoned = true;
	for (uint8_t b : back)
		poisoned &= b == DMABUF_MOCK_POISON;
	ok &= check(poisoned, "the buffer holds only the exporter's poison: nothing landed after revoke");

	say("\n== %s: ibv_dereg_mr of the revoked MR\n", dev_name);
	int err = ibv_dereg_mr(mr);
	ok &= check(!err, "dereg works after revoke");
	ibv_dereg_mr(lmr);
	free(local);
	q = mock.query();
	print_query(q);
	ok &= check(q.attachments == 0, "the exporter has no importer left");
	mock.close_buf();
	ok &= check(mock.stats().buffers == buffers0,
		    "closing the dma-buf fd frees the exporter's buffer");
	return ok ? 0 : 1;
}

// Waits for one line on stdin; false at EOF (the script went away).
bool next_step()
{
	int c;

	while ((c = std::getchar()) != EOF)
		if (c == '\n')
			return true;
	return false;
}

// --hold: a dma-buf MR held through revoke and dereg, one step per line.
int hold(const char *dev_name)
{
	Mock mock;
	uint64_t buffers0 = mock.stats().buffers;

	mock.create(kBufSize);
	ibv_context *ctx = open_device(dev_name);
	ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		fail("ibv_alloc_pd", errno);
	ibv_mr *mr = ibv_reg_dmabuf_mr(pd, 0, kBufSize, 0, mock.fd(), kAccess);
	if (!mr)
		fail("ibv_reg_dmabuf_mr", errno);
	void *plain = aligned_alloc(4096, 4096);
	ibv_mr *pmr = plain ? ibv_reg_mr(pd, plain, 4096, kAccess) : nullptr;
	if (!pmr)
		fail("ibv_reg_mr", errno);
	say("hold: registered lkey=%u plain_lkey=%u\n", mr->lkey, pmr->lkey);

	bool ok = true;
	if (next_step()) {
		mock.revoke(0);
		dmabuf_mock_query q = mock.query();
		ok = q.pins == 0 && q.maps == 0 && q.vmaps == 0;
		say("hold: revoked%s\n", ok ? "" : " (the exporter still has a pin, map or vmap)");
	}
	if (next_step()) {
		int err = ibv_dereg_mr(mr);

		if (err)
			fail("ibv_dereg_mr", err);
		mr = nullptr;
		say("hold: deregistered\n");
	}
	next_step();
	if (mr && ibv_dereg_mr(mr))
		ok = false;
	ibv_dereg_mr(pmr);
	free(plain);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	mock.close_buf();
	if (mock.stats().buffers != buffers0) {
		say("hold: error: the exporter's buffer outlived its fd\n");
		ok = false;
	}
	return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc == 3 && !std::strcmp(argv[1], "--hold")) {
		try {
			return hold(argv[2]);
		} catch (const std::exception &e) {
			say("hold: error: %s\n", e.what());
			return 1;
		}
	}
	if (argc != 3) {
		std::fprintf(stderr, "usage: %s DEVICE PEER_DEVICE | --hold DEVICE\n",
			     argv[0]);
		return 2;
	}
	try {
		int rc = run(argv[1], argv[2]);

		say("\n== revoke demo: %s\n", rc ? "FAILED" : "all steps as expected");
		return rc;
	} catch (const std::exception &e) {
		std::fprintf(stderr, "revoke_demo: %s\n", e.what());
		return 1;
	}
}
