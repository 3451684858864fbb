/*
 * reserve_commit.c - the zero-copy writer, pp_reserve and pp_commit, on
 * private and PP_SHARED pipes: the space handed out is fresh pages that
 * readers do not see until the commit and that count as used for other
 * writers; a commit publishes exactly its first n bytes, in order, and
 * gives the rest back (pages counted); the errors (EBADF, EINVAL, EFAULT,
 * EBUSY, EAGAIN, EPIPE); packet mode; pages handed out in address order,
 * a run of adjacent pages as one segment; pp_close giving an uncommitted
 * reservation back; a forked child that does not inherit one; records of
 * at most PP_PIPE_BUF bytes committed by several writers arrive whole;
 * and across processes, a writer process that reserves and commits into a
 * reader process that peeks and consumes (no copy on either side), and a
 * writer killed -9 between its reserve and its commit: its space comes
 * back, the reader sees none of it, and end of file.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"
#include "harness/procs.h"
#include "resv_layout.h"

#define SEED 17

/* Pages in use: the pool's (private), or a shared pipe's in its ring and
 * held by calls.  rd is a read end: a shared pipe's reader puts the pages
 * it drained back at its next lock, which pp_consume(rd, 0) takes. */
static long held(struct pp_end *rd, int shared)
{
	if (!shared)
		return tp_pages_in_use();
	struct pp_shared_stats st;
	CHECK_EQ(pp_consume(rd, 0), 0);
	CHECK_EQ(pp_shared_stats(rd, &st), 0);
	return st.pages_held + st.pages_in_ring;
}

/*
 * pp_reserve, its segments checked (resv_layout_pages) and split into one
 * iovec per page, so that a test can count and address the pages: there
 * are at most max of them, so they fit.  The pages, or -1 with errno.
 */
static ssize_t reserve_pages(struct pp_end *w, struct iovec *iov, int max, size_t len)
{
	ssize_t k = pp_reserve(w, iov, max, len);
	if (k <= 0)
		return k;
	long pages = resv_layout_pages(iov, k, len, pp_getfl(w) & PP_PACKET);
	CHECK(pages >= k && pages <= max);
	if (pages < k || pages > max)
		return k;
	/* From the last segment back, so that none is written over unread. */
	long at = pages;
	for (ssize_t i = k; i-- > 0;) {
		char *base = iov[i].iov_base;
		size_t len_i = iov[i].iov_len;
		long n = (long)((len_i + PP_PAGE_SIZE - 1) / PP_PAGE_SIZE);
		for (long j = n; j-- > 0;) {
			size_t off = (size_t)j * PP_PAGE_SIZE;
			iov[--at] = (struct iovec){ base + off, len_i - off < PP_PAGE_SIZE ?
			                                                len_i - off : PP_PAGE_SIZE };
		}
	}
	return pages;
}

/* Fill the reserved segments with stream bytes from pos on (n bytes). */
static void fill(const struct iovec *iov, ssize_t k, size_t n, size_t pos)
{
	for (ssize_t i = 0; i < k && n; i++) {
		size_t part = n < iov[i].iov_len ? n : iov[i].iov_len;
		tp_fill(iov[i].iov_base, part, SEED, pos);
		pos += part;
		n -= part;
	}
}

/* Read exactly n bytes (non-blocking end) and check they are the stream
 * from pos. */
static void expect(struct pp_end *rd, size_t n, size_t pos)
{
	static unsigned char buf[64 << 10];
	CHECK(n <= sizeof buf);
	CHECK_EQ(pp_read(rd, buf, sizeof buf), (ssize_t)n);
	CHECK_EQ(tp_verify(buf, n, SEED, pos), -1);
}

