/*
 * wait.c - waiting and waking: how a call waits for its side of a ring,
 * and what it owes the other threads when it has changed the ring.
 *
 * Readers sleep only while the pipe is empty and a writer exists; writers
 * only while every slot is used and a reader exists.  Each side has a futex
 * word (seq) and a count of sleepers, both under the ring lock:
 *
 *   waiter, lock held, condition false      waker, lock held, condition made true
 *     drop lock; spin on lock-free hints       if sleepers[side]: seq[side]++
 *     retake lock; recheck                     drop lock
 *     s = seq[side]; sleepers[side]++           futex_wake(&seq[side])
 *     drop lock; futex_wait(&seq[side], s)
 *     retake lock; sleepers[side]--
 *
 * No wakeup is lost (the waiter reads seq and counts itself under the lock
 * the waker bumps it under), and a waker that finds no sleeper makes no
 * system call.  Who wakes whom is Linux's rule set with exclusive wakeups,
 * applied in one place, ppi_call_settle (and ppi_call_push for the one
 * wake a push owes); docs/design.md section 4 gives the reasons.
 *
 * Every call that locks a ring carries a struct ppi_call for it, collects
 * there under the lock what it owes, and pays after dropping the lock
 * (ppi_call_unlock); ppi_result then raises SIGPIPE and sets errno.  The
 * descriptors of pp_fd() are kept in step here too: waking a poller is
 * waking.
 */
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include "call.h"

/* ---- what a call owes -------------------------------------------------- */

/* Under the lock: if what side's sleepers wait for holds now (data, or
 * room), owe n of them a wake.  True if it holds. */
bool ppi_call_pass(struct ppi_call *c, int side, int n)
{
	struct ppi_ring *r = c->r;
	bool holds = side == PPI_READ ? LOAD(r->head) != LOAD(r->tail) : !ppi_ring_full(r);
	if (holds)
		ppi_call_owe(c, side, n);
	return holds;
}

/*
 * The wake rules, applied by ppi_call_settle under the lock once a call
 * has done its work:
 *   - a consumer that freed a slot of a full ring wakes one writer (inline
 *     in ppi_call_settle);
 *   - a thread that slept on a side and leaves its condition still true
 *     (data left, room left) passes the wake on to the next sleeper:
 *     sleepers are woken one at a time, as Linux's exclusive waits are, and
 *     this chain replaces a wake-all without losing anyone (here);
 *   - a push into an empty ring wakes one reader (ppi_call_push);
 *   - closing a side and growing the ring wake everyone: their callers owe
 *     INT_MAX.
 */
void ppi_call_settle_waited(struct ppi_call *c)
{
	for (int side = 0; side < 2; side++)
		if (c->waited[side])
			ppi_call_pass(c, side, 1);
}

void ppi_call_wake_slow(struct ppi_call *c)
{
	for (int side = 0; side < 2; side++) {
		if (c->wake[side] && c->shm)
			ppi_futex_wake_shared(&c->r->seq[side], c->wake[side]);
		else if (c->wake[side])
			ppi_futex_wake(&c->r->seq[side], c->wake[side]);
		c->wake[side] = 0;
	}
}

/* ---- shared rings -------------------------------------------------------- */

/*
 * Take a shared ring's lock and check what the ring code will use (shm.c).
 * Every 100 ms or so, also look whether the other side is gone in every
 * process (its token hung up), and if so reap the dead holders now, so that
 * a pipe whose readers were killed gives its writer EPIPE even when the
 * writer never has to wait.  Sides the reaping closed wake the other
 * side's sleepers.
 */
int ppi_call_lock_shared(struct ppi_call *c)
{
	struct ppi_shm *v = c->shm;
	int err = ppi_shm_lock(v);
	if (err)
		return err;
	if ((err = ppi_shm_ring_check(v, &c->bufs, &c->mask))) {
		ppi_shm_unlock(v);
		return err;
	}
	if (unlikely(LOAD(v->m->deferred)))
		ppi_shm_deferred_put(v);
	if (unlikely(LOAD(v->m->unclosed)))
		ppi_shm_unclosed_put(v);
	if (unlikely(LOAD(v->unslept[PPI_READ]) | LOAD(v->unslept[PPI_WRITE])))
		ppi_shm_unslept_put(v);
	unsigned closed = ppi_shm_look(v, false);
	for (int side = 0; side < 2; side++)
		if (closed & (1u << side))
			ppi_call_owe(c, 1 - side, INT_MAX);
	return 0;
}

