/*
 * shared_fork_eof.c - end of file and EPIPE between processes (PP_SHARED).
 *
 * The rules (pagepipe.h, pp_pipe; design.md section 13):
 *  - after fork the child holds every shared end the parent held, so a
 *    reader sees end of file only once the last write end in every process
 *    is closed, and a writer gets EPIPE (and SIGPIPE) only once the last
 *    read end is;
 *  - a process that lets go of its ends without pp_close counts as having
 *    closed them: exit(3), _exit(2), killed by SIGKILL, or execve(2) (the
 *    handles do not survive an exec);
 *  - across exec only an exported descriptor survives (FD_CLOEXEC cleared),
 *    and it keeps its end open, as an inherited pipe descriptor does.
 * Each scenario runs on a kernel pipe (the same steps on descriptors) and
 * on a shared pagepipe, and the two records must be equal.  Processes
 * step through handshakes on kernel pipes, never through sleeps.  The
 * exec'd helper is this program run again with "--helper" (run.sh runs
 * every program in the test directory, so no separate helper program).
 *
 * One known difference is allowed for, with an upper bound: a writer
 * whose last reader died without closing (killed, exited, exec'd) learns
 * it from a token it looks at about every 50 ms, so its first writes may
 * still succeed for that long (design.md 13 "Holders and liveness");
 * the kernel fails the first.  A pp_close, in contrast, is seen at once.
 */
#include <fcntl.h>

#include "harness/harness.h"
#include "harness/helpers.h"

/* This program's path, read at start (under valgrind, /proc/self/exe
 * itself would name valgrind's tool, not the program). */
static char self_exe[4096];

enum how { BY_CLOSE, BY_EXIT, BY_UEXIT, BY_KILL, BY_EXEC, BY_EXEC_KEEP, N_HOW };

/* ---- the exec'd helper -------------------------------------------------- */

/* argv: --helper k|p SIDE FD ACK GO.  With FD >= 0 (the end, a descriptor
 * or a pagepipe export), write "exec" to it (SIDE 1) or read 4 bytes and
 * check them (SIDE 0); then say 'E' on ACK and wait for GO to be closed or
 * written, and exit without closing anything. */
static int helper(char **argv)
{
	int kernel = argv[2][0] == 'k';
	int side = atoi(argv[3]), fd = atoi(argv[4]), ack = atoi(argv[5]), go = atoi(argv[6]);
	char c = 'E', buf[4];
	if (fd >= 0) {
		struct pp_end *e = NULL;
		if (!kernel && !(e = pp_import(fd)))
			return 10;
		if (side == 1) {
			if ((kernel ? write(fd, "exec", 4) : pp_write(e, "exec", 4)) != 4)
				return 11;
		} else {
			if ((kernel ? read(fd, buf, 4) : pp_read(e, buf, 4)) != 4 ||
			    memcmp(buf, "exec", 4) != 0)
				return 12;
		}
	}
	if (write(ack, &c, 1) != 1)
		return 13;
	(void)!read(go, &c, 1);
	_exit(0); /* the imported handle not closed: exit closes it (and no
	           * leak check calls it lost) */
}

/* ---- child processes and handshakes ------------------------------------- */

static int nocloexec(int fd)
{
	return fcntl(fd, F_SETFD, 0);
}

/* Exec the helper (in a forked child); never returns. */
static void exec_helper(int kernel, int side, int fd, int ack, int go)
{
	char a[5][16];
	snprintf(a[0], sizeof a[0], "%d", side);
	snprintf(a[1], sizeof a[1], "%d", fd);
	snprintf(a[2], sizeof a[2], "%d", ack);
	snprintf(a[3], sizeof a[3], "%d", go);
	nocloexec(ack);
	nocloexec(go);
	if (fd >= 0)
		nocloexec(fd);
	char *argv[] = { (char *)"shared_fork_eof", (char *)"--helper",
		             (char *)(kernel ? "k" : "p"), a[0], a[1], a[2], a[3], NULL };
	execv(self_exe, argv);
	_exit(20);
}

static char wait_byte(int fd)
{
	char c = 0;
	ssize_t n;
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return n == 1 ? c : 0;
}

static void say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(21);
}

