/*
 * vmsplice_partial.c - a pp_vmsplice that does not fit:
 *   nonblock_partial_splice_flag / nonblock_partial_end_flag
 *                            a nearly full pipe takes part of a vmsplice
 *                            with PP_SPLICE_NONBLOCK, or through a
 *                            PP_NONBLOCK end: the count is what went in and
 *                            release covers only that part of each segment;
 *   full_pipe_eagain_no_release  EAGAIN on a full pipe (also when the last
 *                            buffer has room a write could merge into: a
 *                            vmsplice needs a slot); no release ever
 *                            follows.
 * After every case: no pool page in use, no callback with a foreign arg
 * (vmsplice.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "vmsplice.h"

/* A nearly full pipe (2 free slots) takes [A: 100][B: 20000] partly:
 * A whole and B's first 4096 bytes.  how: 0 PP_SPLICE_NONBLOCK, 1 a
 * PP_NONBLOCK end set with pp_setfl, 2 PP_NONBLOCK from pp_pipe. */
static void partial_case(int how)
{
	struct pp_end *p[2];
	struct rel_log log;
	unsigned char *a = malloc(100 + 1), *b = malloc(20000 + 1);
	fill_random(a, 101);
	fill_random(b, 20001);
	log_init(&log);
	mkpipe(p, how == 2 ? PP_NONBLOCK : 0);
	fill_slots(p[1], 2);
	if (how == 1)
		CHECK_EQ(pp_setfl(p[1], PP_NONBLOCK), 0);
	CHECK_EQ(tp_pages_in_use(), 14);
	struct iovec iov[3] = { { a + 1, 100 }, { NULL, 0 }, { b + 1, 20000 } };
	unsigned flags = how == 0 ? PP_SPLICE_NONBLOCK : 0;
	CHECK_EQ(pp_vmsplice(p[1], iov, 3, flags, on_release, &log), 4196);
	CHECK_EQ(pp_nread(p[0]), 14 * 4096 + 4196);
	CHECK_EQ(tp_pages_in_use(), 14); /* the vmspliced part took no page */
	CHECK_EQ(log_count(&log), 0);
	/* Now full: nothing more goes in. */
	CHECK_ERR(pp_vmsplice(p[1], iov, 3, flags, on_release, &log), EAGAIN);
	static unsigned char got[14 * 4096 + 4196];
	CHECK_EQ(read_n(p[0], got, sizeof got), sizeof got);
	CHECK(memcmp(got + 14 * 4096, a + 1, 100) == 0);
	CHECK(memcmp(got + 14 * 4096 + 100, b + 1, 4096) == 0);
	CHECK_EQ(log_count(&log), 2);
	CHECK_RELEASED(&log, a + 1, 100);
	CHECK_RELEASED(&log, b + 1, 4096); /* only the part that went in */

	/* One free slot, one long segment: its first page goes in. */
	fill_slots(p[1], 1);
	struct iovec one = { b + 1, 20000 };
	CHECK_EQ(pp_vmsplice(p[1], &one, 1, flags, on_release, &log), 4096);
	CHECK_EQ(drain(p[0]), 15 * 4096 + 4096);
	CHECK_EQ(log_count(&log), 3);
	CHECK_EQ(log.seg[2].iov_base, b + 1);
	CHECK_EQ(log.seg[2].iov_len, 4096);

	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(log_count(&log), 3);
	log_fini(&log);
	free(a);
	free(b);
}

static void nonblock_partial_splice_flag(void)
{
	partial_case(0);
}

static void nonblock_partial_end_flag(void)
{
	partial_case(1);
	partial_case(2);
}

static void full_pipe_eagain_no_release(void)
{
	struct rel_log log;
	unsigned char a[16] = "caller's bytes";
	struct iovec iov[2] = { { a, 1 }, { a + 1, 10 } };
	log_init(&log);
	for (int how = 0; how < 2; how++) {
		struct pp_end *p[2];
		mkpipe(p, how ? PP_NONBLOCK : 0);
		unsigned flags = how ? 0 : PP_SPLICE_NONBLOCK;
		fill_slots(p[1], 0);
		CHECK_ERR(pp_vmsplice(p[1], iov, 2, flags, on_release, &log), EAGAIN);
		CHECK_EQ(pp_nread(p[0]), 65536);
		/* Every slot used, but the last buffer has room: a write merges
		 * into it, a vmsplice needs a slot of its own. */
		CHECK_EQ(drain(p[0]), 65536);
		fill_slots(p[1], 1);
		CHECK_EQ(pp_write(p[1], "x", 1), 1);
		CHECK_ERR(pp_vmsplice(p[1], iov, 1, flags, on_release, &log), EAGAIN);
		CHECK_EQ(pp_setfl(p[1], PP_NONBLOCK), 0);
		CHECK_EQ(pp_write(p[1], "y", 1), 1);
		CHECK_EQ(pp_nread(p[0]), 15 * 4096 + 2);
		CHECK_EQ(drain(p[0]), 15 * 4096 + 2);
		CHECK_EQ(pp_close(p[1]), 0);
		CHECK_EQ(pp_close(p[0]), 0);
	}
	CHECK_EQ(log_count(&log), 0); /* never, not even after drain and close */
	log_fini(&log);
}

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(nonblock_partial_splice_flag);
	RUN(nonblock_partial_end_flag);
	RUN(full_pipe_eagain_no_release);
	return T_DONE();
}
