/*
 * wakeup.c - no lost wakeups.
 *
 * Every place where a thread sleeps in pagepipe must be woken by the event
 * that makes progress possible, even when the event comes at the worst
 * moment.  A lost wakeup shows as a hang, so every case runs under the
 * harness's watchdog, which fails the case loudly when nothing has
 * progressed for PP_CASE_TIMEOUT seconds, and poll/epoll waits have
 * timeouts.
 *   pingpong             two threads, two pipes, 100000 round trips of one
 *                        byte each way (fewer under the sanitizers), each
 *                        byte checked.
 *   slot_frees_writer    a one-page pipe is full and N writers (1-8) sleep,
 *                        each writing one page; the reader reads one page at
 *                        a time, so each freed slot must wake a writer or the
 *                        next read sleeps for ever.  Every page read must be
 *                        one writer's whole page.
 *   slot_frees_many      a full 16-page pipe, N one-byte writers asleep; the
 *                        reader frees one slot: at least one writer must
 *                        finish; then draining lets all of them finish.
 *   readers_one_byte     N readers (1-8) sleep reading one byte each; one
 *                        writer writes N bytes one at a time (back to back or
 *                        with pauses): every reader gets exactly one byte and
 *                        every byte goes to exactly one reader.
 *   grow_wakes_writer    a writer sleeps on a full pipe; pp_setsize() grows
 *                        the pipe (from either end) and must wake it, with no
 *                        read in between.
 *   poll_fd_thread       another thread sleeping in poll(2) on pp_fd() wakes
 *                        when data arrives, when the last writer closes, when
 *                        a full pipe gets a free slot and when the last reader
 *                        closes; it must not wake before.
 *   epoll_et_read        edge-triggered epoll on the read end's pp_fd() sees
 *                        one event per write, even though the pipe never
 *                        becomes empty in between, and none without a write.
 *   epoll_et_write       edge-triggered epoll on the write end's pp_fd(): no
 *                        event while the pipe is full (a partial read of the
 *                        first page frees no slot), one when a slot frees.
 *
 * The slot and wakeup rules were checked against kernel pipes (same program
 * over a shim mapping the pp_ calls onto pipe2/read/write/fcntl).
 * PP_TEST_SCALE multiplies the loop counts (only the ping-pong count is
 * cut under ASan/TSan, by 2 and 4).
 */
#include "harness/harness.h"
#include "pagepipe.h"
#include "threads.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

/* Loop counts: scaled by PP_TEST_SCALE only, never below n (each count
 * covers every thread number 1-8 at least twice). */
static long reps_of(long n)
{
	double v = (double)n * t_scale();
	return v < (double)n ? n : (long)v;
}

