/*
 * shm.c - a shared memory and its pipes: making them (pp_pipe with
 * PP_SHARED, pp_pipe_in), mapping them in a process, the memory's lock,
 * its pages and their reference counts, its holders and their liveness,
 * retiring a pipe, and the token pipes behind pp_fd (docs/design.md
 * sections 13 and 14).
 *
 * The ring code runs unchanged on a shared ring; it comes here through its
 * struct ppi_call for what differs: the lock, the pages, the checks of
 * what it reads from shared memory, and waking pollers.  What lives here
 * trusts nothing it reads from the ctl or data memory: indices are checked
 * against this process's view, loops are bounded by the view's limits, and
 * a value that fails a check marks the pipe broken (every call then fails
 * with EIO).
 *
 * Liveness.  Each holder has a byte of the ctl memfd read-locked with an
 * open-file-description lock, on a description only it holds; the kernel
 * drops the lock when that description's last descriptor closes (exit,
 * kill, exec, or the last copy of an exported descriptor).  A holder whose
 * byte no lock covers is dead, and reaping gives back what it held.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm.h"

#define MS 1000000ull
#define CHECK_EVERY_NS (50 * MS) /* look at the tokens */
#define REAP_EVERY_NS (1000 * MS) /* reap dead holders unasked */
#define LOCK_GIVE_UP_NS (1000 * MS)
#define LOCK_LOOK_NS (10 * MS)    /* a lock waiter looks at the owner */

uint64_t ppi_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t coarse_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static struct timespec deadline_in(uint64_t ns)
{
	uint64_t at = ppi_now_ns() + ns;
	return (struct timespec){ .tv_sec = (time_t)(at / 1000000000ull),
		                  .tv_nsec = (long)(at % 1000000000ull) };
}

/* The pipe is corrupt: every call fails from now on. */
static int broken(struct ppi_shm *v)
{
	atomic_store_explicit(&v->hdr->broken, 1, RELAXED);
	return EIO;
}

/* ---- liveness ------------------------------------------------------------ */

/* Lock (or, with F_UNLCK, unlock) holder h's byte on description fd. */
int ppi_shm_hold(int fd, uint32_t h, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = h, .l_len = 1 };
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : errno;
}

/* Does anyone hold holder h's byte?  Our own description's locks do not
 * count (so do not ask about our own holder). */
static bool holder_alive(struct ppi_shm *v, uint32_t h)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = h, .l_len = 1 };
	if (fcntl(v->m->ctl_fd, F_OFD_GETLK, &fl) != 0)
		return true; /* cannot tell: assume alive */
	return fl.l_type != F_UNLCK;
}

/* A description of our own of a memfd, through /proc: its locks are ours. */
int ppi_shm_reopen(int fd, int flags)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	int own = open(path, flags | O_CLOEXEC);
	if (own < 0)
		return -(errno == ENOENT ? ENOSYS : errno);
	return own;
}

/* ---- mapping -------------------------------------------------------------- */

bool ppi_shm_map_slow(struct ppi_shm *v, uint32_t page)
{
	if (page >= PPI_SHM_MAX_PAGES)
		return false;
	pthread_mutex_lock(&v->m->mu);
	uint32_t mapped = atomic_load_explicit(&v->m->mapped, RELAXED);
	bool ok = page < mapped;
	struct stat st;
	if (!ok && fstat(v->m->data_fd, &st) == 0) {
		uint64_t have = (uint64_t)st.st_size / PP_PAGE_SIZE;
		if (have > PPI_SHM_MAX_PAGES)
			have = PPI_SHM_MAX_PAGES;
		if (page < have) {
			int prot = PROT_READ | (v->m->data_rw ? PROT_WRITE : 0);
			void *at = ppi_shm_page(v, mapped);
			void *m = mmap(at, (size_t)(have - mapped) * PP_PAGE_SIZE, prot,
			               MAP_SHARED | MAP_FIXED, v->m->data_fd, (off_t)mapped * PP_PAGE_SIZE);
			if (m == at) {
				atomic_store_explicit(&v->m->mapped, (uint32_t)have, memory_order_release);
				ok = true;
			}
		}
	}
	pthread_mutex_unlock(&v->m->mu);
	return ok;
}

