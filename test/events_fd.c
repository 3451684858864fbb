/*
 * events_fd.c - readiness: pp_events and the event descriptor pp_fd.
 *
 * pp_events must equal what poll(2) reports on a kernel pipe end in the
 * same state: empty, partly filled, full (by pages and by small unmergeable
 * buffers), writer gone (POLLHUP, with and without data), reader gone
 * (POLLERR, with free slots and full), and after growing a full pipe.
 * pp_fd must poll readable exactly while pp_events says the end is ready
 * (read end: data or hang-up; write end: free slot or error) through every
 * transition, must wake a poll(2) sleeping on it, must give edge-triggered
 * epoll one event per write (like a kernel pipe), and must be the only
 * descriptor a pagepipe ever opens: an end that never calls pp_fd opens
 * none, and the ones made are closed with the end's last handle.
 */
#include <sys/epoll.h>

#include "harness/harness.h"
#include "harness/helpers.h"

/* ---- pp_events against poll(2) ------------------------------------------ */

static void rec_events(struct tp_rec *r, struct tp *t, const char *what)
{
	TP_REC(r, what, t->kernel ? (t->fd[0] >= 0 ? tp_events(t, 0) : -2)
	                          : (t->e[0] ? tp_events(t, 0) : -2));
	TP_REC(r, what, t->kernel ? (t->fd[1] >= 0 ? tp_events(t, 1) : -2)
	                          : (t->e[1] ? tp_events(t, 1) : -2));
}

static void sc_events(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[70000];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	rec_events(r, &t, "empty");
	TP_REC(r, "w100", tp_res(tp_write(&t, buf, 100)));
	rec_events(r, &t, "partial");
	TP_REC(r, "fill", tp_res(tp_write(&t, buf, sizeof buf)));
	rec_events(r, &t, "full");
	TP_REC(r, "read 100", tp_res(tp_read(&t, buf, 100)));
	rec_events(r, &t, "full, first page partly read");
	TP_REC(r, "read 3996", tp_res(tp_read(&t, buf, 3996)));
	rec_events(r, &t, "one slot free");
	TP_REC(r, "setsize 4 pages", tp_res(tp_setsize(&t, 0, 16384)));
	TP_REC(r, "read all", tp_res(tp_read(&t, buf, sizeof buf)));
	rec_events(r, &t, "drained");
	TP_REC(r, "setsize 4 pages", tp_res(tp_setsize(&t, 0, 16384)));
	for (int i = 0; i < 2; i++) {
		TP_REC(r, "4000", tp_res(tp_write(&t, buf, 4000)));
		TP_REC(r, "100", tp_res(tp_write(&t, buf, 100)));
	}
	rec_events(r, &t, "full of small buffers");
	TP_REC(r, "grow", tp_res(tp_setsize(&t, 1, 32768)));
	rec_events(r, &t, "grown");
	tp_close_end(&t, 1);
	rec_events(r, &t, "writer gone, data");
	TP_REC(r, "read all", tp_res(tp_read(&t, buf, sizeof buf)));
	rec_events(r, &t, "writer gone, empty");
	tp_close(&t);

	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	tp_close_end(&t, 0);
	rec_events(r, &t, "reader gone, empty");
	tp_close(&t);

	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "w100", tp_res(tp_write(&t, buf, 100)));
	tp_close_end(&t, 0);
	rec_events(r, &t, "reader gone, data");
	tp_close(&t);

	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "fill", tp_res(tp_write(&t, buf, 65536)));
	tp_close_end(&t, 0);
	rec_events(r, &t, "reader gone, full");
	tp_close(&t);
}

