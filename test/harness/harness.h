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
 *     say what they will wait for.  The watchdog is a process of its own:
 *     the test keeps exactly its own threads, and no signal interrupts a
 *     call under test;
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
#include <sys/prctl.h>
#include <sys/wait.h>
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

/*
 * The watchdog is a process of its own, forked before the first case: the
 * test keeps exactly the threads it makes, and no signal is sent or taken
 * until the watchdog kills a test that hangs.  What it sees of the test is
 * this page, shared with it (and with the test's own forked children, whose
 * t_progress() counts too).
 */
struct t_watch {
	atomic_ulong progress; /* t_progress() calls */
	atomic_uint cases;     /* cases started */
	atomic_int running;    /* a case is running ... */
	char name[160];        /* ... this one */
	char what[240];        /* t_progress_at's last note */
};
static struct t_watch *t_w;
static pid_t t_watch_pid;
static pthread_mutex_t t_what_mu = PTHREAD_MUTEX_INITIALIZER;

/* The running case is getting on: the watchdog's clock starts again. */
static inline void t_progress(void)
{
	if (t_w)
		atomic_fetch_add_explicit(&t_w->progress, 1, memory_order_relaxed);
}

/* Progress, and what the case is going to do or wait for next (for the
 * watchdog's message). */
static inline void t_progress_at(const char *what)
{
	if (!t_w)
		return;
	size_t n = strlen(what);
	if (n > sizeof t_w->what - 1)
		n = sizeof t_w->what - 1;
	pthread_mutex_lock(&t_what_mu);
	memcpy(t_w->what, what, n);
	t_w->what[n] = 0;
	pthread_mutex_unlock(&t_what_mu);
	t_progress();
}

/* Seconds a case may go without progress: PP_CASE_TIMEOUT, default 40. */
static inline unsigned t_case_timeout(void)
{
	long v = t_env_long("PP_CASE_TIMEOUT", 40);
	return v > 0 ? (unsigned)v : 40;
}

/* Print with write(2) (the watchdog process has no use for stdio). */
static void t_say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void t_say(int fd, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof msg - 1)
		n = (int)sizeof msg - 1;
	if (n > 0)
		(void)!write(fd, msg, (size_t)n);
}

/* The watchdog process: four times a second, has the running case made
 * progress?  It ends with the test, or kills it. */
__attribute__((noreturn)) static void t_watch(pid_t test, unsigned limit)
{
	sigset_t all;
	unsigned seen_case = 0;
	unsigned long seen = 0;
	double since = t_now();
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Hold no descriptor of the test's but the output: a pipe end or socket
	 * kept open here would keep its peer from seeing end of file. */
	for (int fd = 0; fd < 1024; fd++)
		if (fd != 1 && fd != 2)
			close(fd);
	for (;;) {
		t_sleep_ms(250);
		if (getppid() != test)
			_exit(0); /* the test is gone */
		double now = t_now();
		unsigned c = atomic_load(&t_w->cases);
		unsigned long p = atomic_load(&t_w->progress);
		if (!atomic_load(&t_w->running) || c != seen_case || p != seen) {
			seen_case = c;
			seen = p;
			since = now;
		} else if (now - since > limit) {
			t_say(2, "watchdog: %s made no progress for %u s%s%s: a hang or a lost wakeup"
			      " (PP_CASE_TIMEOUT)\n", t_w->name, limit, t_w->what[0] ? " while " : "",
			      t_w->what);
			t_say(1, "FAIL %s (hang)\n", t_w->name);
			kill(test, SIGKILL);
			_exit(0);
		}
	}
}

/* Before the first case: the shared page and the watchdog process. */
static inline void t_start(void)
{
	if (t_w)
		return;
	t_w = mmap(NULL, sizeof *t_w, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t_w == MAP_FAILED) {
		perror("harness: mmap");
		exit(2);
	}
	pid_t test = getpid();
	fflush(stdout);
	fflush(stderr);
	t_watch_pid = fork();
	if (t_watch_pid < 0) {
		perror("harness: watchdog");
		exit(2);
	}
	if (t_watch_pid == 0)
		t_watch(test, t_case_timeout());
}

/* After the last case: the watchdog goes (nothing left behind). */
static inline void t_stop(void)
{
	if (!t_w)
		return;
	kill(t_watch_pid, SIGKILL);
	while (waitpid(t_watch_pid, NULL, 0) < 0 && errno == EINTR)
		;
	munmap(t_w, sizeof *t_w);
	t_w = NULL;
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
	size_t n = strlen(name);
	if (n > sizeof t_w->name - 1)
		n = sizeof t_w->name - 1;
	memcpy(t_w->name, name, n);
	t_w->name[n] = 0;
	t_w->what[0] = 0;
	atomic_fetch_add(&t_w->cases, 1);
	atomic_store(&t_w->running, 1);
	double t0 = t_now();

	if (t_before_case)
		t_before_case();
	fn();
	if (t_after_case)
		t_after_case();

	atomic_store(&t_w->running, 0);
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
