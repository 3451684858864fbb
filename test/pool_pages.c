/*
 * pool_pages.c - the page pool: pages are taken when data arrives and given
 * back as soon as they are drained.
 *
 * Checks: an idle, empty pipe holds no data page (pages_in_use returns to
 * 0 after every drain, and after pp_close of a pipe that still held data);
 * pp_pool_setlimit(n) makes a write that needs a page beyond the limit fail
 * with ENOMEM when it wrote nothing or return its partial count, with no
 * byte lost or corrupted and the pipe usable once the limit is lifted
 * (also across pipes, and with merges that need no page);
 * pp_pool_setcache/pp_pool_trim bound pages_cached and cached pages are
 * reused; argument errors; and many pipes streaming at once leave nothing
 * behind.  The pool is process-wide: every case starts from an empty pool
 * and restores the default limit (none) and cache bound (64).
 */
#include "harness/harness.h"
#include "harness/helpers.h"

#define DEFAULT_CACHE 64

static struct pp_pool_stats stats(void)
{
	return tp_pool_stats();
}

static long in_use(void)
{
	return stats().pages_in_use;
}

static long cached(void)
{
	return stats().pages_cached;
}

static void reset_pool(void)
{
	pp_pool_setlimit(0);
	pp_pool_setcache(DEFAULT_CACHE);
	struct pp_pool_stats st = stats();
	CHECK_EQ(st.limit, 0);
	CHECK_EQ(st.cache_max, DEFAULT_CACHE);
	CHECK(st.pages_cached <= DEFAULT_CACHE);
}

/* Write stream bytes [*wpos, *wpos + n) and advance *wpos by what went in. */
static ssize_t put(struct pp_end *w, size_t n, unsigned seed, size_t *wpos)
{
	static char buf[1 << 18];
	if (n > sizeof buf)
		n = sizeof buf;
	tp_fill(buf, n, seed, *wpos);
	ssize_t r = pp_write(w, buf, n);
	if (r > 0)
		*wpos += (size_t)r;
	return r;
}

/* Read everything there is (non-blocking end) and check it is the stream
 * from *rpos on; returns the byte count. */
static size_t drain_check(struct pp_end *r, unsigned seed, size_t *rpos)
{
	static char buf[65536];
	size_t total = 0;
	for (;;) {
		ssize_t n = pp_read(r, buf, sizeof buf);
		if (n <= 0)
			break;
		long b = tp_verify(buf, (size_t)n, seed, *rpos);
		if (b >= 0) {
			fprintf(stderr, "corrupt byte at stream offset %zu\n",
			        *rpos + (size_t)b);
			t_case_failed = 1;
		}
		*rpos += (size_t)n;
		total += (size_t)n;
	}
	return total;
}

/* An empty pipe holds no page; pages follow the data in and out. */
static void idle_pipe_holds_no_pages(void)
{
	struct pp_end *e[2];
	char buf[8192];
	size_t wpos = 0, rpos = 0;
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(put(e[1], 100, 1, &wpos), 100);
	CHECK_EQ(in_use(), 1);
	CHECK_EQ(put(e[1], 100, 1, &wpos), 100); /* merged: same page */
	CHECK_EQ(in_use(), 1);
	CHECK_EQ(pp_read(e[0], buf, 150), 150);
	rpos += 150;
	CHECK_EQ(in_use(), 1);                   /* 50 bytes still there */
	CHECK_EQ(drain_check(e[0], 1, &rpos), 50);
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(put(e[1], 65536, 1, &wpos), 65536);
	CHECK_EQ(in_use(), 16);
	CHECK_EQ(pp_read(e[0], buf, 4096), 4096);
	rpos += 4096;
	CHECK_EQ(in_use(), 15);
	CHECK_EQ(pp_read(e[0], buf, 6000), 6000);
	rpos += 6000;
	CHECK_EQ(in_use(), 14);
	CHECK_EQ(drain_check(e[0], 1, &rpos), 65536 - 10096);
	CHECK_EQ(in_use(), 0);
	/* Bigger ring, same story. */
	CHECK_EQ(pp_setsize(e[0], 1 << 20), 1 << 20);
	CHECK_EQ(put(e[1], 100000, 1, &wpos), 100000);
	CHECK_EQ(in_use(), 25);
	CHECK_EQ(drain_check(e[0], 1, &rpos), 100000);
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(rpos, wpos);
	pp_close(e[0]);
	pp_close(e[1]);

	/* Packet mode: one page per packet, none once read. */
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK | PP_PACKET), 0);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(pp_write(e[1], "p", 1), 1);
	CHECK_EQ(in_use(), 5);
	CHECK_EQ(pp_read(e[0], buf, 100), 1);
	CHECK_EQ(in_use(), 4);
	pp_close(e[0]);
	pp_close(e[1]);
	CHECK_EQ(in_use(), 0);
	reset_pool();
}

