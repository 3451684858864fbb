/*
 * crash_lock.c - a process stopped or killed while it holds a PP_SHARED
 * pipe's lock.
 *
 * The rule (docs/design.md section 13, "The lock"; pagepipe.h): a waiter
 * takes over the lock of a dead owner and mends the ring and page lists,
 * so the survivors never hang, a write of at most PP_PIPE_BUF bytes the
 * dead owner was making is seen whole or not at all, every byte of a write
 * that returned is delivered, and the pipe keeps working.  A lock held by
 * a live process for more than a second (stopped) makes the waiting call
 * fail with EIO; the pipe works again once the owner goes on.
 *
 * How the instant is hit: a reader R and two writers W0, W1 of small
 * records (16..80 bytes: the lock is taken often and held for a good part
 * of the time) share a pipe; the test process, which no longer holds the
 * pipe, maps its control memory read-only (found as /memfd:pagepipe-ctl in
 * /proc/self/fd before it closed its handles, layout from src/shm.h) and
 * stops W0 (SIGSTOP, then waits until it is stopped) at random instants
 * until the lock word names W0's holder record (its pid field says whose
 * it is).  Then W0 holds the lock and is frozen inside its call.
 *
 *   lock_holder_killed  ... and is killed (SIGKILL); R closes its write end
 *                      (it held both so far).  Within a bounded
 *                      wait the lock word stops naming W0 (recovered; the
 *                      time is printed), W1 goes on writing and R reading
 *                      (R gets W1's records written after the kill); then
 *                      W1 stops and closes, and R sees end of file and has
 *                      checked every record whole and in order, W0's up to
 *                      its last returned write (or one more), all of W1's.
 *                      pp_shared_stats, asked by R, then shows no page
 *                      held and R the one holder.  t_scaled_san(40) rounds, or
 *                      PP_SOAK_SECONDS of them.
 *   lock_holder_stopped  ... and stays stopped: R's and W1's calls fail
 *                      with EIO between 0.9 and 3 s after the stop (the
 *                      design's one-second bound; printed), nothing is
 *                      written twice or lost (W1 writes the record again
 *                      after EIO); R then closes its own write end (it
 *                      held both so far), which fails with EIO too but
 *                      closes the handle; after SIGCONT everyone goes on,
 *                      and at the end R sees end of file (its closed write
 *                      end no longer counts) with every record of both
 *                      writers.
 *   sleeper_counted_out_after_eio  a reader asleep when another process
 *                      takes the lock and stops gets EIO; once the owner
 *                      goes on, the process's next call counts the reader
 *                      out of the ring's and its holder's sleepers.
 *   peek_needs_no_lock pp_peek of a pipe holding data returns it at once
 *                      while a stopped process holds the lock; pp_consume
 *                      fails with EIO, and works once the owner goes on.
 */
#include "crash.h"
#include "end.h"
#include "shm.h"

#define ROUNDS_KILLED 40
#define ROUNDS_STOPPED 1

struct share {
	atomic_long returned[2];
	atomic_int stop;          /* writers: finish and close */
	atomic_long got[2];       /* R: records read per writer */
	atomic_int bad, eof;      /* R: a bad record; end of file seen */
	atomic_int r_eio, w_eio;  /* EIO seen by R, by W1 */
	double r_eio_at, w_eio_at;
	atomic_long r_holders, r_held; /* R's pp_shared_stats at the end */
	atomic_int close_now;     /* R: close your write end now ... */
	atomic_int close_done, close_errno; /* ... done: pp_close's errno (0: success) */
	struct cr_lat recover, eio;
};

static struct share *sh;
static struct cr_stream stream;

/* The pipe's control memory, mapped read-only from a descriptor of ours. */
struct ctl_view {
	void *base;
	size_t size;
};

static bool ctl_find(struct ctl_view *cv)
{
	for (int fd = 0; fd < 1024; fd++) {
		char path[64], link[256];
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, link, sizeof link - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (strncmp(link, "/memfd:pagepipe-ctl", 19) != 0)
			continue;
		int mine = open(path, O_RDONLY | O_CLOEXEC);
		if (mine < 0)
			return false;
		cv->size = PPI_SHM_PAGES_OFF;
		cv->base = mmap(NULL, cv->size, PROT_READ, MAP_SHARED, mine, 0);
		close(mine);
		return cv->base != MAP_FAILED;
	}
	return false;
}

