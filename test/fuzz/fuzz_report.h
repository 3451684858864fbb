/*
 * fuzz_report.h - how every fuzz target reports: its struct fuzz_report
 * holds its name, step and the step's name; one broken invariant
 * (FUZZ_CHECK, fuzz_fail) ends the run saying all three (so a crash input
 * can be replayed and read), fuzz_name names the next step and with
 * FUZZ_VERBOSE traces it, fuzz_check_ret checks a call's result against
 * the model's; fuzz_setup is what the targets that make pipes do once per
 * process, fuzz_take_sigpipe collects a SIGPIPE raised since; and how each
 * reads its input, a byte at a time (0 once it is used up), and a size
 * from it (fuzz_size).  Shared by
 * fuzz_ops.c, fuzz_zerocopy.c and fuzz_opts.c, which test/fuzz_replay.c
 * includes into one program, hence the include guard.
 */
#ifndef PP_FUZZ_REPORT_H
#define PP_FUZZ_REPORT_H

#include <signal.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A target's report: its name, the step it is at and what that step
 * does (FUZZ_VERBOSE=1 traces every step). */
struct fuzz_report {
	const char *target;
	unsigned long step;
	char op[256];
	bool verbose;
};

__attribute__((noreturn)) static inline void fuzz_vfail(struct fuzz_report *r, const char *fmt,
                                                        va_list ap)
{
	fprintf(stderr, "\n%s: INVARIANT VIOLATED at step %lu (%s):\n  ", r->target, r->step, r->op);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	fflush(stderr);
	abort();
}

/* One broken invariant ends the run. */
__attribute__((format(printf, 2, 3), noreturn)) static inline void
fuzz_fail(struct fuzz_report *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fuzz_vfail(r, fmt, ap);
}

#define FUZZ_CHECK(r, cond, ...)                                             \
	do {                                                                     \
		if (!(cond))                                                         \
			fuzz_fail((r), __VA_ARGS__);                                     \
	} while (0)

/* Name the step about to be taken; trace it if verbose. */
__attribute__((format(printf, 2, 3))) static inline void fuzz_name(struct fuzz_report *r,
                                                                   const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->op, sizeof r->op, fmt, ap);
	va_end(ap);
	if (r->verbose)
		fprintf(stderr, "step %lu: %s\n", r->step, r->op);
}

/* Once per process, for the targets that make pipes: SIGPIPE blocked (they
 * collect it with sigtimedwait, to see who raised it), FUZZ_VERBOSE read. */
static inline void fuzz_setup(struct fuzz_report *r)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigprocmask(SIG_BLOCK, &set, NULL);
	const char *v = getenv("FUZZ_VERBOSE");
	r->verbose = v && *v && *v != '0';
}

/* A call's result against the model's prediction: the value, and errno
 * where the prediction is -1.  With FUZZ_VERBOSE the result is printed
 * first, followed by note. */
static inline void fuzz_check_ret(struct fuzz_report *r, long got, int err, long want,
                                  int want_err, const char *note)
{
	if (r->verbose)
		fprintf(stderr, "    -> %ld%s%s%s\n", got, got < 0 ? " " : "",
		        got < 0 ? strerror(err) : "", note);
	FUZZ_CHECK(r, got == want && (want >= 0 || err == want_err),
	           "returned %ld (errno %d %s), want %ld (errno %d %s)", got, err,
	           got < 0 ? strerror(err) : "-", want, want_err, want < 0 ? strerror(want_err) : "-");
}

/* SIGPIPE stays blocked (fuzz_setup); a raise() leaves it pending, and
 * this collects it: whether one came. */
static inline bool fuzz_take_sigpipe(void)
{
	sigset_t set;
	struct timespec zero = { 0, 0 };
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	int sig;
	/* EINTR: some other signal's handler ran (libFuzzer's timer). */
	while ((sig = sigtimedwait(&set, NULL, &zero)) == -1 && errno == EINTR)
		;
	return sig == SIGPIPE;
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

/* A read or write size: biased to the edges that matter.  0-31 as is;
 * 1+B; around a page; whole pages; 16 and 24 bits; pages plus or minus a
 * little; odd sizes.  At most max. */
static inline size_t fuzz_size(struct fuzz_in *in, size_t max)
{
	unsigned c = fuzz_byte(in), lo = c & 31;
	size_t n;
	switch (c >> 5) {
	case 0: n = lo; break;
	case 1: n = 1 + fuzz_byte(in); break;
	case 2: n = 4096 - 16 + lo; break;
	case 3: n = (size_t)(lo + 1) * 4096; break;
	case 4: /* two bytes, little-endian (read in sequence) */
		n = fuzz_byte(in);
		n |= (size_t)fuzz_byte(in) << 8;
		break;
	case 5:
		n = fuzz_byte(in);
		n |= (size_t)fuzz_byte(in) << 8;
		n |= (size_t)fuzz_byte(in) << 16;
		n %= max + 1;
		break;
	case 6: n = (size_t)(lo + 1) * 4096 + (size_t)(int8_t)fuzz_byte(in); break;
	default: n = (size_t)(lo % 4) * 4096 + 1 + (lo >> 2) * 511; break;
	}
	return n > max ? max : n;
}

#endif