static void basics(int shared)
{
	struct pp_end *e[2];
	struct iovec iov[8];
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK | (shared ? PP_SHARED : 0)), 0);
	long base = held(e[0], shared);

	/* errors before anything is reserved */
	CHECK_ERR(reserve_pages(e[0], iov, 8, 100), EBADF);
	CHECK_ERR(reserve_pages(NULL, iov, 8, 100), EBADF);
	CHECK_ERR(reserve_pages(e[1], iov, -1, 100), EINVAL);
	CHECK_ERR(reserve_pages(e[1], NULL, 8, 100), EFAULT);
	CHECK_ERR(pp_commit(e[0], 0), EBADF);
	CHECK_EQ(reserve_pages(e[1], iov, 8, 0), 0);
	CHECK_EQ(reserve_pages(e[1], iov, 0, 100), 0);
	CHECK_EQ(pp_commit(e[1], 0), 0);
	CHECK_ERR(pp_commit(e[1], 1), EINVAL);

	/* 10000 bytes: three fresh pages, the last one shorter */
	CHECK_EQ(reserve_pages(e[1], iov, 8, 10000), 3);
	CHECK_EQ(iov[0].iov_len, 4096);
	CHECK_EQ(iov[1].iov_len, 4096);
	CHECK_EQ(iov[2].iov_len, 10000 - 8192);
	CHECK_EQ(held(e[0], shared), base + 3);
	CHECK_ERR(reserve_pages(e[1], iov + 3, 5, 100), EBUSY);
	fill(iov, 3, 10000, 0);
	/* unseen until committed */
	CHECK_EQ(pp_nread(e[0]), 0);
	unsigned char b[16];
	CHECK_ERR(pp_read(e[0], b, sizeof b), EAGAIN);
	/* more than was reserved: EINVAL, and it stays */
	CHECK_ERR(pp_commit(e[1], 10001), EINVAL);
	CHECK_EQ(pp_commit(e[1], 5000), 5000);
	CHECK_EQ(held(e[0], shared), base + 2); /* the third page went back */
	CHECK_EQ(pp_nread(e[0]), 5000);
	/* the reservation is over */
	CHECK_ERR(pp_commit(e[1], 1), EINVAL);
	expect(e[0], 5000, 0);
	CHECK_EQ(held(e[0], shared), base);

	/* max bounds the segments; a commit of 0 gives everything back */
	CHECK_EQ(reserve_pages(e[1], iov, 2, 20000), 2);
	CHECK_EQ(held(e[0], shared), base + 2);
	CHECK_EQ(pp_commit(e[1], 0), 0);
	CHECK_EQ(held(e[0], shared), base);
	CHECK_EQ(pp_nread(e[0]), 0);

	/* a commit comes after what was written before it, and small writes
	 * after it merge into its last page */
	CHECK_EQ(reserve_pages(e[1], iov, 8, 300), 1);
	tp_fill(b, 7, SEED, 5000);
	CHECK_EQ(pp_write(e[1], b, 7), 7);
	fill(iov, 1, 300, 5007);
	CHECK_EQ(pp_commit(e[1], 300), 300);
	tp_fill(b, 9, SEED, 5307);
	CHECK_EQ(pp_write(e[1], b, 9), 9);
	CHECK_EQ(held(e[0], shared), base + 2);
	expect(e[0], 316, 5000);

	/* reserved space counts as used: a four-page pipe whose four pages are
	 * reserved takes no write (a shared pipe hands out at most half its
	 * capacity at once, as a write's batches: two handles reserve there);
	 * committing one page makes room again */
	int half = shared ? 2 : 4;
	struct pp_end *w3 = pp_dup(e[1]);
	CHECK(w3 != NULL);
	CHECK_EQ(pp_setsize(e[1], 4 * PP_PAGE_SIZE), 4 * PP_PAGE_SIZE);
	CHECK_EQ(reserve_pages(e[1], iov, 8, 1 << 20), half);
	if (shared)
		CHECK_EQ(reserve_pages(w3, iov + 4, 4, 1 << 20), 2);
	CHECK_ERR(pp_write(e[1], b, 1), EAGAIN);
	CHECK_EQ(pp_getsize(e[1]), 4 * PP_PAGE_SIZE);
	CHECK_ERR(pp_setsize(e[1], PP_PAGE_SIZE), EBUSY);
	if (shared)
		CHECK_EQ(pp_commit(w3, 0), 0);
	fill(iov, half, 100, 5316);
	CHECK_EQ(pp_commit(e[1], 100), 100);
	CHECK_EQ(pp_write(e[1], b, 1), 1); /* merges into the committed page */
	CHECK_EQ(reserve_pages(e[1], iov, 8, 1 << 20), shared ? 2 : 3);
	CHECK_ERR(reserve_pages(e[1], iov, 8, 1), EBUSY);
	CHECK_EQ(pp_commit(e[1], 0), 0);
	/* full: EAGAIN, nothing more held */
	static unsigned char big[4 * PP_PAGE_SIZE];
	CHECK(pp_write(e[1], big, sizeof big) > 0);
	CHECK_ERR(pp_write(e[1], big, 1), EAGAIN);
	long full = held(e[0], shared);
	CHECK_ERR(reserve_pages(e[1], iov, 8, 1), EAGAIN);
	CHECK_ERR(reserve_pages(w3, iov, 8, 1), EAGAIN);
	CHECK_EQ(held(e[0], shared), full);
	CHECK_EQ(pp_commit(e[1], 0), 0);
	CHECK_EQ(pp_close(w3), 0);

	/* pp_close gives an uncommitted reservation back */
	struct pp_end *w2 = pp_dup(e[1]);
	CHECK(w2 != NULL);
	unsigned char drain[64 << 10];
	CHECK(pp_read(e[0], drain, sizeof drain) > 0);
	CHECK_EQ(pp_nread(e[0]), 0);
	CHECK_EQ(reserve_pages(w2, iov, 8, 2 * PP_PAGE_SIZE), 2);
	CHECK_EQ(held(e[0], shared), base + 2);
	CHECK_EQ(pp_close(w2), 0);
	CHECK_EQ(held(e[0], shared), base);
	CHECK_EQ(pp_nread(e[0]), 0);
	CHECK_EQ(reserve_pages(e[1], iov, 8, 1 << 20), half); /* the room came back */
	CHECK_EQ(pp_commit(e[1], 0), 0);

	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_EQ(pp_close(e[1]), 0);
}

