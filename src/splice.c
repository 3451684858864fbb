/*
 * splice.c - moving and sharing buffers between pipes without copying a
 * byte: pp_splice (move), pp_tee (share; the input keeps its data),
 * pp_fanout (move to several pipes at once), and the zero-copy reader
 * pp_peek / pp_consume.
 *
 * Every buffer holds a counted reference on its page (pool.c), so giving a
 * second pipe the same bytes is one more reference, and moving a whole
 * buffer is copying a 16-byte slot.  A buffer that is shared, or split from
 * a larger one, loses PPI_BUF_CAN_MERGE for good, on the copies and on what
 * stays behind, and a write merges only where that flag is set, so no write
 * can change bytes that another pipe can still read.
 *
 * Locks.  A transfer holds the lock of every ring it touches, taken in
 * address order so that two transfers in opposite directions cannot
 * deadlock.  To wait, it keeps only the lock of the ring it waits on and
 * lets ppi_ring_wait drop and retake that one; then it starts over.
 *
 * Order of checks, as Linux's splice between pipes has them: an empty
 * input with writers waits (or EAGAIN) first; then a full output waits (or
 * EPIPE when it has no reader, or EAGAIN); then an output without a reader
 * is EPIPE; then an empty input without writers is end of input (0).
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/uio.h>

#include <string.h>

#include "end.h"

#define FANOUT_MAX 64

/* A transfer: every ring it touches, each with its call. */
struct xfer {
	int n;                             /* outputs */
	bool copy;                         /* rings in different memory: copy bytes */
	int in_fl, out_fl[FANOUT_MAX];     /* the ends' status flags */
	struct ppi_call cin;               /* what the call does to `in` */
	struct ppi_call couts[FANOUT_MAX]; /* ... and to each output */
	struct ppi_call *order[FANOUT_MAX + 1]; /* every call, in locking order */
	bool follows[FANOUT_MAX + 1];      /* order[i] is under order[i - 1]'s lock */
};

/*
 * The order rings are locked in.  Private rings by address (a process's
 * own); then shared rings by the identity of their memory, which every
 * process sees alike, so that two processes moving data between the same
 * two shared pipes in opposite directions cannot deadlock.  Pipes of one
 * memory (pp_pipe_in) share its lock: they come together in the order,
 * by ring, and the lock is taken once for all of them.
 */
static int lock_order(const void *a, const void *b)
{
	const struct ppi_call *x = *(struct ppi_call *const *)a;
	const struct ppi_call *y = *(struct ppi_call *const *)b;
	if (!x->shm != !y->shm)
		return x->shm ? 1 : -1;
	uintptr_t kx = x->shm ? (uintptr_t)x->shm->m->ino : (uintptr_t)x->r;
	uintptr_t ky = y->shm ? (uintptr_t)y->shm->m->ino : (uintptr_t)y->r;
	if (kx == ky && x->shm)
		kx = (uintptr_t)x->shm->m->dev, ky = (uintptr_t)y->shm->m->dev;
	if (kx == ky && x->shm)
		kx = x->shm->ri, ky = y->shm->ri;
	return kx < ky ? -1 : kx > ky;
}

/* Do calls a and b take the same lock (pipes of one shared memory)? */
static bool same_lock(const struct ppi_call *a, const struct ppi_call *b)
{
	return a == b || (a->shm && b->shm && a->shm->m == b->shm->m);
}

/* Drop the locks of order[0..upto), but the one `keep` is under. */
static void unlock_all_but(struct xfer *x, int upto, struct ppi_call *keep)
{
	for (int i = upto - 1; i >= 0; i--)
		if (!x->follows[i] && !(keep && same_lock(x->order[i], keep)))
			ppi_call_drop(x->order[i]);
}

/* Lock every ring: 0, or EIO with none held.  A ring under a lock taken
 * already gets its slot array checked and looked up, as a lock would. */
