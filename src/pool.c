/*
 * pool.c - the page pool every pipe of the process takes its pages from.
 *
 * A page is named by a 32-bit handle, an index into a two-level table
 * (ppi_page_dir) whose entries hold the page's address.  The ring stores
 * handles only, so its state is position-independent.
 *
 * Each handle is in one of three states:
 *   in use  - a ring slot names it; addr is its page;
 *   idle    - drained, kept mapped for reuse, on the idle list;
 *   free    - no page behind it (addr NULL), on the free-handle list.
 * Handles for memory the pool does not own (caller memory, mapped file
 * pages) are made and freed here too (ppi_handles_new/free), with the
 * loan pointer their kind gives; they go from in use straight back to free
 * and never count as pages in use.  The pool never asks what a loan is.
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

#include "lock.h"
#include "pool.h"

struct ppi_page_slot *ppi_page_dir[PPI_DIR_ROOT];

static struct ppi_lock pool_lock;
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
		pool.free_head = ppi_page_slot(h)->next;
		return h;
	}
	h = pool.next_new;
	if (h >= PPI_DIR_ROOT * PPI_DIR_LEAF)
		return 0;
	if (!ppi_page_dir[h >> PPI_DIR_LEAF_BITS]) {
		struct ppi_page_slot *leaf = calloc(PPI_DIR_LEAF, sizeof *leaf);
		if (!leaf)
			return 0;
		ppi_page_dir[h >> PPI_DIR_LEAF_BITS] = leaf;
	}
	pool.next_new = h + 1;
	return h;
}

/* Put a handle back on the free list.  pool_lock held. */
static void handle_free(uint32_t h)
{
	struct ppi_page_slot *s = ppi_page_slot(h);
	s->addr = NULL;
	s->loan = NULL;
	s->next = pool.free_head;
	pool.free_head = h;
}

/* Unmap a page and free its handle.  false if munmap failed: a page cut
 * out of a batch mapping splits it, which fails with ENOMEM once the
 * process is at vm.max_map_count.  The caller then keeps the page idle, so
 * that it is still accounted for and can be reused or released later. */
static bool handle_release(uint32_t h)
{
	if (munmap(ppi_page_slot(h)->addr, PP_PAGE_SIZE) != 0)
		return false;
	handle_free(h);
	return true;
}

static void idle_push(uint32_t h)
{
	ppi_page_slot(h)->next = pool.idle_head;
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
		pool.idle_head = ppi_page_slot(h)->next;
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
 * them, at most PPI_MAP_BATCH): a small user still maps one page at a time
 * and holds nothing extra.  The pages beyond the first go to the idle
 * list, so the batch is also bounded by the room under cache_max there,
 * and by the limit.  test/fuzz/fuzz_ops.c models this rule.
 */
#define PPI_MAP_BATCH 64

static long map_batch(void)
{
	long n = pool.in_use / 8;
	if (n > PPI_MAP_BATCH)
		n = PPI_MAP_BATCH;
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
		ppi_page_slot(h)->addr = a;
		if (!first) {
			first = h;
			continue;
		}
		idle_push(h); /* the rest wait on the idle list */
	}
	return first;
}

/* Take one page, from the idle list or fresh from the system.  pool_lock
 * held.  0 when the limit is reached or none can be had. */
static uint32_t page_take(void)
{
	uint32_t h;
	if (pool.limit && pool.in_use >= pool.limit)
		return 0;
	h = pool.idle_head;
	if (h) {
		pool.idle_head = ppi_page_slot(h)->next;
		pool.idle--;
	} else {
		h = page_map();
		if (!h)
			return 0;
	}
	pool.in_use++;
	atomic_store_explicit(&ppi_page_slot(h)->refs, 1, memory_order_relaxed);
	return h;
}

/* A drained page goes idle, unless the idle list is at spare_max(). */
static void page_give(uint32_t h)
{
	pool.in_use--;
	idle_push(h);
	trim_to(spare_max(pool.in_use));
}

/*
 * Handles for memory that is not the pool's (pool.h): made and freed here,
 * held and released by the buffer kinds (kinds.c).
 */
