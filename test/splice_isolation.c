/*
 * splice_isolation.c - what a write does after a transfer.  After a tee, a
 * partial splice or a fanout, writes to the source or to a destination
 * never change what another pipe reads (pagepipe never appends to a page
 * another pipe shares, nor to a buffer whose front was spliced away);
 * and a buffer moved whole by pp_splice still takes merges in its new
 * pipe, using as many slots as on Linux (moved_buffer_merges, compared
 * with splice(2)).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice.h"

struct two {
	struct pp_end *a[2], *b[2];
};

static void two_open(struct two *t)
{
	CHECK_EQ(pp_pipe(t->a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(t->b, PP_NONBLOCK), 0);
}

static void two_close(struct two *t)
{
	pp_close(t->a[0]);
	pp_close(t->a[1]);
	pp_close(t->b[0]);
	pp_close(t->b[1]);
}

/* Read exactly the concatenation of the given stream pieces, then EAGAIN. */
struct piece {
	size_t n;
	unsigned seed;
	size_t off;
};
static void expect_pieces(struct pp_end *r, const struct piece *pc, int np)
{
	unsigned char *buf = malloc(BIGBUF);
	size_t total = 0, at = 0;
	for (int i = 0; i < np; i++)
		total += pc[i].n;
	while (at < total) {
		ssize_t got = pp_read(r, buf + at, BIGBUF - at);
		if (got <= 0) {
			CHECK_EQ(got, (long)(total - at));
			break;
		}
		at += (size_t)got;
	}
	CHECK_EQ(at, total);
	at = 0;
	for (int i = 0; i < np; i++) {
		long bad = tp_verify(buf + at, pc[i].n, pc[i].seed, pc[i].off);
		if (bad >= 0)
			fprintf(stderr, "piece %d (seed %u): first wrong byte at %ld\n", i, pc[i].seed,
			        bad);
		CHECK_EQ(bad, -1);
		at += pc[i].n;
	}
	CHECK_ERR(pp_read(r, buf, 1), EAGAIN);
	free(buf);
}

static void isolation_after_tee(void)
{
	struct two t;
	for (int order = 0; order < 2; order++) {
		two_open(&t);
		put(t.a[1], 100, 1, 0);
		CHECK_EQ(pp_tee(t.a[0], t.b[1], 1000, 0), 100);
		CHECK_EQ(tp_pages_in_use(), 1);
		/* small writes that would merge into the shared last buffer */
		if (order == 0) {
			put(t.a[1], 50, 2, 0);
			put(t.b[1], 30, 3, 0);
		} else {
			put(t.b[1], 30, 3, 0);
			put(t.a[1], 50, 2, 0);
		}
		/* shared pages are never appended to: each write took a page */
		CHECK_EQ(tp_pages_in_use(), 3);
		struct piece pa[] = { { 100, 1, 0 }, { 50, 2, 0 } };
		struct piece pb[] = { { 100, 1, 0 }, { 30, 3, 0 } };
		expect_pieces(t.b[0], pb, 2);
		expect_pieces(t.a[0], pa, 2);
		CHECK_EQ(tp_pages_in_use(), 0);
		two_close(&t);
	}

	/* a tee of part of a buffer, then writes to both, then a second tee
	 * of what the source holds now */
	two_open(&t);
	put(t.a[1], 3000, 4, 0);
	CHECK_EQ(pp_tee(t.a[0], t.b[1], 1234, 0), 1234);
	put(t.a[1], 40, 5, 0);
	put(t.b[1], 40, 6, 0);
	CHECK_EQ(pp_tee(t.a[0], t.b[1], SIZE_MAX, 0), 3040);
	put(t.a[1], 7, 7, 0);
	put(t.b[1], 7, 8, 0);
	struct piece pa[] = { { 3000, 4, 0 }, { 40, 5, 0 }, { 7, 7, 0 } };
	struct piece pb[] = { { 1234, 4, 0 }, { 40, 6, 0 }, { 3000, 4, 0 },
		              { 40, 5, 0 },   { 7, 8, 0 } };
	expect_pieces(t.a[0], pa, 3);
	expect_pieces(t.b[0], pb, 5);
	two_close(&t);
	CHECK_EQ(tp_pages_in_use(), 0);
}

