/*
 * reserve.c - the zero-copy writer: pp_reserve hands the caller fresh pages
 * of the pipe to fill in place, pp_commit publishes the first n bytes of
 * them.  With pp_peek/pp_consume on the other side, bytes cross the pipe
 * (between threads, or between processes on a PP_SHARED pipe) without
 * being copied at all.
 *
 * A reservation is the same two-step write pp_splice_from_fd makes
 * (splice_fd.c), with the caller in the middle: under the lock, free slots
 * are reserved (they count as used for every other writer, see
 * ppi_ring_room), so the pages handed out always have room to go in; the
 * pages are fresh (a shared ring's are marked held by this process, so
 * that they come back if it dies before it commits); the lock is dropped
 * while the caller fills them.  pp_commit, locked again, pushes the pages
 * that hold the first n bytes, in order and in one lock hold (so a commit
 * of at most PP_PIPE_BUF bytes, one page, is atomic, as a write is), gives
 * the other pages back, and lets the unused slots be room again.  The
 * steps of that write are defined here (ppi_resv_*, declared in call.h)
 * and serve both calls; only the middle differs.
 *
 * The reservation lives in the write end's handle (struct ppi_resv in
 * end.h): one per handle at a time.  Its state word is claimed by
 * compare-and-swap, so a second pp_reserve, or two threads ending one,
 * get EBUSY instead of sharing pages.  After fork(2) a child's copy of a
 * shared handle still says HELD, but the pages are its parent's (held by
 * the parent's holder record): the child treats the copy as no
 * reservation, and never touches those pages.
 */
#include <sys/uio.h>

#include "end.h"

/* A forked child's copy of a shared handle's reservation: the pages are
 * held by the parent's holder record, not the child's. */
static bool resv_stale(const struct pp_end *end)
{
	return end->shm && end->resv.holder != end->shm->m->holder;
}

/* Move the handle's reservation word from `from` to BUSY, for this call;
 * false if it is in another state (a stale HELD counts as NONE). */
static bool resv_claim(struct pp_end *end, uint32_t from)
{
	uint32_t seen = atomic_load(&end->resv.state);
	uint32_t as = seen == PPI_RESV_HELD && resv_stale(end) ? PPI_RESV_NONE : seen;
	return as == from &&
	       atomic_compare_exchange_strong(&end->resv.state, &seen, PPI_RESV_BUSY);
}

/* ---- the two-step write, for pp_reserve/pp_commit and pp_splice_from_fd ---- */

/* Under the lock: n slots more (or fewer, n < 0) reserved, in the ring and,
 * for a shared ring, in our holder record (so reaping can take them back
 * if we die).  A shared ring's count may have been changed by a peer: never
 * below zero. */
void ppi_resv_slots(struct ppi_call *c, int n)
{
	uint32_t have = LOAD(c->r->reserved);
	uint32_t now = n >= 0 ? have + (uint32_t)n : have > (uint32_t)-n ? have - (uint32_t)-n : 0;
	atomic_store_explicit(&c->r->reserved, now, RELAXED);
	if (c->shm)
		ppi_shm_reserve(c->shm, n);
}

/* Locked: wait until a slot is free, as a writer waits; the slots to
 * reserve for want pages (want > 0), or 0 with *err: EPIPE (with *sigpipe)
 * when no reader is left, EAGAIN when nonblock, EINTR, or EIO (then the
 * lock is not ours).  Before EAGAIN it looks at once whether the readers
 * are gone in every process (ppi_call_side_gone_now), as every way into a
 * pipe does. */
uint32_t ppi_resv_room(struct ppi_call *c, uint32_t want, bool nonblock, int *err,
                       bool *sigpipe)
{
	struct ppi_ring *r = c->r;
	for (;;) {
		if (!LOAD(r->handles[PPI_READ])) {
			*sigpipe = true;
			*err = EPIPE;
			return 0;
		}
		uint32_t room = ppi_ring_room(r);
		if (room)
			return want < room ? want : room;
		if (nonblock) {
			if (ppi_call_side_gone_now(c, PPI_READ))
				continue; /* EPIPE, as a write would say at once */
			*err = EAGAIN;
			return 0;
		}
		if ((*err = ppi_call_wait(c, PPI_WRITE, false)))
			return 0;
	}
}

/* Locked: reserve k slots (from ppi_resv_room) and, on a shared ring, take
 * pages for them now, under its lock: held by our holder record until
 * pushed or put back, so that they come back if we die in between.  The
 * pages taken: fewer than k when the ring's memory ran out, and always 0
 * on a private ring, whose pages come from the pool with the lock dropped. */
