/*
 * ring.c - the circular ring of page buffers: read, write, resize, the
 * byte count, events and pp_fd's eventfds.
 *
 *            tail                      head
 *             v                          v
 *   bufs: [ ][A][B][C][ ][ ][ ] ... [ ]      slot i at bufs[i & (ring_size-1)]
 *             |  |  `- page 9, bytes 0..99    (last buffer: a write may merge here)
 *             |  `---- page 4, bytes 0..4095
 *             `------- page 7, bytes 120..4095 (a reader took 120 bytes)
 *
 * A writer fills the slot at head and advances head; a reader drains the
 * slot at tail and advances tail, handing the page back to the pool as soon
 * as the slot is empty.  head - tail <= max_usage always.
 *
 * Write placement follows Linux: the first (len % page) bytes of a write are
 * merged into the last buffer when it is mergeable and they fit; the rest
 * goes into fresh pages, one slot per page.  So 65536 one-byte writes fill
 * 16 pages, and a write of at most PP_PIPE_BUF bytes lands in one buffer,
 * under one lock hold: that is what makes it atomic.
 *
 * Waiting and waking are wait.c's: each call here carries a struct
 * ppi_call, waits through it and ends with ppi_call_unlock and ppi_result.
 * What is read-specific stays here: a reader of a stream of small writes
 * pauses to let them gather (ring_gather) before it takes the lock.
 */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "call.h"

static _Atomic long max_size = 1048576;

/* ---- iterators over the caller's iovecs ------------------------------- */

enum iter_dir { ITER_FROM_USER, ITER_TO_USER, ITER_SKIP };

/* Move n bytes (n <= it->left) between the caller's iovecs and page, in
 * the direction given, or just step over them; advances the iterator. */
static inline void iter_move(struct ppi_iter *it, unsigned char *page, size_t n,
                             enum iter_dir dir)
{
	it->left -= n;
	while (n) {
		size_t avail = it->iov->iov_len - it->off;
		if (!avail) {
			it->iov++;
			it->off = 0;
			continue;
		}
		size_t c = avail < n ? avail : n;
		unsigned char *user = (unsigned char *)it->iov->iov_base + it->off;
		if (dir == ITER_FROM_USER)
			memcpy(page, user, c);
		else if (dir == ITER_TO_USER)
			memcpy(user, page, c);
		if (dir != ITER_SKIP)
			page += c; /* NULL when skipping: no arithmetic on it */
		n -= c;
		it->off += c;
	}
}

static inline void iter_from(struct ppi_iter *it, unsigned char *dst, size_t n)
{
	iter_move(it, dst, n, ITER_FROM_USER);
}

static inline void iter_to(struct ppi_iter *it, unsigned char *src, size_t n)
{
	iter_move(it, src, n, ITER_TO_USER);
}

static inline void iter_skip(struct ppi_iter *it, size_t n)
{
	iter_move(it, NULL, n, ITER_SKIP);
}

/* ---- life ---------------------------------------------------------- */

struct ppi_ring *ppi_ring_new(int flags)
{
	struct ppi_ring *r = aligned_alloc(_Alignof(struct ppi_ring), sizeof *r);
	if (r)
		memset(r, 0, sizeof *r);
	struct ppi_buf *bufs = calloc(PPI_DEFAULT_PAGES, sizeof *bufs);
	if (!r || !bufs) {
		free(r);
		free(bufs);
		return NULL;
	}
	r->bufs_off = (intptr_t)((uintptr_t)bufs - (uintptr_t)r);
	r->ring_size = PPI_DEFAULT_PAGES;
	atomic_init(&r->max_usage, PPI_DEFAULT_PAGES);
	/* For tests: start the free-running counters near their wrap-around,
	 * which otherwise takes 2^32 buffers to reach. */
	const char *start = getenv("PP_DEBUG_RING_START");
	if (start) {
		uint32_t at = (uint32_t)strtoul(start, NULL, 0);
		atomic_init(&r->head, at);
		atomic_init(&r->tail, at);
	}
	atomic_init(&r->handles[PPI_READ], 1);
	atomic_init(&r->handles[PPI_WRITE], 1);
	atomic_init(&r->refs, 2);
	atomic_init(&r->flags[PPI_READ], flags);
	atomic_init(&r->flags[PPI_WRITE], flags);
	r->efd[PPI_READ] = r->efd[PPI_WRITE] = -1;
	atomic_init(&r->spin_budget[PPI_READ], ppi_spin_limit);
	atomic_init(&r->spin_budget[PPI_WRITE], ppi_spin_limit);
	ppi_pool_pipe_pages(PPI_DEFAULT_PAGES);
	return r;
}