static void msleep(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* Fill a pipe of the given size with whole pages. */
static void fill(struct pp_end *w, long size, unsigned char val)
{
	unsigned char page[4096];
	memset(page, val, sizeof page);
	for (long i = 0; i < size / 4096; i++)
		CHECK_EQ(pp_write(w, page, 4096), 4096);
}

/* ------------------------------------------------------------------ */
/* (1) ping-pong                                                       */

struct pong {
	struct pp_end *in, *out; /* owned: closed on exit */
	long rounds;
};

static void *pong_main(void *arg)
{
	struct pong *p = arg;
	for (long i = 0; i < p->rounds; i++) {
		unsigned char b;
		ssize_t n = pp_read(p->in, &b, 1);
		if (n != 1) {
			TFAIL("pong: read %ld returned %zd (errno %d)", i, n, errno);
			break;
		}
		if (b != (unsigned char)(i * 7)) {
			TFAIL("pong: round %ld got byte %u, want %u", i, b,
			      (unsigned char)(i * 7));
			break;
		}
		b ^= 0xff;
		n = pp_write(p->out, &b, 1);
		if (n != 1) {
			TFAIL("pong: write %ld returned %zd (errno %d)", i, n, errno);
			break;
		}
	}
	/* if we stopped early, the closes turn the other side's wait into EOF */
	pp_close(p->in);
	pp_close(p->out);
	return NULL;
}

static void pingpong(void)
{
	struct pp_end *a[2], *b[2];
	struct pong p;
	pthread_t t;
	long rounds = t_scaled_san(100000), i;
	CHECK_EQ(pp_pipe(a, 0), 0); /* ping -> pong */
	CHECK_EQ(pp_pipe(b, 0), 0); /* pong -> ping */
	p = (struct pong){a[0], b[1], rounds};
	start_thread(&t, pong_main, &p);
	double t0 = t_now();
	t_progress_at("ping-pong round trips");
	for (i = 0; i < rounds; i++) {
		unsigned char c = (unsigned char)(i * 7);
		ssize_t n = pp_write(a[1], &c, 1);
		if (n != 1) {
			CHECK_EQ(n, 1);
			break;
		}
		n = pp_read(b[0], &c, 1);
		if (n != 1) {
			fprintf(stderr, "ping: round %ld: read returned %zd\n", i, n);
			CHECK_EQ(n, 1);
			break;
		}
		if (c != (unsigned char)((i * 7) ^ 0xff)) {
			CHECK_EQ(c, (unsigned char)((i * 7) ^ 0xff));
			break;
		}
		t_progress();
	}
	pthread_join(t, NULL);
	CHECK_EQ(i, rounds);
	double dt = t_now() - t0;
	fprintf(stderr, "  pingpong: %ld round trips in %.2f s (%.1f us each)\n",
	        i, dt, i ? dt * 1e6 / (double)i : 0.0);
	CHECK_EQ(pp_close(a[1]), 0);
	CHECK_EQ(pp_close(b[0]), 0);
}

/* ------------------------------------------------------------------ */
/* (2) a freed slot wakes a sleeping writer                            */

struct wctx {
	struct pp_end *w;
	int id;
	size_t len;
	atomic_int *started, *done;
	ssize_t ret;
	int err;
};

static void *page_writer(void *arg)
{
	struct wctx *c = arg;
	unsigned char *buf = malloc(c->len);
	if (!buf)
		abort();
	memset(buf, 0x40 + c->id, c->len);
	atomic_fetch_add(c->started, 1);
	errno = 0;
	c->ret = pp_write(c->w, buf, c->len);
	c->err = errno;
	free(buf);
	atomic_fetch_add(c->done, 1);
	t_progress();
	return NULL;
}

static void slot_frees_writer(void)
{
	long reps = reps_of(16);
	for (long rep = 0; rep < reps && !t_case_failed; rep++) {
		int n = 1 + (int)(rep % 8);
		struct pp_end *e[2];
		struct wctx c[8];
		pthread_t th[8];
		atomic_int started = 0, done = 0;
		int seen[8] = {0};
		unsigned char page[4096];
		CHECK_EQ(pp_pipe(e, 0), 0);
		CHECK_EQ(pp_setsize(e[1], 4096), 4096);
		fill(e[1], 4096, 0x3f);
		for (int i = 0; i < n; i++) {
			c[i] = (struct wctx){e[1], i, 4096, &started, &done, -2, 0};
			start_thread(&th[i], page_writer, &c[i]);
		}
		wait_count(&started, n);
		msleep(rep % 2 ? 20 : 1);
		CHECK_EQ(atomic_load(&done), 0); /* full: nobody can finish yet */
		/* n + 1 pages to read; after the first, each must come from a
		 * writer that the previous read's freed slot woke up */
		t_progress_at("reading page after page from a one-page pipe");
		for (int p = 0; p <= n; p++) {
			ssize_t r = pp_read(e[0], page, sizeof page);
			if (r != 4096) {
				fprintf(stderr, "rep %ld page %d: read returned %zd\n", rep,
				        p, r);
				CHECK_EQ(r, 4096);
				break;
			}
			int v = page[0], whole = 1;
			for (int k = 1; k < 4096; k++)
				whole &= page[k] == v;
			CHECK(whole);
			if (p == 0) {
				CHECK_EQ(v, 0x3f);
			} else if (v < 0x40 || v >= 0x40 + n || seen[v - 0x40]++) {
				fprintf(stderr, "rep %ld: page %d has writer byte %#x\n", rep,
				        p, v);
				CHECK(!"page from an unknown writer, or twice");
			}
			t_progress();
		}
		for (int i = 0; i < n; i++) {
			pthread_join(th[i], NULL);
			CHECK_EQ(c[i].ret, 4096);
		}
		CHECK_EQ(pp_nread(e[0]), 0);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
	}
}

static void slot_frees_many(void)
{
	long reps = reps_of(16);
	int more_than_one = 0;
	for (long rep = 0; rep < reps && !t_case_failed; rep++) {
		int n = 1 + (int)(rep % 8);
		struct pp_end *e[2];
		struct wctx c[8];
		pthread_t th[8];
		atomic_int started = 0, done = 0;
		unsigned char buf[4096];
		CHECK_EQ(pp_pipe(e, 0), 0);
		fill(e[1], 65536, 0x3f);
		for (int i = 0; i < n; i++) {
			c[i] = (struct wctx){e[1], i, 1, &started, &done, -2, 0};
			start_thread(&th[i], page_writer, &c[i]);
		}
		wait_count(&started, n);
		msleep(20);
		CHECK_EQ(atomic_load(&done), 0);
		CHECK_EQ(pp_nread(e[0]), 65536);
		/* free exactly one slot */
		CHECK_EQ(pp_read(e[0], buf, 4096), 4096);
		t_progress_at("waiting for a writer after one slot was freed");
		while (atomic_load(&done) == 0)
			usleep(100);
		msleep(20);
		/* Kernel pipes let exactly one through: the others sleep until a
		 * slot frees (a woken writer never merges).  Reported, not failed:
		 * it is not a lost wakeup. */
		if (atomic_load(&done) > 1)
			more_than_one++;
		/* drain everything: each freed slot lets more writers in */
		t_progress_at("draining while one-byte writers finish");
		long left = 65536 - 4096 + n, got = 0;
		while (got < left) {
			ssize_t r = pp_read(e[0], buf, sizeof buf);
			if (r <= 0) {
				CHECK(r > 0);
				break;
			}
			got += r;
			t_progress();
		}
		CHECK_EQ(got, left);
		for (int i = 0; i < n; i++) {
			pthread_join(th[i], NULL);
			CHECK_EQ(c[i].ret, 1);
		}
		CHECK_EQ(pp_nread(e[0]), 0);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
	}
	if (more_than_one)
		fprintf(stderr, "note: in %d of %ld runs more than one sleeping "
		        "one-byte writer finished after a single slot was freed "
		        "(a kernel pipe lets exactly one through)\n", more_than_one,
		        reps);
}

/* ------------------------------------------------------------------ */
/* (3) N sleeping readers, N single bytes                              */

struct rctx {
	struct pp_end *r;
	atomic_int *started;
	ssize_t ret;
	unsigned char b;
};

static void *byte_reader(void *arg)
{
	struct rctx *c = arg;
	unsigned char buf[2];
	atomic_fetch_add(c->started, 1);
	c->ret = pp_read(c->r, buf, 1);
	c->b = buf[0];
	t_progress();
	return NULL;
}

static void readers_one_byte(void)
{
	long reps = reps_of(48);
	for (long rep = 0; rep < reps && !t_case_failed; rep++) {
		int n = 1 + (int)(rep % 8);
		int mode = (int)((rep / 8) % 3); /* 0 back to back, 1 yield, 2 sleep */
		struct pp_end *e[2];
		struct rctx c[8];
		pthread_t th[8];
		atomic_int started = 0;
		int count[8] = {0};
		CHECK_EQ(pp_pipe(e, 0), 0);
		for (int i = 0; i < n; i++) {
			c[i] = (struct rctx){e[0], &started, -2, 0};
			start_thread(&th[i], byte_reader, &c[i]);
		}
		wait_count(&started, n);
		msleep(5);
		for (int i = 0; i < n; i++) {
			unsigned char b = (unsigned char)i;
			CHECK_EQ(pp_write(e[1], &b, 1), 1);
			if (mode == 1)
				sched_yield();
			else if (mode == 2)
				usleep(500);
		}
		t_progress_at("readers waiting for their byte");
		for (int i = 0; i < n; i++) {
			pthread_join(th[i], NULL);
			if (c[i].ret != 1)
				fprintf(stderr, "rep %ld: reader %d got %zd\n", rep, i,
				        c[i].ret);
			CHECK_EQ(c[i].ret, 1);
			if (c[i].ret == 1 && c[i].b < n)
				count[c[i].b]++;
		}
		for (int i = 0; i < n; i++)
			CHECK_EQ(count[i], 1);
		CHECK_EQ(pp_nread(e[0]), 0);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
	}
}

/* ------------------------------------------------------------------ */
/* (4) growing the pipe wakes a sleeping writer                        */

static void grow_wakes_writer(void)
{
	static const struct {
		long from, to;
		size_t len;
	} plan[] = {
		{4096, 8192, 4096},     /* one page more, one page to write */
		{4096, 8192, 1},        /* a byte: needs a slot too (page is full) */
		{4096, 65536, 12288},   /* three pages at once */
		{65536, 131072, 4096},  /* default size doubled */
		{8192, 1048576, 40000}, /* large growth, multi-page write */
	};
	for (int rep = 0; rep < 10 && !t_case_failed; rep++) {
		int k = rep % (int)(sizeof plan / sizeof plan[0]);
		struct pp_end *e[2];
		struct wctx c;
		pthread_t th;
		atomic_int started = 0, done = 0;
		unsigned char *big = malloc(plan[k].len);
		if (!big)
			abort();
		CHECK_EQ(pp_pipe(e, 0), 0);
		CHECK_EQ(pp_setsize(e[0], (size_t)plan[k].from), plan[k].from);
		fill(e[1], plan[k].from, 0x3f);
		c = (struct wctx){e[1], 1, plan[k].len, &started, &done, -2, 0};
		start_thread(&th, page_writer, &c);
		wait_count(&started, 1);
		msleep(20);
		CHECK_EQ(atomic_load(&done), 0);
		/* grow from the read end on even reps, the write end on odd ones */
		CHECK_EQ(pp_setsize(e[rep % 2], (size_t)plan[k].to), plan[k].to);
		t_progress_at("writer should wake after the pipe grew");
		pthread_join(th, NULL);
		CHECK_EQ(c.ret, (ssize_t)c.len);
		CHECK_EQ(pp_nread(e[0]), plan[k].from + (long)c.len);
		/* and a further write that fits now goes straight in */
		if (plan[k].from + 2 * (long)plan[k].len + 4096 <= plan[k].to) {
			memset(big, 7, plan[k].len);
			CHECK_EQ(pp_write(e[1], big, plan[k].len), (ssize_t)plan[k].len);
		}
		free(big);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
	}
}

/* ------------------------------------------------------------------ */
/* (5) poll(2) on pp_fd from another thread                            */

struct poller {
	int fd;
	short events;
	atomic_int started, returned;
	int ret;
	short revents;
};

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	struct pollfd f = {p->fd, p->events, 0};
	atomic_store(&p->started, 1);
	p->ret = poll(&f, 1, 10000);
	p->revents = f.revents;
	atomic_store(&p->returned, 1);
	t_progress();
	return NULL;
}

