/*
 * vmsplice_errors.c - pp_vmsplice's arguments:
 *   errors                   EBADF (read end, NULL, closed), EINVAL (n >
 *                            IOV_MAX, unknown flags), EFAULT (iov NULL with
 *                            n > 0, a NULL base with non-zero length; after
 *                            placed segments it returns their count);
 *   arg_and_null_release     each call's callback gets its own arg; a NULL
 *                            release is allowed.
 * After every case: no pool page in use, no callback with a foreign arg
 * (vmsplice.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "vmsplice.h"

static void errors(void)
{
	struct pp_end *p[2];
	struct rel_log log;
	log_init(&log);
	mkpipe(p, 0);
	unsigned char buf[32];
	memset(buf, 'e', sizeof buf);
	struct iovec ok = { buf, 8 };
	CHECK_ERR(pp_vmsplice(p[0], &ok, 1, 0, on_release, &log), EBADF);
	CHECK_ERR(pp_vmsplice(NULL, &ok, 1, 0, on_release, &log), EBADF);

	struct iovec *many = calloc(IOV_MAX + 1, sizeof *many);
	for (int i = 0; i <= IOV_MAX; i++)
		many[i] = (struct iovec){ buf, 1 };
	CHECK_ERR(pp_vmsplice(p[1], many, IOV_MAX + 1, 0, on_release, &log), EINVAL);
	CHECK_ERR(pp_vmsplice(p[1], many, ULONG_MAX, 0, on_release, &log), EINVAL);
	free(many);
	CHECK_ERR(pp_vmsplice(p[1], &ok, 1, 0x10, on_release, &log), EINVAL);
	CHECK_ERR(pp_vmsplice(p[1], &ok, 1, 0x80000000u, on_release, &log), EINVAL);
	CHECK_ERR(pp_vmsplice(p[1], &ok, 1, ~0u, on_release, &log), EINVAL);
	/* Every SPLICE flag is accepted (MOVE, MORE and GIFT are hints). */
	CHECK_EQ(pp_vmsplice(p[1], &ok, 1,
	                     PP_SPLICE_MOVE | PP_SPLICE_NONBLOCK | PP_SPLICE_MORE | PP_SPLICE_GIFT,
	                     on_release, &log), 8);
	CHECK_EQ(drain(p[0]), 8);
	CHECK_EQ(log_count(&log), 1);

	CHECK_ERR(pp_vmsplice(p[1], NULL, 1, 0, on_release, &log), EFAULT);
	struct iovec nul = { NULL, 5 };
	CHECK_ERR(pp_vmsplice(p[1], &nul, 1, 0, on_release, &log), EFAULT);
	CHECK_EQ(pp_nread(p[0]), 0);
	CHECK_EQ(log_count(&log), 1); /* no release for a failed call */
	/* A NULL base after segments that went in: their count, as Linux. */
	struct iovec mixed[3] = { { buf, 5 }, { buf + 5, 3 }, { NULL, 5 } };
	CHECK_EQ(pp_vmsplice(p[1], mixed, 3, 0, on_release, &log), 8);
	CHECK_EQ(drain(p[0]), 8);
	CHECK_EQ(log_count(&log), 3);
	CHECK_RELEASED(&log, buf + 5, 3);
	/* A NULL base of length 0 is no fault. */
	struct iovec nul0[2] = { { NULL, 0 }, { buf + 20, 4 } };
	CHECK_EQ(pp_vmsplice(p[1], nul0, 2, 0, on_release, &log), 4);
	CHECK_EQ(drain(p[0]), 4);
	CHECK_EQ(log_count(&log), 4);
	CHECK_RELEASED(&log, buf + 20, 4);

	/* A closed handle. */
	struct pp_end *w = p[1];
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_ERR(pp_vmsplice(w, &ok, 1, 0, on_release, &log), EBADF);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(log_count(&log), 4);
	log_fini(&log);
}

static void arg_and_null_release(void)
{
	struct pp_end *p[2];
	struct rel_log l1, l2;
	log_init(&l1);
	log_init(&l2);
	mkpipe(p, 0);
	unsigned char a[300];
	fill_random(a, sizeof a);
	struct iovec i1 = { a, 100 }, i2 = { a + 100, 100 }, i3 = { a + 200, 100 };
	CHECK_EQ(pp_vmsplice(p[1], &i1, 1, 0, on_release, &l1), 100);
	CHECK_EQ(pp_vmsplice(p[1], &i2, 1, 0, on_release, &l2), 100);
	CHECK_EQ(pp_vmsplice(p[1], &i3, 1, 0, NULL, &l1), 100); /* no callback */
	CHECK_EQ(pp_vmsplice(p[1], &i1, 1, 0, on_release, &l2), 100); /* lent twice */
	unsigned char got[400];
	CHECK_EQ(read_n(p[0], got, 400), 400);
	CHECK(memcmp(got, a, 300) == 0);
	CHECK(memcmp(got + 300, a, 100) == 0);
	CHECK_EQ(log_count(&l1), 1);
	CHECK_EQ(log_count(&l2), 2);
	CHECK_RELEASED(&l1, a, 100);
	CHECK_RELEASED(&l2, a + 100, 100);
	CHECK_RELEASED(&l2, a, 100);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	log_fini(&l1);
	log_fini(&l2);
}

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(errors);
	RUN(arg_and_null_release);
	return T_DONE();
}