/* Wait for pid; its exit status, 128+signal, or -1. */
static int reap(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The child lets go of the ends it still holds, `how`, once told to (GO
 * closed or written); for BY_CLOSE it closes before saying 'C'. */
static void child_let_go(struct tp *t, int how, int ack, int go, int side, int xfd)
{
	switch (how) {
	case BY_CLOSE:
		tp_close(t);
		say(ack, 'C');
		wait_byte(go);
		_exit(0);
	case BY_EXIT:
		say(ack, 'C');
		wait_byte(go);
		exit(0);
	case BY_UEXIT:
	case BY_KILL: /* the parent kills it while it waits */
		say(ack, 'C');
		wait_byte(go);
		_exit(0);
	case BY_EXEC:
		exec_helper(t->kernel, side, -1, ack, go);
		break;
	case BY_EXEC_KEEP:
		exec_helper(t->kernel, side, xfd, ack, go);
		break;
	}
	_exit(22);
}

/* The descriptor that keeps end `side` open across exec: the kernel pipe's
 * own, or a pagepipe export. */
static int keep_fd(struct tp *t, int side)
{
	return t->kernel ? t->fd[side] : pp_export(t->e[side]);
}

/* The parent tells the child to let go (or kills it). */
static void parent_release(pid_t pid, int how, int go)
{
	if (how == BY_KILL)
		kill(pid, SIGKILL);
	else
		say(go, 'G');
}

/* ---- end of file: the reader in the parent, the writer in the child ----- */

static struct tp eof_t; /* static: reachable from a child that exit(3)s */

static void sc_eof(struct tp_rec *r, int kernel, int how)
{
	struct tp *t = &eof_t;
	int ack[2], go[2];
	char buf[16];
	CHECK_EQ(tp_open(t, kernel, kernel ? 0 : PP_SHARED), 0);
	CHECK_EQ(pipe2(ack, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(go, O_CLOEXEC), 0);
	int xfd = how == BY_EXEC_KEEP ? keep_fd(t, 1) : -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(ack[0]);
		close(go[1]);
		tp_close_end(t, 0);
		if (tp_write_all(t, "hello", 5))
			_exit(23);
		child_let_go(t, how, ack[1], go[0], 1, xfd);
	}
	close(ack[1]);
	close(go[0]);
	if (xfd >= 0 && !kernel)
		close(xfd); /* the parent's copy of the export */
	tp_close_end(t, 1);
	TP_REC(r, "child ready", wait_byte(ack[0]));
	TP_REC(r, "read hello", tp_res(tp_read(t, buf, 5)));
	if (how == BY_EXEC_KEEP)
		TP_REC(r, "read what the exec'd helper wrote", tp_res(tp_read(t, buf, 4)));
	/* The child still holds its write end (unless it closed it, or
	 * exec'd without an export): no end of file yet. */
	CHECK_EQ(tp_setnonblock(t, 0, 1), 0);
	TP_REC(r, "non-blocking read while the child holds (or not) the write end",
	       tp_res(tp_read(t, buf, sizeof buf)));
	CHECK_EQ(tp_setnonblock(t, 0, 0), 0);
	parent_release(pid, how, go[1]);
	t_progress_at("a blocking read waiting for the end of file");
	TP_REC(r, "blocking read after the child let go", tp_res(tp_read(t, buf, sizeof buf)));
	TP_REC(r, "events", tp_events(t, 0));
	close(go[1]);
	TP_REC(r, "child status", reap(pid));
	close(ack[0]);
	tp_close(t);
}

#define EOF_CASE(name, how)                                                  \
	static void sc_##name(struct tp_rec *r, int kernel)                      \
	{                                                                        \
		sc_eof(r, kernel, how);                                              \
	}                                                                        \
	static void name(void)                                                   \
	{                                                                        \
		TP_BOTH_ALL(sc_##name);                                              \
	}
EOF_CASE(eof_after_child_closes, BY_CLOSE)
EOF_CASE(eof_after_child_exits, BY_EXIT)
EOF_CASE(eof_after_child_uexits, BY_UEXIT)
EOF_CASE(eof_after_child_killed, BY_KILL)
EOF_CASE(eof_after_child_execs, BY_EXEC)
EOF_CASE(eof_after_exec_keeping_export_exits, BY_EXEC_KEEP)

/* ---- EPIPE: the writer in the parent, the reader in the child ----------- */

/* Write one byte until it fails; a pagepipe whose reader died without
 * closing may take until its next look at the token (bounded here by 2 s). */
static long write_until_epipe(struct tp *t, int *sigpipe)
{
	sigset_t old;
	long res = 0;
	double end = t_now() + 2.0;
	tp_sigpipe_block(&old);
	*sigpipe = 0;
	do {
		res = tp_res(tp_write(t, "x", 1));
		*sigpipe |= tp_sigpipe_taken();
		if (t->kernel)
			break; /* the kernel's first write tells */
		if (res == -EAGAIN)
			t_sleep_ms(1); /* full: the next look at the token is soon */
	} while ((res == 1 || res == -EAGAIN) && t_now() < end);
	tp_sigpipe_restore(&old);
	return res;
}

static struct tp pipe_t;

static void sc_epipe(struct tp_rec *r, int kernel, int how)
{
	struct tp *t = &pipe_t;
	int ack[2], go[2], sigpipe;
	sigset_t old;
	CHECK_EQ(tp_open(t, kernel, kernel ? PP_NONBLOCK : PP_SHARED | PP_NONBLOCK), 0);
	CHECK_EQ(pipe2(ack, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(go, O_CLOEXEC), 0);
	int xfd = how == BY_EXEC_KEEP ? keep_fd(t, 0) : -1;
	TP_REC(r, "write before fork", tp_res(tp_write(t, "exec", 4)));
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(ack[0]);
		close(go[1]);
		tp_close_end(t, 1);
		child_let_go(t, how, ack[1], go[0], 0, xfd);
	}
	close(ack[1]);
	close(go[0]);
	if (xfd >= 0 && !kernel)
		close(xfd);
	tp_close_end(t, 0);
	TP_REC(r, "child ready", wait_byte(ack[0]));
	if (how != BY_CLOSE && how != BY_EXEC) {
		/* The child (or the exec'd helper's export) still reads. */
		tp_sigpipe_block(&old);
		TP_REC(r, "write while the child holds the read end", tp_res(tp_write(t, "y", 1)));
		TP_REC(r, "no SIGPIPE", tp_sigpipe_taken());
		tp_sigpipe_restore(&old);
	}
	if (how == BY_CLOSE) {
		/* A pp_close is seen at once, as a close(2). */
		tp_sigpipe_block(&old);
		TP_REC(r, "first write after the child closed", tp_res(tp_write(t, "y", 1)));
		TP_REC(r, "SIGPIPE", tp_sigpipe_taken());
		tp_sigpipe_restore(&old);
	}
	parent_release(pid, how, go[1]);
	if (how != BY_CLOSE)
		TP_REC(r, "child status", reap(pid));
	t_progress_at("writing until EPIPE");
	TP_REC(r, "write after the child let go", write_until_epipe(t, &sigpipe));
	TP_REC(r, "SIGPIPE", sigpipe);
	TP_REC(r, "events", tp_events(t, 1));
	close(go[1]);
	if (how == BY_CLOSE)
		TP_REC(r, "child status", reap(pid));
	close(ack[0]);
	tp_close(t);
}

#define EPIPE_CASE(name, how)                                                \
	static void sc_##name(struct tp_rec *r, int kernel)                      \
	{                                                                        \
		sc_epipe(r, kernel, how);                                            \
	}                                                                        \
	static void name(void)                                                   \
	{                                                                        \
		TP_BOTH_ALL(sc_##name);                                              \
	}
EPIPE_CASE(epipe_after_child_closes, BY_CLOSE)
EPIPE_CASE(epipe_after_child_exits, BY_EXIT)
EPIPE_CASE(epipe_after_child_uexits, BY_UEXIT)
EPIPE_CASE(epipe_after_child_killed, BY_KILL)
EPIPE_CASE(epipe_after_child_execs, BY_EXEC)
EPIPE_CASE(epipe_after_exec_keeping_export_exits, BY_EXEC_KEEP)

/* ---- every process's ends count ----------------------------------------- */

/* Parent and two generations of children each hold the write end; end of
 * file comes only after the last of them closes, in any order, and a
 * reader in the grandchild sees it too. */
static void sc_last_writer(struct tp_rec *r, int kernel)
{
	struct tp t;
	int ack[2], go1[2], go2[2];
	char buf[8];
	CHECK_EQ(tp_open(&t, kernel, kernel ? 0 : PP_SHARED), 0);
	CHECK_EQ(pipe2(ack, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(go1, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(go2, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t c1 = fork();
	if (c1 == 0) {
		pid_t c2 = fork();
		if (c2 == 0) { /* grandchild: writes, then closes last */
			if (tp_write_all(&t, "g", 1))
				_exit(30);
			say(ack[1], 'g');
			wait_byte(go2[0]);
			tp_close_end(&t, 1);
			/* its read end sees EOF once the parent and child closed theirs */
			ssize_t n = tp_read(&t, buf, sizeof buf);
			_exit(n == 0 ? 0 : 31);
		}
		if (tp_write_all(&t, "c", 1))
			_exit(32);
		say(ack[1], 'c');
		wait_byte(go1[0]);
		tp_close(&t);
		say(ack[1], 'C');
		_exit(reap(c2));
	}
	char a1 = wait_byte(ack[0]), a2 = wait_byte(ack[0]); /* in either order */
	TP_REC(r, "child and grandchild ready", a1 < a2 ? a1 * 256 + a2 : a2 * 256 + a1);
	tp_close_end(&t, 1);
	TP_REC(r, "read", tp_res(tp_read(&t, buf, sizeof buf)));
	CHECK_EQ(tp_setnonblock(&t, 0, 1), 0);
	TP_REC(r, "parent closed: no EOF", tp_res(tp_read(&t, buf, sizeof buf)));
	say(go1[1], 'G');
	TP_REC(r, "child closed", wait_byte(ack[0]));
	TP_REC(r, "child closed: no EOF", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "events", tp_events(&t, 0));
	CHECK_EQ(tp_setnonblock(&t, 0, 0), 0);
	say(go2[1], 'G');
	t_progress_at("the end of file after the grandchild closed");
	TP_REC(r, "grandchild closed: EOF", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "children", reap(c1));
	close(ack[0]);
	close(ack[1]);
	close(go1[0]);
	close(go1[1]);
	close(go2[0]);
	close(go2[1]);
	tp_close(&t);
}

static void eof_waits_for_every_process(void)
{
	TP_BOTH_ALL(sc_last_writer);
}

/* After exec, the handles are gone: the exec'd process cannot use the
 * ends its parent held (the helper was given no descriptor), while an
 * export whose FD_CLOEXEC was left set is closed by the exec. */
static void exec_drops_cloexec_export(void)
{
	struct pp_end *e[2];
	int ack[2], go[2];
	char buf[8];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	int x = pp_export(e[1]);
	CHECK(x >= 0);
	CHECK_EQ(fcntl(x, F_GETFD), FD_CLOEXEC);
	CHECK_EQ(pipe2(ack, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(go, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(ack[0]);
		close(go[1]);
		char a[4][16];
		snprintf(a[0], 16, "%d", x); /* a number the exec closed */
		snprintf(a[1], 16, "%d", ack[1]);
		snprintf(a[2], 16, "%d", go[0]);
		nocloexec(ack[1]);
		nocloexec(go[0]);
		char *argv[] = { (char *)"shared_fork_eof", (char *)"--helper", (char *)"p",
			             (char *)"1", a[0], a[1], a[2], NULL };
		execv(self_exe, argv);
		_exit(20);
	}
	close(ack[1]);
	close(go[0]);
	close(x);
	CHECK_EQ(pp_close(e[1]), 0);
	/* The helper's pp_import of a descriptor that is not open fails with
	 * EBADF: it exits 10 without saying 'E'. */
	CHECK_EQ(wait_byte(ack[0]), 0);
	CHECK_EQ(reap(pid), 10);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 0);
	close(ack[0]);
	close(go[1]);
	pp_close(e[0]);
}

int main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "--helper") == 0)
		return helper(argv);
	tp_self_exe(self_exe, sizeof self_exe);
	t_around_cases(tp_fds_note, tp_fds_same);
	RUN(eof_after_child_closes);
	RUN(eof_after_child_exits);
	RUN(eof_after_child_uexits);
	RUN(eof_after_child_killed);
	RUN(eof_after_child_execs);
	RUN(eof_after_exec_keeping_export_exits);
	RUN(epipe_after_child_closes);
	RUN(epipe_after_child_exits);
	RUN(epipe_after_child_uexits);
	RUN(epipe_after_child_killed);
	RUN(epipe_after_child_execs);
	RUN(epipe_after_exec_keeping_export_exits);
	RUN(eof_waits_for_every_process);
	RUN(exec_drops_cloexec_export);
	return T_DONE();
}
