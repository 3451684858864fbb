/*
 * splice_errors.c - the errors of pp_splice, pp_tee and pp_fanout, and
 * which one wins.
 *   errors                       EBADF, EINVAL, EFAULT as the header lists
 *                                them;
 *   zero_length_and_check_order  len 0, unknown flags and bad descriptors
 *                                checked in the kernel's order (compared
 *                                with splice(2) and tee(2));
 *   eof_epipe_eagain_order       which of EAGAIN, EPIPE and end of input
 *                                wins when several apply, compared with
 *                                the kernel (non-blocking).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice.h"

static void errors(void)
{
	struct pp_end *a[2], *b[2], *c[2];
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(b, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(c, PP_NONBLOCK), 0);
	CHECK_EQ(pp_write(a[1], "hello", 5), 5);
	struct pp_end *none = TP_HIDE((struct pp_end *)NULL);

	/* wrong sides and NULL */
	CHECK_ERR(pp_splice(none, b[1], 5, 0), EBADF);
	CHECK_ERR(pp_splice(a[0], none, 5, 0), EBADF);
	CHECK_ERR(pp_splice(a[1], b[1], 5, 0), EBADF);
	CHECK_ERR(pp_splice(a[0], b[0], 5, 0), EBADF);
	CHECK_ERR(pp_splice(a[1], b[0], 5, 0), EBADF);
	CHECK_ERR(pp_tee(none, b[1], 5, 0), EBADF);
	CHECK_ERR(pp_tee(a[0], none, 5, 0), EBADF);
	CHECK_ERR(pp_tee(a[1], b[1], 5, 0), EBADF);
	CHECK_ERR(pp_tee(a[0], b[0], 5, 0), EBADF);
	struct pp_end *o1[2] = { b[1], c[0] }, *o2[2] = { b[1], none };
	CHECK_ERR(pp_fanout(a[0], o1, 2, 5, 0), EBADF);
	CHECK_ERR(pp_fanout(a[0], o2, 2, 5, 0), EBADF);
	CHECK_ERR(pp_fanout(a[1], o1, 1, 5, 0), EBADF);
	CHECK_ERR(pp_fanout(none, o1, 1, 5, 0), EBADF);

	/* the same pipe */
	struct pp_end *a1dup = pp_dup(a[1]);
	CHECK(a1dup != NULL);
	CHECK_ERR(pp_splice(a[0], a[1], 5, 0), EINVAL);
	CHECK_ERR(pp_splice(a[0], a1dup, 5, 0), EINVAL);
	CHECK_ERR(pp_tee(a[0], a[1], 5, 0), EINVAL);
	CHECK_ERR(pp_splice(a[0], a[1], 5, PP_SPLICE_NONBLOCK), EINVAL);
	struct pp_end *self[2] = { b[1], a1dup };
	CHECK_ERR(pp_fanout(a[0], self, 2, 5, 0), EINVAL);

	/* fanout counts and duplicates */
	struct pp_end *many[66];
	struct pp_end *mp[66][2];
	for (int i = 0; i < 66; i++) {
		CHECK_EQ(pp_pipe(mp[i], PP_NONBLOCK), 0);
		many[i] = mp[i][1];
	}
	CHECK_ERR(pp_fanout(a[0], many, 0, 5, 0), EINVAL);
	CHECK_ERR(pp_fanout(a[0], many, -1, 5, 0), EINVAL);
	CHECK_ERR(pp_fanout(a[0], many, 65, 5, 0), EINVAL);
	CHECK_EQ(pp_nread(a[0]), 5);
	struct pp_end *b1dup = pp_dup(b[1]);
	struct pp_end *dup1[3] = { b[1], c[1], b[1] }, *dup2[2] = { b1dup, b[1] };
	CHECK_ERR(pp_fanout(a[0], dup1, 3, 5, 0), EINVAL);
	CHECK_ERR(pp_fanout(a[0], dup2, 2, 5, 0), EINVAL);

	/* unknown flags */
	CHECK_ERR(pp_splice(a[0], b[1], 5, 0x10), EINVAL);
	CHECK_ERR(pp_tee(a[0], b[1], 5, 0x100), EINVAL);
	CHECK_ERR(pp_fanout(a[0], many, 2, 5, 0x80000000u), EINVAL);

	/* outs NULL */
	CHECK_ERR(pp_fanout(a[0], TP_HIDE((struct pp_end *const *)NULL), 1, 5, 0), EFAULT);

	/* a closed handle (still in quarantine) */
	struct pp_end *gone = pp_dup(c[1]);
	CHECK_EQ(pp_close(gone), 0);
	CHECK_ERR(pp_splice(a[0], gone, 5, 0), EBADF);

	/* none of that moved a byte */
	CHECK_EQ(pp_nread(a[0]), 5);
	CHECK_EQ(pp_nread(b[0]), 0);
	for (int i = 0; i < 66; i++)
		CHECK_EQ(pp_nread(mp[i][0]), 0);

	/* 64 outputs is allowed */
	CHECK_EQ(pp_fanout(a[0], many, 64, 5, 0), 5);
	CHECK_EQ(tp_pages_in_use(), 1);
	for (int i = 0; i < 64; i++) {
		char buf[8];
		CHECK_EQ(pp_read(mp[i][0], buf, sizeof buf), 5);
		CHECK_EQ(memcmp(buf, "hello", 5), 0);
	}
	CHECK_EQ(tp_pages_in_use(), 0);

	/* peek / consume */
	struct iovec iov[4];
	CHECK_ERR(pp_peek(a[1], iov, 4), EBADF);
	CHECK_ERR(pp_peek(none, iov, 4), EBADF);
	CHECK_ERR(pp_peek(a[0], iov, -1), EINVAL);
	CHECK_ERR(pp_peek(a[0], iov, IOV_MAX + 1), EINVAL);
	CHECK_ERR(pp_peek(a[0], TP_HIDE((struct iovec *)NULL), 4), EFAULT);
	CHECK_ERR(pp_consume(a[1], 0), EBADF);
	CHECK_ERR(pp_consume(none, 0), EBADF);

	pp_close(a1dup);
	pp_close(b1dup);
	for (int i = 0; i < 66; i++) {
		pp_close(mp[i][0]);
		pp_close(mp[i][1]);
	}
	struct pp_end **all[] = { a, b, c };
	for (int i = 0; i < 3; i++) {
		pp_close(all[i][0]);
		pp_close(all[i][1]);
	}
	CHECK_EQ(tp_pages_in_use(), 0);
}

