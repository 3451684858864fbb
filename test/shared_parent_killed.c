/*
 * shared_parent_killed.c - the process that made a shared pipe and forked
 * its peers is killed (SIGKILL): they see it gone, as they would see any
 * other peer gone.
 *
 * A process P makes a PP_SHARED pipe (or a second pipe in its memory with
 * pp_pipe_in), forks C, keeps one side and C the other, and is killed:
 *   - P the writer: C, reading, gets P's bytes, then end of file;
 *   - P the reader: C, writing, gets EPIPE.
 * Within a bounded time (C's own alarm fails it after 10 s; the test
 * becomes C's reaper with PR_SET_CHILD_SUBREAPER, so it sees how C ended).
 * Each is also run on a kernel pipe, where the kernel does it, so the
 * scenario itself is checked.
 *
 * What it guards against: a holder's liveness lock sits on a description
 * of the ctl memory; were the memory mapped through that description, the
 * mapping (inherited by every child) would keep the lock alive as long as
 * one of them lived, and P's death would never be seen.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pagepipe.h"
#include "harness/harness.h"

enum { K_KERNEL, K_SHARED, K_PIPE_IN };

/* C's side: 0 when it saw what it should (and within its alarm). */
static int child_reads(int kind, struct pp_end *r, int fd)
{
	char buf[16];
	size_t got = 0;
	alarm(10);
	for (;;) {
		ssize_t n = kind == K_KERNEL ? read(fd, buf, sizeof buf) : pp_read(r, buf, sizeof buf);
		if (n < 0)
			return 1; /* EINTR from the alarm: it hung */
		if (n == 0)
			return got == 3 ? 0 : 2;
		got += (size_t)n;
	}
}

static int child_writes(int kind, struct pp_end *w, int fd)
{
	char buf[4096];
	memset(buf, 'x', sizeof buf);
	alarm(10);
	for (;;) {
		ssize_t n = kind == K_KERNEL ? write(fd, buf, sizeof buf) : pp_write(w, buf, sizeof buf);
		if (n < 0)
			return errno == EPIPE ? 0 : 1;
	}
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* P: make the pipe, fork C, say ready on `ready`, then write 3 bytes (or
 * hold the read end) until killed. */
static void parent_process(int kind, bool p_writes, int ready)
{
	struct pp_end *e[2] = { NULL, NULL }, *s[2];
	int fd[2] = { -1, -1 };
	if (kind == K_KERNEL) {
		if (pipe(fd))
			_exit(3);
	} else if (kind == K_SHARED) {
		if (pp_pipe(e, PP_SHARED | PP_NOSIGPIPE))
			_exit(3);
	} else {
		if (pp_pipe(s, PP_SHARED) || pp_pipe_in(e, PP_NOSIGPIPE, s[1]))
			_exit(3);
		pp_close(s[0]);
		pp_close(s[1]);
	}
	pid_t c = fork();
	if (c < 0)
		_exit(3);
	if (c == 0) {
		close(ready);
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_alarm;
		sigaction(SIGALRM, &sa, NULL);
		signal(SIGPIPE, SIG_IGN);
		int rc;
		if (p_writes) {
			if (kind == K_KERNEL)
				close(fd[1]);
			else
				pp_close(e[1]);
			rc = child_reads(kind, e[0], fd[0]);
		} else {
			if (kind == K_KERNEL)
				close(fd[0]);
			else
				pp_close(e[0]);
			rc = child_writes(kind, e[1], fd[1]);
		}
		_exit(rc);
	}
	if (p_writes) {
		if (kind == K_KERNEL) {
			close(fd[0]);
			if (write(fd[1], "abc", 3) != 3)
				_exit(3);
		} else {
			pp_close(e[0]);
			if (pp_write(e[1], "abc", 3) != 3)
				_exit(3);
		}
	} else {
		if (kind == K_KERNEL)
			close(fd[1]);
		else
			pp_close(e[1]);
	}
	if (write(ready, &c, sizeof c) != sizeof c)
		_exit(3);
	for (;;)
		pause();
}

static void scenario(int kind, bool p_writes)
{
	int ready[2];
	CHECK_EQ(pipe(ready), 0);
	fflush(stderr);
	pid_t p = fork();
	if (p == 0) {
		close(ready[0]);
		parent_process(kind, p_writes, ready[1]);
	}
	CHECK(p > 0);
	close(ready[1]);
	pid_t c = 0;
	CHECK_EQ(read(ready[0], &c, sizeof c), (ssize_t)sizeof c);
	close(ready[0]);
	kill(p, SIGKILL);
	int st;
	CHECK_EQ(waitpid(p, &st, 0), p);
	/* C is ours now (subreaper). */
	CHECK_EQ(waitpid(c, &st, 0), c);
	CHECK(WIFEXITED(st));
	if (WIFEXITED(st) && WEXITSTATUS(st))
		fprintf(stderr, "  %s pipe, the killed process %s: its child ended with %d (1: it "
		        "hung 10 s, 2: wrong bytes)\n", kind == K_KERNEL ? "kernel" :
		        kind == K_SHARED ? "shared" : "pp_pipe_in", p_writes ? "wrote" : "read",
		        WEXITSTATUS(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
}

static void eof_after_parent_killed_kernel(void) { scenario(K_KERNEL, true); }
static void eof_after_parent_killed(void) { scenario(K_SHARED, true); }
static void eof_after_parent_killed_pipe_in(void) { scenario(K_PIPE_IN, true); }
static void epipe_after_parent_killed_kernel(void) { scenario(K_KERNEL, false); }
static void epipe_after_parent_killed(void) { scenario(K_SHARED, false); }
static void epipe_after_parent_killed_pipe_in(void) { scenario(K_PIPE_IN, false); }

int main(void)
{
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	RUN(eof_after_parent_killed_kernel);
	RUN(eof_after_parent_killed);
	RUN(eof_after_parent_killed_pipe_in);
	RUN(epipe_after_parent_killed_kernel);
	RUN(epipe_after_parent_killed);
	RUN(epipe_after_parent_killed_pipe_in);
	return T_DONE();
}
