/*
 * shared_events_fd.c - readiness of a shared pipe's ends in two processes:
 * pp_events and the pp_fd descriptor under poll(2) and epoll(7).
 *
 * The rule (pagepipe.h pp_events, pp_fd; design.md section 13 "pp_fd of a
 * shared end"): in every process holding an end, pp_events equals what
 * poll(2) reports on a kernel pipe's end in the same state, and pp_fd
 * polls readable exactly while the end is ready (read end: data or
 * hang-up; write end: room or error), under poll and under epoll, level
 * and edge triggered, and a wait on it wakes when another process changes
 * the pipe: data written, room made, the last writer closed, killed or
 * exited (POLLHUP), the last reader gone (POLLERR).
 *
 * The parent drives a forked child through commands on a kernel pipe;
 * each side records what it sees after each step (the child sends its
 * answers back), and the whole record must equal the one of the same
 * scenario on a kernel pipe, where "ready" is poll(2) or epoll on the pipe
 * descriptor itself.  Waits that must end have a 5 s bound, never a sleep.
 */
#include <fcntl.h>
#include <sys/epoll.h>

#include "harness/harness.h"
#include "harness/helpers.h"

#define BOUND_MS 5000

/* One process's view of one end: the end, and its readiness descriptors. */
struct view {
	struct tp *t;
	int side;
	int ep;  /* level-triggered epoll on the end */
	int epe; /* edge-triggered epoll on the end (read end only) */
};

/* The descriptor that says the end is ready, and the events that mean it. */
static int ready_fd(struct view *v, short *want)
{
	if (v->t->kernel) {
		*want = v->side == 0 ? POLLIN : POLLOUT;
		return v->t->fd[v->side];
	}
	*want = POLLIN;
	return pp_fd(v->t->e[v->side]);
}

static void view_open(struct view *v, struct tp *t, int side)
{
	short want;
	v->t = t;
	v->side = side;
	int fd = ready_fd(v, &want);
	v->ep = epoll_create1(EPOLL_CLOEXEC);
	v->epe = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = (uint32_t)want };
	if (fd < 0 || epoll_ctl(v->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		fprintf(stderr, "view_open: %s\n", strerror(errno));
	ev.events |= EPOLLET;
	if (epoll_ctl(v->epe, EPOLL_CTL_ADD, fd, &ev) != 0)
		fprintf(stderr, "view_open: %s\n", strerror(errno));
}

static void view_close(struct view *v)
{
	close(v->ep);
	close(v->epe);
}

/* poll(2) on the readiness descriptor: 1 ready, 0 not (POLLHUP/POLLERR on a
 * kernel pipe count as ready: poll reports them whatever was asked). */
static long v_poll(struct view *v, int ms)
{
	short want;
	struct pollfd p = { ready_fd(v, &want), want, 0 };
	int n = poll(&p, 1, ms);
	return n < 0 ? -errno : n;
}

static long v_epoll(int ep, int ms)
{
	struct epoll_event ev;
	int n;
	while ((n = epoll_wait(ep, &ev, 1, ms)) < 0 && errno == EINTR)
		;
	return n < 0 ? -errno : n;
}

/* Everything one process records about its end at one step: the events
 * (kernel: poll(2) with every bit asked), poll and epoll readiness. */
static long v_state(struct view *v)
{
	long ev = v->t->kernel ? (v->t->fd[v->side] >= 0 ? tp_events(v->t, v->side) : -2)
	                       : tp_events(v->t, v->side);
	return ev * 100 + v_poll(v, 0) * 10 + v_epoll(v->ep, 0);
}

/* ---- the child: commands in, answers out -------------------------------- */

static char fillbuf[70000];

/* Commands: 'w' write 100 bytes; 'f' fill (non-blocking, until EAGAIN);
 * 'd' drain (non-blocking); 's' state; 'W' wait (bounded) until ready by
 * level-triggered epoll; 'E' edge-triggered epoll, bounded wait; 'e' the
 * same, not waiting; 'c' close the end; 'K' make pp_fd and ready for it
 * a second time (a handle dup'd and closed must not disturb it). */
static long child_do(struct view *v, char cmd)
{
	struct tp *t = v->t;
	switch (cmd) {
	case 'w':
		return tp_res(tp_write(t, fillbuf, 100));
	case 'f': {
		long total = 0, r;
		while ((r = tp_res(tp_write(t, fillbuf, sizeof fillbuf))) > 0)
			total += r;
		return r == -EAGAIN ? total : r;
	}
	case 'd': {
		long total = 0, r;
		while ((r = tp_res(tp_read(t, fillbuf, sizeof fillbuf))) > 0)
			total += r;
		return r == -EAGAIN ? total : r;
	}
	case 's':
		return v_state(v);
	case 'W':
		return v_epoll(v->ep, BOUND_MS);
	case 'E':
		return v_epoll(v->epe, BOUND_MS);
	case 'e':
		return v_epoll(v->epe, 0);
	case 'c':
		return tp_close_end(t, v->side);
	}
	return -1000;
}

struct kid {
	pid_t pid;
	int to, from;
};

/* Fork a child holding end `side` only (the other closed), set
 * non-blocking, with its own readiness descriptors, serving commands. */
static struct kid kid_start(struct tp *t, int side)
{
	int to[2], from[2];
	struct kid k = { -1, -1, -1 };
	if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC))
		return k;
	fflush(NULL);
	k.pid = fork();
	if (k.pid == 0) {
		close(to[1]);
		close(from[0]);
		tp_close_end(t, 1 - side);
		tp_setnonblock(t, side, 1);
		struct view v;
		view_open(&v, t, side);
		char cmd;
		while (read(to[0], &cmd, 1) == 1) {
			if (cmd == 'x')
				break;
			long res = child_do(&v, cmd);
			if (write(from[1], &res, sizeof res) != sizeof res)
				_exit(2);
		}
		_exit(0);
	}
	close(to[0]);
	close(from[1]);
	k.to = to[1];
	k.from = from[0];
	return k;
}