static void basics_private(void)
{
	basics(0);
}

static void basics_shared(void)
{
	basics(1);
}

/* No reader: EPIPE, at the reserve or at the commit (which gives the
 * space back); SIGPIPE unless PP_NOSIGPIPE. */
static void epipe(int shared)
{
	for (int quiet = 0; quiet < 2; quiet++) {
		struct pp_end *e[2], *rd;
		struct iovec iov[4];
		sigset_t old;
		tp_sigpipe_block(&old);
		CHECK_EQ(pp_pipe(e, (quiet ? PP_NOSIGPIPE : 0) | (shared ? PP_SHARED : 0)), 0);
		rd = pp_dup(e[0]); /* keeps the pipe's memory to count, once e[0] is closed */
		CHECK(rd != NULL);
		long base = held(rd, shared);
		CHECK_EQ(reserve_pages(e[1], iov, 4, 5000), 2);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(rd), 0);
		CHECK_ERR(pp_commit(e[1], 5000), EPIPE);
		CHECK_EQ(tp_sigpipe_taken(), !quiet);
		CHECK_EQ(pp_commit(e[1], 0), 0); /* nothing left */
		CHECK_ERR(reserve_pages(e[1], iov, 4, 1), EPIPE);
		CHECK_EQ(tp_sigpipe_taken(), !quiet);
		if (shared) {
			struct pp_shared_stats st;
			CHECK_EQ(pp_shared_stats(e[1], &st), 0);
			CHECK_EQ(st.pages_held + st.pages_in_ring, base);
		} else {
			CHECK_EQ(tp_pages_in_use(), base);
		}
		tp_sigpipe_restore(&old);
		CHECK_EQ(pp_close(e[1]), 0);
	}
}

static void epipe_private(void)
{
	epipe(0);
}

static void epipe_shared(void)
{
	epipe(1);
}