/*
 * Under the lock, before a non-blocking call fails with EAGAIN: has `side`
 * gone in every process?  A shared ring's other side may have died without
 * closing (exit, kill, exec) since the last look at its token, which
 * ppi_shm_look makes only every 50 ms; a kernel pipe would report end of
 * file or EPIPE at once, and an event loop woken by pp_fd's hang-up would
 * otherwise spin on EAGAIN until that look.  So look now (one poll; EAGAIN
 * is the slow path) and reap.  Always false for a private ring.
 */
bool ppi_call_side_gone_now(struct ppi_call *c, int side)
{
	if (!c->shm)
		return false;
	unsigned closed = ppi_shm_look(c->shm, true);
	for (int s = 0; s < 2; s++)
		if (closed & (1u << s))
			ppi_call_owe(c, 1 - s, INT_MAX);
	return !LOAD(c->r->handles[side]);
}

/* pp_fd's descriptors of a shared ring. */
void ppi_call_settle_shared(struct ppi_call *c)
{
	struct ppi_shm_rx *rx = c->shm->rx;
	if (unlikely(LOAD(rx->fd_used[PPI_READ]) | LOAD(rx->fd_used[PPI_WRITE])))
		ppi_shm_token_update(c->shm, c->added);
}

/* A shared ring's buffers are pages of its memory; they go back under the
 * lock. */
void ppi_call_put_slow(struct ppi_call *c, uint32_t flags, const uint32_t *pages, unsigned n)
{
	(void)flags; /* always PPI_KIND_ANON (ppi_shm_buf_ok) */
	ppi_shm_pages_put(c->shm, pages, n);
}

/* A shared ring's sleeper, counted in the ring and in our holder record
 * (so that reaping can take the count back if we die asleep). */
static void shared_sleepers(struct ppi_call *c, int side, int n)
{
	struct ppi_shm *v = c->shm;
	struct ppi_shm_holder *ho = &ppi_shm_holders(v)[v->m->holder];
	c->r->sleepers[side] += (uint32_t)n;
	_Atomic uint32_t *mine = &ho->sleepers[v->ri][side];
	atomic_store_explicit(mine, LOAD(*mine) + (uint32_t)n, RELAXED);
}

/*
 * Sleep on a shared ring's side, lock held on entry and on return (0,
 * EINTR, or EIO when the lock could not be had back).  The sleep ends at
 * a wake, a handled signal (as on a private ring: see ppi_futex_wait_until),
 * or after 100 ms, when the sleeper looks whether the other side is gone
 * and reaps the dead; the caller then rechecks and may sleep again.
 */
static int shared_sleep(struct ppi_call *c, int side, bool moved)
{
	struct ppi_ring *r = c->r;
	uint32_t seq = LOAD(r->seq[side]);
	shared_sleepers(c, side, 1);
	ppi_call_drop(c);
	struct timespec at;
	uint64_t t = ppi_now_ns() + 50000000ull;
	at.tv_sec = (time_t)(t / 1000000000ull);
	at.tv_nsec = (long)(t % 1000000000ull);
	int err = ppi_futex_wait_until(&r->seq[side], seq, &at, moved);
	int lock_err = ppi_call_relock(c);
	if (lock_err) {
		/* Not ours to change without the lock: the next lock does. */
		atomic_fetch_add_explicit(&c->shm->unslept[side], 1, RELAXED);
		return lock_err;
	}
	shared_sleepers(c, side, -1);
	if (err == ETIMEDOUT) {
		unsigned closed = ppi_shm_look(c->shm, true);
		for (int s = 0; s < 2; s++)
			if (closed & (1u << s))
				ppi_call_owe(c, 1 - s, INT_MAX);
		return 0;
	}
	return err == EINTR ? EINTR : 0;
}

