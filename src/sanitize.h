/*
 * sanitize.h - what the checking builds add to the library, and nothing
 * else: helgrind support (make check-helgrind, -DPP_HELGRIND) and the
 * invariant checks of the sanitizer builds (-DPP_CHECK_INVARIANTS).  In an
 * ordinary build every macro here is empty.
 *
 * base.h includes this header before any atomic operation is written, so
 * that under PP_HELGRIND the <stdatomic.h> names below are the annotated
 * ones everywhere in the library.
 */
#ifndef PPI_SANITIZE_H
#define PPI_SANITIZE_H

#include <stdatomic.h>

/*
 * Helgrind understands pthreads, not our futex ticket lock nor C11
 * atomics.  Built with -DPP_HELGRIND (build-helgrind/ only; no valgrind
 * header is needed otherwise):
 *   - ppi_lock and ppi_unlock report the lock to it as a lock held for
 *     writing (ANNOTATE_RWLOCK_ACQUIRED/RELEASED), so its lock sets, race
 *     reports and lock-order checks cover the ring, pool and handle locks;
 *   - every atomic operation below this point becomes a synchronisation
 *     for it: it happens after every earlier atomic operation on the same
 *     object and before every later one (ANNOTATE_HAPPENS_AFTER, then the
 *     operation, then ANNOTATE_HAPPENS_BEFORE), as if all were seq_cst.
 *     Without that, helgrind reports every lock-free hint read (a waiter
 *     looking at head and tail, pp_events, the status flags, the handle
 *     magic), the lock's own words, and every page, ring or loan handed on
 *     by the reference count that reached zero (a page's reuse after its
 *     last reader's copy).  The price: code that wrongly relies on a
 *     relaxed atomic to publish other data is not caught here; TSan, which
 *     knows C11's memory orders, checks exactly that (make check-tsan).
 * Test programs built for helgrind include this header first (-include
 * sanitize.h), so that their own atomics are treated the same way.
 */
#ifdef PP_HELGRIND
#include <valgrind/helgrind.h>

#define PPI_HG_ACQUIRED(l) ANNOTATE_RWLOCK_ACQUIRED((l), 1)
#define PPI_HG_RELEASED(l) ANNOTATE_RWLOCK_RELEASED((l), 1)

/* The plain atomic operations, under the compiler's own names. */
#ifdef __clang__
#define PPI_HG_LOAD(p, mo) __c11_atomic_load(p, mo)
#define PPI_HG_STORE(p, v, mo) __c11_atomic_store(p, v, mo)
#define PPI_HG_XCHG(p, v, mo) __c11_atomic_exchange(p, v, mo)
#define PPI_HG_CAS(p, e, d, ms, mf) __c11_atomic_compare_exchange_strong(p, e, d, ms, mf)
#define PPI_HG_RMW(op, p, v, mo) __c11_atomic_fetch_##op(p, v, mo)
#else
#define PPI_HG_LOAD(p, mo)                                                    \
	__extension__({                                                          \
		__typeof__((void)0, *(p)) ppi_hg_t_;                                  \
		__atomic_load(p, &ppi_hg_t_, mo);                                     \
		ppi_hg_t_;                                                            \
	})
#define PPI_HG_STORE(p, v, mo)                                                \
	__extension__({                                                          \
		__typeof__((void)0, *(p)) ppi_hg_t_ = (v);                            \
		__atomic_store(p, &ppi_hg_t_, mo);                                    \
	})
#define PPI_HG_XCHG(p, v, mo)                                                 \
	__extension__({                                                          \
		__typeof__((void)0, *(p)) ppi_hg_t_ = (v), ppi_hg_o_;                  \
		__atomic_exchange(p, &ppi_hg_t_, &ppi_hg_o_, mo);                      \
		ppi_hg_o_;                                                            \
	})
