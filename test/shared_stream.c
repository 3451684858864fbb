/*
 * shared_stream.c - a PP_SHARED pagepipe carries a byte stream from a
 * writer process to a reader process exactly as a kernel pipe does.
 *
 * Rules checked, each with the writer and the reader in two processes
 * (fork), on a kernel pipe and on a shared pagepipe:
 *   - every byte arrives, in order, once, whatever the write size (1, 64,
 *     4095, 4096, 65536, 1 MiB, random mixes) and read size;
 *   - writev/readv move segments in order as one stream;
 *   - with a one-page capacity (pp_setsize) the writer waits on a full
 *     pipe and the reader on an empty one hundreds of times, and nothing
 *     is lost or doubled across those waits;
 *   - pp_setsize made in one process is the pp_getsize the other sees,
 *     pp_nread counts what the other process wrote, a long non-blocking
 *     write merges and stops where the kernel's does: the results of a
 *     scenario played by two processes are the kernel's, step by step;
 *   - non-blocking: EAGAIN on an empty pipe (reader process) and on a
 *     full one (writer process), after exactly as many writes as the
 *     kernel takes, and a blocked-nothing EOF at the end.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"
#include "harness/pipe.h"
#include "harness/procs.h"

#define SEED 77u
#define BUFSZ (1u << 20)

static unsigned char *wbuf, *rbuf;

/* What a writer child does. */
struct job {
	struct tp t;
	struct t_sync s;
	size_t total;
	size_t wsize;  /* 0: random sizes 1..wmax */
	size_t wmax;
	int vec;       /* writev with random segments */
	uint32_t rs;
};

static void writer(void *arg)
{
	struct job *j = arg;
	tp_close_end(&j->t, 0);
	size_t pos = 0;
	while (pos < j->total) {
		size_t n = j->wsize ? j->wsize : 1 + tp_rand(&j->rs) % j->wmax;
		if (n > j->total - pos)
			n = j->total - pos;
		tp_fill(wbuf, n, SEED, pos);
		ssize_t r;
		if (j->vec) {
			struct iovec iov[8];
			int cnt = 1 + (int)(tp_rand(&j->rs) % 8);
			size_t off = 0;
			for (int i = 0; i < cnt; i++) {
				size_t l = i == cnt - 1 ? n - off : (n - off) * (tp_rand(&j->rs) % 100) / 100;
				iov[i].iov_base = wbuf + off;
				iov[i].iov_len = l;
				off += l;
			}
			r = tp_writev(&j->t, iov, cnt);
		} else {
			r = tp_write(&j->t, wbuf, n);
		}
		if (r != (ssize_t)n) {
			fprintf(stderr, "%s: write of %zu at %zu returned %zd\n", tp_name(&j->t), n,
			        pos, r);
			t_case_failed = 1;
			break;
		}
		pos += n;
		if ((pos & 0xffff) < n)
			t_progress();
	}
	tp_close_end(&j->t, 1);
}

/* Read to end of file in random sizes up to rmax (readv if vec), check
 * the stream; returns the bytes read. */
static size_t read_stream(struct tp *t, size_t rmax, int vec, uint32_t rs)
{
	size_t got = 0;
	long bad = -1;
	for (;;) {
		size_t n = 1 + tp_rand(&rs) % rmax;
		ssize_t r;
		if (vec) {
			struct iovec iov[8];
			int cnt = 1 + (int)(tp_rand(&rs) % 8);
			size_t off = 0;
			for (int i = 0; i < cnt; i++) {
				size_t l = i == cnt - 1 ? n - off : (n - off) * (tp_rand(&rs) % 100) / 100;
				iov[i].iov_base = rbuf + off;
				iov[i].iov_len = l;
				off += l;
			}
			r = tp_readv(t, iov, cnt);
		} else {
			r = tp_read(t, rbuf, n);
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			CHECK_EQ(r, 0);
			break;
		}
		CHECK(r <= (ssize_t)n);
		tp_take(rbuf, (size_t)r, SEED, &got, &bad);
		if ((got & 0xffff) < (size_t)r)
			t_progress();
	}
	if (bad >= 0) {
		fprintf(stderr, "%s: wrong byte at stream position %ld\n", tp_name(t), bad);
		t_case_failed = 1;
	}
	return got;
}

