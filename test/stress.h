/*
 * stress.h - what the stress programs (stress_*.c: many threads on one
 * pagepipe at once) share, after harness.h and threads.h: a seeded
 * generator (rng, rnd; new_seed gives each use its own seed), jitter() to
 * vary interleavings, join_thread, gen_payload (the pseudo-random bytes
 * of a writer's n-th block), struct gated (a call made by many threads
 * at the same moment), and stress_start(), which main calls first: it
 * picks the run's seed and prints it on stderr with the scale
 * (PP_STRESS_SEED=N repeats a run's choices; thread timing still varies),
 * and has threads.h's threads_case_end checked after every case (helper
 * threads' failures, no pool page left in use).
 *
 * Size: PP_TEST_SCALE (default 1) multiplies the amount of data and the
 * number of iterations; builds with ASan or TSan first divide the defaults
 * (by 2 and 4).  The harness's watchdog fails the running case loudly when
 * no thread has made progress for PP_CASE_TIMEOUT seconds; it is a
 * process of its own, so it never interrupts a pagepipe call.
 *
 * Everything is static inline, so a program using part of it compiles
 * warning-free.
 */
#ifndef PP_TEST_STRESS_H
#define PP_TEST_STRESS_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "threads.h"

/* ------------------------------------------------------------------ */
/* Random numbers                                                      */

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static inline uint64_t rng(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ULL;
	return mix64(*s);
}

/* Uniform-ish in [0, n). */
static inline size_t rnd(uint64_t *s, size_t n)
{
	return (size_t)(rng(s) % n);
}

static uint64_t g_seed __attribute__((unused));

static inline uint64_t new_seed(void)
{
	return mix64(++g_seed);
}

/* ------------------------------------------------------------------ */
/* Threads (TFAIL and threads_case_end are in threads.h)               */

static inline void join_thread(pthread_t t)
{
	pthread_join(t, NULL);
}

/* Pause 0..max_us microseconds, or just yield, to vary interleavings. */
static inline void jitter(uint64_t *s, unsigned max_us)
{
	switch (rnd(s, 3)) {
	case 0:
		break;
	case 1:
		sched_yield();
		break;
	default:
		usleep((useconds_t)rnd(s, max_us + 1));
		break;
	}
}

static inline void gen_payload(unsigned char *p, size_t n, unsigned id, uint32_t seq)
{
	uint64_t s = mix64(((uint64_t)id << 32 | seq) + 0x1234567);
	while (n >= 8) {
		uint64_t v = rng(&s);
		memcpy(p, &v, 8);
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t v = rng(&s);
		memcpy(p, &v, n);
	}
}

/* A thread that makes one call on a handle (pp_close, pp_fd) as soon as
 * the starting gate opens, racing the others. */
struct gated {
	int (*call)(struct pp_end *);
	struct pp_end *h;
	atomic_int *go, *ready;
	int ret;
};

static inline void *gated_main(void *arg)
{
	struct gated *c = arg;
	gate(c->ready, c->go);
	c->ret = c->call(c->h);
	return NULL;
}

/* Before the first case: the seed (printed, so that a run can be
 * repeated) and the check after every case. */
static inline void stress_start(const char *prog)
{
	setvbuf(stderr, NULL, _IOLBF, 0);
	g_seed = (uint64_t)time(NULL);
	if (getenv("PP_STRESS_SEED"))
		g_seed = strtoull(getenv("PP_STRESS_SEED"), NULL, 0);
	fprintf(stderr, "%s: PP_STRESS_SEED=%llu scale %.2f\n", prog,
	        (unsigned long long)g_seed, t_scale() * T_SAN_FACTOR);
	t_around_cases(NULL, threads_case_end);
}

#endif
