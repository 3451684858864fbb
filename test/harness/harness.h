/*
 * harness.h - the test scaffold every test program includes.
 *
 * A test program is a standalone executable made of cases, functions run
 * in order by RUN(fn) (or t_run(name, fn) for a name made at run time).
 * CHECK() and its kin record a failure (with file, line, errno) and go on;
 * SKIP() leaves a case that cannot run here.  The program prints one line
 * per case, "PASS name", "FAIL name" or "SKIP name", and its time on
 * stderr, and main ends with `return T_DONE();`, which exits 1 if any case
 * failed.  test/run.sh counts those lines across all programs and prints
 * the closing "N passed, N failed".
 *
 * What else every program gets from here:
 *   - a watchdog, always on: a case that makes no progress for
 *     PP_CASE_TIMEOUT seconds (default 40) fails the program with
 *     "FAIL name (hang)" instead of hanging it.  A case starts with its
 *     clock at zero; long cases call t_progress() (from any thread, or a
 *     forked child) as they get on, t_progress_at("what comes next") to
 *     say what they will wait for.  The watchdog is a thread of its own
 *     that takes no signal and sends none, so it never interrupts a call
 *     under test;
 *   - checks around every case of a program (t_around_cases): e.g. no
 *     pool page left in use, no descriptor leaked;
 *   - how much work: PP_TEST_SCALE=F (default 1) multiplies the amount of
 *     data and the number of iterations of every test (t_scaled); the
 *     sanitizers' slowdown is T_SAN_FACTOR, which programs apply where
 *     they always did (t_scaled_san); valgrind runs say PP_VALGRIND=1
 *     (t_valgrind), and set a smaller PP_TEST_SCALE;
 *   - numbers from the environment (t_env_long) and the clock (clock.h).
 *
 * Everything is static (inline), so a program using part of it compiles
 * warning-free.
 */
#ifndef PP_TEST_HARNESS_H
#define PP_TEST_HARNESS_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* ---- checks ---------------------------------------------------------------- */

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

/* ---- the environment: sanitizers, valgrind, how much work -------------- */

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
#define T_TSAN 1
#else
#define T_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define T_ASAN 1
#else
#define T_ASAN 0
#endif
#define T_SANITIZED (T_TSAN || T_ASAN)
/* How much of the work a sanitizer build does where a test cuts it. */
#define T_SAN_FACTOR (T_TSAN ? 0.25 : T_ASAN ? 0.5 : 1.0)

/* The number in environment variable name (strtol, any base), or def when
 * it is unset, empty or not a number. */
static inline long t_env_long(const char *name, long def)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return def;
	long v = strtol(s, &end, 0);
	return *end ? def : v;
}

/* Running under valgrind (PP_VALGRIND=1, set by make check-valgrind and
 * check-helgrind): for what valgrind cannot do, not for how much to do. */
static inline int t_valgrind(void)
{
	return t_env_long("PP_VALGRIND", 0) != 0;
}

static double t_scale_v;
static pthread_once_t t_scale_once = PTHREAD_ONCE_INIT;

static void t_scale_read(void)
{
	const char *e = getenv("PP_TEST_SCALE");
	double v = 1.0;
	if (e && *e) {
		char *end;
		v = strtod(e, &end);
		if (*end || !(v > 0)) {
			fprintf(stderr, "ignoring bad PP_TEST_SCALE=%s\n", e);
			v = 1.0;
		}
	}
	t_scale_v = v;
}

/* PP_TEST_SCALE (default 1): how much work, relative to the defaults. */
static inline double t_scale(void)
{
	pthread_once(&t_scale_once, t_scale_read);
	return t_scale_v;
}

/* n times PP_TEST_SCALE, at least 1. */
static inline long t_scaled(long n)
{
	double v = (double)n * t_scale();
	return v < 1 ? 1 : (long)v;
}

/* n times PP_TEST_SCALE and T_SAN_FACTOR, at least 1. */
static inline long t_scaled_san(long n)
{
	double v = (double)n * (t_scale() * T_SAN_FACTOR);
	return v < 1 ? 1 : (long)v;
}

/* ---- the watchdog ------------------------------------------------------ */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int started, stop;
	unsigned limit;         /* PP_CASE_TIMEOUT */
	const char *name;       /* the running case; NULL between cases */
	unsigned long seen;     /* the progress count last seen ... */
	double since;           /* ... and since when */
} t_wd = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* Progress counts, in a shared page so that forked children count too. */
static atomic_ulong *t_progress_n;
static _Atomic(const char *) t_waiting_for; /* t_progress_at's note */

/* The running case is getting on: the watchdog's clock starts again. */
static inline void t_progress(void)
{
	if (t_progress_n)
		atomic_fetch_add_explicit(t_progress_n, 1, memory_order_relaxed);
}

