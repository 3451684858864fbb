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

#include "end.h"

#define FANOUT_MAX 64

struct xfer {
	struct ppi_ring *in;
	struct ppi_ring *outs[FANOUT_MAX];
	int n;
	struct ppi_ring *order[FANOUT_MAX + 1]; /* every ring, by address */
	int nlocked;
	struct ppi_call cin;              /* what the call does to `in` */
	struct ppi_call couts[FANOUT_MAX]; /* ... and to each output */
};

static int by_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (struct ppi_ring *const *)a;
	uintptr_t y = (uintptr_t) * (struct ppi_ring *const *)b;
	return x < y ? -1 : x > y;
}

static void lock_all(struct xfer *x)
{
	for (int i = 0; i < x->nlocked; i++)
		ppi_lock(&x->order[i]->lock);
}

static void unlock_all_but(struct xfer *x, struct ppi_ring *keep)
{
	for (int i = x->nlocked - 1; i >= 0; i--)
		if (x->order[i] != keep)
			ppi_unlock(&x->order[i]->lock);
}

/* Check the ends and set up x.  0, or -1 with errno. */
static int xfer_init(struct xfer *x, struct pp_end *in, struct pp_end *const outs[], int n)
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
	x->in = r;
	x->n = n;
	x->order[0] = r;
	for (int i = 0; i < n; i++) {
		struct ppi_ring *o = ppi_end_ring_side(outs[i], PPI_WRITE);
		if (!o)
			return -1;
		x->outs[i] = o;
		x->order[i + 1] = o;
	}
	x->nlocked = n + 1;
	qsort(x->order, (size_t)x->nlocked, sizeof x->order[0], by_address);
	for (int i = 1; i < x->nlocked; i++)
		if (x->order[i] == x->order[i - 1]) {
			errno = EINVAL; /* the same pipe twice, as splice(2) says */
			return -1;
		}
	return 0;
}

/*
 * With every lock held: share or move up to len bytes of in's buffers into
 * each output, at most `room` buffers.  consume: take them out of in.
 */