/* One stream from a child writer to this process, on kind. */
static void stream(int kind, size_t total, size_t wsize, size_t wmax, int vec, long cap,
                   size_t rmax)
{
	struct job j;
	memset(&j, 0, sizeof j);
	if (tp_open_kind(&j.t, kind, 0) != 0) {
		CHECK(!"tp_open");
		return;
	}
	if (cap)
		CHECK_EQ(tp_setsize(&j.t, 1, (size_t)cap), cap);
	j.total = total;
	j.wsize = wsize;
	j.wmax = wmax;
	j.vec = vec;
	j.rs = (uint32_t)(total * 31 + wsize + 1);
	pid_t pid = t_child(writer, &j);
	tp_close_end(&j.t, 1);
	size_t got = read_stream(&j.t, rmax, vec, (uint32_t)(wsize * 7 + 3));
	if (got != total) {
		fprintf(stderr, "%s: write size %zu: got %zu of %zu bytes\n", tp_name(&j.t), wsize,
		        got, total);
		t_case_failed = 1;
	}
	tp_close(&j.t);
	t_reap(pid);
}

static const int kinds[] = { TP_KERNEL, TP_SHARED };

static void stream_write_sizes(void)
{
	static const size_t sizes[] = { 1, 64, 4095, 4096, 65536, 1 << 20 };
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			size_t s = sizes[i];
			size_t total = s == 1 ? (size_t)t_scaled_san(32768)
			             : s == 64 ? (size_t)t_scaled_san(1 << 20)
			                       : (size_t)t_scaled_san(2 << 20) + s / 2;
			stream(kinds[k], total, s, 0, 0, 0, 200000);
		}
	}
}

static void stream_random_mixes(void)
{
	for (int k = 0; k < 2; k++) {
		stream(kinds[k], (size_t)t_scaled_san(2 << 20) + 17, 0, 9000, 0, 0, 9000);
		stream(kinds[k], (size_t)t_scaled_san(2 << 20) + 5, 0, 300000, 0, 0, 70000);
		stream(kinds[k], (size_t)t_scaled_san(1 << 20) + 1, 0, 100, 0, 0, 100000);
	}
}

static void stream_readv_writev(void)
{
	for (int k = 0; k < 2; k++)
		stream(kinds[k], (size_t)t_scaled_san(2 << 20) + 9, 0, 70000, 1, 0, 70000);
}

/* One page of capacity: both sides wait again and again. */
static void stream_small_capacity(void)
{
	for (int k = 0; k < 2; k++) {
		stream(kinds[k], (size_t)t_scaled_san(1 << 20), 0, 6000, 0, 4096, 5000);
		stream(kinds[k], (size_t)t_scaled_san(1 << 20), 4096, 0, 0, 4096, 4096);
		stream(kinds[k], (size_t)t_scaled_san(1 << 20), 0, 20000, 0, 8192, 300);
	}
}

/* ---- scenarios played by two processes, compared with the kernel --------- */

/* The child reports values to the parent, which records them. */
static void report(struct t_sync *s, long v)
{
	if (t_send_all(s->fd[1], &v, sizeof v) != 0)
		t_case_failed = 1;
}

static long take(struct t_sync *s)
{
	long v = -99999;
	if (t_recv_all(s->fd[0], &v, sizeof v) != 0) {
		fprintf(stderr, "no report from the child\n");
		t_case_failed = 1;
	}
	return v;
}

