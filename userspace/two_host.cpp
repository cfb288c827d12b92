// SPDX-License-Identifier: GPL-2.0
//
// two_host: a dma-buf MR and its revoke across two hosts, one of which may
// run a kernel without the revocable dma-buf MR series.
//
// Side A owns the dma-buf (dmabuf_mock, registered with ibv_reg_dmabuf_mr()
// or, when the provider has no reg_dmabuf_mr, the raw uverbs ioctl). Side B
// has only a plain MR and needs nothing of the series. The two run the same
// script in lock step, talking over a plain TCP connection (A listens):
//
//   forward  B's RDMA WRITE, READ, SEND and atomics on A's dma-buf MR, data
//            checked on both ends; the exporter revokes with poison; B's
//            WRITE, READ, FETCH_ADD and CMP_SWP with the old rkey must
//            complete with IBV_WC_REM_ACCESS_ERR, a SEND into a RECV on the
//            old lkey with IBV_WC_REM_OP_ERR (and IBV_WC_LOC_QP_OP_ERR for
//            the RECV on A), and A's buffer must hold only poison.
//   reverse  a second dma-buf MR on A as the local buffer of A's own WRITE,
//            READ, SEND and FETCH_ADD to B's plain MR, data checked; after
//            the revoke, WRITE and SEND from the old lkey must complete with
//            IBV_WC_LOC_QP_OP_ERR, READ and FETCH_ADD results into it with
//            IBV_WC_LOC_PROT_ERR, nothing may land in B's buffer and A's
//            buffer must hold only poison.
//
// Every side keeps a model of its whole buffer and compares all of it after
// every step, so a byte written out of place shows. The first deviation
// ends the run: the side that saw it prints "two-host X: FAILED (this
// side): ..." and tells the peer, which prints "two-host Y: FAILED (peer
// X): ..."; a peer that stops answering (no message within the message
// timeout, or the connection lost) is a peer failure too. Exit 0 only if
// every check passed.
//
// usage: two_host a|b DEVICE PEER_IPV4 [PORT]
// Environment: TWO_HOST_RAW=1 (A: register through the raw ioctl even when
//   the provider has reg_dmabuf_mr), TWO_HOST_MSG_TIMEOUT (seconds to wait
//   for a message from the peer, default 60), TWO_HOST_CONNECT_TIMEOUT
//   (seconds to wait for the peer's TCP connection, default 180),
//   TWO_HOST_DEADLINE (seconds for the whole run, default 480).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "rdma_util.h"

namespace {

using namespace rdma_util;

constexpr size_t kBufSize = 1 << 20;
constexpr uint32_t kXfer = 64 << 10;
constexpr uint64_t kIova = 0x10000000000ULL;
constexpr int kAccessAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
// ~1 s ACK timeout: two guests under TCG share two host cores.
constexpr uint8_t kAckTimeout = 18;
constexpr uint8_t kCanary = 0xa5;

char me = '?', peer_side = '?';
int checks;

// Something the peer did or failed to do.
struct PeerError : std::runtime_error {
	using std::runtime_error::runtime_error;
};

int env_int(const char *name, int dflt)
{
	const char *v = std::getenv(name);

	return v && *v ? std::atoi(v) : dflt;
}

void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void line(const char *fmt, ...)
{
	va_list ap;

	std::printf("two-host %c: ", me);
	va_start(ap, fmt);
	std::vprintf(fmt, ap);
	va_end(ap);
	std::putchar('\n');
	std::fflush(stdout);
}

// A passed check is one line; a failed one ends the run.
void check(bool ok, const std::string &what)
{
	if (!ok)
		fail("check failed: " + what);
	line("ok %d - %s", ++checks, what.c_str());
}

uint8_t pattern(unsigned int seed, uint64_t pos)
{
	return static_cast<uint8_t>(pos * 131 + (pos >> 8) * 7 + seed * 37);
}

void fill(std::vector<uint8_t> &v, uint64_t off, uint64_t len,
	  unsigned int seed, uint64_t start)
{
	for (uint64_t i = 0; i < len; i++)
		v[off + i] = pattern(seed, start + i);
}

// Where two buffers first differ, for the message.
std::string first_diff(const std::vector<uint8_t> &want,
		       const uint8_t *got, size_t len)
{
	size_t n = 0, first = len;

	for (size_t i = 0; i < len; i++) {
		if (want[i] == got[i])
			continue;
		if (first == len)
			first = i;
		n++;
	}
	if (!n)
		return "";
	char buf[128];

	std::snprintf(buf, sizeof(buf),
		      "%zu bytes differ, first at %#zx: %#04x, want %#04x", n,
		      first, got[first], want[first]);
	return buf;
}

std::string status_name(ibv_wc_status st)
{
	static const char *const names[] = {
		"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR",
		"LOC_PROT_ERR", "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR",
		"LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR",
		"REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
		"LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
		"INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR",
		"RESP_TIMEOUT_ERR", "GENERAL_ERR",
	};

	if (static_cast<size_t>(st) < sizeof(names) / sizeof(names[0]))
		return std::string("IBV_WC_") + names[st];
	return "status " + std::to_string(st);
}

// The TCP connection to the peer: one line per message.
class Link {
public:
	explicit Link(int fd) : fd_(fd)
	{
		int one = 1;

		setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		timeout_ = env_int("TWO_HOST_MSG_TIMEOUT", 60);
	}
	~Link() { close(fd_); }
	Link(const Link &) = delete;
	Link &operator=(const Link &) = delete;