/*
 * Start a poller on fd, make sure it is asleep (has not returned after
 * 20 ms: the end is not ready), run the event, and require it to wake.
 */
static void poll_across(const char *what, int fd, short events, short want,
                        void (*event)(void *), void *arg)
{
	struct poller p = {fd, events, 0, 0, -2, 0};
	pthread_t th;
	start_thread(&th, poller_main, &p);
	while (!atomic_load(&p.started))
		sched_yield();
	msleep(20);
	if (atomic_load(&p.returned)) {
		fprintf(stderr, "%s: poll returned %d revents %#x before the event\n",
		        what, p.ret, (unsigned)p.revents);
		CHECK(!"pp_fd was ready too early");
	}
	double t0 = t_now();
	event(arg);
	t_progress_at(what);
	pthread_join(th, NULL);
	if (p.ret != 1 || !(p.revents & want)) {
		fprintf(stderr, "%s: poll returned %d revents %#x after %.1f s\n",
		        what, p.ret, (unsigned)p.revents, t_now() - t0);
		CHECK(!"poll on pp_fd did not wake");
	}
}

struct ends {
	struct pp_end *e[2];
};

static void ev_write_byte(void *arg)
{
	struct ends *x = arg;
	CHECK_EQ(pp_write(x->e[1], "x", 1), 1);
}

