// SPDX-License-Identifier: GPL-2.0
//
// Shared by the project's user space tools (revoke_demo, revoke_bench):
// the dmabuf_mock exporter's ioctls, opening an RDMA device by name, and one
// end of an RC connection (PD, CQ, QP, RoCE v2 IPv4 GID) with the steps that
// connect two ends. Errors throw std::runtime_error.

#ifndef REVOKE_RDMA_UTIL_H
#define REVOKE_RDMA_UTIL_H

#include <infiniband/verbs.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "../drivers/dma-buf/dmabuf_mock.h"

namespace rdma_util {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_WRITE;

[[noreturn]] inline void fail(const std::string &what, int err = 0)
{
	throw std::runtime_error(err ? what + ": " + std::strerror(err) : what);
}

inline void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	std::vprintf(fmt, ap);
	va_end(ap);
	std::fflush(stdout);
}

// /dev/dmabuf_mock and at most one buffer of it.
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
	Mock(const Mock &) = delete;
	Mock &operator=(const Mock &) = delete;

	// A command as dmabuf_mock.h wants it: zeroed, its size set.
	template <typename Cmd> static Cmd command()
	{
		Cmd c{};

		c.size = sizeof(c);
		return c;
	}

	void create(uint64_t length, uint32_t flags = 0)
	{
		auto c = command<dmabuf_mock_create>();

		c.length = length;
		c.flags = flags;
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
		auto r = command<dmabuf_mock_rw>();

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
		auto q = command<dmabuf_mock_query>();

		q.fd = fd_;
		if (ioctl(dev_, DMABUF_MOCK_QUERY, &q))
			fail("DMABUF_MOCK_QUERY", errno);
		return q;
	}
	void revoke(uint32_t flags)
	{
		auto r = command<dmabuf_mock_revoke>();

		r.fd = fd_;
		r.flags = flags;
		r.timeout_ms = 10000;
		if (ioctl(dev_, DMABUF_MOCK_REVOKE, &r))
			fail(std::string("DMABUF_MOCK_REVOKE (holder ") +
			     r.holder + ")", errno);
	}
	void restore()
	{
		auto r = command<dmabuf_mock_restore>();

		r.fd = fd_;
		if (ioctl(dev_, DMABUF_MOCK_RESTORE, &r))
			fail("DMABUF_MOCK_RESTORE", errno);
	}
	dmabuf_mock_stats stats()
	{
		auto s = command<dmabuf_mock_stats>();

		if (ioctl(dev_, DMABUF_MOCK_STATS, &s))
			fail("DMABUF_MOCK_STATS", errno);
		return s;
	}

private:
	int dev_;
	int fd_ = -1;
};

inline ibv_context *open_device(const char *name)
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
// With a completion channel (events), waits for completions sleep instead of
// polling.
struct End {
	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_comp_channel *channel = nullptr;
	ibv_cq *cq = nullptr;
	ibv_qp *qp = nullptr;
	int gid_index = -1;
	ibv_gid gid{};

	explicit End(const char *name, int depth = 8, bool events = false)
		: ctx(open_device(name))
	{
		find_gid(name);
		pd = ibv_alloc_pd(ctx);
		if (!pd)
			fail("ibv_alloc_pd", errno);
		if (events && !(channel = ibv_create_comp_channel(ctx)))
			fail("ibv_create_comp_channel", errno);
		cq = ibv_create_cq(ctx, 2 * depth, nullptr, channel, 0);
		if (!cq)
			fail("ibv_create_cq", errno);
		new_qp(depth);
	}
	~End()
	{
		if (qp)
			ibv_destroy_qp(qp);
		if (cq)
			ibv_destroy_cq(cq);
		if (channel)
			ibv_destroy_comp_channel(channel);
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
	}
	End(const End &) = delete;
	End &operator=(const End &) = delete;

	// A fresh QP in RESET (after an error moved the old one to ERROR).
	void new_qp(int depth)
	{
		ibv_qp_init_attr ia{};

		if (qp)
			ibv_destroy_qp(qp);
		ia.send_cq = ia.recv_cq = cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = depth;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qp = ibv_create_qp(pd, &ia);
		if (!qp)
			fail("ibv_create_qp", errno);
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
	void connect(const End &peer, int rd_atomic = 1)
	{
		connect_to(peer.qp->qp_num, peer.gid, rd_atomic);
	}
	// The same against a QP on another host, named by its number and
	// GID: access is what the peer may do through this QP, ack_timeout
	// the local ACK timeout (4.096 us << ack_timeout; 7 retries).
	void connect_to(uint32_t dest_qpn, const ibv_gid &dgid,
			int rd_atomic = 1, int access = kAccess,
			uint8_t ack_timeout = 14)
	{
		ibv_qp_attr a{};

		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = access;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			fail("modify QP to INIT", errno);
		a = {};
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = dest_qpn;
		a.rq_psn = 0;
		a.max_dest_rd_atomic = rd_atomic;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = dgid;
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
		a.timeout = ack_timeout;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = 0;
		a.max_rd_atomic = rd_atomic;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
			fail("modify QP to RTS", errno);
	}
	// Posts one RDMA WRITE or READ; signalled ones complete with wr_id.
	void post(ibv_wr_opcode op, ibv_mr *local, uint64_t loff, uint64_t raddr,
		  uint32_t rkey, uint32_t len, bool signaled = true,
		  uint64_t wr_id = 0)
	{
		ibv_sge sge{reinterpret_cast<uintptr_t>(local->addr) + loff, len,
			    local->lkey};
		ibv_send_wr wr{}, *bad;

		wr.wr_id = wr_id;
		wr.opcode = op;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
		int err = ibv_post_send(qp, &wr, &bad);
		if (err)
			fail("ibv_post_send", err);
	}
	// Up to max completions, waiting at most 60 s for the first: polls,
	// or sleeps on the completion channel when there is one.
	int wait(ibv_wc *wc, int max)
	{
		auto end = std::chrono::steady_clock::now() +
			   std::chrono::seconds(60);
		bool armed = false;

		for (;;) {
			int n = ibv_poll_cq(cq, max, wc);

			if (n < 0)
				fail("ibv_poll_cq");
			if (n > 0)
				return n;
			if (std::chrono::steady_clock::now() > end)
				fail("no completion within 60 s");
			if (!channel) {
				usleep(1000);
				continue;
			}
			if (!armed) {
				// Arm, then poll again: a completion that came
				// in between raises no event.
				if (ibv_req_notify_cq(cq, 0))
					fail("ibv_req_notify_cq");
				armed = true;
				continue;
			}
			pollfd p{channel->fd, POLLIN, 0};
			if (poll(&p, 1, 1000) < 0 && errno != EINTR)
				fail("poll on the completion channel", errno);
			if (p.revents & POLLIN) {
				ibv_cq *ev_cq;
				void *ev_ctx;

				if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx))
					fail("ibv_get_cq_event", errno);
				ibv_ack_cq_events(ev_cq, 1);
				armed = false;
			}
		}
	}
	// One signalled RDMA WRITE or READ; returns the completion status.
	ibv_wc_status rdma(ibv_wr_opcode op, ibv_mr *local, uint64_t raddr,
			   uint32_t rkey, uint32_t len)
	{
		ibv_wc wc{};

		post(op, local, 0, raddr, rkey, len);
		wait(&wc, 1);
		return wc.status;
	}
};

} // namespace rdma_util

#endif