void ppi_ring_free(struct ppi_ring *r)
{
	struct ppi_buf *bufs = ppi_ring_bufs(r);
	uint32_t mask = r->ring_size - 1;
	for (uint32_t i = LOAD(r->tail); i != LOAD(r->head); i++)
		ppi_buf_ops_of(bufs[i & mask].flags)->put(&bufs[i & mask].page, 1);
	ppi_pool_pipe_pages(-(long)LOAD(r->max_usage));
	for (int s = 0; s < 2; s++)
		if (r->efd[s] >= 0)
			close(r->efd[s]);
	free(bufs);
	free(r);
}

/* ---- read-side gathering ------------------------------------------- */

/*
 * Gathering.  A blocking reader that finds nothing but a lone, partly
 * filled buffer is most likely reading a stream of small writes as fast as
 * they come.  If it took the lock at once it would do so every two or three
 * bytes, and each time the writer would lose the lock's, the slot's and the
 * page's cache lines and need a fresh page.  So it first pauses for up to
 * ppi_gather_pauses (a few microseconds), looking only rarely (a look costs
 * the writer a cache miss too), then takes what has gathered.
 *
 * A reader that finds the pipe empty spins, and if data comes soon it
 * gathers too; if it comes later (a ping-pong, a slow writer) it takes the
 * data the moment it comes.  What "soon" is depends on what the last
 * gather saw (the ring's `streaming` hint): while gathers see the writer
 * add bytes, the stream goes on, and data within GATHER_STREAM pauses is
 * its next bytes (a writer that lost its page to the last read takes that
 * long to come back with a fresh one); once a gather sees nothing added
 * (a ping-pong's lone message), only data within GATHER_QUICK pauses
 * counts, so a ping-pong pays no gather.  Measured between processes,
 * bench_procs -c '1 B': with GATHER_QUICK alone 15-30 bytes per read and
 * 17-18x the kernel pipe; with 63 pauses for every read 130-160 bytes
 * per read and 49x, but a ping-pong round trip 2.8 -> 5.1 us.
 */
#define GATHER_QUICK 3   /* pauses: data this soon means a stream */
#define GATHER_STREAM 63 /* ... and this soon while the last gather saw one */
#define GATHER_LOOK 16   /* pauses between looks while gathering */

/* Gather, and keep the hint: whether the writer added bytes meanwhile
 * (a gather that finds more than a lone buffer at once learns nothing). */
static void ring_gather(struct ppi_ring *r, bool streaming)
{
	uint32_t before = LOAD(r->bytes);
	/* Look again only every GATHER_LOOK pauses: once a second buffer
	 * shows up there is plenty to take, and waiting on would only let
	 * the pipe fill and stall the writer. */
	for (unsigned i = 0; i < ppi_gather_pauses; i++) {
		if (i % GATHER_LOOK == 0 && LOAD(r->head) - LOAD(r->tail) != 1) {
			if (!i)
				return;
			break;
		}
		ppi_cpu_relax();
	}
	bool grew = LOAD(r->bytes) != before;
	if (grew != streaming)
		atomic_store_explicit(&r->streaming, grew, RELAXED);
}

/* Before a blocking read takes the lock: spin while the pipe is empty,
 * then gather if the data came soon (see above). */
