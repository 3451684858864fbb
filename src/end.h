/*
 * end.h - the handle a caller holds (struct pp_end), like a file
 * descriptor, and how a call turns one into its ring (end.c).
 *
 * A handle names a ring and a side.  A private ring's side is one open
 * description, whose status flags live in the ring; a shared ring may have
 * many (each pp_open is one), in its shared memory, and the handle names
 * which (desc).  Handles are the process's own memory: after fork the
 * child has copies, which stay valid for a shared ring (the child holds
 * those ends) and are dead for a private one (see ppi_fork_gen).
 */
#ifndef PPI_END_H
#define PPI_END_H

#include "call.h"

/* Bumped in a forked child: private handles made before are not its. */
extern _Atomic uint32_t ppi_fork_gen;

/* A write end's reservation: pages handed to the caller by pp_reserve, to
 * fill in place and publish by pp_commit (reserve.c).  state moves NONE ->
 * BUSY -> HELD -> BUSY -> NONE by compare-and-swap, so that a second
 * reservation, or two threads ending one, are told apart (EBUSY); the
 * other fields belong to whichever call moved state to BUSY, and to the
 * holder of the reservation while HELD. */
#define PPI_RESV_MAX PPI_BATCH_MAX /* pages one reservation holds at most */
enum { PPI_RESV_NONE, PPI_RESV_BUSY, PPI_RESV_HELD };
struct ppi_resv {
	_Atomic uint32_t state;
	uint32_t holder;  /* a shared ring's: the holder record whose pages they are */
	uint32_t pages;   /* pages held, each also a reserved slot of the ring */
	size_t bytes;     /* bytes handed out (at most pages * PP_PAGE_SIZE) */
	uint32_t page[PPI_RESV_MAX];
};

/* The handle a caller holds. */
#define PPI_END_MAGIC 0x70706e64u /* "ppnd" */
#define PPI_END_DEAD 0xdeadeeeeu
struct pp_end {
	_Atomic uint32_t magic;
	int side;             /* PPI_READ or PPI_WRITE */
	struct ppi_ring *ring;
	struct ppi_shm *shm;  /* the process's view of a shared ring, or NULL */
	uint32_t desc;        /* a shared ring's open description */
	uint32_t gen;         /* a private ring's: ppi_fork_gen when made */
	struct pp_end *next_dead; /* quarantine link once closed (end.c) */
	struct ppi_resv resv; /* a write end's pp_reserve (reserve.c) */
};

/* A live handle, or NULL with errno EBADF. */
static inline struct ppi_ring *ppi_end_ring(struct pp_end *end)
{
	if (unlikely(!end ||
	             atomic_load_explicit(&end->magic, memory_order_relaxed) != PPI_END_MAGIC ||
	             (!end->shm && end->gen != atomic_load_explicit(&ppi_fork_gen, RELAXED)))) {
		errno = EBADF;
		return NULL;
	}
	return end->ring;
}

/* A live handle of the given side, or NULL with errno EBADF. */
static inline struct ppi_ring *ppi_end_ring_side(struct pp_end *end, int side)
{
	struct ppi_ring *r = ppi_end_ring(end);
	if (r && end->side != side) {
		errno = EBADF;
		return NULL;
	}
	return r;
}

/* A live handle of the given side, for a call that fills iov[0..max) (the
 * in-place calls, pp_peek and pp_reserve): NULL with errno EBADF, EINVAL
 * (max < 0 or above IOV_MAX) or EFAULT (iov NULL). */
static inline struct ppi_ring *ppi_end_ring_iov(struct pp_end *end, int side,
                                                const struct iovec *iov, int max)
{
	struct ppi_ring *r = ppi_end_ring_side(end, side);
	if (r && (max < 0 || max > IOV_MAX)) {
		errno = EINVAL;
		return NULL;
	}
	if (r && max && !iov) {
		errno = EFAULT;
		return NULL;
	}
	return r;
}

/* The status flags of a live handle's open description. */
#define PPI_END_FLAGS (PP_NONBLOCK | PP_PACKET | PP_NOSIGPIPE)
static inline _Atomic int *ppi_end_flags_word(struct pp_end *end)
{
	if (likely(!end->shm))
		return &end->ring->flags[end->side];
	return &ppi_shm_descs(end->shm)[end->desc].flags;
}

static inline int ppi_end_flags(struct pp_end *end)
{
	/* A shared description's word may say anything: keep the known bits. */
	return atomic_load_explicit(ppi_end_flags_word(end), RELAXED) & PPI_END_FLAGS;
}

/* end.c: a handle on (ring, side), and for a shared ring its view and
 * description; NULL when memory ran out.  ppi_end_retire: the handle is
 * closed. */
struct pp_end *ppi_end_new(struct ppi_ring *r, int side, struct ppi_shm *shm, uint32_t desc);
void ppi_end_retire(struct pp_end *e);
/* reserve.c: give back what a closing handle still has reserved. */
void ppi_resv_drop(struct pp_end *e);
/* Take (before fork) or release (after, in both processes) the
 * process-wide locks: the pool's and the quarantine's. */
void ppi_fork_locks(bool take);

/* shared.c: the handle calls of a shared ring. */
int ppi_shm_pipe(struct pp_end *ends[2], int fl);
int ppi_shm_pipe_in(struct pp_end *ends[2], int fl, struct pp_end *member);
struct pp_end *ppi_shm_dup(struct pp_end *end);
int ppi_shm_close(struct pp_end *end);

#endif
