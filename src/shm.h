/*
 * shm.h - pipes between processes: the layout of a shared memory, which
 * holds one shared pipe or several (pp_pipe_in), and the process-local
 * views every process keeps of each memory and each pipe it holds (shm.c;
 * fork in shared.c, export and named pipes in export.c).
 *
 * A shared memory is two memfds (docs/design.md sections 13 and 14):
 *   ctl   the header, the lock, up to PPI_SHM_RINGS rings, the open
 *         descriptions, the holders, the page table and the slot arrays;
 *         read-write for every holder; sized once, sparse;
 *   data  the pages, indexed from 1; grows by ftruncate as writers need
 *         pages; read-only for processes that only read.
 * Its pipes share the lock, the pages (a page may be named by buffers of
 * several rings: tee and fan-out by reference), the holders and the
 * descriptions; each has its ring and two kernel pipes of its own:
 *   D     writers' token: readers hold its read end, writers its write end;
 *   R     readers' token: writers hold its read end, readers its write end;
 *   E[2]  pp_fd's readiness pipes, one per side, held by every holder.
 * Nothing is ever written to the tokens: they are there so that the kernel
 * hangs up D's read end when no writer is left anywhere, and R's when no
 * reader is.
 *
 * Nothing in shared memory is trusted: another process may write anything
 * over it at any time.  The offsets of the tables are constants of this
 * file, not read from the header; every index read from shared memory is
 * checked against the view's own sizes before it is used.
 */
#ifndef PPI_SHM_H
#define PPI_SHM_H

#include <pthread.h>

#include "ring.h"

#define PPI_SHM_MAGIC 0x70707368u /* "ppsh" */
#define PPI_SHM_VERSION 2u

#define PPI_SHM_RINGS 8u       /* pipes in one memory (a power of two) */
#define PPI_SHM_HOLDERS 1024u  /* processes and exports holding one memory */
#define PPI_SHM_DESCS 64u      /* open descriptions (each pipe's two, pp_open's) */
#define PPI_SHM_MAX_PAGES (1u << 20) /* data pages: 4 GiB */
#define PPI_SHM_MAX_SLOTS (1u << 19) /* ring slots: a 2 GiB pipe */
#define PPI_SHM_GROW 64u       /* pages added to the data memfd at a time */

/* A holder: a process, or an exported descriptor, of the whole memory. */
enum { PPI_HOLDER_FREE = 0, PPI_HOLDER_PROC, PPI_HOLDER_EXPORT, PPI_HOLDER_REAPING };
struct ppi_shm_holder {
	_Atomic uint32_t state;
	_Atomic uint32_t pid;         /* for people reading a dump */
	_Atomic uint32_t sleepers[PPI_SHM_RINGS][2]; /* its threads asleep, per ring and side */
	_Atomic uint32_t reserved[PPI_SHM_RINGS]; /* slots its splices from descriptors hold */
	uint32_t pad[2];
	_Atomic uint32_t handles[PPI_SHM_DESCS]; /* its handles, per description */
};

/* An open description: a pipe (ring), a side and its status flags, shared
 * by every handle made from it (pp_dup, fork, pp_export/pp_import). */
struct ppi_shm_desc {
	_Atomic uint32_t holders; /* holders with handles on it; 0: free */
	_Atomic uint32_t side;
	_Atomic int flags;
	_Atomic uint32_t ring;    /* read masked by PPI_SHM_RINGS - 1 */
};

/* One data page.  owner says where it is: free (no memory behind it, on
 * the free list), idle (on the idle list), named by ring buffers, or held
 * by a holder's call in progress (PPI_PAGE_HELD + holder index).  next is
 * the link in the free or idle list (0 ends it); while the page is in
 * rings it counts the buffers, in every ring of the memory, that name it
 * (tee and fan-out between pipes of one memory add to it). */
enum { PPI_PAGE_FREE = 0, PPI_PAGE_IDLE, PPI_PAGE_RING, PPI_PAGE_HELD = 16 };
struct ppi_shm_page {
	_Atomic uint32_t owner;
	_Atomic uint32_t next; /* list link, or (in rings) the reference count */
};

#define PPI_LOCK_WAITERS 0x80000000u /* a process sleeps on the word: unlock wakes one */
#define PPI_LOCK_WANTED 0x40000000u  /* a process spins for it: the holder lets it in next */
#define PPI_LOCK_FLAGS (PPI_LOCK_WAITERS | PPI_LOCK_WANTED)

