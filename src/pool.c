/*
 * pool.c - the page pool every pipe of the process takes its pages from.
 *
 * A page is named by a 32-bit handle, an index into a two-level table
 * (pp_page_dir) whose entries hold the page's address.  The ring stores
 * handles only, so its state is position-independent.
 *
 * Each handle is in one of three states:
 *   in use  - a ring slot names it; addr is its page;
 *   idle    - drained, kept mapped for reuse, on the idle list;
 *   free    - no page behind it (addr NULL), on the free-handle list.
 * A drained page goes to the idle list while the idle pages number fewer
 * than spare_max(), otherwise straight back to the system (munmap).
 * spare_max() is the room left in the open pipes (pipe_pages, the capacity
 * of every open pipe in pages, less the pages in use), or CACHE_FLOOR if
 * that is more, and never above cache_max (no bound by default; the
 * caller's pp_pool_setcache).  So an empty pipe holds no pages; the pool
 * holds no more pages, in use and idle, than the open pipes can hold, or
 * CACHE_FLOOR idle beyond those in use; once the pipes have closed it keeps
 * at most CACHE_FLOOR idle (the one exception: a page the system refuses
 * to unmap stays idle, see handle_release).  Fresh pages are mapped in
 * batches once many are in use (map_batch); the extra pages of a batch are
 * idle ones like any other.
 *
 * Why the bound follows the pipes' room: a pipe deeper than a fixed cache
 * (pp_setsize to 1 MiB is 256 pages; the cache was 64) is drained in runs
 * while its writer refills it, and the pages in use swing between a few
 * and hundreds.  With a fixed bound every page beyond it was unmapped
 * as the reader drained and mapped afresh by the writer a moment later: an
 * munmap (a TLB shootdown on every CPU the process runs on) and a page
 * fault per page.  Measured, a writer -> 1 MiB pipe -> pp_fanout -> 1 MiB
 * pipe -> zero-copy reader ran at 1.9-2.9 GB/s that way, and at 17-28 GB/s
 * with the pages kept.  A bound on what the pipes can hold needs no clock
 * and no guess of a recent peak, drops as soon as a deep pipe is closed or
 * shrunk, and asks the caller for nothing: the memory it may keep is what
 * the caller's pipe sizes already allow.  A cache_max the caller sets is a
 * hard bound on top (0: keep nothing).
 *
 * Lock rule: pool_lock guards everything in `pool` and every table entry's
 * addr/next.  It is taken inside a ring lock, never the other way round.
 */
#include <limits.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

struct pp_page_slot *pp_page_dir[PP_DIR_ROOT];

static struct pp_lock pool_lock;
static struct {
	uint32_t idle_head;  /* idle list, linked through next; 0 ends it */
	uint32_t free_head;  /* free-handle list */
	uint32_t next_new;   /* first handle never used; handle 0 is reserved */
	long in_use;
	long idle;
	long cache_max;
	long limit;
	long pipe_pages; /* capacity of all open pipes, in pages */
} pool = { .next_new = 1, .cache_max = LONG_MAX };

/* Idle pages kept even when the open pipes have no room left: enough to
 * serve a few default pipes (16 pages each) without a system call. */
#define CACHE_FLOOR 64


/* A handle with no page behind it, or 0.  Called with pool_lock held. */
static uint32_t handle_new(void)
{
	uint32_t h = pool.free_head;
	if (h) {
		pool.free_head = pp_page_slot(h)->next;
		return h;
	}
	h = pool.next_new;
	if (h >= PP_DIR_ROOT * PP_DIR_LEAF)
		return 0;
	if (!pp_page_dir[h >> PP_DIR_LEAF_BITS]) {
		struct pp_page_slot *leaf = calloc(PP_DIR_LEAF, sizeof *leaf);
		if (!leaf)
			return 0;
		pp_page_dir[h >> PP_DIR_LEAF_BITS] = leaf;
	}
	pool.next_new = h + 1;
	return h;
}

/* Put a handle back on the free list.  pool_lock held. */
static void handle_free(uint32_t h)
{
	struct pp_page_slot *s = pp_page_slot(h);
	s->addr = NULL;
	s->owner = NULL;
	s->next = pool.free_head;
	pool.free_head = h;
}

/* Unmap a page and free its handle.  false if munmap failed: a page cut
 * out of a batch mapping splits it, which fails with ENOMEM once the
 * process is at vm.max_map_count.  The caller then keeps the page idle, so
 * that it is still accounted for and can be reused or released later. */
static bool handle_release(uint32_t h)
{
	if (munmap(pp_page_slot(h)->addr, PP_PAGE_SIZE) != 0)
		return false;
	handle_free(h);
	return true;
}

static void idle_push(uint32_t h)
{
	pp_page_slot(h)->next = pool.idle_head;
	pool.idle_head = h;
	pool.idle++;
}

/* How many idle pages the pool may keep while in_use pages are in use
 * (see the top of the file). */