static int lock_all(struct xfer *x)
{
	for (int i = 0; i < x->n + 1; i++) {
		struct ppi_call *c = x->order[i];
		int err = x->follows[i] ? ppi_shm_ring_check(c->shm, &c->bufs, &c->mask)
		                        : ppi_call_relock(c);
		if (err) {
			unlock_all_but(x, i, NULL);
			return err;
		}
	}
	return 0;
}

/* Check the ends and set up x.  0, or -1 with errno. */
static int xfer_init(struct xfer *x, struct pp_end *in, struct pp_end *const outs[], int n,
                     bool consume)
{
	struct ppi_ring *r = ppi_end_ring_side(in, PPI_READ);
	if (!r)
		return -1;
	if (!outs) {
		errno = EFAULT;
		return -1;
	}
	if (n < 1 || n > FANOUT_MAX) {
		errno = EINVAL;
		return -1;
	}
	x->n = n;
	x->in_fl = ppi_end_flags(in);
	ppi_call_start(&x->cin, r, in->shm, consume);
	x->order[0] = &x->cin;
	for (int i = 0; i < n; i++) {
		struct ppi_ring *o = ppi_end_ring_side(outs[i], PPI_WRITE);
		if (!o)
			return -1;
		ppi_call_start(&x->couts[i], o, outs[i]->shm, false);
		x->out_fl[i] = ppi_end_flags(outs[i]);
		x->order[i + 1] = &x->couts[i];
	}
	qsort(x->order, (size_t)n + 1, sizeof x->order[0], lock_order);
	/* Buffers move by reference between private pipes, and between
	 * pipes of one shared memory; anything else is copied. */
	x->copy = false;
	x->follows[0] = false;
	for (int i = 1; i < n + 1; i++) {
		struct ppi_call *a = x->order[i - 1], *b = x->order[i];
		if (b->r == a->r) {
			errno = EINVAL; /* the same pipe twice, as splice(2) says */
			return -1;
		}
		x->follows[i] = a->shm && same_lock(a, b);
		x->copy |= (a->shm || b->shm) && !x->follows[i];
	}
	return 0;
}

/*
 * With every lock held: copy one buffer's `take` bytes into a fresh page of
 * each output (rings in different memory cannot share pages).  The copies
 * get the flags a shared reference would have: mergeable only when a whole
 * buffer moves to one pipe.  false when a page could not be had for every
 * output (nothing is pushed then).
 */
static bool copy_buffer(struct xfer *x, const struct ppi_buf *b, size_t take, bool keep_merge)
{
	uint32_t pages[FANOUT_MAX];
	int got = 0;
	for (; got < x->n; got++)
		if (!ppi_call_pages(&x->couts[got], &pages[got], 1))
			break;
	if (got < x->n) {
		for (int i = 0; i < got; i++)
			ppi_call_put(&x->couts[i], PPI_KIND_ANON << PPI_BUF_KIND_SHIFT, &pages[i], 1);
		return false;
	}
	const unsigned char *from = ppi_call_addr(&x->cin, b->page) + b->offset;
	uint32_t flags = (b->flags & (PPI_BUF_PACKET | (keep_merge ? PPI_BUF_CAN_MERGE : 0))) |
	                 PPI_KIND_ANON << PPI_BUF_KIND_SHIFT;
	for (int i = 0; i < x->n; i++) {
		memcpy(ppi_call_addr(&x->couts[i], pages[i]), from, take);
		ppi_call_push(&x->couts[i], (struct ppi_buf){
			.page = pages[i], .flags = flags, .offset = 0, .len = (uint32_t)take });
	}
	return true;
}

/*
 * With every lock held: share or move up to len bytes of in's buffers into
 * each output, at most `room` buffers.  consume: take them out of in.
 * Sets *err to EIO (corrupt) or ENOMEM (no page for a copy) when it stopped
 * for that.
 */
