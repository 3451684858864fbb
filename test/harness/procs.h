/*
 * procs.h - tests whose pipe ends are in several processes (PP_SHARED
 * pagepipes against kernel pipes): forking a child that runs one function
 * and reports through its exit status, reaping it, and handshakes over a
 * socket pair, so that one process knows where the other has got to
 * without sleeping.
 *
 *   - t_child(fn, arg): fork; the child runs fn(arg), closes nothing else,
 *     and _exits 0, or 1 if a CHECK failed in it (its messages go to
 *     stderr as in the parent).  t_reap(pid) waits for it (at most
 *     T_CHILD_WAIT seconds, then kills it) and fails the case unless it
 *     exited 0;
 *   - struct t_sync: a socket pair; after the fork one process uses
 *     side 0, the other side 1.  t_post(s, side, byte) sends a byte,
 *     t_wait(s, side) receives one (or -1: the peer is gone, or nothing
 *     came within T_CHILD_WAIT seconds, an upper bound only);
 *   - t_send_all / t_recv_all: whole buffers over a stream socket.
 *
 * Everything is static inline, after harness.h.
 */
#ifndef PP_TEST_PROCS_H
#define PP_TEST_PROCS_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Upper bound on any wait for another process of the test, in seconds. */
#define T_CHILD_WAIT 20

/* Fork a child that runs fn(arg) and exits with its verdict.  SIGPIPE is
 * ignored in the child (EPIPE is what the tests look at). */
static inline pid_t t_child(void (*fn)(void *), void *arg)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		t_case_failed = 1;
		return -1;
	}
	if (pid == 0) {
		signal(SIGPIPE, SIG_IGN);
		t_case_failed = 0;
		fn(arg);
		_exit(t_case_failed ? 1 : 0);
	}
	return pid;
}

/* Wait for child pid (at most T_CHILD_WAIT s, then SIGKILL it); fail the
 * case unless it exited 0.  Returns its wait status. */
static inline int t_reap(pid_t pid)
{
	int st = 0;
	if (pid <= 0)
		return -1;
	double end = t_now() + T_CHILD_WAIT;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			perror("waitpid");
			t_case_failed = 1;
			return -1;
		}
		if (t_now() > end) {
			fprintf(stderr, "child %d did not end in %d s: killed\n", (int)pid,
			        T_CHILD_WAIT);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			t_case_failed = 1;
			return st;
		}
		t_sleep_ms(1);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "child %d failed: %s %d\n", (int)pid,
		        WIFEXITED(st) ? "exit" : "signal",
		        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		t_case_failed = 1;
	}
	return st;
}

struct t_sync {
	int fd[2];
};

static inline int t_sync_open(struct t_sync *s)
{
	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->fd);
}

/* After the fork: keep side `side`, close the other. */
static inline void t_sync_keep(struct t_sync *s, int side)
{
	close(s->fd[!side]);
	s->fd[!side] = -1;
}

static inline void t_sync_close(struct t_sync *s)
{
	for (int i = 0; i < 2; i++)
		if (s->fd[i] >= 0)
			close(s->fd[i]);
	s->fd[0] = s->fd[1] = -1;
}

static inline int t_send_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Receive exactly n bytes, waiting at most T_CHILD_WAIT s for each part;
 * 0, or -1 (peer gone, timeout, error). */
static inline int t_recv_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		struct pollfd pf = { fd, POLLIN, 0 };
		int k = poll(&pf, 1, T_CHILD_WAIT * 1000);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		ssize_t r = recv(fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static inline void t_post(struct t_sync *s, int side, unsigned char b)
{
	if (t_send_all(s->fd[side], &b, 1) != 0) {
		perror("t_post");
		t_case_failed = 1;
	}
}

static inline int t_wait(struct t_sync *s, int side)
{
	unsigned char b;
	if (t_recv_all(s->fd[side], &b, 1) != 0)
		return -1;
	return b;
}

#endif