static long spare_max(long in_use)
{
	long room = pool.pipe_pages - in_use;
	if (room < CACHE_FLOOR)
		room = CACHE_FLOOR;
	return room < pool.cache_max ? room : pool.cache_max;
}

/* Give back idle pages until at most `keep` remain.  pool_lock held. */
static long trim_to(long keep)
{
	long n = 0;
	while (pool.idle > keep) {
		uint32_t h = pool.idle_head;
		pool.idle_head = pp_page_slot(h)->next;
		pool.idle--;
		if (!handle_release(h)) { /* keep it; the system will not split */
			idle_push(h);
			break;
		}
		n++;
	}
	return n;
}

/*
 * How many pages to map at once when the idle list is empty.  A pipe that
 * grows deep (the command holds 100k pages behind a slow output) would
 * otherwise pay one mmap and one page fault per page, and those were most
 * of its cost.  So the batch grows with the pages in use (an eighth of
 * them, at most PP_MAP_BATCH): a small user still maps one page at a time
 * and holds nothing extra.  The pages beyond the first go to the idle
 * list, so the batch is also bounded by the room under cache_max there,
 * and by the limit.  test/fuzz/fuzz_ops.c models this rule.
 */
#define PP_MAP_BATCH 64

static long map_batch(void)
{
	long n = pool.in_use / 8;
	if (n > PP_MAP_BATCH)
		n = PP_MAP_BATCH;
	if (n > spare_max(pool.in_use + 1) - pool.idle + 1)
		n = spare_max(pool.in_use + 1) - pool.idle + 1;
	if (pool.limit && n > pool.limit - pool.in_use)
		n = pool.limit - pool.in_use;
	return n < 1 ? 1 : n;
}

/* Map a batch of fresh pages (populated in one call, not one fault each):
 * the first is returned, the rest go on the idle list.  pool_lock held.
 * 0 when nothing could be had. */
static uint32_t page_map(void)
{
	long n = map_batch();
	unsigned char *p = mmap(NULL, (size_t)n * PP_PAGE_SIZE, PROT_READ | PROT_WRITE,
	                        MAP_PRIVATE | MAP_ANONYMOUS | (n > 1 ? MAP_POPULATE : 0),
	                        -1, 0);
	if (p == MAP_FAILED)
		return 0;
	uint32_t first = 0;
	for (long i = 0; i < n; i++) {
		unsigned char *a = p + (size_t)i * PP_PAGE_SIZE;
		uint32_t h = handle_new();
		if (!h) { /* out of handles: give back what has none */
			munmap(a, (size_t)(n - i) * PP_PAGE_SIZE);
			break;
		}
		pp_page_slot(h)->addr = a;
		if (!first) {
			first = h;
			continue;
		}
		idle_push(h); /* the rest wait on the idle list */
	}
	return first;
}

/* Take one page, from the idle list or fresh from the system.  pool_lock
 * held.  0 with errno ENOMEM when the limit is reached or none can be had. */
static uint32_t page_take(void)
{
	uint32_t h;
	if (pool.limit && pool.in_use >= pool.limit)
		return 0;
	h = pool.idle_head;
	if (h) {
		pool.idle_head = pp_page_slot(h)->next;
		pool.idle--;
	} else {
		h = page_map();
		if (!h)
			return 0;
	}
	pool.in_use++;
	atomic_store_explicit(&pp_page_slot(h)->refs, 1, memory_order_relaxed);
	return h;
}

/* A drained page goes idle, unless the idle list is at spare_max(). */
static void page_give(uint32_t h)
{
	pool.in_use--;
	idle_push(h);
	trim_to(spare_max(pool.in_use));
}

unsigned pp_page_get_many(uint32_t *pages, unsigned n)
{
	unsigned got = 0;
	pp_lock(&pool_lock);
	while (got < n && (pages[got] = page_take()))
		got++;
	pp_unlock(&pool_lock);
	if (!got)
		errno = ENOMEM;
	return got;
}

void pp_page_put_many(const uint32_t *pages, unsigned n)
{
	bool locked = false;
	for (unsigned i = 0; i < n; i++) {
		/* acq_rel: the last holder must see every other holder's use
		 * of the page done before it goes back for reuse. */
		if (atomic_fetch_sub_explicit(&pp_page_slot(pages[i])->refs, 1,
		                              memory_order_acq_rel) != 1)
			continue;
		if (!locked) {
			pp_lock(&pool_lock);
			locked = true;
		}
		page_give(pages[i]);
	}
	if (locked)
		pp_unlock(&pool_lock);
}

/* Anonymous pages: the pool's own. */
static void anon_get(uint32_t page, uint32_t n)
{
	pp_page_ref(page, n);
}

static bool anon_owned(uint32_t page)
{
	return pp_page_refs(page) == 1;
}

static const struct pp_buf_ops anon_ops = {
	.get = anon_get,
	.put = pp_page_put_many,
	.owned = anon_owned,
};