static size_t xfer_buffers(struct xfer *x, size_t len, uint32_t room, bool consume, int *err)
{
	struct ppi_call *ci = &x->cin;
	struct ppi_ring *in = ci->r;
	uint32_t cur = LOAD(in->tail), head = LOAD(in->head);
	size_t done = 0;

	/* A peer that ignores the lock may have moved a shared ring's head
	 * since the lock's check: walk no more than the ring. */
	if (ci->shm && head - cur > ci->mask + 1) {
		*err = ppi_shm_corrupt(ci->shm);
		return 0;
	}
	while (done < len && room && cur != head) {
		struct ppi_buf b;
		if (!ppi_call_buf(ci, cur, &b)) {
			*err = EIO;
			break;
		}
		size_t take = b.len < len - done ? b.len : len - done;
		bool whole = take == b.len;
		/* A whole buffer leaving `in` hands its own reference to one of
		 * the outputs, so n outputs need n - 1 more, taken in one atomic
		 * add: every reference operation on a page the readers are
		 * releasing costs a cache-line transfer.  None more (one whole
		 * buffer moved to one pipe) is the only case that does not share
		 * the page; a shared page is no longer the pipe's alone, so
		 * neither the copies nor what stays behind in `in` may be merged
		 * into.  Rings in different memory get copies instead, flagged as
		 * the references would be. */
		uint32_t more = (uint32_t)x->n - (consume && whole);
		if (x->copy) {
			if (!copy_buffer(x, &b, take, !more)) {
				*err = ENOMEM;
				break;
			}
		} else {
			if (more)
				ppi_call_get(ci, b.flags, b.page, more);
			struct ppi_buf nb = b;
			nb.len = (uint32_t)take;
			if (more)
				nb.flags &= ~PPI_BUF_CAN_MERGE;
			for (int i = 0; i < x->n; i++)
				ppi_call_push(&x->couts[i], nb);
		}
		if (more && (b.flags & PPI_BUF_CAN_MERGE)) {
			b.flags &= ~PPI_BUF_CAN_MERGE;
			ci->bufs[cur & ci->mask].flags = b.flags;
		}
		if (consume) {
			ppi_ring_count(in, -(int64_t)take);
			b.offset += (uint32_t)take;
			b.len -= (uint32_t)take;
			ppi_call_set_span(ci, cur, b);
			if (whole) {
				if (x->copy)
					ppi_call_put(ci, b.flags, &b.page, 1);
				atomic_store_explicit(&in->tail, ++cur, memory_order_release);
			}
		} else if (whole) {
			cur++;
		}
		done += take;
		room--;
	}
	return done;
}