static void events_match_poll(void)
{
	TP_BOTH(sc_events);
	/* The values themselves, as documented. */
	struct pp_end *e[2];
	char buf[100];
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pp_events(e[0]), 0);
	CHECK_EQ(pp_events(e[1]), POLLOUT | POLLWRNORM);
	CHECK_EQ(pp_write(e[1], "x", 1), 1);
	CHECK_EQ(pp_events(e[0]), POLLIN | POLLRDNORM);
	struct pp_end *d = pp_dup(e[0]);
	CHECK_EQ(pp_events(d), POLLIN | POLLRDNORM);
	CHECK_EQ(pp_read(d, buf, sizeof buf), 1);
	pp_close(e[1]);
	CHECK_EQ(pp_events(e[0]), POLLHUP);
	CHECK_EQ(pp_events(d), POLLHUP);
	pp_close(d);
	pp_close(e[0]);
	CHECK_EQ(pp_pipe(e, 0), 0);
	pp_close(e[0]);
	CHECK_EQ(pp_events(e[1]), POLLOUT | POLLWRNORM | POLLERR);
	pp_close(e[1]);
}

/* ---- pp_fd ---------------------------------------------------------------- */

static int fd_readable(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int n = poll(&p, 1, 0);
	if (n < 0)
		return -1;
	return (p.revents & POLLIN) != 0;
}

/* The descriptor of one end is readable exactly when pp_events shows one
 * of the ready events, and when it should (want). */
static void check_fd(const char *which, struct pp_end *end, int fd, int ready_events,
                     int want, const char *state)
{
	int ev = pp_events(end);
	int ready = fd_readable(fd);
	int says = (ev & ready_events) != 0;
	if (ready != says || ready != want) {
		fprintf(stderr, "%s: %s end: fd readable %d, pp_events %#x, want %d\n",
		        state, which, ready, ev, want);
		t_case_failed = 1;
	}
}

/* The descriptor of each end (if given) says what pp_events says, and what
 * it should. */
static void check_fds(struct pp_end *r, int rfd, struct pp_end *w, int wfd,
                      int want_r, int want_w, const char *state)
{
	if (r)
		check_fd("read", r, rfd, POLLIN | POLLHUP, want_r, state);
	if (w)
		check_fd("write", w, wfd, POLLOUT | POLLERR, want_w, state);
}

static void fd_follows_events(void)
{
	struct pp_end *e[2];
	static char buf[70000];
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	int rfd = pp_fd(e[0]), wfd = pp_fd(e[1]);
	CHECK(rfd >= 0 && wfd >= 0 && rfd != wfd);
	CHECK_EQ(pp_fd(e[0]), rfd); /* made once */
	struct pp_end *d = pp_dup(e[0]);
	CHECK_EQ(pp_fd(d), rfd);    /* shared by dups */
	pp_close(d);
	CHECK(fcntl(rfd, F_GETFD) != -1);

	check_fds(e[0], rfd, e[1], wfd, 0, 1, "empty");
	CHECK_EQ(pp_write(e[1], buf, 10), 10);
	check_fds(e[0], rfd, e[1], wfd, 1, 1, "10 bytes");
	CHECK_EQ(pp_write(e[1], buf, 10), 10);
	check_fds(e[0], rfd, e[1], wfd, 1, 1, "20 bytes");
	CHECK_EQ(pp_read(e[0], buf, 5), 5);
	check_fds(e[0], rfd, e[1], wfd, 1, 1, "15 bytes");
	CHECK_EQ(pp_read(e[0], buf, 100), 15);
	check_fds(e[0], rfd, e[1], wfd, 0, 1, "drained");
	CHECK_EQ(pp_write(e[1], buf, 70000), 65536);
	check_fds(e[0], rfd, e[1], wfd, 1, 0, "full");
	CHECK_EQ(pp_read(e[0], buf, 100), 100);
	check_fds(e[0], rfd, e[1], wfd, 1, 0, "full, 100 read");
	CHECK_EQ(pp_read(e[0], buf, 3996), 3996);
	check_fds(e[0], rfd, e[1], wfd, 1, 1, "a slot free");
	CHECK_EQ(pp_write(e[1], buf, 4096), 4096);
	check_fds(e[0], rfd, e[1], wfd, 1, 0, "full again");
	CHECK_EQ(pp_setsize(e[1], 131072), 131072);
	check_fds(e[0], rfd, e[1], wfd, 1, 1, "grown");
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 65536);
	check_fds(e[0], rfd, e[1], wfd, 0, 1, "drained again");
	CHECK_EQ(pp_write(e[1], buf, 1), 1);
	pp_close(e[1]);
	check_fds(e[0], rfd, NULL, -1, 1, 0, "hang-up with data");
	CHECK_EQ(pp_read(e[0], buf, 10), 1);
	check_fds(e[0], rfd, NULL, -1, 1, 0, "hang-up, empty");
	pp_close(e[0]);

	/* Error on the write end; and an fd made late sees the state at once. */
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(pp_write(e[1], buf, 65536), 65536);
	rfd = pp_fd(e[0]);
	wfd = pp_fd(e[1]);
	check_fds(e[0], rfd, e[1], wfd, 1, 0, "late fds, full");
	pp_close(e[0]);
	check_fds(NULL, -1, e[1], wfd, 0, 1, "reader gone, full");
	pp_close(e[1]);
}