static void mem_unmap(struct ppi_shm_mem *m)
{
	if (m->hdr)
		munmap(m->hdr, PPI_SHM_CTL_SIZE);
	if (m->data)
		munmap(m->data, (size_t)PPI_SHM_MAX_PAGES * PP_PAGE_SIZE);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The process's memories (each with its pipes), so that fork and import
 * find them. */
static pthread_mutex_t views_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ppi_shm_mem *mems;

void ppi_shm_views_lock(void)
{
	pthread_mutex_lock(&views_mu);
}

void ppi_shm_views_unlock(void)
{
	pthread_mutex_unlock(&views_mu);
}

struct ppi_shm_mem *ppi_shm_mems(void)
{
	return mems;
}

/* A view of a memory, on its memfds (taken over: closed on failure). */
static int mem_new(int ctl_fd, int data_fd, bool data_rw, struct ppi_shm_mem **out)
{
	struct ppi_shm_mem *m = calloc(1, sizeof *m);
	if (!m) {
		close(ctl_fd);
		close(data_fd);
		return ENOMEM;
	}
	m->ctl_fd = ctl_fd;
	m->data_fd = data_fd;
	m->child_fd = -1;
	m->data_rw = data_rw;
	pthread_mutex_init(&m->mu, NULL);
	struct stat st;
	int err = 0;
	if (fstat(ctl_fd, &st) != 0 || (uint64_t)st.st_size != PPI_SHM_CTL_SIZE) {
		err = EINVAL;
		goto fail;
	}
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	/* Mapped through a description of its own, never locked: a mapping
	 * holds its description, and a forked child inherits the mapping, so
	 * mapped through ctl_fd (which carries our liveness lock) the lock
	 * would live as long as any child of ours, and our death would go
	 * unseen by every process while one lived (its readers never seeing
	 * end of file). */
	int map_fd = ppi_shm_reopen(ctl_fd, O_RDWR);
	if (map_fd < 0) {
		err = -map_fd;
		goto fail;
	}
	void *at = mmap(NULL, PPI_SHM_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	close(map_fd);
	if (at == MAP_FAILED) {
		err = errno;
		goto fail;
	}
	m->hdr = at;
	at = mmap(NULL, (size_t)PPI_SHM_MAX_PAGES * PP_PAGE_SIZE, PROT_NONE,
	          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (at == MAP_FAILED) {
		err = errno;
		goto fail;
	}
	m->data = at;
	atomic_init(&m->mapped, 0);
	*out = m;
	return 0;
fail:
	mem_unmap(m);
	close_fd(&m->ctl_fd);
	close_fd(&m->data_fd);
	pthread_mutex_destroy(&m->mu);
	free(m);
	return err;
}

static void mem_free(struct ppi_shm_mem *m)
{
	mem_unmap(m);
	close_fd(&m->ctl_fd);
	close_fd(&m->data_fd);
	close_fd(&m->child_fd);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

/* A view of ring ri of memory m, holding no descriptor yet.  NULL: ENOMEM. */
static struct ppi_shm *pipe_new(struct ppi_shm_mem *m, uint32_t ri)
{
	struct ppi_shm *v = calloc(1, sizeof *v);
	if (!v)
		return NULL;
	v->m = m;
	v->hdr = m->hdr;
	v->data = m->data;
	v->ri = ri & (PPI_SHM_RINGS - 1);
	struct ppi_shm_rblock *b = ppi_shm_rblock(m->hdr, v->ri);
	v->ring = &b->ring;
	v->rx = &b->x;
	v->d_rd = v->d_wr = v->r_rd = v->r_wr = -1;
	v->efd[0] = v->efd[1] = v->epfd[0] = v->epfd[1] = -1;
	return v;
}

static void pipe_free(struct ppi_shm *v)
{
	close_fd(&v->d_rd);
	close_fd(&v->d_wr);
	close_fd(&v->r_rd);
	close_fd(&v->r_wr);
	for (int s = 0; s < 2; s++) {
		close_fd(&v->efd[s]);
		close_fd(&v->epfd[s]);
	}
	free(v);
}

/* Under m->mu: does the process hold no handle on any pipe of m? */
static bool mem_holds_nothing(struct ppi_shm_mem *m)
{
	for (uint32_t i = 0; i < PPI_SHM_RINGS; i++)
		if (m->pipe[i] && (m->pipe[i]->handles[PPI_READ] || m->pipe[i]->handles[PPI_WRITE]))
			return false;
	return true;
}

bool ppi_shm_holds_nothing(struct ppi_shm *v)
{
	pthread_mutex_lock(&v->m->mu);
	bool none = mem_holds_nothing(v->m);
	pthread_mutex_unlock(&v->m->mu);
	return none;
}

/* ---- holders ------------------------------------------------------------ */

/*
 * Claim a free holder record, as `state`, for description fd of the ctl
 * memory.  The record's byte is locked on fd first and the record claimed
 * after (a compare-and-swap from free): so whoever finds a record taken
 * finds its byte locked for as long as its owner lives, and liveness is
 * the lock alone.  (A pid written beside the claim would be read stale by
 * a reaper between the two, and is no proof anyway across pid namespaces.)
 * Its index, or -errno: EMFILE when every record is taken.
 */
int ppi_shm_holder_new(struct ppi_shm *v, int fd, uint32_t state)
{
	struct ppi_shm_holder *hs = ppi_shm_holders(v);
	for (uint32_t h = 0; h < PPI_SHM_HOLDERS; h++) {
		uint32_t free_state = PPI_HOLDER_FREE;
		if (LOAD(hs[h].state) != PPI_HOLDER_FREE)
			continue;
		int err = ppi_shm_hold(fd, h, F_RDLCK);
		if (err)
			return -err;
		if (!atomic_compare_exchange_strong_explicit(&hs[h].state, &free_state, state,
		                                             RELAXED, RELAXED)) {
			ppi_shm_hold(fd, h, F_UNLCK); /* taken meanwhile: the next */
			continue;
		}
		/* Nobody else writes a taken record's fields but under the
		 * lock, and a reaper leaves a locked record alone. */
		atomic_store_explicit(&hs[h].pid, (uint32_t)getpid(), RELAXED);
		for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++) {
			for (int s = 0; s < 2; s++)
				atomic_store_explicit(&hs[h].sleepers[ri][s], 0, RELAXED);
			atomic_store_explicit(&hs[h].reserved[ri], 0, RELAXED);
		}
		for (uint32_t d = 0; d < PPI_SHM_DESCS; d++)
			atomic_store_explicit(&hs[h].handles[d], 0, RELAXED);
		return (int)h;
	}
	return -EMFILE;
}

void ppi_shm_holder_is(struct ppi_shm *v, uint32_t h, uint32_t state)
{
	atomic_store_explicit(&ppi_shm_holders(v)[h].state, state, RELAXED);
}

/* Is holder h gone?  Its byte is unlocked (see ppi_shm_holder_new). */
static bool holder_dead(struct ppi_shm *v, uint32_t h)
{
	return !holder_alive(v, h);
}

static struct ppi_ring *ring_at(struct ppi_shm *v, uint32_t ri)
{
	return &ppi_shm_rblock(v->hdr, ri)->ring;
}

/* Description d's ring, as shared memory says (masked: always a ring). */
static uint32_t desc_ring(struct ppi_shm *v, uint32_t d)
{
	return LOAD(ppi_shm_descs(v)[d].ring) & (PPI_SHM_RINGS - 1);
}

static void ring_retire(struct ppi_shm *v, uint32_t ri);

/* Under the lock: holder h holds n more (or fewer) handles on
 * description d; its ring's totals follow.  The side's total, after.
 * n is 64-bit: a dead holder's whole count, read from shared memory, may
 * be any 32-bit value, and is taken away as it is.  A pipe made by
 * pp_pipe_in whose last handle anywhere goes is retired here: its pages
 * go back and its ring is free for the next. */
static uint32_t holder_count(struct ppi_shm *v, uint32_t h, uint32_t d, int64_t n)
{
	struct ppi_shm_holder *ho = &ppi_shm_holders(v)[h];
	struct ppi_shm_desc *de = &ppi_shm_descs(v)[d];
	uint32_t side = LOAD(de->side) & 1, ri = desc_ring(v, d);
	struct ppi_ring *r = ring_at(v, ri);
	uint32_t had = LOAD(ho->handles[d]);
	int64_t want = (int64_t)had + n;
	uint32_t now = want < 0 ? 0 : want > UINT32_MAX ? UINT32_MAX : (uint32_t)want;
	atomic_store_explicit(&ho->handles[d], now, RELAXED);
	if (!had != !now) {
		uint32_t hs = LOAD(de->holders);
		atomic_store_explicit(&de->holders, now ? hs + 1 : (hs ? hs - 1 : 0), RELAXED);
	}
	uint32_t total = LOAD(r->handles[side]);
	int64_t t = (int64_t)total + (int64_t)now - (int64_t)had;
	if (t < 0)
		t = 0;
	atomic_store_explicit(&r->handles[side], (uint32_t)t, RELAXED);
	if (!t && total && !LOAD(r->handles[side ^ 1]))
		ring_retire(v, ri);
	return (uint32_t)t;
}

/* Under the lock: take away everything holder h, found in state `was`,
 * holds (it is dead); false if it is no longer in that state.  Sides whose
 * handle totals it brought to zero go into *closed (bit 2 * ring + side). */
static bool holder_release(struct ppi_shm *v, uint32_t h, uint32_t was, unsigned *closed)
{
	struct ppi_shm_holder *ho = &ppi_shm_holders(v)[h];
	/* Only the record judged dead: if its owner let it go meanwhile
	 * (outside the lock, storing free), it may already be someone
	 * else's, and a blind store of free here would take it from them. */
	if (!atomic_compare_exchange_strong_explicit(&ho->state, &was, PPI_HOLDER_REAPING,
	                                             RELAXED, RELAXED))
		return false;
	for (uint32_t d = 0; d < PPI_SHM_DESCS; d++) {
		uint32_t n = LOAD(ho->handles[d]);
		if (n && !holder_count(v, h, d, -(int64_t)n))
			*closed |= 1u << (2 * desc_ring(v, d) + (LOAD(ppi_shm_descs(v)[d].side) & 1));
	}
	for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++) {
		struct ppi_ring *r = ring_at(v, ri);
		for (int s = 0; s < 2; s++) {
			uint32_t n = LOAD(ho->sleepers[ri][s]);
			r->sleepers[s] = r->sleepers[s] > n ? r->sleepers[s] - n : 0;
			atomic_store_explicit(&ho->sleepers[ri][s], 0, RELAXED);
		}
		uint32_t res = LOAD(ho->reserved[ri]), total = LOAD(r->reserved);
		atomic_store_explicit(&r->reserved, total > res ? total - res : 0, RELAXED);
		atomic_store_explicit(&ho->reserved[ri], 0, RELAXED); /* a free record is clean */
	}
	atomic_store_explicit(&ho->state, PPI_HOLDER_FREE, RELAXED);
	return true;
}

/* ---- pages ------------------------------------------------------------------ */

static void page_push(struct ppi_shm *v, _Atomic uint32_t *head, uint32_t p, uint32_t owner)
{
	struct ppi_shm_page *pg = &ppi_shm_pages(v)[p];
	atomic_store_explicit(&pg->next, LOAD(*head), RELAXED);
	atomic_store_explicit(&pg->owner, owner, RELAXED);
	atomic_store_explicit(head, p, RELAXED);
}

/* Pop a page off a list whose pages should all be `owner`: 0 if the list
 * is empty, or corrupt (then the pipe is broken). */
static uint32_t page_pop(struct ppi_shm *v, _Atomic uint32_t *head, uint32_t owner)
{
	uint32_t p = LOAD(*head);
	if (!p)
		return 0;
	struct ppi_shm_page *pg = &ppi_shm_pages(v)[p < PPI_SHM_MAX_PAGES ? p : 0];
	if (p >= LOAD(v->hdr->data_pages) || LOAD(pg->owner) != owner) {
		broken(v);
		return 0;
	}
	/* Mark it ours before the list lets go of it: a process killed in
	 * between leaves a page marked held by a dead holder, which reaping
	 * returns, never a page on no list and marked idle. */
	atomic_store_explicit(&pg->owner, PPI_PAGE_HELD + v->m->holder, RELAXED);
	atomic_store_explicit(head, LOAD(pg->next), RELAXED);
	return p;
}

/* Grow the data memfd by PPI_SHM_GROW pages onto the free list.  Only a
 * holder that maps the data writable can. */
static bool data_grow(struct ppi_shm *v)
{
	uint32_t have = LOAD(v->hdr->data_pages);
	if (!v->m->data_rw || have < 1 || have > PPI_SHM_MAX_PAGES - PPI_SHM_GROW)
		return false;
	if (ftruncate(v->m->data_fd, (off_t)(have + PPI_SHM_GROW) * PP_PAGE_SIZE) != 0)
		return false;
	for (uint32_t p = have + PPI_SHM_GROW - 1; p >= have; p--)
		page_push(v, &v->hdr->free_head, p, PPI_PAGE_FREE);
	atomic_store_explicit(&v->hdr->data_pages, have + PPI_SHM_GROW, RELAXED);
	return ppi_shm_map_to(v, have + PPI_SHM_GROW - 1);
}

unsigned ppi_shm_pages_get(struct ppi_shm *v, uint32_t *pages, unsigned n)
{
	struct ppi_shm_hdr *hdr = v->hdr;
	unsigned got = 0;
	while (got < n) {
		uint32_t p = page_pop(v, &hdr->idle_head, PPI_PAGE_IDLE);
		if (p) {
			uint32_t idle = LOAD(hdr->idle_count);
			atomic_store_explicit(&hdr->idle_count, idle ? idle - 1 : 0, RELAXED);
		} else if (!LOAD(hdr->broken)) {
			p = page_pop(v, &hdr->free_head, PPI_PAGE_FREE);
			if (!p && data_grow(v))
				p = page_pop(v, &hdr->free_head, PPI_PAGE_FREE);
		}
		if (!p || !ppi_shm_map_to(v, p))
			break;
		pages[got++] = p;
	}
	/* In address order: pages drained in runs of other sizes than they
	 * were taken in come back interleaved, and a pipe that only ever
	 * recycled its own pages would keep them shuffled for good; sorted,
	 * a batch is mostly runs of adjacent pages, which a writer fills with
	 * one copy each (call.h's ppi_call_run).  At most a batch: an
	 * insertion sort. */
	for (unsigned i = 1; i < got; i++) {
		uint32_t p = pages[i];
		unsigned j = i;
		for (; j > 0 && pages[j - 1] > p; j--)
			pages[j] = pages[j - 1];
		pages[j] = p;
	}
	return got;
}

/* Idle pages kept beyond the ring's capacity: what one reader takes out
 * of the ring to copy at a time (ring.c's BATCH_MAX).  Streaming through
 * the pipe then never gives a page back to punch it and fault it in again:
 * the ring and a writer's batch fit in the capacity (a writer fills at
 * most the free slots), and a reader holds at most this many. */
#define IDLE_SLACK 64u

/* Keep at most the ring's capacity and the slack in idle pages; punch the
 * rest out of the data memfd (only a writable holder can; others leave it
 * to one). */
static void idle_trim(struct ppi_shm *v)
{
	struct ppi_shm_hdr *hdr = v->hdr;
	/* The caller's ring is in use, so this is at most what is kept: the
	 * usual case (a streaming pipe puts back what it will take again)
	 * looks at no other ring's block. */
	if (LOAD(hdr->idle_count) <=
	    (LOAD(v->ring->max_usage) & (PPI_SHM_MAX_SLOTS * 2 - 1)) + IDLE_SLACK)
		return;
	uint32_t keep = IDLE_SLACK;
	for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++) {
		struct ppi_shm_rblock *b = ppi_shm_rblock(hdr, ri);
		if (LOAD(b->x.used))
			keep += LOAD(b->ring.max_usage) & (PPI_SHM_MAX_SLOTS * 2 - 1);
	}
	while (v->m->data_rw && LOAD(hdr->idle_count) > keep) {
		uint32_t p = page_pop(v, &hdr->idle_head, PPI_PAGE_IDLE);
		if (!p)
			break;
		atomic_store_explicit(&hdr->idle_count, LOAD(hdr->idle_count) - 1, RELAXED);
		fallocate(v->m->data_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		          (off_t)p * PP_PAGE_SIZE, PP_PAGE_SIZE);
		page_push(v, &hdr->free_head, p, PPI_PAGE_FREE);
	}
}

void ppi_shm_pages_put(struct ppi_shm *v, const uint32_t *pages, unsigned n)
{
	struct ppi_shm_hdr *hdr = v->hdr;
	uint32_t data_pages = LOAD(hdr->data_pages);
	/* Last first: the idle list is a stack, so the pages come off it in
	 * the order they were drained, a run of adjacent pages as a run that
	 * a writer fills in one copy (call.h's ppi_call_run). */
	for (unsigned i = n; i-- > 0;) {
		uint32_t p = pages[i];
		if (!p || p >= data_pages || p >= PPI_SHM_MAX_PAGES)
			continue; /* checked when it was taken; never ours to give */
		uint32_t refs = ppi_shm_page_refs(v, p);
		if (refs > 1) {
			/* Another buffer, in this ring or another, still names it. */
			atomic_store_explicit(&ppi_shm_pages(v)[p].next, refs - 1, RELAXED);
			continue;
		}
		page_push(v, &hdr->idle_head, p, PPI_PAGE_IDLE);
		atomic_store_explicit(&hdr->idle_count, LOAD(hdr->idle_count) + 1, RELAXED);
	}
	idle_trim(v);
}

bool ppi_shm_defer_put(struct ppi_shm *v, const uint32_t *pages, unsigned n)
{
	pthread_mutex_lock(&v->m->mu);
	uint32_t have = LOAD(v->m->deferred);
	bool room = have + n <= sizeof v->m->deferred_page / sizeof v->m->deferred_page[0];
	if (room) {
		memcpy(&v->m->deferred_page[have], pages, n * sizeof *pages);
		atomic_store_explicit(&v->m->deferred, have + n, RELAXED);
	}
	pthread_mutex_unlock(&v->m->mu);
	return room;
}

void ppi_shm_deferred_put(struct ppi_shm *v)
{
	pthread_mutex_lock(&v->m->mu);
	ppi_shm_pages_put(v, v->m->deferred_page, LOAD(v->m->deferred));
	atomic_store_explicit(&v->m->deferred, 0, RELAXED);
	pthread_mutex_unlock(&v->m->mu);
}

void ppi_shm_pages_mark(struct ppi_shm *v, const uint32_t *pages, unsigned n, uint32_t owner)
{
	uint32_t data_pages = LOAD(v->hdr->data_pages);
	uint32_t to = owner == PPI_PAGE_RING ? PPI_PAGE_RING : PPI_PAGE_HELD + v->m->holder;
	for (unsigned i = 0; i < n; i++) {
		if (!pages[i] || pages[i] >= data_pages || pages[i] >= PPI_SHM_MAX_PAGES)
			continue;
		struct ppi_shm_page *pg = &ppi_shm_pages(v)[pages[i]];
		/* A page entering a ring from a call is named once; one already
		 * in rings (a buffer moved or shared between pipes of the
		 * memory) keeps its count, which ppi_shm_pages_ref raised. */
		if (to == PPI_PAGE_RING && LOAD(pg->owner) == PPI_PAGE_RING)
			continue;
		if (to == PPI_PAGE_RING)
			atomic_store_explicit(&pg->next, 1, RELAXED);
		atomic_store_explicit(&pg->owner, to, RELAXED);
	}
}

void ppi_shm_pages_ref(struct ppi_shm *v, uint32_t page, uint32_t n)
{
	if (!page || page >= LOAD(v->hdr->data_pages) || page >= PPI_SHM_MAX_PAGES)
		return;
	uint32_t had = ppi_shm_page_refs(v, page), refs = had + n;
	atomic_store_explicit(&ppi_shm_pages(v)[page].next, refs < had ? UINT32_MAX : refs,
	                      RELAXED);
}

/* ---- checks --------------------------------------------------------------- */

int ppi_shm_corrupt(struct ppi_shm *v)
{
	return broken(v);
}

bool ppi_shm_buf_bad(struct ppi_shm *v, const struct ppi_buf *b)
{
	/* The fast check in shm.h failed: maybe the page is one another
	 * process added to the data memory since we mapped. */
	if (ppi_shm_buf_fits(b, LOAD(v->hdr->data_pages)) && ppi_shm_map_to(v, b->page))
		return false;
	broken(v);
	return true;
}

/* ---- reaping ------------------------------------------------------------------ */

/* Under the lock: wake every sleeper on both sides of ring ri (they look
 * again). */
static void wake_ring(struct ppi_shm *v, uint32_t ri)
{
	struct ppi_ring *r = ring_at(v, ri);
	for (int s = 0; s < 2; s++)
		atomic_fetch_add_explicit(&r->seq[s], 1, RELAXED);
	ppi_futex_wake_shared(&r->seq[0], INT_MAX);
	ppi_futex_wake_shared(&r->seq[1], INT_MAX);
}

/* Under the lock: the same on every pipe of the memory. */
static void wake_all(struct ppi_shm *v)
{
	for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++)
		if (ri == v->ri || LOAD(ppi_shm_rblock(v->hdr, ri)->x.used))
			wake_ring(v, ri);
}