	void send(const std::string &msg)
	{
		std::string l = msg + "\n";
		size_t done = 0;

		while (done < l.size()) {
			ssize_t n = ::send(fd_, l.data() + done,
					   l.size() - done, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				throw PeerError(std::string("lost the connection to side ") +
						peer_side + " (send: " +
						std::strerror(errno) + ")");
			done += n;
		}
	}
	// Best effort, while failing.
	void abort(const std::string &why)
	{
		std::string l = "ABORT " + why + "\n";

		(void)!::send(fd_, l.data(), l.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	std::string recv()
	{
		auto end = std::chrono::steady_clock::now() +
			   std::chrono::seconds(timeout_);

		for (;;) {
			size_t nl = buf_.find('\n');

			if (nl != std::string::npos) {
				std::string l = buf_.substr(0, nl);

				buf_.erase(0, nl + 1);
				if (!l.compare(0, 6, "ABORT "))
					throw PeerError(std::string("side ") +
							peer_side + " failed: " +
							l.substr(6));
				return l;
			}
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
				end - std::chrono::steady_clock::now()).count();
			if (left <= 0)
				throw PeerError(std::string("no message from side ") +
						peer_side + " within " +
						std::to_string(timeout_) +
						" s: it is stuck or gone");
			pollfd p{fd_, POLLIN, 0};
			int r = poll(&p, 1, static_cast<int>(left));
			if (r < 0 && errno != EINTR)
				fail("poll on the peer connection", errno);
			if (r <= 0)
				continue;
			char tmp[4096];
			ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				throw PeerError(std::string("side ") + peer_side +
						" closed the connection" +
						(n < 0 ? std::string(" (") +
						 std::strerror(errno) + ")" : ""));
			buf_.append(tmp, n);
		}
	}
	// A message that must start with tag; returns its fields after it.
	std::vector<std::string> expect(const std::string &tag)
	{
		std::string l = recv();
		std::istringstream in(l);
		std::vector<std::string> f;
		std::string w;

		in >> w;
		if (w != tag)
			throw PeerError(std::string("protocol: side ") + peer_side +
					" sent \"" + l + "\", expected " + tag);
		while (in >> w)
			f.push_back(w);
		return f;
	}
	// Both sides reach the same point.
	void sync(const std::string &tag)
	{
		send(tag);
		expect(tag);
	}

private:
	int fd_;
	int timeout_;
	std::string buf_;
};

Link *link_to_peer;
char deadline_msg[160];

void on_deadline(int)
{
	(void)!write(1, deadline_msg, std::strlen(deadline_msg));
	_exit(3);
}

int wait_fd(int fd, short ev, int ms)
{
	pollfd p{fd, ev, 0};
	int r = poll(&p, 1, ms);

	return r < 0 ? -errno : r;
}

// A: listen and accept one connection.
int tcp_accept(uint16_t port, int secs)
{
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	sockaddr_in sa{};

	if (ls < 0)
		fail("socket", errno);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (bind(ls, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) ||
	    listen(ls, 1))
		fail("bind/listen on TCP port " + std::to_string(port), errno);
	line("waiting up to %d s for side B on TCP port %u", secs, port);
	int r = wait_fd(ls, POLLIN, secs * 1000);
	if (r <= 0) {
		close(ls);
		throw PeerError("side B did not connect within " +
				std::to_string(secs) + " s");
	}
	int fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
	int err = errno;
	close(ls);
	if (fd < 0)
		fail("accept", err);
	return fd;
}

// B: connect, retrying while A boots.
int tcp_connect(const char *ip, uint16_t port, int secs)
{
	sockaddr_in sa{};
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(secs);
	std::string last = "no attempt";

	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		fail(std::string("not an IPv4 address: ") + ip);
	line("connecting to side A at %s:%u (up to %d s)", ip, port, secs);
	while (std::chrono::steady_clock::now() < end) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		if (fd < 0)
			fail("socket", errno);
		int r = connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa));
		if (r && errno == EINPROGRESS && wait_fd(fd, POLLOUT, 3000) > 0) {
			int err = 0;
			socklen_t l = sizeof(err);

			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
			r = err ? -1 : 0;
			errno = err ? err : ETIMEDOUT;
		} else if (r) {
			if (errno == EINPROGRESS)
				errno = ETIMEDOUT;
		}
		if (!r) {
			int fl = fcntl(fd, F_GETFL);

			fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
			return fd;
		}
		last = std::strerror(errno);
		close(fd);
		usleep(500 * 1000);
	}
	throw PeerError("could not connect to side A at " + std::string(ip) +
			" within " + std::to_string(secs) + " s (last: " + last +
			")");
}

std::string gid_hex(const ibv_gid &g)
{
	char s[33];

	for (int i = 0; i < 16; i++)
		std::snprintf(s + 2 * i, 3, "%02x", g.raw[i]);
	return s;
}

ibv_gid gid_parse(const std::string &s)
{
	ibv_gid g{};

	if (s.size() != 32)
		throw PeerError("bad GID from the peer: " + s);
	for (int i = 0; i < 16; i++)
		g.raw[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2),
							   nullptr, 16));
	return g;
}

uint64_t num(const std::string &s)
{
	return std::stoull(s, nullptr, 0);
}

