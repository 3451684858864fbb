/*
 * fuzz_report.h - how every fuzz target reports: one broken invariant ends
 * the run with the target, the step and the step's name (so a crash input
 * can be replayed and read), and FUZZ_VERBOSE traces each step; and how
 * each reads its input, a byte at a time (0 once it is used up).  Shared by
 * fuzz_ops.c, fuzz_zerocopy.c and fuzz_opts.c, which test/fuzz_replay.c
 * includes into one program, hence the include guard.
 */
#ifndef PP_FUZZ_REPORT_H
#define PP_FUZZ_REPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noreturn)) static inline void fuzz_vfail(const char *target, unsigned long step,
                                                        const char *op, const char *fmt,
                                                        va_list ap)
{
	fprintf(stderr, "\n%s: INVARIANT VIOLATED at step %lu (%s):\n  ", target, step, op);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	fflush(stderr);
	abort();
}

/* Record the name of the step about to be taken in op[oplen]; trace it if verbose. */
static inline void fuzz_vname(char *op, size_t oplen, bool verbose, unsigned long step,
                              const char *fmt, va_list ap)
{
	vsnprintf(op, oplen, fmt, ap);
	if (verbose)
		fprintf(stderr, "step %lu: %s\n", step, op);
}

/* The fuzzer's input, consumed from the front. */
struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static inline unsigned fuzz_byte(struct fuzz_in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

#endif
