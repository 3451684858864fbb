/*
 * call.h - what a call on a ring carries (struct ppi_call), and the ring
 * operations that need it: locking, the slots, pages, waiting and waking.
 *
 * Every call that locks a ring carries one of these for it.  Under the
 * lock it collects what the call owes other threads, as Linux's
 * wakeup_pipe_readers/writers do: ppi_call_owe marks sleepers of a side to
 * be woken, ppi_call_push owes the wake a push into an empty ring owes,
 * ppi_call_wait records that the call slept, and ppi_call_settle applies
 * the wake rules to all that and refreshes pp_fd's descriptors.  After the
 * lock is dropped ppi_call_wake sends the wakes.  ppi_call_unlock does
 * settle, unlock and wake, in that order; ppi_result ends the call
 * (SIGPIPE, errno).  The wakes are the only futex wakes of the ring's
 * sequence words in the library.
 *
 * The call also knows whether its ring is private or shared (shm, from the
 * caller's handle: process-local, never read from shared memory), and
 * holds what the ring code must not read twice from a shared ring: the
 * slot array and its mask, checked when the lock was taken.  The helpers
 * here dispatch on shm, so ring.c, wait.c and the splice files are one
 * code for both kinds of ring; a private ring pays a predictable branch.
 */
#ifndef PPI_CALL_H
#define PPI_CALL_H

#include "shm.h"

struct ppi_call {
	struct ppi_ring *r;
	struct ppi_shm *shm;  /* NULL: a private ring */
	struct ppi_buf *bufs; /* the slot array, and its mask, as of the lock */
	uint32_t mask;
	bool consumer;  /* takes data out: freeing room in a full ring wakes a writer */
	bool was_full;  /* consumers: the ring was full when last locked or woken */
	bool waited[2]; /* slept for this side: passes the wake on if it still holds */
	bool added;     /* data went in: signal the read side's pp_fd again */
	int wake[2];    /* sleepers to wake per side once unlocked: 0, 1 or INT_MAX */
};

/* The slow parts, out of line in wait.c. */
void ppi_call_settle_waited(struct ppi_call *c);
void ppi_call_settle_shared(struct ppi_call *c);
void ppi_call_wake_slow(struct ppi_call *c);
int ppi_call_lock_shared(struct ppi_call *c);
ssize_t ppi_result_fail(int err, bool sigpipe, int fl);
bool ppi_call_pass(struct ppi_call *c, int side, int n);
int ppi_call_wait(struct ppi_call *c, int side, bool moved);
int ppi_call_wait_data(struct ppi_call *c, bool nonblock);
bool ppi_call_side_gone_now(struct ppi_call *c, int side);
void ppi_call_put_slow(struct ppi_call *c, uint32_t flags, const uint32_t *pages, unsigned n);
/* Under the lock: the bytes the slots hold, counted the long way (for the
 * invariant checks of the sanitizer builds). */
uint32_t ppi_call_sum(struct ppi_call *c);

/* ---- locking ------------------------------------------------------------ */

static inline void ppi_call_start(struct ppi_call *c, struct ppi_ring *r, struct ppi_shm *shm,
                                  bool consumer)
{
	*c = (struct ppi_call){ .r = r, .shm = shm, .consumer = consumer };
}

/* Lock the call's ring (again): 0, or EIO for a shared ring whose lock
 * could not be had or whose memory is corrupt.  The slot array is looked
 * up afresh, as a resize may have moved it while the lock was dropped. */
static inline int ppi_call_relock(struct ppi_call *c)
{
	if (unlikely(c->shm))
		return ppi_call_lock_shared(c);
	struct ppi_ring *r = c->r;
	ppi_lock(&r->lock);
	c->bufs = ppi_ring_bufs(r);
	c->mask = r->ring_size - 1;
	return 0;
}

static inline int ppi_call_lock(struct ppi_call *c, struct ppi_ring *r, struct ppi_shm *shm,
                                bool consumer)
{
	ppi_call_start(c, r, shm, consumer);
	int err = ppi_call_relock(c);
	c->was_full = !err && consumer && ppi_ring_full(r);
	return err;
}