struct ppi_shm_hdr {
	uint32_t magic, version;
	/* The lock has a cache line of its own: every lock and unlock writes
	 * it (see struct ppi_ring for the private ring's same reason).
	 * 0, or the holder index + 1 of its owner, | WAITERS | WANTED. */
	_Alignas(PPI_CACHE_LINE) _Atomic uint32_t lock;
	_Atomic uint32_t lock_seq; /* bumped by every taker: has anyone had it since? */
	/* The page lists, written by whoever takes or gives pages. */
	_Alignas(PPI_CACHE_LINE) _Atomic uint32_t data_pages; /* pages in the data memory (0 unused) */
	_Atomic uint32_t idle_head, idle_count;
	_Atomic uint32_t free_head;
	/* The rest changes seldom. */
	_Alignas(PPI_CACHE_LINE) _Atomic uint64_t reaped_ns; /* last reap, CLOCK_MONOTONIC_COARSE */
	_Atomic uint32_t broken;      /* found corrupt: every call fails EIO */
};

/* What each ring has beside struct ppi_ring, in its block. */
struct ppi_shm_rx {
	_Atomic uint32_t fd_used[2];  /* someone uses pp_fd on this side */
	_Atomic uint32_t fd_ready[2]; /* the side's readiness pipe holds bytes */
	/* The ring's slot array, in one word so that a resize publishes it
	 * with one store: bit 8 the slot area (0 or 1), bits 0-7 the log2 of
	 * the ring size. */
	_Atomic uint32_t geom;
	_Atomic uint32_t used;        /* the ring is a pipe (ring 0 always is) */
};

/* A ring's block in ctl: the ring, then its extras. */
struct ppi_shm_rblock {
	struct ppi_ring ring;
	_Alignas(PPI_CACHE_LINE) struct ppi_shm_rx x;
};
_Static_assert(sizeof(struct ppi_shm_rblock) <= 4096, "a ring block is a page");

/* The ctl memfd's layout: fixed, so that no offset is read from it. */
#define PPI_SHM_RING_OFF 4096ul /* ring i's block at PPI_SHM_RING_OFF + i * 4096 */
#define PPI_SHM_DESCS_OFF (PPI_SHM_RING_OFF + PPI_SHM_RINGS * 4096ul)
#define PPI_SHM_HOLDERS_OFF (PPI_SHM_DESCS_OFF + 4096ul)
#define PPI_SHM_PAGES_OFF                                                    \
	(PPI_SHM_HOLDERS_OFF + PPI_SHM_HOLDERS * sizeof(struct ppi_shm_holder))
#define PPI_SHM_SLOTS_OFF                                                    \
	((PPI_SHM_PAGES_OFF + PPI_SHM_MAX_PAGES * sizeof(struct ppi_shm_page) + 4095) & ~4095ul)
#define PPI_SHM_SLOTS_SIZE (PPI_SHM_MAX_SLOTS * sizeof(struct ppi_buf))
/* Ring i's two slot areas follow each other. */
#define PPI_SHM_CTL_SIZE (PPI_SHM_SLOTS_OFF + PPI_SHM_RINGS * 2 * PPI_SHM_SLOTS_SIZE)

/*
 * What one process knows of a shared memory it holds (of any of its
 * pipes).  Everything here is the process's own and trusted; it is written
 * under `mu` (process-local) or, for the fields the ring code reads, once
 * at attach.  Lock order: the memory's shared lock, then mu; never the
 * other way round.
 */
struct ppi_shm;
struct ppi_shm_mem {
	/* Mappings. */
	struct ppi_shm_hdr *hdr;   /* the ctl memfd, all of it */
	unsigned char *data;       /* a reserve of PPI_SHM_MAX_PAGES pages */
	_Atomic uint32_t mapped;   /* data pages mapped so far */
	bool data_rw;              /* data mapped writable (holds a write end) */

	/* Descriptors, all close-on-exec; -1 when not held. */
	int ctl_fd;    /* the ctl memfd, through a description of our own, which
	                * carries our holder's liveness lock */
	int data_fd;   /* read-write, or read-only for a read-only holder */
	int child_fd;  /* fork: the lock description made for the child */
	uint32_t child_holder;

