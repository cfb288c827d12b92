// SPDX-License-Identifier: GPL-2.0
//
// revoke_bench: what revocable dma-buf MRs cost, how revoke scales, and what
// they save, measured as A/B pairs in one process.
//
// usage: revoke_bench [--sections abcde] [--pairs N] [--pin 0|1]
//                     [--only SIZE|N] [--traffic-only 0|1]
//                     [--trace-marker 0|1] [--raw FILE] DEVICE PEER_DEVICE
//
// --only runs one message/MR size (a, c, e) or MR count (b) only;
// --traffic-only 1 runs only section b's REVOKEs under traffic (both for
// profiles); --trace-marker 1 writes a line naming each sample to ftrace's
// trace_marker before it, to tell traced calls apart. --pin 1 runs the measuring thread on CPU 0 and the traffic thread of
// section b on CPU 1 (keep the kernel's unbound work off CPU 0 too, e.g.
// /sys/devices/virtual/workqueue/cpumask), so that revoke under traffic is
// not slowed by sharing a CPU with the traffic.
//
// DEVICE holds the memory under test (the responder), PEER_DEVICE moves the
// data (the requester); two rxe devices joined by a veth pair, or two ports
// of real hardware. The dma-buf is a dmabuf_mock buffer (system pages).
//
// Every measurement is a pair: A and B run back to back (A B, then B A in
// the next pair, so that neither always goes first), many pairs. One line
// per sample goes to the raw CSV (default stdout):
//   seq,section,case,param,variant,pair,wall_ns,thread_ns,busy_ns,bytes,ops
// seq numbers the samples; each sample's timed region is bracketed by the
// instruction markers of insn_marker.h, so a QEMU run with the markcount
// plugin logs the guest instructions of sample seq as its seq-th
// begin/end pair. thread_ns is the CPU time of the measuring thread,
// busy_ns the guest's non-idle CPU time over all CPUs (/proc/stat, in
// clock ticks). scripts/bench-report.py turns the samples into the
// per-pair ratios, medians, interquartile ranges, table, CSV and plot.
//
// Sections:
//  a  RDMA WRITE and READ into/from a dma-buf MR vs a plain MR: bandwidth
//     (a window of 16 WRs in flight) and latency (one WR at a time),
//     64 B .. 4 MiB
//  b  REVOKE of 1, 10, 100, 1000 MRs on one buffer, idle and while the peer
//     streams WRITEs (64 KiB or 1 MiB) into one of them, vs deregistering
//     the same MRs
//  c  ibv_reg_dmabuf_mr vs ibv_reg_mr, 4 KiB .. 1 GiB; also with an
//     exporter that keeps its kernel mapping (DMABUF_MOCK_VMAP_EAGER)
//  d  dma-buf MR vs ODP MR: the first WRITE pass over fresh memory, then a
//     second pass (steady state); ODP with transparent huge pages as the
//     system has them, and with 4 KiB pages (MADV_NOHUGEPAGE)
//  e  RDMA WRITE into the dma-buf MR vs WRITE into a plain MR and memcpy
//     into the dma-buf through its mmap (the CPU bounce fallback)
// Progress and skipped sections go to stderr ("bench: ...").

#include <linux/dma-buf.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "insn_marker.h"
#include "rdma_util.h"

namespace {

using namespace rdma_util;

constexpr int kDepth = 16;	// WRs in flight for bandwidth
constexpr size_t kXferBuf = 4 << 20;

void pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fail("sched_setaffinity to CPU " + std::to_string(cpu), errno);
}