/* Under the lock: of the sides reaping closed (bit 2 * ring + side), wake
 * those of other pipes of the memory now, and return v's own (bit per
 * side), whose sleepers the caller owes a wake. */
static unsigned closed_for(struct ppi_shm *v, unsigned closed)
{
	for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++)
		if (ri != v->ri && ((closed >> (2 * ri)) & 3))
			wake_ring(v, ri);
	return (closed >> (2 * v->ri)) & 3;
}

/* Under the lock: ring ri's buffers from tail to head, after the checks
 * every call makes; NULL if the ring is corrupt (the memory is broken). */
static struct ppi_buf *ring_walk(struct ppi_shm *v, uint32_t ri, uint32_t *mask)
{
	struct ppi_shm_rblock *blk = ppi_shm_rblock(v->hdr, ri);
	struct ppi_buf *bufs = NULL;
	if (ppi_shm_block_check(v, ri, &blk->ring, &blk->x, &bufs, mask))
		return NULL;
	/* Moved since the check, by a peer ignoring the lock? */
	if (LOAD(blk->ring.head) - LOAD(blk->ring.tail) > *mask + 1) {
		broken(v);
		return NULL;
	}
	return bufs;
}

/* Under the lock: drop what ring ri holds (its pages' references go), as
 * a FIFO's data goes when its last end closes. */