/* Packet mode: each committed page is a packet. */
static void packets(void)
{
	for (int shared = 0; shared < 2; shared++) {
		struct pp_end *e[2];
		struct iovec iov[4];
		unsigned char buf[8192];
		CHECK_EQ(pp_pipe(e, PP_PACKET | PP_NONBLOCK | (shared ? PP_SHARED : 0)), 0);
		CHECK_EQ(reserve_pages(e[1], iov, 4, 5000), 2);
		fill(iov, 2, 5000, 0);
		CHECK_EQ(pp_commit(e[1], 5000), 5000);
		CHECK_EQ(pp_read(e[0], buf, sizeof buf), 4096);
		CHECK_EQ(tp_verify(buf, 4096, SEED, 0), -1);
		CHECK_EQ(pp_read(e[0], buf, sizeof buf), 904);
		CHECK_EQ(tp_verify(buf, 904, SEED, 4096), -1);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
	}
}

/* A blocking reserve on a full pipe waits for the reader. */
struct blocked {
	struct pp_end *w;
	ssize_t got;
};

/*
 * A reservation's pages come in address order (the header says so: a
 * producer may fill adjacent ones as one buffer), even after a reader
 * drained the pages one at a time, which leaves them on the idle list in
 * the reverse order.  Each round the pages drained last are the ones
 * reserved next; the bytes written through the run arrive in order.
 */
static void address_order(int shared)
{
	struct pp_end *e[2];
	struct iovec iov[8];
	static unsigned char buf[8 * PP_PAGE_SIZE];
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK | (shared ? PP_SHARED : 0)), 0);
	size_t pos = 0;
	for (int round = 0; round < 4; round++) {
		tp_fill(buf, sizeof buf, SEED, pos);
		CHECK_EQ(pp_write(e[1], buf, sizeof buf), (ssize_t)sizeof buf);
		for (int i = 0; i < 8; i++) {
			CHECK_EQ(pp_peek(e[0], iov, 1), 1);
			CHECK_EQ(tp_verify(iov[0].iov_base, PP_PAGE_SIZE, SEED, pos), -1);
			CHECK_EQ(pp_consume(e[0], PP_PAGE_SIZE), PP_PAGE_SIZE);
			pos += PP_PAGE_SIZE;
		}
		CHECK_EQ(reserve_pages(e[1], iov, 8, sizeof buf), 8);
		for (int i = 1; i < 8; i++)
			CHECK((uintptr_t)iov[i - 1].iov_base < (uintptr_t)iov[i].iov_base);
		CHECK_EQ(pp_commit(e[1], 0), 0);
	}
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_EQ(pp_close(e[1]), 0);
}

/*
 * A run of adjacent pages is one segment (one copy fills it, one readv(2)
 * segment; see pp_reserve(3)), in packet mode a page is: a fresh pipe's
 * first pages are a run in either kind of pipe, so eight of them come as
 * fewer segments, and in packet mode as eight.  The bytes filled through
 * the segments arrive in order.
 */
static void segments_are_runs(void)
{
	static unsigned char buf[8 * PP_PAGE_SIZE];
	for (int mode = 0; mode < 4; mode++) {
		bool shared = mode & 1, packet = mode & 2;
		struct pp_end *e[2];
		struct iovec iov[8];
		CHECK_EQ(pp_pipe(e, PP_NONBLOCK | (shared ? PP_SHARED : 0) | (packet ? PP_PACKET : 0)),
		         0);
		size_t len = sizeof buf - 100;
		ssize_t k = pp_reserve(e[1], iov, 8, len);
		CHECK_EQ(resv_layout_pages(iov, k, len, packet), 8);
		if (packet)
			CHECK_EQ(k, 8);
		else
			CHECK(k > 0 && k < 8);
		fill(iov, k, len, 0);
		CHECK_EQ(pp_commit(e[1], len), (ssize_t)len);
		size_t got = 0;
		for (ssize_t n; got < len && (n = pp_read(e[0], buf + got, sizeof buf - got)) > 0;)
			got += (size_t)n;
		CHECK_EQ(got, len);
		CHECK_EQ(tp_verify(buf, len, SEED, 0), -1);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
	}
}