/* Data left in a pipe is freed with its last end, whichever closes last. */
static void close_frees_pages(void)
{
	struct pp_end *e[2];
	size_t wpos = 0;
	CHECK_EQ(in_use(), 0);

	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(put(e[1], 40000, 2, &wpos), 40000);
	CHECK_EQ(in_use(), 10);
	pp_close(e[1]);
	CHECK_EQ(in_use(), 10); /* still readable */
	pp_close(e[0]);
	CHECK_EQ(in_use(), 0);

	CHECK_EQ(pp_pipe(e, 0), 0);
	struct pp_end *w2 = pp_dup(e[1]);
	CHECK_EQ(put(e[1], 5000, 2, &wpos), 5000);
	pp_close(e[0]);
	pp_close(e[1]);
	CHECK(in_use() <= 2);
	pp_close(w2);
	CHECK_EQ(in_use(), 0);

	/* Many pipes full of data, closed in a mixed order. */
	struct pp_end *p[8][2];
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(pp_pipe(p[i], PP_NONBLOCK), 0);
		CHECK_EQ(put(p[i][1], 4096 * (size_t)(i + 1), 2, &wpos), 4096 * (i + 1));
	}
	CHECK_EQ(in_use(), 36);
	for (int i = 0; i < 8; i++) {
		pp_close(p[i][i & 1]);
		pp_close(p[i][!(i & 1)]);
	}
	CHECK_EQ(in_use(), 0);
	reset_pool();
}

/* The limit: ENOMEM with nothing written, the partial count otherwise,
 * nothing lost, and normal service once lifted. */
static void limit_enomem_and_partial(void)
{
	struct pp_end *e[2];
	size_t wpos = 0, rpos = 0;
	char buf[4096];
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(pp_pool_setlimit(2), 0);
	CHECK_EQ(stats().limit, 2);

	/* Blocking pipe: a 3-page write stops after 2 pages, without waiting. */
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(put(e[1], 3 * 4096, 3, &wpos), 8192);
	CHECK_EQ(in_use(), 2);
	CHECK_ERR(put(e[1], 4096, 3, &wpos), ENOMEM);
	CHECK_ERR(put(e[1], 1, 3, &wpos), ENOMEM); /* last page is full */
	struct iovec iov[2] = { { buf, 10 }, { buf, 10 } };
	CHECK_ERR(pp_writev(e[1], iov, 2), ENOMEM);
	CHECK_EQ(pp_nread(e[0]), 8192);
	pp_setfl(e[0], PP_NONBLOCK);
	CHECK_EQ(pp_read(e[0], buf, 4096), 4096);
	CHECK_EQ(tp_verify(buf, 4096, 3, rpos), -1);
	rpos += 4096;
	CHECK_EQ(in_use(), 1);
	/* A page came free: one page's worth goes in. */
	CHECK_EQ(put(e[1], 10000, 3, &wpos), 4096);
	CHECK_EQ(drain_check(e[0], 3, &rpos), 8192);
	CHECK_EQ(in_use(), 0);

	/* Merges need no page: they still work at the limit. */
	CHECK_EQ(pp_pool_setlimit(1), 2);
	CHECK_EQ(put(e[1], 100, 3, &wpos), 100);
	CHECK_EQ(put(e[1], 100, 3, &wpos), 100);
	CHECK_ERR(put(e[1], 4000, 3, &wpos), ENOMEM); /* 200 + 4000 > 4096 */
	CHECK_EQ(put(e[1], 3896, 3, &wpos), 3896);
	CHECK_EQ(in_use(), 1);
	/* A long write: its first len % 4096 bytes merge, then no page. */
	CHECK_EQ(drain_check(e[0], 3, &rpos), 4096);
	CHECK_EQ(put(e[1], 100, 3, &wpos), 100);
	CHECK_EQ(pp_pool_setlimit(2), 1);
	CHECK_EQ(put(e[1], 10000, 3, &wpos), 1808 + 4096);
	CHECK_EQ(in_use(), 2);

	/* Lift the limit: the rest goes in, and the stream is whole. */
	CHECK_EQ(pp_pool_setlimit(0), 2);
	CHECK_EQ(put(e[1], 30000, 3, &wpos), 30000);
	CHECK_EQ(drain_check(e[0], 3, &rpos), 100 + 1808 + 4096 + 30000);
	CHECK_EQ(rpos, wpos);
	CHECK_EQ(in_use(), 0);
	pp_close(e[0]);
	pp_close(e[1]);

	/* Non-blocking: ENOMEM too (a slot is free; a page is not). */
	CHECK_EQ(pp_pool_setlimit(1), 0);
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(put(e[1], 4096, 3, &wpos), 4096);
	CHECK_ERR(put(e[1], 10, 3, &wpos), ENOMEM);
	CHECK_ERR(put(e[1], 8192, 3, &wpos), ENOMEM);
	CHECK_EQ(drain_check(e[0], 3, &rpos), 4096);
	CHECK_EQ(rpos, wpos);
	pp_close(e[0]);
	pp_close(e[1]);
	CHECK_EQ(in_use(), 0);
	reset_pool();
}

