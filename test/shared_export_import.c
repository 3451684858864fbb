/*
 * shared_export_import.c - an end of a shared pipe as a descriptor:
 * pp_export and pp_import (pagepipe.h; design.md section 13).
 *
 * The rules checked:
 *  - pp_export gives a new descriptor with FD_CLOEXEC set; EINVAL for a
 *    private pipe, EBADF for no handle;
 *  - the descriptor travels by SCM_RIGHTS (to a forked child that dropped
 *    its inherited ends, and to an exec'd process) and across exec with
 *    FD_CLOEXEC cleared, and the receiver's pp_import reads or writes the
 *    same pipe;
 *  - an imported read end is a read end only (pp_write: EBADF) and an
 *    imported write end a write end only (pp_read: EBADF), as a kernel
 *    pipe's descriptors are;
 *  - pp_import leaves fd to the caller: still open after it, closed by the
 *    caller, and the handle lives on without it; EINVAL for a descriptor
 *    that is not an export (a file, a socket, a kernel pipe), EBADF for one
 *    that is not open;
 *  - the descriptor is an open end while it exists anywhere, even in a
 *    socket's queue: no end of file while an exported write end is in
 *    flight, as with a kernel pipe's descriptor in flight;
 *  - PP_NONBLOCK set by pp_setfl is shared by every handle imported from
 *    one export and the exported handle itself, across processes, as
 *    O_NONBLOCK is shared by the holders of one open file description.
 * Wherever the kernel has the same situation, the scenario runs on both
 * and the records are compared.  The exec'd helper is this program again,
 * with "--helper".
 */
#include <fcntl.h>
#include <sys/socket.h>

#include "harness/harness.h"
#include "harness/helpers.h"

static char self_exe[4096];