/* The pid whose holder record owns the lock now, 0 if free. */
static pid_t lock_owner(struct ctl_view *cv)
{
	const struct ppi_shm_hdr *hdr = cv->base;
	uint32_t w = atomic_load(&((struct ppi_shm_hdr *)hdr)->lock) & ~PPI_LOCK_FLAGS;
	if (!w || w > PPI_SHM_HOLDERS)
		return 0;
	struct ppi_shm_holder *hs =
	        (struct ppi_shm_holder *)((unsigned char *)cv->base + PPI_SHM_HOLDERS_OFF);
	return (pid_t)atomic_load(&hs[w - 1].pid);
}

/* One record built in place: pp_reserve (or, with a reservation left by a
 * commit that failed with EIO, the pages it still holds), pp_commit.
 * Returns as pp_write; on EIO nothing went in and *held keeps the pages
 * reserved, the record in them, for the next try. */
static ssize_t write_in_place(struct pp_end *w, uint32_t id, uint32_t seq, uint32_t len,
                              bool *held)
{
	if (!*held) {
		struct iovec iov[2];
		ssize_t k = pp_reserve(w, iov, 2, len);
		if (k < 1)
			return k;
		cr_make(iov[0].iov_base, id, seq, len);
		*held = true;
	}
	ssize_t n = pp_commit(w, len);
	if (n >= 0 || errno != EIO)
		*held = false;
	return n;
}

/* A writer of small records; every other record is made in place
 * (pp_reserve, pp_commit), so the lock is also held, and the owner
 * frozen, inside those. */
__attribute__((noreturn)) static void writer(struct pp_end *w, uint32_t id)
{
	unsigned char rec[128];
	double until = t_now() + 60;
	bool held = false;
	uint32_t len = 0; /* the record's, kept when it is tried again */
	for (uint32_t seq = 0; !atomic_load(&sh->stop) && t_now() < until;) {
		if (!len)
			len = (uint32_t)(sizeof(struct cr_rec) + cr_below(65));
		ssize_t n;
		if (seq % 2) {
			n = write_in_place(w, id, seq, len, &held);
		} else {
			cr_make(rec, id, seq, len);
			n = pp_write(w, rec, len);
		}
		if (n == -1 && errno == EIO) {
			if (!atomic_exchange(&sh->w_eio, 1))
				sh->w_eio_at = t_now();
			continue; /* nothing went in: the same record again */
		}
		if (n != (ssize_t)len) {
			fprintf(stderr, "writer %u: %s = %zd (errno %d)\n", id,
			        seq % 2 ? "pp_reserve/pp_commit" : "pp_write", n, errno);
			_exit(3);
		}
		len = 0;
		atomic_store(&sh->returned[id], (long)++seq);
	}
	pp_close(w);
	_exit(0);
}

__attribute__((noreturn)) static void reader(struct pp_end *r, struct pp_end *w)
{
	cr_alarm_handler();
	memset(&stream, 0, sizeof stream);
	for (;;) {
		if (w && atomic_load(&sh->close_now)) {
			errno = 0;
			int rc = pp_close(w);
			atomic_store(&sh->close_errno, rc ? errno : 0);
			atomic_store(&sh->close_done, 1);
			w = NULL;
		}
		alarm(10);
		ssize_t n = pp_read(r, stream.buf + stream.have, 4096);
		if (n == -1 && errno == EIO) {
			if (!atomic_exchange(&sh->r_eio, 1))
				sh->r_eio_at = t_now();
			continue;
		}
		if (n < 0) {
			fprintf(stderr, "reader: pp_read: errno %d\n", errno);
			_exit(3);
		}
		if (n == 0)
			break;
		stream.have += (size_t)n;
		bool ok = cr_parse(&stream, 2);
		for (int w = 0; w < 2; w++)
			atomic_store(&sh->got[w], stream.next[w]);
		if (!ok) {
			atomic_store(&sh->bad, 1);
			_exit(4);
		}
	}
	alarm(0);
	atomic_store(&sh->eof, 1);
	if (stream.have) {
		fprintf(stderr, "reader: %zu bytes of a torn record at end of file\n", stream.have);
		atomic_store(&sh->bad, 1);
	}
	struct pp_shared_stats st;
	if (pp_shared_stats(r, &st) == 0) {
		atomic_store(&sh->r_holders, st.holders);
		atomic_store(&sh->r_held, st.pages_held);
	}
	pp_close(r);
	_exit(0);
}