static void read_prepare(struct ppi_ring *r)
{
	bool streaming = LOAD(r->streaming);
	if (ppi_ring_ready(r, PPI_READ) ||
	    ppi_ring_spin(r, PPI_READ) <= (streaming ? GATHER_STREAM : GATHER_QUICK))
		ring_gather(r, streaming);
}

/* ---- write ----------------------------------------------------------- */

static inline size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Most buffers a reader takes out of the ring to copy outside the lock (on
 * its stack); a writer's batches are ppi_call_batch (call.h). */
#define BATCH_MAX PPI_BATCH_MAX

/*
 * Fill up to k pages from a copy of the iterator with the lock dropped, so
 * readers can drain while we copy; then, locked again, push as many as still
 * fit.  Another writer may have taken slots meanwhile: pages that no longer
 * fit go back and their bytes count as not written.  A private ring's pages
 * come from the pool after the lock is dropped; a shared ring's from its own
 * memory, under the lock, marked as held by us until they are pushed (so
 * that they come back if we die while filling them).  Sets *bytes to what
 * was pushed; returns 0, or when nothing could be pushed ENOMEM, EPIPE (and
 * *sigpipe), EAGAIN (lost the race for room) or EIO.
 */
static int write_batch(struct ppi_call *c, int fl, struct ppi_iter *it, unsigned k,
                       size_t *bytes_out, bool *sigpipe)
{
	struct ppi_ring *r = c->r;
	uint32_t pages[BATCH_MAX];
	size_t bytes = 0;
	unsigned got = 0, pushed = 0;
	int err = 0;

	*bytes_out = 0;
	if (c->shm && !(got = ppi_call_pages(c, pages, k)))
		return ENOMEM;
	ppi_call_drop(c);
	ppi_call_wake(c); /* a reader owed a wake can drain while we copy */
	if (!c->shm)
		got = ppi_call_pages(c, pages, k);
	/* Laid out as a reservation is: a run of adjacent pages takes one
	 * copy (see ppi_call_run). */
	struct iovec runs[BATCH_MAX];
	size_t laid;
	unsigned nruns = ppi_resv_iov(c, pages, got, it->left, false, runs, &laid);
	struct ppi_iter at = *it;
	for (unsigned i = 0; i < nruns; i++)
		iter_from(&at, runs[i].iov_base, runs[i].iov_len);
	if ((err = ppi_call_relock(c)))
		return err; /* a shared ring's pages stay held: they come back with us */
	if (!got)
		return ENOMEM;
	if (!LOAD(r->handles[PPI_READ])) {
		*sigpipe = true;
		err = EPIPE;
	} else {
		uint32_t room = ppi_ring_room(r);
		for (; pushed < got && pushed < room; pushed++) {
			size_t n = min_size(PP_PAGE_SIZE, it->left - bytes);
			ppi_call_push_page(c, pages[pushed], (uint32_t)n, fl);
			bytes += n;
		}
		iter_skip(it, bytes);
		if (!pushed)
			err = EAGAIN; /* lost the race for room: caller waits */
	}
	ppi_call_put(c, PPI_KIND_ANON << PPI_BUF_KIND_SHIFT, pages + pushed, got - pushed);
	*bytes_out = bytes;
	return pushed ? 0 : err;
}

/*
 * Under the lock: the last buffer, if `chars` more bytes may be appended to
 * it, else false.  The flag alone decides (see PPI_BUF_CAN_MERGE): asking
 * the buffer's kind would cost an indirect call and a look at the page's
 * reference count, a third of a one-byte write's time.
 */
static inline bool merge_target(struct ppi_call *c, size_t chars, struct ppi_buf *last, int *err)
{
	struct ppi_ring *r = c->r;
	uint32_t head = LOAD(r->head);
	if (head == LOAD(r->tail))
		return false;
	if (!ppi_call_buf(c, head - 1, last)) {
		*err = EIO;
		return false;
	}
	if (!(last->flags & PPI_BUF_CAN_MERGE) || last->offset + last->len + chars > PP_PAGE_SIZE)
		return false;
	PPI_INVARIANT(c->shm || ppi_buf_ops_of(last->flags)->owned(last->page));
	return true;
}