static int reap(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- the exec'd helper -------------------------------------------------- */

/*
 * argv: --helper MODE FD.
 *   recv-write: FD is a unix socket; receive an exported write end on it,
 *     import it, write "scm!" and exit.
 *   read: FD is an exported read end, inherited across exec; import it,
 *     read 4 bytes, check them ("exec"), close FD and the handle, exit.
 * Exit status 0 when all went as expected.
 */
static int helper(const char *mode, int fd)
{
	char buf[4];
	if (strcmp(mode, "recv-write") == 0) {
		int x = tp_recv_fd(fd);
		struct pp_end *w = x >= 0 ? pp_import(x) : NULL;
		if (!w)
			return 10;
		close(x);
		if (pp_write(w, "scm!", 4) != 4)
			return 11;
		if (pp_read(w, buf, 1) != -1 || errno != EBADF)
			return 12;
		_exit(0); /* without closing: exit closes (and no leak check
		           * calls the handle lost) */
	}
	if (strcmp(mode, "read") == 0) {
		struct pp_end *r = pp_import(fd);
		if (!r)
			return 10;
		if (pp_read(r, buf, 4) != 4 || memcmp(buf, "exec", 4) != 0)
			return 11;
		if (pp_write(r, "x", 1) != -1 || errno != EBADF)
			return 12;
		/* The descriptor first: the pp_close that then leaves the side
		 * finds the export dead and closes the end at once. */
		close(fd);
		pp_close(r);
		return 0;
	}
	return 30;
}

static void exec_helper(const char *mode, int fd)
{
	char a[16];
	snprintf(a, sizeof a, "%d", fd);
	fcntl(fd, F_SETFD, 0);
	char *argv[] = { (char *)"shared_export_import", (char *)"--helper", (char *)mode, a, NULL };
	execv(self_exe, argv);
	_exit(20);
}

/* ---- cases -------------------------------------------------------------- */

static void export_is_cloexec_and_shared_only(void)
{
	struct pp_end *e[2], *p[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	for (int side = 0; side < 2; side++) {
		int x = pp_export(e[side]);
		CHECK(x >= 0);
		CHECK_EQ(fcntl(x, F_GETFD), FD_CLOEXEC);
		close(x);
	}
	CHECK_EQ(pp_pipe(p, 0), 0);
	CHECK_ERR(pp_export(p[0]), EINVAL);
	CHECK_ERR(pp_export(p[1]), EINVAL);
	CHECK_ERR(pp_export(NULL), EBADF);
	pp_close(p[0]);
	pp_close(p[1]);
	pp_close(e[0]);
	pp_close(e[1]);
}

/* The wrong side of an imported end, against a kernel pipe's descriptors
 * (F_DUPFD_CLOEXEC standing for export and import). */
static void sc_sides(struct tp_rec *r, int kernel)
{
	struct tp t;
	char buf[8];
	CHECK_EQ(tp_open(&t, kernel, kernel ? PP_NONBLOCK : PP_SHARED | PP_NONBLOCK), 0);
	struct tp im = t;
	int x[2];
	for (int s = 0; s < 2; s++) {
		x[s] = kernel ? fcntl(t.fd[s], F_DUPFD_CLOEXEC, 0) : pp_export(t.e[s]);
		CHECK(x[s] >= 0);
		if (kernel)
			im.fd[s] = x[s];
		else
			CHECK((im.e[s] = pp_import(x[s])) != NULL);
	}
	struct tp wrong = im; /* read through the write end and back */
	wrong.fd[0] = im.fd[1], wrong.fd[1] = im.fd[0];
	wrong.e[0] = im.e[1], wrong.e[1] = im.e[0];
	TP_REC(r, "write on the imported read end", tp_res(tp_write(&wrong, "x", 1)));
	TP_REC(r, "read on the imported write end", tp_res(tp_read(&wrong, buf, 1)));
	TP_REC(r, "write on the imported write end", tp_res(tp_write(&im, "abc", 3)));
	TP_REC(r, "read it from the original read end", tp_res(tp_read(&t, buf, 1)));
	TP_REC(r, "and from the imported one", tp_res(tp_read(&im, buf, sizeof buf)));
	if (!kernel) {
		/* The caller keeps fd: still open after pp_import; the handles
		 * live on after the caller closes it. */
		CHECK_EQ(fcntl(x[0], F_GETFD), FD_CLOEXEC);
		CHECK_EQ(fcntl(x[1], F_GETFD), FD_CLOEXEC);
		close(x[0]);
		close(x[1]);
	}
	TP_REC(r, "write after the descriptors closed", tp_res(tp_write(&im, "de", 2)));
	TP_REC(r, "read it", tp_res(tp_read(&im, buf, sizeof buf)));
	tp_close(&im); /* for the kernel, closes x[] */
	TP_REC(r, "the original ends still work", tp_res(tp_write(&t, "f", 1)));
	TP_REC(r, "read", tp_res(tp_read(&t, buf, sizeof buf)));
	tp_close_end(&t, 1);
	TP_REC(r, "end of file once every write end closed", tp_res(tp_read(&t, buf, 1)));
	tp_close(&t);
}

static void imported_end_is_one_side(void)
{
	TP_BOTH_ALL(sc_sides);
}

static void import_errors(void)
{
	struct pp_end *e[2];
	int kp[2], sv[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	int x = pp_export(e[0]);
	CHECK(x >= 0);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	CHECK(null >= 0);
	CHECK_EQ(pipe2(kp, O_CLOEXEC), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	errno = 0;
	CHECK(pp_import(null) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pp_import(kp[0]) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pp_import(sv[0]) == NULL && errno == EINVAL);
	/* A message on a socket that is not an export's. */
	CHECK_EQ(tp_send_fd(sv[1], null), 0);
	errno = 0;
	CHECK(pp_import(sv[0]) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(pp_import(-1) == NULL && errno == EBADF);
	int closed = dup(x);
	close(closed);
	errno = 0;
	CHECK(pp_import(closed) == NULL && errno == EBADF);
	/* After all that, the export still imports. */
	struct pp_end *r = pp_import(x);
	CHECK(r != NULL);
	CHECK_EQ(pp_write(e[1], "ok", 2), 2);
	char buf[4];
	CHECK_EQ(pp_read(r, buf, sizeof buf), 2);
	pp_close(r);
	close(x);
	close(null);
	close(kp[0]);
	close(kp[1]);
	/* what recvmsg would have received is closed with the socket */
	close(sv[0]);
	close(sv[1]);
	pp_close(e[0]);
	pp_close(e[1]);
}

/* An exported write end sent by SCM_RIGHTS to a forked child that closed
 * every end it inherited: it imports and writes, and its exit closes it. */
static void scm_rights_to_child(void)
{
	struct pp_end *e[2];
	int sv[2];
	char buf[8];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[1]);
		pp_close(e[0]);
		pp_close(e[1]);
		int x = tp_recv_fd(sv[0]);
		struct pp_end *w = x >= 0 ? pp_import(x) : NULL;
		if (!w)
			_exit(10);
		close(x);
		if (pp_write(w, "scm!", 4) != 4)
			_exit(11);
		_exit(0);
	}
	close(sv[0]);
	int x = pp_export(e[1]);
	CHECK(x >= 0);
	CHECK_EQ(tp_send_fd(sv[1], x), 0);
	close(x);
	close(sv[1]);
	pp_close(e[1]); /* now only the child can write */
	t_progress_at("reading what the child writes");
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 4);
	CHECK(memcmp(buf, "scm!", 4) == 0);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 0);
	CHECK_EQ(reap(pid), 0);
	pp_close(e[0]);
}

/* The same to an exec'd process (which holds no handle of its own). */
static void scm_rights_across_exec(void)
{
	struct pp_end *e[2];
	int sv[2];
	char buf[8];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[1]);
		exec_helper("recv-write", sv[0]);
	}
	close(sv[0]);
	int x = pp_export(e[1]);
	CHECK(x >= 0);
	CHECK_EQ(tp_send_fd(sv[1], x), 0);
	close(x);
	close(sv[1]);
	pp_close(e[1]);
	t_progress_at("reading what the exec'd helper writes");
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 4);
	CHECK(memcmp(buf, "scm!", 4) == 0);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 0);
	CHECK_EQ(reap(pid), 0);
	pp_close(e[0]);
}