/* What the pipe's memory says of its ends and holders (when a check
 * failed). */
static void dump(struct ctl_view *cv)
{
	struct ppi_ring *r = (struct ppi_ring *)((unsigned char *)cv->base + PPI_SHM_RING_OFF);
	struct ppi_shm_holder *hs =
	        (struct ppi_shm_holder *)((unsigned char *)cv->base + PPI_SHM_HOLDERS_OFF);
	fprintf(stderr, "  ring: handles %u/%u, sleepers %u/%u, head %u tail %u, lock %#x\n",
	        atomic_load(&r->handles[0]), atomic_load(&r->handles[1]), r->sleepers[0],
	        r->sleepers[1], atomic_load(&r->head), atomic_load(&r->tail),
	        atomic_load(&((struct ppi_shm_hdr *)cv->base)->lock));
	for (unsigned h = 0; h < 16; h++)
		if (atomic_load(&hs[h].state))
			fprintf(stderr, "  holder %u: state %u pid %u handles %u %u sleepers %u %u\n", h,
			        atomic_load(&hs[h].state), atomic_load(&hs[h].pid),
			        atomic_load(&hs[h].handles[0]), atomic_load(&hs[h].handles[1]),
			        atomic_load(&hs[h].sleepers[0][0]), atomic_load(&hs[h].sleepers[0][1]));
}

/* Wait (bounded) until pid has stopped. */
static bool stopped(pid_t pid)
{
	double until = t_now() + 5;
	int st;
	while (t_now() < until) {
		pid_t r = waitpid(pid, &st, WUNTRACED | WNOHANG);
		if (r == pid && WIFSTOPPED(st))
			return true;
		if (r == pid)
			return false; /* it ended */
		cr_sleep_us(50);
	}
	return false;
}

/* A pipe, R, W0 and W1, the test holding nothing but a view of the lock.
 * Then stop W0 until it holds the lock: true with W0 stopped there. */
struct round {
	pid_t r, w[2];
	struct ctl_view cv;
	long attempts;
};

static bool setup(struct round *rd, uint64_t salt)
{
	memset(rd, 0, sizeof *rd);
	atomic_store(&sh->stop, 0);
	for (int w = 0; w < 2; w++) {
		atomic_store(&sh->returned[w], 0);
		atomic_store(&sh->got[w], 0);
	}
	atomic_store(&sh->bad, 0);
	atomic_store(&sh->eof, 0);
	atomic_store(&sh->r_eio, 0);
	atomic_store(&sh->w_eio, 0);
	atomic_store(&sh->close_now, 0);
	atomic_store(&sh->close_done, 0);
	atomic_store(&sh->close_errno, -1);
	atomic_store(&sh->r_holders, -1);
	atomic_store(&sh->r_held, -1);
	struct pp_end *e[2];
	if (pp_pipe(e, PP_SHARED) != 0)
		return false;
	CHECK(ctl_find(&rd->cv));
	rd->r = fork();
	if (rd->r == 0)
		reader(e[0], e[1]);
	for (int w = 0; w < 2; w++) {
		rd->w[w] = fork();
		if (rd->w[w] == 0) {
			cr_reseed(salt * 3 + (uint64_t)w + 1);
			pp_close(e[0]);
			writer(e[1], (uint32_t)w);
		}
	}
	CHECK(pp_close(e[0]) == 0);
	CHECK(pp_close(e[1]) == 0);
	if (!rd->cv.base || rd->cv.base == MAP_FAILED)
		return false;
	double until = t_now() + 10;
	while (t_now() < until) {
		cr_sleep_us((long)cr_below(300));
		kill(rd->w[0], SIGSTOP);
		if (!stopped(rd->w[0]))
			return false;
		rd->attempts++;
		if (lock_owner(&rd->cv) == rd->w[0])
			return true;
		kill(rd->w[0], SIGCONT);
	}
	fprintf(stderr, "  W0 never held the lock when stopped (%ld tries)\n", rd->attempts);
	return false;
}

