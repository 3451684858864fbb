/*
 * peek_consume.c - the zero-copy reader, pp_peek and pp_consume: segments
 * are the pipe's buffers, in place (the same memory after a tee or a
 * move), consume frees pages, EINVAL past the data, 0 at end of file,
 * EAGAIN on an empty non-blocking pipe, and a blocking peek wakes for
 * data.
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice.h"

static void peek_consume(void)
{
	struct pp_end *a[2], *b[2];
	struct iovec iov[8];
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(b, PP_NONBLOCK), 0);

	CHECK_ERR(pp_peek(a[0], iov, 8), EAGAIN);
	CHECK_EQ(pp_peek(a[0], iov, 0), 0);
	CHECK_EQ(pp_consume(a[0], 0), 0);
	CHECK_ERR(pp_consume(a[0], 1), EINVAL);

	/* 100; then 5000: its first 904 bytes merge into that buffer, 4096
	 * take a page; then 3000, which fits nowhere: buffers of 1004, 4096
	 * and 3000 bytes */
	put(a[1], 100, 1, 0);
	put(a[1], 5000, 1, 100);
	put(a[1], 3000, 1, 5100);
	CHECK_EQ(tp_pages_in_use(), 3);
	CHECK_EQ(pp_peek(a[0], iov, 8), 3);
	CHECK_EQ(iov[0].iov_len, 1004);
	CHECK_EQ(iov[1].iov_len, 4096);
	CHECK_EQ(iov[2].iov_len, 3000);
	CHECK_EQ(pp_nread(a[0]), 8100);
	size_t off = 0;
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(tp_verify(iov[k].iov_base, iov[k].iov_len, 1, off), -1);
		off += iov[k].iov_len;
	}
	/* peeking does not consume; max limits the segments */
	CHECK_EQ(pp_peek(a[0], iov, 1), 1);
	CHECK_EQ(iov[0].iov_len, 1004);
	CHECK_EQ(pp_nread(a[0]), 8100);

	/* consume part of the first segment: no page freed */
	CHECK_EQ(pp_consume(a[0], 4), 4);
	CHECK_EQ(tp_pages_in_use(), 3);
	CHECK_EQ(pp_peek(a[0], iov, 8), 3);
	CHECK_EQ(iov[0].iov_len, 1000);
	CHECK_EQ(tp_verify(iov[0].iov_base, 1000, 1, 4), -1);
	/* more than there is: EINVAL, nothing consumed */
	CHECK_ERR(pp_consume(a[0], 8100 - 4 + 1), EINVAL);
	CHECK_EQ(pp_nread(a[0]), 8096);
	/* the rest of the first segment: its page goes */
	CHECK_EQ(pp_consume(a[0], 1000), 1000);
	CHECK_EQ(tp_pages_in_use(), 2);
	CHECK_EQ(pp_peek(a[0], iov, 8), 2);
	CHECK_EQ(tp_verify(iov[0].iov_base, 4096, 1, 1004), -1);
	/* a write that merges into the last buffer leaves the segment held
	 * for it as it was; a new peek shows the longer buffer */
	unsigned char keep[3000];
	void *last_base = iov[1].iov_base;
	memcpy(keep, iov[1].iov_base, 3000);
	put(a[1], 7, 2, 0);
	CHECK_EQ(tp_pages_in_use(), 2);
	CHECK_EQ(memcmp(keep, last_base, 3000), 0);
	CHECK_EQ(pp_peek(a[0], iov, 8), 2);
	CHECK_EQ(iov[1].iov_len, 3007);
	CHECK(iov[1].iov_base == last_base);
	CHECK_EQ(tp_verify((unsigned char *)iov[1].iov_base + 3000, 7, 2, 0), -1);
	/* a read picks up where consume left off */
	unsigned char buf[16];
	CHECK_EQ(pp_read(a[0], buf, 16), 16);
	CHECK_EQ(tp_verify(buf, 16, 1, 1004), -1);
	CHECK_EQ(pp_consume(a[0], 4096 - 16 + 3007), 4096 - 16 + 3007);
	CHECK_EQ(tp_pages_in_use(), 0);
	CHECK_ERR(pp_peek(a[0], iov, 8), EAGAIN);

	/* zero copy: a tee'd segment is the same memory in both pipes, and a
	 * moved one is where it was */
	put(a[1], 300, 3, 0);
	CHECK_EQ(pp_peek(a[0], iov, 8), 1);
	void *where = iov[0].iov_base;
	CHECK_EQ(pp_tee(a[0], b[1], 100, 0), 100);
	CHECK_EQ(pp_peek(b[0], iov, 8), 1);
	CHECK(iov[0].iov_base == where);
	CHECK_EQ(iov[0].iov_len, 100);
	CHECK_EQ(pp_consume(b[0], 100), 100);
	CHECK_EQ(pp_splice(a[0], b[1], SIZE_MAX, 0), 300);
	CHECK_EQ(pp_peek(b[0], iov, 8), 1);
	CHECK(iov[0].iov_base == where);
	CHECK_EQ(tp_verify(iov[0].iov_base, 300, 3, 0), -1);

	/* packets: one segment each; a consumed part leaves the rest */
	struct pp_end *p[2];
	CHECK_EQ(pp_pipe(p, PP_NONBLOCK | PP_PACKET), 0);
	put(p[1], 10, 4, 0);
	put(p[1], 20, 4, 10);
	CHECK_EQ(pp_peek(p[0], iov, 8), 2);
	CHECK_EQ(iov[0].iov_len, 10);
	CHECK_EQ(iov[1].iov_len, 20);
	CHECK_EQ(pp_consume(p[0], 15), 15);
	CHECK_EQ(pp_peek(p[0], iov, 8), 1);
	CHECK_EQ(iov[0].iov_len, 15);
	CHECK_EQ(pp_read(p[0], buf, 16), 15);
	CHECK_EQ(tp_verify(buf, 15, 4, 15), -1);

	/* end of file: 0 */
	pp_close(p[1]);
	CHECK_EQ(pp_peek(p[0], iov, 8), 0);
	pp_close(p[0]);
	pp_close(a[1]);
	CHECK_EQ(pp_peek(a[0], iov, 8), 0);
	CHECK_EQ(pp_consume(a[0], 0), 0);
	pp_close(a[0]);
	pp_close(b[0]);
	pp_close(b[1]);
	CHECK_EQ(tp_pages_in_use(), 0);

	/* a blocking peek waits for data */
	struct pp_end *c[2];
	CHECK_EQ(pp_pipe(c, 0), 0);
	struct job *j = job_new(J_PEEK, NULL, NULL, 0, 0);
	j->fin = c[0];
	CHECK(job_start(j));
	put(c[1], 42, 5, 0);
	CHECK(job_wait(j, 5));
	job_join(j);
	CHECK_EQ(job_res(j), 1);
	CHECK_EQ(j->iov[0].iov_len, 42);
	CHECK_EQ(tp_verify(j->iov[0].iov_base, 42, 5, 0), -1);
	CHECK_EQ(pp_consume(c[0], 42), 42);
	/* and returns 0 when the writer closes */
	CHECK(job_start(j));
	pp_close(c[1]);
	CHECK(job_wait(j, 5));
	job_join(j);
	CHECK_EQ(job_res(j), 0);
	free(j);
	pp_close(c[0]);
	CHECK_EQ(tp_pages_in_use(), 0);
}

int main(void)
{
	RUN(peek_consume);
	return T_DONE();
}
