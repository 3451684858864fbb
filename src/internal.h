/*
 * internal.h - what the library's source files share and users never see.
 *
 * Three layers, bottom up:
 *   - futex words and the ring lock (a three-state futex mutex), here inline
 *     because every read and write takes the lock once;
 *   - the page pool (pool.c): pages named by 32-bit handles, so that ring
 *     state holds handles, never pointers;
 *   - the ring (ring.c) and the end handles (end.c).
 *
 * Position independence.  Everything in struct pp_ring is an integer: page
 * handles, free-running indices, and a self-relative offset to the slot
 * array.  Nothing in it is a pointer, so the same layout can later live in
 * memory shared between processes mapped at different addresses.  The
 * eventfds in it are process-local and are the one exception; they are
 * documented as such and will move to a per-process side table then.
 */
#ifndef PP_INTERNAL_H
#define PP_INTERNAL_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"

#define PP_API __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define PP_PAGE_MASK (PP_PAGE_SIZE - 1u)
#define PP_DEFAULT_PAGES 16u
#define PP_MAX_RW 0x7ffff000ul /* read(2)/write(2) clamp: INT_MAX & page mask */

/* ---- helgrind builds (make check-helgrind; off by default) ---------- */

/*
 * Helgrind understands pthreads, not our futex ticket lock nor C11
 * atomics.  Built with -DPP_HELGRIND (build-helgrind/ only; no valgrind
 * header is needed otherwise):
 *   - pp_lock and pp_unlock report the lock to it as a lock held for
 *     writing (ANNOTATE_RWLOCK_ACQUIRED/RELEASED), so its lock sets, race
 *     reports and lock-order checks cover the ring, pool and handle locks;
 *   - every atomic operation below this point becomes a synchronisation
 *     for it: it happens after every earlier atomic operation on the same
 *     object and before every later one (ANNOTATE_HAPPENS_AFTER, then the
 *     operation, then ANNOTATE_HAPPENS_BEFORE), as if all were seq_cst.
 *     Without that, helgrind reports every lock-free hint read (a waiter
 *     looking at head and tail, pp_events, the status flags, the handle
 *     magic), the lock's own words, and every page, ring or gift handed on
 *     by the reference count that reached zero (a page's reuse after its
 *     last reader's copy).  The price: code that wrongly relies on a
 *     relaxed atomic to publish other data is not caught here; TSan, which
 *     knows C11's memory orders, checks exactly that (make check-tsan).
 * Test programs built for helgrind include this header first (-include
 * internal.h), so that their own atomics are treated the same way.
 */
#ifdef PP_HELGRIND
#include <valgrind/helgrind.h>

#define PP_HG_ACQUIRED(l) ANNOTATE_RWLOCK_ACQUIRED((l), 1)
#define PP_HG_RELEASED(l) ANNOTATE_RWLOCK_RELEASED((l), 1)

/* The plain atomic operations, under the compiler's own names. */
#ifdef __clang__
#define PP_HG_LOAD(p, mo) __c11_atomic_load(p, mo)
#define PP_HG_STORE(p, v, mo) __c11_atomic_store(p, v, mo)
#define PP_HG_XCHG(p, v, mo) __c11_atomic_exchange(p, v, mo)
#define PP_HG_CAS(p, e, d, ms, mf) __c11_atomic_compare_exchange_strong(p, e, d, ms, mf)
#define PP_HG_RMW(op, p, v, mo) __c11_atomic_fetch_##op(p, v, mo)
#else
#define PP_HG_LOAD(p, mo)                                                    \
	__extension__({                                                          \
		__typeof__((void)0, *(p)) pp_hg_t_;                                  \
		__atomic_load(p, &pp_hg_t_, mo);                                     \
		pp_hg_t_;                                                            \
	})
#define PP_HG_STORE(p, v, mo)                                                \
	__extension__({                                                          \
		__typeof__((void)0, *(p)) pp_hg_t_ = (v);                            \
		__atomic_store(p, &pp_hg_t_, mo);                                    \
	})