/* Drop the lock, nothing else (a call that goes on with it dropped). */
PPI_INLINE void ppi_call_drop(struct ppi_call *c)
{
	if (unlikely(c->shm))
		ppi_shm_unlock(c->shm);
	else
		ppi_unlock(&c->r->lock);
}

/* ---- slots and pages ------------------------------------------------------ */

/* Under the lock: slot i's buffer, copied out (a shared ring's memory may
 * change under us; only the copy is used) and, for a shared ring, checked.
 * An empty buffer is corrupt too: no call leaves one in the ring (a reader
 * empties a buffer and moves tail past it in one hold, and recovery drops
 * those a dead reader left), and one would read as end of file, or be
 * copied on as an empty packet.  false: the ring is corrupt (EIO). */
static inline bool ppi_call_buf(struct ppi_call *c, uint32_t i, struct ppi_buf *b)
{
	*b = c->bufs[i & c->mask];
	if (likely(!c->shm))
		return true;
	if (unlikely(!b->len)) {
		ppi_shm_corrupt(c->shm);
		return false;
	}
	return ppi_shm_buf_ok(c->shm, b);
}

/* Under the lock: store a slot's offset and length (its page and flags
 * stay), in one store. */
static inline void ppi_call_set_span(struct ppi_call *c, uint32_t i, struct ppi_buf b)
{
	__atomic_store_n(&c->bufs[i & c->mask].span, b.span, __ATOMIC_RELAXED);
}

static inline unsigned char *ppi_call_addr(struct ppi_call *c, uint32_t page)
{
	return unlikely(c->shm) ? ppi_shm_page(c->shm, page) : ppi_page_addr(page);
}

/*
 * How many of pages[0..n) lie one after another in memory from pages[0]'s
 * address on (at least 1): one copy then covers them.  Not for fewer
 * calls: when another CPU has read lines of a page (the reader of the
 * bytes it held before), a copy into it waits for those lines at its
 * start, and copies of a page each wait once a page; one copy across the
 * run overlaps the waits.  Measured between two processes, a writer
 * filling 8 pages a reader had read: 12.8 GB/s page by page, 19 GB/s in
 * one copy (and 16 against 44 GB/s when the reader had looked at only the
 * first and last line of each page).  A shared memory's pages are one
 * mapping, and its allocator hands drained pages back in the order they
 * were drained (ppi_shm_pages_put) and hands a batch out sorted by address
 * (ppi_shm_pages_get, and the pool's ppi_page_get_many), so a writer's
 * batch, and a reservation (ppi_resv_iov), is mostly runs of a few pages.
 */
static inline unsigned ppi_call_run(struct ppi_call *c, const uint32_t *pages, unsigned n)
{
	unsigned char *first = ppi_call_addr(c, pages[0]);
	unsigned run = 1;
	while (run < n && ppi_call_addr(c, pages[run]) == first + (size_t)run * PP_PAGE_SIZE)
		run++;
	return run;
}

/* Under the lock: is a shared ring's page named by other buffers too
 * (tee or fan-out between pipes of its memory)?  A reader copies such a
 * page under the lock: taken out of the ring and copied with the lock
 * dropped, it could go back to the memory, when the other buffers are
 * consumed, and be written over while we copy.  (A private ring's pages
 * are counted in the pool; the reader's reference keeps them.) */
static inline bool ppi_call_page_shared(struct ppi_call *c, uint32_t page)
{
	return unlikely(c->shm) && ppi_shm_page_refs(c->shm, page) > 1;
}

/* Under the lock: n more buffers name page (tee, fan-out). */
static inline void ppi_call_get(struct ppi_call *c, uint32_t flags, uint32_t page, uint32_t n)
{
	if (unlikely(c->shm))
		ppi_shm_pages_ref(c->shm, page, n);
	else
		ppi_buf_ops_of(flags)->get(page, n);
}

/* Up to n fresh pages for the ring, held by this call until pushed: how
 * many.  A shared ring's come from its own memory, under the lock. */
static inline unsigned ppi_call_pages(struct ppi_call *c, uint32_t *pages, unsigned n)
{
	return unlikely(c->shm) ? ppi_shm_pages_get(c->shm, pages, n) : ppi_page_get_many(pages, n);
}

