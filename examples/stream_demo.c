/*
 * stream_demo.c - the main job on built-in data (`make demo`).
 *
 * A producer thread streams 256 MiB of generated data to a consumer thread,
 * first through a kernel pipe, then through a pagepipe (three passes each,
 * alternating), and the consumer proves that every byte arrived in order by
 * checksumming what it reads and comparing with the checksum of what was
 * meant to be sent.  Then it prints how fast each pipe carried each part of
 * the stream.
 *
 * The data is deterministic, made here without any input: a 16 MiB pool of
 * pseudo-random bytes, and a fixed pseudo-random schedule of writes that
 * take slices of the pool at random offsets, in five phases: 1 MiB writes,
 * 64 KiB writes, 4 KiB writes, mixed sizes from 1 B to 128 KiB, and a
 * stretch of tiny writes of 1 to 16 bytes.  The consumer always reads with
 * a 64 KiB buffer.
 *
 * Exits 0 when every pass delivered the exact byte count and checksum,
 * 1 on any mismatch, 2 when something could not be set up.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define POOL (16 * MiB)     /* random pool; slices start anywhere in it */
#define MAX_LEN (128 * KiB) /* longest write: the pool has this much slack */
#define READ_BUF (64 * KiB)
#define PASSES 3
#define NPHASE 5

static const struct phase {
	const char *name;
	size_t bytes;          /* bytes in the phase */
	size_t minlen, maxlen; /* write sizes, uniform in [minlen, maxlen] */
} phases[NPHASE] = {
	{ "1 MiB writes", 96 * MiB, MiB, MiB },
	{ "64 KiB writes", 64 * MiB, 64 * KiB, 64 * KiB },
	{ "4 KiB writes", 32 * MiB, 4 * KiB, 4 * KiB },
	{ "mixed 1B-128KiB", 62 * MiB, 1, 128 * KiB },
	{ "tiny 1-16 B", 2 * MiB, 1, 16 },
};

/* ---- deterministic data ---------------------------------------------- */

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned char *pool; /* POOL + MiB bytes (1 MiB writes need slack) */

/* The schedule: a walk through the phases yielding (offset, length). */
struct sched {
	uint64_t rng;
	int phase;
	size_t left; /* bytes left in the phase */
};

static void sched_init(struct sched *s)
{
	s->rng = 20240229;
	s->phase = 0;
	s->left = phases[0].bytes;
}

/* Next write: returns 0 at the end of the stream. */
static int sched_next(struct sched *s, const unsigned char **data, size_t *len)
{
	while (s->left == 0) {
		if (++s->phase == NPHASE)
			return 0;
		s->left = phases[s->phase].bytes;
	}
	const struct phase *ph = &phases[s->phase];
	uint64_t r = rng_next(&s->rng);
	size_t n = ph->minlen + (size_t)(r % (ph->maxlen - ph->minlen + 1));
	if (n > s->left)
		n = s->left;
	*data = pool + (size_t)((r >> 32) % POOL);
	*len = n;
	s->left -= n;
	return 1;
}

/* ---- checksum ----------------------------------------------------------
 * Four independent lanes over 32-byte blocks, so hashing keeps up with a
 * fast pipe; bytes that do not fill a block wait in a carry buffer, which
 * makes the result independent of how the stream was cut into reads. */

struct csum {
	uint64_t lane[4];
	uint64_t total;
	unsigned char carry[32];
	size_t ncarry;
};

#define CK 0x9fb21c651e98df25ULL

static void csum_init(struct csum *c)
{
	memset(c, 0, sizeof *c);
	for (int i = 0; i < 4; i++)
		c->lane[i] = 0x243f6a8885a308d3ULL * (uint64_t)(i + 1);
}

static inline uint64_t step(uint64_t h, uint64_t w)
{
	h = (h ^ w) * CK;
	return (h << 29) | (h >> 35);
}

static inline void csum_block(struct csum *c, const unsigned char *p)
{
	uint64_t w[4];
	memcpy(w, p, 32);
	for (int i = 0; i < 4; i++)
		c->lane[i] = step(c->lane[i], w[i]);
}

static void csum_add(struct csum *c, const unsigned char *p, size_t n)
{
	c->total += n;
	if (c->ncarry) {
		size_t take = 32 - c->ncarry;
		if (take > n)
			take = n;
		memcpy(c->carry + c->ncarry, p, take);
		c->ncarry += take;
		p += take;
		n -= take;
		if (c->ncarry < 32)
			return;
		csum_block(c, c->carry);
		c->ncarry = 0;
	}
	for (; n >= 32; p += 32, n -= 32)
		csum_block(c, p);
	memcpy(c->carry, p, n);
	c->ncarry = n;
}

static uint64_t csum_final(const struct csum *c)
{
	uint64_t h = c->total;
	for (int i = 0; i < 4; i++)
		h = step(h, c->lane[i]);
	for (size_t i = 0; i < c->ncarry; i++)
		h = step(h, c->carry[i]);
	return step(h, c->ncarry);
}

/* ---- one pass: producer thread -> consumer thread --------------------- */

struct pass {
	int kernel; /* 1: kernel pipe, 0: pagepipe */
	int fd[2];
	struct pp_end *end[2];
	pthread_barrier_t start;
	double t0;             /* producer starts */
	double mark[NPHASE];   /* consumer has received phases 0..i */
	uint64_t received, sum;
	int werr, rerr;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *producer(void *arg)
{
	struct pass *p = arg;
	struct sched s;
	const unsigned char *data;
	size_t len;

	sched_init(&s);
	pthread_barrier_wait(&p->start);
	p->t0 = now();
	while (sched_next(&s, &data, &len)) {
		while (len > 0) {
			ssize_t r = p->kernel ? write(p->fd[1], data, len)
			                      : pp_write(p->end[1], data, len);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				p->werr = errno;
				goto out;
			}
			data += r;
			len -= (size_t)r;
		}
	}
out:
	if (p->kernel)
		close(p->fd[1]);
	else
		pp_close(p->end[1]);
	return NULL;
}