static void ev_close_writer(void *arg)
{
	struct ends *x = arg;
	CHECK_EQ(pp_close(x->e[1]), 0);
	x->e[1] = NULL;
}

static void ev_read_page(void *arg)
{
	struct ends *x = arg;
	unsigned char page[4096];
	CHECK_EQ(pp_read(x->e[0], page, sizeof page), 4096);
}

static void ev_close_reader(void *arg)
{
	struct ends *x = arg;
	CHECK_EQ(pp_close(x->e[0]), 0);
	x->e[0] = NULL;
}

static int fd_ready_now(int fd, short events)
{
	struct pollfd f = {fd, events, 0};
	return poll(&f, 1, 0);
}

static void poll_fd_thread(void)
{
	for (int rep = 0; rep < 3 && !t_case_failed; rep++) {
		struct ends x;
		char c;
		CHECK_EQ(pp_pipe(x.e, 0), 0);
		int rfd = pp_fd(x.e[0]);
		CHECK(rfd >= 0);
		CHECK_EQ(fd_ready_now(rfd, POLLIN), 0);

		/* read end: data arrives */
		poll_across("poll(read end) until a write", rfd, POLLIN, POLLIN,
		            ev_write_byte, &x);
		CHECK(pp_events(x.e[0]) & POLLIN);
		CHECK_EQ(pp_read(x.e[0], &c, 1), 1);
		CHECK_EQ(fd_ready_now(rfd, POLLIN), 0); /* drained: not ready */

		/* read end: last writer closes */
		poll_across("poll(read end) until the writer closes", rfd, POLLIN,
		            POLLIN | POLLHUP, ev_close_writer, &x);
		CHECK(pp_events(x.e[0]) & POLLHUP);
		CHECK_EQ(pp_read(x.e[0], &c, 1), 0);
		CHECK_EQ(pp_close(x.e[0]), 0);

		/* write end: a full pipe gets a free slot */
		CHECK_EQ(pp_pipe(x.e, 0), 0);
		if (rep == 1)
			CHECK_EQ(pp_setsize(x.e[1], 4096), 4096);
		long size = pp_getsize(x.e[1]);
		fill(x.e[1], size, 1);
		int wfd = pp_fd(x.e[1]);
		CHECK(wfd >= 0);
		CHECK_EQ(fd_ready_now(wfd, PPFD_WRITE_EVENTS), 0);
		poll_across("poll(write end) until a slot frees", wfd,
		            PPFD_WRITE_EVENTS, PPFD_WRITE_EVENTS, ev_read_page, &x);
		CHECK(pp_events(x.e[1]) & POLLOUT);

		/* write end: full again, then the last reader closes */
		fill(x.e[1], 4096, 2);
		CHECK_EQ(fd_ready_now(wfd, PPFD_WRITE_EVENTS), 0);
		poll_across("poll(write end) until the reader closes", wfd,
		            PPFD_WRITE_EVENTS, PPFD_WRITE_EVENTS | POLLERR,
		            ev_close_reader, &x);
		CHECK(pp_events(x.e[1]) & POLLERR);
		CHECK_EQ(pp_close(x.e[1]), 0);
	}
}