/* A poll(2) sleeping on the descriptor wakes when the end becomes ready. */
struct poller {
	int fd;
	int ret;
	short revents;
	double woke;
};

static void *poll_thread(void *arg)
{
	struct poller *p = arg;
	struct pollfd pf = { p->fd, POLLIN, 0 };
	p->ret = poll(&pf, 1, 10000);
	p->revents = pf.revents;
	p->woke = t_now();
	return NULL;
}

static void check_wake(int fd, void (*act)(struct pp_end **), struct pp_end **e,
                       const char *what)
{
	pthread_t th;
	struct poller p = { fd, -1, 0, 0 };
	CHECK_EQ(pthread_create(&th, NULL, poll_thread, &p), 0);
	t_sleep_ms(80);
	double t0 = t_now();
	act(e);
	pthread_join(th, NULL);
	if (p.ret != 1 || !(p.revents & POLLIN) || p.woke - t0 > 2.0) {
		fprintf(stderr, "%s: poll returned %d revents %#x after %.3f s\n",
		        what, p.ret, p.revents, p.woke - t0);
		t_case_failed = 1;
	}
}

static void act_write(struct pp_end **e)
{
	CHECK_EQ(pp_write(e[1], "x", 1), 1);
}

static void act_read_page(struct pp_end **e)
{
	static char buf[4096];
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 4096);
}

static void act_close_writer(struct pp_end **e)
{
	CHECK_EQ(pp_close(e[1]), 0);
	e[1] = NULL;
}

static void act_close_reader(struct pp_end **e)
{
	CHECK_EQ(pp_close(e[0]), 0);
	e[0] = NULL;
}

static void act_grow(struct pp_end **e)
{
	CHECK_EQ(pp_setsize(e[1], 131072), 131072);
}

static void fd_wakes_poll(void)
{
	struct pp_end *e[2];
	static char buf[65536];

	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	check_wake(pp_fd(e[0]), act_write, e, "data arrives");
	CHECK_EQ(pp_read(e[0], buf, 10), 1);
	check_wake(pp_fd(e[0]), act_close_writer, e, "writer closes");
	pp_close(e[0]);

	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(pp_write(e[1], buf, 65536), 65536);
	check_wake(pp_fd(e[1]), act_read_page, e, "a slot frees");
	CHECK_EQ(pp_write(e[1], buf, 4096), 4096);
	check_wake(pp_fd(e[1]), act_grow, e, "the pipe grows");
	CHECK_EQ(pp_write(e[1], buf, 65536), 65536);
	check_wake(pp_fd(e[1]), act_close_reader, e, "reader closes");
	pp_close(e[1]);
}