unsigned ppi_resv_take(struct ppi_call *c, uint32_t *pages, uint32_t k)
{
	ppi_resv_slots(c, (int)k);
	return c->shm ? ppi_call_pages(c, pages, k) : 0;
}

/*
 * Lay pages[0..n) out in iov to hold len bytes (the last page shorter if
 * len ends in it), one segment per run of pages adjacent in memory (also
 * how a write's batch is copied, ring.c's write_batch)
 * (ppi_call_run), or per page when `per_page` (a packet-mode reservation:
 * a page is a packet, so a segment stays one).  A run is one segment so
 * that the caller fills it with one copy, or one readv(2) segment, which
 * is faster than a page at a time into pages a reader on another CPU has
 * just read (see ppi_call_run).  Sets *bytes to the bytes they cover;
 * returns the segments (at most n).
 */
unsigned ppi_resv_iov(struct ppi_call *c, const uint32_t *pages, unsigned n, size_t len,
                      bool per_page, struct iovec *iov, size_t *bytes)
{
	size_t left = len;
	unsigned segs = 0;
	for (unsigned i = 0, run; i < n && left; i += run) {
		run = per_page ? 1 : ppi_call_run(c, pages + i, n - i);
		size_t part = (size_t)run * PP_PAGE_SIZE < left ? (size_t)run * PP_PAGE_SIZE : left;
		iov[segs++] = (struct iovec){ ppi_call_addr(c, pages[i]), part };
		left -= part;
	}
	*bytes = len - left;
	return segs;
}

/* Locked again: push the pages holding the n bytes filled (the first page's
 * from byte lead on, the others' from their start) in order, each buffer
 * with flags.  The pages pushed. */
unsigned ppi_resv_push(struct ppi_call *c, const uint32_t *pages, size_t n, uint32_t lead,
                       uint32_t flags)
{
	unsigned pushed = 0;
	for (size_t done = 0; done < n; pushed++) {
		uint32_t at = pushed ? 0 : lead;
		size_t part = n - done < PP_PAGE_SIZE - at ? n - done : PP_PAGE_SIZE - at;
		ppi_call_push(c, (struct ppi_buf){
			.page = pages[pushed],
			.offset = at,
			.len = (uint32_t)part,
			.flags = flags,
		});
		done += part;
	}
	return pushed;
}

/*
 * Locked, the end of a two-step write that reserved `slots` slots (already
 * freed by ppi_resv_slots), took pages[0..got) of kind flags and pushed the
 * first `pushed`: slots it did not fill are room again for any number of
 * writers, and a writer woken while it waited for room (c->waited) passes
 * the wake on, to all of them, as the same wake serves both.  The pages not
 * pushed go back (a shared ring's under its lock, a private ring's after
 * it), and the lock is dropped.
 */
void ppi_resv_close(struct ppi_call *c, uint32_t slots, unsigned pushed, uint32_t flags,
                    const uint32_t *pages, unsigned got)
{
	if (pushed < slots || c->waited[PPI_WRITE])
		ppi_call_pass(c, PPI_WRITE, INT_MAX);
	c->waited[PPI_WRITE] = false;
	if (c->shm)
		ppi_call_put(c, flags, pages + pushed, got - pushed);
	ppi_call_unlock(c);
	if (!c->shm)
		ppi_call_put(c, flags, pages + pushed, got - pushed);
}

/* ---- pp_reserve, pp_commit ------------------------------------------------ */

