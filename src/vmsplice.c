/*
 * vmsplice.c - pp_vmsplice: the caller's memory goes into a pipe as
 * buffers, without copying, and comes back through a release callback.
 *
 * Each iovec segment is cut into chunks of at most a page; each chunk
 * becomes a buffer of kind PPI_KIND_USER whose handle names the caller's
 * bytes.  A segment has one loan (kinds.c) counting the references to its
 * chunks' handles, plus one held by pp_vmsplice itself while it works; when
 * the count reaches zero (every pipe that got a chunk, tee and fan-out
 * included, has consumed it) the callback runs once for the segment, with
 * the part of it that went in.  User buffers are never merged into, so no
 * write can change the caller's bytes; the caller must not change them
 * until the callback.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include <string.h>

#include "end.h"

/* Most handles pp_vmsplice makes in one call to the pool. */
#define HANDLE_BATCH 64

PPI_API ssize_t pp_vmsplice(struct pp_end *out, const struct iovec *iov, unsigned long n,
                           unsigned flags, void (*release)(void *arg, const struct iovec *iov),
                           void *arg)
{
	struct ppi_ring *r = ppi_end_ring_side(out, PPI_WRITE);
	if (!r)
		return -1;
	if (n > IOV_MAX || (flags & ~PPI_SPLICE_FLAGS)) {
		errno = EINVAL;
		return -1;
	}
	if (n && !iov) {
		errno = EFAULT;
		return -1;
	}
	int fl = ppi_end_flags(out);
	bool nonblock = (flags & PP_SPLICE_NONBLOCK) || (fl & PP_NONBLOCK);
	size_t placed = 0;
	unsigned long seg = 0;
	size_t seg_off = 0;      /* bytes of iov[seg] already placed */
	struct ppi_loan *g = NULL; /* the current segment's, once it has one */
	bool sigpipe = false;
	int err = 0;
	struct ppi_call c;

	if ((err = ppi_call_lock(&c, r, out->shm, false)))
		return ppi_result(-1, err, false, fl);
	while (seg < n) {
		const struct iovec *v = &iov[seg];
		if (seg_off == v->iov_len) { /* segment done (or empty) */
			if (g) {
				ppi_loan_done(g, seg_off);
				g = NULL;
			}
			seg++;
			seg_off = 0;
			continue;
		}
		if (!v->iov_base) {
			err = EFAULT;
			break;
		}
		if (!LOAD(r->handles[PPI_READ])) {
			sigpipe = true;
			err = EPIPE;
			break;
		}
		if (placed >= PPI_MAX_RW)
			break; /* the read(2)/write(2) clamp, as import_iovec has it */
		if (!ppi_ring_room(r)) {
			/* Like Linux: wait only for the first room; once something
			 * went in, return what fitted. */
			if (nonblock || placed) {
				/* A shared pipe's readers may have died since the last
				 * look at their token: look now, as pp_write does, so
				 * that EPIPE comes at once (the check above, again). */
				if (!placed && ppi_call_side_gone_now(&c, PPI_READ))
					continue;
				err = EAGAIN;
				break;
			}
			err = ppi_call_wait(&c, PPI_WRITE, false);
			if (err == EIO) {
				if (g)
					ppi_loan_done(g, seg_off);
				return ppi_result(-1, err, false, fl);
			}
			if (err)
				break;
			continue;
		}
		if (!g && !(g = ppi_loan_new(release, arg, *v))) {
			err = ENOMEM;
			break;
		}
		/* A handle per page-sized chunk of what is left of the segment,
		 * as many as fit, made under one hold of the pool lock. */
		size_t left = v->iov_len - seg_off;
		if (left > PPI_MAX_RW - placed)
			left = PPI_MAX_RW - placed;
		uint32_t pages[HANDLE_BATCH];
		size_t want = (left + PP_PAGE_SIZE - 1) / PP_PAGE_SIZE;
		if (want > ppi_ring_room(r))
			want = ppi_ring_room(r);
		if (want > HANDLE_BATCH)
			want = HANDLE_BATCH;
		/* A shared ring's readers cannot see our memory: the chunks are
		 * copied into its pages, and the segment is released as soon as
		 * the call is done with it. */
		unsigned char *from = (unsigned char *)v->iov_base + seg_off;
		unsigned made = c.shm ? ppi_call_pages(&c, pages, (unsigned)want)
		                      : ppi_loan_handles(g, from, (unsigned)want, pages);
		uint32_t kind = c.shm ? PPI_KIND_ANON : PPI_KIND_USER;
		for (unsigned i = 0; i < made; i++) {
			size_t chunk = left < PP_PAGE_SIZE ? left : PP_PAGE_SIZE;
			if (c.shm)
				memcpy(ppi_call_addr(&c, pages[i]), from + (size_t)i * PP_PAGE_SIZE, chunk);
			ppi_call_push(&c, (struct ppi_buf){
				.page = pages[i],
				.offset = 0,
				.len = (uint32_t)chunk,
				/* Not packets even in packet mode, as in Linux. */
				.flags = kind << PPI_BUF_KIND_SHIFT,
			});
			left -= chunk;
			seg_off += chunk;
			placed += chunk;
		}
		if (made < want) {
			err = ENOMEM;
			break;
		}
	}
	if (g)
		ppi_loan_done(g, seg_off); /* the segment we stopped in */
	ppi_call_unlock(&c);
	/* What went in is returned even when the call then failed (as
	 * vmsplice(2) does); SIGPIPE is raised all the same. */
	return ppi_result((ssize_t)placed, placed ? 0 : err, sigpipe, fl);
}
