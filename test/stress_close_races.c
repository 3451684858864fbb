/*
 * stress_close_races.c - every race between closing an end and threads
 * asleep on the other ends ends in end of file or EPIPE, never in a hang
 * or a lost byte.
 *
 * Close races (looped, with 1-8 sleeping threads):
 *   close_eof_race       last writer closes while readers sleep (after
 *                        writing k < N single bytes): exactly k readers get a
 *                        byte, the rest end of file.
 *   close_epipe_race     last reader closes (from 1-3 dup'd handles in as
 *                        many threads at once) while writers sleep on a full
 *                        pipe: every writer gets EPIPE (PP_NOSIGPIPE).
 *   close_eof_race_shared, close_epipe_race_shared
 *                        the same on PP_SHARED pipes, whose sleepers also
 *                        poll the token descriptors the close closes.
 *   close_dup_race       threads holding pp_dup'd handles of both ends write,
 *                        dup and close concurrently; an observer must read
 *                        every byte and then end of file.
 *   nonblock_eof_race, nonblock_epipe_race (and _shared)
 *                        a thread loops non-blocking reads (writes on a
 *                        full pipe) while the other end's last handle
 *                        closes: it must end with every byte then end of
 *                        file (EPIPE).  On a shared pipe each EAGAIN polls
 *                        the token descriptors the close closes.
 *   nonblock_close_one_process
 *                        shared, with a forked child keeping a write end:
 *                        the reader thread's EAGAINs poll the tokens while
 *                        this process's last write handle closes its own.
 * After each case no page may remain in use in the pool (stress.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "threads.h"
#include "stress.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/wait.h>

/* Close races                                                         */

struct sleeper {
	struct pp_end *h;
	atomic_int *started;
	size_t len;
	ssize_t ret;
	int err;
};

static void *eof_reader(void *arg)
{
	struct sleeper *c = arg;
	unsigned char b;
	atomic_fetch_add(c->started, 1);
	errno = 0;
	c->ret = pp_read(c->h, &b, 1);
	c->err = errno;
	t_progress();
	return NULL;
}

/* Last writer closes (through 1-3 handles) while 1-8 readers sleep. */
static void eof_race(int flags)
{
	long iters = t_scaled_san(240);
	uint64_t s = new_seed();
	for (long it = 0; it < iters; it++) {
		int n = 1 + (int)(it % 8);
		int k = (it / 8) % 2 ? (int)rnd(&s, (size_t)n) : 0; /* bytes first */
		int nd = 1 + (int)rnd(&s, 3);
		struct pp_end *e[2], *w[3];
		struct sleeper c[8];
		pthread_t th[8];
		atomic_int started = 0;
		if (pp_pipe(e, PP_NOSIGPIPE | flags) != 0) {
			CHECK(!"pp_pipe");
			return;
		}
		w[0] = e[1];
		for (int d = 1; d < nd; d++) {
			w[d] = pp_dup(e[1]);
			CHECK(w[d] != NULL);
		}
		for (int i = 0; i < n; i++) {
			c[i] = (struct sleeper){e[0], &started, 1, -2, 0};
			start_thread(&th[i], eof_reader, &c[i]);
		}
		wait_count(&started, n);
		jitter(&s, 2000);
		for (int i = 0; i < k; i++) {
			unsigned char b = (unsigned char)i;
			CHECK_EQ(pp_write(w[rnd(&s, (size_t)nd)], &b, 1), 1);
		}
		for (int d = 0; d < nd; d++)
			CHECK_EQ(pp_close(w[d]), 0);
		int got1 = 0, got0 = 0;
		for (int i = 0; i < n; i++) {
			join_thread(th[i]);
			if (c[i].ret == 1)
				got1++;
			else if (c[i].ret == 0)
				got0++;
			else
				fprintf(stderr, "iteration %ld: reader %d got %zd errno %d\n",
				        it, i, c[i].ret, c[i].err);
		}
		if (got1 != k || got0 != n - k) {
			fprintf(stderr, "iteration %ld: %d readers, %d bytes written "
			        "before close: %d got a byte, %d got EOF\n", it, n, k, got1,
			        got0);
			CHECK(!"wrong mix of bytes and end of file");
		}
		unsigned char b;
		CHECK_EQ(pp_read(e[0], &b, 1), 0);
		CHECK(pp_events(e[0]) & POLLHUP);
		CHECK_EQ(pp_close(e[0]), 0);
		t_progress();
		if (t_case_failed)
			break;
	}
}

