/*
 * private_fork_ebadf.c - a private pipe (no PP_SHARED) in a forked child.
 *
 * The rule (pagepipe.h pp_pipe; design.md section 13 "Fork"): in a child
 * made by fork(2) the handles of a private pipe are not open: every call
 * on them fails with EBADF, as if the child had closed them (pp_dup
 * returns NULL, pp_events -1, pp_close itself EBADF), so the child can
 * never disturb the parent's pipe.  Checked for every call of the API that
 * takes a handle, on both ends and a pp_dup'd handle, with a pp_fd made
 * before the fork; the child's own new pipes, private and shared, work,
 * and mixing one of them with an old handle is EBADF too.  Then the
 * parent's pipe must be untouched: the same bytes in the same order, the
 * same capacity, flags and events, pp_fd still in step, and both ends
 * still working, to end of file.
 */
#include <fcntl.h>

#include "harness/harness.h"
#include "harness/helpers.h"

/*
 * A forked child cannot free its copy of the parent's private pipe
 * (pp_close is EBADF there, by design), and the ring's buffer array is
 * referenced by an offset, which valgrind's leak check cannot follow: at
 * the child's exit it would report that copy as lost.  So a child sends
 * its verdict (a byte) through a kernel pipe and ends by exec'ing this
 * program with "--exit" (an exec runs no leak check; a fatal signal
 * would); child_verdict() reads the verdict and reaps.
 */
static char self_exe[4096];

static __attribute__((noreturn)) void child_end(int fd, char verdict)
{
	(void)!write(fd, &verdict, 1);
	char *argv[] = { (char *)"private_fork_ebadf", (char *)"--exit", NULL };
	execv(self_exe, argv);
	_exit(99);
}

/* The verdict of child pid: the byte it sent ('0': all went well), once it
 * has exec'd and exited as planned; 0 otherwise. */
static char child_verdict(pid_t pid, int fd)
{
	char v = 0;
	int st;
	if (read(fd, &v, 1) != 1)
		v = 0;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		v = 0;
	return v;
}

static void release(void *arg, const struct iovec *iov)
{
	(void)arg;
	(void)iov;
}

/* Every call on handle h fails with EBADF (in the child).  other: a live
 * pipe of the child's own, for the calls that take two. */
static void all_ebadf(struct pp_end *h, struct pp_end *const other[2])
{
	char buf[16] = "abc";
	struct iovec iov = { buf, sizeof buf };
	struct pp_shared_stats st;
	CHECK_ERR(pp_read(h, buf, sizeof buf), EBADF);
	CHECK_ERR(pp_write(h, buf, 3), EBADF);
	CHECK_ERR(pp_readv(h, &iov, 1), EBADF);
	CHECK_ERR(pp_writev(h, &iov, 1), EBADF);
	CHECK_ERR(pp_nread(h), EBADF);
	CHECK_ERR(pp_getsize(h), EBADF);
	CHECK_ERR(pp_setsize(h, 4096), EBADF);
	CHECK_ERR(pp_getfl(h), EBADF);
	CHECK_ERR(pp_setfl(h, PP_NONBLOCK), EBADF);
	CHECK_ERR(pp_events(h), EBADF);
	CHECK_ERR(pp_fd(h), EBADF);
	errno = 0;
	CHECK(pp_dup(h) == NULL && errno == EBADF);
	CHECK_ERR(pp_export(h), EBADF);
	CHECK_ERR(pp_shared_stats(h, &st), EBADF);
	CHECK_ERR(pp_peek(h, &iov, 1), EBADF);
	CHECK_ERR(pp_consume(h, 0), EBADF);
	CHECK_ERR(pp_vmsplice(h, &iov, 1, 0, release, NULL), EBADF);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	CHECK_ERR(pp_splice_to_fd(h, null, NULL, 10, PP_SPLICE_NONBLOCK), EBADF);
	CHECK_ERR(pp_splice_from_fd(null, NULL, h, 10, PP_SPLICE_NONBLOCK), EBADF);
	close(null);
	/* With a live pipe of the child's on the other side. */
	CHECK_ERR(pp_splice(h, other[1], 10, PP_SPLICE_NONBLOCK), EBADF);
	CHECK_ERR(pp_splice(other[0], h, 10, PP_SPLICE_NONBLOCK), EBADF);
	CHECK_ERR(pp_tee(h, other[1], 10, PP_SPLICE_NONBLOCK), EBADF);
	CHECK_ERR(pp_tee(other[0], h, 10, PP_SPLICE_NONBLOCK), EBADF);
	struct pp_end *outs[2] = { other[1], h };
	CHECK_ERR(pp_fanout(h, outs, 1, 10, PP_SPLICE_NONBLOCK), EBADF);
	CHECK_ERR(pp_fanout(other[0], outs, 2, 10, PP_SPLICE_NONBLOCK), EBADF);
	/* Last: closing it is EBADF too, and changes nothing. */
	CHECK_ERR(pp_close(h), EBADF);
	CHECK_ERR(pp_getfl(h), EBADF);
}

/* The child's own pipe works (and is the one `all_ebadf` mixes in). */
static void own_pipe_works(struct pp_end *const p[2])
{
	char buf[8];
	CHECK_EQ(pp_write(p[1], "own", 3), 3);
	CHECK_EQ(pp_read(p[0], buf, sizeof buf), 3);
	CHECK(memcmp(buf, "own", 3) == 0);
}