#define PP_HG_XCHG(p, v, mo)                                                 \
	__extension__({                                                          \
		__typeof__((void)0, *(p)) pp_hg_t_ = (v), pp_hg_o_;                  \
		__atomic_exchange(p, &pp_hg_t_, &pp_hg_o_, mo);                      \
		pp_hg_o_;                                                            \
	})
#define PP_HG_CAS(p, e, d, ms, mf)                                           \
	__extension__({                                                          \
		__typeof__((void)0, *(p)) pp_hg_t_ = (d);                            \
		__atomic_compare_exchange(p, e, &pp_hg_t_, 0, ms, mf);               \
	})
#define PP_HG_RMW(op, p, v, mo) __atomic_fetch_##op(p, v, mo)
#endif

/*
 * Run expr (which names the object pp_hg_p_) as a synchronisation on *p.
 * The atomic object itself is taken out of race checking (two atomic
 * accesses never race): the happens-before edges alone would not cover a
 * thread switch between an annotation and the access.  Helgrind checks the
 * memory again once it is freed and allocated anew.
 */
#define PP_HG_SYNC(p, expr)                                                  \
	__extension__({                                                          \
		__auto_type pp_hg_p_ = (p);                                          \
		VALGRIND_HG_DISABLE_CHECKING(pp_hg_p_, sizeof *pp_hg_p_);            \
		ANNOTATE_HAPPENS_AFTER(pp_hg_p_);                                    \
		__auto_type pp_hg_r_ = (expr);                                       \
		ANNOTATE_HAPPENS_BEFORE(pp_hg_p_);                                   \
		pp_hg_r_;                                                            \
	})
#define PP_HG_SYNC_VOID(p, expr)                                             \
	__extension__({                                                          \
		__auto_type pp_hg_p_ = (p);                                          \
		VALGRIND_HG_DISABLE_CHECKING(pp_hg_p_, sizeof *pp_hg_p_);            \
		ANNOTATE_HAPPENS_AFTER(pp_hg_p_);                                    \
		expr;                                                                \
		ANNOTATE_HAPPENS_BEFORE(pp_hg_p_);                                   \
	})

#undef atomic_load_explicit
#undef atomic_store_explicit
#undef atomic_exchange_explicit
#undef atomic_compare_exchange_strong_explicit
#undef atomic_compare_exchange_weak_explicit
#undef atomic_fetch_add_explicit
#undef atomic_fetch_sub_explicit
#undef atomic_fetch_or_explicit
#undef atomic_fetch_and_explicit
#undef atomic_load
#undef atomic_store
#undef atomic_exchange
#undef atomic_compare_exchange_strong
#undef atomic_compare_exchange_weak
#undef atomic_fetch_add
#undef atomic_fetch_sub
#undef atomic_fetch_or
#undef atomic_fetch_and
#define atomic_load_explicit(p, mo) PP_HG_SYNC(p, PP_HG_LOAD(pp_hg_p_, mo))
#define atomic_store_explicit(p, v, mo) PP_HG_SYNC_VOID(p, PP_HG_STORE(pp_hg_p_, v, mo))
#define atomic_exchange_explicit(p, v, mo) PP_HG_SYNC(p, PP_HG_XCHG(pp_hg_p_, v, mo))
#define atomic_compare_exchange_strong_explicit(p, e, d, ms, mf)             \
	PP_HG_SYNC(p, PP_HG_CAS(pp_hg_p_, e, d, ms, mf))
#define atomic_compare_exchange_weak_explicit atomic_compare_exchange_strong_explicit
#define atomic_fetch_add_explicit(p, v, mo) PP_HG_SYNC(p, PP_HG_RMW(add, pp_hg_p_, v, mo))
#define atomic_fetch_sub_explicit(p, v, mo) PP_HG_SYNC(p, PP_HG_RMW(sub, pp_hg_p_, v, mo))
#define atomic_fetch_or_explicit(p, v, mo) PP_HG_SYNC(p, PP_HG_RMW(or, pp_hg_p_, v, mo))
#define atomic_fetch_and_explicit(p, v, mo) PP_HG_SYNC(p, PP_HG_RMW(and, pp_hg_p_, v, mo))
#define atomic_load(p) atomic_load_explicit(p, memory_order_seq_cst)
#define atomic_store(p, v) atomic_store_explicit(p, v, memory_order_seq_cst)
#define atomic_exchange(p, v) atomic_exchange_explicit(p, v, memory_order_seq_cst)
#define atomic_compare_exchange_strong(p, e, d)                              \
	atomic_compare_exchange_strong_explicit(p, e, d, memory_order_seq_cst,   \
	                                        memory_order_seq_cst)