static void sizes_child(void *arg)
{
	struct job *j = arg;
	struct t_sync *s = &j->s;
	t_sync_keep(s, 1);
	tp_close_end(&j->t, 0);
	if (t_wait(s, 1) < 0)
		return;
	report(s, tp_getsize(&j->t, 1));
	tp_fill(wbuf, 100, SEED, 0);
	report(s, tp_res(tp_write(&j->t, wbuf, 100)));
	report(s, tp_nread(&j->t, 1));
	t_post(s, 1, 1);
	if (t_wait(s, 1) < 0)
		return;
	report(s, tp_nread(&j->t, 1));
	report(s, tp_setsize(&j->t, 1, 4096));
	report(s, tp_setnonblock(&j->t, 1, 1));
	tp_fill(wbuf, 5000, SEED, 100);
	long w = tp_res(tp_write(&j->t, wbuf, 5000));
	report(s, w);
	long w1 = w > 0 ? tp_res(tp_write(&j->t, wbuf + w, 1)) : w;
	report(s, w1);
	if (w1 == 1)
		w++;
	report(s, tp_nread(&j->t, 1));
	report(s, tp_events(&j->t, 1));
	report(s, tp_setnonblock(&j->t, 1, 0));
	t_post(s, 1, 2);
	if (t_wait(s, 1) < 0)
		return;
	report(s, tp_events(&j->t, 1));
	report(s, tp_nread(&j->t, 1));
	/* the rest of the 5000, blocking: the reader drains it */
	if (w > 0)
		report(s, tp_res(tp_write(&j->t, wbuf + w, (size_t)(5000 - w))));
	else
		report(s, w);
	tp_close_end(&j->t, 1);
	t_post(s, 1, 3);
}

static void sizes_scenario(struct tp_rec *r, int kernel)
{
	struct job j;
	memset(&j, 0, sizeof j);
	if (tp_open_kind(&j.t, kernel ? TP_KERNEL : TP_SHARED, 0) != 0 || t_sync_open(&j.s) != 0) {
		CHECK(!"open");
		return;
	}
	pid_t pid = t_child(sizes_child, &j);
	t_sync_keep(&j.s, 0);
	tp_close_end(&j.t, 1);
	TP_REC(r, "setsize 8192 (reader)", tp_setsize(&j.t, 0, 8192));
	t_post(&j.s, 0, 1);
	TP_REC(r, "getsize (writer)", take(&j.s));
	TP_REC(r, "write 100 (writer)", take(&j.s));
	TP_REC(r, "nread (writer)", take(&j.s));
	CHECK_EQ(t_wait(&j.s, 0), 1);
	TP_REC(r, "nread (reader)", tp_nread(&j.t, 0));
	TP_REC(r, "getsize (reader)", tp_getsize(&j.t, 0));
	TP_REC(r, "read 30", tp_res(tp_read(&j.t, rbuf, 30)));
	TP_REC(r, "data", tp_verify(rbuf, 30, SEED, 0));
	t_post(&j.s, 0, 1);
	TP_REC(r, "nread (writer)", take(&j.s));
	TP_REC(r, "setsize 4096 (writer)", take(&j.s));
	TP_REC(r, "nonblock (writer)", take(&j.s) >= 0);
	long w = take(&j.s);
	TP_REC(r, "write 5000 nonblocking (writer)", w);
	TP_REC(r, "write 1 nonblocking (writer)", take(&j.s));
	TP_REC(r, "nread (writer)", take(&j.s));
	TP_REC(r, "events (writer)", take(&j.s));
	TP_REC(r, "blocking (writer)", take(&j.s) >= 0);
	CHECK_EQ(t_wait(&j.s, 0), 2);
	TP_REC(r, "getsize (reader)", tp_getsize(&j.t, 0));
	TP_REC(r, "nread (reader)", tp_nread(&j.t, 0));
	TP_REC(r, "events (reader)", tp_events(&j.t, 0));
	size_t got = 30;
	long bad = -1;
	ssize_t n = tp_read(&j.t, rbuf, 100000);
	TP_REC(r, "read all", tp_res(n));
	if (n > 0)
		tp_take(rbuf, (size_t)n, SEED, &got, &bad);
	t_post(&j.s, 0, 1);
	TP_REC(r, "events (writer, drained)", take(&j.s));
	TP_REC(r, "nread (writer, drained)", take(&j.s));
	/* the writer's blocking rest: read it while it goes in */
	while (got < 5100 && n > 0) {
		n = tp_read(&j.t, rbuf, 100000);
		if (n <= 0)
			break;
		tp_take(rbuf, (size_t)n, SEED, &got, &bad);
	}
	TP_REC(r, "rest written (writer)", take(&j.s));
	TP_REC(r, "bytes read", got);
	TP_REC(r, "first bad byte", bad);
	CHECK_EQ(t_wait(&j.s, 0), 3);
	TP_REC(r, "read at EOF", tp_res(tp_read(&j.t, rbuf, 10)));
	TP_REC(r, "events at EOF", tp_events(&j.t, 0));
	t_sync_close(&j.s);
	tp_close(&j.t);
	t_reap(pid);
}

