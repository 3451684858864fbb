/*
 * lock.h - the waiting primitives under every pipe: futex words, the
 * CPU's spin hint, how long waiters spin (calibrated in lock.c), and the
 * ticket lock that guards a ring and the page pool.
 *
 * The lock's fast paths are inline here because every read and write takes
 * it once; its slow path and the spin calibration are in lock.c.
 */
#ifndef PPI_LOCK_H
#define PPI_LOCK_H

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

/* ---- futex words --------------------------------------------------- */

static inline int ppi_futex_wait(_Atomic uint32_t *word, uint32_t expect)
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
static inline int ppi_futex_wait_intr(_Atomic uint32_t *word, uint32_t expect)
{
	struct timespec day = { .tv_sec = 86400, .tv_nsec = 0 };
	long r = syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expect, &day, NULL, 0);
	return (r == -1 && errno == EINTR) ? EINTR : 0;
}

static inline void ppi_futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/*
 * Futex words in memory shared between processes (shm.c): the same, without
 * FUTEX_PRIVATE_FLAG, and always with a deadline, because a waiter must
 * look again now and then at peers that may have died.
 *
 * ppi_futex_wait_until waits until *word != expect, a wake, or the absolute
 * CLOCK_MONOTONIC deadline: 0, ETIMEDOUT, or EINTR.  It uses futex_waitv,
 * which the kernel restarts after an SA_RESTART handler (deadline and all)
 * as it restarts an untimed FUTEX_WAIT, so a handled signal ends the wait
 * exactly when it would end a kernel pipe's; with moved set it uses a
 * FUTEX_WAIT with a timeout, which any handled signal ends (see
 * ppi_futex_wait_intr).  Kernels before 5.16 lack futex_waitv: then every
 * handled signal ends the wait.
 */
int ppi_futex_wait_until(_Atomic uint32_t *word, uint32_t expect, const struct timespec *deadline,
                         bool moved);

static inline void ppi_futex_wake_shared(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

static inline void ppi_cpu_relax(void)
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
extern unsigned ppi_spin_limit;
/* The same for a thread waiting for the ring lock, which is held only for
 * short copies: much shorter, so that when the holder has been preempted
 * (more threads than CPUs) waiters sleep instead of burning its CPU. */
extern unsigned ppi_lock_spin_limit;
/* Pauses a reader of a stream of small writes waits to let them gather. */
extern unsigned ppi_gather_pauses;
/* The time ppi_spin_limit pauses take, in ns (0 when spinning is off). */
extern unsigned ppi_spin_ns;

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
struct ppi_lock {
	_Atomic uint32_t next;     /* next ticket to hand out */
	_Atomic uint32_t serving;  /* ticket that holds the lock; futex word */
	_Atomic uint32_t sleepers; /* waiters asleep on serving */
};

void ppi_lock_slow(struct ppi_lock *l, uint32_t ticket);

static inline void ppi_lock(struct ppi_lock *l)
{
	uint32_t ticket = atomic_fetch_add_explicit(&l->next, 1, memory_order_relaxed);
	if (unlikely(atomic_load_explicit(&l->serving, memory_order_acquire) != ticket))
		ppi_lock_slow(l, ticket);
	PPI_HG_ACQUIRED(l);
}

static inline void ppi_unlock(struct ppi_lock *l)
{
	PPI_HG_RELEASED(l);
	/* seq_cst on both sides pairs with the sleeper's count-then-check:
	 * either we see its count or it sees our new serving value. */
	atomic_fetch_add_explicit(&l->serving, 1, memory_order_seq_cst);
	if (unlikely(atomic_load_explicit(&l->sleepers, memory_order_seq_cst)))
		ppi_futex_wake(&l->serving, INT_MAX);
}

#endif