static void ring_drain(struct ppi_shm *v, uint32_t ri)
{
	struct ppi_ring *r = ring_at(v, ri);
	uint32_t mask = 0;
	struct ppi_buf *bufs = ring_walk(v, ri, &mask);
	if (!bufs)
		return;
	uint32_t head = LOAD(r->head);
	for (uint32_t i = LOAD(r->tail); i != head; i++) {
		struct ppi_buf b = bufs[i & mask];
		if (ppi_shm_buf_ok(v, &b))
			ppi_shm_pages_put(v, &b.page, 1);
	}
	atomic_store_explicit(&r->tail, head, RELAXED);
	atomic_store_explicit(&r->bytes, 0, RELAXED);
	atomic_store_explicit(&r->reserved, 0, RELAXED);
}

/* Ring 0 is the memory's first pipe and lives as long as the memory (a
 * named pipe's is opened again; its old data goes then, ppi_shm_opened).
 * The others are pp_pipe_in's: retired when their last handle anywhere
 * goes, their pages given back and the ring free for the next pipe_in.
 * Ring 0's pages go back then too if other pipes share the memory (they
 * would otherwise stay named, and the memory's data with them). */
static void ring_retire(struct ppi_shm *v, uint32_t ri)
{
	bool others = false;
	for (uint32_t i = 1; i < PPI_SHM_RINGS && !ri; i++)
		others |= LOAD(ppi_shm_rblock(v->hdr, i)->x.used) != 0;
	if (ri || others)
		ring_drain(v, ri);
	if (ri)
		atomic_store_explicit(&ppi_shm_rblock(v->hdr, ri)->x.used, 0, RELAXED);
}

/* A ring ready to be a pipe: empty, 16 slots in area 0, the default
 * capacity, nobody waiting, pp_fd unused. */
static void ring_format(struct ppi_shm_rblock *blk)
{
	struct ppi_ring *ring = &blk->ring;
	uint32_t at = 0;
	const char *start = getenv("PP_DEBUG_RING_START");
	if (start)
		at = (uint32_t)strtoul(start, NULL, 0);
	atomic_store_explicit(&ring->head, at, RELAXED);
	atomic_store_explicit(&ring->tail, at, RELAXED);
	atomic_store_explicit(&ring->bytes, 0, RELAXED);
	atomic_store_explicit(&ring->reserved, 0, RELAXED);
	atomic_store_explicit(&ring->streaming, 0, RELAXED);
	atomic_store_explicit(&ring->max_usage, PPI_DEFAULT_PAGES, RELAXED);
	atomic_store_explicit(&ring->spin_budget[PPI_READ], ppi_spin_limit, RELAXED);
	atomic_store_explicit(&ring->spin_budget[PPI_WRITE], ppi_spin_limit, RELAXED);
	for (int s = 0; s < 2; s++) {
		atomic_store_explicit(&ring->handles[s], 0, RELAXED);
		ring->sleepers[s] = 0;
		atomic_store_explicit(&blk->x.fd_used[s], 0, RELAXED);
		atomic_store_explicit(&blk->x.fd_ready[s], 0, RELAXED);
	}
	atomic_store_explicit(&blk->x.geom, 4, RELAXED); /* 16 slots in area 0 */
	atomic_store_explicit(&blk->x.used, 1, RELAXED);
}

/* Under the lock: rebuild the page lists, the pages' reference counts and
 * the rings' byte counts from the pages' owners and the rings, after the
 * lock was taken from a dead owner (which may have been in the middle of
 * changing them). */
static void rebuild(struct ppi_shm *v)
{
	struct ppi_shm_hdr *hdr = v->hdr;
	struct ppi_shm_page *pg = ppi_shm_pages(v);
	struct ppi_shm_holder *hs = ppi_shm_holders(v);
	uint32_t data_pages = LOAD(hdr->data_pages);
	if (data_pages < 1 || data_pages > PPI_SHM_MAX_PAGES) {
		broken(v);
		return;
	}
	struct ppi_buf *slots[PPI_SHM_RINGS];
	uint32_t masks[PPI_SHM_RINGS];
	for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++) {
		struct ppi_ring *r = ring_at(v, ri);
		slots[ri] = NULL;
		if (ri && !LOAD(ppi_shm_rblock(hdr, ri)->x.used))
			continue;
		struct ppi_buf *bufs = ring_walk(v, ri, &masks[ri]);
		if (!bufs)
			return;
		uint32_t mask = masks[ri];
		/* The ring's buffers: drop empty ones at the tail (a reader
		 * died between emptying a buffer and moving tail; its page, if
		 * still marked in a ring, is found unnamed below), check the
		 * rest. */
		uint32_t head = LOAD(r->head), tail = LOAD(r->tail);
		for (; tail != head; tail++) {
			struct ppi_buf b = bufs[tail & mask];
			if (!ppi_shm_buf_ok(v, &b))
				return;
			/* A reader that died taking this buffer marked its page
			 * held (reaping gave it back) or emptied it: the buffer
			 * is gone.  (A reader takes a page out only when no other
			 * buffer names it.) */
			if (b.len && LOAD(pg[b.page].owner) == PPI_PAGE_RING)
				break;
		}
		atomic_store_explicit(&r->tail, tail, RELAXED);
		for (uint32_t i = tail; i != head; i++) {
			struct ppi_buf b = bufs[i & mask];
			if (!ppi_shm_buf_ok(v, &b))
				return;
			if (LOAD(pg[b.page].owner) != PPI_PAGE_RING) {
				broken(v); /* a buffer in the middle whose page is elsewhere */
				return;
			}
		}
		slots[ri] = bufs;
	}
	atomic_store_explicit(&hdr->idle_head, 0, RELAXED);
	atomic_store_explicit(&hdr->free_head, 0, RELAXED);
	uint32_t idle = 0;
	for (uint32_t p = data_pages - 1; p >= 1; p--) {
		uint32_t o = LOAD(pg[p].owner);
		if (o >= PPI_PAGE_HELD && o - PPI_PAGE_HELD < PPI_SHM_HOLDERS &&
		    LOAD(hs[o - PPI_PAGE_HELD].state) != PPI_HOLDER_FREE)
			continue; /* a live holder's */
		if (o == PPI_PAGE_RING) {
			atomic_store_explicit(&pg[p].next, 0, RELAXED); /* counted below */
			continue;
		}
		if (o == PPI_PAGE_FREE) {
			page_push(v, &hdr->free_head, p, PPI_PAGE_FREE);
		} else {
			page_push(v, &hdr->idle_head, p, PPI_PAGE_IDLE);
			idle++;
		}
	}
	/* Each page in rings is named by as many buffers as its count says
	 * (a dead owner may have been sharing or dropping one); a page
	 * marked in a ring that no buffer names (a writer died after marking,
	 * before publishing head) goes idle. */
	for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++) {
		if (!slots[ri])
			continue;
		struct ppi_ring *r = ring_at(v, ri);
		uint32_t bytes = 0, head = LOAD(r->head);
		for (uint32_t i = LOAD(r->tail); i != head; i++) {
			struct ppi_buf b = slots[ri][i & masks[ri]];
			bytes += b.len;
			atomic_store_explicit(&pg[b.page].next, LOAD(pg[b.page].next) + 1, RELAXED);
		}
		atomic_store_explicit(&r->bytes, bytes, RELAXED);
	}
	for (uint32_t p = 1; p < data_pages; p++)
		if (LOAD(pg[p].owner) == PPI_PAGE_RING && !LOAD(pg[p].next)) {
			page_push(v, &hdr->idle_head, p, PPI_PAGE_IDLE);
			idle++;
		}
	atomic_store_explicit(&hdr->idle_count, idle, RELAXED);
}

unsigned ppi_shm_reap(struct ppi_shm *v, bool force)
{
	struct ppi_shm_hdr *hdr = v->hdr;
	uint64_t now = coarse_ns();
	if (!force && now - LOAD(hdr->reaped_ns) < REAP_EVERY_NS)
		return 0;
	atomic_store_explicit(&hdr->reaped_ns, now, RELAXED);
	struct ppi_shm_holder *hs = ppi_shm_holders(v);
	static _Thread_local uint8_t dead[PPI_SHM_HOLDERS];
	unsigned closed = 0, ndead = 0;
	for (uint32_t h = 0; h < PPI_SHM_HOLDERS; h++) {
		dead[h] = 0;
		uint32_t state = LOAD(hs[h].state);
		if (h == v->m->holder || state == PPI_HOLDER_FREE || !holder_dead(v, h))
			continue;
		if (!holder_release(v, h, state, &closed))
			continue;
		dead[h] = 1;
		ndead++;
	}
	if (!ndead)
		return 0;
	struct ppi_shm_page *pg = ppi_shm_pages(v);
	uint32_t data_pages = LOAD(hdr->data_pages);
	if (data_pages > PPI_SHM_MAX_PAGES)
		data_pages = PPI_SHM_MAX_PAGES;
	for (uint32_t p = 1; p < data_pages; p++) {
		uint32_t o = LOAD(pg[p].owner);
		if (o >= PPI_PAGE_HELD && o - PPI_PAGE_HELD < PPI_SHM_HOLDERS &&
		    dead[o - PPI_PAGE_HELD])
			ppi_shm_pages_put(v, &p, 1);
	}
	/* What a side lost wakes the other side's sleepers. */
	return closed_for(v, closed);
}

