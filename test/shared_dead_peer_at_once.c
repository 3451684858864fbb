/*
 * shared_dead_peer_at_once.c - a shared pipe whose other side was killed:
 * every non-blocking call that would have failed with EAGAIN says at once
 * what a kernel pipe says, through every way in and out of the pipe.
 *
 * A process killed without closing its ends is seen through its token,
 * which the others look at only every 50 ms while they run (design.md
 * section 13); but a call about to fail with EAGAIN looks at once, so a
 * non-blocking writer to a full pipe whose last reader died gets EPIPE,
 * and a non-blocking reader of an empty pipe whose last writer died gets
 * end of file, on its first call after the death, as on a kernel pipe.
 * Until December 2026 only pp_read, pp_write, pp_peek and pp_reserve
 * looked: pp_splice, pp_tee, pp_fanout (either side), pp_vmsplice and
 * pp_splice_from_fd returned EAGAIN for up to 50 ms.
 *
 * Each case: a pipe made full (ways in) or left empty (ways out), the
 * other side held by a forked child only; the call gives EAGAIN; the child
 * is killed -9 and reaped; the same call, at once, gives EPIPE (ways in)
 * or 0 (ways out).
 */
#include <fcntl.h>

#include "harness/harness.h"
#include "harness/helpers.h"

enum way_in { IN_WRITE, IN_WRITEV, IN_RESERVE, IN_SPLICE_FROM_FD, IN_SPLICE, IN_TEE, IN_FANOUT,
	      IN_VMSPLICE, IN_N };
static const char *const in_name[] = { "pp_write", "pp_writev", "pp_reserve",
	                               "pp_splice_from_fd", "pp_splice", "pp_tee",
	                               "pp_fanout", "pp_vmsplice" };

enum way_out { OUT_READ, OUT_READV, OUT_PEEK, OUT_SPLICE_TO_FD, OUT_SPLICE, OUT_TEE, OUT_FANOUT,
	       OUT_N };
static const char *const out_name[] = { "pp_read", "pp_readv", "pp_peek", "pp_splice_to_fd",
	                                "pp_splice", "pp_tee", "pp_fanout" };

/* A child that holds the end `keep` of e (closing the other), says it is
 * ready, and waits to be killed. */