// The RC QP to the peer: a fresh one on both sides at the start and after
// every completion in error (which moves both QPs to the error state).
void renew(End &e, Link &l, bool first = false)
{
	ibv_wc wc[16];

	if (!first) {
		while (ibv_poll_cq(e.cq, 16, wc) > 0)
			;
		e.new_qp(16);
	}
	l.send("QP " + std::to_string(e.qp->qp_num) + " " + gid_hex(e.gid));
	auto f = l.expect("QP");
	if (f.size() != 2)
		throw PeerError("protocol: bad QP message");
	e.connect_to(static_cast<uint32_t>(num(f[0])), gid_parse(f[1]), 1,
		     kAccessAll, kAckTimeout);
	l.sync("RTS");
}

void post(End &e, ibv_wr_opcode op, uint64_t laddr, uint32_t len,
	  uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t add = 0,
	  uint64_t swap = 0)
{
	ibv_sge sge{laddr, len, lkey};
	ibv_send_wr wr{}, *bad;

	wr.wr_id = op;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
		wr.wr.atomic.swap = swap;
	} else if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	int err = ibv_post_send(e.qp, &wr, &bad);
	if (err)
		fail("ibv_post_send", err);
}

void post_recv(End &e, uint64_t laddr, uint32_t len, uint32_t lkey)
{
	ibv_sge sge{laddr, len, lkey};
	ibv_recv_wr wr{}, *bad;

	wr.wr_id = 0x7265637600000000ULL;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	int err = ibv_post_recv(e.qp, &wr, &bad);
	if (err)
		fail("ibv_post_recv", err);
}

// The next completion (60 s at most), with its time in ms.
ibv_wc complete(End &e, long long *ms = nullptr)
{
	ibv_wc wc{};
	auto t0 = std::chrono::steady_clock::now();

	e.wait(&wc, 1);
	if (ms)
		*ms = std::chrono::duration_cast<std::chrono::milliseconds>(
			std::chrono::steady_clock::now() - t0).count();
	return wc;
}

const char *op_name(ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
		return "RDMA WRITE";
	case IBV_WR_RDMA_READ:
		return "RDMA READ";
	case IBV_WR_SEND:
		return "SEND";
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return "FETCH_ADD";
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return "CMP_SWP";
	default:
		return "?";
	}
}

// One signalled WR and its completion, whose status and wr_id must be as
// wanted.
void op_expect(End &e, ibv_wr_opcode op, uint64_t laddr, uint32_t len,
	       uint32_t lkey, uint64_t raddr, uint32_t rkey,
	       ibv_wc_status want, const std::string &what, uint64_t add = 0,
	       uint64_t swap = 0)
{
	long long ms;

	post(e, op, laddr, len, lkey, raddr, rkey, add, swap);
	ibv_wc wc = complete(e, &ms);
	// Retries exhausted: nothing answered on the wire.
	if (wc.status == IBV_WC_RETRY_EXC_ERR && want != wc.status)
		throw PeerError(what + ": " + op_name(op) +
				" completes with IBV_WC_RETRY_EXC_ERR after " +
				std::to_string(ms) + " ms: side " + peer_side +
				" does not answer on the wire");
	check(wc.status == want && wc.wr_id == op,
	      what + ": " + op_name(op) + " completes with " +
	      status_name(wc.status) +
	      (wc.status == want ? "" : ", want " + status_name(want)) +
	      (wc.wr_id == op ? "" : " (another WR's completion)") + " (" +
	      std::to_string(ms) + " ms)");
}

// --- side A: the dma-buf's owner -------------------------------------------

// A dma-buf MR from ibv_reg_dmabuf_mr() or the raw uverbs ioctl.
struct DmabufMr {
	ibv_mr *mr = nullptr;
	ibv_context *ctx = nullptr;
	uint32_t driver_id = 0;
	uint32_t handle = 0, lkey = 0, rkey = 0;
	bool live = false;
};

int raw_ioctl(ibv_context *ctx, uint32_t driver_id, uint16_t object,
	      uint16_t method, ib_uverbs_attr *attrs, unsigned int n)
{
	union {
		ib_uverbs_ioctl_hdr hdr;
		uint8_t bytes[sizeof(ib_uverbs_ioctl_hdr) +
			      12 * sizeof(ib_uverbs_attr)];
	} u{};

	if (n > 12) {
		errno = E2BIG;
		return -1;
	}
	u.hdr.length = sizeof(u.hdr) + n * sizeof(*attrs);
	u.hdr.object_id = object;
	u.hdr.method_id = method;
	u.hdr.num_attrs = n;
	u.hdr.driver_id = driver_id;
	std::memcpy(u.hdr.attrs, attrs, n * sizeof(*attrs));
	int ret = ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &u.hdr);
	std::memcpy(attrs, u.hdr.attrs, n * sizeof(*attrs));
	return ret;
}

// libibverbs keeps the driver id to itself; the kernel refuses a wrong one
// with EINVAL before anything else, so a harmless query finds it.
uint32_t raw_driver_id(ibv_context *ctx)
{
	auto is = [ctx](uint32_t id) {
		return !raw_ioctl(ctx, id, UVERBS_OBJECT_DEVICE,
				  UVERBS_METHOD_QUERY_CONTEXT, nullptr, 0) ||
		       errno != EINVAL;
	};

	if (is(RDMA_DRIVER_RXE))
		return RDMA_DRIVER_RXE;
	for (uint32_t id = 0; id < 64; id++)
		if (is(id))
			return id;
	fail("raw ioctl: no driver id works");
}

