/*
 * threads.h - what the multi-threaded tests (the stress_* programs,
 * wakeup.c, soak.c) share, after harness.h.
 *
 *   - failures seen by helper threads: TFAIL(fmt, ...) / TCHECK(cond)
 *     print and count them (the first 20 are printed), and
 *     threads_case_end(), the check at the end of every case (stress and
 *     wakeup run it after each through t_around_cases), turns the count
 *     into a CHECK, together with "no pool page left in use";
 *   - start_thread(), and wait_count() / gate() to line threads up;
 *   - PPFD_WRITE_EVENTS: the poll(2) event pp_fd() reports for a ready
 *     write end.
 * Working threads call harness.h's t_progress() as they get on, so that
 * the watchdog tells a slow case from a hung one.
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
#include "harness/harness.h"

/*
 * The poll(2) event that pp_fd() reports for a ready write end (it is made
 * readable).  Only redefined when a test is checked against kernel pipes
 * through a shim, where the descriptor is the pipe itself (POLLOUT).
 */
#ifndef PPFD_WRITE_EVENTS
#define PPFD_WRITE_EVENTS POLLIN
#endif

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

/* After every case: helper threads' failures, and no page left holding
 * data. */
static inline void threads_case_end(void)
{
	struct pp_pool_stats st;
	CHECK_EQ(atomic_exchange(&g_fails, 0), 0);
	CHECK_EQ(pp_pool_stats(&st), 0);
	CHECK_EQ(st.pages_in_use, 0);
}

/* ---- threads --------------------------------------------------------------- */

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
