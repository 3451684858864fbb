/*
 * vmsplice.h - what the programs on pp_vmsplice (vmsplice_*.c) share,
 * after harness.h and helpers.h:
 *   - the release log: on_release records every callback call (segment
 *     base and length) in a struct rel_log, on_release_poison also
 *     overwrites the released memory at once, as a caller reusing its
 *     buffer would, so that a release that comes before a reader has
 *     copied the bytes out, even by a moment, shows as wrong data;
 *     log_count, log_calls_for and CHECK_RELEASED ask it what came;
 *   - the check after every case (t_around_cases(NULL,
 *     vmsplice_case_end)): no callback got an arg no test gave it, no pool
 *     page is in use;
 *   - a deterministic generator (rnd, rnd_below, fill_random), mkpipe,
 *     read_n, drain, fill_slots (fill a pipe but for some slots);
 *   - struct abc: segments A, B and C of caller memory, and reading a
 *     pipe's last copy of them (abc_read_last);
 *   - struct blocker: a pp_vmsplice in a thread of its own, and
 *     wait_asleep(), true once that thread sleeps in the call.
 *
 * Everything is static inline, so a program using part of it compiles
 * warning-free.
 */
#ifndef PP_TEST_VMSPLICE_H
#define PP_TEST_VMSPLICE_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"

/* ---- helpers -------------------------------------------------------- */

static uint64_t rng_state __attribute__((unused)) = 0x9e3779b97f4a7c15ull;

static inline uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static inline size_t rnd_below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static inline void fill_random(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(rnd() >> 24);
}

/* Callbacks that got an arg no test gave them. */
static atomic_int foreign_args __attribute__((unused));

/* The release log: what each callback call reported, in order. */
#define LOG_MAGIC 0x6c6f6721
#define LOG_MAX 512
struct rel_log {
	int magic;
	pthread_mutex_t mu;
	int count;
	struct iovec seg[LOG_MAX];
};

static inline void log_init(struct rel_log *l)
{
	l->magic = LOG_MAGIC;
	pthread_mutex_init(&l->mu, NULL);
	l->count = 0;
}

static inline void log_fini(struct rel_log *l)
{
	pthread_mutex_destroy(&l->mu);
	l->magic = 0;
}

static inline void on_release(void *arg, const struct iovec *iov)
{
	struct rel_log *l = arg;
	if (!l || l->magic != LOG_MAGIC || !iov) {
		atomic_fetch_add(&foreign_args, 1);
		return;
	}
	pthread_mutex_lock(&l->mu);
	if (l->count < LOG_MAX)
		l->seg[l->count] = *iov;
	l->count++;
	pthread_mutex_unlock(&l->mu);
}

/* The same, then poison the released bytes, as a caller reusing its
 * buffer at once would: a release that came before a reader copied the
 * bytes out shows as wrong data.  For callers that compare what they read
 * against a copy of their memory, never against the memory itself. */
static inline void on_release_poison(void *arg, const struct iovec *iov)
{
	on_release(arg, iov);
	if (iov && iov->iov_base)
		memset(iov->iov_base, 0xEE, iov->iov_len);
}