static void *epipe_writer(void *arg)
{
	struct sleeper *c = arg;
	unsigned char buf[8192];
	memset(buf, 0x5a, sizeof buf);
	atomic_fetch_add(c->started, 1);
	errno = 0;
	c->ret = pp_write(c->h, buf, c->len);
	c->err = errno;
	t_progress();
	return NULL;
}

/* Last reader closes (1-3 handles, concurrently) while 1-8 writers sleep. */
static void epipe_race(int flags)
{
	long iters = t_scaled_san(240);
	uint64_t s = new_seed();
	for (long it = 0; it < iters; it++) {
		int n = 1 + (int)(it % 8);
		int nd = 1 + (int)rnd(&s, 3);
		long size = rnd(&s, 2) ? 4096 : 65536;
		struct pp_end *e[2];
		struct sleeper c[8];
		struct gated cl[3];
		pthread_t th[8], ct[3];
		atomic_int started = 0, go = 0, ready = 0;
		unsigned char page[4096];
		if (pp_pipe(e, PP_NOSIGPIPE | flags) != 0) {
			CHECK(!"pp_pipe");
			return;
		}
		CHECK_EQ(pp_setsize(e[0], (size_t)size), size);
		memset(page, 0xa5, sizeof page);
		for (long f = 0; f < size / 4096; f++)
			CHECK_EQ(pp_write(e[1], page, 4096), 4096);
		CHECK_EQ(pp_nread(e[1]), size);
		for (int d = 0; d < nd; d++) {
			cl[d] = (struct gated){pp_close, d ? pp_dup(e[0]) : e[0], &go, &ready, -2};
			CHECK(cl[d].h != NULL);
		}
		for (int i = 0; i < n; i++) {
			c[i] = (struct sleeper){e[1], &started, 1 + rnd(&s, 8192), -2, 0};
			start_thread(&th[i], epipe_writer, &c[i]);
		}
		for (int d = 0; d < nd; d++)
			start_thread(&ct[d], gated_main, &cl[d]);
		while (atomic_load(&started) < n || atomic_load(&ready) < nd)
			sched_yield();
		jitter(&s, 2000);
		atomic_store(&go, 1);
		for (int d = 0; d < nd; d++) {
			join_thread(ct[d]);
			CHECK_EQ(cl[d].ret, 0);
		}
		for (int i = 0; i < n; i++) {
			join_thread(th[i]);
			if (c[i].ret != -1 || c[i].err != EPIPE) {
				fprintf(stderr, "iteration %ld: writer %d of %d (write of %zu "
				        "on a full pipe) got %zd errno %d, want -1 EPIPE\n", it,
				        i, n, c[i].len, c[i].ret, c[i].err);
				CHECK(!"sleeping writer did not get EPIPE");
			}
		}
		CHECK_ERR(pp_write(e[1], page, 1), EPIPE);
		CHECK(pp_events(e[1]) & POLLERR);
		CHECK_EQ(pp_close(e[1]), 0);
		t_progress();
		if (t_case_failed)
			break;
	}
}

static void close_eof_race(void) { eof_race(0); }
static void close_epipe_race(void) { epipe_race(0); }
/* The same on shared pipes: there a sleeper's wait also polls the token
 * descriptors that the closing thread closes (a data race TSan caught). */
static void close_eof_race_shared(void) { eof_race(PP_SHARED); }
static void close_epipe_race_shared(void) { epipe_race(PP_SHARED); }

/* A non-blocking caller that meets EAGAIN looks at the other side's token
 * at once (a dead peer's pipe must not say EAGAIN); loop such calls while
 * the other end's last handle closes. */
struct spinner {
	struct pp_end *h;
	atomic_int *started;
	size_t got;
	ssize_t ret;
	int err;
};