static void sizes_seen_across(void)
{
	TP_BOTH_ALL(sizes_scenario);
}

static void eagain_child(void *arg)
{
	struct job *j = arg;
	struct t_sync *s = &j->s;
	t_sync_keep(s, 1);
	tp_close_end(&j->t, 0);
	if (t_wait(s, 1) < 0)
		return;
	report(s, tp_setnonblock(&j->t, 1, 1) >= 0);
	long n = 0, r;
	tp_fill(wbuf, 4096, SEED, 0);
	while ((r = tp_res(tp_write(&j->t, wbuf, 4096))) == 4096 && n < 1000)
		n++;
	report(s, n);
	report(s, r);
	report(s, tp_res(tp_write(&j->t, wbuf, 1)));
	report(s, tp_res(tp_write(&j->t, wbuf, 100000)));
	report(s, tp_events(&j->t, 1));
	t_post(s, 1, 1);
	if (t_wait(s, 1) < 0)
		return;
	/* the reader took 10000 bytes: three slots free */
	report(s, tp_events(&j->t, 1));
	report(s, tp_res(tp_write(&j->t, wbuf, 4096)));
	report(s, tp_res(tp_write(&j->t, wbuf, 100000)));
	report(s, tp_res(tp_write(&j->t, wbuf, 1)));
	tp_close_end(&j->t, 1);
	t_post(s, 1, 2);
}

static void eagain_scenario(struct tp_rec *r, int kernel)
{
	struct job j;
	memset(&j, 0, sizeof j);
	if (tp_open_kind(&j.t, kernel ? TP_KERNEL : TP_SHARED, 0) != 0 || t_sync_open(&j.s) != 0) {
		CHECK(!"open");
		return;
	}
	pid_t pid = t_child(eagain_child, &j);
	t_sync_keep(&j.s, 0);
	tp_close_end(&j.t, 1);
	TP_REC(r, "nonblock (reader)", tp_setnonblock(&j.t, 0, 1) >= 0);
	TP_REC(r, "read empty", tp_res(tp_read(&j.t, rbuf, 10)));
	TP_REC(r, "events empty", tp_events(&j.t, 0));
	t_post(&j.s, 0, 1);
	TP_REC(r, "nonblock (writer)", take(&j.s));
	TP_REC(r, "4096-byte writes that went in", take(&j.s));
	TP_REC(r, "the next", take(&j.s));
	TP_REC(r, "write 1 full", take(&j.s));
	TP_REC(r, "write 100000 full", take(&j.s));
	TP_REC(r, "events full (writer)", take(&j.s));
	CHECK_EQ(t_wait(&j.s, 0), 1);
	TP_REC(r, "nread full", tp_nread(&j.t, 0));
	TP_REC(r, "read 10000", tp_res(tp_read(&j.t, rbuf, 10000)));
	t_post(&j.s, 0, 1);
	TP_REC(r, "events (writer)", take(&j.s));
	TP_REC(r, "write 4096", take(&j.s));
	TP_REC(r, "write 100000", take(&j.s));
	TP_REC(r, "write 1", take(&j.s));
	CHECK_EQ(t_wait(&j.s, 0), 2);
	TP_REC(r, "nread", tp_nread(&j.t, 0));
	long total = 0;
	ssize_t n;
	while ((n = tp_read(&j.t, rbuf, 30000)) > 0)
		total += n;
	TP_REC(r, "drained", total);
	TP_REC(r, "then", tp_res(n));
	TP_REC(r, "events at EOF", tp_events(&j.t, 0));
	t_sync_close(&j.s);
	tp_close(&j.t);
	t_reap(pid);
}

static void nonblock_eagain_full_empty(void)
{
	TP_BOTH_ALL(eagain_scenario);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	wbuf = malloc(BUFSZ);
	rbuf = malloc(BUFSZ);
	if (!wbuf || !rbuf)
		return 2;
	RUN(stream_write_sizes);
	RUN(stream_random_mixes);
	RUN(stream_readv_writev);
	RUN(stream_small_capacity);
	RUN(sizes_seen_across);
	RUN(nonblock_eagain_full_empty);
	free(wbuf);
	free(rbuf);
	return T_DONE();
}