/* Drop one reference each of buffers of kind `flags`.  A shared ring's
 * pages go back under the lock. */
static inline void ppi_call_put(struct ppi_call *c, uint32_t flags, const uint32_t *pages,
                                unsigned n)
{
	if (unlikely(c->shm))
		ppi_call_put_slow(c, flags, pages, n);
	else
		ppi_buf_ops_of(flags)->put(pages, n);
}

/* ---- waking ------------------------------------------------------------------ */

/* Under the lock: if anyone sleeps on side, move its sequence word so a
 * sleeper that has not reached the kernel yet will not go to sleep, and
 * owe n of them (1, or INT_MAX for all) a futex wake once the lock is
 * dropped. */
static inline void ppi_call_owe(struct ppi_call *c, int side, int n)
{
	struct ppi_ring *r = c->r;
	if (likely(!r->sleepers[side]))
		return;
	atomic_fetch_add_explicit(&r->seq[side], 1, RELAXED);
	if (c->wake[side] < n)
		c->wake[side] = n;
}

/* Put a buffer at head, under the lock.  Filling an empty pipe is the one
 * moment a reader may be asleep waiting for it: owe that wake.  A shared
 * ring's page is the ring's from now on. */
static inline void ppi_call_push(struct ppi_call *c, struct ppi_buf buf)
{
	struct ppi_ring *r = c->r;
	uint32_t head = LOAD(r->head);
	if (head == LOAD(r->tail))
		ppi_call_owe(c, PPI_READ, 1);
	if (unlikely(c->shm))
		ppi_shm_pages_mark(c->shm, &buf.page, 1, PPI_PAGE_RING);
	c->bufs[head & c->mask] = buf; /* unseen until head moves */
	ppi_ring_count(r, buf.len);
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
	c->added = true;
}

/* Most pages a writer fills outside the lock in one go. */
#define PPI_BATCH_MAX 64

/*
 * Pages one batch of a large write (or one pp_reserve) may fill before it
 * publishes them.  On a shared ring, half the capacity: a write as big as the pipe, copied
 * whole before it is published, hands the ring over whole (the reader
 * waits for the entire copy, then the writer for the entire read); in
 * halves the reader drains one while the writer fills the other.  Smaller
 * batches pipeline no better and take the lock more often, and the lock is
 * what costs between processes (its word moves between the CPUs at each
 * taking).  Measured between processes, default 64 KiB pipe, 64 KiB
 * writes (bench_procs -c '64 KiB', three alternating runs each): in
 * quarters 10.0-10.2 GB/s with pp_read, 11.4-12.1 with pp_peek; in halves
 * 10.8-12.6 and 13.8-14.6; whole, the pp_peek reader fell to 13-14.5
 * (a probe program, 2 GiB, against 16-18 in halves).  At 256 KiB halves
 * and quarters measured the same.  On a private ring the batching measured
 * no better (bench_core 64 KiB and 1 MiB, within the noise), so its batches
 * stay as large as the room allows.
 */
static inline unsigned ppi_call_batch(const struct ppi_call *c)
{
	if (!c->shm)
		return PPI_BATCH_MAX;
	uint32_t q = LOAD(c->r->max_usage) / 2;
	return q < 1 ? 1 : q > PPI_BATCH_MAX ? PPI_BATCH_MAX : q;
}

/* The flags of a fresh anonymous page a write pushes: a packet in packet
 * mode (fl has PP_PACKET), else a buffer later small writes may merge
 * into. */
static inline uint32_t ppi_call_write_flags(int fl)
{
	return ((fl & PP_PACKET) ? PPI_BUF_PACKET : PPI_BUF_CAN_MERGE) |
	       PPI_KIND_ANON << PPI_BUF_KIND_SHIFT;
}

/* Push a fresh anonymous page holding len bytes from its start, as a write
 * does (ppi_call_write_flags). */
static inline void ppi_call_push_page(struct ppi_call *c, uint32_t page, uint32_t len, int fl)
{
	ppi_call_push(c, (struct ppi_buf){
		.page = page,
		.offset = 0,
		.len = len,
		.flags = ppi_call_write_flags(fl),
	});
}