/* ------------------------------------------------------------------ */
/* (6) edge-triggered epoll                                            */

static int ep_wait(int ep, int ms)
{
	struct epoll_event ev[4];
	int n;
	do
		n = epoll_wait(ep, ev, 4, ms);
	while (n < 0 && errno == EINTR);
	return n;
}

static void epoll_et_read(void)
{
	struct pp_end *e[2];
	long writes = reps_of(200);
	unsigned char buf[5000];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	int fd = pp_fd(e[0]);
	CHECK(fd >= 0);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	CHECK_EQ(ep_wait(ep, 50), 0); /* empty pipe: nothing */
	memset(buf, 9, sizeof buf);
	long total = 0;
	t_progress_at("edge-triggered epoll on the read end");
	for (long i = 0; i < writes && !t_case_failed; i++) {
		/* sizes that merge into the last page, start a new one, or both;
		 * never more than the default capacity in all */
		size_t len = i % 5 == 4 ? 100 : 1 + (size_t)(i % 3);
		if (total + (long)len > 60000)
			break;
		CHECK_EQ(pp_write(e[1], buf, len), (ssize_t)len);
		total += (long)len;
		int n = ep_wait(ep, 2000);
		if (n != 1) {
			fprintf(stderr, "write %ld (%zu bytes, %ld in the pipe): "
			        "epoll_wait returned %d, want 1 event\n", i, len, total, n);
			CHECK_EQ(n, 1);
		}
		n = ep_wait(ep, 0);
		if (n != 0) {
			fprintf(stderr, "write %ld: second epoll_wait returned %d, want "
			        "0 (no new write)\n", i, n);
			CHECK_EQ(n, 0);
		}
		t_progress();
	}
	CHECK_EQ(pp_nread(e[0]), total);
	/* drained, the end is unready; the writer's close makes it ready */
	while (total > 0) {
		ssize_t r = pp_read(e[0], buf, sizeof buf);
		if (r <= 0) {
			CHECK(r > 0);
			break;
		}
		total -= r;
	}
	while (ep_wait(ep, 0) > 0)
		;
	CHECK_EQ(pp_close(e[1]), 0);
	CHECK_EQ(ep_wait(ep, 2000), 1);
	CHECK_EQ(pp_close(e[0]), 0);
	close(ep);
}

