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

#include <infiniband/verbs.h>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "../drivers/dma-buf/dmabuf_mock.h"

namespace {

constexpr size_t kBufSize = 1 << 20;
constexpr size_t kXfer = 64 << 10;
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_WRITE;

[[noreturn]] void fail(const std::string &what, int err = 0)
{
	throw std::runtime_error(err ? what + ": " + std::strerror(err) : what);
}

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	std::vprintf(fmt, ap);
	va_end(ap);
	std::fflush(stdout);
}

class Mock {
public:
	Mock() : dev_(open("/dev/" DMABUF_MOCK_DEVICE, O_RDWR | O_CLOEXEC))
	{
		if (dev_ < 0)
			fail("open /dev/" DMABUF_MOCK_DEVICE
			     " (is dmabuf_mock loaded?)", errno);
	}
	~Mock()
	{
		if (fd_ >= 0)
			close(fd_);
		close(dev_);
	}
	void create(uint64_t length)
	{
		dmabuf_mock_create c{};

		c.length = length;
		if (ioctl(dev_, DMABUF_MOCK_CREATE, &c))
			fail("DMABUF_MOCK_CREATE", errno);
		fd_ = c.fd;
	}
	int fd() const { return fd_; }
	void close_buf()
	{
		close(fd_);
		fd_ = -1;
	}
	void rw(uint64_t off, void *buf, uint64_t len, bool write)
	{
		dmabuf_mock_rw r{};

		r.flags = write ? DMABUF_MOCK_RW_WRITE : 0;
		r.fd = fd_;
		r.offset = off;
		r.length = len;
		r.uptr = reinterpret_cast<uintptr_t>(buf);
		if (ioctl(dev_, DMABUF_MOCK_RW, &r))
			fail("DMABUF_MOCK_RW", errno);
	}
	dmabuf_mock_query query()
	{
		dmabuf_mock_query q{};

		q.fd = fd_;
		if (ioctl(dev_, DMABUF_MOCK_QUERY, &q))
			fail("DMABUF_MOCK_QUERY", errno);
		return q;
	}
	void revoke(uint32_t flags)
	{
		dmabuf_mock_revoke r{};

		r.fd = fd_;
		r.flags = flags;
		r.timeout_ms = 10000;
		if (ioctl(dev_, DMABUF_MOCK_REVOKE, &r))
			fail(std::string("DMABUF_MOCK_REVOKE (holder ") +
			     r.holder + ")", errno);
	}
	dmabuf_mock_stats stats()
	{
		dmabuf_mock_stats s{};

		if (ioctl(dev_, DMABUF_MOCK_STATS, &s))
			fail("DMABUF_MOCK_STATS", errno);
		return s;
	}

private:
	int dev_;
	int fd_ = -1;
};

void print_query(const dmabuf_mock_query &q)
{
	say("   exporter: %s, attachments %u, pins %u, maps %u, vmaps %u, invalidates %u\n",
	    q.state & DMABUF_MOCK_STATE_REVOKED ? "revoked" : "live",
	    q.attachments, q.pins, q.maps, q.vmaps, q.invalidates);
}

ibv_context *open_device(const char *name)
{
	int n;
	ibv_context *ctx = nullptr;
	ibv_device **list = ibv_get_device_list(&n);

	if (!list)
		fail("ibv_get_device_list", errno);
	for (int i = 0; i < n && !ctx; i++)
		if (!std::strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		fail(std::string("no RDMA device ") + name);
	return ctx;
}

// One RC QP on one device, its PD and CQ, and the RoCE v2 IPv4 GID to use.
struct End {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_cq *cq = nullptr;
	ibv_qp *qp = nullptr;
	int gid_index = -1;
	ibv_gid gid{};

	explicit End(const char *name) : ctx(open_device(name))
	{
		find_gid(name);
		pd = ibv_alloc_pd(ctx);
		cq = pd ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
		if (!cq)
			fail("ibv_alloc_pd/ibv_create_cq", errno);
		ibv_qp_init_attr ia{};
		ia.send_cq = ia.recv_cq = cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qp = ibv_create_qp(pd, &ia);
		if (!qp)
			fail("ibv_create_qp", errno);
	}
	~End()
	{
		if (qp)
			ibv_destroy_qp(qp);
		if (cq)
			ibv_destroy_cq(cq);
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
	}
	void find_gid(const char *name)
	{
		for (int i = 0; i < 16; i++) {
			ibv_gid_entry e{};

			if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
				continue;
			const uint8_t *raw = e.gid.raw;
			bool v4 = !std::memcmp(raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
			if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && v4) {
				gid_index = i;
				gid = e.gid;
				return;
			}
		}
		fail(std::string(name) + ": no RoCE v2 IPv4 GID");
	}
	// INIT -> RTR -> RTS against the other end.
	void connect(const End &peer)
	{
		ibv_qp_attr a{};

		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = kAccess;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			fail("modify QP to INIT", errno);
		a = {};
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = peer.qp->qp_num;
		a.rq_psn = 0;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer.gid;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
				  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
			fail("modify QP to RTR", errno);
		a = {};
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = 0;
		a.max_rd_atomic = 1;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
			fail("modify QP to RTS", errno);
	}
	// One signalled RDMA WRITE or READ; returns the completion status.
	ibv_wc_status rdma(ibv_wr_opcode op, ibv_mr *local, uint64_t raddr,
			   uint32_t rkey, uint32_t len)
	{
		ibv_sge sge{reinterpret_cast<uintptr_t>(local->addr), len,
			    local->lkey};
		ibv_send_wr wr{}, *bad;
		ibv_wc wc{};

		wr.opcode = op;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
		int err = ibv_post_send(qp, &wr, &bad);
		if (err)
			fail("ibv_post_send", err);
		auto end = std::chrono::steady_clock::now() +
			   std::chrono::seconds(60);
		for (;;) {
			int n = ibv_poll_cq(cq, 1, &wc);

			if (n < 0)
				fail("ibv_poll_cq");
			if (n == 1)
				return wc.status;
			if (std::chrono::steady_clock::now() > end)
				fail("no completion within 60 s");
			usleep(1000);
		}
	}
};

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