/* Under the lock: append the first `chars` bytes of the write to the last
 * buffer (merge_target said it may).  The length is published after the
 * bytes are in, with one store: a process killed in between leaves the
 * buffer as it was. */
static inline void merge_into(struct ppi_call *c, struct ppi_iter *it, struct ppi_buf last,
                              size_t chars)
{
	iter_from(it, ppi_call_addr(c, last.page) + last.offset + last.len, chars);
	last.len += (uint32_t)chars;
	ppi_call_set_span(c, LOAD(c->r->head) - 1, last);
	ppi_ring_count(c->r, (int64_t)chars);
	c->added = true;
}

static ssize_t write_locked(struct ppi_call *c, int fl, struct ppi_iter *it);

/*
 * Write.  A write smaller than a page that merges whole into the last
 * buffer (a stream of small writes: the jobserver's tokens, log lines) is
 * done here, in a function small enough that it costs no more than the
 * copy; everything else goes on in write_locked with the lock held.
 */
ssize_t ppi_ring_write(struct ppi_ring *r, struct ppi_shm *shm, int fl, struct ppi_iter *it)
{
	struct ppi_call c;
	int err;
	if ((err = ppi_call_lock(&c, r, shm, false)))
		return ppi_result(-1, err, false, fl);
	size_t chars = it->left;
	struct ppi_buf last;
	if (chars < PP_PAGE_SIZE && LOAD(r->handles[PPI_READ]) &&
	    merge_target(&c, chars, &last, &err)) {
		merge_into(&c, it, last, chars);
		ppi_call_unlock(&c);
		return (ssize_t)chars;
	}
	return write_locked(&c, fl, it);
}

__attribute__((noinline)) static ssize_t write_locked(struct ppi_call *cp, int fl,
                                                      struct ppi_iter *it)
{
	struct ppi_call c = *cp;
	struct ppi_ring *r = c.r;
	ssize_t ret = 0;
	int err = 0;
	bool sigpipe = false;

	if (!LOAD(r->handles[PPI_READ])) {
		sigpipe = true;
		err = EPIPE;
		goto out;
	}

	/* Merge the odd-sized front of the write into the last buffer. */
	size_t chars = it->left & PPI_PAGE_MASK;
	struct ppi_buf last;
	if (chars && merge_target(&c, chars, &last, &err)) {
		merge_into(&c, it, last, chars);
		ret = chars;
		if (!it->left)
			goto out;
	}
	if (err)
		goto out;

	for (;;) {
		if (!LOAD(r->handles[PPI_READ])) {
			sigpipe = true;
			if (!ret)
				err = EPIPE;
			break;
		}
		uint32_t room = ppi_ring_room(r);
		if (room) {
			size_t want = (it->left + PPI_PAGE_MASK) / PP_PAGE_SIZE;
			unsigned k = (unsigned)min_size(min_size(want, room), ppi_call_batch(&c));
			if (k == 1) {
				/* One page: cheaper to copy it under the lock. */
				uint32_t page;
				if (!ppi_call_pages(&c, &page, 1)) {
					if (!ret)
						err = ENOMEM;
					break;
				}
				size_t n = min_size(PP_PAGE_SIZE, it->left);
				iter_from(it, ppi_call_addr(&c, page), n);
				ppi_call_push_page(&c, page, (uint32_t)n, fl);
				ret += n;
			} else {
				size_t n;
				int e = write_batch(&c, fl, it, k, &n, &sigpipe);
				ret += n;
				if (e == EIO) {
					err = e; /* the lock is not ours */
					return ppi_result(ret, ret ? 0 : err, sigpipe, fl);
				}
				if (e && e != EAGAIN) {
					if (!ret)
						err = e;
					break;
				}
			}
			if (!it->left)
				break;
			continue;
		}
		if (fl & PP_NONBLOCK) {
			if (ppi_call_side_gone_now(&c, PPI_READ))
				continue; /* EPIPE, as a kernel pipe says at once */
			if (!ret)
				err = EAGAIN;
			break;
		}
		/* Full: sleep; pollers and the reader owed a wake hear of what
		 * we added first. */
		err = ppi_call_wait(&c, PPI_WRITE, ret > 0);
		if (err == EIO)
			return ppi_result(ret, ret ? 0 : err, false, fl);
		if (err) {
			if (ret)
				err = 0;
			break;
		}
	}
out:
	ppi_call_unlock(&c);
	return ppi_result(ret, err, sigpipe, fl);
}