unsigned ppi_handles_new(void *addr, unsigned n, struct ppi_loan *loan, uint32_t *pages)
{
	unsigned made = 0;
	ppi_lock(&pool_lock);
	for (; made < n; made++) {
		uint32_t h = handle_new();
		if (!h)
			break;
		struct ppi_page_slot *s = ppi_page_slot(h);
		s->addr = (unsigned char *)addr + (size_t)made * PP_PAGE_SIZE;
		s->loan = loan;
		atomic_store_explicit(&s->refs, 1, memory_order_relaxed);
		pages[made] = h;
	}
	ppi_unlock(&pool_lock);
	return made;
}

void ppi_handles_free(const uint32_t *pages, unsigned n)
{
	ppi_lock(&pool_lock);
	for (unsigned i = 0; i < n; i++)
		handle_free(pages[i]);
	ppi_unlock(&pool_lock);
}

/* pages[0..n) in address order (an insertion sort: n is a batch). */
static void sort_by_addr(uint32_t *pages, unsigned n)
{
	for (unsigned i = 1; i < n; i++) {
		uint32_t h = pages[i];
		void *a = ppi_page_slot(h)->addr;
		unsigned j = i;
		for (; j > 0 && (uintptr_t)ppi_page_slot(pages[j - 1])->addr > (uintptr_t)a; j--)
			pages[j] = pages[j - 1];
		pages[j] = h;
	}
}

/* A batch in address order, as a shared memory hands out its pages
 * (shm.c's ppi_shm_pages_get): adjacent pages, which fresh mappings often
 * are, then take one copy each (call.h's ppi_call_run). */
unsigned ppi_page_get_many(uint32_t *pages, unsigned n)
{
	unsigned got = 0;
	ppi_lock(&pool_lock);
	while (got < n && (pages[got] = page_take()))
		got++;
	sort_by_addr(pages, got);
	ppi_unlock(&pool_lock);
	return got;
}

void ppi_page_put_many(const uint32_t *pages, unsigned n)
{
	bool locked = false;
	/* Last first: the idle list is a stack, so they come off it in the
	 * order they were drained. */
	for (unsigned i = n; i-- > 0;) {
		if (!ppi_page_unref(pages[i]))
			continue;
		if (!locked) {
			ppi_lock(&pool_lock);
			locked = true;
		}
		page_give(pages[i]);
	}
	if (locked)
		ppi_unlock(&pool_lock);
}

uint32_t ppi_page_get(void)
{
	uint32_t h;
	return ppi_page_get_many(&h, 1) ? h : 0;
}

void ppi_page_put(uint32_t h)
{
	ppi_page_put_many(&h, 1);
}


void ppi_pool_fork(bool take)
{
	if (take)
		ppi_lock(&pool_lock);
	else
		ppi_unlock(&pool_lock);
}

PPI_API int pp_pool_stats(struct pp_pool_stats *st)
{
	if (!st) {
		errno = EFAULT;
		return -1;
	}
	ppi_lock(&pool_lock);
	st->pages_in_use = pool.in_use;
	st->pages_cached = pool.idle;
	st->cache_max = pool.cache_max;
	st->limit = pool.limit;
	st->pipe_pages = pool.pipe_pages;
	ppi_unlock(&pool_lock);
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
	ppi_lock(&pool_lock);
	old = *bound;
	*bound = pages;
	if (trim)
		trim_to(spare_max(pool.in_use));
	ppi_unlock(&pool_lock);
	return old;
}

/* A pipe was made (pages > 0), resized, or freed (pages < 0): its
 * capacity changes the room spare_max() allows for. */
void ppi_pool_pipe_pages(long pages)
{
	if (!pages) /* a resize to the same size */
		return;
	ppi_lock(&pool_lock);
	pool.pipe_pages += pages;
	if (pages < 0)
		trim_to(spare_max(pool.in_use));
	ppi_unlock(&pool_lock);
}

PPI_API long pp_pool_setcache(long pages)
{
	return pool_set(&pool.cache_max, pages, true);
}

PPI_API long pp_pool_setlimit(long pages)
{
	return pool_set(&pool.limit, pages, false);
}

PPI_API long pp_pool_trim(void)
{
	long n;
	ppi_lock(&pool_lock);
	n = trim_to(0);
	ppi_unlock(&pool_lock);
	return n;
}