/*
 * Under the lock, after reaping: the totals that each pair with a count in
 * every holder record (each ring's handles per side, each description's
 * holders, each ring's sleepers and reserved slots), summed again from the
 * live records.  A holder changes its record and the total together, in
 * two stores; one killed between them, holding the lock, left the total
 * one off what its record says, and reaping its record took away what the
 * record said: a live reader's handle lost (the writers get EPIPE) or a
 * dead one kept (they never do).  The records are the truth: each is
 * changed only by its live owner, under the lock, or is freed by reaping.
 * A pipe_in ring left with no handle at all (its maker died making it)
 * is retired.
 */
static void totals_rebuild(struct ppi_shm *v)
{
	struct ppi_shm_holder *hs = ppi_shm_holders(v);
	struct ppi_shm_desc *de = ppi_shm_descs(v);
	static _Thread_local uint32_t holders[PPI_SHM_DESCS];
	static _Thread_local uint64_t handles[PPI_SHM_RINGS][2], sleepers[PPI_SHM_RINGS][2],
		reserved[PPI_SHM_RINGS];
	memset(holders, 0, sizeof holders);
	memset(handles, 0, sizeof handles);
	memset(sleepers, 0, sizeof sleepers);
	memset(reserved, 0, sizeof reserved);
	for (uint32_t h = 0; h < PPI_SHM_HOLDERS; h++) {
		uint32_t state = LOAD(hs[h].state);
		if (state == PPI_HOLDER_FREE || state == PPI_HOLDER_REAPING)
			continue;
		for (uint32_t d = 0; d < PPI_SHM_DESCS; d++) {
			uint32_t n = LOAD(hs[h].handles[d]);
			if (!n)
				continue;
			holders[d]++;
			handles[desc_ring(v, d)][LOAD(de[d].side) & 1] += n;
		}
		for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++) {
			for (int s = 0; s < 2; s++)
				sleepers[ri][s] += LOAD(hs[h].sleepers[ri][s]);
			reserved[ri] += LOAD(hs[h].reserved[ri]);
		}
	}
	for (uint32_t d = 0; d < PPI_SHM_DESCS; d++)
		atomic_store_explicit(&de[d].holders, holders[d], RELAXED);
	for (uint32_t ri = 0; ri < PPI_SHM_RINGS; ri++) {
		struct ppi_ring *r = ring_at(v, ri);
		for (int s = 0; s < 2; s++) {
			atomic_store_explicit(&r->handles[s],
			                      handles[ri][s] > UINT32_MAX ? UINT32_MAX
			                                                  : (uint32_t)handles[ri][s],
			                      RELAXED);
			r->sleepers[s] = sleepers[ri][s] > UINT32_MAX ? UINT32_MAX
			                                              : (uint32_t)sleepers[ri][s];
		}
		atomic_store_explicit(&r->reserved,
		                      reserved[ri] > UINT32_MAX ? UINT32_MAX : (uint32_t)reserved[ri],
		                      RELAXED);
	}
}

/* After totals_rebuild: retire the pipe_in rings nobody holds. */
static void rings_unheld_retire(struct ppi_shm *v)
{
	for (uint32_t ri = 1; ri < PPI_SHM_RINGS; ri++) {
		struct ppi_ring *r = ring_at(v, ri);
		if (LOAD(ppi_shm_rblock(v->hdr, ri)->x.used) && !LOAD(r->handles[PPI_READ]) &&
		    !LOAD(r->handles[PPI_WRITE]))
			ring_retire(v, ri);
	}
}

/* Take the lock of a dead owner: reap it and mend what it was changing. */
static void recover(struct ppi_shm *v)
{
	ppi_shm_reap(v, true);
	totals_rebuild(v);
	rebuild(v);
	rings_unheld_retire(v);
	/* Everyone asleep may be waiting for what the dead owner was doing. */
	wake_all(v);
}

/* ---- the lock ----------------------------------------------------------------- */

/*
 * Handing the lock over.  A writer of small writes takes the lock every
 * few tens of nanoseconds and lets go of it for a few; a reader spinning
 * for it catches it free only by luck, and until then every look it takes
 * pulls the lock's line away from the writer, whose next lock misses:
 * measured between processes with 64-byte writes, the reader spent 16% of
 * its time here and the writer ran at a sixth of its speed alone.  So a
 * spinner marks the word PPI_LOCK_WANTED, the holder's unlock notes that
 * (polite), and the holder's next lock first waits, for up to
 * POLITE_PAUSES, until the spinner has taken the lock, then queues behind
 * it as anyone would.  Each side lets the other in once per request: no
 * one is starved, and a holder whose spinner went away loses a few pauses.
 */
#define POLITE_PAUSES 128

void ppi_shm_unlock_slow(struct ppi_shm *v, uint32_t was)
{
	if (was & PPI_LOCK_WANTED) {
		atomic_store_explicit(&v->m->polite_seq, LOAD(v->hdr->lock_seq), RELAXED);
		atomic_store_explicit(&v->m->polite, true, RELAXED);
	}
	if (was & PPI_LOCK_WAITERS)
		ppi_futex_wake_shared(&v->hdr->lock, 1);
}

int ppi_shm_lock_slow(struct ppi_shm *v)
{
	_Atomic uint32_t *word = &v->hdr->lock;
	uint32_t me = v->m->holder + 1;
	if (LOAD(v->m->polite)) {
		/* Only while nobody has had the lock since our unlock: a spinner
		 * already let in (or gone to sleep and woken) wants nothing. */
		atomic_store_explicit(&v->m->polite, false, RELAXED);
		uint32_t seq = LOAD(v->m->polite_seq);
		for (unsigned i = 0;
		     i < POLITE_PAUSES && LOAD(*word) == 0 && LOAD(v->hdr->lock_seq) == seq; i++)
			ppi_cpu_relax();
	}
	for (unsigned i = 0; i < ppi_lock_spin_limit; i++) {
		uint32_t w = LOAD(*word);
		if (w == 0) {
			if (atomic_compare_exchange_strong_explicit(word, &w, me, memory_order_acquire,
			                                            RELAXED))
				return ppi_shm_lock_taken(v);
		} else if (!(w & PPI_LOCK_WANTED)) {
			/* Ask the holder to let us in next (once per holding). */
			atomic_compare_exchange_strong_explicit(word, &w, w | PPI_LOCK_WANTED, RELAXED,
			                                        RELAXED);
		}
		ppi_cpu_relax();
	}
	uint64_t give_up = ppi_now_ns() + LOCK_GIVE_UP_NS;
	for (;;) {
		uint32_t w = atomic_load_explicit(word, memory_order_acquire);
		if (!w) {
			/* Keep the waiters bit: others may sleep still. */
			if (atomic_compare_exchange_strong_explicit(word, &w, me | PPI_LOCK_WAITERS,
			                                            memory_order_acquire, RELAXED))
				return ppi_shm_lock_taken(v);
			continue;
		}
		if (!(w & PPI_LOCK_WAITERS)) {
			if (!atomic_compare_exchange_strong_explicit(word, &w, w | PPI_LOCK_WAITERS,
			                                             RELAXED, RELAXED))
				continue;
			w |= PPI_LOCK_WAITERS;
		}
		struct timespec look = deadline_in(LOCK_LOOK_NS);
		int err = ppi_futex_wait_until(word, w, &look, false);
		if (err != ETIMEDOUT && LOAD(*word) != w)
			continue;
		uint32_t owner = (w & ~PPI_LOCK_FLAGS) - 1;
		bool dead = owner >= PPI_SHM_HOLDERS || (owner != v->m->holder && holder_dead(v, owner));
		if (dead && atomic_compare_exchange_strong_explicit(word, &w, me | PPI_LOCK_WAITERS,
		                                                    memory_order_acquire, RELAXED)) {
			recover(v);
			return ppi_shm_lock_taken(v);
		}
		if (ppi_now_ns() > give_up)
			return EIO;
	}
}

/* ---- tokens ------------------------------------------------------------------- */

bool ppi_shm_side_gone(struct ppi_shm *v, int side, bool now)
{
	if (!now && coarse_ns() - LOAD(v->checked_ns) < CHECK_EVERY_NS)
		return false;
	/* Not checked_ns: that is the lock's last look, which reaped; this
	 * one does not, and must not put the lock's next look off. */
	/* Writers gone: D's read end hangs up; readers gone: R's read end.
	 * No mu (pp_events is async-signal-safe): the caller holds a handle
	 * of the other side, so this one stays open (tokens_leave closes the
	 * token ends of a side only when the process holds none of it). */
	int fd = side == PPI_WRITE ? v->d_rd : v->r_rd;
	if (fd < 0)
		return false; /* we hold that side ourselves */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	bool gone = poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
	if (gone)
		atomic_store_explicit(&v->look_now, true, RELAXED);
	return gone;
}