/*
 * Linux checks a zero length first: splice(2) returns 0 for len 0 before
 * looking at its flags or descriptors; tee(2) checks its flags, then
 * returns 0 for len 0.  With a length, splice(2) and tee(2) check the
 * flags before the descriptors.  (pp_fanout has no kernel counterpart.)
 */
static void zero_length_and_check_order(void)
{
	if (t_valgrind())
		SKIP("valgrind fails splice(2) and tee(2) on a bad descriptor with EBADF before the kernel checks len and flags");
	int ka[2], kb[2];
	struct pp_end *pa[2], *pb[2];
	struct pp_end *none = TP_HIDE((struct pp_end *)NULL);
	CHECK_EQ(pipe2(ka, O_NONBLOCK), 0);
	CHECK_EQ(pipe2(kb, O_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(pa, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(pb, PP_NONBLOCK), 0);
	struct {
		const char *what;
		long k, p;
	} c[] = {
		{ "splice(bad in, out, 0, 0)", tp_res(splice(TP_HIDE(-1), NULL, kb[1], NULL, 0, 0)),
		  tp_res(pp_splice(none, pb[1], 0, 0)) },
		{ "splice(in, write end of in, 0, 0)", tp_res(splice(ka[0], NULL, ka[1], NULL, 0, 0)),
		  tp_res(pp_splice(pa[0], pa[1], 0, 0)) },
		{ "splice(in, out, 0, unknown flag)",
		  tp_res(splice(ka[0], NULL, kb[1], NULL, 0, TP_HIDE(0x100u))),
		  tp_res(pp_splice(pa[0], pb[1], 0, 0x100)) },
		{ "tee(bad in, out, 0, 0)", tp_res(tee(TP_HIDE(-1), kb[1], 0, 0)),
		  tp_res(pp_tee(none, pb[1], 0, 0)) },
		{ "tee(in, write end of in, 0, 0)", tp_res(tee(ka[0], ka[1], 0, 0)),
		  tp_res(pp_tee(pa[0], pa[1], 0, 0)) },
		{ "tee(in, out, 0, unknown flag)", tp_res(tee(ka[0], kb[1], 0, TP_HIDE(0x100u))),
		  tp_res(pp_tee(pa[0], pb[1], 0, 0x100)) },
		{ "splice(bad in, out, 1, unknown flag)",
		  tp_res(splice(TP_HIDE(-1), NULL, kb[1], NULL, 1, TP_HIDE(0x100u))),
		  tp_res(pp_splice(none, pb[1], 1, 0x100)) },
		{ "tee(bad in, out, 1, unknown flag)", tp_res(tee(TP_HIDE(-1), kb[1], 1, TP_HIDE(0x100u))),
		  tp_res(pp_tee(none, pb[1], 1, 0x100)) },
		{ "splice(in, write end of in, 1, 0)", tp_res(splice(ka[0], NULL, ka[1], NULL, 1, 0)),
		  tp_res(pp_splice(pa[0], pa[1], 1, 0)) },
		{ "splice(write end, out, 1, 0)", tp_res(splice(ka[1], NULL, kb[1], NULL, 1, 0)),
		  tp_res(pp_splice(pa[1], pb[1], 1, 0)) },
		{ "tee(in, read end, 1, 0)", tp_res(tee(ka[0], kb[0], 1, 0)), tp_res(pp_tee(pa[0], pb[0], 1, 0)) },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
		if (c[i].k != c[i].p) {
			char x[64], y[64];
			fprintf(stderr, "%s: kernel %s, pagepipe %s\n", c[i].what,
			        res_str(c[i].k, x, sizeof x), res_str(c[i].p, y, sizeof y));
			t_case_failed = 1;
		}
	close(ka[0]);
	close(ka[1]);
	close(kb[0]);
	close(kb[1]);
	pp_close(pa[0]);
	pp_close(pa[1]);
	pp_close(pb[0]);
	pp_close(pb[1]);
}

/*
 * Which answer wins when several apply, compared with the kernel for
 * splice and tee (non-blocking): an empty input with a writer waits
 * (EAGAIN) even when the output has no reader; a full output waits, or is
 * EPIPE without a reader, even at end of input; an output without reader
 * is EPIPE (with SIGPIPE) before end of input is 0.
 */
enum { S_EMPTY_EOF, S_EMPTY_EOF_NORD, S_EMPTY_EOF_FULL, S_EMPTY_EOF_FULL_NORD,
       S_EMPTY_NORD, S_DATA_NORD, S_DATA_FULL, S_DATA_EOF, S_COUNT };

static long order_scenario(int kernel, int tee_it, int sc, int *sig)
{
	struct tp a, b;
	char page[PG];
	memset(page, 'o', sizeof page);
	CHECK_EQ(tp_open(&a, kernel, PP_NONBLOCK), 0);
	CHECK_EQ(tp_open(&b, kernel, PP_NONBLOCK), 0);
	if (sc >= S_DATA_NORD)
		CHECK_EQ(tp_write(&a, page, 10), 10);
	if (sc != S_EMPTY_NORD && sc != S_DATA_NORD && sc != S_DATA_FULL)
		tp_close_end(&a, 1);
	if (sc == S_EMPTY_EOF_FULL || sc == S_EMPTY_EOF_FULL_NORD || sc == S_DATA_FULL) {
		CHECK_EQ(tp_setsize(&b, 1, PG), PG);
		CHECK_EQ(tp_write(&b, page, PG), PG);
	}
	if (sc == S_EMPTY_EOF_NORD || sc == S_EMPTY_EOF_FULL_NORD || sc == S_EMPTY_NORD ||
	    sc == S_DATA_NORD)
		tp_close_end(&b, 0);
	tp_sigpipe_taken();
	long r;
	if (kernel)
		r = tee_it ? tp_res(tee(a.fd[0], b.fd[1], 100, SPLICE_F_NONBLOCK))
		           : tp_res(splice(a.fd[0], NULL, b.fd[1], NULL, 100, SPLICE_F_NONBLOCK));
	else
		r = tee_it ? tp_res(pp_tee(a.e[0], b.e[1], 100, PP_SPLICE_NONBLOCK))
		           : tp_res(pp_splice(a.e[0], b.e[1], 100, PP_SPLICE_NONBLOCK));
	*sig = tp_sigpipe_taken();
	tp_close(&a);
	tp_close(&b);
	return r;
}

static void eof_epipe_eagain_order(void)
{
	static const long want[S_COUNT] = { 0, -EPIPE, -EAGAIN, -EPIPE, -EAGAIN, -EPIPE, -EAGAIN, 10 };
	static const char *const name[S_COUNT] = {
		"empty, no writer", "empty, no writer; output without reader",
		"empty, no writer; output full", "empty, no writer; output full without reader",
		"empty with writer; output without reader", "data; output without reader",
		"data; output full", "data, no writer",
	};
	sigset_t old;
	tp_sigpipe_block(&old);
	for (int tee_it = 0; tee_it < 2; tee_it++)
		for (int sc = 0; sc < S_COUNT; sc++) {
			int ksig, psig;
			long k = order_scenario(1, tee_it, sc, &ksig);
			long p = order_scenario(0, tee_it, sc, &psig);
			if (k != p || ksig != psig || p != want[sc] || psig != (want[sc] == -EPIPE)) {
				char x[64], y[64];
				fprintf(stderr, "%s, %s: kernel %s%s, pagepipe %s%s\n",
				        tee_it ? "tee" : "splice", name[sc], res_str(k, x, sizeof x),
				        ksig ? " +SIGPIPE" : "", res_str(p, y, sizeof y),
				        psig ? " +SIGPIPE" : "");
				t_case_failed = 1;
			}
		}
	tp_sigpipe_restore(&old);
	CHECK_EQ(tp_pages_in_use(), 0);
}

int main(void)
{
	RUN(errors);
	RUN(zero_length_and_check_order);
	RUN(eof_epipe_eagain_order);
	return T_DONE();
}