static void *nb_reader(void *arg)
{
	struct spinner *c = arg;
	unsigned char buf[64];
	atomic_fetch_add(c->started, 1);
	for (;;) {
		ssize_t n = pp_read(c->h, buf, sizeof buf);
		if (n > 0) {
			c->got += (size_t)n;
			continue;
		}
		c->ret = n;
		c->err = errno;
		if (n < 0 && errno == EAGAIN) {
			/* Let the closer run: under valgrind one thread runs at
			 * a time, and a loop that never enters the kernel keeps
			 * it out for a whole time slice. */
			sched_yield();
			continue;
		}
		return NULL;
	}
}

static void *nb_writer(void *arg)
{
	struct spinner *c = arg;
	unsigned char b = 7;
	atomic_fetch_add(c->started, 1);
	for (;;) {
		ssize_t n = pp_write(c->h, &b, 1);
		c->ret = n;
		c->err = errno;
		if (n == 1)
			c->got++;
		else if (!(n < 0 && errno == EAGAIN))
			return NULL;
		else
			sched_yield(); /* as in nb_reader */
	}
}

static void nonblock_race(int flags, bool close_reader)
{
	long iters = t_valgrind() ? 10 : t_scaled_san(200);
	uint64_t s = new_seed();
	for (long it = 0; it < iters; it++) {
		struct pp_end *e[2];
		if (pp_pipe(e, PP_NOSIGPIPE | PP_NONBLOCK | flags) != 0) {
			CHECK(!"pp_pipe");
			return;
		}
		/* One page: the 1-byte writer soon meets a full pipe and spins
		 * on EAGAIN, the state this case is about (filling the default
		 * 64 KiB a byte at a time took most of a minute under helgrind). */
		if (close_reader)
			CHECK_EQ(pp_setsize(e[1], 4096), 4096);
		atomic_int started = 0;
		struct spinner c = { close_reader ? e[1] : e[0], &started, 0, -2, 0 };
		size_t k = rnd(&s, 200);
		pthread_t th;
		start_thread(&th, close_reader ? nb_writer : nb_reader, &c);
		wait_count(&started, 1);
		unsigned char buf[200] = { 0 };
		if (!close_reader)
			CHECK_EQ(pp_write(e[1], buf, k), (ssize_t)k);
		jitter(&s, 500);
		CHECK_EQ(pp_close(e[close_reader ? 0 : 1]), 0);
		join_thread(th);
		if (close_reader) {
			CHECK_EQ(c.ret, -1);
			CHECK_EQ(c.err, EPIPE);
		} else {
			CHECK_EQ(c.ret, 0);
			CHECK_EQ(c.got, k);
		}
		CHECK_EQ(pp_close(e[close_reader ? 1 : 0]), 0);
		t_progress();
		if (t_case_failed)
			break;
	}
}

/* Shared: another process keeps a write end, so this process's reader
 * keeps meeting EAGAIN (and polling the tokens) while this process's last
 * write handle closes (and closes its token ends); then the other
 * process writes k bytes and exits: every byte, then end of file. */
static void nonblock_close_one_process(void)
{
	long iters = t_valgrind() ? 5 : t_scaled_san(60);
	uint64_t s = new_seed();
	for (long it = 0; it < iters; it++) {
		struct pp_end *e[2];
		int go[2];
		size_t k = 1 + rnd(&s, 100);
		CHECK_EQ(pipe(go), 0);
		if (pp_pipe(e, PP_NOSIGPIPE | PP_NONBLOCK | PP_SHARED) != 0) {
			CHECK(!"pp_pipe");
			return;
		}
		pid_t pid = fork();
		if (pid == 0) {
			char b;
			close(go[1]);
			pp_close(e[0]);
			(void)!read(go[0], &b, 1);
			unsigned char buf[100] = { 0 };
			_exit(pp_write(e[1], buf, k) == (ssize_t)k ? 0 : 1);
		}
		CHECK(pid > 0);
		close(go[0]);
		atomic_int started = 0;
		struct spinner c = { e[0], &started, 0, -2, 0 };
		pthread_t th;
		start_thread(&th, nb_reader, &c);
		wait_count(&started, 1);
		jitter(&s, 300);
		CHECK_EQ(pp_close(e[1]), 0);
		jitter(&s, 300);
		close(go[1]);
		int st = -1;
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		join_thread(th);
		CHECK_EQ(c.ret, 0);
		CHECK_EQ(c.got, k);
		CHECK_EQ(pp_close(e[0]), 0);
		t_progress();
		if (t_case_failed)
			break;
	}
}

