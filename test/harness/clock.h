/*
 * clock.h - the monotonic clock, for test programs and benchmarks alike:
 * t_now() is seconds since an arbitrary start, t_sleep_ms() sleeps through
 * signals.  (A header of its own, so that bench/bench.h can take it
 * without the test scaffold.)
 */
#ifndef PP_TEST_CLOCK_H
#define PP_TEST_CLOCK_H

#include <errno.h>
#include <time.h>

static inline double t_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleep ms milliseconds, the whole time even if a signal handler runs. */
static inline void t_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

#endif
