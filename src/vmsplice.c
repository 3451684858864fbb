/*
 * vmsplice.c - pp_vmsplice: the caller's memory goes into a pipe as
 * buffers, without copying, and comes back through a release callback.
 *
 * Each iovec segment is cut into chunks of at most a page; each chunk
 * becomes a buffer of kind PP_KIND_USER whose handle names the caller's
 * bytes.  A segment has one `gift` record counting the references to its
 * chunks' handles, plus one held by pp_vmsplice itself while it works; when
 * the count reaches zero (every pipe that got a chunk, tee and fan-out
 * included, has consumed it) the callback runs once for the segment, with
 * the part of it that went in.  User buffers are never merged into, so no
 * write can change the caller's bytes; the caller must not change them
 * until the callback.
 *
 * The same records carry the pages of a file that splice_fd.c maps in
 * (PP_KIND_FILE): their release unmaps them.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

/* Most handles pp_vmsplice makes under one hold of the pool lock. */
#define HANDLE_BATCH 64

#define RELAXED memory_order_relaxed
#define LOAD(x) atomic_load_explicit(&(x), RELAXED)

struct gift {
	void (*release)(void *arg, const struct iovec *iov);
	void *arg;
	struct iovec seg; /* the part of the caller's segment that went in */
	_Atomic uint32_t refs;
};

/* pp_vmsplice's own reference, dropped when it is done with the segment:
 * the release is due only if some of the segment went in. */
static void gift_done(struct gift *g, size_t placed)
{
	if (!placed) {
		free(g); /* no chunk took a reference: no release is due */
		return;
	}
	g->seg.iov_len = placed;
	pp_gift_put(g);
}

static void unmap_release(void *arg, const struct iovec *iov)
{
	(void)arg;
	munmap(iov->iov_base, iov->iov_len);
}

/* A record for seg holding one reference (its maker's); NULL with ENOMEM. */
static struct gift *gift_new(void (*release)(void *, const struct iovec *), void *arg,
                             struct iovec seg)
{
	struct gift *g = malloc(sizeof *g);
	if (!g) {
		errno = ENOMEM;
		return NULL;
	}
	*g = (struct gift){ .release = release, .arg = arg, .seg = seg };
	atomic_init(&g->refs, 1);
	return g;
}

void *pp_gift_new_unmap(void *addr, size_t len)
{
	return gift_new(unmap_release, NULL, (struct iovec){ addr, len });
}

void pp_gift_ref(void *p, unsigned n)
{
	struct gift *g = p;
	atomic_fetch_add_explicit(&g->refs, n, RELAXED);
}

void pp_gift_put(void *p)
{
	struct gift *g = p;
	if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (g->release)
		g->release(g->arg, &g->seg);
	free(g);
}

PP_API ssize_t pp_vmsplice(struct pp_end *out, const struct iovec *iov, unsigned long n,
                           unsigned flags, void (*release)(void *arg, const struct iovec *iov),
                           void *arg)
{
	struct pp_ring *r = pp_end_ring_side(out, PP_WRITE);
	if (!r)
		return -1;
	if (n > IOV_MAX ||
	    (flags & ~(PP_SPLICE_NONBLOCK | PP_SPLICE_MORE | PP_SPLICE_MOVE | PP_SPLICE_GIFT))) {
		errno = EINVAL;
		return -1;
	}
	if (n && !iov) {
		errno = EFAULT;
		return -1;
	}
	int fl = LOAD(r->flags[PP_WRITE]);
	bool nonblock = (flags & PP_SPLICE_NONBLOCK) || (fl & PP_NONBLOCK);
	size_t placed = 0;
	unsigned long seg = 0;
	size_t seg_off = 0;      /* bytes of iov[seg] already placed */
	struct gift *g = NULL;   /* the current segment's, once it has one */
	bool wake_rd = false, sigpipe = false, waited = false;
	int err = 0;

	pp_lock(&r->lock);
	while (seg < n) {
		const struct iovec *v = &iov[seg];
		if (seg_off == v->iov_len) { /* segment done (or empty) */
			if (g) {
				gift_done(g, seg_off);
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
		if (!LOAD(r->handles[PP_READ])) {
			sigpipe = true;
			err = EPIPE;
			break;
		}
		if (placed >= PP_MAX_RW)
			break; /* the read(2)/write(2) clamp, as import_iovec has it */
		if (!pp_ring_room(r)) {
			/* Like Linux: wait only for the first room; once something
			 * went in, return what fitted. */
			if (nonblock || placed) {
				err = EAGAIN;
				break;
			}
			err = pp_ring_wait(r, PP_WRITE, wake_rd ? PP_READ : -1, placed > 0);
			wake_rd = false;
			if (err)
				break;
			waited = true;
			continue;
		}
		if (!g && !(g = gift_new(release, arg, *v))) {
			err = ENOMEM;
			break;
		}
		/* A handle per page-sized chunk of what is left of the segment,
		 * as many as fit, made under one hold of the pool lock. */
		size_t left = v->iov_len - seg_off;
		if (left > PP_MAX_RW - placed)
			left = PP_MAX_RW - placed;
		uint32_t pages[HANDLE_BATCH];
		size_t want = (left + PP_PAGE_SIZE - 1) / PP_PAGE_SIZE;
		if (want > pp_ring_room(r))
			want = pp_ring_room(r);
		if (want > HANDLE_BATCH)
			want = HANDLE_BATCH;
		unsigned made = pp_handle_user_many((unsigned char *)v->iov_base + seg_off,
		                                    (unsigned)want, g, pages);
		pp_gift_ref(g, made); /* one for each handle */
		for (unsigned i = 0; i < made; i++) {
			size_t chunk = left < PP_PAGE_SIZE ? left : PP_PAGE_SIZE;
			pp_ring_push_buf(r, (struct pp_buf){
				.page = pages[i],
				.offset = 0,
				.len = (uint32_t)chunk,
				/* Not packets even in packet mode, as in Linux. */
				.flags = PP_KIND_USER << PP_BUF_KIND_SHIFT,
			}, &wake_rd);
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
		gift_done(g, seg_off); /* the segment we stopped in */
	pp_ring_efd_update(r, placed > 0);
	bool pass = waited && pp_ring_pass_wake(r, PP_WRITE);
	pp_unlock(&r->lock);
	if (wake_rd)
		pp_futex_wake(&r->seq[PP_READ], 1);
	if (pass)
		pp_futex_wake(&r->seq[PP_WRITE], 1);
	if (sigpipe && !(fl & PP_NOSIGPIPE))
		raise(SIGPIPE);
	if (placed)
		return (ssize_t)placed;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}
