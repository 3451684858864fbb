/*
 * vmsplice_release_shared.c - memory lent by pp_vmsplice is released only
 * when its last copy is consumed:
 *   release_after_tee        a pp_tee copy holds the memory: no release
 *                            until both pipes are drained, then one per
 *                            segment, at the exact read that drains its
 *                            last chunk;
 *   release_after_fanout     the same with pp_fanout to three pipes;
 *   release_after_splice_chain  pp_splice on to a second and third pipe,
 *                            also splitting a chunk between two pipes.
 * The callback scribbles over the memory it gets back, so an early
 * release shows as wrong data.
 * After every case: no pool page in use, no callback with a foreign arg
 * (vmsplice.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "vmsplice.h"

static void release_after_tee(void)
{
	for (int order = 0; order < 2; order++) {
		struct abc s;
		struct rel_log log;
		struct pp_end *p[2], *q[2];
		unsigned char got[9097];
		abc_init(&s);
		log_init(&log);
		mkpipe(p, 0);
		mkpipe(q, 0);
		CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release_poison, &log), 9097);
		CHECK_EQ(pp_tee(p[0], q[1], 100000, 0), 9097);
		CHECK_EQ(tp_pages_in_use(), 0);
		/* The first consumer drains its pipe whole: nothing is released. */
		struct pp_end *first = order ? q[0] : p[0], *last = order ? p[0] : q[0];
		CHECK_EQ(read_n(first, got, sizeof got), sizeof got);
		CHECK(memcmp(got, s.want, sizeof got) == 0);
		CHECK_EQ(pp_nread(first), 0);
		CHECK_EQ(log_count(&log), 0);
		abc_read_last(&s, last, &log);
		for (int i = 0; i < 2; i++) {
			CHECK_EQ(pp_close(p[i]), 0);
			CHECK_EQ(pp_close(q[i]), 0);
		}
		CHECK_EQ(log_count(&log), 3);
		log_fini(&log);
		free(s.mem);
	}
}

static void release_after_fanout(void)
{
	struct abc s;
	struct rel_log log;
	struct pp_end *p[2], *o[3][2];
	unsigned char got[9097];
	abc_init(&s);
	log_init(&log);
	mkpipe(p, 0);
	for (int i = 0; i < 3; i++)
		mkpipe(o[i], 0);
	struct pp_end *outs[3] = { o[0][1], o[1][1], o[2][1] };
	CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release_poison, &log), 9097);
	CHECK_EQ(pp_fanout(p[0], outs, 3, 100000, 0), 9097);
	CHECK_EQ(pp_nread(p[0]), 0); /* the source gave its references away */
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(tp_pages_in_use(), 0);
	/* Two of the three drain; the third drains part of A. */
	CHECK_EQ(read_n(o[1][0], got, sizeof got), sizeof got);
	CHECK(memcmp(got, s.want, sizeof got) == 0);
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(read_n(o[0][0], got, sizeof got), sizeof got);
	CHECK(memcmp(got, s.want, sizeof got) == 0);
	CHECK_EQ(log_count(&log), 0);
	abc_read_last(&s, o[2][0], &log);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(pp_close(o[i][0]), 0);
		CHECK_EQ(pp_close(o[i][1]), 0);
	}
	CHECK_EQ(log_count(&log), 3);
	log_fini(&log);
	free(s.mem);
}

static void release_after_splice_chain(void)
{
	struct abc s;
	struct rel_log log;
	struct pp_end *p0[2], *p1[2], *p2[2];
	unsigned char got[9097];
	abc_init(&s);
	log_init(&log);
	mkpipe(p0, 0);
	mkpipe(p1, 0);
	mkpipe(p2, 0);
	CHECK_EQ(pp_vmsplice(p0[1], s.iov, 3, 0, on_release_poison, &log), 9097);
	/* p0 -> p1 in two splices (the first splits A's first chunk), then all
	 * of p1 -> p2: the bytes travel, the caller's memory stays lent. */
	CHECK_EQ(pp_splice(p0[0], p1[1], 100, 0), 100);
	CHECK_EQ(pp_splice(p0[0], p1[1], 100000, 0), 8997);
	CHECK_EQ(pp_nread(p0[0]), 0);
	CHECK_EQ(pp_splice(p1[0], p2[1], 100000, 0), 9097);
	CHECK_EQ(pp_nread(p1[0]), 0);
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(tp_pages_in_use(), 0);
	abc_read_last(&s, p2[0], &log);

	/* A chunk split between two pipes: released when both halves are read. */
	struct rel_log log2;
	log_init(&log2);
	CHECK_EQ(pp_vmsplice(p0[1], &s.iov[1], 1, 0, on_release, &log2), 4096);
	CHECK_EQ(pp_splice(p0[0], p1[1], 1000, 0), 1000);
	CHECK_EQ(read_n(p1[0], got, 1000), 1000);
	CHECK(memcmp(got, s.iov[1].iov_base, 1000) == 0);
	CHECK_EQ(log_count(&log2), 0);
	CHECK_EQ(read_n(p0[0], got, 3095), 3095);
	CHECK_EQ(log_count(&log2), 0);
	CHECK_EQ(read_n(p0[0], got + 3095, 1), 1);
	CHECK(memcmp(got, (char *)s.iov[1].iov_base + 1000, 3096) == 0);
	CHECK_EQ(log_count(&log2), 1);
	CHECK_RELEASED(&log2, s.iov[1].iov_base, 4096);

	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pp_close(p0[i]), 0);
		CHECK_EQ(pp_close(p1[i]), 0);
		CHECK_EQ(pp_close(p2[i]), 0);
	}
	CHECK_EQ(log_count(&log), 3);
	CHECK_EQ(log_count(&log2), 1);
	log_fini(&log);
	log_fini(&log2);
	free(s.mem);
}

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(release_after_tee);
	RUN(release_after_fanout);
	RUN(release_after_splice_chain);
	return T_DONE();
}