/* Let the writers finish, R read to the end; check what R got. */
static void finish(struct round *rd, bool w0_dead)
{
	long at_kill1 = atomic_load(&sh->returned[1]);
	/* W1 and R go on: wait (bounded) for R to get W1's later records. */
	double until = t_now() + 10;
	while (atomic_load(&sh->got[1]) <= at_kill1 + 10 && t_now() < until && !atomic_load(&sh->bad))
		cr_sleep_us(1000);
	CHECK(atomic_load(&sh->got[1]) > at_kill1 + 10);
	atomic_store(&sh->stop, 1);
	for (int w = w0_dead ? 1 : 0; w < 2; w++)
		CHECK(cr_reap_ok(rd->w[w], 10));
	until = t_now() + 10;
	while (!atomic_load(&sh->eof) && t_now() < until)
		cr_sleep_us(1000);
	if (!atomic_load(&sh->eof))
		dump(&rd->cv);
	CHECK(cr_reap_ok(rd->r, 10));
	CHECK(atomic_load(&sh->eof));
	CHECK(!atomic_load(&sh->bad));
	long ret0 = atomic_load(&sh->returned[0]), got0 = atomic_load(&sh->got[0]);
	long ret1 = atomic_load(&sh->returned[1]), got1 = atomic_load(&sh->got[1]);
	if (w0_dead)
		CHECK(got0 == ret0 || got0 == ret0 + 1);
	else
		CHECK_EQ(got0, ret0);
	CHECK_EQ(got1, ret1);
	CHECK_EQ(atomic_load(&sh->r_holders), 1);
	CHECK_EQ(atomic_load(&sh->r_held), 0);
	munmap(rd->cv.base, rd->cv.size);
}

static void lock_holder_killed(void)
{
	cr_seed("lock_holder_killed");
	long rounds = t_scaled_san(ROUNDS_KILLED), attempts = 0;
	if (t_valgrind())
		rounds = rounds / 4 + 1;
	double soak = cr_soak_seconds(), t0 = t_now();
	long round;
	for (round = 0; round < rounds || t_now() - t0 < soak; round++) {
		struct round rd;
		bool held = setup(&rd, (uint64_t)round);
		CHECK(held);
		attempts += rd.attempts;
		if (!held) {
			atomic_store(&sh->stop, 1);
			for (int i = 0; i < 2; i++)
				kill(rd.w[i], SIGKILL), cr_reap(rd.w[i], 10, NULL);
			cr_reap(rd.r, 10, NULL);
			return;
		}
		atomic_store(&sh->close_now, 1);
		kill(rd.w[0], SIGKILL);
		double killed = t_now();
		int status = 0;
		CHECK(cr_reap(rd.w[0], 10, &status));
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		/* The lock must leave the dead: a survivor takes it over. */
		while (lock_owner(&rd.cv) == rd.w[0] && t_now() - killed < 5)
			cr_sleep_us(100);
		double took = t_now() - killed;
		CHECK(took < 1.0);
		cr_lat_add(&sh->recover, took);
		finish(&rd, true);
		t_progress();
	}
	fprintf(stderr, "  %ld rounds, %ld stops to find W0 holding the lock\n", round, attempts);
	double max = cr_lat_report(&sh->recover, "a dead owner's lock taken over after its kill");
	CHECK(max < 1.0);
}

static void lock_holder_stopped(void)
{
	cr_seed("lock_holder_stopped");
	long rounds = t_scaled(ROUNDS_STOPPED);
	for (long round = 0; round < rounds; round++) {
		struct round rd;
		bool held = setup(&rd, (uint64_t)round + 1000);
		CHECK(held);
		if (!held) {
			atomic_store(&sh->stop, 1);
			for (int i = 0; i < 2; i++)
				kill(rd.w[i], SIGKILL), cr_reap(rd.w[i], 10, NULL);
			cr_reap(rd.r, 10, NULL);
			return;
		}
		double at = t_now();
		double until = at + 5;
		while ((!atomic_load(&sh->r_eio) || !atomic_load(&sh->w_eio)) && t_now() < until)
			cr_sleep_us(1000);
		CHECK(atomic_load(&sh->r_eio) && atomic_load(&sh->w_eio));
		/* R closes its write end now: the close cannot have the lock
		 * either (EIO), yet closes the handle, and once the lock is free
		 * again the end must count as closed (or R never sees EOF). */
		atomic_store(&sh->close_now, 1);
		until = t_now() + 5;
		while (!atomic_load(&sh->close_done) && t_now() < until)
			cr_sleep_us(1000);
		CHECK(atomic_load(&sh->close_done));
		CHECK_EQ(atomic_load(&sh->close_errno), EIO);
		double r_lat = sh->r_eio_at - at, w_lat = sh->w_eio_at - at;
		fprintf(stderr, "  lock owner stopped: EIO after %.0f ms (reader), %.0f ms (writer)\n",
		        r_lat * 1e3, w_lat * 1e3);
		CHECK(r_lat > 0.9 && r_lat < 3);
		CHECK(w_lat > 0.9 && w_lat < 3);
		kill(rd.w[0], SIGCONT);
		t_progress();
		finish(&rd, false);
	}
}