DmabufMr reg_dmabuf(End &e, int fd, uint64_t len, uint64_t iova, bool raw)
{
	DmabufMr m;

	m.ctx = e.ctx;
	if (!raw) {
		m.mr = ibv_reg_dmabuf_mr(e.pd, 0, len, iova, fd, kAccessAll);
		if (m.mr) {
			m.handle = m.mr->handle;
			m.lkey = m.mr->lkey;
			m.rkey = m.mr->rkey;
			m.live = true;
			return m;
		}
		if (errno != EOPNOTSUPP)
			fail("ibv_reg_dmabuf_mr", errno);
		line("this rdma-core's provider has no reg_dmabuf_mr: raw UVERBS_METHOD_REG_DMABUF_MR");
	}
	uint32_t lkey = 0, rkey = 0, fd32 = fd, access32 = kAccessAll;
	uint64_t offset = 0;
	ib_uverbs_attr a[9]{};

	a[0].attr_id = UVERBS_ATTR_REG_DMABUF_MR_HANDLE;
	a[1].attr_id = UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE;
	a[1].data = e.pd->handle;
	a[2].attr_id = UVERBS_ATTR_REG_DMABUF_MR_OFFSET;
	a[2].len = sizeof(offset);
	a[2].data = offset;
	a[3].attr_id = UVERBS_ATTR_REG_DMABUF_MR_LENGTH;
	a[3].len = sizeof(len);
	a[3].data = len;
	a[4].attr_id = UVERBS_ATTR_REG_DMABUF_MR_IOVA;
	a[4].len = sizeof(iova);
	a[4].data = iova;
	// 4-byte inline attributes are read from the start of the field.
	a[5].attr_id = UVERBS_ATTR_REG_DMABUF_MR_FD;
	a[5].len = sizeof(fd32);
	std::memcpy(&a[5].data, &fd32, sizeof(fd32));
	a[6].attr_id = UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS;
	a[6].len = sizeof(access32);
	std::memcpy(&a[6].data, &access32, sizeof(access32));
	a[7].attr_id = UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY;
	a[7].len = sizeof(lkey);
	a[7].data = reinterpret_cast<uintptr_t>(&lkey);
	a[8].attr_id = UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY;
	a[8].len = sizeof(rkey);
	a[8].data = reinterpret_cast<uintptr_t>(&rkey);
	for (auto &x : a)
		x.flags = UVERBS_ATTR_F_MANDATORY;
	m.driver_id = raw_driver_id(e.ctx);
	if (raw_ioctl(e.ctx, m.driver_id, UVERBS_OBJECT_MR,
		      UVERBS_METHOD_REG_DMABUF_MR, a, 9))
		fail("UVERBS_METHOD_REG_DMABUF_MR", errno);
	m.handle = static_cast<uint32_t>(a[0].data);
	m.lkey = lkey;
	m.rkey = rkey;
	m.live = true;
	return m;
}

int dereg_dmabuf(DmabufMr &m)
{
	int ret;

	if (m.mr) {
		ret = ibv_dereg_mr(m.mr);
	} else {
		ib_uverbs_attr a{};

		a.attr_id = UVERBS_ATTR_DESTROY_MR_HANDLE;
		a.flags = UVERBS_ATTR_F_MANDATORY;
		a.data = m.handle;
		ret = raw_ioctl(m.ctx, m.driver_id, UVERBS_OBJECT_MR,
				UVERBS_METHOD_MR_DESTROY, &a, 1) ? errno : 0;
	}
	if (!ret)
		m.live = false;
	return ret;
}

// Side A's view of one exporter buffer: what every byte must be.
struct Owned {
	Mock &mock;
	std::vector<uint8_t> model = std::vector<uint8_t>(kBufSize);

	explicit Owned(Mock &m) : mock(m) {}
	void write(uint64_t off, uint64_t len, unsigned int seed)
	{
		fill(model, off, len, seed, off);
		mock.rw(off, model.data() + off, len, true);
	}
	// All of the buffer, through the exporter.
	void verify(const std::string &what)
	{
		std::vector<uint8_t> got(kBufSize);

		mock.rw(0, got.data(), kBufSize, false);
		std::string d = first_diff(model, got.data(), kBufSize);
		check(d.empty(), what + (d.empty() ? "" : ": " + d));
	}
	void revoke(const std::string &what)
	{
		auto t0 = std::chrono::steady_clock::now();

		mock.revoke(DMABUF_MOCK_REVOKE_POISON);
		auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
			std::chrono::steady_clock::now() - t0).count();
		dmabuf_mock_query q = mock.query();
		char buf[256];

		std::snprintf(buf, sizeof(buf),
			      "%s: REVOKE (poison) returned after %lld ms; revoked %d, attachments %u, pins %u, maps %u, vmaps %u, invalidates %u",
			      what.c_str(), static_cast<long long>(ms),
			      !!(q.state & DMABUF_MOCK_STATE_REVOKED),
			      q.attachments, q.pins, q.maps, q.vmaps,
			      q.invalidates);
		check((q.state & DMABUF_MOCK_STATE_REVOKED) &&
		      q.attachments == 1 && q.pins == 0 && q.maps == 0 &&
		      q.vmaps == 0 && q.invalidates == 1, buf);
		std::fill(model.begin(), model.end(), DMABUF_MOCK_POISON);
		verify(what + ": the buffer holds only poison");
	}
};

void mr_gone(Owned &o, DmabufMr &m, const std::string &what)
{
	int err = dereg_dmabuf(m);

	check(!err, what + ": dereg of the revoked MR works" +
	      (err ? std::string(": ") + std::strerror(err) : ""));
	dmabuf_mock_query q = o.mock.query();
	check(q.attachments == 0 && q.pins == 0 && q.vmaps == 0,
	      what + ": the exporter has no attachment, pin or vmap left");
	o.mock.close_buf();
}

