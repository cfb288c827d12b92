// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * markcount: a QEMU TCG plugin that counts the guest instructions executed
 * and writes the count at each marker a guest program executes, so that a
 * benchmark under TCG can measure its work in instructions rather than in
 * (noisy) wall time.
 *
 * Markers (userspace/insn_marker.h) are the 8-byte NOP
 *
 *	0f 1f 84 00 <disp32>		nopl disp32(%rax,%rax,1)
 *
 * whose disp32 has 0x5256 ("RV") in its high 16 bits; the low 16 bits are
 * the marker's id. Each time a marker executes, the plugin appends
 *
 *	<id> <count>\n
 *
 * to the output file (id in decimal), count being the number of guest
 * instructions executed so far, the marker included. The file is flushed
 * after each line, so it is complete even if QEMU is killed.
 *
 * Counting: one global counter for all vCPUs, bumped by an inline add of
 * the TB's instruction count when a translation block starts. This assumes
 * one TCG thread (-accel tcg,thread=single, as scripts/vm.sh runs it): the
 * add is not atomic. At a marker the instructions of its TB that follow it
 * have already been added; the plugin subtracts them (their number is known
 * at translation), so the count stops at the marker itself. What remains
 * inexact: a TB cut short by an exception (a page fault in its middle, say)
 * has been counted whole, and the instructions it re-executes afterwards
 * count again; and every vCPU counts, the kernel's work included (timer
 * interrupts, other tasks, the other vCPUs' idle loops). Both are small
 * next to a benchmark's loop; the calibration (scripts/insn-check.sh)
 * measures them.
 *
 * usage: -plugin PATH/libmarkcount.so,out=FILE	(QEMU 7.2 syntax)
 */

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MARK_LEN	8
#define MARK_MAGIC	0x5256
/* A TB has at most 512 instructions (TCG_MAX_INSNS): 16 bits are plenty. */
#define MARK_ID_BITS	16

static uint64_t insn_count;
static FILE *out;

/*
 * udata: the marker's id in the low 16 bits, the number of instructions of
 * its TB after it above them.
 */
static void mark_exec(unsigned int vcpu_index, void *udata)
{
	uintptr_t v = (uintptr_t)udata;
	unsigned int id = v & ((1u << MARK_ID_BITS) - 1);
	uint64_t after = v >> MARK_ID_BITS;

	(void)vcpu_index;
	if (!out)
		return;
	fprintf(out, "%u %" PRIu64 "\n", id, insn_count - after);
	fflush(out);
}

static int is_marker(const uint8_t *b, size_t len)
{
	return len == MARK_LEN && b[0] == 0x0f && b[1] == 0x1f &&
	       b[2] == 0x84 && b[3] == 0x00 &&
	       (b[6] | b[7] << 8) == MARK_MAGIC;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	size_t i;

	(void)id;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
						 &insn_count, n);
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		const uint8_t *b = qemu_plugin_insn_data(insn);
		uintptr_t udata;

		if (!is_marker(b, qemu_plugin_insn_size(insn)))
			continue;
		udata = (uintptr_t)(b[4] | b[5] << 8) |
			(uintptr_t)(n - 1 - i) << MARK_ID_BITS;
		qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_exec,
						       QEMU_PLUGIN_CB_NO_REGS,
						       (void *)udata);
	}
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	if (out) {
		fflush(out);
		fclose(out);
		out = NULL;
	}
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *path = NULL;
	int i;

	(void)info;
	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4) && argv[i][4]) {
			path = argv[i] + 4;
		} else {
			fprintf(stderr, "markcount: unknown argument %s (want out=FILE)\n",
				argv[i]);
			return -1;
		}
	}
	if (!path) {
		fprintf(stderr, "markcount: no out=FILE argument\n");
		return -1;
	}
	out = fopen(path, "w");
	if (!out) {
		fprintf(stderr, "markcount: %s: %s\n", path, strerror(errno));
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
