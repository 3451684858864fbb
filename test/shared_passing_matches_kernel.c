/*
 * shared_passing_matches_kernel.c - ends passed between processes by
 * SCM_RIGHTS and across execve, on a kernel pipe and on a PP_SHARED
 * pagepipe, give the same results step by step (issue 13: "a differential
 * test against a kernel pipe where the operations run in two or more
 * processes", for ends that travel as descriptors).
 *
 * Each scenario runs twice, once on a kernel pipe and once on a shared
 * pagepipe, and records every result (TP_BOTH_ALL compares the records).
 * The operations run in agents: processes that hold no end of the pipe
 * until one reaches them, and take operations from the driver (the test
 * process) over a SOCK_SEQPACKET socket:
 *   - a forked agent is forked before the pipe exists; it gets ends only by
 *     SCM_RIGHTS (the kernel pipe's descriptor itself; for the pagepipe a
 *     descriptor from pp_export, which the agent pp_imports and closes);
 *   - an exec'd agent is this program again ("--agent"), forked after the
 *     pipe exists and exec'd with the ends it should hold inherited across
 *     execve (FD_CLOEXEC cleared: the kernel pipe's descriptors, or
 *     pp_export descriptors made in the child), which it pp_imports; the
 *     handles the child inherited by fork are gone with the exec.  It may
 *     get more ends by SCM_RIGHTS.
 * An agent replies with the call's result, errno, whether SIGPIPE was
 * raised (blocked in agents, taken with sigtimedwait) and a hash of the
 * bytes read, so bytes and order are compared as well.
 *
 * What the scenarios cover:
 *   - a stream through ends passed by SCM_RIGHTS: bytes and order,
 *     pp_nread on both ends in both processes, the wrong end (EBADF), end
 *     of file when the writer closes;
 *   - end of file only when the last writer in every process is gone (a
 *     writer that closes, one that exits without closing, the driver's own):
 *     a reader blocked in read stays blocked until then, and wakes within
 *     1 s of the last;
 *   - a write end in flight (in a socket's queue, received by nobody) keeps
 *     the end open; received, used and closed, the reader gets its bytes;
 *     the socket closed with the descriptor still queued closes the end:
 *     end of file within 1 s;
 *   - EPIPE and SIGPIPE when the last reader goes: a reader closing its
 *     end, then an exec'd reader exiting while the writer is blocked in a
 *     write that does not fit (its partial count, and SIGPIPE), then EPIPE
 *     and SIGPIPE for the next write;
 *   - O_NONBLOCK shared by the holders of one exported end (one open file
 *     description: the driver, a forked agent that got it by SCM_RIGHTS
 *     and an exec'd agent that inherited it): F_SETFL / pp_setfl in one
 *     process is seen by F_GETFL / pp_getfl and by the blocking behaviour
 *     in the others; the read end's flags are its own.
 * PP_PASS_VERBOSE=1 prints every recorded step of both runs.
 * Timing is only an upper bound: "blocked" is "no reply within 150 ms"
 * (a false pass is possible on a very slow machine, never a false fail
 * except by a 1 s stall), and every wake-up must come within 1 s.
 */
#include <fcntl.h>
#include <sys/socket.h>

#include "harness/harness.h"
#include "harness/helpers.h"

#define MAXA 4
#define BUFMAX (128 * 1024)
#define BLOCKED_MS 150
#define WAKE_MS 1000

static char self_exe[4096];
static unsigned char *buf;

enum { A_RECV, A_WRITE, A_READ, A_SETNB, A_GETNB, A_NREAD, A_CLOSE, A_EXIT };

struct aop {
	int code;
	int end;
	long n;
	long off;
	unsigned seed;
};

struct arep {
	long ret; /* the count, or -errno */
	int sigpipe;
	int pad;
	unsigned long hash;
};