std::string kernel_release()
{
	utsname u{};

	uname(&u);
	return u.release;
}

// Each side says which kernel it runs.
void hello(Link &l)
{
	l.send("HELLO " + kernel_release());
	auto h = l.expect("HELLO");
	line("side %c runs kernel %s", peer_side, h.empty() ? "?" : h[0].c_str());
}

int side_a(const char *dev, Link &l, End &e)
{
	// Offsets in the dma-buf: unaligned where the operation allows.
	constexpr uint64_t kW = 4096 + 7, kR = 0x20000 + 3, kS = 0x40000 + 1,
			   kAt = 0x60000 + 8 * 5;
	constexpr uint64_t kV = 0x0123456789abcdefULL, kAdd = 0x1111,
			   kSwap = 0xfeedfacecafebeefULL;
	bool raw = env_int("TWO_HOST_RAW", 0) == 1;
	Mock mock;
	uint64_t buffers0 = mock.stats().buffers;

	hello(l);
	auto plain = l.expect("PLAIN");
	uint64_t b_addr = num(plain.at(0));
	uint32_t b_rkey = static_cast<uint32_t>(num(plain.at(1)));

	// ---- forward: B's traffic on A's dma-buf MR, then the revoke.
	line("== forward: B -> A's dma-buf MR (%s)", dev);
	mock.create(kBufSize);
	Owned o(mock);
	o.write(0, kBufSize, 1);
	DmabufMr m = reg_dmabuf(e, mock.fd(), kBufSize, kIova, raw);
	line("dma-buf MR: 1 MiB at iova %#" PRIx64 ", lkey %#x rkey %#x (%s)",
	     kIova, m.lkey, m.rkey, m.mr ? "ibv_reg_dmabuf_mr" : "raw ioctl");
	l.send("DMABUF " + std::to_string(kIova) + " " + std::to_string(m.rkey));
	renew(e, l, true);

	l.expect("WROTE");	// B: 64 KiB at kW, seed 11
	fill(o.model, kW, kXfer, 11, kW);
	o.verify("WRITE B->A 64 KiB at +" + std::to_string(kW) +
		 ": the dma-buf holds B's data, nothing else changed");
	l.send("CHECKED");

	l.expect("WROTE");	// B: the whole MegaByte, seed 12
	fill(o.model, 0, kBufSize, 12, 0);
	o.verify("WRITE B->A 1 MiB: the dma-buf holds B's data");
	l.send("CHECKED");

	o.write(kR, kXfer, 13);
	l.send("FILLED " + std::to_string(kR));
	l.expect("READ");
	o.verify("READ B<-A 64 KiB: the dma-buf is unchanged");
	l.send("CHECKED");

	post_recv(e, kIova + kS, kXfer, m.lkey);
	l.send("RECV");
	l.expect("SENT");
	ibv_wc wc = complete(e);
	check(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.byte_len == kXfer,
	      "SEND B->A: RECV into the dma-buf completes with " +
	      status_name(wc.status) + ", " + std::to_string(wc.byte_len) +
	      " bytes");
	fill(o.model, kS, kXfer, 14, kS);
	o.verify("SEND B->A 64 KiB: the dma-buf holds B's data");
	l.send("CHECKED");

	std::memcpy(o.model.data() + kAt, &kV, 8);
	mock.rw(kAt, o.model.data() + kAt, 8, true);
	l.send("FILLED " + std::to_string(kAt));
	l.expect("ATOMICS");
	std::memcpy(o.model.data() + kAt, &kSwap, 8);
	o.verify("FETCH_ADD, CMP_SWP (hit), CMP_SWP (miss) B->A: the word is the swap value, nothing else changed");
	l.send("CHECKED");

	o.revoke("forward");
	l.send("REVOKED");
	for (int i = 0; i < 4; i++) {
		auto d = l.expect("DONE");
		o.verify("after B's " + d.at(0) +
			 " with the old rkey: the dma-buf holds only poison");
		renew(e, l);
	}
	post_recv(e, kIova + kS, kXfer, m.lkey);
	l.send("RECV");
	l.expect("SENT");
	wc = complete(e);
	check(wc.status == IBV_WC_LOC_QP_OP_ERR,
	      "SEND B->A into a RECV on the revoked lkey: the RECV completes with " +
	      status_name(wc.status) +
	      (wc.status == IBV_WC_LOC_QP_OP_ERR ? "" :
	       ", want IBV_WC_LOC_QP_OP_ERR"));
	o.verify("after B's SEND into the revoked MR: the dma-buf holds only poison");
	l.send("CHECKED");
	renew(e, l);
	mr_gone(o, m, "forward");

	// ---- reverse: A's second dma-buf MR as the local buffer.
	constexpr uint64_t kLw = 0x1000 + 5, kLr = 0x30000 + 9, kLs = 0x50000 + 3,
			   kLa = 0x70000 + 8 * 3;
	constexpr uint64_t kBw = 0x2000 + 1, kBr = 0x40000 + 2, kBs = 0x60000 + 3,
			   kBa = 0x80000 + 8 * 7;
	line("== reverse: A's dma-buf MR as the local buffer of A's WRITE, READ, SEND, FETCH_ADD to B's plain MR");
	mock.create(kBufSize);
	Owned o2(mock);
	o2.write(0, kBufSize, 2);
	DmabufMr m2 = reg_dmabuf(e, mock.fd(), kBufSize, kIova, raw);
	line("dma-buf MR: 1 MiB at iova %#" PRIx64 ", lkey %#x rkey %#x",
	     kIova, m2.lkey, m2.rkey);

	op_expect(e, IBV_WR_RDMA_WRITE, kIova + kLw, kXfer, m2.lkey,
		  b_addr + kBw, b_rkey, IBV_WC_SUCCESS, "WRITE A->B from the dma-buf");
	l.send("WROTE " + std::to_string(kBw) + " 2 " + std::to_string(kLw));
	l.expect("CHECKED");

	l.expect("FILLED");	// B: kBr, seed 21
	op_expect(e, IBV_WR_RDMA_READ, kIova + kLr, kXfer, m2.lkey,
		  b_addr + kBr, b_rkey, IBV_WC_SUCCESS, "READ A<-B into the dma-buf");
	fill(o2.model, kLr, kXfer, 21, kBr);
	o2.verify("READ A<-B 64 KiB: the dma-buf holds B's data, nothing else changed");
	l.send("READ");
	l.expect("CHECKED");

	l.expect("RECV");
	op_expect(e, IBV_WR_SEND, kIova + kLs, kXfer, m2.lkey, 0, 0,
		  IBV_WC_SUCCESS, "SEND A->B from the dma-buf");
	l.send("SENT " + std::to_string(kBs) + " 2 " + std::to_string(kLs));
	l.expect("CHECKED");

	l.expect("FILLED");	// B: kV at kBa
	op_expect(e, IBV_WR_ATOMIC_FETCH_AND_ADD, kIova + kLa, 8, m2.lkey,
		  b_addr + kBa, b_rkey, IBV_WC_SUCCESS,
		  "FETCH_ADD A->B, result into the dma-buf", kAdd);
	std::memcpy(o2.model.data() + kLa, &kV, 8);
	o2.verify("FETCH_ADD A->B: the dma-buf holds the old value, nothing else changed");
	l.send("ATOMIC " + std::to_string(kBa));
	l.expect("CHECKED");

	o2.revoke("reverse");
	l.send("REVOKED");

	op_expect(e, IBV_WR_RDMA_WRITE, kIova + kLw, kXfer, m2.lkey,
		  b_addr + kBw, b_rkey, IBV_WC_LOC_QP_OP_ERR,
		  "WRITE A->B from the revoked lkey");
	o2.verify("after WRITE from the revoked lkey: the dma-buf holds only poison");
	l.send("DONE WRITE");
	l.expect("CHECKED");
	renew(e, l);

	op_expect(e, IBV_WR_RDMA_READ, kIova + kLr, kXfer, m2.lkey,
		  b_addr + kBr, b_rkey, IBV_WC_LOC_PROT_ERR,
		  "READ A<-B into the revoked lkey");
	o2.verify("after READ into the revoked lkey: the dma-buf holds only poison");
	l.send("DONE READ");
	l.expect("CHECKED");
	renew(e, l);

	l.expect("RECV");
	op_expect(e, IBV_WR_SEND, kIova + kLs, kXfer, m2.lkey, 0, 0,
		  IBV_WC_LOC_QP_OP_ERR, "SEND A->B from the revoked lkey");
	o2.verify("after SEND from the revoked lkey: the dma-buf holds only poison");
	l.send("DONE SEND");
	l.expect("CHECKED");
	renew(e, l);

	l.expect("FILLED");	// B: kV at kBa again
	op_expect(e, IBV_WR_ATOMIC_FETCH_AND_ADD, kIova + kLa, 8, m2.lkey,
		  b_addr + kBa, b_rkey, IBV_WC_LOC_PROT_ERR,
		  "FETCH_ADD A->B, result into the revoked lkey", kAdd);
	o2.verify("after FETCH_ADD into the revoked lkey: the dma-buf holds only poison");
	l.send("DONE FETCH_ADD");
	l.expect("CHECKED");
	renew(e, l);
	mr_gone(o2, m2, "reverse");
	check(mock.stats().buffers == buffers0,
	      "closing the dma-bufs freed the exporter's buffers");
	l.sync("BYE");
	return 0;
}