static void *consumer(void *arg)
{
	struct pass *p = arg;
	unsigned char *buf = malloc(READ_BUF);
	struct csum c;
	uint64_t got = 0, boundary = phases[0].bytes;
	int ph = 0;

	if (!buf) {
		p->rerr = ENOMEM;
		return NULL;
	}
	csum_init(&c);
	pthread_barrier_wait(&p->start);
	for (;;) {
		ssize_t r = p->kernel ? read(p->fd[0], buf, READ_BUF)
		                      : pp_read(p->end[0], buf, READ_BUF);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			p->rerr = errno;
			break;
		}
		csum_add(&c, buf, (size_t)r);
		got += (uint64_t)r;
		while (ph < NPHASE && got >= boundary) {
			p->mark[ph++] = now();
			if (ph < NPHASE)
				boundary += phases[ph].bytes;
		}
	}
	for (; ph < NPHASE; ph++) /* short stream: fails below anyway */
		p->mark[ph] = now();
	p->received = got;
	p->sum = csum_final(&c);
	free(buf);
	return NULL;
}

static int run_pass(struct pass *p, int kernel)
{
	pthread_t tp, tc;

	memset(p, 0, sizeof *p);
	p->kernel = kernel;
	if (kernel ? pipe(p->fd) : pp_pipe(p->end, 0)) {
		perror(kernel ? "pipe" : "pp_pipe");
		return -1;
	}
	pthread_barrier_init(&p->start, NULL, 2);
	if (pthread_create(&tc, NULL, consumer, p) ||
	    pthread_create(&tp, NULL, producer, p)) {
		fprintf(stderr, "pthread_create failed\n");
		exit(2);
	}
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	pthread_barrier_destroy(&p->start);
	if (kernel)
		close(p->fd[0]);
	else
		pp_close(p->end[0]);
	return 0;
}

static double median3(double a, double b, double c)
{
	if (a > b) {
		double t = a;
		a = b;
		b = t;
	}
	return c < a ? a : c > b ? b : c;
}

int main(void)
{
	size_t total = 0;
	struct sched s;
	const unsigned char *data;
	size_t len;
	struct csum c;
	uint64_t seed = 42;

	alarm(120); /* never hang: even a slow machine needs far less */
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < NPHASE; i++)
		total += phases[i].bytes;

	/* the built-in data and the checksum the consumer must arrive at */
	pool = malloc(POOL + MiB);
	if (!pool) {
		perror("malloc");
		return 2;
	}
	for (size_t i = 0; i < POOL + MiB; i += 8) {
		uint64_t w = rng_next(&seed);
		memcpy(pool + i, &w, 8);
	}
	csum_init(&c);
	sched_init(&s);
	while (sched_next(&s, &data, &len))
		csum_add(&c, data, len);
	uint64_t want = csum_final(&c);

	printf("stream_demo: %zu MiB of generated data, producer thread -> "
	       "consumer thread, %d passes per pipe\n",
	       total / MiB, PASSES);
	printf("expected: %zu bytes, checksum %016llx\n", total,
	       (unsigned long long)want);

	/* rate[kind][phase][pass], phase NPHASE = the whole stream */
	double rate[2][NPHASE + 1][PASSES];
	int bad = 0;
	for (int pass = 0; pass < PASSES; pass++) {
		for (int k = 0; k < 2; k++) {
			int kernel = (k + pass) % 2 == 0; /* alternate the order */
			struct pass p;
			if (run_pass(&p, kernel) != 0)
				return 2;
			int ok = !p.werr && !p.rerr && p.received == total &&
			         p.sum == want;
			printf("  pass %d %-8s: %llu bytes, checksum %016llx %s\n",
			       pass + 1, kernel ? "kernel" : "pagepipe",
			       (unsigned long long)p.received,
			       (unsigned long long)p.sum, ok ? "OK" : "MISMATCH");
			if (!ok) {
				if (p.werr || p.rerr)
					printf("    write errno %d, read errno %d\n", p.werr,
					       p.rerr);
				bad++;
			}
			double prev = p.t0;
			for (int i = 0; i < NPHASE; i++) {
				rate[kernel][i][pass] = phases[i].bytes / (p.mark[i] - prev);
				prev = p.mark[i];
			}
			rate[kernel][NPHASE][pass] =
			    total / (p.mark[NPHASE - 1] - p.t0);
		}
	}

	printf("\n%-16s %9s %14s %14s %8s\n", "phase (median)", "bytes",
	       "kernel MB/s", "pagepipe MB/s", "ratio");
	for (int i = 0; i <= NPHASE; i++) {
		double k = median3(rate[1][i][0], rate[1][i][1], rate[1][i][2]);
		double q = median3(rate[0][i][0], rate[0][i][1], rate[0][i][2]);
		printf("%-16s %5zu MiB %14.1f %14.1f %7.2fx\n",
		       i < NPHASE ? phases[i].name : "whole stream",
		       (i < NPHASE ? phases[i].bytes : total) / MiB, k / 1e6,
		       q / 1e6, q / k);
	}
	free(pool);
	if (bad) {
		printf("\nFAILED: %d of %d passes lost or corrupted data\n", bad,
		       2 * PASSES);
		return 1;
	}
	printf("\nall %d passes delivered every byte with the right checksum\n",
	       2 * PASSES);
	return 0;
}