ssize_t ppi_result_fail(int err, bool sigpipe, int fl)
{
	if (sigpipe && !(fl & PP_NOSIGPIPE))
		raise(SIGPIPE); /* in the calling thread, after the lock is dropped */
	if (!err)
		return 0;
	errno = err;
	return -1;
}

/* ---- waiting ----------------------------------------------------------- */

/*
 * A spinner's yield (see ppi_ring_spin) helps only when another thread is
 * runnable on its CPU, perhaps the one it waits for; otherwise it is a
 * system call for nothing, and in a VM a dear one (sched_yield took 1.2-1.4
 * us here, 64 pauses as long), during which the spinner does not look.  So
 * a yield that came straight back makes the next ones sparser, up to one
 * look in YIELD_SPARSE, and one that gave the CPU away (took longer than
 * YIELD_IDLE_NS) makes every look yield again.  Per thread: it describes
 * the CPU the thread runs on, not a ring.
 */
#define YIELD_IDLE_NS 5000
#define YIELD_SPARSE 4
static __thread unsigned yield_every = 1;

static void spin_yield(void)
{
	uint64_t t = ppi_now_ns();
	sched_yield();
	if (ppi_now_ns() - t < YIELD_IDLE_NS)
		yield_every = yield_every < YIELD_SPARSE ? yield_every * 2 : YIELD_SPARSE;
	else
		yield_every = 1;
}

/* Spin, without the lock and reading only, until side's condition looks
 * true or the spin budget is spent.  The pauses between looks grow, so as
 * not to keep stealing the cache line from the thread making progress.
 * Returns the pauses spent, or UINT_MAX when it gave up. */
unsigned ppi_ring_spin(struct ppi_ring *r, int side)
{
	/* The budget adapts per ring and side, as an adaptive mutex does: a
	 * spin that ends in data or room doubles it (up to ppi_spin_limit), one
	 * that gives up cuts it to an eighth (down to a sixty-fourth), so that
	 * under contention, where spins fail often, the budget stays small.
	 * When the CPUs are oversubscribed the thread we wait for is often not
	 * running, and a full-length spin only keeps it off the CPU: measured,
	 * streaming fell tenfold under load with a fixed 50 us spin.  And once
	 * the pauses are at their longest, each look also yields: the
	 * scheduler likes to put a waker and its wakee on one CPU, and then the
	 * thread we wait for can only run if we let it (measured: 1 MiB writes
	 * ran at 15 or at 4 GB/s from run to run without the yield, 15 every
	 * time with). */
	unsigned budget = LOAD(r->spin_budget[side]);
	if (budget > ppi_spin_limit)
		budget = ppi_spin_limit; /* a shared ring's word may say anything */
	unsigned spun = 0;
	bool ready = false;
	unsigned looks = 0;
	for (unsigned step = 1; spun < budget; spun += step) {
		for (unsigned i = 0; i < step; i++)
			ppi_cpu_relax();
		if ((ready = ppi_ring_ready(r, side)))
			break;
		if (step < 64)
			step <<= 1;
		else if (++looks % yield_every == 0)
			spin_yield();
	}
	unsigned next = ready ? budget * 2 : budget / 8;
	if (next > ppi_spin_limit)
		next = ppi_spin_limit;
	if (next < ppi_spin_limit / 64)
		next = ppi_spin_limit / 64;
	if (next != budget)
		atomic_store_explicit(&r->spin_budget[side], next, RELAXED);
	return ready ? spun : UINT_MAX;
}

/*
 * After a sleep of ns that ended in a wake: had the spin lasted that long
 * it would have caught the change and saved the sleep and the wake-up, so
 * when ns is within the spin limit, let the next spin last twice as long.
 * Without this the budget only grows from spins that succeed, and a pair
 * handing the ring over whole (a 64 KiB write into a 64 KiB pipe, the
 * reader draining it at once) had it cut to the floor, below the ~7 us the
 * writer takes, where no spin ever succeeds again: two context switches
 * per 64 KiB, a third of the speed, from then on (measured between
 * processes: 2.2 GB/s with it stuck, 11 GB/s when it was not).  The time
 * includes the wake-up's own latency, so it overestimates what the spin
 * would have needed; the halving on failure corrects that.
 */