/* ---- read ------------------------------------------------------------ */

/* A buffer taken out of the ring by a reader, to copy with the lock dropped. */
struct span {
	uint32_t page;
	uint32_t offset;
	uint32_t len;   /* bytes the reader takes; the reference is dropped after */
	uint32_t flags; /* the buffer's, for its kind */
	size_t dst;     /* where they go: bytes from the start of the read */
};

/* Drop the references of taken buffers, a run of one kind at a time so the
 * pool sees a batch.  A shared ring's pages go back under its lock. */
static void spans_put(struct ppi_call *c, const struct span *sp, unsigned n)
{
	uint32_t pages[BATCH_MAX];
	unsigned run = 0;
	if (c->shm && n) {
		/* A shared ring's pages go back at the process's next lock, so
		 * that a streaming reader does not take the lock twice a read;
		 * until then they are held by us, and come back if we die. */
		for (unsigned i = 0; i < n; i++)
			pages[i] = sp[i].page;
		if (ppi_shm_defer_put(c->shm, pages, n))
			return;
		if (ppi_call_relock(c))
			return; /* the lock is lost: the pages stay held by us */
	}
	for (unsigned i = 0; i < n; i++) {
		pages[run++] = sp[i].page;
		if (i + 1 == n || ppi_buf_ops_of(sp[i + 1].flags) != ppi_buf_ops_of(sp[i].flags)) {
			ppi_call_put(c, sp[i].flags, pages, run);
			run = 0;
		}
	}
	if (c->shm && n)
		ppi_call_drop(c);
}

/*
 * Read.  Under the lock the reader decides everything: which buffers it
 * consumes whole (taken out of the ring at once, so their slots are free
 * for writers while we copy), and the bytes of a buffer it takes only part
 * of (copied under the lock, since the rest stays in the ring).  Then it
 * drops the lock, wakes a writer if it freed room in a full pipe, and
 * copies the taken buffers out.  A shared ring's taken pages are marked
 * held by us first, so that they come back if we die while copying; a
 * page that buffers of other pipes of its memory also name is copied under
 * the lock instead, like a part (ppi_call_page_shared).
 */