#define atomic_compare_exchange_weak atomic_compare_exchange_strong
#define atomic_fetch_add(p, v) atomic_fetch_add_explicit(p, v, memory_order_seq_cst)
#define atomic_fetch_sub(p, v) atomic_fetch_sub_explicit(p, v, memory_order_seq_cst)
#define atomic_fetch_or(p, v) atomic_fetch_or_explicit(p, v, memory_order_seq_cst)
#define atomic_fetch_and(p, v) atomic_fetch_and_explicit(p, v, memory_order_seq_cst)
#else
#define PP_HG_ACQUIRED(l) ((void)(l))
#define PP_HG_RELEASED(l) ((void)(l))
#endif

/* Checks of invariants the fast paths rely on without looking: compiled
 * in by the sanitizer builds (make check-asan), nothing otherwise. */
#ifdef PP_CHECK_INVARIANTS
#include <stdio.h>
#include <stdlib.h>
#define PP_INVARIANT(expr)                                                   \
	((expr) ? (void)0                                                        \
	        : (fprintf(stderr, "pagepipe: invariant broken at %s:%d: %s\n",  \
	                   __FILE__, __LINE__, #expr),                           \
	           abort()))
#else
#define PP_INVARIANT(expr) ((void)0)
#endif

/* ---- futex words --------------------------------------------------- */

static inline int pp_futex_wait(_Atomic uint32_t *word, uint32_t expect)
{
	/* Returns 0 when woken or when *word != expect already, EINTR when a
	 * signal handler ran.  The kernel restarts the wait by itself after an
	 * SA_RESTART handler, exactly as it restarts a blocked pipe read. */
	long r = syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
	return (r == -1 && errno == EINTR) ? EINTR : 0;
}

/* The same, but a signal handler always interrupts it, SA_RESTART or not:
 * a futex wait with a timeout is restarted by the kernel only when no
 * handler ran.  For a writer that has already moved bytes, which Linux
 * returns from on any handled signal.  The timeout itself only makes the
 * caller look at the pipe again. */
static inline int pp_futex_wait_intr(_Atomic uint32_t *word, uint32_t expect)
{
	struct timespec day = { .tv_sec = 86400, .tv_nsec = 0 };
	long r = syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expect, &day, NULL, 0);
	return (r == -1 && errno == EINTR) ? EINTR : 0;
}

static inline void pp_futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void pp_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* Spin iterations a waiter may burn before it sleeps: 0 on one CPU, where
 * spinning only delays the thread that would make progress. */
extern unsigned pp_spin_limit;
/* The same for a thread waiting for the ring lock, which is held only for
 * short copies: much shorter, so that when the holder has been preempted
 * (more threads than CPUs) waiters sleep instead of burning its CPU. */
extern unsigned pp_lock_spin_limit;
/* Pauses a reader of a stream of small writes waits to let them gather. */
extern unsigned pp_gather_pauses;

/* ---- the lock ------------------------------------------------------- */

/*
 * A ticket lock: a thread takes the next ticket and holds the lock when
 * `serving` reaches it.  It is fair on purpose.  With an ordinary
 * test-and-set lock a writer doing tiny writes in a loop releases and
 * re-takes the lock within nanoseconds, and a reader spinning on the other
 * CPU practically never sees it free; with tickets the reader is served
 * next.  A waiter spins first (holders only copy at most a page under it);
 * after that it counts itself in `sleepers` and sleeps on `serving`, and an
 * unlock makes a futex call only when that count is non-zero.
 */
struct pp_lock {
	_Atomic uint32_t next;     /* next ticket to hand out */
	_Atomic uint32_t serving;  /* ticket that holds the lock; futex word */
	_Atomic uint32_t sleepers; /* waiters asleep on serving */
};

void pp_lock_slow(struct pp_lock *l, uint32_t ticket);

