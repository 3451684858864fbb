/*
 * kinds.c - the buffer kinds (anonymous pool pages, caller memory, mapped
 * file pages) and the loans that give lent memory back.
 *
 * A buffer's flags name its kind, and the ring holds, shares and drops the
 * buffer only through its kind's operations (ppi_buf_kinds), so it never
 * asks what a page is.  Anonymous pages are the pool's: a reference is a
 * count on the page, and the last one sends it back to the pool.
 *
 * Caller memory (pp_vmsplice) and file pages (pp_splice_from_fd) are lent
 * to the pipe: the pool makes a handle per page that names the bytes and
 * the region's loan, and the loan counts the references to all its
 * handles plus one for its maker.  When the last goes, the loan's release
 * runs once: the caller's callback with the part of the segment that went
 * in, or munmap of a mapped run of a file.  Lent memory is never merged
 * into (`owned` is false): the bytes are not the pipe's to change.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "kinds.h"
#include "pool.h"

struct ppi_loan {
	void (*release)(void *arg, const struct iovec *seg);
	void *arg;
	struct iovec seg; /* the region; once done, the part that went in */
	_Atomic uint32_t refs;
};

struct ppi_loan *ppi_loan_new(void (*release)(void *, const struct iovec *), void *arg,
                              struct iovec region)
{
	struct ppi_loan *l = malloc(sizeof *l);
	if (!l)
		return NULL;
	*l = (struct ppi_loan){ .release = release, .arg = arg, .seg = region };
	atomic_init(&l->refs, 1);
	return l;
}

static void unmap_release(void *arg, const struct iovec *seg)
{
	(void)arg;
	munmap(seg->iov_base, seg->iov_len);
}

struct ppi_loan *ppi_loan_new_unmap(void *addr, size_t len)
{
	return ppi_loan_new(unmap_release, NULL, (struct iovec){ addr, len });
}

void ppi_loan_ref(struct ppi_loan *l, unsigned n)
{
	atomic_fetch_add_explicit(&l->refs, n, RELAXED);
}

void ppi_loan_put(struct ppi_loan *l)
{
	if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (l->release)
		l->release(l->arg, &l->seg);
	free(l);
}

void ppi_loan_done(struct ppi_loan *l, size_t placed)
{
	if (!placed) {
		free(l); /* no handle took a reference: no release is due */
		return;
	}
	l->seg.iov_len = placed;
	ppi_loan_put(l);
}

unsigned ppi_loan_handles(struct ppi_loan *l, void *addr, unsigned n, uint32_t *pages)
{
	unsigned made = ppi_handles_new(addr, n, l, pages);
	ppi_loan_ref(l, made); /* one for each handle */
	return made;
}

/* ---- the kinds' operations ----------------------------------------- */

/* Any kind: a reference is a count on the handle. */
static void handle_get(uint32_t page, uint32_t n)
{
	ppi_page_ref(page, n);
}

static bool anon_owned(uint32_t page)
{
	return ppi_page_refs(page) == 1;
}

static const struct ppi_buf_ops anon_ops = {
	.get = handle_get,
	.put = ppi_page_put_many,
	.owned = anon_owned,
};

#define PUT_BATCH 64

/* Drop a reference each; the handles whose last one went are freed in one
 * call to the pool (one hold of its lock), and their loans dropped after it
 * (a loan's release may run the caller's callback). */
static void lent_put(const uint32_t *pages, unsigned n)
{
	struct ppi_loan *loans[PUT_BATCH];
	uint32_t gone[PUT_BATCH];
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		if (ppi_page_unref(pages[i])) {
			gone[k] = pages[i];
			loans[k++] = ppi_page_slot(pages[i])->loan;
		}
		if (k && (k == PUT_BATCH || i + 1 == n)) {
			ppi_handles_free(gone, k);
			for (unsigned j = 0; j < k; j++)
				ppi_loan_put(loans[j]);
			k = 0;
		}
	}
}

static bool never_owned(uint32_t page)
{
	(void)page;
	return false;
}

/* Caller memory and mapped file pages are held the same way; only their
 * loans' releases differ.  The file mapping is read-only besides. */
static const struct ppi_buf_ops lent_ops = {
	.get = handle_get,
	.put = lent_put,
	.owned = never_owned,
};

const struct ppi_buf_ops *const ppi_buf_kinds[PPI_KINDS] = {
	[PPI_KIND_ANON] = &anon_ops,
	[PPI_KIND_USER] = &lent_ops,
	[PPI_KIND_FILE] = &lent_ops,
};