static void address_order_private(void)
{
	address_order(0);
}

static void address_order_shared(void)
{
	address_order(1);
}

static void *reserve_blocked(void *arg)
{
	struct blocked *b = arg;
	struct iovec iov[4];
	b->got = pp_reserve(b->w, iov, 4, 100);
	if (b->got > 0)
		pp_commit(b->w, 0);
	return NULL;
}

static void blocks_until_room(void)
{
	for (int shared = 0; shared < 2; shared++) {
		struct pp_end *e[2];
		CHECK_EQ(pp_pipe(e, shared ? PP_SHARED : 0), 0);
		CHECK_EQ(pp_setsize(e[1], PP_PAGE_SIZE), PP_PAGE_SIZE);
		unsigned char page[PP_PAGE_SIZE] = { 0 };
		CHECK_EQ(pp_write(e[1], page, sizeof page), PP_PAGE_SIZE);
		struct blocked b = { e[1], -2 };
		pthread_t t;
		CHECK_EQ(pthread_create(&t, NULL, reserve_blocked, &b), 0);
		t_sleep_ms(50);
		CHECK_EQ(b.got, -2); /* still waiting */
		CHECK_EQ(pp_read(e[0], page, sizeof page), PP_PAGE_SIZE);
		CHECK_EQ(pthread_join(t, NULL), 0);
		CHECK_EQ(b.got, 1);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
	}
}

/* Records of at most PP_PIPE_BUF bytes committed by several threads, each
 * on its own handle, arrive whole: each record is [writer, seq, len] and
 * len bytes of its stream. */
#define REC_WRITERS 3
struct recw {
	struct pp_end *w;
	int id;
	long records;
};

static void *rec_writer(void *arg)
{
	struct recw *rw = arg;
	uint32_t rs = 99 + (uint32_t)rw->id;
	for (long s = 0; s < rw->records; s++) {
		struct iovec iov[2];
		size_t len = 12 + tp_rand(&rs) % (PP_PIPE_BUF - 12 + 1);
		ssize_t k = pp_reserve(rw->w, iov, 2, len);
		if (k != 1 || iov[0].iov_len != len) {
			fprintf(stderr, "reserve %zu: %zd\n", len, k);
			t_case_failed = 1;
			break;
		}
		uint32_t h[3] = { (uint32_t)rw->id, (uint32_t)s, (uint32_t)len };
		memcpy(iov[0].iov_base, h, sizeof h);
		tp_fill((char *)iov[0].iov_base + 12, len - 12, (unsigned)rw->id, (size_t)s * 7);
		if (pp_commit(rw->w, len) != (ssize_t)len) {
			t_case_failed = 1;
			break;
		}
	}
	pp_close(rw->w);
	return NULL;
}

static void records_whole(void)
{
	for (int shared = 0; shared < 2; shared++) {
		struct pp_end *e[2];
		CHECK_EQ(pp_pipe(e, PP_PACKET | (shared ? PP_SHARED : 0)), 0);
		struct recw rw[REC_WRITERS];
		pthread_t t[REC_WRITERS];
		long per = t_scaled_san(3000);
		for (int i = 0; i < REC_WRITERS; i++) {
			rw[i] = (struct recw){ pp_dup(e[1]), i, per };
			CHECK(rw[i].w != NULL);
			CHECK_EQ(pthread_create(&t[i], NULL, rec_writer, &rw[i]), 0);
		}
		CHECK_EQ(pp_close(e[1]), 0);
		long next[REC_WRITERS] = { 0 };
		static unsigned char buf[PP_PIPE_BUF];
		for (;;) {
			ssize_t n = pp_read(e[0], buf, sizeof buf);
			if (n <= 0) {
				CHECK_EQ(n, 0);
				break;
			}
			uint32_t h[3];
			CHECK(n >= 12);
			memcpy(h, buf, sizeof h);
			CHECK(h[0] < REC_WRITERS);
			if (h[0] >= REC_WRITERS)
				break;
			CHECK_EQ(h[1], next[h[0]]);
			CHECK_EQ(h[2], (uint32_t)n);
			CHECK_EQ(tp_verify(buf + 12, (size_t)n - 12, h[0], (size_t)h[1] * 7), -1);
			next[h[0]] = h[1] + 1;
		}
		for (int i = 0; i < REC_WRITERS; i++) {
			CHECK_EQ(pthread_join(t[i], NULL), 0);
			CHECK_EQ(next[i], per);
		}
		CHECK_EQ(pp_close(e[0]), 0);
	}
}

