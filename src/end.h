/*
 * end.h - the handle a caller holds (struct pp_end), like a file
 * descriptor, and how a call turns one into its ring (end.c).
 */
#ifndef PPI_END_H
#define PPI_END_H

#include "ring.h"

/* The handle a caller holds. */
#define PPI_END_MAGIC 0x70706e64u /* "ppnd" */
#define PPI_END_DEAD 0xdeadeeeeu
struct pp_end {
	_Atomic uint32_t magic;
	int side; /* PPI_READ or PPI_WRITE */
	struct ppi_ring *ring;
	struct pp_end *next_dead; /* quarantine link once closed (end.c) */
};

/* A live handle, or NULL with errno EBADF. */
static inline struct ppi_ring *ppi_end_ring(struct pp_end *end)
{
	if (unlikely(!end ||
	             atomic_load_explicit(&end->magic, memory_order_relaxed) != PPI_END_MAGIC)) {
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

#endif