	uint32_t holder;           /* our holder index */
	dev_t dev;                 /* the ctl memfd's identity, to find a view */
	ino_t ino;
	_Atomic bool polite;       /* our last unlock saw PPI_LOCK_WANTED: our next lock
	                            * lets that spinner in first (ppi_shm_lock_slow) */
	_Atomic uint32_t polite_seq; /* lock_seq at that unlock */
	/* Pages a reader of this process finished copying, held by us until
	 * the process's next lock gives them back (under mu). */
	_Atomic uint32_t deferred;
	uint32_t deferred_page[256];
	/* Handles whose pp_close could not have the lock (EIO): still counted
	 * in our holder record, which the others cannot reap while we live;
	 * counted out at the process's next lock (under mu). */
	_Atomic uint32_t unclosed;
	uint32_t unclosed_desc[PPI_SHM_DESCS];
	bool dead;                 /* a fork could not give the child a holder */
	/* The process's views of the memory's pipes, by ring (under mu, and
	 * the process's views lock to add or remove one). */
	struct ppi_shm *pipe[PPI_SHM_RINGS];
	pthread_mutex_t mu;        /* guards the fields above that change */
	struct ppi_shm_mem *next;  /* the process's list of memories */
};

/*
 * What one process knows of one shared pipe it holds: a ring of a memory.
 * Ends point here.  hdr and data repeat the memory's (fixed at attach) so
 * that the hot paths take one pointer fewer.
 */
struct ppi_shm {
	struct ppi_shm_mem *m;
	struct ppi_shm_hdr *hdr;   /* m->hdr */
	unsigned char *data;       /* m->data */
	uint32_t ri;               /* the ring's index in the memory */
	struct ppi_ring *ring;     /* in ctl, ring ri's block */
	struct ppi_shm_rx *rx;     /* the block's extras */

	/* Descriptors, all close-on-exec; -1 when not held (under m->mu). */
	int d_rd, d_wr; /* D's ends we hold: read end while we hold a read end */
	int r_rd, r_wr; /* R's ends: read end while we hold a write end */
	int efd[2];     /* pp_fd's readiness pipes, shared by every holder */
	int epfd[2];    /* pp_fd: our epoll over efd[side] and the token */

	uint32_t handles[2];       /* our handles per side (under m->mu) */
	_Atomic uint64_t checked_ns; /* last look at the tokens */
	_Atomic bool look_now;     /* pp_events saw a token hang up: look at the next lock */
	uint32_t ticks;            /* lock holds by this process (ppi_shm_look) */
	/* Sleeper counts of waits whose relock failed (EIO), per side: still
	 * in the ring and our holder record; counted out at the process's
	 * next lock, so that wakers stop paying a futex call for them. */
	_Atomic uint32_t unslept[2];
};

/* Page address: pages are 1..mapped-1. */
static inline unsigned char *ppi_shm_page(struct ppi_shm *v, uint32_t page)
{
	return v->data + (size_t)page * PP_PAGE_SIZE;
}

static inline struct ppi_shm_holder *ppi_shm_holders(struct ppi_shm *v)
{
	return (struct ppi_shm_holder *)((unsigned char *)v->hdr + PPI_SHM_HOLDERS_OFF);
}

static inline struct ppi_shm_desc *ppi_shm_descs(struct ppi_shm *v)
{
	return (struct ppi_shm_desc *)((unsigned char *)v->hdr + PPI_SHM_DESCS_OFF);
}

static inline struct ppi_shm_page *ppi_shm_pages(struct ppi_shm *v)
{
	return (struct ppi_shm_page *)((unsigned char *)v->hdr + PPI_SHM_PAGES_OFF);
}

static inline struct ppi_shm_rblock *ppi_shm_rblock(struct ppi_shm_hdr *hdr, uint32_t ri)
{
	return (struct ppi_shm_rblock *)((unsigned char *)hdr + PPI_SHM_RING_OFF +
	                                 (ri & (PPI_SHM_RINGS - 1)) * 4096ul);
}

/* Ring ri's slot area 0 or 1. */
static inline size_t ppi_shm_slots_off(uint32_t ri, uint32_t area)
{
	return PPI_SHM_SLOTS_OFF +
	       ((ri & (PPI_SHM_RINGS - 1)) * 2 + (area & 1)) * PPI_SHM_SLOTS_SIZE;
}

