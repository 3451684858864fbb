/*
 * kinds.h - buffer kinds: what a buffer's page is, and how to hold and let
 * go of it (kinds.c).
 *
 * Linux gives each pipe buffer a table of operations; so does pagepipe.
 * The ring calls them and never asks which kind it holds:
 *   PPI_KIND_ANON  a pool page; the last reference sends it back to the pool;
 *   PPI_KIND_USER  caller memory handed in by pp_vmsplice;
 *   PPI_KIND_FILE  a page of a sealed file mapped in by pp_splice_from_fd.
 * The last two name memory the pipe does not own: each handle points to a
 * *loan*, the record of one lent region (a vmsplice segment, a mapped run
 * of a file) that counts the references to its handles and runs the
 * region's release (the caller's callback, or munmap) when the last goes.
 */
#ifndef PPI_KINDS_H
#define PPI_KINDS_H

#include <sys/uio.h>

#include "base.h"

struct ppi_buf_ops {
	void (*get)(uint32_t page, uint32_t n);         /* n more references */
	void (*put)(const uint32_t *pages, unsigned n); /* drop one each */
	bool (*owned)(uint32_t page); /* one reference, ours: a write could append */
};
enum { PPI_KIND_ANON = 0, PPI_KIND_USER, PPI_KIND_FILE, PPI_KINDS };

#define PPI_BUF_KIND_SHIFT 8 /* a buffer's flags >> this: its kind */

extern const struct ppi_buf_ops *const ppi_buf_kinds[PPI_KINDS];

static inline const struct ppi_buf_ops *ppi_buf_ops_of(uint32_t flags)
{
	return ppi_buf_kinds[flags >> PPI_BUF_KIND_SHIFT];
}

/*
 * Loans.  ppi_loan_new makes a record for `region`, holding one reference
 * (its maker's); release(arg, seg) runs once when the last reference goes,
 * with seg the part of the region that went into pipes (ppi_loan_done sets
 * it).  NULL when memory ran out.
 */
struct ppi_loan *ppi_loan_new(void (*release)(void *arg, const struct iovec *seg), void *arg,
                              struct iovec region);
/* A loan whose release unmaps the region. */
struct ppi_loan *ppi_loan_new_unmap(void *addr, size_t len);
void ppi_loan_ref(struct ppi_loan *loan, unsigned n); /* n more references */
void ppi_loan_put(struct ppi_loan *loan);
/* The maker is done: `placed` bytes of the region went in.  Drops the
 * maker's reference; with nothing placed no release is due and the record
 * is freed at once. */
void ppi_loan_done(struct ppi_loan *loan, size_t placed);

/* Handles for n pages of lent memory from addr, each with a reference on
 * loan, into pages[]: how many were made (fewer: ENOMEM). */
unsigned ppi_loan_handles(struct ppi_loan *loan, void *addr, unsigned n, uint32_t *pages);

#endif
