/*
 * end.c - the handles a caller holds, and the calls made on one end that
 * need nothing but its ring: pp_pipe, pp_dup and pp_close; pp_read,
 * pp_write and their vectored forms (argument checks, then ring.c); and
 * the state of an end (pp_getfl/setfl, pp_getsize/setsize, pp_nread,
 * pp_events, pp_fd, pp_version).  The other public calls live beside what
 * they use: splice.c (between pipes, peek and consume), splice_fd.c (to and
 * from descriptors), vmsplice.c, pool.c (the pool's calls) and ring.c
 * (pp_getmaxsize/setmaxsize).
 *
 * A struct pp_end is what a caller holds, like a file descriptor.  Each
 * side of a ring is one "open file": its handles share its status flags
 * (ring->flags[side]) and it stays open while ring->handles[side] > 0.
 *
 * Closed handles are not freed at once but kept, with their magic cleared,
 * in a FIFO quarantine of the last QUARANTINE closed; so a call on a
 * recently closed handle reads valid memory and fails with EBADF instead of
 * touching a freed ring.  The oldest beyond that is freed, so a burst of
 * pipes made and closed gives its memory back.
 */
#include <limits.h>
#include <stdlib.h>

#include <poll.h>

#include "end.h"

#define QUARANTINE 256

static struct ppi_lock dead_lock;
static struct pp_end *dead_head, *dead_tail; /* guarded by dead_lock */
static unsigned dead_count;

_Atomic uint32_t ppi_fork_gen;

struct pp_end *ppi_end_new(struct ppi_ring *r, int side, struct ppi_shm *shm, uint32_t desc)
{
	struct pp_end *e = malloc(sizeof *e);
	if (!e)
		return NULL;
	e->side = side;
	e->ring = r;
	e->shm = shm;
	e->desc = desc;
	e->gen = atomic_load_explicit(&ppi_fork_gen, RELAXED);
	e->next_dead = NULL;
	atomic_init(&e->resv.state, PPI_RESV_NONE);
	atomic_store_explicit(&e->magic, PPI_END_MAGIC, memory_order_release);
	return e;
}

/* Queue a closed handle; free the oldest once more than QUARANTINE wait. */
void ppi_end_retire(struct pp_end *e)
{
	struct pp_end *old = NULL;
	e->next_dead = NULL;
	ppi_lock(&dead_lock);
	if (dead_tail)
		dead_tail->next_dead = e;
	else
		dead_head = e;
	dead_tail = e;
	if (++dead_count > QUARANTINE) {
		old = dead_head;
		dead_head = old->next_dead;
		dead_count--;
	}
	ppi_unlock(&dead_lock);
	free(old);
}

void ppi_fork_locks(bool take)
{
	if (take) {
		ppi_lock(&dead_lock);
		ppi_pool_fork(true);
	} else {
		ppi_pool_fork(false);
		ppi_unlock(&dead_lock);
	}
}

PPI_API int pp_pipe(struct pp_end *ends[2], int flags)
{
	if (!ends) {
		errno = EFAULT;
		return -1;
	}
	if (flags & ~(PPI_END_FLAGS | PP_SHARED)) {
		errno = EINVAL;
		return -1;
	}
	if (flags & PP_SHARED)
		return ppi_shm_pipe(ends, flags & PPI_END_FLAGS);
	struct ppi_ring *r = ppi_ring_new(flags);
	if (!r) {
		errno = ENOMEM;
		return -1;
	}
	ends[0] = ppi_end_new(r, PPI_READ, NULL, 0);
	ends[1] = ends[0] ? ppi_end_new(r, PPI_WRITE, NULL, 0) : NULL;
	if (!ends[1]) {
		if (ends[0]) {
			atomic_store(&ends[0]->magic, PPI_END_DEAD);
			ppi_end_retire(ends[0]);
		}
		ppi_ring_free(r);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

PPI_API int pp_pipe_in(struct pp_end *ends[2], int flags, struct pp_end *member)
{
	if (!ends) {
		errno = EFAULT;
		return -1;
	}
	if (!ppi_end_ring(member))
		return -1;
	if ((flags & ~(PPI_END_FLAGS | PP_SHARED)) || !member->shm) {
		errno = EINVAL;
		return -1;
	}
	return ppi_shm_pipe_in(ends, flags & PPI_END_FLAGS, member);
}

PPI_API struct pp_end *pp_dup(struct pp_end *end)
{
	struct ppi_ring *r = ppi_end_ring(end);
	if (!r)
		return NULL;
	if (end->shm)
		return ppi_shm_dup(end);
	struct pp_end *e = ppi_end_new(r, end->side, NULL, 0);
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	/* The caller's handle keeps the side open while we add one. */
	atomic_fetch_add(&r->refs, 1);
	ppi_lock(&r->lock);
	atomic_fetch_add(&r->handles[end->side], 1);
	ppi_unlock(&r->lock);
	return e;
}

PPI_API int pp_close(struct pp_end *end)
{
	uint32_t live = PPI_END_MAGIC;
	/* The CAS makes a double close, even a racing one, fail with EBADF. */
	if (!end || !atomic_compare_exchange_strong(&end->magic, &live, PPI_END_DEAD)) {
		errno = EBADF;
		return -1;
	}
	if (end->shm) {
		ppi_resv_drop(end);
		return ppi_shm_close(end);
	}
	if (end->gen != atomic_load_explicit(&ppi_fork_gen, RELAXED)) {
		/* A forked child's copy of a private handle: not its to close
		 * (its ring, lock and eventfds are the parent's). */
		errno = EBADF;
		return -1;
	}
	ppi_resv_drop(end);
	struct ppi_ring *r = end->ring;
	if (ppi_ring_drop_handle(r, end->side))
		ppi_ring_free(r);
	ppi_end_retire(end);
	return 0;
}

/* Validate an iovec array as readv(2) does; the total, or -1 with errno. */
static ssize_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t total = 0;
	if (iovcnt < 0 || iovcnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (iovcnt && !iov) {
		errno = EFAULT;
		return -1;
	}
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - total) {
			errno = EINVAL;
			return -1;
		}
		if (iov[i].iov_len && !iov[i].iov_base) {
			errno = EFAULT;
			return -1;
		}
		total += iov[i].iov_len;
	}
	return (ssize_t)total;
}

