/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Instruction-count markers for guest programs (C and C++), read by the
 * markcount QEMU plugin (userspace/qemu-plugin/markcount.c).
 *
 * Under TCG, wall time is noisy; the number of guest instructions between
 * two points of a program is not. A marker is one 8-byte NOP,
 *
 *	0f 1f 84 00 <id:16> 52 56	nopl 0x5256<id>(%rax,%rax,1)
 *
 * i.e. the multi-byte NOP with a disp32 whose high 16 bits are 0x5256 and
 * whose low 16 bits are the marker's id (0..65535, a compile-time
 * constant). It does nothing and touches no memory or register (NOP's
 * operand is never accessed), so outside QEMU, or under QEMU without the
 * plugin, it is a plain NOP. Under the plugin
 * (VM_PLUGIN_OUT=FILE scripts/vm.sh ...) each marker executed appends
 * "<id> <count>" to FILE, count being the guest instructions executed so
 * far on all vCPUs, the marker included. The work between two markers is
 * the difference of their counts: INSN_MARK_END's count minus
 * INSN_MARK_BEGIN's is everything after BEGIN up to and including END.
 *
 * A marker is "asm volatile" with a "memory" clobber: the compiler keeps
 * it in program order with other volatile asm and with memory accesses,
 * but may still move pure register computations across it. Put the work
 * to measure behind a function call or a memory access the compiler cannot
 * drop, as for any benchmark.
 *
 * Ids 1 and 2 are INSN_MARK_BEGIN and INSN_MARK_END; the others are free
 * for programs that want to tell several points apart.
 */
#ifndef INSN_MARKER_H
#define INSN_MARKER_H

#define INSN_MARK_ID_BEGIN	1
#define INSN_MARK_ID_END	2

#if defined(__x86_64__) || defined(__i386__)
/*
 * The same encoding means nopl disp32(%eax,%eax,1) in 32-bit code. An id
 * outside 0..65535 does not compile (negative array size).
 */
#define INSN_MARK(id)							\
	__asm__ __volatile__(".byte 0x0f, 0x1f, 0x84, 0x00\n\t"		\
			     ".short %c0\n\t"				\
			     ".short 0x5256"				\
			     : : "i" ((id) + 0 * sizeof(char[		\
				(unsigned long)(id) <= 0xffff ? 1 : -1]))	\
			     : "memory")
#else
/* No marker outside x86: only a compiler barrier. */
#define INSN_MARK(id)	__asm__ __volatile__("" : : : "memory")
#endif

#define INSN_MARK_BEGIN()	INSN_MARK(INSN_MARK_ID_BEGIN)
#define INSN_MARK_END()		INSN_MARK(INSN_MARK_ID_END)

static inline void insn_mark_begin(void)
{
	INSN_MARK_BEGIN();
}

static inline void insn_mark_end(void)
{
	INSN_MARK_END();
}

#endif /* INSN_MARKER_H */