/* The limit counts pages of every pipe, and lowering it under what is in
 * use keeps the data. */
static void limit_is_pool_wide(void)
{
	struct pp_end *a[2], *b[2];
	size_t wa = 0, ra = 0, wb = 0, rb = 0;
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(b, PP_NONBLOCK), 0);
	CHECK_EQ(put(a[1], 5 * 4096, 4, &wa), 5 * 4096);
	CHECK_EQ(pp_pool_setlimit(7), 0);
	CHECK_EQ(put(b[1], 5 * 4096, 5, &wb), 2 * 4096);
	CHECK_ERR(put(a[1], 1, 4, &wa), ENOMEM);
	CHECK_EQ(in_use(), 7);
	CHECK_EQ(pp_pool_setlimit(3), 7); /* below what is in use */
	CHECK_ERR(put(b[1], 4096, 5, &wb), ENOMEM);
	CHECK_EQ(drain_check(a[0], 4, &ra), 5 * 4096);
	CHECK_EQ(in_use(), 2);
	CHECK_EQ(put(b[1], 3 * 4096, 5, &wb), 4096);
	CHECK_EQ(drain_check(b[0], 5, &rb), 3 * 4096);
	CHECK_EQ(ra, wa);
	CHECK_EQ(rb, wb);
	CHECK_EQ(in_use(), 0);
	CHECK_ERR(pp_pool_setlimit(-1), EINVAL);
	CHECK_EQ(stats().limit, 3);
	pp_close(a[0]);
	pp_close(a[1]);
	pp_close(b[0]);
	pp_close(b[1]);
	reset_pool();
}

/* A blocking writer that runs into the limit mid-way returns its count
 * while a reader is concurrently draining: nothing lost. */
struct lim_reader {
	struct pp_end *r;
	size_t got;
	long bad;
};

static void *lim_read(void *arg)
{
	struct lim_reader *l = arg;
	static char buf[8192];
	l->bad = -1;
	for (;;) {
		ssize_t n = pp_read(l->r, buf, sizeof buf);
		if (n <= 0)
			break;
		long b = tp_verify(buf, (size_t)n, 6, l->got);
		if (b >= 0 && l->bad < 0)
			l->bad = (long)(l->got + (size_t)b);
		l->got += (size_t)n;
	}
	return NULL;
}

static void limit_with_concurrent_reader(void)
{
	struct pp_end *e[2];
	pthread_t th;
	size_t wpos = 0;
	long enomem = 0, partial = 0;
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pp_pool_setlimit(3), 0);
	struct lim_reader l = { e[0], 0, -1 };
	CHECK_EQ(pthread_create(&th, NULL, lim_read, &l), 0);
	size_t total = (size_t)t_scaled(4 << 20);
	while (wpos < total) {
		size_t n = 1 + (wpos * 7919) % 30000;
		if (n > total - wpos)
			n = total - wpos;
		ssize_t w = put(e[1], n, 6, &wpos);
		if (w < 0) {
			CHECK_EQ(errno, ENOMEM);
			if (errno != ENOMEM)
				break;
			enomem++;
			sched_yield();
		} else if ((size_t)w < n) {
			partial++;
		}
	}
	pp_close(e[1]);
	pthread_join(th, NULL);
	CHECK_EQ(l.got, wpos);
	CHECK_EQ(l.bad, -1);
	CHECK(in_use() == 0);
	pp_close(e[0]);
	fprintf(stderr, "info: %ld ENOMEM, %ld partial writes\n", enomem, partial);
	reset_pool();
}

/* The cache: bounded by pp_pool_setcache, emptied by pp_pool_trim, and
 * drawn on before new pages. */
