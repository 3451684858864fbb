/*
 * ring.h - the ring of page buffers that is a pipe (ring.c), and what the
 * calls built on it (end.c, splice.c, splice_fd.c, vmsplice.c) share.
 *
 * Position independence.  Everything in struct ppi_ring is an integer: page
 * handles, free-running indices, and a self-relative offset to the slot
 * array.  Nothing in it is a pointer, so the same layout can later live in
 * memory shared between processes mapped at different addresses.  The
 * eventfds in it are process-local and are the one exception; they are
 * documented as such and will move to a per-process side table then.
 */
#ifndef PPI_RING_H
#define PPI_RING_H

#include <sys/uio.h>

#include "base.h"
#include "kinds.h"
#include "lock.h"
#include "pool.h"

#define PPI_DEFAULT_PAGES 16u

/* One slot: a page handle, and the bytes [offset, offset+len) of it.
 * offset and len share one aligned 64-bit word, `span`, so that a reader
 * or a merging writer publishes a change of both with one store: a
 * process killed in the middle of a call on a shared ring leaves the slot
 * as it was or as it is, never half of each. */
struct ppi_buf {
	uint32_t page;
	uint32_t flags;
	union {
		struct {
			uint32_t offset;
			uint32_t len;
		};
		uint64_t span;
	};
};
/*
 * PPI_BUF_CAN_MERGE: a later write may append to this page.  Only a write
 * sets it, on the fresh pool page it pushes (never in packet mode), and
 * whoever takes a second reference to a buffer still in a ring (tee,
 * fanout, a partial splice) clears it on both the copy and the original,
 * for good.  So while it is set the pipe holds the only reference to an
 * anonymous page, which is what the kind's `owned` says; the merge path
 * trusts the flag and builds with PP_CHECK_INVARIANTS ask `owned` too.
 * The kind sits in the bits from PPI_BUF_KIND_SHIFT (kinds.h).
 */
#define PPI_BUF_CAN_MERGE 0x1
#define PPI_BUF_PACKET 0x2 /* a read takes the whole buffer or what fits, never more */

enum { PPI_READ = 0, PPI_WRITE = 1 };

/*
 * The shared state of one pipe.  Lock rule: `lock` guards every field
 * below it.  The _Atomic ones are also read without the lock by a waiter
 * that spins before it sleeps, and by pp_events' readiness checks in waits;
 * such a read is only a hint, rechecked under the lock.
 *
 * head and tail run free; slot i lives at bufs[i & (ring_size - 1)];
 * head - tail is the number of slots in use, never above max_usage.
 */
#define PPI_CACHE_LINE 64
struct ppi_ring {
	/* The lock has a cache line of its own.  Every lock and unlock
	 * writes it, while a waiting reader keeps looking at head and tail:
	 * sharing one line, each look cost the writer of a stream of small
	 * writes a cache miss on its next lock. */
	_Alignas(PPI_CACHE_LINE) struct ppi_lock lock;
	/* Bytes in the ring, for pp_nread: changed under the lock, read
	 * without it (so pp_nread is async-signal-safe).  On the lock's line,
	 * which every writer dirties anyway, not on head's, which a waiting
	 * reader watches. */
	_Atomic uint32_t bytes;
	_Alignas(PPI_CACHE_LINE) _Atomic uint32_t head; /* next slot a writer fills */
	_Atomic uint32_t tail;      /* oldest slot holding data */
	_Atomic uint32_t max_usage; /* capacity in slots (pages) */
	_Atomic uint32_t reserved;  /* slots held for splices from descriptors */
	_Atomic uint32_t spin_budget[2]; /* pauses a waiter of each side spins; a hint */
	_Atomic uint32_t streaming; /* a hint: the last read's gather saw bytes added (ring.c) */
	uint32_t ring_size;         /* slots in bufs, a power of two */
	intptr_t bufs_off;          /* bufs, as an offset from this struct */

