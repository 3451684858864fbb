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
#include "harness/pipe.h"
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

/* One scenario on one pipe (kernel or pagepipe): what every call gave. */
struct outcome {
	struct res rw[2][2]; /* [count][read, write] */
	struct res after;    /* the read that follows: nothing moved */
};

static struct outcome scenario(int kernel, enum state st)
{
	struct outcome o;
	struct tp t;
	char buf[64] = "data";
	memset(&o, 0, sizeof o);
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK | PP_NOSIGPIPE), 0);
	if (st == HAS_DATA)
		CHECK_EQ(tp_write(&t, buf, 4), 4);
	size_t counts[] = { above_ssize_max, all_ones };
	for (int i = 0; i < 2; i++) {
		o.rw[i][0] = TRY(tp_read(&t, buf, counts[i]));
		o.rw[i][1] = TRY(tp_write(&t, buf, counts[i]));
	}
	if (!kernel) {
		struct iovec v[2] = { { buf, SSIZE_MAX }, { buf, 2 } };
		CHECK_ERR(pp_readv(t.e[0], v, 2), EINVAL);
		CHECK_ERR(pp_writev(t.e[1], v, 2), EINVAL);
	}
	o.after = TRY(tp_read(&t, buf, sizeof buf));
	tp_close(&t);
	return o;
}

static void run(enum state st)
{
	struct outcome k = scenario(1, st), p = scenario(0, st);
	for (int i = 0; i < 2; i++) {
		same("read", k.rw[i][0], p.rw[i][0]);
		same("write", k.rw[i][1], p.rw[i][1]);
	}
	same("read after", k.after, p.after);
}

static void with_data(void)
{
	run(HAS_DATA);
}

static void when_empty(void)
{
	run(EMPTY);
}

/* At end of file: the reader's huge count, then a small one. */
static void eof_reads(int kernel, struct res out[2])
{
	struct tp t;
	char buf[8];
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	tp_close_end(&t, 1);
	out[0] = TRY(tp_read(&t, buf, above_ssize_max));
	out[1] = TRY(tp_read(&t, buf, sizeof buf));
	tp_close(&t);
}

static void at_end_of_file(void)
{
	struct res k[2], p[2];
	eof_reads(1, k);
	eof_reads(0, p);
	same("read at eof", k[0], p[0]);
	same("read at eof, small", k[1], p[1]);
}

int main(void)
{
	RUN(with_data);
	RUN(when_empty);
	RUN(at_end_of_file);
	return T_DONE();
}
