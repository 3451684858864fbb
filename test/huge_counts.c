/*
 * huge_counts.c - a count no buffer can have fails as read(2) and write(2)
 * fail it: pp_read and pp_write with a count above SSIZE_MAX are EFAULT
 * (the kernel's access check fails before anything else is looked at),
 * whether the pipe holds data, is empty, or is at end of file.  Each case
 * runs on a kernel pipe and on a pagepipe and compares.  The vectored calls
 * with lengths summing past SSIZE_MAX are EINVAL, as readv(2) says; Linux
 * 6.x truncates the sum and then fails such a call with EFAULT on its
 * too-long segment (a documented difference, docs/design.md section 10),
 * so there only pagepipe's answer is checked.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harness/harness.h"
#include "pagepipe.h"

/* Result of one call: the return value and errno. */
struct res {
	long long ret;
	int err;
};

/* errno of a call that returned ret (0 when it succeeded). */
static struct res res_of(long long ret)
{
	return (struct res){ ret, ret < 0 ? errno : 0 };
}
#define TRY(expr) res_of((long long)(expr))

/* Counts no buffer can have, out of the compiler's sight (it would warn). */
static volatile size_t above_ssize_max = (size_t)SSIZE_MAX + 1, all_ones = SIZE_MAX;

static void same(const char *what, struct res k, struct res p)
{
	if (k.ret != p.ret || (k.ret < 0 && k.err != p.err)) {
		fprintf(stderr, "%s: kernel %lld errno %d, pagepipe %lld errno %d\n", what, k.ret,
		        k.err, p.ret, p.err);
		t_case_failed = 1;
	}
}

enum state { HAS_DATA, EMPTY };

static void run(enum state st)
{
	int kp[2];
	struct pp_end *pe[2];
	char buf[64] = "data";
	CHECK_EQ(pipe2(kp, O_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(pe, PP_NONBLOCK | PP_NOSIGPIPE), 0);
	if (st == HAS_DATA) {
		CHECK_EQ(write(kp[1], buf, 4), 4);
		CHECK_EQ(pp_write(pe[1], buf, 4), 4);
	}
	size_t counts[] = { above_ssize_max, all_ones };
	for (int i = 0; i < 2; i++) {
		same("read", TRY(read(kp[0], buf, counts[i])), TRY(pp_read(pe[0], buf, counts[i])));
		same("write", TRY(write(kp[1], buf, counts[i])), TRY(pp_write(pe[1], buf, counts[i])));
	}
	struct iovec v[2] = { { buf, SSIZE_MAX }, { buf, 2 } };
	CHECK_ERR(pp_readv(pe[0], v, 2), EINVAL);
	CHECK_ERR(pp_writev(pe[1], v, 2), EINVAL);
	/* Nothing moved: the data is all still there. */
	if (st == HAS_DATA)
		same("read after", TRY(read(kp[0], buf, sizeof buf)),
		     TRY(pp_read(pe[0], buf, sizeof buf)));
	close(kp[0]);
	close(kp[1]);
	pp_close(pe[0]);
	pp_close(pe[1]);
}

static void with_data(void)
{
	run(HAS_DATA);
}

static void when_empty(void)
{
	run(EMPTY);
}

static void at_end_of_file(void)
{
	int kp[2];
	struct pp_end *pe[2];
	char buf[8];
	CHECK_EQ(pipe(kp), 0);
	CHECK_EQ(pp_pipe(pe, 0), 0);
	close(kp[1]);
	pp_close(pe[1]);
	same("read at eof", TRY(read(kp[0], buf, above_ssize_max)),
	     TRY(pp_read(pe[0], buf, above_ssize_max)));
	same("read at eof, small", TRY(read(kp[0], buf, sizeof buf)),
	     TRY(pp_read(pe[0], buf, sizeof buf)));
	close(kp[0]);
	pp_close(pe[0]);
}

int main(void)
{
	RUN(with_data);
	RUN(when_empty);
	RUN(at_end_of_file);
	return T_DONE();
}