	/* Open ends: handles on each side.  A side is open while its count is
	 * non-zero; the count itself is changed only under the lock. */
	_Atomic uint32_t handles[2];
	_Atomic int flags[2]; /* status flags per side, shared by dup handles */
	_Atomic uint32_t refs; /* handles alive; the last to go frees the ring */

	/* Sleepers.  A thread about to sleep reads the sequence word, counts
	 * itself in sleepers[] and unlocks; whoever changes what it waits for
	 * bumps the word under the lock and wakes it after.  A waker that
	 * finds sleepers[] zero makes no system call. */
	uint32_t sleepers[2];     /* [PPI_READ] wait for data, [PPI_WRITE] for room */
	_Atomic uint32_t seq[2];  /* futex words, same indices */

	/* Event descriptors of pp_fd(), -1 until asked for; ready[] mirrors
	 * whether the eventfd's counter is non-zero. */
	int efd[2];
	bool efd_ready[2];
};

static inline struct ppi_buf *ppi_ring_bufs(struct ppi_ring *r)
{
	return (struct ppi_buf *)((uintptr_t)r + (uintptr_t)r->bufs_off);
}

/* ring.c (the calls that need a struct ppi_call are in call.h) */
struct ppi_ring *ppi_ring_new(int flags);
void ppi_ring_free(struct ppi_ring *r);
long ppi_ring_getsize(struct ppi_ring *r);
int ppi_ring_nread(struct ppi_ring *r);
short ppi_ring_events(struct ppi_ring *r, int side);
int ppi_ring_fd(struct ppi_ring *r, int side);

/* An iterator over a caller's iovec array. */
struct ppi_iter {
	const struct iovec *iov;
	size_t off;  /* bytes of iov[0] already done */
	size_t left; /* bytes still to move, clamped to PPI_MAX_RW */
};

/* Ring internals shared with splice.c; all but ppi_ring_ready need the lock. */
/* Slots in use, counting those reserved by a splice from a descriptor. */
static inline uint32_t ppi_ring_used(struct ppi_ring *r)
{
	return atomic_load_explicit(&r->head, memory_order_relaxed) -
	       atomic_load_explicit(&r->tail, memory_order_relaxed) +
	       atomic_load_explicit(&r->reserved, memory_order_relaxed);
}

/* Free slots a writer may fill now. */
static inline uint32_t ppi_ring_room(struct ppi_ring *r)
{
	uint32_t max = atomic_load_explicit(&r->max_usage, memory_order_relaxed);
	uint32_t used = ppi_ring_used(r);
	return used < max ? max - used : 0;
}

static inline bool ppi_ring_full(struct ppi_ring *r)
{
	return !ppi_ring_room(r);
}

/* What side's sleepers wait for: data or hang-up for readers, a free slot
 * or no reader for writers.  Exact under the lock, a hint without it. */
static inline bool ppi_ring_ready(struct ppi_ring *r, int side)
{
	if (side == PPI_READ)
		return atomic_load_explicit(&r->head, memory_order_relaxed) !=
		           atomic_load_explicit(&r->tail, memory_order_relaxed) ||
		       !atomic_load_explicit(&r->handles[PPI_WRITE], memory_order_relaxed);
	return !ppi_ring_full(r) ||
	       !atomic_load_explicit(&r->handles[PPI_READ], memory_order_relaxed);
}
void ppi_ring_efd_update_slow(struct ppi_ring *r, bool data_added);
static inline void ppi_ring_efd_update(struct ppi_ring *r, bool data_added)
{
	if (unlikely(r->efd[PPI_READ] >= 0 || r->efd[PPI_WRITE] >= 0))
		ppi_ring_efd_update_slow(r, data_added);
}
unsigned ppi_ring_spin(struct ppi_ring *r, int side);


/* Under the lock: n more bytes (or, negative, fewer) in the ring. */
static inline void ppi_ring_count(struct ppi_ring *r, int64_t n)
{
	atomic_store_explicit(&r->bytes, (uint32_t)(LOAD(r->bytes) + n), RELAXED);
}


#endif