PPI_API ssize_t pp_reserve(struct pp_end *out, struct iovec *iov, int max, size_t len)
{
	struct ppi_ring *r = ppi_end_ring_iov(out, PPI_WRITE, iov, max);
	if (!r)
		return -1;
	if (!resv_claim(out, PPI_RESV_NONE)) {
		errno = EBUSY;
		return -1;
	}
	if (!max || !len) {
		atomic_store(&out->resv.state, PPI_RESV_NONE);
		return 0;
	}
	int fl = ppi_end_flags(out);
	size_t pages_wanted = len / PP_PAGE_SIZE + (len % PP_PAGE_SIZE != 0);
	uint32_t want = (uint32_t)(pages_wanted < PPI_RESV_MAX ? pages_wanted : PPI_RESV_MAX);
	if (want > (uint32_t)max)
		want = (uint32_t)max;

	struct ppi_resv *rv = &out->resv;
	struct ppi_call c;
	bool sigpipe = false;
	int err = ppi_call_lock(&c, r, out->shm, false);
	/* On a shared ring at most half the capacity, as a write's batches
	 * (ppi_call_batch): a reservation of the whole pipe would hand the
	 * ring over whole, the reader waiting for the entire fill and the
	 * writer for the entire read. */
	if (!err && want > ppi_call_batch(&c))
		want = ppi_call_batch(&c);
	uint32_t k = err ? 0 : ppi_resv_room(&c, want, fl & PP_NONBLOCK, &err, &sigpipe);
	unsigned got = 0;
	if (k) {
		got = ppi_resv_take(&c, rv->page, k);
		if (c.shm && got < k) /* the slots we cannot fill are room again */
			ppi_resv_slots(&c, -(int)(k - got));
	}
	if (err != EIO) /* else the lock is not ours */
		ppi_call_unlock(&c);
	if (k && !c.shm && (got = ppi_call_pages(&c, rv->page, k)) < k) {
		/* Out of pool pages: the slots we cannot fill are room again. */
		ppi_call_relock(&c); /* a private ring's lock cannot fail */
		ppi_resv_slots(&c, -(int)(k - got));
		ppi_call_pass(&c, PPI_WRITE, INT_MAX);
		ppi_call_unlock(&c);
	}
	if (!got) {
		atomic_store(&rv->state, PPI_RESV_NONE);
		return ppi_result(-1, k ? ENOMEM : err, sigpipe, fl);
	}
	rv->pages = got;
	unsigned segs = ppi_resv_iov(&c, rv->page, got, len, fl & PP_PACKET, iov, &rv->bytes);
	rv->holder = out->shm ? out->shm->m->holder : 0;
	atomic_store(&rv->state, PPI_RESV_HELD);
	return (ssize_t)segs;
}

/*
 * End the reservation: push the pages holding its first n bytes (EPIPE,
 * and none, when no reader is left), give back the others, free the slots
 * not used.  The caller holds the state word (BUSY).  Returns 0 or an
 * errno; *sigpipe for EPIPE.
 */
static int resv_end(struct pp_end *end, size_t n, int fl, bool *sigpipe)
{
	struct ppi_resv *rv = &end->resv;
	struct ppi_call c;
	int err = ppi_call_lock(&c, end->ring, end->shm, false);
	if (err)
		return err; /* EIO: nothing changed, the reservation is still ours */
	ppi_resv_slots(&c, -(int)rv->pages);
	unsigned pushed = 0;
	if (n && !LOAD(c.r->handles[PPI_READ])) {
		*sigpipe = true;
		err = EPIPE;
	} else {
		pushed = ppi_resv_push(&c, rv->page, n, 0, ppi_call_write_flags(fl));
	}
	ppi_resv_close(&c, rv->pages, pushed, PPI_KIND_ANON << PPI_BUF_KIND_SHIFT, rv->page,
	               rv->pages);
	return err;
}

PPI_API ssize_t pp_commit(struct pp_end *out, size_t n)
{
	struct ppi_ring *r = ppi_end_ring_side(out, PPI_WRITE);
	if (!r)
		return -1;
	struct ppi_resv *rv = &out->resv;
	if (!resv_claim(out, PPI_RESV_HELD)) {
		uint32_t state = atomic_load(&rv->state);
		bool none = state == PPI_RESV_NONE || (state == PPI_RESV_HELD && resv_stale(out));
		if (none && !n)
			return 0;
		errno = none ? EINVAL : EBUSY;
		return -1;
	}
	if (n > rv->bytes) {
		atomic_store(&rv->state, PPI_RESV_HELD); /* still the caller's */
		errno = EINVAL;
		return -1;
	}
	int fl = ppi_end_flags(out);
	bool sigpipe = false;
	int err = resv_end(out, n, fl, &sigpipe);
	/* EIO: the lock could not be had (a stopped owner, which may go on;
	 * or a corrupt pipe).  Nothing was published or given back: the
	 * reservation stays, to commit again or close. */
	atomic_store(&rv->state, err == EIO ? PPI_RESV_HELD : PPI_RESV_NONE);
	return ppi_result(err ? -1 : (ssize_t)n, err, sigpipe, fl);
}

/* pp_close: what the handle still has reserved goes back, unpublished. */
void ppi_resv_drop(struct pp_end *end)
{
	if (!resv_claim(end, PPI_RESV_HELD))
		return; /* none, a forked child's copy, or another thread's call */
	bool sigpipe = false;
	resv_end(end, 0, 0, &sigpipe);
	atomic_store(&end->resv.state, PPI_RESV_NONE);
}