/* Progress, and what the case is going to wait for next (for the
 * watchdog's message; a string that lives as long as the case). */
static inline void t_progress_at(const char *what)
{
	atomic_store(&t_waiting_for, what);
	t_progress();
}

/* Print with write(2): the main thread may be stuck holding stdio's lock. */
static void t_say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void t_say(int fd, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof msg - 1)
		n = (int)sizeof msg - 1;
	if (n > 0)
		(void)!write(fd, msg, (size_t)n);
}

static void *t_watchdog(void *arg)
{
	sigset_t all;
	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* never takes a test's signal */
	pthread_mutex_lock(&t_wd.mu);
	while (!t_wd.stop) {
		double now = t_now();
		if (t_wd.name) {
			unsigned long p = atomic_load(t_progress_n);
			if (p != t_wd.seen) {
				t_wd.seen = p;
				t_wd.since = now;
			} else if (now - t_wd.since > t_wd.limit) {
				const char *what = atomic_load(&t_waiting_for);
				t_say(2, "watchdog: %s made no progress for %u s%s%s: a hang or a lost"
				      " wakeup (PP_CASE_TIMEOUT)\n", t_wd.name, t_wd.limit,
				      what ? " while " : "", what ? what : "");
				t_say(1, "FAIL %s (hang)\n", t_wd.name);
				_exit(1);
			}
		}
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += 250 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&t_wd.cv, &t_wd.mu, &until);
	}
	pthread_mutex_unlock(&t_wd.mu);
	return NULL;
}

/* Seconds a case may go without progress: PP_CASE_TIMEOUT, default 40. */
static inline unsigned t_case_timeout(void)
{
	long v = t_env_long("PP_CASE_TIMEOUT", 40);
	return v > 0 ? (unsigned)v : 40;
}

/* Before the first case: the progress page and the watchdog thread. */
static inline void t_start(void)
{
	pthread_condattr_t ca;
	if (t_wd.started)
		return;
	t_wd.started = 1;
	t_wd.limit = t_case_timeout();
	t_progress_n = mmap(NULL, sizeof *t_progress_n, PROT_READ | PROT_WRITE,
	                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t_progress_n == MAP_FAILED) {
		perror("harness: mmap");
		exit(2);
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&t_wd.cv);
	pthread_cond_init(&t_wd.cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t_wd.thread, NULL, t_watchdog, NULL) != 0) {
		perror("harness: watchdog thread");
		exit(2);
	}
}

/* After the last case: the watchdog thread ends (nothing left behind). */
static inline void t_stop(void)
{
	if (!t_wd.started)
		return;
	pthread_mutex_lock(&t_wd.mu);
	t_wd.stop = 1;
	pthread_cond_signal(&t_wd.cv);
	pthread_mutex_unlock(&t_wd.mu);
	pthread_join(t_wd.thread, NULL);
	munmap(t_progress_n, sizeof *t_progress_n);
	t_progress_n = NULL;
	t_wd.started = 0;
}

/* ---- running cases ----------------------------------------------------- */

/* Checks a program makes before and after every case, counted in the
 * case's result; either may be NULL.  Set them in main, before RUN. */
static void (*t_before_case)(void);
static void (*t_after_case)(void);

static inline void t_around_cases(void (*before)(void), void (*after)(void))
{
	t_before_case = before;
	t_after_case = after;
}

static inline void t_run(const char *name, void (*fn)(void))
{
	t_start();
	t_case_failed = 0;
	t_case_skipped = 0;
	atomic_store(&t_waiting_for, NULL);
	pthread_mutex_lock(&t_wd.mu);
	t_wd.name = name;
	t_wd.seen = atomic_load(t_progress_n);
	t_wd.since = t_now();
	pthread_mutex_unlock(&t_wd.mu);
	double t0 = t_now();

	if (t_before_case)
		t_before_case();
	fn();
	if (t_after_case)
		t_after_case();

	pthread_mutex_lock(&t_wd.mu);
	t_wd.name = NULL;
	pthread_mutex_unlock(&t_wd.mu);
	if (t_case_failed) {
		t_any_failed = 1;
		printf("FAIL %s\n", name);
	} else if (t_case_skipped) {
		printf("SKIP %s\n", name);
	} else {
		printf("PASS %s\n", name);
	}
	fflush(stdout);
	fprintf(stderr, "  %s: %.2f s\n", name, t_now() - t0);
}

#define RUN(fn) t_run(#fn, fn)

/* main's exit status: 1 if any case failed. */
static inline int t_done(void)
{
	t_stop();
	return t_any_failed ? 1 : 0;
}
#define T_DONE() t_done()

#endif