/* ---- across processes ----------------------------------------------------- */

/* A child writes the stream by reserve and commit, reserving random sizes
 * and committing random parts. */
struct feed {
	struct pp_end *w, *r;
	size_t total;
};

static void zc_writer(void *arg)
{
	struct feed *f = arg;
	CHECK_EQ(pp_close(f->r), 0);
	uint32_t rs = 7;
	for (size_t pos = 0; pos < f->total;) {
		struct iovec iov[16];
		size_t want = 1 + tp_rand(&rs) % (48 << 10);
		ssize_t k = pp_reserve(f->w, iov, 16, want);
		if (k <= 0) {
			CHECK(k > 0);
			break;
		}
		size_t have = 0;
		for (ssize_t i = 0; i < k; i++)
			have += iov[i].iov_len;
		size_t n = tp_rand(&rs) % 4 ? have : tp_rand(&rs) % (have + 1);
		if (n > f->total - pos)
			n = f->total - pos;
		fill(iov, k, n, pos);
		CHECK_EQ(pp_commit(f->w, n), (ssize_t)n);
		pos += n;
	}
	CHECK_EQ(pp_close(f->w), 0);
}

static void across_processes(void)
{
	struct pp_end *e[2];
	size_t total = (size_t)t_scaled_san(16 << 20);
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	struct feed f = { e[1], e[0], total };
	pid_t pid = t_child(zc_writer, &f);
	CHECK_EQ(pp_close(e[1]), 0);
	size_t pos = 0;
	long bad = -1;
	struct iovec iov[16];
	for (size_t have; (have = tp_peek_check(e[0], iov, 16, SEED, pos, &bad)) > 0;) {
		CHECK_EQ(pp_consume(e[0], have), (ssize_t)have);
		pos += have;
		t_progress();
	}
	if (pos != total || bad >= 0) {
		fprintf(stderr, "reader: %zu of %zu bytes, first bad at %ld\n", pos, total, bad);
		t_case_failed = 1;
	}
	struct pp_shared_stats st;
	CHECK_EQ(pp_shared_stats(e[0], &st), 0);
	CHECK_EQ(st.pages_held, 0);
	CHECK_EQ(st.pages_in_ring, 0);
	CHECK_EQ(pp_close(e[0]), 0);
	t_reap(pid);
}

/* A writer killed between its reserve and its commit: the reader sees the
 * bytes committed before, none of the reservation, then end of file; the
 * pages and the slots come back. */
struct killed {
	struct pp_end *w, *r;
	struct t_sync s;
};

static void reserve_then_hang(void *arg)
{
	struct killed *k = arg;
	t_sync_keep(&k->s, 1);
	CHECK_EQ(pp_close(k->r), 0);
	struct iovec iov[16];
	CHECK_EQ(reserve_pages(k->w, iov, 16, 1000), 1);
	fill(iov, 1, 1000, 0);
	CHECK_EQ(pp_commit(k->w, 1000), 1000);
	CHECK_EQ(reserve_pages(k->w, iov, 16, 8 * PP_PAGE_SIZE), 8);
	fill(iov, 8, 8 * PP_PAGE_SIZE, 1000);
	t_post(&k->s, 1, 'r');
	for (;;)
		pause(); /* killed here */
}