static void nonblock_eof_race(void) { nonblock_race(0, false); }
static void nonblock_epipe_race(void) { nonblock_race(0, true); }
static void nonblock_eof_race_shared(void) { nonblock_race(PP_SHARED, false); }
static void nonblock_epipe_race_shared(void) { nonblock_race(PP_SHARED, true); }

struct duper {
	struct pp_end *r, *w;
	atomic_int *go, *ready;
	size_t wrote;
	uint64_t seed;
	int rc;
};

static void *duper_main(void *arg)
{
	struct duper *c = arg;
	uint64_t s = c->seed;
	unsigned char buf[128];
	size_t len = 1 + rnd(&s, sizeof buf);
	memset(buf, 0x33, sizeof buf);
	ssize_t n = pp_write(c->w, buf, len);
	if (n != (ssize_t)len)
		TFAIL("write of %zu returned %zd (errno %d)", len, n, errno);
	else
		c->wrote = len;
	gate(c->ready, c->go);
	/* dup and close in a burst, racing the other threads doing the same */
	for (int i = 0; i < 4; i++) {
		struct pp_end *d = pp_dup(rnd(&s, 2) ? c->r : c->w);
		if (!d)
			TFAIL("pp_dup failed (errno %d)", errno);
		else if (pp_close(d) != 0)
			TFAIL("pp_close of a dup failed (errno %d)", errno);
	}
	if (rnd(&s, 2)) {
		c->rc = pp_close(c->w) | pp_close(c->r);
	} else {
		c->rc = pp_close(c->r) | pp_close(c->w);
	}
	return NULL;
}

struct observer {
	struct pp_end *h;
	unsigned long long total;
	int err;
};

static void *observer_main(void *arg)
{
	struct observer *o = arg;
	unsigned char buf[300];
	for (;;) {
		ssize_t n = pp_read(o->h, buf, 1 + (size_t)(o->total % sizeof buf));
		if (n <= 0) {
			o->err = n < 0 ? errno : 0;
			break;
		}
		o->total += (size_t)n;
		t_progress();
	}
	TCHECK(pp_close(o->h) == 0);
	return NULL;
}

/* Many threads close dup'd handles of both ends at once. */
static void close_dup_race(void)
{
	long iters = t_scaled_san(200);
	uint64_t s = new_seed();
	for (long it = 0; it < iters; it++) {
		int k = 2 + (int)rnd(&s, 5);
		struct pp_end *e[2];
		struct duper d[6];
		struct observer o = {0};
		pthread_t th[6], ot;
		atomic_int go = 0, ready = 0;
		if (pp_pipe(e, PP_NOSIGPIPE) != 0) {
			CHECK(!"pp_pipe");
			return;
		}
		o.h = pp_dup(e[0]);
		CHECK(o.h != NULL);
		for (int i = 0; i < k; i++) {
			d[i] = (struct duper){pp_dup(e[0]), pp_dup(e[1]), &go, &ready, 0,
			                      new_seed(), -2};
			CHECK(d[i].r && d[i].w);
			start_thread(&th[i], duper_main, &d[i]);
		}
		start_thread(&ot, observer_main, &o);
		wait_count(&ready, k);
		atomic_store(&go, 1);
		/* the originals go in the same burst */
		CHECK_EQ(pp_close(e[1]), 0);
		CHECK_EQ(pp_close(e[0]), 0);
		unsigned long long want = 0;
		for (int i = 0; i < k; i++) {
			join_thread(th[i]);
			CHECK_EQ(d[i].rc, 0);
			want += d[i].wrote;
		}
		join_thread(ot);
		CHECK_EQ(o.err, 0);
		CHECK_EQ(o.total, want);
		t_progress();
		if (t_case_failed)
			break;
	}
}

int main(void)
{
	stress_start("stress_close_races");
	RUN(close_eof_race);
	RUN(close_epipe_race);
	RUN(close_eof_race_shared);
	RUN(close_epipe_race_shared);
	RUN(close_dup_race);
	RUN(nonblock_eof_race);
	RUN(nonblock_epipe_race);
	RUN(nonblock_eof_race_shared);
	RUN(nonblock_epipe_race_shared);
	RUN(nonblock_close_one_process);
	return T_DONE();
}