static pid_t holder_child(struct pp_end *e[2], int keep)
{
	int ready[2];
	char c = 'r';
	CHECK_EQ(pipe2(ready, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		pp_close(e[1 - keep]);
		if (write(ready[1], &c, 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(ready[1]);
	CHECK_EQ(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return pid;
}

static void kill_and_reap(pid_t pid)
{
	int st;
	CHECK_EQ(kill(pid, SIGKILL), 0);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* ---- ways in ----------------------------------------------------------- */

struct in_ctx {
	struct pp_end *w;   /* the shared pipe's write end, under test */
	struct pp_end *p[2]; /* a private pipe holding bytes: the source to move */
	int kp[2];          /* a kernel pipe holding bytes: the descriptor source */
};

static ssize_t way_in(enum way_in way, struct in_ctx *x)
{
	static char byte = 'x';
	struct iovec iov[4] = { { &byte, 1 } };
	struct pp_end *outs[1] = { x->w };
	switch (way) {
	case IN_WRITE:
		return pp_write(x->w, &byte, 1);
	case IN_WRITEV:
		return pp_writev(x->w, iov, 1);
	case IN_RESERVE: {
		ssize_t k = pp_reserve(x->w, iov, 4, 4096);
		if (k > 0)
			pp_commit(x->w, 0); /* give it back: the case expects none */
		return k;
	}
	case IN_SPLICE_FROM_FD:
		return pp_splice_from_fd(x->kp[0], NULL, x->w, 10, 0);
	case IN_SPLICE:
		return pp_splice(x->p[0], x->w, 10, 0);
	case IN_TEE:
		return pp_tee(x->p[0], x->w, 10, 0);
	case IN_FANOUT:
		return pp_fanout(x->p[0], outs, 1, 10, 0);
	case IN_VMSPLICE:
		return pp_vmsplice(x->w, iov, 1, 0, NULL, NULL);
	case IN_N:
		break;
	}
	errno = EINVAL;
	return -1;
}

static void epipe_at_once(enum way_in way)
{
	struct pp_end *e[2];
	struct in_ctx x;
	static char page[4096];
	CHECK_EQ(pp_pipe(e, PP_SHARED | PP_NONBLOCK | PP_NOSIGPIPE), 0);
	while (pp_write(e[1], page, sizeof page) > 0)
		;
	CHECK_EQ(errno, EAGAIN);
	x.w = e[1];
	CHECK_EQ(pp_pipe(x.p, 0), 0);
	CHECK_EQ(pp_write(x.p[1], "0123456789", 10), 10);
	CHECK_EQ(pipe2(x.kp, O_CLOEXEC), 0);
	CHECK_EQ(write(x.kp[1], "0123456789", 10), 10);

	pid_t pid = holder_child(e, 0);
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_ERR(way_in(way, &x), EAGAIN); /* full, and a reader lives */
	kill_and_reap(pid);
	CHECK_ERR(way_in(way, &x), EPIPE); /* its first call after the death */
	CHECK_ERR(pp_write(e[1], "x", 1), EPIPE);

	CHECK_EQ(pp_close(e[1]), 0);
	CHECK_EQ(pp_close(x.p[0]), 0);
	CHECK_EQ(pp_close(x.p[1]), 0);
	close(x.kp[0]);
	close(x.kp[1]);
}

/* ---- ways out ---------------------------------------------------------- */

struct out_ctx {
	struct pp_end *r;    /* the shared pipe's read end, under test */
	struct pp_end *p[2]; /* a private pipe: where bytes would go */
	int kp[2];           /* a kernel pipe: the descriptor sink */
};

static ssize_t way_out(enum way_out way, struct out_ctx *x)
{
	char buf[16];
	struct iovec iov[4] = { { buf, sizeof buf } };
	struct pp_end *outs[1] = { x->p[1] };
	switch (way) {
	case OUT_READ:
		return pp_read(x->r, buf, sizeof buf);
	case OUT_READV:
		return pp_readv(x->r, iov, 1);
	case OUT_PEEK:
		return pp_peek(x->r, iov, 4);
	case OUT_SPLICE_TO_FD:
		return pp_splice_to_fd(x->r, x->kp[1], NULL, 10, 0);
	case OUT_SPLICE:
		return pp_splice(x->r, x->p[1], 10, 0);
	case OUT_TEE:
		return pp_tee(x->r, x->p[1], 10, 0);
	case OUT_FANOUT:
		return pp_fanout(x->r, outs, 1, 10, 0);
	case OUT_N:
		break;
	}
	errno = EINVAL;
	return -1;
}

static void eof_at_once(enum way_out way)
{
	struct pp_end *e[2];
	struct out_ctx x;
	CHECK_EQ(pp_pipe(e, PP_SHARED | PP_NONBLOCK), 0);
	x.r = e[0];
	CHECK_EQ(pp_pipe(x.p, 0), 0);
	CHECK_EQ(pipe2(x.kp, O_CLOEXEC), 0);

	pid_t pid = holder_child(e, 1);
	CHECK_EQ(pp_close(e[1]), 0);
	CHECK_ERR(way_out(way, &x), EAGAIN); /* empty, and a writer lives */
	kill_and_reap(pid);
	CHECK_EQ(way_out(way, &x), 0); /* end of file, on the first call */

	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_EQ(pp_close(x.p[0]), 0);
	CHECK_EQ(pp_close(x.p[1]), 0);
	close(x.kp[0]);
	close(x.kp[1]);
}

/* The way the running case takes (t_run runs functions of no argument). */
static int way;

static void epipe_case(void)
{
	epipe_at_once((enum way_in)way);
}

static void eof_case(void)
{
	eof_at_once((enum way_out)way);
}

int main(void)
{
	char name[64];
	t_around_cases(tp_fds_note, tp_fds_same);
	for (way = 0; way < IN_N; way++) {
		snprintf(name, sizeof name, "epipe_at_once_%s", in_name[way]);
		t_run(name, epipe_case);
	}
	for (way = 0; way < OUT_N; way++) {
		snprintf(name, sizeof name, "eof_at_once_%s", out_name[way]);
		t_run(name, eof_case);
	}
	return T_DONE();
}