static inline void pp_lock(struct pp_lock *l)
{
	uint32_t ticket = atomic_fetch_add_explicit(&l->next, 1, memory_order_relaxed);
	if (unlikely(atomic_load_explicit(&l->serving, memory_order_acquire) != ticket))
		pp_lock_slow(l, ticket);
	PP_HG_ACQUIRED(l);
}

static inline void pp_unlock(struct pp_lock *l)
{
	PP_HG_RELEASED(l);
	/* seq_cst on both sides pairs with the sleeper's count-then-check:
	 * either we see its count or it sees our new serving value. */
	atomic_fetch_add_explicit(&l->serving, 1, memory_order_seq_cst);
	if (unlikely(atomic_load_explicit(&l->sleepers, memory_order_seq_cst)))
		pp_futex_wake(&l->serving, INT_MAX);
}

/* ---- pages ------------------------------------------------------------ */

/* Handle 0 names no page.  A page comes with one reference; pp_page_put
 * drops one, and the last one sends the page back to the pool. */
uint32_t pp_page_get(void);          /* 0 with errno ENOMEM when none */
void pp_page_put(uint32_t page);
/* Up to n pages into pages[]: how many (0 with errno ENOMEM). */
unsigned pp_page_get_many(uint32_t *pages, unsigned n);
void pp_page_put_many(const uint32_t *pages, unsigned n);
/* A pipe's capacity came (pages > 0) or went (pages < 0): the pool keeps
 * spare pages for the room in open pipes (pool.c). */
void pp_pool_pipe_pages(long pages);

/* Handle -> address: a two-level table whose leaves are never freed, so a
 * lookup needs no lock; the entry was written before the handle was handed
 * out, and every handle reaches its user through a lock. */
#define PP_DIR_LEAF_BITS 10
#define PP_DIR_LEAF (1u << PP_DIR_LEAF_BITS)
#define PP_DIR_ROOT 4096u /* 4M handles = 16 GiB of pages */

struct pp_page_slot {
	void *addr;            /* mapping, NULL while the handle is free */
	uint32_t next;         /* link in the pool's idle or free-handle list */
	_Atomic uint32_t refs; /* buffers (in any pipe) and threads holding it */
	void *owner;           /* kind-specific: the gift of a PP_KIND_USER or _FILE handle */
};

extern struct pp_page_slot *pp_page_dir[PP_DIR_ROOT];

static inline struct pp_page_slot *pp_page_slot(uint32_t page)
{
	return &pp_page_dir[page >> PP_DIR_LEAF_BITS][page & (PP_DIR_LEAF - 1)];
}

static inline unsigned char *pp_page_addr(uint32_t page)
{
	return pp_page_slot(page)->addr;
}

/* n more references to a page someone already holds. */
static inline void pp_page_ref(uint32_t page, uint32_t n)
{
	atomic_fetch_add_explicit(&pp_page_slot(page)->refs, n, memory_order_relaxed);
}

static inline uint32_t pp_page_refs(uint32_t page)
{
	return atomic_load_explicit(&pp_page_slot(page)->refs, memory_order_acquire);
}

/* ---- the ring ------------------------------------------------------- */

/* One slot: a page handle, and the bytes [offset, offset+len) of it. */
struct pp_buf {
	uint32_t page;
	uint32_t offset;
	uint32_t len;
	uint32_t flags;
};
/*
 * PP_BUF_CAN_MERGE: a later write may append to this page.  Only a write
 * sets it, on the fresh pool page it pushes (never in packet mode), and
 * whoever takes a second reference to a buffer still in a ring (tee,
 * fanout, a partial splice) clears it on both the copy and the original,
 * for good.  So while it is set the pipe holds the only reference to an
 * anonymous page, which is what the kind's `owned` says; the merge path
 * trusts the flag and builds with PP_CHECK_INVARIANTS ask `owned` too.
 */
#define PP_BUF_CAN_MERGE 0x1
#define PP_BUF_PACKET 0x2    /* a read takes the whole buffer or what fits, never more */
#define PP_BUF_KIND_SHIFT 8  /* flags >> this: index into pp_buf_kinds */