#define PPI_HG_CAS(p, e, d, ms, mf)                                           \
	__extension__({                                                          \
		__typeof__((void)0, *(p)) ppi_hg_t_ = (d);                            \
		__atomic_compare_exchange(p, e, &ppi_hg_t_, 0, ms, mf);               \
	})
#define PPI_HG_RMW(op, p, v, mo) __atomic_fetch_##op(p, v, mo)
#endif

/*
 * Run expr (which names the object ppi_hg_p_) as a synchronisation on *p.
 * The atomic object itself is taken out of race checking (two atomic
 * accesses never race): the happens-before edges alone would not cover a
 * thread switch between an annotation and the access.  Helgrind checks the
 * memory again once it is freed and allocated anew.
 */
#define PPI_HG_SYNC(p, expr)                                                  \
	__extension__({                                                          \
		__auto_type ppi_hg_p_ = (p);                                          \
		VALGRIND_HG_DISABLE_CHECKING(ppi_hg_p_, sizeof *ppi_hg_p_);            \
		ANNOTATE_HAPPENS_AFTER(ppi_hg_p_);                                    \
		__auto_type ppi_hg_r_ = (expr);                                       \
		ANNOTATE_HAPPENS_BEFORE(ppi_hg_p_);                                   \
		ppi_hg_r_;                                                            \
	})
#define PPI_HG_SYNC_VOID(p, expr)                                             \
	__extension__({                                                          \
		__auto_type ppi_hg_p_ = (p);                                          \
		VALGRIND_HG_DISABLE_CHECKING(ppi_hg_p_, sizeof *ppi_hg_p_);            \
		ANNOTATE_HAPPENS_AFTER(ppi_hg_p_);                                    \
		expr;                                                                \
		ANNOTATE_HAPPENS_BEFORE(ppi_hg_p_);                                   \
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
#define atomic_load_explicit(p, mo) PPI_HG_SYNC(p, PPI_HG_LOAD(ppi_hg_p_, mo))
#define atomic_store_explicit(p, v, mo) PPI_HG_SYNC_VOID(p, PPI_HG_STORE(ppi_hg_p_, v, mo))
#define atomic_exchange_explicit(p, v, mo) PPI_HG_SYNC(p, PPI_HG_XCHG(ppi_hg_p_, v, mo))
#define atomic_compare_exchange_strong_explicit(p, e, d, ms, mf)             \
	PPI_HG_SYNC(p, PPI_HG_CAS(ppi_hg_p_, e, d, ms, mf))
#define atomic_compare_exchange_weak_explicit atomic_compare_exchange_strong_explicit
#define atomic_fetch_add_explicit(p, v, mo) PPI_HG_SYNC(p, PPI_HG_RMW(add, ppi_hg_p_, v, mo))
#define atomic_fetch_sub_explicit(p, v, mo) PPI_HG_SYNC(p, PPI_HG_RMW(sub, ppi_hg_p_, v, mo))
#define atomic_fetch_or_explicit(p, v, mo) PPI_HG_SYNC(p, PPI_HG_RMW(or, ppi_hg_p_, v, mo))
#define atomic_fetch_and_explicit(p, v, mo) PPI_HG_SYNC(p, PPI_HG_RMW(and, ppi_hg_p_, v, mo))
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
#define PPI_HG_ACQUIRED(l) ((void)(l))
#define PPI_HG_RELEASED(l) ((void)(l))
#endif

/* Checks of invariants the fast paths rely on without looking: compiled
 * in by the sanitizer builds (make check-asan), nothing otherwise. */
#ifdef PP_CHECK_INVARIANTS
#include <stdio.h>
#include <stdlib.h>
#define PPI_INVARIANT(expr)                                                   \
	((expr) ? (void)0                                                        \
	        : (fprintf(stderr, "pagepipe: invariant broken at %s:%d: %s\n",  \
	                   __FILE__, __LINE__, #expr),                           \
	           abort()))
#else
#define PPI_INVARIANT(expr) ((void)0)
#endif

#endif