unsigned ppi_shm_look_slow(struct ppi_shm *v, bool now)
{
	uint64_t t = coarse_ns();
	if (!now && t - LOAD(v->checked_ns) < CHECK_EVERY_NS)
		return 0;
	atomic_store_explicit(&v->checked_ns, t, RELAXED);
	atomic_store_explicit(&v->look_now, false, RELAXED);
	/* Writers gone: D's read end hangs up; readers gone: R's read end.
	 * We hold the one of the side we do not hold ourselves.  Under mu
	 * across the poll: another thread's close of the process's last
	 * handle of a side closes that side's (tokens_leave), and a number
	 * closed and reused meanwhile would be polled in its place.  (mu is
	 * taken under the ring's lock, never the other way round.) */
	struct pollfd p[2];
	nfds_t n = 0;
	pthread_mutex_lock(&v->m->mu);
	if (v->d_rd >= 0)
		p[n++] = (struct pollfd){ .fd = v->d_rd, .events = POLLIN };
	if (v->r_rd >= 0)
		p[n++] = (struct pollfd){ .fd = v->r_rd, .events = POLLIN };
	bool gone = false;
	if (n && poll(p, n, 0) > 0)
		for (nfds_t i = 0; i < n; i++)
			gone |= (p[i].revents & (POLLHUP | POLLERR)) != 0;
	pthread_mutex_unlock(&v->m->mu);
	return ppi_shm_reap(v, gone);
}

/* Empty a readiness pipe without blocking: read what FIONREAD says it
 * holds, and no more (the description may have been made blocking by a
 * holder that shares it, so a read is never made on an empty pipe).  Only
 * this call writes into it while we hold the lock, so that is all of it,
 * and one FIONREAD is enough (one system call fewer per drain than asking
 * again after the read: a reader in poll(2) drains once per message).  At
 * most a default pipe's worth: a hostile holder writing into it as fast as
 * we drain must not keep us here (under the lock) for ever; what it leaves
 * makes pollers wake for nothing, and they look again, as after any wake. */
static void ready_drain(int fd)
{
	char buf[512];
	int n = 0;
	if (ioctl(fd, FIONREAD, &n) != 0 || n <= 0)
		return;
	if (n > 65536)
		n = 65536;
	for (ssize_t k; n > 0; n -= (int)k)
		if ((k = read(fd, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf)) <= 0)
			break;
}

/*
 * pp_fd's readiness pipes: every holder holds both (they are made with the
 * pipe and travel like the tokens), so whoever changes the ring keeps them
 * in step, as a private ring keeps its eventfds (ppi_ring_efd_update_slow):
 * a side's pipe holds bytes exactly while the side has data or room, and
 * every write that adds data puts one more in for edge-triggered pollers.
 * Only while some process uses pp_fd on the side.  Hang-ups are not
 * signalled here: the descriptor pp_fd returns is an epoll instance that
 * also watches the side's token, which the kernel hangs up.
 */
void ppi_shm_token_update(struct ppi_shm *v, bool data_added)
{
	struct ppi_shm_rx *hdr = v->rx;
	struct ppi_ring *r = v->ring;
	for (int side = 0; side < 2; side++) {
		if (!LOAD(hdr->fd_used[side]) || v->efd[side] < 0)
			continue;
		bool ready = side == PPI_READ ? LOAD(r->head) != LOAD(r->tail) : !ppi_ring_full(r);
		bool was = LOAD(hdr->fd_ready[side]);
		if (ready && (!was || (side == PPI_READ && data_added))) {
			char one = 1;
			(void)!write(v->efd[side], &one, 1); /* full is ready enough */
			atomic_store_explicit(&hdr->fd_ready[side], 1, RELAXED);
		} else if (!ready && was) {
			ready_drain(v->efd[side]);
			atomic_store_explicit(&hdr->fd_ready[side], 0, RELAXED);
		}
	}
}

int ppi_shm_fd(struct ppi_shm *v, int side)
{
	pthread_mutex_lock(&v->m->mu);
	int ep = v->epfd[side];
	if (ep < 0) {
		/* The side's eventfd (data or room), and the token whose other
		 * end the kernel hangs up when the other side is gone. */
		int token = side == PPI_READ ? v->d_rd : v->r_rd;
		ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event in = { .events = EPOLLIN }, hup = { .events = 0 };
		if (ep >= 0 && (epoll_ctl(ep, EPOLL_CTL_ADD, v->efd[side], &in) != 0 ||
		                epoll_ctl(ep, EPOLL_CTL_ADD, token, &hup) != 0)) {
			int err = errno;
			close(ep);
			ep = -1;
			errno = err;
		}
		v->epfd[side] = ep;
	}
	int err = ep < 0 ? errno : 0;
	pthread_mutex_unlock(&v->m->mu);
	if (err)
		return -err;
	if ((err = ppi_shm_lock(v)))
		return -err;
	if (!LOAD(v->rx->fd_used[side])) {
		/* First user anywhere: the pipe is empty, so mark it not ready
		 * and let the update below put it in step. */
		atomic_store_explicit(&v->rx->fd_ready[side], 0, RELAXED);
		atomic_store_explicit(&v->rx->fd_used[side], 1, RELAXED);
	}
	ppi_shm_token_update(v, false);
	ppi_shm_unlock(v);
	return ep;
}

/* ---- making and attaching --------------------------------------------------- */

static int memfd(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	return fd >= 0 ? fd : -(errno == ENOSYS ? ENOSYS : errno);
}

/* The token pipes (liveness only: nothing is ever written to them) and
 * pp_fd's readiness pipes, all close-on-exec, into the view.  A readiness
 * pipe is held open for reading and writing by every holder (reopened
 * through /proc, as a FIFO is opened O_RDWR), so it never hangs up and
 * anyone may fill or drain it, as a named pipe's FIFOs are. */
static int tokens_new(struct ppi_shm *v)
{
	int d[2], r[2];
	if (pipe2(d, O_CLOEXEC) != 0)
		return errno;
	if (pipe2(r, O_CLOEXEC) != 0) {
		int err = errno;
		close(d[0]);
		close(d[1]);
		return err;
	}
	v->d_rd = d[0];
	v->d_wr = d[1];
	v->r_rd = r[0];
	v->r_wr = r[1];
	for (int s = 0; s < 2; s++) {
		int e[2];
		if (pipe2(e, O_CLOEXEC | O_NONBLOCK) != 0)
			return errno;
		v->efd[s] = ppi_shm_reopen(e[0], O_RDWR | O_NONBLOCK);
		close(e[0]);
		close(e[1]);
		if (v->efd[s] < 0)
			return -v->efd[s];
	}
	return 0;
}

/*
 * Lay out a fresh ctl memory (a memfd, or a named pipe's ctl file): its
 * size, and a header and ring 0, an empty ring of 16 slots.  0 or an
 * errno value.
 */
int ppi_shm_format(int ctl)
{
	if (ftruncate(ctl, (off_t)PPI_SHM_CTL_SIZE) != 0)
		return errno;
	void *m = mmap(NULL, PPI_SHM_RING_OFF + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ctl, 0);
	if (m == MAP_FAILED)
		return errno;
	struct ppi_shm_hdr *hdr = m;
	atomic_init(&hdr->data_pages, 1); /* page 0 is never used */
	ring_format(ppi_shm_rblock(hdr, 0));
	hdr->version = PPI_SHM_VERSION;
	atomic_thread_fence(memory_order_release);
	hdr->magic = PPI_SHM_MAGIC; /* last: a half-made pipe is not one */
	munmap(m, PPI_SHM_RING_OFF + 4096);
	return 0;
}

/* Add memory m, holding v as its pipe, to the process's list. */
static void mem_publish(struct ppi_shm_mem *m, struct ppi_shm *v)
{
	m->pipe[v->ri] = v;
	m->next = mems;
	mems = m;
}