static unsigned long hash_of(const unsigned char *p, long n)
{
	unsigned long h = 1469598103934665603ul;
	for (long i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ul;
	return h;
}

/* ---- the agents ------------------------------------------------------------ */

/* The end an imported or received descriptor gives: 0, or -errno. */
static long take_end(struct tp *t, int end, int fd)
{
	if (fd < 0)
		return -EBADF;
	if (t->kernel) {
		t->fd[end] = fd;
		return 0;
	}
	t->e[end] = pp_import(fd);
	long r = t->e[end] ? 0 : -errno;
	close(fd); /* the caller of pp_import keeps and closes the descriptor */
	return r;
}

static void run(struct tp *t, const struct aop *o, int fd, struct arep *r)
{
	errno = 0;
	r->hash = 0;
	switch (o->code) {
	case A_RECV:
		r->ret = take_end(t, o->end, fd);
		return;
	case A_WRITE:
		tp_fill(buf, (size_t)o->n, o->seed, (size_t)o->off);
		r->ret = tp_res(t->kernel ? write(t->fd[o->end], buf, (size_t)o->n)
		                          : pp_write(t->e[o->end], buf, (size_t)o->n));
		break;
	case A_READ:
		r->ret = tp_res(t->kernel ? read(t->fd[o->end], buf, (size_t)o->n)
		                          : pp_read(t->e[o->end], buf, (size_t)o->n));
		r->hash = r->ret > 0 ? hash_of(buf, r->ret) : 0;
		break;
	case A_SETNB:
		r->ret = tp_setnonblock(t, o->end, (int)o->n) < 0 ? -errno : 0;
		break;
	case A_GETNB:
		if (t->kernel) {
			int fl = fcntl(t->fd[o->end], F_GETFL);
			r->ret = fl < 0 ? -errno : (fl & O_NONBLOCK) != 0;
		} else {
			int fl = pp_getfl(t->e[o->end]);
			r->ret = fl < 0 ? -errno : (fl & PP_NONBLOCK) != 0;
		}
		break;
	case A_NREAD:
		r->ret = tp_nread(t, o->end);
		if (r->ret < 0)
			r->ret = -errno;
		break;
	case A_CLOSE:
		r->ret = tp_close_end(t, o->end) < 0 ? -errno : 0;
		break;
	}
	r->sigpipe = tp_sigpipe_taken();
}

/* An agent's loop: one operation per message (with a descriptor for
 * A_RECV), one reply each, until A_EXIT (exit without closing anything:
 * the exit closes the ends) or the driver's side closes. */
__attribute__((noreturn)) static void agent(int ctl, struct tp *t)
{
	sigset_t old;
	signal(SIGPIPE, SIG_DFL);
	tp_sigpipe_block(&old);
	for (;;) {
		struct aop o;
		struct iovec iov = { &o, sizeof o };
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			                .msg_controllen = sizeof u.b };
		ssize_t n = recvmsg(ctl, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof o || o.code == A_EXIT)
			_exit(0);
		int fd = -1;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof fd);
		struct arep r = { 0, 0, 0, 0 };
		run(t, &o, fd, &r);
		if (send(ctl, &r, sizeof r, MSG_NOSIGNAL) != (ssize_t)sizeof r)
			_exit(3);
	}
}

/* The exec'd agent: --agent CTL k|p RFD WFD (-1: no such end). */
static int exec_agent_main(char **argv)
{
	struct tp t;
	memset(&t, 0, sizeof t);
	t.kernel = argv[3][0] == 'k';
	t.fd[0] = t.fd[1] = -1;
	for (int end = 0; end < 2; end++) {
		int fd = atoi(argv[4 + end]);
		if (fd >= 0 && take_end(&t, end, fd) != 0)
			return 10 + end;
	}
	agent(atoi(argv[2]), &t);
}

/* ---- the driver -------------------------------------------------------------- */

struct world {
	int kernel;
	struct tp t; /* the driver's own ends */
	int n;
	int ctl[MAXA];
	pid_t pid[MAXA];
	long woff; /* stream position of the next write */
	int broken; /* an agent did not answer: ask nothing more (replies
	             * would come out of step), record -9999 for the rest */
	struct tp_rec *r;
};

