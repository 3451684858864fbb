/*
 * stress_big_writes.c - writes larger than PP_PIPE_BUF from many threads
 * at once (no atomicity promised): every blocking write returns its full
 * count and no byte is lost or made up.
 *
 *   big_writes           4 writers write blocks larger than PIPE_BUF (no
 *                        atomicity promised), 1 reader: every blocking write
 *                        must return its full count, and the total byte
 *                        count and the histogram of byte values (hence the
 *                        sum of all bytes) must be conserved.
 * After the case no page may remain in use in the pool (stress.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "threads.h"
#include "stress.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

/* Writes larger than PIPE_BUF                                         */

struct big {
	struct pp_end *h;
	uint64_t seed;
	long target; /* bytes to write */
	unsigned long long hist[256];
	unsigned long long total;
};

static void *big_writer(void *arg)
{
	struct big *b = arg;
	size_t cap = 200000;
	unsigned char *buf = malloc(cap);
	uint64_t s = b->seed;
	if (!buf)
		abort();
	while ((long)b->total < b->target) {
		size_t len = rnd(&s, 4) == 0 ? 1 + rnd(&s, 4096)
		                            : 4097 + rnd(&s, cap - 4097 + 1);
		gen_payload(buf, len, 99, (uint32_t)rng(&s));
		ssize_t n = pp_write(b->h, buf, len);
		if (n != (ssize_t)len) {
			TFAIL("blocking write of %zu returned %zd (errno %d)", len, n,
			      errno);
			break;
		}
		for (size_t i = 0; i < len; i++)
			b->hist[buf[i]]++;
		b->total += len;
		t_progress();
	}
	free(buf);
	TCHECK(pp_close(b->h) == 0);
	return NULL;
}

static void *big_reader(void *arg)
{
	struct big *b = arg;
	size_t cap = 131072;
	unsigned char *buf = malloc(cap);
	uint64_t s = b->seed;
	if (!buf)
		abort();
	for (;;) {
		size_t want = rnd(&s, 4) == 0 ? 1 + rnd(&s, 100) : 1 + rnd(&s, cap);
		ssize_t n = pp_read(b->h, buf, want);
		if (n < 0) {
			TFAIL("read failed (errno %d)", errno);
			break;
		}
		if (n == 0)
			break;
		if ((size_t)n > want)
			TFAIL("read of %zu returned %zd", want, n);
		for (ssize_t i = 0; i < n; i++)
			b->hist[buf[i]]++;
		b->total += (size_t)n;
		t_progress();
	}
	free(buf);
	TCHECK(pp_close(b->h) == 0);
	return NULL;
}

static void big_writes(void)
{
	enum { NW = 4 };
	struct big *b = calloc(NW + 1, sizeof *b);
	pthread_t th[NW + 1];
	struct pp_end *e[2];
	if (!b)
		abort();
	CHECK_EQ(pp_pipe(e, PP_NOSIGPIPE), 0);
	for (int i = 0; i <= NW; i++) {
		b[i].h = pp_dup(e[i < NW ? 1 : 0]);
		CHECK(b[i].h != NULL);
		b[i].seed = new_seed();
		b[i].target = t_scaled_san(8L << 20);
	}
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_EQ(pp_close(e[1]), 0);
	for (int i = 0; i <= NW; i++)
		start_thread(&th[i], i < NW ? big_writer : big_reader, &b[i]);
	for (int i = 0; i <= NW; i++)
		join_thread(th[i]);

	unsigned long long wtot = 0, wsum = 0, rsum = 0;
	int hist_ok = 1;
	for (int v = 0; v < 256; v++) {
		unsigned long long w = 0;
		for (int i = 0; i < NW; i++)
			w += b[i].hist[v];
		wsum += w * (unsigned)v;
		rsum += b[NW].hist[v] * (unsigned)v;
		if (w != b[NW].hist[v])
			hist_ok = 0;
	}
	for (int i = 0; i < NW; i++)
		wtot += b[i].total;
	CHECK(wtot >= (unsigned long long)NW * (unsigned long long)b[0].target);
	CHECK_EQ(b[NW].total, wtot);
	CHECK_EQ(rsum, wsum);
	CHECK(hist_ok);
	free(b);
}

int main(void)
{
	stress_start("stress_big_writes");
	RUN(big_writes);
	return T_DONE();
}
