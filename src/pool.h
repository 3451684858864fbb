/*
 * pool.h - the page pool every private pipe of the process takes its pages
 * from, and the handle table that names them (pool.c).
 *
 * A page is named by a 32-bit handle, an index into a two-level table whose
 * entries hold the page's address, so that ring state holds handles, never
 * pointers.  The pool knows pages and handles only: what a handle means to
 * a buffer (a pool page, caller memory, a mapped file page) is the business
 * of the buffer kinds (kinds.h), which hand the pool a record pointer to
 * keep beside the handle and never ask it to interpret one.
 */
#ifndef PPI_POOL_H
#define PPI_POOL_H

#include "base.h"

struct ppi_loan;

/* Handle 0 names no page.  A page comes with one reference; ppi_page_put
 * drops one, and the last one sends the page back to the pool. */
uint32_t ppi_page_get(void); /* 0 when none can be had (ENOMEM) */
void ppi_page_put(uint32_t page);
/* Up to n pages into pages[]: how many (fewer: ENOMEM). */
unsigned ppi_page_get_many(uint32_t *pages, unsigned n);
void ppi_page_put_many(const uint32_t *pages, unsigned n);
/* A pipe's capacity came (pages > 0) or went (pages < 0): the pool keeps
 * spare pages for the room in open pipes (pool.c). */
void ppi_pool_pipe_pages(long pages);
/* Take (before fork) or release (after it) the pool's lock. */
void ppi_pool_fork(bool take);

/*
 * Handles for memory that is not the pool's (caller memory, mapped file
 * pages): n handles for the n pages from addr, each with one reference and
 * naming `loan`, into pages[], under one hold of the pool lock; how many
 * were made (fewer than n when handles ran out: ENOMEM).
 * ppi_handles_free gives handles whose last reference went back.  These
 * handles do not count in pages_in_use.
 */
unsigned ppi_handles_new(void *addr, unsigned n, struct ppi_loan *loan, uint32_t *pages);
void ppi_handles_free(const uint32_t *pages, unsigned n);

/* Handle -> address: a two-level table whose leaves are never freed, so a
 * lookup needs no lock; the entry was written before the handle was handed
 * out, and every handle reaches its user through a lock. */
#define PPI_DIR_LEAF_BITS 10
#define PPI_DIR_LEAF (1u << PPI_DIR_LEAF_BITS)
#define PPI_DIR_ROOT 4096u /* 4M handles = 16 GiB of pages */

struct ppi_page_slot {
	void *addr;            /* mapping, NULL while the handle is free */
	uint32_t next;         /* link in the pool's idle or free-handle list */
	_Atomic uint32_t refs; /* buffers (in any pipe) and threads holding it */
	struct ppi_loan *loan; /* a caller-memory or file handle's record (kinds.c) */
};

extern struct ppi_page_slot *ppi_page_dir[PPI_DIR_ROOT];

static inline struct ppi_page_slot *ppi_page_slot(uint32_t page)
{
	return &ppi_page_dir[page >> PPI_DIR_LEAF_BITS][page & (PPI_DIR_LEAF - 1)];
}

static inline unsigned char *ppi_page_addr(uint32_t page)
{
	return ppi_page_slot(page)->addr;
}

/* n more references to a page someone already holds. */
static inline void ppi_page_ref(uint32_t page, uint32_t n)
{
	atomic_fetch_add_explicit(&ppi_page_slot(page)->refs, n, memory_order_relaxed);
}

static inline uint32_t ppi_page_refs(uint32_t page)
{
	return atomic_load_explicit(&ppi_page_slot(page)->refs, memory_order_acquire);
}

/* Drop one reference of a handle: true when it was the last. */
static inline bool ppi_page_unref(uint32_t page)
{
	/* acq_rel: the last holder must see every other holder's use of the
	 * page done before it goes back for reuse. */
	return atomic_fetch_sub_explicit(&ppi_page_slot(page)->refs, 1, memory_order_acq_rel) == 1;
}

#endif