uint64_t now_ns(clockid_t clk)
{
	timespec ts;

	clock_gettime(clk, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// Non-idle CPU time of the whole guest, from /proc/stat's cpu line.
uint64_t busy_ns()
{
	static const long hz = sysconf(_SC_CLK_TCK);
	std::ifstream f("/proc/stat");
	std::string cpu;
	uint64_t v[8] = {};

	f >> cpu;
	for (auto &x : v)
		f >> x;
	// user nice system idle iowait irq softirq steal
	uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	return busy * (1000000000ull / hz);
}

class Recorder {
public:
	Recorder(std::FILE *out, bool trace_marker) : out_(out)
	{
		std::fprintf(out_, "seq,section,case,param,variant,pair,wall_ns,thread_ns,busy_ns,bytes,ops\n");
		if (trace_marker) {
			marker_ = open("/sys/kernel/tracing/trace_marker",
				       O_WRONLY | O_CLOEXEC);
			if (marker_ < 0)
				fail("open /sys/kernel/tracing/trace_marker", errno);
		}
	}
	~Recorder()
	{
		if (marker_ >= 0)
			close(marker_);
	}
	// Times fn() as one sample. fn returns the bytes it moved (0 if none).
	void sample(const char *section, const char *cs, uint64_t param,
		    const char *variant, int pair, uint64_t ops,
		    const std::function<uint64_t()> &fn)
	{
		if (marker_ >= 0) {
			// Labels what the kernel traces next (bench-ftrace.py).
			std::string m = "revoke_bench: seq=" + std::to_string(seq_) +
					" case=" + cs + " param=" +
					std::to_string(param) + " variant=" +
					variant + "\n";

			if (write(marker_, m.data(), m.size()) < 0)
				fail("write trace_marker", errno);
		}
		uint64_t b0 = busy_ns();
		uint64_t c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		uint64_t t0 = now_ns(CLOCK_MONOTONIC);

		INSN_MARK_BEGIN();
		uint64_t bytes = fn();
		INSN_MARK_END();
		uint64_t t1 = now_ns(CLOCK_MONOTONIC);
		uint64_t c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		uint64_t b1 = busy_ns();

		std::fprintf(out_, "%" PRIu64 ",%s,%s,%" PRIu64 ",%s,%d,%" PRIu64
			     ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
			     seq_++, section, cs, param, variant, pair, t1 - t0,
			     c1 - c0, b1 - b0, bytes, ops);
		std::fflush(out_);
	}

private:
	std::FILE *out_;
	uint64_t seq_ = 0;
	int marker_ = -1;
};

// Runs a() and b() as one pair, alternating which goes first.
void pair_ab(int pair, const std::function<void()> &a,
	     const std::function<void()> &b)
{
	if (pair % 2) {
		b();
		a();
	} else {
		a();
		b();
	}
}

struct Buffer {
	void *p = nullptr;
	size_t len = 0;

	explicit Buffer(size_t n, bool touch = true) : len(n)
	{
		p = mmap(nullptr, n, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			fail("mmap", errno);
		if (touch)
			std::memset(p, 0x5a, n);
	}
	~Buffer() { munmap(p, len); }
	Buffer(const Buffer &) = delete;
	Buffer &operator=(const Buffer &) = delete;
};

ibv_mr *reg_plain(ibv_pd *pd, void *p, size_t len, int access = kAccess)
{
	ibv_mr *mr = ibv_reg_mr(pd, p, len, access);

	if (!mr)
		fail("ibv_reg_mr", errno);
	return mr;
}

ibv_mr *reg_dmabuf(ibv_pd *pd, Mock &m, size_t len)
{
	ibv_mr *mr = ibv_reg_dmabuf_mr(pd, 0, len, 0, m.fd(), kAccess);

	if (!mr)
		fail("ibv_reg_dmabuf_mr", errno);
	return mr;
}

void dereg(ibv_mr *mr)
{
	int err = ibv_dereg_mr(mr);

	if (err)
		fail("ibv_dereg_mr", err);
}

class Bench {
public:
	Bench(const char *dev, const char *peer, int pairs, bool pin,
	      uint64_t only, bool traffic_only, bool trace_marker,
	      std::FILE *raw)
		: dev_name_(dev), pairs_(pairs), pin_(pin),
		  only_(only), traffic_only_(traffic_only),
		  rec_(raw, trace_marker),
		  owner_(dev, kDepth, true), peer_(peer, kDepth, true),
		  local_(kXferBuf)
	{
		owner_.connect(peer_, kDepth);
		peer_.connect(owner_, kDepth);
		auto *b = static_cast<uint8_t *>(local_.p);
		for (size_t i = 0; i < local_.len; i++)
			b[i] = uint8_t(i * 7 + i / 4096 + 3);
		lmr_ = reg_plain(peer_.pd, local_.p, local_.len);
	}
	~Bench() { ibv_dereg_mr(lmr_); }

	void xfer();
	void revoke();
	void reg();
	void odp();
	void bounce();

private:
	// Moves total bytes with WRs of size len to (WRITE) or from (READ) the
	// first region bytes of the MR, at most depth in flight; every WR is
	// signalled and must succeed.
	uint64_t stream(ibv_wr_opcode op, const ibv_mr *mr, uint64_t region,
			uint32_t len, uint64_t total, int depth)
	{
		// A plain MR's iova is its address, the dma-buf MRs' is 0.
		uint64_t base = reinterpret_cast<uintptr_t>(mr->addr);
		uint64_t posted = 0, done = 0, off = 0;
		int inflight = 0;
		ibv_wc wc[kDepth];

		while (done < total) {
			while (inflight < depth && posted < total) {
				peer_.post(op, lmr_, off % kXferBuf, base + off,
					   mr->rkey, len);
				off = (off + len) % region;
				posted += len;
				inflight++;
			}
			int n = peer_.wait(wc, kDepth);
			for (int i = 0; i < n; i++)
				if (wc[i].status != IBV_WC_SUCCESS)
					fail(std::string("completion ") +
					     ibv_wc_status_str(wc[i].status));
			inflight -= n;
			done += uint64_t(n) * len;
		}
		return total;
	}

	void renew_qps()
	{
		owner_.new_qp(kDepth);
		peer_.new_qp(kDepth);
		owner_.connect(peer_, kDepth);
		peer_.connect(owner_, kDepth);
	}

	const char *dev_name_;
	int pairs_;
	bool pin_;
	uint64_t only_;		// if not 0, the one size or MR count to run
	bool traffic_only_;	// section b: only the REVOKEs under traffic
	bool skip(uint64_t param) const { return only_ && param != only_; }
	Recorder rec_;
	End owner_, peer_;
	Buffer local_;
	ibv_mr *lmr_ = nullptr;
};

// (a) bandwidth and latency, dma-buf MR vs plain MR on the responder.
void Bench::xfer()
{
	Mock mock;
	Buffer plain(kXferBuf);

	mock.create(kXferBuf);
	ibv_mr *pmr = reg_plain(owner_.pd, plain.p, plain.len);
	ibv_mr *dmr = reg_dmabuf(owner_.pd, mock, kXferBuf);

	for (uint32_t size = 64; size <= kXferBuf; size *= 4) {
		if (skip(size))
			continue;
		for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
			bool w = op == IBV_WR_RDMA_WRITE;
			// Bandwidth: 2 MiB in 2..256 WRs.
			uint64_t n = std::clamp<uint64_t>((2 << 20) / size,
							  2, 256);
			uint64_t total = n * size;
			// Latency: one WR at a time, 4 MiB in 2..32 WRs.
			uint64_t k = std::clamp<uint64_t>((4 << 20) / size,
							  2, 32);
			const char *bw = w ? "write_bw" : "read_bw";
			const char *lat = w ? "write_lat" : "read_lat";

			std::fprintf(stderr, "bench: a %s %u B\n", w ? "write" : "read", size);
			for (int p = 0; p < pairs_; p++) {
				auto run = [&](ibv_mr *mr, const char *v) {
					rec_.sample("a", bw, size, v, p, total / size, [&] {
						return stream(op, mr, kXferBuf, size,
							      total, kDepth);
					});
					rec_.sample("a", lat, size, v, p, k, [&] {
						return stream(op, mr, kXferBuf, size,
							      k * size, 1);
					});
				};
				pair_ab(p, [&] { run(dmr, "dmabuf"); },
					[&] { run(pmr, "plain"); });
			}
		}
	}
	// WRITEs go to the offset they come from, and the 4 MiB ones cover
	// both MRs: each must now hold the peer's pattern.
	std::vector<uint8_t> back(kXferBuf);
	mock.rw(0, back.data(), kXferBuf, false);
	if (std::memcmp(back.data(), local_.p, kXferBuf) ||
	    std::memcmp(plain.p, local_.p, kXferBuf))
		fail("xfer: an MR does not hold what the peer wrote");
	dereg(dmr);
	dereg(pmr);
}

// (b) REVOKE of n MRs on one buffer: idle, under traffic, vs dereg.
// An idle or dereg sample covers several buffers of n MRs each when n is
// small (ops = buffers), so that it lasts long enough to measure; the
// report divides by ops.
void Bench::revoke()
{
	constexpr size_t kLen = 1 << 20;
	std::vector<std::unique_ptr<Mock>> mocks;

	auto reg_n = [&](Mock &m, size_t n) {
		std::vector<ibv_mr *> mrs(n);

		for (auto &mr : mrs)
			mr = reg_dmabuf(owner_.pd, m, kLen);
		return mrs;
	};
	auto dereg_all = [](std::vector<ibv_mr *> &mrs) {
		for (ibv_mr *mr : mrs)
			dereg(mr);
		mrs.clear();
	};
	auto check_clean = [](Mock &m) {
		dmabuf_mock_query q = m.query();

		if (q.attachments || q.pins || q.maps || q.vmaps)
			fail("revoke: the exporter still has importers after dereg");
	};

	for (size_t n : {1, 10, 100, 1000}) {
		int pairs = n >= 1000 ? std::max(5, pairs_ / 2) : pairs_;
		size_t bufs = std::max<size_t>(1, 100 / n);

		if (skip(n))
			continue;
		while (mocks.size() < bufs) {
			mocks.push_back(std::make_unique<Mock>());
			mocks.back()->create(kLen);
		}
		std::fprintf(stderr, "bench: b %zu MRs\n", n);
		for (int p = 0; p < pairs; p++) {
			std::vector<std::vector<ibv_mr *>> mrs(bufs);

			auto idle = [&] {
				for (size_t i = 0; i < bufs; i++)
					mrs[i] = reg_n(*mocks[i], n);
				rec_.sample("b", "revoke", n, "idle", p, bufs, [&] {
					for (size_t i = 0; i < bufs; i++)
						mocks[i]->revoke(0);
					return uint64_t(0);
				});
				for (size_t i = 0; i < bufs; i++) {
					dereg_all(mrs[i]);
					check_clean(*mocks[i]);
					mocks[i]->restore();
				}
			};
			auto dereg_only = [&] {
				for (size_t i = 0; i < bufs; i++)
					mrs[i] = reg_n(*mocks[i], n);
				rec_.sample("b", "revoke", n, "dereg", p, bufs, [&] {
					for (size_t i = 0; i < bufs; i++)
						dereg_all(mrs[i]);
					return uint64_t(0);
				});
				for (size_t i = 0; i < bufs; i++)
					check_clean(*mocks[i]);
			};
			// The peer streams WRITEs of wr bytes into the first MR
			// of buffer 0, 4 in flight, until one fails: the REVOKE
			// starts once 4 of them have completed.
			auto traffic = [&](const char *variant, uint32_t wr) {
				Mock &m = *mocks[0];
				auto v = reg_n(m, n);
				std::atomic<bool> started{false};
				ibv_wc_status first_err = IBV_WC_SUCCESS;
				std::thread t([&] {
					ibv_wc wc[kDepth];
					int inflight = 0, ok = 0;
					uint64_t off = 0;

					if (pin_)
						pin_to_cpu(1);
					while (first_err == IBV_WC_SUCCESS) {
						while (inflight < 4) {
							peer_.post(IBV_WR_RDMA_WRITE, lmr_, 0, off,
								   v[0]->rkey, wr);
							off = (off + wr) % kLen;
							inflight++;
						}
						int got = peer_.wait(wc, kDepth);
						inflight -= got;
						for (int i = 0; i < got; i++) {
							if (wc[i].status == IBV_WC_SUCCESS)
								ok++;
							else if (first_err == IBV_WC_SUCCESS)
								first_err = wc[i].status;
						}
						if (ok >= 4)
							started = true;
					}
					// What is still in flight completes flushed.
					while (inflight > 0)
						inflight -= peer_.wait(wc, kDepth);
				});
				while (!started)
					usleep(1000);
				rec_.sample("b", "revoke", n, variant, p, 1, [&] {
					m.revoke(0);
					return uint64_t(0);
				});
				t.join();
				if (first_err != IBV_WC_REM_ACCESS_ERR)
					fail(std::string("revoke under traffic: the peer saw ") +
					     ibv_wc_status_str(first_err) +
					     ", want remote access error");
				dereg_all(v);
				check_clean(m);
				m.restore();
				renew_qps();
			};
			// idle/dereg is the A/B pair; traffic runs after both,
			// with 64 KiB and with 1 MiB messages in flight.
			if (!traffic_only_)
				pair_ab(p, idle, dereg_only);
			pair_ab(p, [&] { traffic("traffic", 64 << 10); },
				[&] { traffic("traffic_1m", 1 << 20); });
		}
	}
}

// (c) registration: ibv_reg_dmabuf_mr vs ibv_reg_mr.
void Bench::reg()
{
	for (uint64_t sz : {4ull << 10, 64ull << 10, 1ull << 20, 16ull << 20,
			    256ull << 20, 1ull << 30}) {
		int pairs = sz >= (256 << 20) ? std::max(5, pairs_ / 3) : pairs_;

		if (skip(sz))
			continue;
		Mock mock, eager;
		Buffer plain(sz);

		mock.create(sz);
		// An exporter that keeps a kernel mapping of its memory:
		// dma_buf_vmap() then costs rxe nothing at registration.
		eager.create(sz, DMABUF_MOCK_VMAP_EAGER);
		std::fprintf(stderr, "bench: c %" PRIu64 " B\n", sz);
		for (int p = 0; p < pairs; p++) {
			auto one = [&](const char *variant, Mock *m) {
				ibv_mr *mr = nullptr;

				rec_.sample("c", "reg", sz, variant, p, 1, [&] {
					mr = m ? reg_dmabuf(owner_.pd, *m, sz) :
						 reg_plain(owner_.pd, plain.p, sz);
					return uint64_t(0);
				});
				dereg(mr);
			};
			pair_ab(p, [&] { one("dmabuf", &mock); },
				[&] { one("plain", nullptr); });
			// The kept-mapping exporter against plain: its own pair.
			pair_ab(p, [&] { one("dmabuf_kmapped", &eager); },
				[&] { one("plain_2", nullptr); });
		}
	}
}

// (d) dma-buf MR vs ODP MR: first pass over fresh memory, steady state.
void Bench::odp()
{
	constexpr size_t kLen = 8 << 20;
	constexpr uint32_t kWr = 1 << 20;
	ibv_device_attr_ex attr{};

	if (ibv_query_device_ex(owner_.ctx, nullptr, &attr))
		fail("ibv_query_device_ex", errno);
	if (!(attr.odp_caps.general_caps & IBV_ODP_SUPPORT) ||
	    !(attr.odp_caps.per_transport_caps.rc_odp_caps &
	      IBV_ODP_SUPPORT_WRITE)) {
		std::fprintf(stderr, "bench: d skipped: %s has no ODP for RC WRITE\n",
			     dev_name_);
		return;
	}
	std::fprintf(stderr, "bench: d %zu B\n", kLen);
	for (int p = 0; p < pairs_; p++) {
		// The first WRITE pass over the whole MR, then a second one.
		auto passes = [&](const char *variant, ibv_mr *mr) {
			for (const char *cs : {"first_pass", "steady"})
				rec_.sample("d", cs, kLen, variant, p, kLen / kWr, [&] {
					return stream(IBV_WR_RDMA_WRITE, mr, kLen,
						      kWr, kLen, 4);
				});
		};
		// ODP on fresh anonymous memory, with transparent huge pages
		// as the system has them, or with 4 KiB pages only.
		auto with_odp = [&](const char *variant, bool small_pages) {
			Buffer fresh(kLen, false);

			if (small_pages && madvise(fresh.p, kLen, MADV_NOHUGEPAGE))
				fail("madvise MADV_NOHUGEPAGE", errno);
			ibv_mr *mr = reg_plain(owner_.pd, fresh.p, kLen,
					       kAccess | IBV_ACCESS_ON_DEMAND);
			passes(variant, mr);
			dereg(mr);
		};
		auto with_dmabuf = [&](const char *variant) {
			Mock mock;

			mock.create(kLen);
			ibv_mr *mr = reg_dmabuf(owner_.pd, mock, kLen);
			passes(variant, mr);
			dereg(mr);
		};
		pair_ab(p, [&] { with_dmabuf("dmabuf"); },
			[&] { with_odp("odp", false); });
		pair_ab(p, [&] { with_dmabuf("dmabuf_2"); },
			[&] { with_odp("odp_4k", true); });
	}
}

// (e) direct WRITE into the dma-buf vs WRITE into plain memory + memcpy.
void Bench::bounce()
{
	Mock mock;
	Buffer plain(kXferBuf);

	mock.create(kXferBuf);
	ibv_mr *pmr = reg_plain(owner_.pd, plain.p, plain.len);
	ibv_mr *dmr = reg_dmabuf(owner_.pd, mock, kXferBuf);
	void *map = mmap(nullptr, kXferBuf, PROT_READ | PROT_WRITE, MAP_SHARED,
			 mock.fd(), 0);
	if (map == MAP_FAILED)
		fail("mmap of the dma-buf", errno);
	std::memset(map, 0, kXferBuf);	// fault it in once
	auto sync = [&](uint64_t flags) {
		dma_buf_sync s{flags};

		if (ioctl(mock.fd(), DMA_BUF_IOCTL_SYNC, &s))
			fail("DMA_BUF_IOCTL_SYNC", errno);
	};

	for (uint32_t size : {64u << 10, 1u << 20, 4u << 20}) {
		if (skip(size))
			continue;
		std::fprintf(stderr, "bench: e %u B\n", size);
		for (int p = 0; p < pairs_; p++) {
			auto direct = [&] {
				rec_.sample("e", "land", size, "direct", p, 1, [&] {
					return stream(IBV_WR_RDMA_WRITE, dmr,
						      kXferBuf, size, size, 1);
				});
			};
			auto bounce = [&] {
				rec_.sample("e", "land", size, "bounce", p, 1, [&] {
					stream(IBV_WR_RDMA_WRITE, pmr, kXferBuf,
					       size, size, 1);
					sync(DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE);
					std::memcpy(map, plain.p, size);
					sync(DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE);
					return uint64_t(size);
				});
			};
			pair_ab(p, direct, bounce);
		}
	}
	// Both ways must have landed the same bytes.
	std::vector<uint8_t> back(64 << 10);
	mock.rw(0, back.data(), back.size(), false);
	if (std::memcmp(back.data(), local_.p, back.size()))
		fail("bounce: the dma-buf does not hold what the peer wrote");
	munmap(map, kXferBuf);
	dereg(dmr);
	dereg(pmr);
}

[[noreturn]] void usage(const char *argv0)
{
	std::fprintf(stderr,
		     "usage: %s [--sections abcde] [--pairs N] [--pin 0|1] [--only SIZE|N]\n"
		     "       [--traffic-only 0|1] [--trace-marker 0|1] [--raw FILE]\n"
		     "       DEVICE PEER_DEVICE\n",
		     argv0);
	std::exit(2);
}

} // namespace

int main(int argc, char **argv)
{
	std::string sections = "abcde";
	int pairs = 15;
	const char *raw = nullptr;
	bool pin = false, traffic_only = false, trace_marker = false;
	uint64_t only = 0;
	int i = 1;

	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		std::string opt = argv[i];

		if (opt == "--sections")
			sections = argv[i + 1];
		else if (opt == "--pairs")
			pairs = std::atoi(argv[i + 1]);
		else if (opt == "--raw")
			raw = argv[i + 1];
		else if (opt == "--pin")
			pin = !std::strcmp(argv[i + 1], "1");
		else if (opt == "--only")
			only = std::strtoull(argv[i + 1], nullptr, 0);
		else if (opt == "--traffic-only")
			traffic_only = !std::strcmp(argv[i + 1], "1");
		else if (opt == "--trace-marker")
			trace_marker = !std::strcmp(argv[i + 1], "1");
		else
			usage(argv[0]);
	}
	if (argc - i != 2 || pairs < 2 ||
	    sections.find_first_not_of("abcde") != std::string::npos)
		usage(argv[0]);

	std::FILE *out = raw ? std::fopen(raw, "w") : stdout;
	if (!out) {
		std::perror(raw);
		return 1;
	}
	try {
		if (pin)
			pin_to_cpu(0);
		Bench b(argv[i], argv[i + 1], pairs, pin, only, traffic_only,
			trace_marker, out);

		for (const char s : sections) {
			switch (s) {
			case 'a': b.xfer(); break;
			case 'b': b.revoke(); break;
			case 'c': b.reg(); break;
			case 'd': b.odp(); break;
			case 'e': b.bounce(); break;
			}
		}
	} catch (const std::exception &e) {
		std::fprintf(stderr, "bench: error: %s\n", e.what());
		return 1;
	}
	if (raw)
		std::fclose(out);
	std::fprintf(stderr, "bench: done\n");
	return 0;
}
