/*
 * harness.h - the tiny test framework every test program includes.
 *
 * A test program is a standalone executable made of cases.  Each case runs
 * in order; CHECK() records a failure (with file, line, errno) and goes on.
 * The program prints one line per case, "PASS name", "FAIL name" or
 * "SKIP name", and exits 1 if any case failed.  test/run.sh counts those
 * lines across all programs and prints the closing "N passed, N failed".
 */
#ifndef PP_TEST_HARNESS_H
#define PP_TEST_HARNESS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_case_failed;
static int t_case_skipped;
static int t_any_failed;

#define CHECK(cond)                                                          \
	do {                                                                     \
		if (!(cond)) {                                                       \
			int e_ = errno;                                                  \
			fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d: %s)\n",      \
			        __FILE__, __LINE__, #cond, e_, strerror(e_));            \
			t_case_failed = 1;                                               \
		}                                                                    \
	} while (0)

/* CHECK that an expression equals an expected integer, printing both. */
#define CHECK_EQ(expr, want)                                                 \
	do {                                                                     \
		long long got_ = (long long)(expr), want_ = (long long)(want);      \
		if (got_ != want_) {                                                 \
			int e_ = errno;                                                  \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s = %lld, want %lld"   \
			        " (errno %d: %s)\n", __FILE__, __LINE__, #expr, got_,   \
			        want_, e_, strerror(e_));                                \
			t_case_failed = 1;                                               \
		}                                                                    \
	} while (0)

/* CHECK that a call failed with -1 and the given errno. */
#define CHECK_ERR(expr, err)                                                 \
	do {                                                                     \
		errno = 0;                                                           \
		long long got_ = (long long)(expr);                                  \
		int e_ = errno;                                                      \
		if (got_ != -1 || e_ != (err)) {                                     \
			fprintf(stderr, "%s:%d: CHECK_ERR failed: %s = %lld errno %d"    \
			        " (%s), want -1 errno %d (%s)\n", __FILE__, __LINE__,    \
			        #expr, got_, e_, strerror(e_), (err), strerror(err));    \
			t_case_failed = 1;                                               \
		}                                                                    \
	} while (0)

/* Mark the running case skipped (with a reason) and leave it. */
#define SKIP(why)                                                            \
	do {                                                                     \
		fprintf(stderr, "skip: %s\n", (why));                                \
		t_case_skipped = 1;                                                  \
		return;                                                              \
	} while (0)

static inline void t_run(const char *name, void (*fn)(void))
{
	t_case_failed = 0;
	t_case_skipped = 0;
	fn();
	if (t_case_failed) {
		t_any_failed = 1;
		printf("FAIL %s\n", name);
	} else if (t_case_skipped) {
		printf("SKIP %s\n", name);
	} else {
		printf("PASS %s\n", name);
	}
	fflush(stdout);
}

#define RUN(fn) t_run(#fn, fn)
#define T_DONE() (t_any_failed ? 1 : 0)

#endif