static inline struct ppi_buf *ppi_shm_ring_slots(struct ppi_shm_hdr *hdr, uint32_t ri,
                                                 uint32_t area)
{
	return (struct ppi_buf *)((unsigned char *)hdr + ppi_shm_slots_off(ri, area));
}

static inline struct ppi_buf *ppi_shm_slots(struct ppi_shm *v, uint32_t area)
{
	return ppi_shm_ring_slots(v->hdr, v->ri, area);
}

/* ---- shm.c ---------------------------------------------------------- */

/* Make a shared pipe: a view holding one handle on each side (descriptions
 * 0, the read side, and 1, the write side, with status flags fl).  0 or an
 * errno value. */
int ppi_shm_create(int fl, struct ppi_shm **out);
/* Make a shared pipe in member's memory (pp_pipe_in): a view holding one
 * handle on each side, on descriptions desc[0] (read) and desc[1].  0 or
 * an errno value. */
int ppi_shm_pipe_in_mem(struct ppi_shm *member, int fl, struct ppi_shm **out, uint32_t desc[2]);

/* The lock.  ppi_shm_lock returns 0, or EIO (the owner stayed alive and
 * did not let go for a second, or the memory is corrupt); a lock taken
 * from a dead owner is recovered before it returns. */
/* The lock is ours: count a taking (lock_seq, for the polite hand-over
 * of shm.c).  0. */
static inline int ppi_shm_lock_taken(struct ppi_shm *v)
{
	_Atomic uint32_t *seq = &v->hdr->lock_seq;
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
	return 0;
}
int ppi_shm_lock_slow(struct ppi_shm *v);
void ppi_shm_unlock_slow(struct ppi_shm *v, uint32_t was);
static inline int ppi_shm_lock(struct ppi_shm *v)
{
	uint32_t free_word = 0;
	if (likely(!atomic_load_explicit(&v->m->polite, memory_order_relaxed)) &&
	    likely(atomic_compare_exchange_strong_explicit(&v->hdr->lock, &free_word, v->m->holder + 1,
	                                                   memory_order_acquire,
	                                                   memory_order_relaxed)))
		return ppi_shm_lock_taken(v);
	return ppi_shm_lock_slow(v);
}
static inline void ppi_shm_unlock(struct ppi_shm *v)
{
	uint32_t was = atomic_exchange_explicit(&v->hdr->lock, 0, memory_order_release);
	if (unlikely(was & PPI_LOCK_FLAGS))
		ppi_shm_unlock_slow(v, was);
}

/* Mark the pipe broken: every call on it fails from now on.  EIO. */
int ppi_shm_corrupt(struct ppi_shm *v);
bool ppi_shm_buf_bad(struct ppi_shm *v, const struct ppi_buf *b);

/* Under the lock: check the ring's indices against the view, and give the
 * slot array and mask to use.  0 or EIO.  Inline: every call does it. */
/* The slot array and mask a geometry word names (bit 8 the area, bits 0-7
 * the log2 of the size), or NULL when the word is not one we wrote. */
static inline struct ppi_buf *ppi_shm_geom_slots_of(struct ppi_shm_hdr *hdr, uint32_t ri,
                                                    uint32_t geom, uint32_t *mask)
{
	uint32_t order = geom & 0xff;
	if (unlikely(order > 19 || (geom >> 9)))
		return NULL;
	*mask = (1u << order) - 1;
	return ppi_shm_ring_slots(hdr, ri, geom >> 8);
}

static inline struct ppi_buf *ppi_shm_geom_slots(struct ppi_shm *v, uint32_t geom, uint32_t *mask)
{
	return ppi_shm_geom_slots_of(v->hdr, v->ri, geom, mask);
}

/* The same check for ring ri of v's memory (r and rx its block's). */
static inline int ppi_shm_block_check(struct ppi_shm *v, uint32_t ri, struct ppi_ring *r,
                                      struct ppi_shm_rx *rx, struct ppi_buf **bufs,
                                      uint32_t *mask)
{
	if (unlikely(LOAD(v->hdr->broken)))
		return EIO;
	*bufs = ppi_shm_geom_slots_of(v->hdr, ri, LOAD(rx->geom), mask);
	if (unlikely(!*bufs))
		return ppi_shm_corrupt(v);
	uint32_t size = *mask + 1;
	uint32_t used = LOAD(r->head) - LOAD(r->tail);
	uint32_t max = LOAD(r->max_usage);
	if (unlikely(used > size || !max || max > size || LOAD(r->reserved) > max))
		return ppi_shm_corrupt(v);
	return 0;
}