static ssize_t xfer_run(struct xfer *x, size_t len, unsigned flags, bool consume)
{
	/* Linux folds O_NONBLOCK of either pipe end into SPLICE_F_NONBLOCK. */
	bool nonblock = (flags & PP_SPLICE_NONBLOCK) || (x->in_fl & PP_NONBLOCK);
	for (int i = 0; i < x->n; i++)
		nonblock |= (x->out_fl[i] & PP_NONBLOCK) != 0;
	struct ppi_ring *in = x->cin.r;
	int err = 0, sigpipe_out = -1;
	size_t done = 0;

	if (!len)
		return 0;
	for (;;) {
		if ((err = lock_all(x)))
			return ppi_result(-1, err, false, 0);
		x->cin.was_full = false; /* noted just before buffers move */
		struct ppi_call *wait_on = NULL;
		int wait_side = PPI_READ;
		if (LOAD(in->head) == LOAD(in->tail) && LOAD(in->handles[PPI_WRITE])) {
			wait_on = &x->cin;
		} else {
			for (int i = 0; i < x->n && !wait_on && !err; i++) {
				struct ppi_ring *o = x->couts[i].r;
				if (!ppi_ring_full(o))
					continue;
				if (!LOAD(o->handles[PPI_READ])) {
					err = EPIPE;
					sigpipe_out = i;
				} else {
					wait_on = &x->couts[i];
					wait_side = PPI_WRITE;
				}
			}
		}
		if (wait_on && nonblock) {
			/* A shared pipe's other side may have died since the last
			 * look at its token: look now, as pp_read and pp_write do
			 * before EAGAIN, so that end of file or EPIPE comes at once
			 * (then start over, and the checks above see it). */
			if (ppi_call_side_gone_now(wait_on, wait_side == PPI_READ ? PPI_WRITE
			                                                          : PPI_READ)) {
				unlock_all_but(x, x->n + 1, NULL);
				continue;
			}
			err = EAGAIN;
		}
		if (wait_on && !err) {
			/* Sleep holding no other lock; then start over.  Nothing
			 * has moved yet, so nothing is owed. */
			unlock_all_but(x, x->n + 1, wait_on);
			err = ppi_call_wait(wait_on, wait_side, false);
			if (err != EIO)
				ppi_call_drop(wait_on);
			if (err)
				return ppi_result(-1, err, false, 0);
			continue;
		}
		if (!err) {
			for (int i = 0; i < x->n && !err; i++)
				if (!LOAD(x->couts[i].r->handles[PPI_READ])) {
					err = EPIPE;
					sigpipe_out = i;
				}
		}
		if (!err && LOAD(in->head) != LOAD(in->tail)) {
			uint32_t room = UINT32_MAX;
			for (int i = 0; i < x->n; i++) {
				uint32_t free_slots = ppi_ring_room(x->couts[i].r);
				if (free_slots < room)
					room = free_slots;
			}
			x->cin.was_full = ppi_ring_full(in);
			done = xfer_buffers(x, len, room, consume, &err);
			if (done)
				err = 0; /* what moved is returned; the next call fails */
		}
		break;
	}
	int out_flags = sigpipe_out >= 0 ? x->out_fl[sigpipe_out] : 0;
	ppi_call_settle(&x->cin);
	for (int i = 0; i < x->n; i++)
		ppi_call_settle(&x->couts[i]);
	unlock_all_but(x, x->n + 1, NULL);
	ppi_call_wake(&x->cin);
	for (int i = 0; i < x->n; i++)
		ppi_call_wake(&x->couts[i]);
	return ppi_result((ssize_t)done, err, sigpipe_out >= 0, out_flags);
}

static ssize_t xfer(struct pp_end *in, struct pp_end *const outs[], int n, size_t len,
                    unsigned flags, bool consume)
{
	struct xfer x;
	/* Linux's order: splice returns 0 for a zero length before anything
	 * is checked, tee checks its flags first; then the descriptors. */
	if (!len && consume)
		return 0;
	if (flags & ~PPI_SPLICE_FLAGS) {
		errno = EINVAL;
		return -1;
	}
	if (!len)
		return 0;
	if (xfer_init(&x, in, outs, n, consume))
		return -1;
	if (len > PPI_MAX_RW)
		len = PPI_MAX_RW;
	return xfer_run(&x, len, flags, consume);
}

PPI_API ssize_t pp_splice(struct pp_end *in, struct pp_end *out, size_t len, unsigned flags)
{
	return xfer(in, &out, 1, len, flags, true);
}

PPI_API ssize_t pp_tee(struct pp_end *in, struct pp_end *out, size_t len, unsigned flags)
{
	return xfer(in, &out, 1, len, flags, false);
}

PPI_API ssize_t pp_fanout(struct pp_end *in, struct pp_end *const outs[], int n, size_t len,
                         unsigned flags)
{
	return xfer(in, outs, n, len, flags, true);
}

/* ---- the zero-copy reader ------------------------------------------- */

/*
 * A shared ring's peek without its lock: the segments from tail, or 0 when
 * the locked path must answer (empty, or anything that does not pass the
 * checks: a slot being changed under us, a page not mapped yet, a corrupt
 * ring; only the locked path may call the ring corrupt).  Safe because a
 * peek changes nothing: the writer publishes a slot before it moves head
 * (release, read here with acquire) and changes a published slot only by
 * one store of its span; both slot areas stay mapped across a resize; and
 * every value is checked before it makes an address, so a slot recycled
 * under us by another reader points into the data memory all the same.
 * What such a race returns, a locked peek followed by another reader's
 * consume would return too.  Between processes it saves the lock's round
 * trip on every peek (design.md section 9).
 */