static void child_tries_everything(void)
{
	struct pp_end *e[2], *d;
	char buf[8192];
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK((d = pp_dup(e[1])) != NULL);
	int rfd = pp_fd(e[0]), wfd = pp_fd(e[1]);
	CHECK(rfd >= 0 && wfd >= 0);
	/* Data: 5000 bytes in two writes (two buffers, one partly read). */
	tp_fill(buf, sizeof buf, 7, 0);
	CHECK_EQ(pp_write(e[1], buf, 3000), 3000);
	CHECK_EQ(pp_write(d, buf + 3000, 2000), 2000);
	CHECK_EQ(pp_read(e[0], buf, 10), 10);
	long size = pp_getsize(e[0]);
	int fl0 = pp_getfl(e[0]), fl1 = pp_getfl(e[1]);
	short ev0 = pp_events(e[0]), ev1 = pp_events(e[1]);
	long pages = tp_pages_in_use();
	int vp[2];
	CHECK_EQ(pipe2(vp, O_CLOEXEC), 0);

	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct pp_end *own[2], *sh[2];
		t_case_failed = 0;
		CHECK_EQ(pp_pipe(own, 0), 0);
		CHECK_EQ(pp_pipe(sh, PP_SHARED), 0);
		own_pipe_works(own);
		own_pipe_works(sh);
		all_ebadf(e[0], own);
		all_ebadf(e[1], own);
		all_ebadf(d, sh);
		/* The eventfds the parent made are the parent's: still none of
		 * the child's calls touched them. */
		own_pipe_works(own);
		own_pipe_works(sh);
		pp_close(own[0]);
		pp_close(own[1]);
		pp_close(sh[0]);
		pp_close(sh[1]);
		child_end(vp[1], t_case_failed ? '1' : '0');
	}
	close(vp[1]);
	CHECK_EQ(child_verdict(pid, vp[0]), '0');
	close(vp[0]);

	/* The parent's pipe as it was. */
	CHECK_EQ(pp_getsize(e[0]), size);
	CHECK_EQ(pp_getfl(e[0]), fl0);
	CHECK_EQ(pp_getfl(e[1]), fl1);
	CHECK_EQ(pp_events(e[0]), ev0);
	CHECK_EQ(pp_events(e[1]), ev1);
	CHECK_EQ(pp_nread(e[0]), 4990);
	CHECK_EQ(tp_pages_in_use(), pages);
	struct pollfd p[2] = { { rfd, POLLIN, 0 }, { wfd, POLLIN, 0 } };
	CHECK_EQ(poll(p, 2, 0), 2);
	CHECK_EQ(pp_fd(e[0]), rfd);
	/* Every byte, in order, then more through both write handles. */
	memset(buf, 0, sizeof buf);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 4990);
	CHECK_EQ(tp_verify(buf, 4990, 7, 10), -1);
	p[0].revents = 0;
	CHECK_EQ(poll(p, 1, 0), 0); /* drained: the read end's fd not ready */
	CHECK_EQ(pp_write(d, "after", 5), 5);
	CHECK_EQ(poll(p, 1, 0), 1);
	CHECK_EQ(pp_close(d), 0);
	CHECK_EQ(pp_write(e[1], "!", 1), 1);
	CHECK_EQ(pp_close(e[1]), 0);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 6);
	CHECK(memcmp(buf, "after!", 6) == 0);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 0);
	CHECK_EQ(pp_close(e[0]), 0);
}

/* A forked child does not hold a private pipe's ends (unlike a shared
 * pipe's, or a kernel pipe's): while it lives, the parent's reader sees
 * end of file as soon as the parent's last writer closes. */
static void child_does_not_hold_ends(void)
{
	struct pp_end *e[2];
	int go[2];
	char c;
	int vp[2];
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pipe2(go, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(vp, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(go[1]);
		(void)!read(go[0], &c, 1); /* alive, holding nothing */
		child_end(vp[1], '0');
	}
	close(vp[1]);
	close(go[0]);
	CHECK_EQ(pp_close(e[1]), 0);
	CHECK_EQ(pp_read(e[0], &c, 1), 0);
	CHECK_EQ(pp_close(e[0]), 0);
	close(go[1]);
	CHECK_EQ(child_verdict(pid, vp[0]), '0');
	close(vp[0]);
}

/* And the other way: the parent's last reader closed, the parent's writer
 * gets EPIPE though the child lives on. */
static void child_does_not_hold_readers(void)
{
	struct pp_end *e[2];
	int go[2];
	char c;
	sigset_t old;
	int vp[2];
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pipe2(go, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(vp, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(go[1]);
		(void)!read(go[0], &c, 1);
		child_end(vp[1], '0');
	}
	close(vp[1]);
	close(go[0]);
	CHECK_EQ(pp_close(e[0]), 0);
	tp_sigpipe_block(&old);
	CHECK_ERR(pp_write(e[1], "x", 1), EPIPE);
	CHECK_EQ(tp_sigpipe_taken(), 1);
	tp_sigpipe_restore(&old);
	CHECK_EQ(pp_close(e[1]), 0);
	close(go[1]);
	CHECK_EQ(child_verdict(pid, vp[0]), '0');
	close(vp[0]);
}

static void after(void)
{
	tp_fds_same();
	CHECK_EQ(tp_pages_in_use(), 0);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--exit") == 0)
		return 0; /* a child's end (child_end) */
	tp_self_exe(self_exe, sizeof self_exe);
	t_around_cases(tp_fds_note, after);
	RUN(child_tries_everything);
	RUN(child_does_not_hold_ends);
	RUN(child_does_not_hold_readers);
	return T_DONE();
}