/*
 * What a buffer's page is, and how to hold and let go of it: the seed's
 * "structure full of method pointers".  The ring calls these and never
 * asks which kind it holds.
 */
struct pp_buf_ops {
	void (*get)(uint32_t page, uint32_t n);       /* n more references */
	void (*put)(const uint32_t *pages, unsigned n); /* drop one each */
	bool (*owned)(uint32_t page); /* one reference, ours: a write could append */
};
enum { PP_KIND_ANON = 0, PP_KIND_USER, PP_KIND_FILE, PP_KINDS };

/* vmsplice.c / pool.c: caller memory and mapped file pages as buffers.  A
 * handle names the bytes and its gift record (owner); the record's release
 * runs when the last reference to the last of its handles goes. */
/* n handles for the n pages from addr, under one hold of the pool lock:
 * how many were made (fewer: ENOMEM). */
unsigned pp_handle_user_many(void *addr, unsigned n, void *owner, uint32_t *pages);
void pp_gift_put(void *gift);
/* A record, holding one reference (the caller's), whose release unmaps
 * [addr, addr + len); NULL with ENOMEM. */
void *pp_gift_new_unmap(void *addr, size_t len);
void pp_gift_ref(void *gift, unsigned n); /* n more references */
extern const struct pp_buf_ops *const pp_buf_kinds[PP_KINDS];

static inline const struct pp_buf_ops *pp_buf_ops_of(uint32_t flags)
{
	return pp_buf_kinds[flags >> PP_BUF_KIND_SHIFT];
}

enum { PP_READ = 0, PP_WRITE = 1 };

/*
 * The shared state of one pipe.  Lock rule: `lock` guards every field
 * below it.  The _Atomic ones are also read without the lock by a waiter
 * that spins before it sleeps, and by pp_events' readiness checks in waits;
 * such a read is only a hint, rechecked under the lock.
 *
 * head and tail run free; slot i lives at bufs[i & (ring_size - 1)];
 * head - tail is the number of slots in use, never above max_usage.
 */
#define PP_CACHE_LINE 64
struct pp_ring {
	/* The lock has a cache line of its own.  Every lock and unlock
	 * writes it, while a waiting reader keeps looking at head and tail:
	 * sharing one line, each look cost the writer of a stream of small
	 * writes a cache miss on its next lock. */
	_Alignas(PP_CACHE_LINE) struct pp_lock lock;
	_Alignas(PP_CACHE_LINE) _Atomic uint32_t head; /* next slot a writer fills */
	_Atomic uint32_t tail;      /* oldest slot holding data */
	_Atomic uint32_t max_usage; /* capacity in slots (pages) */
	_Atomic uint32_t reserved;  /* slots held for splices from descriptors */
	_Atomic uint32_t spin_budget[2]; /* pauses a waiter of each side spins; a hint */
	uint32_t ring_size;         /* slots in bufs, a power of two */
	intptr_t bufs_off;          /* bufs, as an offset from this struct */

	/* Open ends: handles on each side.  A side is open while its count is
	 * non-zero; the count itself is changed only under the lock. */
	_Atomic uint32_t handles[2];
	_Atomic int flags[2]; /* status flags per side, shared by dup handles */
	_Atomic uint32_t refs; /* handles alive; the last to go frees the ring */

	/* Sleepers.  A thread about to sleep reads the sequence word, counts
	 * itself in sleepers[] and unlocks; whoever changes what it waits for
	 * bumps the word under the lock and wakes it after.  A waker that
	 * finds sleepers[] zero makes no system call. */
	uint32_t sleepers[2];     /* [PP_READ] wait for data, [PP_WRITE] for room */
	_Atomic uint32_t seq[2];  /* futex words, same indices */

	/* Event descriptors of pp_fd(), -1 until asked for; ready[] mirrors
	 * whether the eventfd's counter is non-zero. */
	int efd[2];
	bool efd_ready[2];
};

static inline struct pp_buf *pp_ring_bufs(struct pp_ring *r)
{
	return (struct pp_buf *)((uintptr_t)r + (uintptr_t)r->bufs_off);
}