static long ask(struct kid *k, char cmd)
{
	long res = -999;
	if (write(k->to, &cmd, 1) != 1 || read(k->from, &res, sizeof res) != sizeof res)
		return -998;
	return res;
}

static int kid_end(struct kid *k, int kill_it)
{
	int st;
	if (kill_it)
		kill(k->pid, SIGKILL);
	else
		(void)!write(k->to, "x", 1);
	close(k->to);
	close(k->from);
	while (waitpid(k->pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- scenarios ----------------------------------------------------------- */

enum gone { CLOSE, EXIT, KILL };

/* The parent reads, the child writes. */
static void sc_reader(struct tp_rec *r, int kernel, int how)
{
	struct tp t;
	struct view v;
	CHECK_EQ(tp_open(&t, kernel, kernel ? PP_NONBLOCK : PP_SHARED | PP_NONBLOCK), 0);
	struct kid k = kid_start(&t, 1);
	tp_close_end(&t, 1);
	view_open(&v, &t, 0);
	TP_REC(r, "empty: parent", v_state(&v));
	TP_REC(r, "empty: child", ask(&k, 's'));
	TP_REC(r, "child writes", ask(&k, 'w'));
	TP_REC(r, "parent's edge-triggered wait", v_epoll(v.epe, BOUND_MS));
	TP_REC(r, "data: parent", v_state(&v));
	TP_REC(r, "child writes again", ask(&k, 'w'));
	TP_REC(r, "parent's edge-triggered wait: a new edge", v_epoll(v.epe, BOUND_MS));
	TP_REC(r, "no third edge", v_epoll(v.epe, 0));
	TP_REC(r, "child fills", ask(&k, 'f'));
	TP_REC(r, "full: parent", v_state(&v));
	TP_REC(r, "full: child", ask(&k, 's'));
	TP_REC(r, "parent reads 5000",
	       tp_res(tp_read(&t, fillbuf, 5000)) >= 4096 ? 1 : 0); /* a page freed */
	TP_REC(r, "child's wait for room", ask(&k, 'W'));
	TP_REC(r, "room: child", ask(&k, 's'));
	TP_REC(r, "parent drains", tp_res(tp_read(&t, fillbuf, sizeof fillbuf)) > 0);
	TP_REC(r, "drained: parent", v_state(&v));
	TP_REC(r, "child writes", ask(&k, 'w'));
	if (how == CLOSE) {
		TP_REC(r, "child closes", ask(&k, 'c'));
		TP_REC(r, "closed: child alive", 1);
	} else {
		TP_REC(r, "child gone", kid_end(&k, how == KILL));
		k.pid = -1;
	}
	t_progress_at("waiting for the hang-up");
	TP_REC(r, "parent's wait", v_epoll(v.ep, BOUND_MS));
	TP_REC(r, "hang-up with data: parent", v_state(&v));
	TP_REC(r, "parent drains", tp_res(tp_read(&t, fillbuf, sizeof fillbuf)));
	TP_REC(r, "hang-up, empty: parent", v_state(&v));
	TP_REC(r, "poll wakes at once", v_poll(&v, BOUND_MS));
	TP_REC(r, "end of file", tp_res(tp_read(&t, fillbuf, 1)));
	if (k.pid > 0)
		TP_REC(r, "child", kid_end(&k, 0));
	view_close(&v);
	tp_close(&t);
}

/* The parent writes, the child reads. */
static void sc_writer(struct tp_rec *r, int kernel, int how)
{
	struct tp t;
	struct view v;
	CHECK_EQ(tp_open(&t, kernel, kernel ? PP_NONBLOCK : PP_SHARED | PP_NONBLOCK), 0);
	struct kid k = kid_start(&t, 0);
	tp_close_end(&t, 0);
	view_open(&v, &t, 1);
	TP_REC(r, "empty: parent", v_state(&v));
	TP_REC(r, "empty: child", ask(&k, 's'));
	TP_REC(r, "child's edge-triggered look", ask(&k, 'e'));
	TP_REC(r, "parent writes", tp_res(tp_write(&t, fillbuf, 100)));
	TP_REC(r, "child's edge-triggered wait", ask(&k, 'E'));
	TP_REC(r, "data: child", ask(&k, 's'));
	long n = 0, w;
	while ((w = tp_res(tp_write(&t, fillbuf, sizeof fillbuf))) > 0)
		n += w;
	TP_REC(r, "parent fills", w == -EAGAIN ? n : w);
	TP_REC(r, "full: parent", v_state(&v));
	TP_REC(r, "full: child", ask(&k, 's'));
	TP_REC(r, "child drains", ask(&k, 'd'));
	TP_REC(r, "parent's wait for room", v_epoll(v.ep, BOUND_MS));
	TP_REC(r, "room: parent", v_state(&v));
	TP_REC(r, "drained: child", ask(&k, 's'));
	TP_REC(r, "parent writes", tp_res(tp_write(&t, fillbuf, 100)));
	if (how == CLOSE) {
		TP_REC(r, "child closes", ask(&k, 'c'));
	} else {
		TP_REC(r, "child gone", kid_end(&k, how == KILL));
		k.pid = -1;
	}
	t_progress_at("waiting for the error");
	/* The write end was ready all along (room); the error shows in the
	 * events, at once for a close and by the token for the others. */
	double end = t_now() + BOUND_MS / 1000.0;
	long st;
	while (((st = v_state(&v)) / 100 & POLLERR) == 0 && t_now() < end)
		v_epoll(v.ep, 10);
	TP_REC(r, "reader gone: parent", st);
	sigset_t old;
	tp_sigpipe_block(&old);
	TP_REC(r, "write", tp_res(tp_write(&t, fillbuf, 1)));
	TP_REC(r, "SIGPIPE", tp_sigpipe_taken());
	tp_sigpipe_restore(&old);
	if (k.pid > 0)
		TP_REC(r, "child", kid_end(&k, 0));
	view_close(&v);
	tp_close(&t);
}

#define SC(name, fn, how)                                                    \
	static void sc_##name(struct tp_rec *r, int kernel)                      \
	{                                                                        \
		fn(r, kernel, how);                                                  \
	}                                                                        \
	static void name(void)                                                   \
	{                                                                        \
		TP_BOTH_ALL(sc_##name);                                              \
	}
SC(reader_sees_writer_close, sc_reader, CLOSE)
SC(reader_sees_writer_exit, sc_reader, EXIT)
SC(reader_sees_writer_killed, sc_reader, KILL)
SC(writer_sees_reader_close, sc_writer, CLOSE)
SC(writer_sees_reader_exit, sc_writer, EXIT)
SC(writer_sees_reader_killed, sc_writer, KILL)

/* pp_fd made before the fork: the child's handle gives a descriptor that
 * works in the child (its own or the inherited one), and the parent's
 * still works after the child has gone. */
static void pp_fd_before_fork(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	int fd = pp_fd(e[0]);
	CHECK(fd >= 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		pp_close(e[1]);
		int cfd = pp_fd(e[0]);
		struct pollfd p = { cfd, POLLIN, 0 };
		if (cfd < 0 || poll(&p, 1, BOUND_MS) != 1)
			_exit(10);
		char c;
		if (pp_read(e[0], &c, 1) != 1 || c != 'a')
			_exit(11);
		p.revents = 0;
		if (poll(&p, 1, 0) != 0)
			_exit(12); /* drained: not ready */
		_exit(0);
	}
	CHECK_EQ(pp_write(e[1], "a", 1), 1);
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct pollfd p = { fd, POLLIN, 0 };
	CHECK_EQ(poll(&p, 1, 0), 0);
	CHECK_EQ(pp_write(e[1], "b", 1), 1);
	CHECK_EQ(poll(&p, 1, BOUND_MS), 1);
	CHECK_EQ(pp_fd(e[0]), fd);
	pp_close(e[1]);
	pp_close(e[0]);
}

int main(void)
{
	t_around_cases(tp_fds_note, tp_fds_same);
	RUN(reader_sees_writer_close);
	RUN(reader_sees_writer_exit);
	RUN(reader_sees_writer_killed);
	RUN(writer_sees_reader_close);
	RUN(writer_sees_reader_exit);
	RUN(writer_sees_reader_killed);
	RUN(pp_fd_before_fork);
	return T_DONE();
}