ssize_t ppi_ring_read(struct ppi_ring *r, struct ppi_shm *shm, int fl, struct ppi_iter *it)
{
	struct span taken[BATCH_MAX];
	unsigned ntaken = 0;
	size_t planned = 0; /* bytes this read returns so far */
	struct ppi_iter at;  /* where bytes copied under the lock go */
	size_t at_pos = 0;   /* ... as bytes from the start of the read */
	bool at_ready = false;
	struct ppi_call c;
	int err = 0;

	/* A blocking reader that finds the pipe empty spins before it takes
	 * the lock: taking it just to see nothing would pull the lock's cache
	 * line away from a writer in the middle of a stream of small writes. */
	if (!(fl & PP_NONBLOCK))
		read_prepare(r);
	if ((err = ppi_call_lock(&c, r, shm, true)))
		return ppi_result(-1, err, false, fl);
	for (;;) {
		uint32_t head = LOAD(r->head), tail = LOAD(r->tail);
		bool stop = false;
		uint32_t gone = 0; /* bytes leaving the ring, read or discarded */
		/* A peer that ignores the lock may have moved a shared ring's
		 * head since the lock's check: walk no more than the ring. */
		if (unlikely(c.shm) && head - tail > c.mask + 1) {
			err = ppi_shm_corrupt(c.shm);
			head = tail;
		}
		while (tail != head && !stop) {
			struct ppi_buf b;
			if (!ppi_call_buf(&c, tail, &b)) {
				err = EIO;
				break;
			}
			uint32_t len_before = b.len;
			size_t want = it->left - planned;
			size_t chars = min_size(b.len, want);
			bool packet = b.flags & PPI_BUF_PACKET;
			stop = packet || chars == want;
			if ((chars == b.len || packet) && ntaken < BATCH_MAX &&
			    !ppi_call_page_shared(&c, b.page)) {
				taken[ntaken++] =
					(struct span){ b.page, b.offset, (uint32_t)chars, b.flags, planned };
				if (c.shm)
					ppi_shm_pages_mark(c.shm, &b.page, 1, PPI_PAGE_HELD);
				b.len = 0;
				ppi_call_set_span(&c, tail, b);
			} else {
				if (!at_ready) {
					at = *it;
					at_ready = true;
				}
				/* Past the buffers taken meanwhile (a shared page
				 * copied here may come between two of them). */
				iter_skip(&at, planned - at_pos);
				iter_to(&at, ppi_call_addr(&c, b.page) + b.offset, chars);
				at_pos = planned + chars;
				b.offset += (uint32_t)chars;
				b.len -= (uint32_t)chars;
				if (packet)
					b.len = 0; /* the rest of a packet is discarded */
				ppi_call_set_span(&c, tail, b);
				if (!b.len)
					ppi_call_put(&c, b.flags, &b.page, 1);
			}
			planned += chars;
			gone += len_before - b.len;
			if (!b.len)
				atomic_store_explicit(&r->tail, ++tail, memory_order_release);
		}
		ppi_ring_count(r, -(int64_t)gone);
		if (err || stop || planned || !LOAD(r->handles[PPI_WRITE]))
			break;
		if (fl & PP_NONBLOCK) {
			if (!ppi_call_side_gone_now(&c, PPI_WRITE))
				err = EAGAIN; /* else end of file, as a kernel pipe says at once */
			break;
		}
		err = ppi_call_wait(&c, PPI_READ, false);
		if (err == EIO)
			return ppi_result(-1, err, false, fl);
		if (err)
			break; /* nothing was read */
	}
	ppi_call_unlock(&c);
	size_t pos = 0;
	for (unsigned i = 0, j; i < ntaken; i = j) {
		/* Buffers whose bytes follow each other in memory and in the
		 * read go in one copy, as a writer's do (ppi_call_run, call.h). */
		unsigned char *src = ppi_call_addr(&c, taken[i].page) + taken[i].offset;
		size_t len = taken[i].len;
		for (j = i + 1; j < ntaken && taken[j].dst == taken[i].dst + len &&
		                ppi_call_addr(&c, taken[j].page) + taken[j].offset == src + len;
		     j++)
			len += taken[j].len;
		iter_skip(it, taken[i].dst - pos); /* what was copied under the lock */
		iter_to(it, src, len);
		pos = taken[i].dst + len;
	}
	spans_put(&c, taken, ntaken);
	if (err == EIO && planned)
		err = 0; /* what was read is returned; the next call fails */
	return ppi_result((ssize_t)planned, err, false, fl);
}

/* Under the lock: consume the first n readable bytes (n <= what is there),
 * dropping the references of the buffers they empty.  0 or EIO. */
