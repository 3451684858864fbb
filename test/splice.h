/*
 * splice.h - what the programs on transfers between pipes (splice_*.c,
 * peek_consume.c) share, after harness.h and helpers.h:
 *   - PG, IOV_MAX, min_sz, res_str (a result, the count or "-1 (why)"),
 *     close_fan (a pipe and a fan-out's outputs);
 *   - a seeded xorshift64* generator (struct rng, rng_seed, rnd, below),
 *     so that every random sequence can be replayed from its seed;
 *   - put(): write n bytes of a test stream (helpers.h's tp_fill);
 *   - jobs: one call (splice, tee, fanout, read, write or peek, on kernel
 *     pipes or pagepipes) in a thread of its own: job_new, job_start
 *     (which waits until the thread sleeps in the call), job_wait,
 *     job_done, job_res (the count or -errno), job_join; with
 *     catch_sigpipe the thread blocks SIGPIPE and reports whether the call
 *     raised it.
 *
 * Everything is static inline, so a program using part of it compiles
 * warning-free.
 */
#ifndef PP_TEST_SPLICE_H
#define PP_TEST_SPLICE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

#define PG PP_PAGE_SIZE
#define BIGBUF (320u * 1024) /* buffers that hold whatever a read may return */

static inline size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

static inline const char *res_str(long v, char *buf, size_t n)
{
	if (v < 0)
		snprintf(buf, n, "-1 (%s)", strerror((int)-v));
	else
		snprintf(buf, n, "%ld", v);
	return buf;
}

/* Close both ends of a pipe and of n more (a fan-out's outputs). */
static inline void close_fan(struct pp_end *in[2], struct pp_end *out[][2], int n)
{
	pp_close(in[0]);
	pp_close(in[1]);
	for (int k = 0; k < n; k++) {
		pp_close(out[k][0]);
		pp_close(out[k][1]);
	}
}

/* ---- random numbers (xorshift64*) ---------------------------------------- */

struct rng {
	uint64_t s;
};

static inline uint64_t rnd(struct rng *r)
{
	uint64_t x = r->s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static inline size_t below(struct rng *r, size_t n)
{
	return n ? (size_t)(rnd(r) % n) : 0;
}

static inline void rng_seed(struct rng *r, uint64_t seed)
{
	r->s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
	if (!r->s)
		r->s = 1;
	for (int i = 0; i < 4; i++)
		rnd(r);
}

/* Write n bytes of stream seed from offset off. */
static inline void put(struct pp_end *w, size_t n, unsigned seed, size_t off)
{
	unsigned char *buf = malloc(n);
	tp_fill(buf, n, seed, off);
	CHECK_EQ(pp_write(w, buf, n), (long)n);
	free(buf);
}

/* ---- blocking: threads ----------------------------------------------------- */

enum { J_SPLICE, J_TEE, J_FANOUT, J_READ, J_WRITE, J_PEEK };

struct job {
	int kind;
	struct tp *in, *out; /* kernel or pagepipe; in: read from, out: write to */
	struct pp_end *fin, *fouts[4];
	int n;
	size_t len;
	unsigned flags;
	int catch_sigpipe; /* block SIGPIPE in the thread and report it */
	pthread_t th;
	/* results, published with __atomic */
	long res;
	int sigpipe;
	pid_t tid;
	int done;
	unsigned char buf[8192];
	struct iovec iov[8];
};

static inline void *job_main(void *arg)
{
	struct job *j = arg;
	sigset_t old;
	if (j->catch_sigpipe)
		tp_sigpipe_block(&old);
	__atomic_store_n(&j->tid, tp_gettid(), __ATOMIC_SEQ_CST);
	ssize_t r = -1;
	switch (j->kind) {
	case J_SPLICE:
		r = j->in->kernel ? splice(j->in->fd[0], NULL, j->out->fd[1], NULL, j->len, j->flags)
		                  : pp_splice(j->in->e[0], j->out->e[1], j->len, j->flags);
		break;
	case J_TEE:
		r = j->in->kernel ? tee(j->in->fd[0], j->out->fd[1], j->len, j->flags)
		                  : pp_tee(j->in->e[0], j->out->e[1], j->len, j->flags);
		break;
	case J_FANOUT:
		r = pp_fanout(j->fin, j->fouts, j->n, j->len, j->flags);
		break;
	case J_READ:
		r = tp_read(j->in, j->buf, min_sz(j->len, sizeof j->buf));
		break;
	case J_WRITE:
		memset(j->buf, 'w', sizeof j->buf);
		r = tp_write(j->out, j->buf, min_sz(j->len, sizeof j->buf));
		break;
	case J_PEEK:
		r = pp_peek(j->fin, j->iov, 8);
		break;
	}
	__atomic_store_n(&j->res, tp_res(r), __ATOMIC_SEQ_CST);
	if (j->catch_sigpipe) {
		__atomic_store_n(&j->sigpipe, tp_sigpipe_taken(), __ATOMIC_SEQ_CST);
		tp_sigpipe_restore(&old);
	}
	__atomic_store_n(&j->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Start the job and wait until it sleeps in the call (0 if it never did). */
static inline int job_start(struct job *j)
{
	__atomic_store_n(&j->tid, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&j->done, 0, __ATOMIC_SEQ_CST);
	if (pthread_create(&j->th, NULL, job_main, j))
		return 0;
	while (!__atomic_load_n(&j->tid, __ATOMIC_SEQ_CST))
		t_sleep_ms(1);
	return tp_wait_asleep(__atomic_load_n(&j->tid, __ATOMIC_SEQ_CST), 5.0) &&
	       !__atomic_load_n(&j->done, __ATOMIC_SEQ_CST);
}

static inline int job_done(struct job *j)
{
	return __atomic_load_n(&j->done, __ATOMIC_SEQ_CST);
}

/* Wait up to secs for the job to finish; 1 if it did. */
static inline int job_wait(struct job *j, double secs)
{
	double end = t_now() + secs;
	while (!job_done(j) && t_now() < end)
		t_sleep_ms(2);
	return job_done(j);
}

static inline long job_res(struct job *j)
{
	return __atomic_load_n(&j->res, __ATOMIC_SEQ_CST);
}

static inline void job_join(struct job *j)
{
	pthread_join(j->th, NULL);
}

static inline struct job *job_new(int kind, struct tp *in, struct tp *out, size_t len, unsigned fl)
{
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		abort();
	j->kind = kind;
	j->in = in;
	j->out = out;
	j->len = len;
	j->flags = fl;
	return j;
}

#endif