int ppi_shm_create(int fl, struct ppi_shm **out)
{
	int ctl = memfd("pagepipe-ctl");
	if (ctl < 0)
		return -ctl;
	int data = memfd("pagepipe-data");
	if (data < 0) {
		close(ctl);
		return -data;
	}
	int err = ppi_shm_format(ctl);
	if (!err && (fcntl(ctl, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
	             fcntl(data, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0 ||
	             fchmod(data, 0400) != 0))
		err = errno;
	if (err) {
		close(ctl);
		close(data);
		return err;
	}
	/* Our own description of ctl carries our liveness lock. */
	int own = ppi_shm_reopen(ctl, O_RDWR);
	close(ctl);
	if (own < 0) {
		close(data);
		return -own;
	}
	struct ppi_shm_mem *m = NULL;
	if ((err = mem_new(own, data, true, &m)))
		return err;
	struct ppi_shm *v = pipe_new(m, 0);
	if (!v || (err = tokens_new(v))) {
		if (v)
			pipe_free(v);
		mem_free(m);
		return v ? err : ENOMEM;
	}
	struct ppi_shm_desc *de = ppi_shm_descs(v);
	for (int s = 0; s < 2; s++) {
		atomic_init(&de[s].side, (uint32_t)s);
		atomic_init(&de[s].flags, fl);
		atomic_init(&de[s].ring, 0);
	}
	m->holder = 0;
	atomic_init(&ppi_shm_holders(v)[0].state, PPI_HOLDER_PROC);
	atomic_init(&ppi_shm_holders(v)[0].pid, (uint32_t)getpid());
	holder_count(v, 0, 0, 1);
	holder_count(v, 0, 1, 1);
	v->handles[PPI_READ] = v->handles[PPI_WRITE] = 1;
	if ((err = ppi_shm_hold(m->ctl_fd, 0, F_RDLCK))) {
		pipe_free(v);
		mem_free(m);
		return err;
	}
	ppi_shm_views_lock();
	mem_publish(m, v);
	ppi_shm_views_unlock();
	*out = v;
	return 0;
}

/*
 * A new pipe in member's memory: a free ring (1 to PPI_SHM_RINGS - 1), two
 * descriptions on it with status flags fl, and one handle of each held by
 * this process.  Only a process that maps the memory's data writable (it
 * holds a write end of one of its pipes) may: the new pipe's writer puts
 * pages there.  0 or an errno value (EACCES, EMFILE: every ring or
 * description taken, ENOMEM, EIO).
 */
int ppi_shm_pipe_in_mem(struct ppi_shm *member, int fl, struct ppi_shm **out, uint32_t desc[2])
{
	struct ppi_shm_mem *m = member->m;
	if (!m->data_rw)
		return EACCES;
	struct ppi_shm *v = pipe_new(m, 0);
	if (!v)
		return ENOMEM;
	int err = tokens_new(v);
	if (err) {
		pipe_free(v);
		return err;
	}
	/* Under the views lock, so that no other thread of ours takes the
	 * same ring's place in m->pipe meanwhile. */
	ppi_shm_views_lock();
	if ((err = ppi_shm_lock(member))) {
		ppi_shm_views_unlock();
		pipe_free(v);
		return err;
	}
	struct ppi_shm_desc *de = ppi_shm_descs(member);
	uint32_t ri = 1;
	for (; ri < PPI_SHM_RINGS; ri++) {
		bool taken = LOAD(ppi_shm_rblock(v->hdr, ri)->x.used) != 0;
		for (uint32_t d = 0; d < PPI_SHM_DESCS && !taken; d++)
			taken = LOAD(de[d].holders) && desc_ring(member, d) == ri;
		if (!taken)
			break;
	}
	int d[2] = { -1, -1 };
	if (ri == PPI_SHM_RINGS) {
		err = EMFILE;
	} else {
		struct ppi_shm_rblock *blk = ppi_shm_rblock(v->hdr, ri);
		ring_format(blk);
		v->ri = ri;
		v->ring = &blk->ring;
		v->rx = &blk->x;
		for (int s = 0; s < 2 && !err; s++) {
			if ((d[s] = ppi_shm_desc_new(v, s, fl)) < 0)
				err = EMFILE;
			else
				holder_count(v, m->holder, (uint32_t)d[s], 1);
		}
		if (err) {
			if (d[0] >= 0)
				holder_count(v, m->holder, (uint32_t)d[0], -1); /* retires the ring */
			atomic_store_explicit(&blk->x.used, 0, RELAXED);
		}
	}
	ppi_shm_unlock(member);
	if (!err) {
		pthread_mutex_lock(&m->mu);
		v->handles[PPI_READ] = v->handles[PPI_WRITE] = 1;
		m->pipe[ri] = v;
		pthread_mutex_unlock(&m->mu);
	}
	ppi_shm_views_unlock();
	if (err) {
		pipe_free(v);
		return err;
	}
	desc[0] = (uint32_t)d[0];
	desc[1] = (uint32_t)d[1];
	*out = v;
	return 0;
}

/* Take fd into *slot unless the view has one there already. */
static void keep_fd(int *slot, int fd)
{
	if (fd < 0)
		return;
	if (*slot < 0)
		*slot = fd;
	else
		close(fd);
}

/* A view that maps the data read-only gets it read-write (it now holds a
 * write end): the same pages, mapped anew from the read-write description. */
static int mem_make_writable(struct ppi_shm_mem *m, int data)
{
	uint32_t mapped = LOAD(m->mapped);
	if (mapped) {
		void *at = mmap(m->data, (size_t)mapped * PP_PAGE_SIZE, PROT_READ | PROT_WRITE,
		                MAP_SHARED | MAP_FIXED, data, 0);
		if (at != m->data)
			return errno;
	}
	close(m->data_fd);
	m->data_fd = data;
	m->data_rw = true;
	return 0;
}

/* Under m->mu: the process's view of ring ri of m, made if it has none;
 * NULL: ENOMEM. */
static struct ppi_shm *mem_pipe(struct ppi_shm_mem *m, uint32_t ri)
{
	ri &= PPI_SHM_RINGS - 1;
	if (!m->pipe[ri])
		m->pipe[ri] = pipe_new(m, ri);
	return m->pipe[ri];
}

/* Under m->mu: v takes the side's tokens and the readiness pipes it lacks. */
static void pipe_keep(struct ppi_shm *v, int side, const int tok[2], const int rdy[2])
{
	keep_fd(side == PPI_READ ? &v->d_rd : &v->d_wr, tok[0]);
	keep_fd(side == PPI_READ ? &v->r_wr : &v->r_rd, tok[1]);
	keep_fd(&v->efd[0], rdy[0]);
	keep_fd(&v->efd[1], rdy[1]);
}

/*
 * Attach this process to pipe ri of a shared memory as a holder of
 * `side`, from what an export carries or a named pipe's files give: ctl
 * (any description of the ctl memory), data (read-write for a write side,
 * read-only for a read side), the side's tokens (tok[0] and tok[1]: D's
 * read end and R's write end for a read side, D's write end and R's read
 * end for a write side) and the readiness pipes.  Every descriptor is
 * taken over: kept, or closed.  A process that holds the memory already
 * keeps its view (found by the ctl memory's identity) and takes what it
 * lacks; otherwise a view and a holder record are made.  The handle is the
 * caller's to add.
 */
int ppi_shm_attach(int ctl, int data, int side, uint32_t ri, const int tok[2],
                   const int rdy[2], struct ppi_shm **out)
{
	struct stat st;
	int err = fstat(ctl, &st) == 0 ? 0 : errno;
	ppi_shm_views_lock();
	struct ppi_shm_mem *m = mems;
	while (!err && m && !(m->dev == st.st_dev && m->ino == st.st_ino))
		m = m->next;
	if (!err && m) {
		close(ctl);
		pthread_mutex_lock(&m->mu);
		if (side == PPI_WRITE && !m->data_rw)
			err = mem_make_writable(m, data);
		else
			close(data);
		struct ppi_shm *v = mem_pipe(m, ri);
		if (v)
			pipe_keep(v, side, tok, rdy);
		pthread_mutex_unlock(&m->mu);
		ppi_shm_views_unlock();
		if (!v) {
			for (int i = 0; i < 2; i++) {
				if (tok[i] >= 0)
					close(tok[i]);
				if (rdy[i] >= 0)
					close(rdy[i]);
			}
			return ENOMEM;
		}
		*out = v;
		return err;
	}
	int own = err ? -err : ppi_shm_reopen(ctl, O_RDWR);
	close(ctl);
	m = NULL;
	struct ppi_shm *v = NULL;
	if (own < 0)
		err = -own;
	else if (!(err = mem_new(own, data, side == PPI_WRITE, &m)) && !(v = pipe_new(m, ri)))
		err = ENOMEM;
	if (err) {
		if (own < 0)
			close(data);
		if (m)
			mem_free(m);
		for (int i = 0; i < 2; i++) {
			if (tok[i] >= 0)
				close(tok[i]);
			if (rdy[i] >= 0)
				close(rdy[i]);
		}
		ppi_shm_views_unlock();
		return err;
	}
	pipe_keep(v, side, tok, rdy);
	int h;
	if (m->hdr->magic != PPI_SHM_MAGIC || m->hdr->version != PPI_SHM_VERSION)
		err = EINVAL;
	else if ((h = ppi_shm_holder_new(v, m->ctl_fd, PPI_HOLDER_PROC)) < 0)
		err = -h;
	else
		m->holder = (uint32_t)h;
	if (err) {
		pipe_free(v);
		mem_free(m);
		ppi_shm_views_unlock();
		return err;
	}
	mem_publish(m, v);
	ppi_shm_views_unlock();
	*out = v;
	return 0;
}

/* ---- handles ------------------------------------------------------------------ */

/* Under the lock: holder h holds n more (or fewer) handles on d (an
 * export's record); the side's total after. */
uint32_t ppi_shm_count(struct ppi_shm *v, uint32_t h, uint32_t d, int n)
{
	return h < PPI_SHM_HOLDERS && d < PPI_SHM_DESCS ? holder_count(v, h, d, n) : 0;
}

/* Under the lock, when a process opens a named pipe: the dead are reaped,
 * and if no end is open anywhere, what the pipe still holds is dropped, as
 * a FIFO's data goes when its last end closes. */
void ppi_shm_opened(struct ppi_shm *v)
{
	struct ppi_ring *r = v->ring;
	ppi_shm_reap(v, true);
	if (!LOAD(r->handles[PPI_READ]) && !LOAD(r->handles[PPI_WRITE]))
		ring_drain(v, v->ri);
}

int ppi_shm_desc_new(struct ppi_shm *v, int side, int flags)
{
	struct ppi_shm_desc *de = ppi_shm_descs(v);
	for (uint32_t d = 0; d < PPI_SHM_DESCS; d++)
		if (!LOAD(de[d].holders) && !LOAD(ppi_shm_holders(v)[v->m->holder].handles[d])) {
			atomic_store_explicit(&de[d].side, (uint32_t)side, RELAXED);
			atomic_store_explicit(&de[d].flags, flags, RELAXED);
			atomic_store_explicit(&de[d].ring, v->ri, RELAXED);
			return (int)d;
		}
	return -1;
}

/* Drop the token ends of a side the process no longer holds.  Under mu,
 * with the count looked at in the same hold: another thread may be
 * polling them (ppi_shm_look_slow), or taking a handle of the side. */
static void tokens_leave(struct ppi_shm *v, int side)
{
	pthread_mutex_lock(&v->m->mu);
	if (v->handles[side]) {
		pthread_mutex_unlock(&v->m->mu);
		return;
	}
	if (side == PPI_READ) {
		close_fd(&v->d_rd);
		close_fd(&v->r_wr);
	} else {
		close_fd(&v->d_wr);
		close_fd(&v->r_rd);
	}
	pthread_mutex_unlock(&v->m->mu);
}

/* The process lets go of pipe v (it holds no handle on it); of its memory
 * too if it holds no other pipe of it. */
void ppi_shm_detach(struct ppi_shm *v)
{
	struct ppi_shm_mem *m = v->m;
	ppi_shm_views_lock();
	pthread_mutex_lock(&m->mu);
	if (m->pipe[v->ri] == v)
		m->pipe[v->ri] = NULL;
	bool empty = true;
	for (uint32_t i = 0; i < PPI_SHM_RINGS; i++)
		empty &= !m->pipe[i];
	pthread_mutex_unlock(&m->mu);
	if (empty)
		for (struct ppi_shm_mem **p = &mems; *p; p = &(*p)->next)
			if (*p == m) {
				*p = m->next;
				break;
			}
	ppi_shm_views_unlock();
	pipe_free(v);
	if (empty)
		mem_free(m);
}

int ppi_shm_handles(struct ppi_shm *v, uint32_t d, int side, int n, unsigned *closed, int *gone)
{
	*gone = 0;
	*closed = 0;
	if (d >= PPI_SHM_DESCS)
		return EINVAL;
	/* side is the handle's, not the description's word in shared memory:
	 * this process's own counts must not follow what another process
	 * writes there (a rewritten side would leave them never reaching
	 * zero, and the view never freed). */
	side &= 1;
	if (!holder_count(v, v->m->holder, d, n) && n < 0)
		*closed = 1u << side;
	pthread_mutex_lock(&v->m->mu);
	v->handles[side] += (uint32_t)n;
	bool none = !v->handles[PPI_READ] && !v->handles[PPI_WRITE];
	bool mem_none = none && mem_holds_nothing(v->m);
	pthread_mutex_unlock(&v->m->mu);
	if (none && n < 0) {
		*gone = 1;
		if (mem_none) {
			atomic_store_explicit(&ppi_shm_holders(v)[v->m->holder].state,
			                      PPI_HOLDER_FREE, RELAXED);
			*gone = 2;
		}
	}
	return 0;
}

/* After the lock is dropped: close what the process no longer needs. */
void ppi_shm_after_close(struct ppi_shm *v, int side, int gone)
{
	if (gone) {
		ppi_shm_detach(v);
		return;
	}
	tokens_leave(v, side);
}

void ppi_shm_reserve(struct ppi_shm *v, int n)
{
	struct ppi_shm_holder *ho = &ppi_shm_holders(v)[v->m->holder];
	_Atomic uint32_t *res = &ho->reserved[v->ri];
	atomic_store_explicit(res, LOAD(*res) + (uint32_t)n, RELAXED);
}

/* Under the lock: holder `to` gets the handles holder `from` has (a forked
 * child those of its parent). */
void ppi_shm_holder_copy(struct ppi_shm *v, uint32_t from, uint32_t to)
{
	struct ppi_shm_holder *hs = ppi_shm_holders(v);
	for (uint32_t d = 0; d < PPI_SHM_DESCS; d++) {
		uint32_t n = LOAD(hs[from].handles[d]);
		if (n)
			holder_count(v, to, d, n);
	}
}

void ppi_shm_unclosed_add(struct ppi_shm *v, uint32_t d)
{
	if (d >= PPI_SHM_DESCS)
		return;
	pthread_mutex_lock(&v->m->mu);
	v->m->unclosed_desc[d]++;
	atomic_store_explicit(&v->m->unclosed, LOAD(v->m->unclosed) + 1, RELAXED);
	pthread_mutex_unlock(&v->m->mu);
}

void ppi_shm_unclosed_put(struct ppi_shm *v)
{
	unsigned closed = 0;
	pthread_mutex_lock(&v->m->mu);
	for (uint32_t d = 0; d < PPI_SHM_DESCS; d++) {
		uint32_t n = v->m->unclosed_desc[d];
		if (n && !holder_count(v, v->m->holder, d, -(int)n))
			closed |= 1u << (LOAD(ppi_shm_descs(v)[d].side) & 1);
		v->m->unclosed_desc[d] = 0;
	}
	atomic_store_explicit(&v->m->unclosed, 0, RELAXED);
	pthread_mutex_unlock(&v->m->mu);
	if (closed)
		wake_all(v); /* they must see end of file or EPIPE */
}

/* Under the lock: count out the sleepers of waits that ended without it
 * (EIO at the relock).  Never below zero: a peer may have rewritten the
 * counts meanwhile. */
void ppi_shm_unslept_put(struct ppi_shm *v)
{
	struct ppi_shm_holder *ho = &ppi_shm_holders(v)[v->m->holder];
	for (int side = 0; side < 2; side++) {
		uint32_t n = atomic_exchange_explicit(&v->unslept[side], 0, RELAXED);
		uint32_t in_ring = v->ring->sleepers[side], in_rec = LOAD(ho->sleepers[v->ri][side]);
		v->ring->sleepers[side] = in_ring - (n < in_ring ? n : in_ring);
		atomic_store_explicit(&ho->sleepers[v->ri][side], in_rec - (n < in_rec ? n : in_rec),
		                      RELAXED);
	}
}

int ppi_shm_stats(struct ppi_shm *v, struct pp_shared_stats *st)
{
	int err = ppi_shm_lock(v);
	if (err)
		return err;
	if (LOAD(v->m->unclosed))
		ppi_shm_unclosed_put(v);
	if (LOAD(v->m->deferred))
		ppi_shm_deferred_put(v); /* ours, only waiting for a lock */
	/* The dead hold nothing: reap them first, so that the counts are what
	 * the live hold, even when no other call comes to reap (a reaping that
	 * closed a side owes its other side's sleepers a wake). */
	if (ppi_shm_reap(v, true))
		wake_all(v);
	struct ppi_shm_hdr *hdr = v->hdr;
	/* Counted from the pages' owners (the hot paths keep no counts but
	 * the idle one: these would be one more cache line to pass around). */
	long in_ring = 0, held = 0, idle = 0;
	struct ppi_shm_page *pg = ppi_shm_pages(v);
	uint32_t data_pages = LOAD(hdr->data_pages);
	if (data_pages > PPI_SHM_MAX_PAGES)
		data_pages = PPI_SHM_MAX_PAGES;
	for (uint32_t p = 1; p < data_pages; p++) {
		uint32_t o = LOAD(pg[p].owner);
		in_ring += o == PPI_PAGE_RING;
		held += o >= PPI_PAGE_HELD;
		idle += o == PPI_PAGE_IDLE;
	}
	st->pages_in_ring = in_ring;
	st->pages_held = held;
	st->pages_idle = idle;
	st->pages_mapped = LOAD(hdr->data_pages) - 1;
	long holders = 0;
	for (uint32_t h = 0; h < PPI_SHM_HOLDERS; h++)
		holders += LOAD(ppi_shm_holders(v)[h].state) != PPI_HOLDER_FREE;
	st->holders = holders;
	ppi_shm_unlock(v);
	return LOAD(hdr->broken) ? EIO : 0;
}