static void epoll_et_write(void)
{
	struct pp_end *e[2];
	unsigned char page[4096];
	long rounds = reps_of(40);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	int fd = pp_fd(e[1]);
	CHECK(fd >= 0);
	struct epoll_event ev = {.events = PPFD_WRITE_EVENTS | EPOLLET};
	CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	/* writable at registration: at most the one initial edge */
	CHECK(ep_wait(ep, 0) <= 1);
	fill(e[1], 65536, 3);
	while (ep_wait(ep, 0) > 0)
		; /* whatever filling reported is not what is tested */
	memset(page, 4, sizeof page);
	t_progress_at("edge-triggered epoll on the write end");
	for (long i = 0; i < rounds && !t_case_failed; i++) {
		/* full: no event */
		CHECK_EQ(ep_wait(ep, i % 4 == 0 ? 20 : 0), 0);
		/* a partial read of the first page frees no slot: still none */
		CHECK_EQ(pp_read(e[0], page, 1), 1);
		CHECK_EQ(ep_wait(ep, i % 4 == 0 ? 20 : 0), 0);
		CHECK_EQ(pp_events(e[1]) & POLLOUT, 0);
		/* the rest of that page: one slot frees, one edge */
		CHECK_EQ(pp_read(e[0], page, 4095), 4095);
		int n = ep_wait(ep, 2000);
		if (n != 1) {
			fprintf(stderr, "round %ld: full->not-full gave %d events\n", i, n);
			CHECK_EQ(n, 1);
		}
		CHECK(pp_events(e[1]) & POLLOUT);
		/* fill the slot again */
		CHECK_EQ(pp_write(e[1], page, 4096), 4096);
		CHECK_EQ(pp_events(e[1]) & POLLOUT, 0);
		while (ep_wait(ep, 0) > 0)
			;
		t_progress();
	}
	/* last reader gone: an error edge */
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_EQ(ep_wait(ep, 2000), 1);
	CHECK_EQ(pp_close(e[1]), 0);
	close(ep);
}

int main(void)
{
	setvbuf(stderr, NULL, _IOLBF, 0);
	t_around_cases(NULL, threads_case_end);
	RUN(pingpong);
	RUN(slot_frees_writer);
	RUN(slot_frees_many);
	RUN(readers_one_byte);
	RUN(grow_wakes_writer);
	RUN(poll_fd_thread);
	RUN(epoll_et_read);
	RUN(epoll_et_write);
	return T_DONE();
}