/* An exported read end inherited across exec with FD_CLOEXEC cleared. */
static void export_inherited_across_exec(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	int x = pp_export(e[0]);
	CHECK(x >= 0);
	CHECK_EQ(pp_write(e[1], "exec", 4), 4);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		exec_helper("read", x);
	close(x);
	pp_close(e[0]); /* the helper holds the only read end */
	CHECK_EQ(reap(pid), 0);
	/* The helper read the data and closed: no reader is left. */
	sigset_t old;
	tp_sigpipe_block(&old);
	CHECK_ERR(pp_write(e[1], "x", 1), EPIPE);
	CHECK_EQ(tp_sigpipe_taken(), 1);
	tp_sigpipe_restore(&old);
	pp_close(e[1]);
}

/* The other order: the handles closed first, the exported descriptor last.
 * close(2) of the descriptor runs no pagepipe code, so the writer learns
 * that the last reader is gone at its next look at the token (about every
 * 50 ms; a kernel pipe: at once).  Bounded here by 2 s. */
static void export_closed_last_epipe_soon(void)
{
	struct pp_end *e[2];
	sigset_t old;
	CHECK_EQ(pp_pipe(e, PP_SHARED | PP_NONBLOCK), 0);
	int x = pp_export(e[0]);
	struct pp_end *r = pp_import(x);
	CHECK(r != NULL);
	pp_close(e[0]);
	pp_close(r);
	CHECK_EQ(pp_write(e[1], "x", 1), 1); /* the export still reads */
	close(x);
	tp_sigpipe_block(&old);
	double end = t_now() + 2.0;
	ssize_t w;
	while ((w = pp_write(e[1], "x", 1)) == 1 && t_now() < end)
		t_sleep_ms(1);
	CHECK_EQ(w, -1);
	CHECK_EQ(errno, EPIPE);
	CHECK_EQ(tp_sigpipe_taken(), 1);
	tp_sigpipe_restore(&old);
	pp_close(e[1]);
}

/* A write end in flight (in a socket's queue) keeps the end open; end of
 * file comes once the descriptor is received and closed. */
