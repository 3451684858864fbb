/*
 * threads.h - what the multi-threaded tests (stress.c, wakeup.c) share,
 * after harness.h.
 *
 *   - SAN_FACTOR: 0.25 under TSan, 0.5 under ASan, else 1; g_scale is
 *     PP_STRESS_SCALE (default 1) times SAN_FACTOR, set by init_scale(), and
 *     scaled(n) is n times g_scale (at least 1);
 *   - failures seen by helper threads: TFAIL(fmt, ...) / TCHECK(cond) print
 *     and count them (the first 20 are printed), and case_end(), called at
 *     the end of every case by the main thread, turns the count into a
 *     CHECK, together with "no pool page left in use";
 *   - a progress watchdog for hangs and lost wakeups: wd_init() starts a
 *     thread that alone takes SIGALRM (every other thread blocks it, so no
 *     pagepipe call is ever interrupted); working threads call wd_tick()
 *     (or wd_at("what it waits for")) when they make progress, and when a
 *     case has made none for WD_SECS seconds the watchdog prints
 *     "FAIL case (hang)" and ends the program with status 1;
 *   - CASE(fn): RUN(fn) under the watchdog, printing its time on stderr;
 *     start_thread(), mono_now(), and wait_count() / gate() to line
 *     threads up;
 *   - PPFD_WRITE_EVENTS: the poll(2) event pp_fd() reports for a ready
 *     write end.
 *
 * Everything is static (inline), so a program using part of it compiles
 * warning-free.
 */
#ifndef PP_TEST_THREADS_H
#define PP_TEST_THREADS_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"

/*
 * The poll(2) event that pp_fd() reports for a ready write end (it is made
 * readable).  Only redefined when a test is checked against kernel pipes
 * through a shim, where the descriptor is the pipe itself (POLLOUT).
 */
#ifndef PPFD_WRITE_EVENTS
#define PPFD_WRITE_EVENTS POLLIN
#endif

#if defined(__SANITIZE_THREAD__)
#define SAN_FACTOR 0.25
#elif defined(__SANITIZE_ADDRESS__)
#define SAN_FACTOR 0.5
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SAN_FACTOR 0.25
#elif __has_feature(address_sanitizer)
#define SAN_FACTOR 0.5
#endif
#endif
#ifndef SAN_FACTOR
#define SAN_FACTOR 1.0
#endif

/* Seconds without progress that the watchdog takes for a hang. */
#define WD_SECS (SAN_FACTOR < 1.0 ? 20 : 8)

/* What a hang is called in the watchdog's message. */
#ifndef WD_HANG
#define WD_HANG "hang"
#endif

/* ---- scale --------------------------------------------------------------- */

static double g_scale __attribute__((unused)) = 1.0;

static inline void init_scale(void)
{
	const char *e = getenv("PP_STRESS_SCALE");
	double v = 1.0;
	if (e && *e) {
		char *end;
		v = strtod(e, &end);
		if (*end || !(v > 0)) {
			fprintf(stderr, "ignoring bad PP_STRESS_SCALE=%s\n", e);
			v = 1.0;
		}
	}
	g_scale = v * SAN_FACTOR;
}

/* n times the scale, sanitizer cut included; at least 1. */
static inline long scaled(long n)
{
	double v = (double)n * g_scale;
	return v < 1 ? 1 : (long)v;
}

/* ---- failures in helper threads -------------------------------------------- */

static atomic_int g_fails __attribute__((unused));

static void tfail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), unused));
static void tfail_at(const char *file, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if (atomic_fetch_add(&g_fails, 1) >= 20)
		return; /* enough said */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s:%d: %s\n", file, line, msg);
}
#define TFAIL(...) tfail_at(__FILE__, __LINE__, __VA_ARGS__)
#define TCHECK(c)                                                            \
	do {                                                                     \
		if (!(c)) {                                                          \
			int e_ = errno;                                                  \
			TFAIL("check failed: %s (errno %d: %s)", #c, e_, strerror(e_));  \
		}                                                                    \
	} while (0)

/* End of every case: helper threads' failures, and no page left holding
 * data. */
static inline void case_end(void)
{
	struct pp_pool_stats st;
	CHECK_EQ(atomic_exchange(&g_fails, 0), 0);
	CHECK_EQ(pp_pool_stats(&st), 0);
	CHECK_EQ(st.pages_in_use, 0);
}

/* ---- watchdog -------------------------------------------------------------- */

static atomic_ulong wd_progress __attribute__((unused)); /* bumped by working threads */
static atomic_ulong wd_last __attribute__((unused));
static atomic_int wd_armed __attribute__((unused));
static _Atomic(const char *) wd_name __attribute__((unused));
static _Atomic(const char *) wd_where __attribute__((unused)); /* what the case waits for */

static inline void wd_tick(void)
{
	atomic_fetch_add_explicit(&wd_progress, 1, memory_order_relaxed);
}

/* Progress, and what the case is going to wait for next. */
static inline void wd_at(const char *where)
{
	atomic_store(&wd_where, where);
	wd_tick();
}

static inline void *wd_thread(void *arg)
{
	sigset_t *set = arg;
	for (;;) {
		int sig;
		if (sigwait(set, &sig) != 0 || !atomic_load(&wd_armed))
			continue;
		unsigned long p = atomic_load(&wd_progress);
		if (p != atomic_load(&wd_last)) {
			atomic_store(&wd_last, p);
			alarm(WD_SECS);
			continue;
		}
		const char *name = atomic_load(&wd_name);
		const char *where = atomic_load(&wd_where);
		fprintf(stderr, "watchdog: %s made no progress for %d s%s%s: " WD_HANG "\n", name,
		        WD_SECS, where ? " while " : "", where ? where : "");
		printf("FAIL %s (hang)\n", name);
		fflush(stdout);
		fflush(stderr);
		_exit(1);
	}
	return NULL;
}

static inline void wd_init(void)
{
	static sigset_t set;
	pthread_t t;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	/* Blocked here, so in every thread made later; only wd_thread takes it. */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&t, NULL, wd_thread, &set) != 0) {
		perror("watchdog thread");
		exit(1);
	}
	pthread_detach(t);
}

static inline void wd_start(const char *name)
{
	atomic_store(&wd_name, name);
	atomic_store(&wd_where, NULL);
	atomic_store(&wd_last, atomic_load(&wd_progress));
	atomic_store(&wd_armed, 1);
	alarm(WD_SECS);
}

static inline void wd_stop(void)
{
	alarm(0);
	atomic_store(&wd_armed, 0);
}

/* ---- cases and threads ----------------------------------------------------- */

static inline double mono_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#define CASE(fn)                                                             \
	do {                                                                     \
		double t0_ = mono_now();                                             \
		wd_start(#fn);                                                       \
		RUN(fn);                                                             \
		wd_stop();                                                           \
		fprintf(stderr, "  %s: %.2f s\n", #fn, mono_now() - t0_);            \
	} while (0)

static inline void start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	if (pthread_create(t, NULL, fn, arg) != 0) {
		perror("pthread_create");
		exit(1);
	}
}

/* Spin until *count reaches n: until n threads have counted themselves in. */
static inline void wait_count(atomic_int *count, int n)
{
	while (atomic_load(count) < n)
		sched_yield();
}

/* A starting gate: count this thread in *ready, then spin until *go is
 * set, so that the gated threads make their calls at the same moment. */
static inline void gate(atomic_int *ready, atomic_int *go)
{
	atomic_fetch_add(ready, 1);
	while (!atomic_load(go))
		sched_yield();
}

#endif