/* Under the lock: tell pp_fd() users what the call changed. */
PPI_INLINE void ppi_call_pollers(struct ppi_call *c)
{
	if (unlikely(c->shm))
		ppi_call_settle_shared(c);
	else
		ppi_ring_efd_update(c->r, c->added);
	c->added = false;
}

/* Under the lock, once the call has done its work: the wake rules (see
 * wait.c), then tell pp_fd() users what changed. */
PPI_INLINE void ppi_call_settle(struct ppi_call *c)
{
	/* A consumer that freed a slot of a full ring wakes one writer. */
	if (c->consumer && c->was_full && !ppi_ring_full(c->r))
		ppi_call_owe(c, PPI_WRITE, 1);
	if (unlikely(c->waited[PPI_READ] || c->waited[PPI_WRITE]))
		ppi_call_settle_waited(c);
	PPI_INVARIANT(c->shm || ppi_call_sum(c) == LOAD(c->r->bytes));
	ppi_call_pollers(c);
}

/* With the lock dropped: send the wakes owed. */
PPI_INLINE void ppi_call_wake(struct ppi_call *c)
{
	if (unlikely(c->wake[PPI_READ] || c->wake[PPI_WRITE]))
		ppi_call_wake_slow(c);
}

PPI_INLINE void ppi_call_unlock(struct ppi_call *c)
{
	ppi_call_settle(c);
	ppi_call_drop(c);
	ppi_call_wake(c);
}

/* How a call returns, once every lock is dropped: raise SIGPIPE if it met
 * a pipe with no reader (unless fl has PP_NOSIGPIPE), then -1 with errno
 * err, or ret when err is 0. */
static inline ssize_t ppi_result(ssize_t ret, int err, bool sigpipe, int fl)
{
	if (unlikely(err || sigpipe))
		return err ? ppi_result_fail(err, sigpipe, fl) : (ppi_result_fail(0, true, fl), ret);
	return ret;
}

/* ---- the ring's calls (ring.c), on a pipe named by (r, shm) ---------------- */

ssize_t ppi_ring_read(struct ppi_ring *r, struct ppi_shm *shm, int fl, struct ppi_iter *it);
ssize_t ppi_ring_write(struct ppi_ring *r, struct ppi_shm *shm, int fl, struct ppi_iter *it);
long ppi_ring_setsize(struct ppi_ring *r, struct ppi_shm *shm, size_t size);
/* Under the lock: consume the first n readable bytes (n <= what is there). */
int ppi_call_drop_bytes(struct ppi_call *c, size_t n);
/* Drop one handle of side of a private ring; true: free the ring. */
bool ppi_ring_drop_handle(struct ppi_ring *r, int side);

/* ---- the two-step write (reserve.c) -------------------------------------- */

/*
 * A write that fills pages with the lock dropped: pp_splice_from_fd reads
 * a descriptor into them, pp_reserve hands them to its caller until
 * pp_commit.  Locked, ppi_resv_room waits for room and ppi_resv_take
 * reserves that many slots (counted as used for every other writer, see
 * ppi_ring_room, so the pages always have room to go in) and, on a shared
 * ring, takes their pages; unlocked, ppi_resv_iov lays the pages out to be
 * filled (in runs of adjacent pages; a write's batch is copied by the same
 * layout); locked again, ppi_resv_slots(-k) frees the slots, ppi_resv_push
 * pushes the pages filled and ppi_resv_close gives back the rest and
 * unlocks.  Each is commented where it is defined.
 */
void ppi_resv_slots(struct ppi_call *c, int n);
uint32_t ppi_resv_room(struct ppi_call *c, uint32_t want, bool nonblock, int *err,
                       bool *sigpipe);
unsigned ppi_resv_take(struct ppi_call *c, uint32_t *pages, uint32_t k);
unsigned ppi_resv_iov(struct ppi_call *c, const uint32_t *pages, unsigned n, size_t len,
                      bool per_page, struct iovec *iov, size_t *bytes);
unsigned ppi_resv_push(struct ppi_call *c, const uint32_t *pages, size_t n, uint32_t lead,
                       uint32_t flags);
void ppi_resv_close(struct ppi_call *c, uint32_t slots, unsigned pushed, uint32_t flags,
                    const uint32_t *pages, unsigned got);

#endif