static int peek_unlocked(struct ppi_shm *v, struct iovec *iov, int max)
{
	if (v->m->dead || LOAD(v->hdr->broken))
		return 0;
	uint32_t mask;
	struct ppi_buf *bufs = ppi_shm_geom_slots(v, LOAD(v->rx->geom), &mask);
	if (!bufs)
		return 0;
	uint32_t tail = LOAD(v->ring->tail);
	uint32_t head = atomic_load_explicit(&v->ring->head, memory_order_acquire);
	if (head - tail - 1 > mask)
		return 0; /* empty, or not a ring we can walk */
	uint32_t mapped = atomic_load_explicit(&v->m->mapped, memory_order_acquire);
	int n = 0;
	for (uint32_t i = tail; i != head && n < max; i++, n++) {
		struct ppi_buf *slot = &bufs[i & mask];
		struct ppi_buf b;
		b.page = __atomic_load_n(&slot->page, __ATOMIC_RELAXED);
		b.flags = __atomic_load_n(&slot->flags, __ATOMIC_RELAXED);
		b.span = __atomic_load_n(&slot->span, __ATOMIC_RELAXED);
		if (!b.len || !ppi_shm_buf_fits(&b, mapped))
			return 0;
		iov[n].iov_base = ppi_shm_page(v, b.page) + b.offset;
		iov[n].iov_len = b.len;
	}
	return n;
}

PPI_API ssize_t pp_peek(struct pp_end *in, struct iovec *iov, int max)
{
	struct ppi_ring *r = ppi_end_ring_iov(in, PPI_READ, iov, max);
	if (!r)
		return -1;
	int fl = ppi_end_flags(in);
	int n = 0, err;
	struct ppi_call c;
	/* As a read does (ring.c): a blocking peek that finds the pipe empty
	 * spins before it takes the lock, since taking it only to see nothing
	 * pulls the lock's cache line away from a writer in mid-batch. */
	if (max && !(fl & PP_NONBLOCK) && !ppi_ring_ready(r, PPI_READ))
		ppi_ring_spin(r, PPI_READ);
	if (max && in->shm && (n = peek_unlocked(in->shm, iov, max)) > 0)
		return n;
	if ((err = ppi_call_lock(&c, r, in->shm, false)))
		return ppi_result(-1, err, false, fl);
	if (max && (err = ppi_call_wait_data(&c, fl & PP_NONBLOCK)) == EIO)
		return ppi_result(-1, err, false, fl);
	for (uint32_t i = LOAD(r->tail); !err && i != LOAD(r->head) && n < max; i++, n++) {
		struct ppi_buf b;
		if (!ppi_call_buf(&c, i, &b)) {
			err = EIO;
			break;
		}
		iov[n].iov_base = ppi_call_addr(&c, b.page) + b.offset;
		iov[n].iov_len = b.len;
	}
	ppi_call_unlock(&c);
	return ppi_result(n, err, false, fl);
}

PPI_API ssize_t pp_consume(struct pp_end *in, size_t n)
{
	struct ppi_ring *r = ppi_end_ring_side(in, PPI_READ);
	if (!r)
		return -1;
	struct ppi_call c;
	int err = ppi_call_lock(&c, r, in->shm, true);
	if (err)
		return ppi_result(-1, err, false, 0);
	size_t avail = 0;
	/* Stop as soon as n is covered: a deep ring (the command's hold
	 * 100k pages) must not be walked whole, under the lock, per call.
	 * The walk is bounded by the ring's size (checked at the lock). */
	for (uint32_t i = LOAD(r->tail), k = 0; i != LOAD(r->head) && avail < n && k <= c.mask;
	     i++, k++)
		avail += c.bufs[i & c.mask].len;
	if (n > avail)
		err = EINVAL;
	else
		err = ppi_call_drop_bytes(&c, n);
	ppi_call_unlock(&c);
	return ppi_result((ssize_t)n, err, false, 0);
}