/* Edge-triggered epoll on the read end sees every write. */
static void sc_epoll_et(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct epoll_event ev;
	char buf[64];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	int fd = kernel ? t.fd[0] : pp_fd(t.e[0]);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(fd >= 0 && ep >= 0);
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN | EPOLLET;
	CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	TP_REC(r, "empty", epoll_wait(ep, &ev, 1, 0));
	for (int i = 0; i < 3; i++) {
		TP_REC(r, "write", tp_res(tp_write(&t, "abc", 3)));
		TP_REC(r, "event", epoll_wait(ep, &ev, 1, 0));
		TP_REC(r, "no second event", epoll_wait(ep, &ev, 1, 0));
	}
	TP_REC(r, "read some", tp_res(tp_read(&t, buf, 4)));
	TP_REC(r, "write", tp_res(tp_write(&t, "z", 1)));
	TP_REC(r, "event", epoll_wait(ep, &ev, 1, 0));
	TP_REC(r, "read all", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "write", tp_res(tp_write(&t, "z", 1)));
	TP_REC(r, "event", epoll_wait(ep, &ev, 1, 0));
	TP_REC(r, "no second event", epoll_wait(ep, &ev, 1, 0));
	close(ep);
	tp_close(&t);
	TP_WANT(r, kernel, 0, 3, 1, 0, 3, 1, 0, 3, 1, 0, 4, 1, 1, 6, 1, 1, 0);
}

static void epoll_et_event_per_write(void)
{
	TP_BOTH(sc_epoll_et);
}

/* No descriptor unless pp_fd is called; those made die with the end. */
static void no_fd_without_pp_fd(void)
{
	char buf[100];
	int base = tp_count_fds();
	CHECK(base > 0);
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(tp_count_fds(), base);
	struct pp_end *d0 = pp_dup(e[0]), *d1 = pp_dup(e[1]);
	CHECK_EQ(pp_write(d1, "hello", 5), 5);
	CHECK(pp_events(e[0]) > 0);
	CHECK(pp_events(e[1]) > 0);
	CHECK_EQ(pp_nread(e[0]), 5);
	CHECK_EQ(pp_setsize(e[0], 8192), 8192);
	CHECK_EQ(pp_read(d0, buf, sizeof buf), 5);
	CHECK_EQ(pp_setfl(e[0], PP_NONBLOCK), 0);
	CHECK_ERR(pp_read(e[0], buf, sizeof buf), EAGAIN);
	CHECK_EQ(tp_count_fds(), base);

	/* pp_fd on the read end: at least one more descriptor (k), and no
	 * more for a dup or for I/O. */
	int rfd = pp_fd(e[0]);
	CHECK(rfd >= 0);
	int k = tp_count_fds() - base;
	CHECK(k >= 1 && k <= 2);
	CHECK_EQ(pp_fd(d0), rfd);
	CHECK_EQ(tp_count_fds(), base + k);
	CHECK_EQ(pp_write(e[1], "x", 1), 1);
	CHECK_EQ(tp_count_fds(), base + k);
	pp_close(e[0]);
	CHECK_EQ(tp_count_fds(), base + k); /* d0 still holds the end */
	CHECK(fcntl(rfd, F_GETFD) != -1);
	pp_close(d0);
	CHECK_EQ(tp_count_fds(), base);     /* closed with the last handle */
	pp_close(e[1]);
	pp_close(d1);
	CHECK_EQ(tp_count_fds(), base);

	/* Many pipes, each end's fd made and dropped: nothing accumulates. */
	for (int i = 0; i < 50; i++) {
		CHECK_EQ(pp_pipe(e, 0), 0);
		CHECK(pp_fd(e[0]) >= 0);
		CHECK(pp_fd(e[1]) >= 0);
		pp_close(e[1]);
		pp_close(e[0]);
	}
	CHECK_EQ(tp_count_fds(), base);
}

int main(void)
{
	RUN(events_match_poll);
	RUN(fd_follows_events);
	RUN(fd_wakes_poll);
	RUN(epoll_et_event_per_write);
	RUN(no_fd_without_pp_fd);
	return T_DONE();
}
