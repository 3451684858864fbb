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
 * A drained page goes to the idle list while fewer than cache_max pages are
 * idle, otherwise straight back to the system (munmap).  So an empty pipe
 * holds no pages, and all pipes together keep at most cache_max idle ones.
 *
 * Lock rule: pool_lock guards everything in `pool` and every table entry's
 * addr/next.  It is taken inside a ring lock, never the other way round.
 */
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
} pool = { .next_new = 1, .cache_max = 64 };


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

static void handle_release(uint32_t h)
{
	munmap(pp_page_slot(h)->addr, PP_PAGE_SIZE);
	handle_free(h);
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
		void *p = mmap(NULL, PP_PAGE_SIZE, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 0;
		h = handle_new();
		if (!h) {
			munmap(p, PP_PAGE_SIZE);
			return 0;
		}
		pp_page_slot(h)->addr = p;
	}
	pool.in_use++;
	atomic_store_explicit(&pp_page_slot(h)->refs, 1, memory_order_relaxed);
	return h;
}

static void page_give(uint32_t h)
{
	pool.in_use--;
	if (pool.idle < pool.cache_max) {
		pp_page_slot(h)->next = pool.idle_head;
		pool.idle_head = h;
		pool.idle++;
	} else {
		handle_release(h);
	}
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
static void anon_get(uint32_t page)
{
	pp_page_ref(page);
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
 * Caller memory handed in by pp_vmsplice: the handle names the caller's
 * bytes, and `owner` the record whose release callback runs when the last
 * reference to the last of its handles goes (vmsplice.c).  Never merged
 * into: the bytes are the caller's.  These handles are not pool pages and
 * do not count in pages_in_use.
 */
uint32_t pp_handle_user(void *addr, void *owner)
{
	pp_lock(&pool_lock);
	uint32_t h = handle_new();
	if (h) {
		struct pp_page_slot *s = pp_page_slot(h);
		s->addr = addr;
		s->owner = owner;
		atomic_store_explicit(&s->refs, 1, memory_order_relaxed);
	}
	pp_unlock(&pool_lock);
	if (!h)
		errno = ENOMEM;
	return h;
}

static void user_put(const uint32_t *pages, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct pp_page_slot *s = pp_page_slot(pages[i]);
		if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
			continue;
		void *owner = s->owner;
		pp_lock(&pool_lock);
		handle_free(pages[i]);
		pp_unlock(&pool_lock);
		pp_gift_put(owner);
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

/* Give back idle pages until at most `keep` remain.  pool_lock held. */
static long trim_to(long keep)
{
	long n = 0;
	while (pool.idle > keep) {
		uint32_t h = pool.idle_head;
		pool.idle_head = pp_page_slot(h)->next;
		pool.idle--;
		handle_release(h);
		n++;
	}
	return n;
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
		trim_to(pages);
	pp_unlock(&pool_lock);
	return old;
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

