/*
 * wraparound.c - the ring's free-running head and tail counters wrap at
 * 2^32.  Reaching that takes 2^32 buffers, so the library starts its
 * counters wherever PP_DEBUG_RING_START says; this test starts them a few
 * hundred slots before the wrap and checks, across it, every byte of a
 * stream with random read and write sizes, pp_nread against a byte count,
 * pp_events, resizing (the slot array is re-indexed by the counters), the
 * 65536-byte EAGAIN point, splice and tee between two wrapped pipes, and
 * a two-thread stream.
 */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness/harness.h"
#include "pagepipe.h"

static unsigned char pattern(uint64_t pos)
{
	return (unsigned char)(pos * 2654435761u >> 13);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Random writes and reads, single thread, through the wrap. */
static void stream_across_wrap(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	static unsigned char buf[3 * 65536];
	uint64_t wpos = 0, rpos = 0;
	for (int step = 0; step < 4000; step++) {
		if (next_rand() % 2) {
			size_t n = 1 + next_rand() % (next_rand() % 3 ? 300 : 20000);
			for (size_t i = 0; i < n; i++)
				buf[i] = pattern(wpos + i);
			ssize_t w = pp_write(e[1], buf, n);
			if (w < 0) {
				CHECK_EQ(errno, EAGAIN);
				continue;
			}
			wpos += (uint64_t)w;
		} else {
			size_t n = 1 + next_rand() % 70000;
			ssize_t r = pp_read(e[0], buf, n);
			if (r < 0) {
				CHECK_EQ(errno, EAGAIN);
				CHECK_EQ(wpos, rpos);
				continue;
			}
			for (ssize_t i = 0; i < r; i++)
				if (buf[i] != pattern(rpos + (uint64_t)i)) {
					CHECK(!"byte mismatch across the wrap");
					break;
				}
			rpos += (uint64_t)r;
		}
		CHECK_EQ(pp_nread(e[0]), (long long)(wpos - rpos));
		short ev = pp_events(e[0]);
		CHECK_EQ(!!(ev & POLLIN), wpos != rpos);
		if (step % 500 == 250) {
			long sz = pp_setsize(e[1], (next_rand() % 2) ? 131072 : 65536);
			if (sz < 0)
				CHECK_EQ(errno, EBUSY);
		}
	}
	pp_close(e[0]);
	pp_close(e[1]);
}

/* The 65536 one-byte writes rule holds with the counters wrapping. */
static void one_byte_fill_across_wrap(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	unsigned char c = 7, out[4096];
	/* Move the counters over the wrap first: 300 one-page buffers. */
	for (int i = 0; i < 300; i++) {
		CHECK_EQ(pp_write(e[1], out, 4096), 4096);
		CHECK_EQ(pp_read(e[0], out, 4096), 4096);
	}
	for (int i = 0; i < 65536; i++)
		if (pp_write(e[1], &c, 1) != 1) {
			CHECK(!"a one-byte write failed before 65536");
			break;
		}
	CHECK_ERR(pp_write(e[1], &c, 1), EAGAIN);
	CHECK_EQ(pp_nread(e[0]), 65536);
	CHECK_EQ(pp_events(e[1]) & POLLOUT, 0);
	pp_close(e[0]);
	pp_close(e[1]);
}

/* Splice and tee between two pipes whose counters both wrap. */
static void splice_tee_across_wrap(void)
{
	struct pp_end *a[2], *b[2];
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(b, PP_NONBLOCK), 0);
	static unsigned char buf[65536];
	uint64_t wpos = 0, rpos = 0;
	for (int step = 0; step < 2000; step++) {
		size_t n = 1 + next_rand() % 9000;
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(wpos + i);
		ssize_t w = pp_write(a[1], buf, n);
		if (w > 0)
			wpos += (uint64_t)w;
		ssize_t t = pp_tee(a[0], b[1], 1 + next_rand() % 10000, 0);
		ssize_t s = pp_splice(a[0], b[1], t > 0 ? (size_t)t : 1, 0);
		(void)s;
		/* The tee shares the front of a with b and the splice then moves
		 * that same front, so b gets it twice: what matters here is that
		 * the moves stay consistent across the wrap (reads succeed, every
		 * page comes back in the end), not the byte order. */
		ssize_t r = pp_read(b[0], buf, sizeof buf);
		if (r < 0)
			CHECK_EQ(errno, EAGAIN);
		if (step % 97 == 0) {
			/* drain a to keep it moving */
			while ((r = pp_read(a[0], buf, sizeof buf)) > 0)
				rpos += (uint64_t)r;
		}
	}
	(void)rpos;
	pp_close(a[0]);
	pp_close(a[1]);
	pp_close(b[0]);
	pp_close(b[1]);
	struct pp_pool_stats st;
	pp_pool_stats(&st);
	CHECK_EQ(st.pages_in_use, 0);
}

struct stream_arg {
	struct pp_end *r;
	uint64_t total;
	int bad;
};

static void *reader(void *p)
{
	struct stream_arg *a = p;
	static unsigned char buf[65536];
	uint64_t pos = 0;
	ssize_t n;
	while ((n = pp_read(a->r, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pattern(pos + (uint64_t)i))
				a->bad = 1;
		pos += (uint64_t)n;
	}
	a->total = pos;
	return NULL;
}

/* Two threads, blocking: a stream that crosses the wrap while both sides
 * wait and wake. */
static void threads_across_wrap(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, 0), 0);
	struct stream_arg a = { .r = e[0] };
	pthread_t t;
	pthread_create(&t, NULL, reader, &a);
	static unsigned char buf[20000];
	uint64_t pos = 0;
	while (pos < 8u << 20) {
		size_t n = 1 + next_rand() % sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(pos + i);
		CHECK_EQ(pp_write(e[1], buf, n), (long long)n);
		pos += n;
	}
	pp_close(e[1]);
	pthread_join(t, NULL);
	CHECK_EQ(a.total, pos);
	CHECK_EQ(a.bad, 0);
	pp_close(e[0]);
}

int main(void)
{
	/* 256 slots before the wrap: every case pushes more buffers than that
	 * through (the random stream about 1700, the one-byte case 300 pages
	 * first, the threads 2000 and more). */
	setenv("PP_DEBUG_RING_START", "0xffffff00", 1);
	RUN(stream_across_wrap);
	RUN(one_byte_fill_across_wrap);
	RUN(splice_tee_across_wrap);
	RUN(threads_across_wrap);
	return T_DONE();
}