int ppi_call_drop_bytes(struct ppi_call *c, size_t n)
{
	struct ppi_ring *r = c->r;
	/* The emptied buffers' pages go back in runs of one kind, in order, so
	 * that a shared memory hands them out again in that order (see
	 * ppi_call_run).  A holder that dies before the run goes back leaves
	 * pages marked in a ring that no buffer names: the rebuild after its
	 * death makes them idle. */
	uint32_t pages[BATCH_MAX], run_flags = 0;
	unsigned run = 0;
	int err = 0;
	/* At most the ring's buffers: a shared ring's head and tail may be
	 * moved under us by a peer that ignores the lock. */
	for (uint32_t k = 0; n; k++) {
		uint32_t tail = LOAD(r->tail);
		struct ppi_buf b;
		if (tail == LOAD(r->head) || k > c->mask || !ppi_call_buf(c, tail, &b)) {
			err = c->shm ? ppi_shm_corrupt(c->shm) : EIO;
			break;
		}
		uint32_t take = b.len < n ? b.len : (uint32_t)n;
		b.offset += take;
		b.len -= take;
		ppi_ring_count(r, -(int64_t)take);
		n -= take;
		ppi_call_set_span(c, tail, b);
		if (!b.len) {
			if (run == BATCH_MAX ||
			    (run && ppi_buf_ops_of(b.flags) != ppi_buf_ops_of(run_flags))) {
				ppi_call_put(c, run_flags, pages, run);
				run = 0;
			}
			pages[run++] = b.page;
			run_flags = b.flags;
			atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
		}
	}
	if (run)
		ppi_call_put(c, run_flags, pages, run);
	return err;
}

/* ---- closing a side ------------------------------------------------- */

/*
 * Drop one handle of side.  The last one closes the side: everyone asleep
 * on the other side is woken to see EOF or EPIPE.  Returns true when the
 * caller must free the ring.
 *
 * Who frees is decided by refs, one per handle, counted down only after
 * the closer has dropped the lock and sent its wakes: an unlock still
 * touches the lock after releasing it (it reads `sleepers`), so deciding
 * under the lock would let another handle's closer free the ring under
 * our feet.
 */
bool ppi_ring_drop_handle(struct ppi_ring *r, int side)
{
	struct ppi_call c;
	ppi_call_lock(&c, r, NULL, false);
	uint32_t left = LOAD(r->handles[side]) - 1;
	atomic_store_explicit(&r->handles[side], left, RELAXED);
	if (!left) {
		ppi_call_owe(&c, 1 - side, INT_MAX);
		if (r->efd[side] >= 0) {
			close(r->efd[side]);
			r->efd[side] = -1;
		}
	}
	ppi_call_unlock(&c);
	return atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1;
}

/* ---- size ------------------------------------------------------------ */

/* Pages for a requested size, as F_SETPIPE_SZ rounds it; 0 if invalid. */
static uint32_t pages_for_size(size_t size)
{
	if (size > (1ul << 31))
		return 0;
	if (size <= PP_PAGE_SIZE)
		return 1;
	size_t pow = PP_PAGE_SIZE;
	while (pow < size)
		pow <<= 1;
	return (uint32_t)(pow / PP_PAGE_SIZE);
}

/* Move the ring's buffers to an array of `pages` slots, at the same
 * free-running indices.  A private ring's array is allocated; a shared
 * ring has two areas in its ctl memory and moves to the other one,
 * publishing the new array and size with one store (shm.h, geom) so that a
 * process killed in the middle leaves the old ring whole.  0 or ENOMEM. */
static int ring_move(struct ppi_call *c, uint32_t pages)
{
	struct ppi_ring *r = c->r;
	uint32_t head = LOAD(r->head), tail = LOAD(r->tail);
	struct ppi_buf *nb;
	struct ppi_shm *v = c->shm;
	uint32_t geom = 0;
	if (v) {
		uint32_t order = 0;
		while ((1u << order) < pages)
			order++;
		geom = (((LOAD(v->rx->geom) >> 8) & 1) ^ 1) << 8 | order;
		nb = ppi_shm_slots(v, geom >> 8);
	} else if (!(nb = calloc(pages, sizeof *nb))) {
		return ENOMEM;
	}
	for (uint32_t i = tail; i != head; i++)
		nb[i & (pages - 1)] = c->bufs[i & c->mask];
	if (v) {
		atomic_store_explicit(&v->rx->geom, geom, memory_order_release);
		/* The old area's memory goes back (the ctl memfd is sparse). */
		size_t off = ppi_shm_slots_off(v->ri, ((geom >> 8) & 1) ^ 1);
		fallocate(v->m->ctl_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		          (off_t)PPI_SHM_SLOTS_SIZE);
	} else {
		free(c->bufs);
		r->bufs_off = (intptr_t)((uintptr_t)nb - (uintptr_t)r);
		r->ring_size = pages;
	}
	c->bufs = nb;
	c->mask = pages - 1;
	return 0;
}