static void spin_learn(struct ppi_ring *r, int side, uint64_t ns)
{
	if (ns >= ppi_spin_ns)
		return;
	uint64_t want = 2 * ns * ppi_spin_limit / ppi_spin_ns;
	if (want > ppi_spin_limit)
		want = ppi_spin_limit;
	if (want > LOAD(r->spin_budget[side]))
		atomic_store_explicit(&r->spin_budget[side], (unsigned)want, RELAXED);
}

/*
 * Wait, with the lock held, until side's condition may hold; returns with
 * the lock held, 0 or EINTR.  What the call owes so far goes out first (a
 * writer that filled the pipe must let readers at it before it sleeps).
 * moved: the caller has already moved bytes, so any handled signal must end
 * the wait (see ppi_futex_wait_intr).  On success the call is marked as
 * having slept on side, so that it passes the wake on when it settles, and
 * a consumer notes the ring's fullness afresh.
 */
int ppi_call_wait(struct ppi_call *c, int side, bool moved)
{
	struct ppi_ring *r = c->r;
	int err;
	ppi_call_pollers(c); /* pollers hear of what we did before we sleep */
	ppi_call_drop(c);
	ppi_call_wake(c);
	ppi_ring_spin(r, side);
	if ((err = ppi_call_relock(c)))
		return err;
	if (!ppi_ring_ready(r, side)) {
		uint64_t slept = ppi_spin_ns ? ppi_now_ns() : 0;
		if (c->shm) {
			err = shared_sleep(c, side, moved);
		} else {
			uint32_t seq = LOAD(r->seq[side]);
			r->sleepers[side]++;
			ppi_unlock(&r->lock);
			err = moved ? ppi_futex_wait_intr(&r->seq[side], seq)
			            : ppi_futex_wait(&r->seq[side], seq);
			ppi_call_relock(c); /* a private ring's lock cannot fail */
			r->sleepers[side]--;
		}
		if (err)
			return err;
		if (slept)
			spin_learn(r, side, ppi_now_ns() - slept);
	}
	c->waited[side] = true;
	if (c->consumer)
		c->was_full = ppi_ring_full(r);
	return 0;
}

/*
 * Under the lock: wait while the pipe is empty and has a writer, for the
 * calls that need data but are not pp_read (peek, splice to a descriptor).
 * 0 when there is data or end of file, EAGAIN if nonblock, EINTR.
 */
int ppi_call_wait_data(struct ppi_call *c, bool nonblock)
{
	struct ppi_ring *r = c->r;
	while (LOAD(r->head) == LOAD(r->tail) && LOAD(r->handles[PPI_WRITE])) {
		if (nonblock)
			return ppi_call_side_gone_now(c, PPI_WRITE) ? 0 : EAGAIN;
		int err = ppi_call_wait(c, PPI_READ, false);
		if (err)
			return err;
	}
	return 0;
}

/* ---- pp_fd's descriptors ----------------------------------------------- */

/* Tell pp_fd() users, under the lock, what changed.  The eventfd of a side
 * has a non-zero counter exactly while that side is ready; every write that
 * adds data signals the read side again so edge-triggered epoll sees it. */
void ppi_ring_efd_update_slow(struct ppi_ring *r, bool data_added)
{
	for (int side = 0; side < 2; side++) {
		int fd = r->efd[side];
		if (fd < 0)
			continue;
		bool ready = ppi_ring_ready(r, side);
		if (ready && (!r->efd_ready[side] || (side == PPI_READ && data_added))) {
			uint64_t one = 1;
			if (write(fd, &one, sizeof one) == sizeof one)
				r->efd_ready[side] = true;
		} else if (!ready && r->efd_ready[side]) {
			uint64_t v;
			if (read(fd, &v, sizeof v) == sizeof v)
				r->efd_ready[side] = false;
		}
	}
}
