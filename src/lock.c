/*
 * lock.c - the slow path of the ring lock, and how long waiters spin.
 *
 * The lock is held for short copies (at most a page), so a thread that
 * finds it taken first spins, expecting the holder to finish on the other
 * CPU, and only then sleeps.  The fast paths and the reasoning for a ticket
 * lock are in lock.h.
 */
#include "lock.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

/* How long a waiter spins before it sleeps.  A futex sleep and wake costs
 * several microseconds (tens in a virtual machine, where waking an idle
 * CPU goes through the hypervisor), so spinning for some tens of
 * microseconds wins whenever the other side is running; beyond that the
 * other side is probably not running and spinning only steals its CPU. */
#define SPIN_NS 50000

unsigned ppi_spin_limit = 2000;
unsigned ppi_lock_spin_limit = 200;
unsigned ppi_gather_pauses = 40;
unsigned ppi_spin_ns = 0;
#define LOCK_SPIN_NS 5000
#define GATHER_NS 4000

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* pause costs from a few to over a hundred cycles depending on the CPU:
 * measure it once and turn SPIN_NS into a count.  PP_SPIN_NS overrides
 * the budget for data and room (0: a wait for them sleeps at once, for a
 * process that must not use CPU while idle).  The lock keeps its short
 * spin even then: its holder is working on the other CPU and lets go
 * within microseconds, so that spin is no idle waiting, and sleeping on
 * the lock instead cost such a reader a futex sleep, and the writer a
 * wake, on most hand-offs (a 64 KiB stream into a reader under
 * PP_SPIN_NS=0, two processes: 70% of the writer's futex calls were the
 * lock's; 9.5-9.8 GB/s with the lock sleeping, 14.7-15.8 spinning).  With
 * one CPU nothing spins: the holder cannot run while we do. */
__attribute__((constructor)) static void spin_init(void)
{
	long budget = SPIN_NS;
	const char *env = getenv("PP_SPIN_NS");
	if (env)
		budget = atol(env);
	/* The CPUs this process may run on, not those online: under taskset
	 * -c 0 the thread we wait for can only run when we stop spinning. */
	cpu_set_t cpus;
	int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus)
	                                                        : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu <= 1) {
		ppi_spin_limit = 0;
		ppi_lock_spin_limit = 0;
		ppi_gather_pauses = 0;
		return;
	}
	double t0 = now_ns();
	for (int i = 0; i < 1000; i++)
		ppi_cpu_relax();
	double per = (now_ns() - t0) / 1000;
	if (per < 1)
		per = 1;
	double n = LOCK_SPIN_NS / per;
	ppi_lock_spin_limit = n > 1e5 ? 100000u : n < 16 ? 16u : (unsigned)n;
	if (budget <= 0) {
		ppi_spin_limit = 0;
		ppi_gather_pauses = 0;
		return;
	}
	n = budget / per;
	ppi_spin_limit = n > 1e6 ? 1000000u : n < 16 ? 16u : (unsigned)n;
	ppi_spin_ns = (unsigned)(ppi_spin_limit * per);
	env = getenv("PP_GATHER_NS");
	n = (env ? atol(env) : GATHER_NS) / per;
	ppi_gather_pauses = n > 1e5 ? 100000u : n < 0 ? 0u : (unsigned)n;
}

void ppi_lock_slow(struct ppi_lock *l, uint32_t ticket)
{
	for (unsigned i = 0; i < ppi_lock_spin_limit; i++) {
		ppi_cpu_relax();
		if (atomic_load_explicit(&l->serving, memory_order_acquire) == ticket)
			return;
	}
	atomic_fetch_add_explicit(&l->sleepers, 1, memory_order_seq_cst);
	for (;;) {
		uint32_t now = atomic_load_explicit(&l->serving, memory_order_seq_cst);
		if (now == ticket)
			break;
		/* Every unlock with sleepers wakes all of them; each one whose
		 * ticket is not up goes back to sleep. */
		ppi_futex_wait(&l->serving, now);
	}
	atomic_fetch_sub_explicit(&l->sleepers, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX_32
#define FUTEX_32 2
struct futex_waitv {
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t __reserved;
};
#endif

static _Atomic int no_waitv; /* the kernel said ENOSYS once */

int ppi_futex_wait_until(_Atomic uint32_t *word, uint32_t expect, const struct timespec *deadline,
                         bool moved)
{
	long r;
	/* The word moved on already: what the kernel would answer (EAGAIN),
	 * without the call.  A waiter that counted itself a sleeper often
	 * finds this, the other side having written meanwhile: between
	 * processes a reader with no spin budget made one such call a 64 KiB
	 * block (12863 of 13091 waits in a 1 GiB stream failed at once), and
	 * a system call costs microseconds in a VM. */
	if (atomic_load_explicit(word, memory_order_acquire) != expect)
		return 0;
	if (!moved && !atomic_load_explicit(&no_waitv, memory_order_relaxed)) {
		struct futex_waitv w = { .val = expect, .uaddr = (uintptr_t)word, .flags = FUTEX_32 };
		r = syscall(SYS_futex_waitv, &w, 1, 0, deadline, CLOCK_MONOTONIC);
		if (r >= 0)
			return 0;
		if (errno != ENOSYS)
			return errno == ETIMEDOUT || errno == EINTR ? errno : 0;
		atomic_store_explicit(&no_waitv, 1, memory_order_relaxed);
	}
	r = syscall(SYS_futex, word, FUTEX_WAIT_BITSET, expect, deadline, NULL,
	            FUTEX_BITSET_MATCH_ANY);
	if (r >= 0)
		return 0;
	return errno == ETIMEDOUT || errno == EINTR ? errno : 0;
}