/* Read or write through end.  one: iov is the one buffer of pp_read or
 * pp_write (iovcnt 1), checked as read(2) checks its buffer. */
static inline ssize_t do_io(struct pp_end *end, int side, const struct iovec *iov, int iovcnt,
                            bool one)
{
	struct ppi_ring *r = ppi_end_ring_side(end, side);
	if (!r)
		return -1;
	ssize_t total;
	if (one) {
		/* pp_read/pp_write, checked as read(2)/write(2) check theirs:
		 * a count no buffer can have (above SSIZE_MAX, or running past
		 * the end of the address space) is EFAULT, like a NULL buffer. */
		uintptr_t base = (uintptr_t)iov->iov_base;
		if (iov->iov_len && (!base || iov->iov_len > (size_t)SSIZE_MAX ||
		                     base + iov->iov_len < base)) {
			errno = EFAULT;
			return -1;
		}
		total = (ssize_t)iov->iov_len;
	} else {
		total = iov_total(iov, iovcnt);
	}
	if (total <= 0)
		return total;
	struct ppi_iter it = {
		.iov = iov,
		.off = 0,
		.left = (size_t)total < PPI_MAX_RW ? (size_t)total : PPI_MAX_RW,
	};
	int fl = ppi_end_flags(end);
	return side == PPI_READ ? ppi_ring_read(r, end->shm, fl, &it)
	                        : ppi_ring_write(r, end->shm, fl, &it);
}

PPI_API ssize_t pp_read(struct pp_end *end, void *buf, size_t count)
{
	struct iovec v = { .iov_base = buf, .iov_len = count };
	return do_io(end, PPI_READ, &v, 1, true);
}

PPI_API ssize_t pp_write(struct pp_end *end, const void *buf, size_t count)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = count };
	return do_io(end, PPI_WRITE, &v, 1, true);
}

PPI_API ssize_t pp_readv(struct pp_end *end, const struct iovec *iov, int iovcnt)
{
	return do_io(end, PPI_READ, iov, iovcnt, false);
}

PPI_API ssize_t pp_writev(struct pp_end *end, const struct iovec *iov, int iovcnt)
{
	return do_io(end, PPI_WRITE, iov, iovcnt, false);
}

PPI_API int pp_nread(struct pp_end *end)
{
	struct ppi_ring *r = ppi_end_ring(end);
	return r ? ppi_ring_nread(r) : -1;
}

PPI_API long pp_getsize(struct pp_end *end)
{
	struct ppi_ring *r = ppi_end_ring(end);
	return r ? ppi_ring_getsize(r) : -1;
}

PPI_API long pp_setsize(struct pp_end *end, size_t size)
{
	struct ppi_ring *r = ppi_end_ring(end);
	return r ? ppi_ring_setsize(r, end->shm, size) : -1;
}

PPI_API int pp_getfl(struct pp_end *end)
{
	struct ppi_ring *r = ppi_end_ring(end);
	return r ? ppi_end_flags(end) : -1;
}

PPI_API int pp_setfl(struct pp_end *end, int flags)
{
	struct ppi_ring *r = ppi_end_ring(end);
	if (!r)
		return -1;
	if (flags & PP_NONBLOCK)
		atomic_fetch_or(ppi_end_flags_word(end), PP_NONBLOCK);
	else
		atomic_fetch_and(ppi_end_flags_word(end), ~PP_NONBLOCK);
	return 0;
}

PPI_API short pp_events(struct pp_end *end)
{
	struct ppi_ring *r = ppi_end_ring(end);
	if (!r)
		return -1;
	short ev = ppi_ring_events(r, end->side);
	/* A shared ring's other side may have died without closing: its token
	 * tells (one poll, async-signal-safe). */
	if (end->shm && ppi_shm_side_gone(end->shm, 1 - end->side, true))
		ev |= end->side == PPI_READ ? POLLHUP : POLLERR;
	return ev;
}

PPI_API int pp_fd(struct pp_end *end)
{
	struct ppi_ring *r = ppi_end_ring(end);
	if (!r)
		return -1;
	if (!end->shm)
		return ppi_ring_fd(r, end->side);
	int fd = ppi_shm_fd(end->shm, end->side);
	if (fd < 0) {
		errno = -fd;
		return -1;
	}
	return fd;
}

PPI_API const char *pp_version(void)
{
	return PAGEPIPE_VERSION;
}