/* The handle a caller holds. */
#define PP_END_MAGIC 0x70706e64u /* "ppnd" */
#define PP_END_DEAD 0xdeadeeeeu
struct pp_end {
	_Atomic uint32_t magic;
	int side; /* PP_READ or PP_WRITE */
	struct pp_ring *ring;
	struct pp_end *next_dead; /* quarantine link once closed (end.c) */
};

/* A live handle, or NULL with errno EBADF. */
static inline struct pp_ring *pp_end_ring(struct pp_end *end)
{
	if (unlikely(!end ||
	             atomic_load_explicit(&end->magic, memory_order_relaxed) != PP_END_MAGIC)) {
		errno = EBADF;
		return NULL;
	}
	return end->ring;
}

/* A live handle of the given side, or NULL with errno EBADF. */
static inline struct pp_ring *pp_end_ring_side(struct pp_end *end, int side)
{
	struct pp_ring *r = pp_end_ring(end);
	if (r && end->side != side) {
		errno = EBADF;
		return NULL;
	}
	return r;
}

/* ring.c */
struct pp_ring *pp_ring_new(int flags);
void pp_ring_free(struct pp_ring *r);
bool pp_ring_drop_handle(struct pp_ring *r, int side); /* true: free the ring */
long pp_ring_setsize(struct pp_ring *r, size_t size);
long pp_ring_getsize(struct pp_ring *r);
int pp_ring_nread(struct pp_ring *r);
short pp_ring_events(struct pp_ring *r, int side);
int pp_ring_fd(struct pp_ring *r, int side);

/* An iterator over a caller's iovec array. */
struct pp_iter {
	const struct iovec *iov;
	size_t off;  /* bytes of iov[0] already done */
	size_t left; /* bytes still to move, clamped to PP_MAX_RW */
};

/* Ring internals shared with splice.c; all but pp_ring_ready need the lock. */
/* Slots in use, counting those reserved by a splice from a descriptor. */
static inline uint32_t pp_ring_used(struct pp_ring *r)
{
	return atomic_load_explicit(&r->head, memory_order_relaxed) -
	       atomic_load_explicit(&r->tail, memory_order_relaxed) +
	       atomic_load_explicit(&r->reserved, memory_order_relaxed);
}

/* Free slots a writer may fill now. */
static inline uint32_t pp_ring_room(struct pp_ring *r)
{
	uint32_t max = atomic_load_explicit(&r->max_usage, memory_order_relaxed);
	uint32_t used = pp_ring_used(r);
	return used < max ? max - used : 0;
}

static inline bool pp_ring_full(struct pp_ring *r)
{
	return !pp_ring_room(r);
}

/* What side's sleepers wait for: data or hang-up for readers, a free slot
 * or no reader for writers.  Exact under the lock, a hint without it. */
static inline bool pp_ring_ready(struct pp_ring *r, int side)
{
	if (side == PP_READ)
		return atomic_load_explicit(&r->head, memory_order_relaxed) !=
		           atomic_load_explicit(&r->tail, memory_order_relaxed) ||
		       !atomic_load_explicit(&r->handles[PP_WRITE], memory_order_relaxed);
	return !pp_ring_full(r) ||
	       !atomic_load_explicit(&r->handles[PP_READ], memory_order_relaxed);
}
bool pp_ring_mark_wake(struct pp_ring *r, int side);
bool pp_ring_pass_wake(struct pp_ring *r, int side);
int pp_ring_wait(struct pp_ring *r, int side, int wake_side, bool moved);
void pp_ring_push_buf(struct pp_ring *r, struct pp_buf buf, bool *wake_rd);
void pp_ring_efd_update_slow(struct pp_ring *r, bool data_added);
void pp_ring_drop_bytes(struct pp_ring *r, size_t n);
int pp_ring_wait_data(struct pp_ring *r, bool nonblock, bool *waited);
static inline void pp_ring_efd_update(struct pp_ring *r, bool data_added)
{
	if (unlikely(r->efd[PP_READ] >= 0 || r->efd[PP_WRITE] >= 0))
		pp_ring_efd_update_slow(r, data_added);
}

ssize_t pp_ring_read(struct pp_ring *r, int fl, struct pp_iter *it);
ssize_t pp_ring_write(struct pp_ring *r, int fl, struct pp_iter *it);

#endif