/* A reader asleep on an empty pipe when another process takes the lock and
 * stops: the reader's sleep ends (its 50 ms look), the relock fails with
 * EIO after the one-second bound, and so does the read.  The count of it
 * as a sleeper, in the ring and in its holder record, cannot be taken back
 * without the lock; it must be at the process's next lock, or every later
 * call that adds data pays a futex wake for a sleeper that is gone. */
static void sleeper_counted_out_after_eio(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	struct ppi_shm *v = e[0]->shm;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct ppi_shm *cv = e[0]->shm; /* the child's view, its own holder */
		double until = t_now() + 10;
		while (!__atomic_load_n(&cv->ring->sleepers[PPI_READ], __ATOMIC_RELAXED) &&
		       t_now() < until)
			cr_sleep_us(100);
		if (ppi_shm_lock(cv))
			_exit(1);
		raise(SIGSTOP); /* the reader's relock now waits on a live owner */
		ppi_shm_unlock(cv);
		pp_close(e[0]);
		pp_close(e[1]);
		_exit(0);
	}
	CHECK(pid > 0);
	char c;
	CHECK_ERR(pp_read(e[0], &c, 1), EIO);
	struct ppi_shm_holder *ho = &ppi_shm_holders(v)[v->m->holder];
	kill(pid, SIGCONT);
	CHECK(cr_reap_ok(pid, 10));
	CHECK_EQ(pp_write(e[1], "x", 1), 1); /* the next lock counts it out */
	CHECK_EQ(v->ring->sleepers[PPI_READ], 0u);
	CHECK_EQ(atomic_load(&ho->sleepers[0][PPI_READ]), 0u);
	CHECK_EQ(pp_read(e[0], &c, 1), 1);
	CHECK_EQ(c, 'x');
	pp_close(e[0]);
	pp_close(e[1]);
}

/* pp_peek of a shared ring takes no lock when there is data (splice.c's
 * peek_unlocked): with the lock held by a stopped process it returns the
 * bytes at once, where pp_consume, which needs the lock, fails with EIO
 * after the one-second bound; once the owner goes on, consume works. */
static void peek_needs_no_lock(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	CHECK_EQ(pp_write(e[1], "hello", 5), 5);
	int locked[2];
	CHECK_EQ(pipe(locked), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(locked[0]);
		if (ppi_shm_lock(e[0]->shm))
			_exit(1);
		if (write(locked[1], "L", 1) != 1)
			_exit(2);
		raise(SIGSTOP);
		ppi_shm_unlock(e[0]->shm);
		pp_close(e[0]);
		pp_close(e[1]);
		_exit(0);
	}
	CHECK(pid > 0);
	close(locked[1]);
	char c;
	CHECK_EQ(read(locked[0], &c, 1), 1);
	close(locked[0]);
	struct iovec iov[4];
	double t0 = t_now();
	ssize_t n = pp_peek(e[0], iov, 4);
	double took = t_now() - t0;
	CHECK_EQ(n, 1);
	CHECK(took < (t_valgrind() ? 1.0 : 0.1));
	CHECK(n == 1 && iov[0].iov_len == 5 && memcmp(iov[0].iov_base, "hello", 5) == 0);
	CHECK_ERR(pp_consume(e[0], 5), EIO);
	kill(pid, SIGCONT);
	CHECK(cr_reap_ok(pid, 10));
	CHECK_EQ(pp_consume(e[0], 5), 5);
	CHECK_EQ(pp_nread(e[0]), 0);
	pp_close(e[0]);
	pp_close(e[1]);
}

int main(void)
{
	sh = cr_shared(sizeof *sh);
	RUN(lock_holder_killed);
	RUN(lock_holder_stopped);
	RUN(sleeper_counted_out_after_eio);
	RUN(peek_needs_no_lock);
	return T_DONE();
}