static void cache_bound_and_trim(void)
{
	struct pp_end *e[2];
	size_t wpos = 0, rpos = 0;
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(pp_pool_setcache(DEFAULT_CACHE), DEFAULT_CACHE);
	long had = cached();
	CHECK_EQ(pp_pool_trim(), had);
	CHECK_EQ(cached(), 0);
	CHECK_EQ(pp_pool_trim(), 0);

	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(put(e[1], 10 * 4096, 7, &wpos), 10 * 4096);
	CHECK_EQ(cached(), 0);
	CHECK_EQ(drain_check(e[0], 7, &rpos), 10 * 4096);
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(cached(), 10);              /* kept for reuse */
	CHECK_EQ(put(e[1], 5 * 4096, 7, &wpos), 5 * 4096);
	CHECK_EQ(in_use(), 5);
	CHECK_EQ(cached(), 5);               /* reused, not new */
	CHECK_EQ(drain_check(e[0], 7, &rpos), 5 * 4096);
	CHECK_EQ(cached(), 10);

	/* Lowering the bound trims at once. */
	CHECK_EQ(pp_pool_setcache(4), DEFAULT_CACHE);
	CHECK_EQ(stats().cache_max, 4);
	CHECK_EQ(cached(), 4);
	CHECK_EQ(pp_setsize(e[0], 1 << 20), 1 << 20);
	CHECK_EQ(put(e[1], 40 * 4096, 7, &wpos), 40 * 4096);
	CHECK(cached() <= 4);                /* at most the rest of a batch */
	CHECK_EQ(drain_check(e[0], 7, &rpos), 40 * 4096);
	CHECK_EQ(cached(), 4);               /* never above the bound */
	CHECK_EQ(pp_pool_trim(), 4);
	CHECK_EQ(cached(), 0);

	/* Bound 0: nothing is kept. */
	CHECK_EQ(pp_pool_setcache(0), 4);
	CHECK_EQ(put(e[1], 16 * 4096, 7, &wpos), 16 * 4096);
	CHECK_EQ(drain_check(e[0], 7, &rpos), 16 * 4096);
	CHECK_EQ(cached(), 0);
	CHECK_EQ(pp_pool_trim(), 0);

	/* Errors. */
	CHECK_ERR(pp_pool_setcache(-1), EINVAL);
	CHECK_EQ(stats().cache_max, 0);
	CHECK_ERR(pp_pool_stats(NULL), EFAULT);
	CHECK_EQ(rpos, wpos);
	pp_close(e[0]);
	pp_close(e[1]);
	reset_pool();
	CHECK_EQ(pp_pool_setcache(DEFAULT_CACHE), DEFAULT_CACHE);
	pp_pool_trim();
}

/* Many pipes streaming at once: all data arrives, and afterwards no page
 * is in use and the cache is within its bound. */
#define NPIPES 4
struct pair {
	struct pp_end *e[2];
	size_t total;
	size_t got;
	long bad;
	unsigned seed;
};

static void *pair_write(void *arg)
{
	struct pair *p = arg;
	static __thread char buf[20000];
	size_t pos = 0;
	uint32_t s = p->seed;
	while (pos < p->total) {
		size_t n = tp_chunk(buf, sizeof buf, &s, p->seed, pos, p->total);
		ssize_t w = pp_write(p->e[1], buf, n);
		if (w <= 0)
			break;
		pos += (size_t)w;
	}
	pp_close(p->e[1]);
	return NULL;
}

static void *pair_read(void *arg)
{
	struct pair *p = arg;
	static __thread char buf[20000];
	uint32_t s = p->seed * 3 + 1;
	p->bad = -1;
	for (;;) {
		ssize_t n = pp_read(p->e[0], buf, 1 + tp_rand(&s) % sizeof buf);
		if (n <= 0)
			break;
		tp_take(buf, (size_t)n, p->seed, &p->got, &p->bad);
	}
	return NULL;
}

static void many_pipes_leave_nothing(void)
{
	struct pair p[NPIPES];
	pthread_t th[2 * NPIPES];
	CHECK_EQ(in_use(), 0);
	CHECK_EQ(pp_pool_setcache(8), DEFAULT_CACHE);
	for (int i = 0; i < NPIPES; i++) {
		p[i] = (struct pair){ { NULL, NULL }, (size_t)t_scaled(2 << 20), 0, -1,
		                      (unsigned)(100 + i) };
		CHECK_EQ(pp_pipe(p[i].e, 0), 0);
		CHECK_EQ(pthread_create(&th[2 * i], NULL, pair_write, &p[i]), 0);
		CHECK_EQ(pthread_create(&th[2 * i + 1], NULL, pair_read, &p[i]), 0);
	}
	for (int i = 0; i < 2 * NPIPES; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NPIPES; i++) {
		CHECK_EQ(p[i].got, p[i].total);
		CHECK_EQ(p[i].bad, -1);
		pp_close(p[i].e[0]);
	}
	struct pp_pool_stats st = stats();
	CHECK_EQ(st.pages_in_use, 0);
	CHECK(st.pages_cached >= 0 && st.pages_cached <= 8);
	reset_pool();
}

int main(void)
{
	RUN(idle_pipe_holds_no_pages);
	RUN(close_frees_pages);
	RUN(limit_enomem_and_partial);
	RUN(limit_is_pool_wide);
	RUN(limit_with_concurrent_reader);
	RUN(cache_bound_and_trim);
	RUN(many_pipes_leave_nothing);
	return T_DONE();
}