static inline int ppi_shm_ring_check(struct ppi_shm *v, struct ppi_buf **bufs, uint32_t *mask)
{
	return ppi_shm_block_check(v, v->ri, v->ring, v->rx, bufs, mask);
}

/* Under the lock: a slot's buffer, checked (page mapped, bytes within the
 * page, a kind a shared ring holds).  false: corrupt (the pipe is broken). */
/* Does slot b name bytes inside one of the first `pages` data pages, of
 * the one kind a shared ring holds?  (Page 0 is never used.) */
static inline bool ppi_shm_buf_fits(const struct ppi_buf *b, uint32_t pages)
{
	return b->page != 0 && b->page < pages && b->offset <= PP_PAGE_SIZE &&
	       b->len <= PP_PAGE_SIZE - b->offset &&
	       (b->flags >> PPI_BUF_KIND_SHIFT) == PPI_KIND_ANON;
}

static inline bool ppi_shm_buf_ok(struct ppi_shm *v, const struct ppi_buf *b)
{
	if (likely(ppi_shm_buf_fits(b, atomic_load_explicit(&v->m->mapped, memory_order_acquire))))
		return true;
	return !ppi_shm_buf_bad(v, b);
}

/* Pages, under the lock.  Take up to n pages, held by us: how many (fewer
 * when memory or the data memfd ran out).  Give held pages back; put
 * pages that were in the ring back (they are ours from then on). */
unsigned ppi_shm_pages_get(struct ppi_shm *v, uint32_t *pages, unsigned n);
void ppi_shm_pages_put(struct ppi_shm *v, const uint32_t *pages, unsigned n);
void ppi_shm_pages_mark(struct ppi_shm *v, const uint32_t *pages, unsigned n, uint32_t owner);
/* Under the lock: how many buffers, in every ring of the memory, name a
 * page in rings (1 for any other page; a count read as 0 is taken as 1:
 * the page is in a ring). */
static inline uint32_t ppi_shm_page_refs(struct ppi_shm *v, uint32_t page)
{
	if (!page || page >= PPI_SHM_MAX_PAGES)
		return 1;
	struct ppi_shm_page *pg = &ppi_shm_pages(v)[page];
	uint32_t n = LOAD(pg->next);
	return LOAD(pg->owner) == PPI_PAGE_RING && n > 1 ? n : 1;
}
/* Under the lock: n more buffers name this page in rings. */
void ppi_shm_pages_ref(struct ppi_shm *v, uint32_t page, uint32_t n);

/* Without the lock: keep n pages held by us to give back at the next
 * lock (false: no room; the caller gives them back itself).  Under the
 * lock: give them back now. */
bool ppi_shm_defer_put(struct ppi_shm *v, const uint32_t *pages, unsigned n);
void ppi_shm_deferred_put(struct ppi_shm *v);
void ppi_shm_unslept_put(struct ppi_shm *v);

/* Without the lock: a handle on description d was closed but the lock
 * could not be had to count it out.  Under the lock: count such handles
 * out now (a side that closes wakes every sleeper). */
void ppi_shm_unclosed_add(struct ppi_shm *v, uint32_t d);
void ppi_shm_unclosed_put(struct ppi_shm *v);

/* Map data pages up to `page` if another process grew the data memfd.
 * false: the page is past the data memfd (corrupt index). */
bool ppi_shm_map_slow(struct ppi_shm *v, uint32_t page);
static inline bool ppi_shm_map_to(struct ppi_shm *v, uint32_t page)
{
	return likely(page < atomic_load_explicit(&v->m->mapped, memory_order_acquire)) ||
	       ppi_shm_map_slow(v, page);
}

/* Is side gone in every process (its token's other end hung up)?  Looks
 * at most every 50 ms unless `now` is set.  Needs no lock, and reaps
 * nothing: when it saw the hang-up, the process's next lock looks and
 * reaps, so that the call after it agrees (EPIPE after POLLERR). */
bool ppi_shm_side_gone(struct ppi_shm *v, int side, bool now);
/* Under the lock, at most every 50 ms unless `now`: look at the other
 * sides' tokens (one poll) and reap at once if one hung up, else at most
 * once a second.  Returns what ppi_shm_reap does. */