static void w_init(struct world *w, int kernel, struct tp_rec *r)
{
	memset(w, 0, sizeof *w);
	w->kernel = kernel;
	w->r = r;
	w->t.kernel = kernel;
	w->t.fd[0] = w->t.fd[1] = -1;
}

static int w_ctl(struct world *w, int sv[2])
{
	if (w->n >= MAXA || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		CHECK(!"agent socket");
		return -1;
	}
	fflush(NULL);
	return 0;
}

/* An agent forked before the pipe exists: it holds no end. */
static int w_fork_agent(struct world *w)
{
	int sv[2];
	if (w_ctl(w, sv) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < w->n; i++)
			close(w->ctl[i]);
		close(sv[0]);
		struct tp none;
		memset(&none, 0, sizeof none);
		none.kernel = w->kernel;
		none.fd[0] = none.fd[1] = -1;
		agent(sv[1], &none);
	}
	close(sv[1]);
	w->ctl[w->n] = sv[0];
	w->pid[w->n] = pid;
	return w->n++;
}

static void w_pipe(struct world *w)
{
	CHECK_EQ(tp_open_kind(&w->t, w->kernel ? TP_KERNEL : TP_SHARED, 0), 0);
}

/* An exec'd agent inheriting the driver's read end (rd) and/or write end
 * (wr) across execve. */
static int w_exec_agent(struct world *w, int rd, int wr)
{
	int sv[2];
	if (w_ctl(w, sv) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		char a[4][16];
		int want[2] = { rd, wr };
		close(sv[0]);
		for (int end = 0; end < 2; end++) {
			int fd = -1;
			if (want[end])
				fd = w->kernel ? w->t.fd[end] : pp_export(w->t.e[end]);
			if (want[end] && (fd < 0 || fcntl(fd, F_SETFD, 0) != 0))
				_exit(20);
			snprintf(a[2 + end], sizeof a[2 + end], "%d", fd);
		}
		fcntl(sv[1], F_SETFD, 0);
		snprintf(a[0], sizeof a[0], "%d", sv[1]);
		snprintf(a[1], sizeof a[1], "%s", w->kernel ? "k" : "p");
		char *argv[] = { (char *)"shared_passing_matches_kernel", (char *)"--agent", a[0],
			             a[1], a[2], a[3], NULL };
		execv(self_exe, argv);
		_exit(21);
	}
	close(sv[1]);
	w->ctl[w->n] = sv[0];
	w->pid[w->n] = pid;
	return w->n++;
}

/* Send operation o to agent i, with descriptor fd (-1: none). */
static int w_send(struct world *w, int i, const struct aop *o, int fd)
{
	struct iovec iov = { (void *)o, sizeof *o };
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		m.msg_control = u.b;
		m.msg_controllen = sizeof u.b;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	}
	if (sendmsg(w->ctl[i], &m, MSG_NOSIGNAL) != (ssize_t)sizeof *o) {
		CHECK(!"sendmsg to agent");
		return -1;
	}
	return 0;
}

/* Agent i's reply within ms: 1 (in *r), 0 (none yet), -1 (agent gone). */
static int w_reply(struct world *w, int i, int ms, struct arep *r)
{
	struct pollfd p = { w->ctl[i], POLLIN, 0 };
	int k = poll(&p, 1, ms);
	if (k == 0)
		return 0;
	if (k < 0 || recv(w->ctl[i], r, sizeof *r, 0) != (ssize_t)sizeof *r)
		return -1;
	return 1;
}

static void w_rec_reply(struct world *w, const char *label, const struct aop *o,
                        const struct arep *a)
{
	TP_REC(w->r, label, a->ret);
	TP_REC(w->r, "  SIGPIPE raised", a->sigpipe);
	if (o->code == A_READ)
		TP_REC(w->r, "  hash of the bytes read", (long)a->hash);
	if (o->code == A_WRITE && a->ret > 0)
		w->woff += a->ret;
}

