/*
 * splice_shares_pages.c - pp_tee and pp_fanout share pages, never copy
 * them: exact pages_in_use counts after a 4-way fanout of 64 KiB (16
 * pages, not 64), after tees to three pipes, after a partial read of a
 * copy and after splicing the rest of a copy on; pipes closed with shared
 * data in them give every page back.
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice.h"

static void fill_pipe(struct pp_end *w, size_t n, unsigned seed)
{
	unsigned char *buf = malloc(n);
	tp_fill(buf, n, seed, 0);
	CHECK_EQ(pp_write(w, buf, n), (long)n);
	free(buf);
}

/* Read n bytes and check they are bytes [off, off+n) of stream seed. */
static void expect_read(struct pp_end *r, size_t n, unsigned seed, size_t off)
{
	unsigned char *buf = malloc(n + 1);
	ssize_t got = pp_read(r, buf, n + 1);
	CHECK_EQ(got, (long)n);
	if (got == (ssize_t)n)
		CHECK_EQ(tp_verify(buf, n, seed, off), -1);
	free(buf);
}

static void fanout_tee_share_pages(void)
{
	struct pp_end *in[2], *o[4][2], *outs[4];
	CHECK_EQ(tp_pages_in_use(), 0);
	CHECK_EQ(pp_pipe(in, 0), 0);
	for (int k = 0; k < 4; k++) {
		CHECK_EQ(pp_pipe(o[k], PP_NONBLOCK), 0);
		outs[k] = o[k][1];
	}
	fill_pipe(in[1], 65536, 7);
	CHECK_EQ(tp_pages_in_use(), 16);
	CHECK_EQ(pp_fanout(in[0], outs, 4, SIZE_MAX, 0), 65536);
	CHECK_EQ(tp_pages_in_use(), 16); /* 4 x 16 slots, 16 pages */
	CHECK_EQ(pp_nread(in[0]), 0);
	for (int k = 0; k < 4; k++) {
		CHECK_EQ(pp_nread(o[k][0]), 65536);
		CHECK_EQ(pp_events(o[k][1]) & POLLOUT, 0); /* every output is full */
	}
	for (int k = 0; k < 4; k++) {
		expect_read(o[k][0], 65536, 7, 0);
		CHECK_EQ(tp_pages_in_use(), k < 3 ? 16 : 0);
	}

	/* tee to three pipes: the source keeps its data, still 16 pages */
	fill_pipe(in[1], 65536, 8);
	for (int k = 0; k < 3; k++)
		CHECK_EQ(pp_tee(in[0], outs[k], SIZE_MAX, 0), 65536);
	CHECK_EQ(tp_pages_in_use(), 16);
	CHECK_EQ(pp_nread(in[0]), 65536);
	expect_read(in[0], 65536, 8, 0);
	CHECK_EQ(tp_pages_in_use(), 16);
	/* a partial read of every page of a copy frees nothing yet */
	unsigned char buf[100];
	CHECK_EQ(pp_read(o[0][0], buf, 100), 100);
	CHECK_EQ(tp_verify(buf, 100, 8, 0), -1);
	CHECK_EQ(tp_pages_in_use(), 16);
	/* moving the rest of one copy on moves the references, not pages */
	CHECK_EQ(pp_splice(o[0][0], outs[3], SIZE_MAX, PP_SPLICE_NONBLOCK), 65536 - 100);
	CHECK_EQ(tp_pages_in_use(), 16);
	expect_read(o[3][0], 65536 - 100, 8, 0 + 100);
	CHECK_EQ(tp_pages_in_use(), 16);
	expect_read(o[1][0], 65536, 8, 0);
	CHECK_EQ(tp_pages_in_use(), 16);
	expect_read(o[2][0], 65536, 8, 0);
	CHECK_EQ(tp_pages_in_use(), 0);
	close_fan(in, o, 4);
	CHECK_EQ(tp_pages_in_use(), 0);

	/* pipes closed with shared data in them give every page back */
	CHECK_EQ(pp_pipe(in, 0), 0);
	for (int k = 0; k < 4; k++) {
		CHECK_EQ(pp_pipe(o[k], 0), 0);
		outs[k] = o[k][1];
	}
	fill_pipe(in[1], 40000, 9);
	CHECK_EQ(pp_tee(in[0], outs[0], 20000, 0), 20000);
	CHECK_EQ(pp_fanout(in[0], outs + 1, 3, 30000, 0), 30000);
	CHECK_EQ(tp_pages_in_use(), 10);
	pp_close(o[2][0]);
	pp_close(o[2][1]);
	CHECK_EQ(tp_pages_in_use(), 10);
	pp_close(in[0]);
	pp_close(in[1]);
	CHECK_EQ(tp_pages_in_use(), 8);
	for (int k = 0; k < 4; k++) {
		if (k == 2)
			continue;
		pp_close(o[k][0]);
		pp_close(o[k][1]);
	}
	CHECK_EQ(tp_pages_in_use(), 0);
}

int main(void)
{
	RUN(fanout_tee_share_pages);
	return T_DONE();
}