static void sc_in_flight(struct tp_rec *r, int kernel)
{
	struct tp t;
	int sv[2];
	char buf[4];
	CHECK_EQ(tp_open(&t, kernel, kernel ? PP_NONBLOCK : PP_SHARED | PP_NONBLOCK), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	int x = kernel ? t.fd[1] : pp_export(t.e[1]);
	TP_REC(r, "send", tp_send_fd(sv[0], x));
	if (!kernel)
		close(x);
	tp_close_end(&t, 1);
	TP_REC(r, "read: the write end is in flight", tp_res(tp_read(&t, buf, 1)));
	int y = tp_recv_fd(sv[1]);
	TP_REC(r, "received", y >= 0);
	TP_REC(r, "read: the write end is received", tp_res(tp_read(&t, buf, 1)));
	close(y);
	TP_REC(r, "read: the received one closed", tp_res(tp_read(&t, buf, 1)));
	TP_REC(r, "events", tp_events(&t, 0));
	close(sv[0]);
	close(sv[1]);
	tp_close(&t);
}

static void end_in_flight_stays_open(void)
{
	TP_BOTH_ALL(sc_in_flight);
}

/* Status flags: one export is one open file description.  The parent sets
 * and clears PP_NONBLOCK; a child that imported the export sees each
 * change, and its change is seen by the parent.  With a kernel pipe the
 * descriptor passed is the same description. */
static void sc_flags(struct tp_rec *r, int kernel)
{
	struct tp t;
	int to[2], from[2];
	CHECK_EQ(tp_open(&t, kernel, kernel ? 0 : PP_SHARED), 0);
	CHECK_EQ(pipe2(to, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(from, O_CLOEXEC), 0);
	int x = kernel ? t.fd[0] : pp_export(t.e[0]);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		/* Only the export: drop every inherited end first. */
		struct tp c = t;
		if (kernel) {
			c.fd[0] = dup(x);
			close(t.fd[1]);
		} else {
			pp_close(t.e[0]);
			pp_close(t.e[1]);
			c.e[0] = pp_import(x);
			c.e[1] = NULL;
		}
		char cmd, res;
		while (read(to[0], &cmd, 1) == 1) {
			if (cmd == 'g') { /* report whether non-blocking */
				int fl = kernel ? fcntl(c.fd[0], F_GETFL) & O_NONBLOCK
				                : pp_getfl(c.e[0]) & PP_NONBLOCK;
				res = fl ? 'N' : 'B';
			} else { /* 'c': clear it */
				res = tp_setnonblock(&c, 0, 0) == 0 ? 'c' : '!';
			}
			if (write(from[1], &res, 1) != 1)
				_exit(2);
		}
		_exit(0);
	}
	char res = 0;
#define ASK(cmd)                                                             \
	(res = 0, (void)!write(to[1], cmd, 1), (void)!read(from[0], &res, 1), res)
	TP_REC(r, "child's view at first", ASK("g"));
	TP_REC(r, "parent sets non-blocking", tp_setnonblock(&t, 0, 1));
	TP_REC(r, "child's view", ASK("g"));
	TP_REC(r, "child clears it", ASK("c"));
	TP_REC(r, "parent's view", t.kernel ? fcntl(t.fd[0], F_GETFL) & O_NONBLOCK ? 1 : 0
	                                    : pp_getfl(t.e[0]) & PP_NONBLOCK ? 1 : 0);
	TP_REC(r, "parent sets it again", tp_setnonblock(&t, 0, 1));
	TP_REC(r, "child's view", ASK("g"));
	TP_REC(r, "and its read", tp_res(tp_read(&t, (char[1]){ 0 }, 1)));
#undef ASK
	close(to[1]);
	TP_REC(r, "child", reap(pid));
	if (!kernel)
		close(x);
	close(to[0]);
	close(from[0]);
	close(from[1]);
	tp_close(&t);
}

static void nonblock_shared_by_export_holders(void)
{
	TP_BOTH_ALL(sc_flags);
}

/* Two imports of one export in one process are one description too, while
 * another export of the same end is... the same end: pp_export's handles
 * share the flags of `end` (pagepipe.h). */
static void imports_share_flags(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	int x = pp_export(e[1]), y = pp_export(e[1]);
	struct pp_end *a = pp_import(x), *b = pp_import(x), *c = pp_import(y);
	CHECK(a && b && c);
	CHECK_EQ(pp_getfl(a) & PP_NONBLOCK, 0);
	CHECK_EQ(pp_setfl(a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_getfl(b) & PP_NONBLOCK, PP_NONBLOCK);
	CHECK_EQ(pp_getfl(c) & PP_NONBLOCK, PP_NONBLOCK);
	CHECK_EQ(pp_getfl(e[1]) & PP_NONBLOCK, PP_NONBLOCK);
	CHECK_EQ(pp_getfl(e[0]) & PP_NONBLOCK, 0); /* the other end is another */
	CHECK_EQ(pp_setfl(e[1], 0), 0);
	CHECK_EQ(pp_getfl(b) & PP_NONBLOCK, 0);
	pp_close(a);
	pp_close(b);
	pp_close(c);
	close(x);
	close(y);
	pp_close(e[0]);
	pp_close(e[1]);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--helper") == 0)
		return helper(argv[2], atoi(argv[3]));
	tp_self_exe(self_exe, sizeof self_exe);
	t_around_cases(tp_fds_note, tp_fds_same);
	RUN(export_is_cloexec_and_shared_only);
	RUN(imported_end_is_one_side);
	RUN(import_errors);
	RUN(scm_rights_to_child);
	RUN(scm_rights_across_exec);
	RUN(export_inherited_across_exec);
	RUN(export_closed_last_epipe_soon);
	RUN(end_in_flight_stays_open);
	RUN(nonblock_shared_by_export_holders);
	RUN(imports_share_flags);
	return T_DONE();
}