static struct aop op(struct world *w, int code, int end, long n)
{
	struct aop o;
	memset(&o, 0, sizeof o); /* padding too: it goes over a socket */
	o.code = code;
	o.end = end;
	o.n = n;
	o.off = w->woff;
	o.seed = 13;
	return o;
}

/* Run an operation in agent i and record its result (it must answer
 * within T_CHILD_WAIT-ish bounds: WAKE_MS for a call that cannot block). */
static void w_do(struct world *w, int i, const char *label, int code, int end, long n)
{
	struct aop o = op(w, code, end, n);
	struct arep a = { -9999, 0, 0, 0 };
	if (!w->broken && w_send(w, i, &o, -1) == 0 && w_reply(w, i, 10 * WAKE_MS, &a) != 1) {
		fprintf(stderr, "%s: agent %d did not answer (%s)\n", tp_name(&w->t), i, label);
		w->broken = 1;
	}
	w_rec_reply(w, label, &o, &a);
	t_progress();
}

/* Pass the driver's end to agent i by SCM_RIGHTS (for the pagepipe a
 * pp_export descriptor, closed here once sent), and record its import. */
static void w_pass(struct world *w, int i, int end)
{
	int fd = w->kernel ? w->t.fd[end] : pp_export(w->t.e[end]);
	struct aop o = op(w, A_RECV, end, 0);
	struct arep a = { -9999, 0, 0, 0 };
	if (w_send(w, i, &o, fd) == 0)
		w_reply(w, i, 10 * WAKE_MS, &a);
	if (!w->kernel && fd >= 0)
		close(fd);
	TP_REC(w->r, end ? "agent takes the write end" : "agent takes the read end", a.ret);
}

/* Start a call that should block in agent i: recorded is whether it has
 * not answered within BLOCKED_MS. */
static struct aop w_begin(struct world *w, int i, const char *label, int code, int end, long n)
{
	struct aop o = op(w, code, end, n);
	struct arep a;
	if (w->broken || w_send(w, i, &o, -1) != 0)
		return o;
	int k = w_reply(w, i, BLOCKED_MS, &a);
	TP_REC(w->r, label, k == 0);
	if (k == 1)
		w_rec_reply(w, "  (the call that should block returned)", &o, &a);
	return o;
}

/* The blocked call of agent i must return within WAKE_MS: record that and
 * its result. */
static void w_end(struct world *w, int i, const char *label, const struct aop *o)
{
	struct arep a = { -9999, 0, 0, 0 };
	double t0 = t_now();
	int k = w->broken ? -1 : w_reply(w, i, WAKE_MS, &a);
	TP_REC(w->r, label, k == 1);
	if (k != 1)
		fprintf(stderr, "%s: %s: no answer within %d ms\n", tp_name(&w->t), label, WAKE_MS);
	else if (!w->kernel)
		fprintf(stderr, "  pagepipe: %s after %.0f ms\n", label, (t_now() - t0) * 1e3);
	if (k == 0 && w_reply(w, i, 2 * WAKE_MS, &a) != 1)
		w->broken = 1;
	w_rec_reply(w, "  its result", o, &a);
}