/*
 * Caller memory handed in by pp_vmsplice, and file pages mapped in by
 * pp_splice_from_fd: a handle names the bytes, and `owner` the record whose
 * release runs when the last reference to the last of its handles goes
 * (vmsplice.c).  Never merged into: the bytes are not the pipe's.  These
 * handles are not pool pages and do not count in pages_in_use.
 *
 * Handles for n pages from addr, each naming owner, into pages[], under one
 * hold of the pool lock; how many were made (fewer than n, with errno
 * ENOMEM, when handles ran out).
 */
unsigned pp_handle_user_many(void *addr, unsigned n, void *owner, uint32_t *pages)
{
	unsigned made = 0;
	pp_lock(&pool_lock);
	for (; made < n; made++) {
		uint32_t h = handle_new();
		if (!h)
			break;
		struct pp_page_slot *s = pp_page_slot(h);
		s->addr = (unsigned char *)addr + (size_t)made * PP_PAGE_SIZE;
		s->owner = owner;
		atomic_store_explicit(&s->refs, 1, memory_order_relaxed);
		pages[made] = h;
	}
	pp_unlock(&pool_lock);
	if (made < n)
		errno = ENOMEM;
	return made;
}

#define PP_PUT_BATCH 64

/* Drop a reference each; the handles whose last one went are freed under
 * one hold of the pool lock, and their owners' records dropped after it
 * (a record's release may run the caller's callback). */
static void user_put(const uint32_t *pages, unsigned n)
{
	void *owners[PP_PUT_BATCH];
	uint32_t pages_gone[PP_PUT_BATCH];
	unsigned gone = 0;
	for (unsigned i = 0; i < n; i++) {
		struct pp_page_slot *s = pp_page_slot(pages[i]);
		if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
			pages_gone[gone] = pages[i];
			owners[gone++] = s->owner;
		}
		if (gone && (gone == PP_PUT_BATCH || i + 1 == n)) {
			pp_lock(&pool_lock);
			for (unsigned j = 0; j < gone; j++)
				handle_free(pages_gone[j]);
			pp_unlock(&pool_lock);
			for (unsigned j = 0; j < gone; j++)
				pp_gift_put(owners[j]);
			gone = 0;
		}
	}
}

static bool never_owned(uint32_t page)
{
	(void)page;
	return false;
}

static const struct pp_buf_ops user_ops = {
	.get = anon_get, /* a reference is a reference */
	.put = user_put,
	.owned = never_owned,
};

const struct pp_buf_ops *const pp_buf_kinds[PP_KINDS] = {
	[PP_KIND_ANON] = &anon_ops,
	[PP_KIND_USER] = &user_ops,
	/* Pages of a file mapped in by pp_splice_from_fd (splice_fd.c): held
	 * like caller memory, through a gift record whose release unmaps them
	 * once the last reference goes; never merged into, so no write reaches
	 * the file (the mapping is read-only besides). */
	[PP_KIND_FILE] = &user_ops,
};

uint32_t pp_page_get(void)
{
	uint32_t h;
	return pp_page_get_many(&h, 1) ? h : 0;
}

void pp_page_put(uint32_t h)
{
	pp_page_put_many(&h, 1);
}


PP_API int pp_pool_stats(struct pp_pool_stats *st)
{
	if (!st) {
		errno = EFAULT;
		return -1;
	}
	pp_lock(&pool_lock);
	st->pages_in_use = pool.in_use;
	st->pages_cached = pool.idle;
	st->cache_max = pool.cache_max;
	st->limit = pool.limit;
	st->pipe_pages = pool.pipe_pages;
	pp_unlock(&pool_lock);
	return 0;
}

/* Set one of the pool's bounds; the old value, or -1 with EINVAL. */
static long pool_set(long *bound, long pages, bool trim)
{
	long old;
	if (pages < 0) {
		errno = EINVAL;
		return -1;
	}
	pp_lock(&pool_lock);
	old = *bound;
	*bound = pages;
	if (trim)
		trim_to(spare_max(pool.in_use));
	pp_unlock(&pool_lock);
	return old;
}

/* A pipe was made (pages > 0), resized, or freed (pages < 0): its
 * capacity changes the room spare_max() allows for. */
void pp_pool_pipe_pages(long pages)
{
	if (!pages) /* a resize to the same size */
		return;
	pp_lock(&pool_lock);
	pool.pipe_pages += pages;
	if (pages < 0)
		trim_to(spare_max(pool.in_use));
	pp_unlock(&pool_lock);
}

PP_API long pp_pool_setcache(long pages)
{
	return pool_set(&pool.cache_max, pages, true);
}

PP_API long pp_pool_setlimit(long pages)
{
	return pool_set(&pool.limit, pages, false);
}

PP_API long pp_pool_trim(void)
{
	long n;
	pp_lock(&pool_lock);
	n = trim_to(0);
	pp_unlock(&pool_lock);
	return n;
}