static void writer_killed_reserved(void)
{
	struct killed k;
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	CHECK_EQ(pp_setsize(e[1], 16 * PP_PAGE_SIZE), 16 * PP_PAGE_SIZE);
	CHECK_EQ(t_sync_open(&k.s), 0);
	k.w = e[1];
	k.r = e[0];
	pid_t pid = t_child(reserve_then_hang, &k);
	t_sync_keep(&k.s, 0);
	CHECK_EQ(pp_close(e[1]), 0);
	CHECK_EQ(t_wait(&k.s, 0), 'r');
	struct pp_shared_stats st;
	CHECK_EQ(pp_shared_stats(e[0], &st), 0);
	CHECK_EQ(st.pages_held, 8);
	CHECK_EQ(kill(pid, SIGKILL), 0);
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status));
	unsigned char buf[64 << 10];
	double t0 = t_now();
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 1000);
	CHECK_EQ(tp_verify(buf, 1000, SEED, 0), -1);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 0); /* end of file */
	CHECK(t_now() - t0 < 1.0);
	CHECK_EQ(pp_shared_stats(e[0], &st), 0);
	CHECK_EQ(st.pages_held, 0);
	CHECK_EQ(st.pages_in_ring, 0);
	CHECK_EQ(st.holders, 1);
	t_sync_close(&k.s);
	CHECK_EQ(pp_close(e[0]), 0);
}

/* fork: the child does not inherit the parent's reservation (its pages
 * stay the parent's), and can make its own; commits land in the order
 * they are made. */
struct forked {
	struct pp_end *w;
	struct t_sync s;
};

static void child_commits(void *arg)
{
	struct forked *f = arg;
	t_sync_keep(&f->s, 1);
	struct iovec iov[4];
	CHECK_ERR(pp_commit(f->w, 1), EINVAL);
	CHECK_EQ(pp_commit(f->w, 0), 0);
	CHECK_EQ(reserve_pages(f->w, iov, 4, 100), 1);
	fill(iov, 1, 100, 0);
	CHECK_EQ(pp_commit(f->w, 100), 100);
	t_post(&f->s, 1, 'c');
	CHECK_EQ(reserve_pages(f->w, iov, 4, 100), 1); /* given back at exit */
}

static void fork_not_inherited(void)
{
	struct pp_end *e[2];
	struct iovec iov[4];
	struct forked f;
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	CHECK_EQ(t_sync_open(&f.s), 0);
	CHECK_EQ(reserve_pages(e[1], iov, 4, 200), 1);
	f.w = e[1];
	pid_t pid = t_child(child_commits, &f);
	t_sync_keep(&f.s, 0);
	CHECK_EQ(t_wait(&f.s, 0), 'c');
	fill(iov, 1, 200, 100);
	CHECK_EQ(pp_commit(e[1], 200), 200);
	t_reap(pid);
	unsigned char buf[1024];
	size_t got = 0;
	while (got < 300) {
		ssize_t n = pp_read(e[0], buf + got, sizeof buf - got);
		CHECK(n > 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	CHECK_EQ(got, 300);
	CHECK_EQ(tp_verify(buf, 300, SEED, 0), -1);
	/* the dead child's reservation came back: only the parent holds
	 * the pipe, nothing held */
	struct pp_shared_stats st;
	for (double t0 = t_now(); t_now() - t0 < 2.0; t_sleep_ms(5)) {
		CHECK_EQ(pp_consume(e[0], 0), 0); /* puts back what we read */
		CHECK_EQ(pp_shared_stats(e[0], &st), 0);
		if (st.holders == 1 && st.pages_held == 0)
			break;
	}
	CHECK_EQ(st.holders, 1);
	CHECK_EQ(st.pages_held, 0);
	t_sync_close(&f.s);
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_EQ(pp_close(e[1]), 0);
}

int main(void)
{
	t_start();
	RUN(basics_private);
	RUN(basics_shared);
	RUN(epipe_private);
	RUN(epipe_shared);
	RUN(packets);
	RUN(segments_are_runs);
	RUN(address_order_private);
	RUN(address_order_shared);
	RUN(blocks_until_room);
	RUN(records_whole);
	RUN(across_processes);
	RUN(writer_killed_reserved);
	RUN(fork_not_inherited);
	return T_DONE();
}