long ppi_ring_setsize(struct ppi_ring *r, struct ppi_shm *shm, size_t size)
{
	uint32_t pages = pages_for_size(size);
	if (!pages) {
		errno = EINVAL;
		return -1;
	}
	struct ppi_call c;
	int err = ppi_call_lock(&c, r, shm, false);
	if (err)
		return ppi_result(-1, err, false, 0);
	uint32_t head = LOAD(r->head), tail = LOAD(r->tail);
	if (pages > LOAD(r->max_usage) &&
	    (long)pages * PP_PAGE_SIZE > atomic_load(&max_size))
		err = EPERM;
	else if (pages < head - tail + LOAD(r->reserved))
		err = EBUSY;
	else if (pages != c.mask + 1)
		err = ring_move(&c, pages);
	if (!err) {
		if (!shm)
			ppi_pool_pipe_pages((long)pages - (long)LOAD(r->max_usage));
		atomic_store_explicit(&r->max_usage, pages, RELAXED);
		/* More room may let any number of writers on: wake them all. */
		ppi_call_owe(&c, PPI_WRITE, INT_MAX);
	}
	ppi_call_unlock(&c);
	return ppi_result((long)pages * PP_PAGE_SIZE, err, false, 0);
}

long ppi_ring_getsize(struct ppi_ring *r)
{
	return (long)LOAD(r->max_usage) * PP_PAGE_SIZE;
}

uint32_t ppi_call_sum(struct ppi_call *c)
{
	uint32_t n = 0;
	for (uint32_t i = LOAD(c->r->tail); i != LOAD(c->r->head); i++)
		n += c->bufs[i & c->mask].len;
	return n;
}

int ppi_ring_nread(struct ppi_ring *r)
{
	/* No lock: the count is kept under it, and a lock-free read makes
	 * pp_nread async-signal-safe. */
	uint32_t n = LOAD(r->bytes);
	return n > INT_MAX ? INT_MAX : (int)n;
}

short ppi_ring_events(struct ppi_ring *r, int side)
{
	/* No lock, as Linux's pipe_poll takes none: a splice to a descriptor
	 * may hold the lock across a blocking write, and poll must not wait
	 * for it.  Each field read is exact; together they are a snapshot as
	 * good as the kernel's. */
	short ev = 0;
	if (side == PPI_READ) {
		if (LOAD(r->head) != LOAD(r->tail))
			ev |= POLLIN | POLLRDNORM;
		if (!LOAD(r->handles[PPI_WRITE]))
			ev |= POLLHUP;
	} else {
		if (!ppi_ring_full(r))
			ev |= POLLOUT | POLLWRNORM;
		if (!LOAD(r->handles[PPI_READ]))
			ev |= POLLERR;
	}
	return ev;
}

int ppi_ring_fd(struct ppi_ring *r, int side)
{
	ppi_lock(&r->lock);
	if (r->efd[side] < 0) {
		int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (fd < 0) {
			ppi_unlock(&r->lock);
			return -1;
		}
		r->efd[side] = fd;
		r->efd_ready[side] = false;
		ppi_ring_efd_update(r, false);
	}
	int fd = r->efd[side];
	ppi_unlock(&r->lock);
	return fd;
}

PPI_API long pp_getmaxsize(void)
{
	return atomic_load(&max_size);
}

PPI_API long pp_setmaxsize(size_t size)
{
	uint32_t pages = size ? pages_for_size(size) : 0;
	if (!pages) {
		errno = EINVAL;
		return -1;
	}
	atomic_store(&max_size, (long)pages * PP_PAGE_SIZE);
	return (long)pages * PP_PAGE_SIZE;
}