static size_t xfer_buffers(struct xfer *x, size_t len, uint32_t room, bool consume)
{
	struct ppi_ring *in = x->in;
	struct ppi_buf *bufs = ppi_ring_bufs(in);
	uint32_t mask = in->ring_size - 1;
	uint32_t cur = LOAD(in->tail), head = LOAD(in->head);
	size_t done = 0;

	while (done < len && room && cur != head) {
		struct ppi_buf *b = &bufs[cur & mask];
		const struct ppi_buf_ops *ops = ppi_buf_ops_of(b->flags);
		size_t take = b->len < len - done ? b->len : len - done;
		bool whole = take == b->len;
		/* A whole buffer leaving `in` hands its own reference to one of
		 * the outputs, so n outputs need n - 1 more, taken in one atomic
		 * add: every reference operation on a page the readers are
		 * releasing costs a cache-line transfer.  None more (one whole
		 * buffer moved to one pipe) is the only case that does not share
		 * the page; a shared page is no longer the pipe's alone, so
		 * neither the copies nor what stays behind in `in` may be merged
		 * into. */
		uint32_t more = (uint32_t)x->n - (consume && whole);
		if (more) {
			b->flags &= ~PPI_BUF_CAN_MERGE;
			ops->get(b->page, more);
		}
		struct ppi_buf nb = *b;
		nb.len = (uint32_t)take;
		for (int i = 0; i < x->n; i++)
			ppi_call_push(&x->couts[i], nb);
		if (consume) {
			ppi_ring_count(in, -(int64_t)take);
			if (whole) {
				b->page = 0;
				b->len = 0;
				atomic_store_explicit(&in->tail, ++cur, memory_order_release);
			} else {
				b->offset += (uint32_t)take;
				b->len -= (uint32_t)take;
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
	bool nonblock = (flags & PP_SPLICE_NONBLOCK) ||
	                (LOAD(x->in->flags[PPI_READ]) & PP_NONBLOCK);
	for (int i = 0; i < x->n; i++)
		nonblock |= (LOAD(x->outs[i]->flags[PPI_WRITE]) & PP_NONBLOCK) != 0;
	struct ppi_ring *in = x->in;
	int err = 0, sigpipe_out = -1;
	size_t done = 0;

	if (!len)
		return 0;
	ppi_call_start(&x->cin, in, consume);
	for (int i = 0; i < x->n; i++)
		ppi_call_start(&x->couts[i], x->outs[i], false);
	for (;;) {
		lock_all(x);
		x->cin.was_full = false; /* noted just before buffers move */
		struct ppi_call *wait_on = NULL;
		int wait_side = PPI_READ;
		if (LOAD(in->head) == LOAD(in->tail) && LOAD(in->handles[PPI_WRITE])) {
			wait_on = &x->cin;
		} else {
			for (int i = 0; i < x->n && !wait_on && !err; i++) {
				struct ppi_ring *o = x->outs[i];
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
		if (wait_on && nonblock)
			err = EAGAIN;
		if (wait_on && !err) {
			/* Sleep holding no other lock; then start over.  Nothing
			 * has moved yet, so nothing is owed. */
			unlock_all_but(x, wait_on->r);
			err = ppi_call_wait(wait_on, wait_side, false);
			ppi_unlock(&wait_on->r->lock);
			if (err)
				return ppi_result(-1, err, false, 0);
			continue;
		}
		if (!err) {
			for (int i = 0; i < x->n && !err; i++)
				if (!LOAD(x->outs[i]->handles[PPI_READ])) {
					err = EPIPE;
					sigpipe_out = i;
				}
		}
		if (!err && LOAD(in->head) != LOAD(in->tail)) {
			uint32_t room = UINT32_MAX;
			for (int i = 0; i < x->n; i++) {
				uint32_t free_slots = ppi_ring_room(x->outs[i]);
				if (free_slots < room)
					room = free_slots;
			}
			x->cin.was_full = ppi_ring_full(in);
			done = xfer_buffers(x, len, room, consume);
		}
		break;
	}
	int out_flags = sigpipe_out >= 0 ? LOAD(x->outs[sigpipe_out]->flags[PPI_WRITE]) : 0;
	ppi_call_settle(&x->cin);
	for (int i = 0; i < x->n; i++)
		ppi_call_settle(&x->couts[i]);
	unlock_all_but(x, NULL);
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
	if (xfer_init(&x, in, outs, n))
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

PPI_API ssize_t pp_peek(struct pp_end *in, struct iovec *iov, int max)
{
	struct ppi_ring *r = ppi_end_ring_side(in, PPI_READ);
	if (!r)
		return -1;
	if (max < 0 || max > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (max && !iov) {
		errno = EFAULT;
		return -1;
	}
	int fl = LOAD(r->flags[PPI_READ]);
	int n = 0, err = 0;
	struct ppi_call c;
	ppi_call_lock(&c, r, false);
	if (max)
		err = ppi_call_wait_data(&c, fl & PP_NONBLOCK);
	if (!err) {
		struct ppi_buf *bufs = ppi_ring_bufs(r);
		for (uint32_t i = LOAD(r->tail); i != LOAD(r->head) && n < max; i++, n++) {
			struct ppi_buf *b = &bufs[i & (r->ring_size - 1)];
			iov[n].iov_base = ppi_page_addr(b->page) + b->offset;
			iov[n].iov_len = b->len;
		}
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
	ppi_call_lock(&c, r, true);
	struct ppi_buf *bufs = ppi_ring_bufs(r);
	uint32_t mask = r->ring_size - 1;
	size_t avail = 0;
	/* Stop as soon as n is covered: a deep ring (the command's hold
	 * 100k pages) must not be walked whole, under the lock, per call. */
	for (uint32_t i = LOAD(r->tail); i != LOAD(r->head) && avail < n; i++)
		avail += bufs[i & mask].len;
	if (n <= avail)
		ppi_ring_drop_bytes(r, n);
	ppi_call_unlock(&c);
	return ppi_result((ssize_t)n, n > avail ? EINVAL : 0, false, 0);
}