static inline int log_count(struct rel_log *l)
{
	pthread_mutex_lock(&l->mu);
	int n = l->count;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* Calls that reported base; *len gets the last one's length. */
static inline int log_calls_for(struct rel_log *l, const void *base, size_t *len)
{
	int n = 0;
	pthread_mutex_lock(&l->mu);
	for (int i = 0; i < l->count && i < LOG_MAX; i++)
		if (l->seg[i].iov_base == base) {
			n++;
			if (len)
				*len = l->seg[i].iov_len;
		}
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* CHECK that base was released exactly once, with length len. */
#define CHECK_RELEASED(l, base, len)                                          \
	do {                                                                     \
		size_t got_len_ = (size_t)-1;                                        \
		CHECK_EQ(log_calls_for((l), (base), &got_len_), 1);                  \
		CHECK_EQ(got_len_, (len));                                           \
	} while (0)

static inline int mkpipe(struct pp_end *p[2], int flags)
{
	p[0] = p[1] = NULL;
	int r = pp_pipe(p, flags);
	CHECK_EQ(r, 0);
	return r;
}

/* Read exactly n bytes (the pipe must hold them); the count read. */
static inline size_t read_n(struct pp_end *rd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pp_read(rd, (char *)buf + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Discard everything the pipe holds now; the bytes dropped. */
static inline size_t drain(struct pp_end *rd)
{
	static char sink[65536];
	size_t total = 0;
	int n;
	while ((n = pp_nread(rd)) > 0) {
		ssize_t r = pp_read(rd, sink, (size_t)n < sizeof sink ? (size_t)n : sizeof sink);
		if (r <= 0)
			break;
		total += (size_t)r;
	}
	return total;
}

/* Fill the pipe's slots with full pages, leaving `free_slots` free. */
static inline void fill_slots(struct pp_end *wr, int free_slots)
{
	static char page[4096];
	long slots = pp_getsize(wr) / 4096;
	for (long i = 0; i < slots - free_slots; i++)
		CHECK_EQ(pp_write(wr, page, sizeof page), 4096);
}

/* Wait until thread tid has been asleep for a while (past its spin), or
 * until *done; false when neither happened within 5 s. */
static inline bool wait_asleep(_Atomic pid_t *tidp, atomic_int *done)
{
	double end = t_now() + 5;
	int seen = 0;
	while (t_now() < end) {
		if (atomic_load(done))
			return true;
		pid_t tid = atomic_load(tidp);
		if (tid && tp_thread_state(tid) == 'S') {
			if (++seen >= 5)
				return true;
		} else {
			seen = 0;
		}
		t_sleep_ms(2);
	}
	return false;
}

/* After every case (t_around_cases): no callback got a foreign arg, no
 * pool page is in use. */
static inline void vmsplice_case_end(void)
{
	CHECK_EQ(atomic_exchange(&foreign_args, 0), 0);
	CHECK_EQ(tp_pages_in_use(), 0);
}

/* ---- release only when the last consumer is done --------------------- */

/* Three segments: A of 5000 bytes (chunks 4096 + 904), B 4096, C 1. */
struct abc {
	unsigned char *mem;
	struct iovec iov[3];
	unsigned char want[9097];
};

static inline void abc_init(struct abc *s)
{
	s->mem = malloc(3 * 8192);
	s->iov[0] = (struct iovec){ s->mem + 3, 5000 };
	s->iov[1] = (struct iovec){ s->mem + 8192 + 1, 4096 };
	s->iov[2] = (struct iovec){ s->mem + 16384 + 4095, 1 };
	size_t at = 0;
	for (int i = 0; i < 3; i++) {
		fill_random(s->iov[i].iov_base, s->iov[i].iov_len);
		memcpy(s->want + at, s->iov[i].iov_base, s->iov[i].iov_len);
		at += s->iov[i].iov_len;
	}
}

/* Read the A/B/C stream from rd, checking the releases step by step: the
 * log must have `before` calls plus those of segments whose last chunk has
 * now been read by this, the last consumer. */
static inline void abc_read_last(struct abc *s, struct pp_end *rd, struct rel_log *log)
{
	unsigned char got[9097];
	CHECK_EQ(log_count(log), 0);
	CHECK_EQ(read_n(rd, got, 4096), 4096); /* A's first chunk */
	CHECK_EQ(log_count(log), 0);
	CHECK_EQ(read_n(rd, got + 4096, 903), 903); /* all of A but one byte */
	CHECK_EQ(log_count(log), 0);
	CHECK_EQ(read_n(rd, got + 4999, 1), 1); /* A done */
	CHECK_EQ(log_count(log), 1);
	CHECK_RELEASED(log, s->iov[0].iov_base, 5000);
	CHECK_EQ(read_n(rd, got + 5000, 4000), 4000);
	CHECK_EQ(log_count(log), 1);
	CHECK_EQ(read_n(rd, got + 9000, 97), 97); /* B's last 96 and C */
	CHECK_EQ(log_count(log), 3);
	CHECK_RELEASED(log, s->iov[1].iov_base, 4096);
	CHECK_RELEASED(log, s->iov[2].iov_base, 1);
	CHECK(memcmp(got, s->want, sizeof got) == 0);
}

/* ---- blocking -------------------------------------------------------- */

struct blocker {
	struct pp_end *end;
	const struct iovec *iov;
	unsigned long n;
	struct rel_log *log;
	int is_write; /* pp_write of iov[0] instead of pp_vmsplice */
	_Atomic pid_t tid;
	atomic_int done;
	ssize_t ret;
	int err;
};

static inline void *blocker_main(void *arg)
{
	struct blocker *b = arg;
	atomic_store(&b->tid, gettid());
	errno = 0;
	if (b->is_write)
		b->ret = pp_write(b->end, b->iov[0].iov_base, b->iov[0].iov_len);
	else
		b->ret = pp_vmsplice(b->end, b->iov, b->n, 0, on_release, b->log);
	b->err = errno;
	atomic_store(&b->done, 1);
	return NULL;
}

#endif