/* Agent i exits without closing anything; its exit status is recorded. */
static void w_exit(struct world *w, int i, const char *label)
{
	struct aop o = op(w, A_EXIT, 0, 0);
	int st = -1;
	if (w->broken)
		kill(w->pid[i], SIGKILL);
	else
		w_send(w, i, &o, -1);
	close(w->ctl[i]);
	w->ctl[i] = -1;
	/* bounded: one still blocked in a call is killed (and it shows) */
	double end = t_now() + 3 * WAKE_MS / 1000.0;
	while (waitpid(w->pid[i], &st, WNOHANG) == 0) {
		if (t_now() > end) {
			kill(w->pid[i], SIGKILL);
			waitpid(w->pid[i], &st, 0);
			break;
		}
		t_sleep_ms(1);
	}
	w->pid[i] = -1;
	TP_REC(w->r, label, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* The end: every agent left exits (status recorded), the driver's ends
 * close. */
static void w_finish(struct world *w)
{
	for (int i = 0; i < w->n; i++)
		if (w->pid[i] > 0)
			w_exit(w, i, "agent exits");
	tp_close(&w->t);
	if (t_env_long("PP_PASS_VERBOSE", 0))
		for (int i = 0; i < w->r->n; i++)
			fprintf(stderr, "  %s step %d: %s = %ld\n", tp_name(&w->t), i, w->r->what[i],
			        w->r->v[i]);
}

/* ---- scenarios ------------------------------------------------------------------ */

/* A stream between two forked agents that got their ends by SCM_RIGHTS. */
static void sc_stream(struct tp_rec *r, int kernel)
{
	struct world w;
	w_init(&w, kernel, r);
	int rd = w_fork_agent(&w), wr = w_fork_agent(&w);
	w_pipe(&w);
	w_pass(&w, rd, 0);
	w_pass(&w, wr, 1);
	tp_close(&w.t);
	w_do(&w, rd, "nread, nothing written", A_NREAD, 0, 0);
	w_do(&w, rd, "write on the read end", A_WRITE, 0, 10);
	w_do(&w, wr, "read on the write end", A_READ, 1, 10);
	static const long sizes[] = { 1, 4095, 4097, 100, 20000 };
	for (int k = 0; k < 5; k++)
		w_do(&w, wr, "write", A_WRITE, 1, sizes[k]);
	w_do(&w, rd, "nread on the read end", A_NREAD, 0, 0);
	w_do(&w, wr, "nread on the write end", A_NREAD, 1, 0);
	w_do(&w, rd, "read 3000", A_READ, 0, 3000);
	w_do(&w, rd, "read 5000", A_READ, 0, 5000);
	w_do(&w, wr, "write 30000", A_WRITE, 1, 30000);
	w_do(&w, rd, "nread", A_NREAD, 0, 0);
	w_do(&w, rd, "read the rest", A_READ, 0, BUFMAX);
	struct aop o = w_begin(&w, rd, "read blocks on an empty pipe", A_READ, 0, 100);
	w_do(&w, wr, "write 7", A_WRITE, 1, 7);
	w_end(&w, rd, "the blocked read returns", &o);
	w_do(&w, wr, "write 50", A_WRITE, 1, 50);
	w_do(&w, wr, "the writer closes", A_CLOSE, 1, 0);
	w_do(&w, rd, "read after the close", A_READ, 0, 1000);
	w_do(&w, rd, "then end of file", A_READ, 0, 1000);
	w_do(&w, rd, "nread at end of file", A_NREAD, 0, 0);
	w_finish(&w);
}

static void stream_by_scm_rights(void)
{
	TP_BOTH_ALL(sc_stream);
}

/* End of file only when the last writer of every process is gone: a
 * forked agent with the write end by SCM_RIGHTS closes it, an exec'd agent
 * that inherited it exits without closing, the driver closes its own. */
static void sc_eof_last_writer(struct tp_rec *r, int kernel)
{
	struct world w;
	w_init(&w, kernel, r);
	int rd = w_fork_agent(&w), wa = w_fork_agent(&w);
	w_pipe(&w);
	int wx = w_exec_agent(&w, 0, 1);
	w_pass(&w, rd, 0);
	w_pass(&w, wa, 1);
	tp_close_end(&w.t, 0);
	w_do(&w, wa, "write by SCM_RIGHTS", A_WRITE, 1, 300);
	w_do(&w, wx, "write across exec", A_WRITE, 1, 5000);
	w_do(&w, rd, "read", A_READ, 0, BUFMAX);
	struct aop o = w_begin(&w, rd, "read blocks (three writers)", A_READ, 0, 64);
	w_do(&w, wa, "the SCM_RIGHTS writer closes", A_CLOSE, 1, 0);
	TP_REC(r, "read still blocked (two writers)", w_reply(&w, rd, BLOCKED_MS, &(struct arep){ 0, 0, 0, 0 }) == 0);
	tp_close_end(&w.t, 1);
	TP_REC(r, "read still blocked (the exec'd writer)", w_reply(&w, rd, BLOCKED_MS, &(struct arep){ 0, 0, 0, 0 }) == 0);
	w_exit(&w, wx, "the exec'd writer exits without closing");
	w_end(&w, rd, "the reader sees end of file", &o);
	w_do(&w, rd, "end of file again", A_READ, 0, 64);
	w_finish(&w);
}

static void eof_when_last_writer_everywhere_goes(void)
{
	TP_BOTH_ALL(sc_eof_last_writer);
}

static void sc_in_flight(struct tp_rec *r, int kernel)
{
	struct world w;
	int sv[2];
	w_init(&w, kernel, r);
	int rd = w_fork_agent(&w);
	w_pipe(&w);
	w_pass(&w, rd, 0);
	tp_close_end(&w.t, 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	for (int k = 0; k < 2; k++) {
		int fd = kernel ? w.t.fd[1] : pp_export(w.t.e[1]);
		TP_REC(r, "write end sent into the queue", tp_send_fd(sv[0], fd));
		if (!kernel)
			close(fd);
	}
	tp_close_end(&w.t, 1);
	struct aop o = w_begin(&w, rd, "read blocks: two write ends in flight", A_READ, 0, 100);
	/* The driver takes one, writes through it and closes it. */
	struct tp x = tp_of(NULL, NULL);
	x.kernel = kernel;
	x.fd[0] = x.fd[1] = -1;
	CHECK_EQ(take_end(&x, 1, tp_recv_fd(sv[1])), 0);
	tp_fill(buf, 11, 13, (size_t)w.woff);
	long n = tp_res(tp_write(&x, buf, 11));
	TP_REC(r, "write through the received end", n);
	w.woff += n > 0 ? n : 0;
	tp_close(&x);
	w_end(&w, rd, "the blocked read returns the bytes", &o);
	o = w_begin(&w, rd, "read blocks: one write end still in flight", A_READ, 0, 100);
	close(sv[1]); /* the queue goes, and the descriptor in it */
	close(sv[0]);
	w_end(&w, rd, "end of file once the queued descriptor is gone", &o);
	w_finish(&w);
}

static void end_in_flight_stays_open_until_dropped(void)
{
	TP_BOTH_ALL(sc_in_flight);
}

/* EPIPE and SIGPIPE when the last reader goes: one reader (SCM_RIGHTS)
 * closes, the other (exec'd) exits while the writer is blocked. */
static void sc_epipe(struct tp_rec *r, int kernel)
{
	struct world w;
	w_init(&w, kernel, r);
	int wr = w_fork_agent(&w), ra = w_fork_agent(&w);
	w_pipe(&w);
	int rx = w_exec_agent(&w, 1, 0);
	w_pass(&w, wr, 1);
	w_pass(&w, ra, 0);
	tp_close(&w.t);
	w_do(&w, wr, "write", A_WRITE, 1, 20);
	w_do(&w, ra, "the SCM_RIGHTS reader reads", A_READ, 0, 5);
	w_do(&w, ra, "and closes", A_CLOSE, 0, 0);
	w_do(&w, wr, "write (the exec'd reader is left)", A_WRITE, 1, 4000);
	w_do(&w, rx, "the exec'd reader reads", A_READ, 0, 4015);
	/* 65536 bytes go in, then the write waits for room */
	struct aop o = w_begin(&w, wr, "a write longer than the pipe blocks", A_WRITE, 1, 70000);
	w_exit(&w, rx, "the exec'd reader exits without closing");
	w_end(&w, wr, "the blocked write returns", &o);
	w_do(&w, wr, "next write: EPIPE", A_WRITE, 1, 1);
	w_do(&w, wr, "nread on the write end", A_NREAD, 1, 0);
	w_finish(&w);
}

static void epipe_sigpipe_when_last_reader_goes(void)
{
	TP_BOTH_ALL(sc_epipe);
}

/* O_NONBLOCK of one exported end: the driver, a forked agent (SCM_RIGHTS)
 * and an exec'd agent hold one description. */
static void sc_nonblock(struct tp_rec *r, int kernel)
{
	struct world w;
	w_init(&w, kernel, r);
	int a = w_fork_agent(&w), rd = w_fork_agent(&w);
	w_pipe(&w);
	int b = w_exec_agent(&w, 0, 1);
	w_pass(&w, a, 1);
	w_pass(&w, rd, 0);
	tp_close_end(&w.t, 0);
	w_do(&w, a, "SCM_RIGHTS holder: O_NONBLOCK?", A_GETNB, 1, 0);
	w_do(&w, b, "exec'd holder sets O_NONBLOCK", A_SETNB, 1, 1);
	w_do(&w, a, "SCM_RIGHTS holder sees it", A_GETNB, 1, 0);
	TP_REC(r, "the driver sees it", kernel ? (fcntl(w.t.fd[1], F_GETFL) & O_NONBLOCK) != 0
	                                       : (pp_getfl(w.t.e[1]) & PP_NONBLOCK) != 0);
	w_do(&w, rd, "the read end is its own: O_NONBLOCK?", A_GETNB, 0, 0);
	w_do(&w, a, "fill", A_WRITE, 1, 65536);
	w_do(&w, a, "one more: EAGAIN", A_WRITE, 1, 1);
	w_do(&w, b, "EAGAIN in the exec'd holder", A_WRITE, 1, 4096);
	w_do(&w, rd, "nread", A_NREAD, 0, 0);
	w_do(&w, b, "nread on the write end", A_NREAD, 1, 0);
	w_do(&w, rd, "read 4096", A_READ, 0, 4096);
	w_do(&w, a, "partial: a long non-blocking write", A_WRITE, 1, 9000);
	w_do(&w, rd, "read 4096: one slot free", A_READ, 0, 4096);
	TP_REC(r, "the driver clears O_NONBLOCK", tp_setnonblock(&w.t, 1, 0));
	w_do(&w, b, "exec'd holder sees it cleared", A_GETNB, 1, 0);
	w_do(&w, b, "a blocking write that fits", A_WRITE, 1, 4096);
	struct aop o = w_begin(&w, a, "one that does not blocks", A_WRITE, 1, 4096);
	w_do(&w, rd, "read 4096 makes room", A_READ, 0, 4096);
	w_end(&w, a, "the blocked write returns", &o);
	w_do(&w, rd, "nread", A_NREAD, 0, 0);
	w_do(&w, rd, "the reader sets its own O_NONBLOCK", A_SETNB, 0, 1);
	w_do(&w, a, "the writers' is unchanged", A_GETNB, 1, 0);
	w_do(&w, rd, "read everything", A_READ, 0, BUFMAX);
	w_do(&w, rd, "EAGAIN on the empty pipe", A_READ, 0, 10);
	w_finish(&w);
}

static void nonblock_shared_by_holders_of_one_export(void)
{
	TP_BOTH_ALL(sc_nonblock);
}

int main(int argc, char **argv)
{
	buf = malloc(BUFMAX);
	if (!buf)
		return 2;
	tp_self_exe(self_exe, sizeof self_exe);
	if (argc == 6 && strcmp(argv[1], "--agent") == 0)
		return exec_agent_main(argv);
	signal(SIGPIPE, SIG_IGN);
	t_around_cases(tp_fds_note, tp_fds_same);
	RUN(stream_by_scm_rights);
	RUN(eof_when_last_writer_everywhere_goes);
	RUN(end_in_flight_stays_open_until_dropped);
	RUN(epipe_sigpipe_when_last_reader_goes);
	RUN(nonblock_shared_by_holders_of_one_export);
	free(buf);
	return T_DONE();
}