unsigned ppi_shm_look_slow(struct ppi_shm *v, bool now);
static inline unsigned ppi_shm_look(struct ppi_shm *v, bool now)
{
	/* The clock is read once in 64 lock holds: a look costs a system
	 * call, and a writer of small writes takes the lock millions of times
	 * a second.  (ticks is the process's, counted under the lock.) */
	if (unlikely(LOAD(v->look_now)))
		now = true;
	if (likely(!now && (++v->ticks & 63)))
		return 0;
	return ppi_shm_look_slow(v, now);
}
/* Under the lock: reap dead holders, when forced or at most once a second.
 * The sides whose handles, in every process, reaping brought to zero (bit
 * per side): their other side's sleepers are owed a wake. */
unsigned ppi_shm_reap(struct ppi_shm *v, bool force);

/* pp_fd's eventfds: under the lock, after a change, keep each used side's
 * counter non-zero exactly while the side is ready (data_added: signal the
 * read side again for edge-triggered pollers).  ppi_shm_fd: the process's
 * descriptor for side (an epoll instance), or -errno. */
void ppi_shm_token_update(struct ppi_shm *v, bool data_added);
int ppi_shm_fd(struct ppi_shm *v, int side);

/* Under the lock: this process gained (n > 0) or lost (n < 0) handles on
 * description d, of side `side` (the handle's: never read from shared
 * memory).  *closed: the side whose handles, in every process, this
 * brought to zero (bit per side).  *gone: 1 when the process holds no
 * handle on the pipe any more, 2 when on no pipe of its memory either
 * (then its holder record is free); the caller detaches the view once the
 * lock is dropped.  0 or EINVAL. */
int ppi_shm_handles(struct ppi_shm *v, uint32_t d, int side, int n, unsigned *closed,
                    int *gone);
/* After the lock is dropped: close what the process no longer needs of
 * the pipe (side's tokens; the pipe's view when gone, and the memory's
 * when it was the process's last pipe of it). */
void ppi_shm_after_close(struct ppi_shm *v, int side, int gone);
/* Does the process hold no handle on any pipe of v's memory? */
bool ppi_shm_holds_nothing(struct ppi_shm *v);
/* A new description for side with flags: its index, or -1 (EMFILE). */
int ppi_shm_desc_new(struct ppi_shm *v, int side, int flags);
/* Under the lock: holder h holds n more (or fewer) handles on d; the
 * side's total after. */
uint32_t ppi_shm_count(struct ppi_shm *v, uint32_t h, uint32_t d, int n);
/* Under the lock, when a process opens a named pipe (export.c). */
void ppi_shm_opened(struct ppi_shm *v);
/* Lay out a fresh ctl memory.  0 or an errno value. */
int ppi_shm_format(int ctl);
/* Under the lock: our holder reserves (n > 0) or gives back slots. */
void ppi_shm_reserve(struct ppi_shm *v, int n);

/* Liveness and the process's views (shm.c), for shared.c. */
int ppi_shm_hold(int fd, uint32_t h, short type);
int ppi_shm_reopen(int fd, int flags);
/* A free holder record, taken without the lock (a process joining a pipe
 * has no holder to lock it with) as `state`, its byte locked on fd (a
 * description of ctl that only the new holder keeps) before it is taken:
 * its index, or -errno (EMFILE when all are taken).  Its owner frees it
 * with ppi_shm_holder_is(PPI_HOLDER_FREE) under the lock, or while fd's
 * lock still holds it (never after). */
int ppi_shm_holder_new(struct ppi_shm *v, int fd, uint32_t state);
void ppi_shm_holder_is(struct ppi_shm *v, uint32_t h, uint32_t state);
/* Attach the process to pipe ri of a shared memory as a holder of side (see shm.c);
 * the handle itself is added by the caller.  0 or an errno value. */
int ppi_shm_attach(int ctl, int data, int side, uint32_t ri, const int tok[2],
                   const int rdy[2], struct ppi_shm **out);
void ppi_shm_holder_copy(struct ppi_shm *v, uint32_t from, uint32_t to);
void ppi_shm_views_lock(void);
void ppi_shm_views_unlock(void);
struct ppi_shm_mem *ppi_shm_mems(void);
void ppi_shm_detach(struct ppi_shm *v);
uint64_t ppi_now_ns(void);

int ppi_shm_stats(struct ppi_shm *v, struct pp_shared_stats *st);

#endif
