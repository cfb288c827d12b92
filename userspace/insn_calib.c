// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * insn_calib: calibration of the markcount plugin's instruction counts.
 *
 * For each N it runs INSN_MARK_BEGIN, a loop of exactly 2N instructions
 * (dec + jnz, N times, in asm so the compiler cannot change it), then
 * INSN_MARK_END, and prints "insn_calib: N=<N>". The first pair has no loop
 * between the markers (N=0): its delta is the fixed cost, 1 (END itself)
 * plus whatever the guest kernel ran in between. scripts/insn-check.sh
 * pairs the plugin's BEGIN/END lines with these N and checks that
 * END - BEGIN is close to 2N + 1.
 *
 * usage: insn_calib [N...]	(default: 0 1000000 10000000)
 */

#include <stdio.h>
#include <stdlib.h>

#include "insn_marker.h"

/* Exactly 2 * n instructions (n > 0): the bounds are the two markers. */
static void __attribute__((noinline)) measured_loop(unsigned long n)
{
	INSN_MARK_BEGIN();
	__asm__ __volatile__("1:\n\t"
			     "dec %0\n\t"
			     "jnz 1b"
			     : "+r" (n) : : "cc");
	INSN_MARK_END();
}

static void __attribute__((noinline)) empty(void)
{
	INSN_MARK_BEGIN();
	INSN_MARK_END();
}

int main(int argc, char **argv)
{
	static const unsigned long def[] = { 0, 1000000, 10000000 };
	int n = argc > 1 ? argc - 1 : (int)(sizeof(def) / sizeof(def[0]));
	int i;

	for (i = 0; i < n; i++) {
		unsigned long v = argc > 1 ? strtoul(argv[i + 1], NULL, 0) : def[i];

		if (v)
			measured_loop(v);
		else
			empty();
		printf("insn_calib: N=%lu\n", v);
	}
	return 0;
}