// --- side B: the unpatched peer, a plain MR only ---------------------------

struct Plain {
	uint8_t *buf;
	ibv_mr *mr;
	std::vector<uint8_t> model = std::vector<uint8_t>(kBufSize);

	explicit Plain(End &e)
	{
		buf = static_cast<uint8_t *>(aligned_alloc(4096, kBufSize));
		if (!buf)
			fail("aligned_alloc");
		fill(model, 0, kBufSize, 3, 0);
		std::memcpy(buf, model.data(), kBufSize);
		mr = ibv_reg_mr(e.pd, buf, kBufSize, kAccessAll);
		if (!mr)
			fail("ibv_reg_mr", errno);
	}
	~Plain()
	{
		ibv_dereg_mr(mr);
		free(buf);
	}
	uint64_t addr(uint64_t off) const
	{
		return reinterpret_cast<uintptr_t>(buf) + off;
	}
	void set(uint64_t off, const void *p, size_t len)
	{
		std::memcpy(model.data() + off, p, len);
		std::memcpy(buf + off, p, len);
	}
	void verify(const std::string &what)
	{
		std::string d = first_diff(model, buf, kBufSize);

		check(d.empty(), what + (d.empty() ? "" : ": " + d));
	}
};

int side_b(Link &l, End &e)
{
	constexpr uint64_t kLoc = 0x10000, kRes = 0x90000;
	constexpr uint64_t kV = 0x0123456789abcdefULL, kAdd = 0x1111,
			   kSwap = 0xfeedfacecafebeefULL;
	Plain p(e);
	std::vector<uint8_t> canary(kXfer, kCanary);

	hello(l);
	l.send("PLAIN " + std::to_string(p.addr(0)) + " " +
	       std::to_string(p.mr->rkey));
	auto d = l.expect("DMABUF");
	uint64_t iova = num(d.at(0));
	uint32_t rkey = static_cast<uint32_t>(num(d.at(1)));
	line("== forward: WRITE, READ, SEND, atomics on A's dma-buf MR (rkey %#x)",
	     rkey);
	renew(e, l, true);

	// WRITE 64 KiB at A's +4103, seed 11; then all of it, seed 12.
	constexpr uint64_t kW = 4096 + 7;
	std::vector<uint8_t> tmp(kBufSize);
	fill(tmp, 0, kXfer, 11, kW);
	p.set(kLoc, tmp.data(), kXfer);
	op_expect(e, IBV_WR_RDMA_WRITE, p.addr(kLoc), kXfer, p.mr->lkey,
		  iova + kW, rkey, IBV_WC_SUCCESS, "WRITE B->A 64 KiB");
	l.send("WROTE");
	l.expect("CHECKED");

	fill(tmp, 0, kBufSize, 12, 0);
	p.set(0, tmp.data(), kBufSize);
	op_expect(e, IBV_WR_RDMA_WRITE, p.addr(0), kBufSize, p.mr->lkey, iova,
		  rkey, IBV_WC_SUCCESS, "WRITE B->A 1 MiB");
	l.send("WROTE");
	l.expect("CHECKED");

	uint64_t kR = num(l.expect("FILLED").at(0));
	p.set(kLoc, canary.data(), kXfer);
	op_expect(e, IBV_WR_RDMA_READ, p.addr(kLoc), kXfer, p.mr->lkey,
		  iova + kR, rkey, IBV_WC_SUCCESS, "READ B<-A 64 KiB");
	fill(p.model, kLoc, kXfer, 13, kR);
	p.verify("READ B<-A 64 KiB: B holds A's data, nothing else changed");
	l.send("READ");
	l.expect("CHECKED");

	constexpr uint64_t kS = 0x40000 + 1;
	l.expect("RECV");
	fill(tmp, 0, kXfer, 14, kS);
	p.set(kLoc, tmp.data(), kXfer);
	op_expect(e, IBV_WR_SEND, p.addr(kLoc), kXfer, p.mr->lkey, 0, 0,
		  IBV_WC_SUCCESS, "SEND B->A 64 KiB into a RECV on the dma-buf");
	l.send("SENT");
	l.expect("CHECKED");

	uint64_t kAt = num(l.expect("FILLED").at(0));
	uint64_t r;
	p.set(kRes, canary.data(), 8);
	op_expect(e, IBV_WR_ATOMIC_FETCH_AND_ADD, p.addr(kRes), 8, p.mr->lkey,
		  iova + kAt, rkey, IBV_WC_SUCCESS, "FETCH_ADD B->A", kAdd);
	std::memcpy(&r, p.buf + kRes, 8);
	check(r == kV, "FETCH_ADD B->A returns the old value");
	p.set(kRes, &kV, 8);
	op_expect(e, IBV_WR_ATOMIC_CMP_AND_SWP, p.addr(kRes), 8, p.mr->lkey,
		  iova + kAt, rkey, IBV_WC_SUCCESS, "CMP_SWP B->A (hit)",
		  kV + kAdd, kSwap);
	std::memcpy(&r, p.buf + kRes, 8);
	check(r == kV + kAdd, "CMP_SWP B->A (hit) returns the added value");
	op_expect(e, IBV_WR_ATOMIC_CMP_AND_SWP, p.addr(kRes), 8, p.mr->lkey,
		  iova + kAt, rkey, IBV_WC_SUCCESS, "CMP_SWP B->A (miss)",
		  kV, 0);
	std::memcpy(&r, p.buf + kRes, 8);
	check(r == kSwap, "CMP_SWP B->A (miss) returns the swapped value");
	uint64_t swapped = kSwap;
	p.set(kRes, &swapped, 8);
	p.verify("atomics B->A: B's buffer holds only the results");
	l.send("ATOMICS");
	l.expect("CHECKED");

	l.expect("REVOKED");
	line("== A revoked: every access with the old rkey must fail");
	struct {
		ibv_wr_opcode op;
		uint32_t len;
	} after[] = {
		{ IBV_WR_RDMA_WRITE, kXfer }, { IBV_WR_RDMA_READ, kXfer },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, 8 },
		{ IBV_WR_ATOMIC_CMP_AND_SWP, 8 },
	};
	for (auto &a : after) {
		bool atomic = a.len == 8;

		p.set(kLoc, canary.data(), kXfer);
		op_expect(e, a.op, p.addr(kLoc), a.len, p.mr->lkey,
			  iova + (atomic ? kAt : kW), rkey,
			  IBV_WC_REM_ACCESS_ERR,
			  "B->A with the old rkey after revoke", 1, 0);
		p.verify(std::string("after ") + op_name(a.op) +
			 " with the old rkey: nothing landed in B's buffer");
		std::string name = op_name(a.op);
		for (auto &c : name)
			if (c == ' ')
				c = '_';
		l.send("DONE " + name);
		renew(e, l);
	}
	l.expect("RECV");
	op_expect(e, IBV_WR_SEND, p.addr(kLoc), kXfer, p.mr->lkey, 0, 0,
		  IBV_WC_REM_OP_ERR,
		  "SEND B->A into a RECV on the revoked lkey");
	l.send("SENT");
	l.expect("CHECKED");
	renew(e, l);

	// ---- reverse: A's WRITE, READ, SEND, FETCH_ADD with its dma-buf as
	// the local buffer, into this plain MR.
	line("== reverse: A's dma-buf MR as the local buffer, B's plain MR as the target");
	auto w = l.expect("WROTE");	// offset here, seed, offset there
	fill(p.model, num(w.at(0)), kXfer, static_cast<unsigned>(num(w.at(1))),
	     num(w.at(2)));
	p.verify("WRITE A->B 64 KiB from the dma-buf: B holds A's data, nothing else changed");
	l.send("CHECKED");

	constexpr uint64_t kBr = 0x40000 + 2, kBa = 0x80000 + 8 * 7;
	fill(tmp, 0, kXfer, 21, kBr);
	p.set(kBr, tmp.data(), kXfer);
	l.send("FILLED");
	l.expect("READ");
	p.verify("READ A<-B 64 KiB: B's buffer is unchanged");
	l.send("CHECKED");

	constexpr uint64_t kBs = 0x60000 + 3;
	post_recv(e, p.addr(kBs), kXfer, p.mr->lkey);
	l.send("RECV");
	auto s = l.expect("SENT");
	ibv_wc wc = complete(e);
	check(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.byte_len == kXfer,
	      "SEND A->B from the dma-buf: the RECV completes with " +
	      status_name(wc.status) + ", " + std::to_string(wc.byte_len) +
	      " bytes");
	fill(p.model, num(s.at(0)), kXfer, static_cast<unsigned>(num(s.at(1))),
	     num(s.at(2)));
	p.verify("SEND A->B 64 KiB: B holds A's data, nothing else changed");
	l.send("CHECKED");

	p.set(kBa, &kV, 8);
	l.send("FILLED");
	l.expect("ATOMIC");
	uint64_t added = kV + kAdd;
	std::memcpy(p.model.data() + kBa, &added, 8);
	p.verify("FETCH_ADD A->B: B's word is the sum, nothing else changed");
	l.send("CHECKED");

	l.expect("REVOKED");
	line("== A revoked: A's own WRITE, READ, SEND, FETCH_ADD on the old lkey must fail locally");
	d = l.expect("DONE");
	p.verify("after A's WRITE from the revoked lkey: nothing landed in B's buffer");
	l.send("CHECKED");
	renew(e, l);
	d = l.expect("DONE");
	p.verify("after A's READ into the revoked lkey: B's buffer is unchanged");
	l.send("CHECKED");
	renew(e, l);

	post_recv(e, p.addr(kBs), kXfer, p.mr->lkey);
	l.send("RECV");
	d = l.expect("DONE");
	ibv_wc none[4];
	int n = ibv_poll_cq(e.cq, 4, none);
	check(n == 0, "after A's SEND from the revoked lkey: B's RECV has not completed (" +
	      std::to_string(n) + " completions)");
	p.verify("after A's SEND from the revoked lkey: nothing landed in B's buffer");
	l.send("CHECKED");
	renew(e, l);

	p.set(kBa, &kV, 8);
	l.send("FILLED");
	d = l.expect("DONE");
	// The responder executes the atomic; only A's result write fails.
	std::memcpy(p.model.data() + kBa, &added, 8);
	p.verify("after A's FETCH_ADD into the revoked lkey: B executed it (the word is the sum), nothing else changed");
	l.send("CHECKED");
	renew(e, l);
	l.sync("BYE");
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 5 ||
	    (std::strcmp(argv[1], "a") && std::strcmp(argv[1], "b"))) {
		std::fprintf(stderr, "usage: %s a|b DEVICE PEER_IPV4 [PORT]\n",
			     argv[0]);
		return 2;
	}
	me = argv[1][0] == 'a' ? 'A' : 'B';
	peer_side = me == 'A' ? 'B' : 'A';
	uint16_t port = argc == 5 ? static_cast<uint16_t>(std::atoi(argv[4])) :
				    18515;
	int deadline = env_int("TWO_HOST_DEADLINE", 480);
	std::snprintf(deadline_msg, sizeof(deadline_msg),
		      "two-host %c: FAILED (this side, %c): not done within TWO_HOST_DEADLINE=%d s\n",
		      me, me, deadline);
	signal(SIGALRM, on_deadline);
	alarm(deadline);
	auto t0 = std::chrono::steady_clock::now();
	std::unique_ptr<Link> l;

	try {
		line("kernel %s, device %s, peer %s", kernel_release().c_str(),
		     argv[2], argv[3]);
		End e(argv[2], 16);
		int connect_secs = env_int("TWO_HOST_CONNECT_TIMEOUT", 180);
		int fd = me == 'A' ? tcp_accept(port, connect_secs) :
				     tcp_connect(argv[3], port, connect_secs);
		l = std::make_unique<Link>(fd);
		link_to_peer = l.get();
		line("connected to side %c", peer_side);
		if (me == 'A')
			side_a(argv[2], *l, e);
		else
			side_b(*l, e);
	} catch (const PeerError &ex) {
		line("FAILED (peer %c): %s", peer_side, ex.what());
		return 1;
	} catch (const std::exception &ex) {
		line("FAILED (this side, %c): %s", me, ex.what());
		if (link_to_peer)
			link_to_peer->abort(std::string(ex.what()));
		return 1;
	}
	auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(
		std::chrono::steady_clock::now() - t0).count() / 1000.0;
	line("PASSED: %d checks in %.1f s", checks, secs);
	return 0;
}