static void isolation_after_partial_splice(void)
{
	struct two t;
	for (int order = 0; order < 2; order++) {
		two_open(&t);
		put(t.a[1], 100, 1, 0);
		CHECK_EQ(pp_splice(t.a[0], t.b[1], 30, 0), 30);
		CHECK_EQ(pp_nread(t.a[0]), 70);
		CHECK_EQ(tp_pages_in_use(), 1);
		if (order == 0) {
			put(t.a[1], 10, 2, 0);
			put(t.b[1], 10, 3, 0);
		} else {
			put(t.b[1], 10, 3, 0);
			put(t.a[1], 10, 2, 0);
		}
		struct piece pa[] = { { 70, 1, 30 }, { 10, 2, 0 } };
		struct piece pb[] = { { 30, 1, 0 }, { 10, 3, 0 } };
		expect_pieces(t.a[0], pa, 2);
		expect_pieces(t.b[0], pb, 2);
		two_close(&t);
	}
	/* a split page whose other half has been read: still no appending
	 * into the bytes the other pipe reads */
	two_open(&t);
	put(t.a[1], 200, 1, 0);
	CHECK_EQ(pp_splice(t.a[0], t.b[1], 150, 0), 150);
	struct piece one[] = { { 50, 1, 150 } };
	expect_pieces(t.a[0], one, 1);
	put(t.a[1], 20, 2, 0);
	put(t.b[1], 20, 3, 0);
	struct piece pa[] = { { 20, 2, 0 } };
	struct piece pb[] = { { 150, 1, 0 }, { 20, 3, 0 } };
	expect_pieces(t.a[0], pa, 1);
	expect_pieces(t.b[0], pb, 2);
	two_close(&t);
	CHECK_EQ(tp_pages_in_use(), 0);
}

static void isolation_after_fanout(void)
{
	struct pp_end *a[2], *o[3][2], *outs[3];
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(pp_pipe(o[k], PP_NONBLOCK), 0);
		outs[k] = o[k][1];
	}
	put(a[1], 5000, 1, 0); /* buffers of 4096 and 904 */
	CHECK_EQ(pp_fanout(a[0], outs, 3, 4500, 0), 4500);
	CHECK_EQ(tp_pages_in_use(), 2);
	for (int k = 0; k < 3; k++)
		put(outs[k], 10, 10 + (unsigned)k, 0);
	put(a[1], 10, 2, 0);
	for (int k = 0; k < 3; k++) {
		struct piece pk[] = { { 4500, 1, 0 }, { 10, 10 + (unsigned)k, 0 } };
		expect_pieces(o[k][0], pk, 2);
	}
	struct piece pa[] = { { 500, 1, 4500 }, { 10, 2, 0 } };
	expect_pieces(a[0], pa, 2);
	close_fan(a, o, 3);
	CHECK_EQ(tp_pages_in_use(), 0);
}

/* Slots a pipe has left: non-blocking page writes until EAGAIN (the pipe
 * must be non-blocking; what was written stays). */
static int tp_free_slots(struct tp *t)
{
	char page[PG];
	int n = 0;
	memset(page, 'f', sizeof page);
	while (tp_write(t, page, PG) == PG)
		n++;
	return n;
}

/* A buffer moved whole keeps taking merges in its new pipe, on Linux and
 * here; the bytes stay right. */
static void moved_buffer_merges(void)
{
	int slots[2];
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		unsigned char buf[200];
		CHECK_EQ(tp_open(&a, kernel, PP_NONBLOCK), 0);
		CHECK_EQ(tp_open(&b, kernel, PP_NONBLOCK), 0);
		tp_fill(buf, 100, 1, 0);
		CHECK_EQ(tp_write(&a, buf, 100), 100);
		ssize_t r = kernel ? splice(a.fd[0], NULL, b.fd[1], NULL, 1000, 0)
		                   : pp_splice(a.e[0], b.e[1], 1000, 0);
		CHECK_EQ(r, 100);
		tp_fill(buf, 50, 2, 0);
		CHECK_EQ(tp_write(&b, buf, 50), 50);
		if (!kernel)
			CHECK_EQ(tp_pages_in_use(), 1);
		CHECK_EQ(tp_read(&b, buf, 200), 150);
		CHECK_EQ(tp_verify(buf, 100, 1, 0), -1);
		CHECK_EQ(tp_verify(buf + 100, 50, 2, 0), -1);
		/* again, and count the slots left */
		tp_fill(buf, 100, 1, 0);
		CHECK_EQ(tp_write(&a, buf, 100), 100);
		r = kernel ? splice(a.fd[0], NULL, b.fd[1], NULL, 1000, 0)
		           : pp_splice(a.e[0], b.e[1], 1000, 0);
		CHECK_EQ(r, 100);
		CHECK_EQ(tp_write(&b, buf, 50), 50);
		slots[kernel] = tp_free_slots(&b);
		tp_close(&a);
		tp_close(&b);
	}
	CHECK_EQ(slots[0], 15);
	CHECK_EQ(slots[0], slots[1]);
	CHECK_EQ(tp_pages_in_use(), 0);
}

int main(void)
{
	RUN(isolation_after_tee);
	RUN(isolation_after_partial_splice);
	RUN(isolation_after_fanout);
	RUN(moved_buffer_merges);
	return T_DONE();
}
