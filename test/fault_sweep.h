/*
 * fault_sweep.h - how the fault-injection programs (fault_core.c,
 * fault_zerocopy.c) sweep a workload: every allocation and system call the
 * library makes in it is made to fail, one at a time and many at once, and
 * the pipe must survive.
 *
 * test/fault.h interposes on malloc, calloc, mmap, eventfd, read, write,
 * close, readv/preadv, writev/pwritev, fstat, lseek and fcntl (and watches
 * free and munmap) and fails the n-th call made inside an armed window (the
 * descriptor I/O also by a short transfer); every pp_* call of a workload,
 * and only those, runs armed (ARMED), so the test's own allocations and
 * system calls never fail.  A program gives its workload as a struct
 * workload (a series of seeded phases checked against a model) and calls
 * fault_sweep_main; besides the sweep, this holds what both workloads use:
 * the byte pattern data is written from, scratch buffers, the run's
 * context (phase, operation, PRNG) and note_failure, pool(), check_empty()
 * (no pipe open: nothing left behind), check_setsize() and pick_wsize().
 *
 * Sweep.  Every run is a child process (fork), so each starts from the same
 * pristine library state: empty pool, empty handle quarantine, no page
 * table; a crash or hang (alarm) fails the point, not the program.
 *   count_points    runs the workload with nothing failed, checks it
 *                   against the model, and records the kind of each of its
 *                   N failable calls; every kind must occur.
 *   fail_each_point fails call k, for every k = 1..N.  Rather than rerun
 *                   the prefix N times, a driver runs the workload once and
 *                   forks at each failable call; the fork's child fails that
 *                   call and goes on with the rest of that phase and one
 *                   more, short phase, then closes everything and runs the
 *                   checks (and, under ASan, the leak checker) at exit.
 *                   Each such child is exactly a fresh run failing call k,
 *                   only cheaper (it gets private copies of the eventfds it
 *                   inherits).
 *                   Every run checks that its calls up to k are the ones the
 *                   count run made (the workload is deterministic).
 *   fail_every_kth  fails every k-th call, k = 1..40, through the whole
 *                   workload (even k with an 8-page idle cache, odd k
 *                   without), so failures pile up in one pipe.
 * A failing point is reported with its number and kind and stops the sweep
 * after 10.
 *
 * Reproduce one point: FI_POINT=k PROG reruns the program's workload from
 * the start failing call k (no forking at the other points); FI_EVERY=k
 * PROG runs only fail_every_kth with that k.  FI_SEED=n picks other
 * workloads, FI_PHASES=n changes their length (the program's default
 * times PP_TEST_SCALE, at least 3).
 *
 * Everything is static; one program includes this header once.
 */
#ifndef PP_TEST_FAULT_SWEEP_H
#define PP_TEST_FAULT_SWEEP_H

#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "harness/harness.h"
#include "fault.h"
#include "pagepipe.h"

#define PG 4096u
#define MAXSLOTS 256            /* pp_getmaxsize() default: 1 MiB */
#define PAT_LEN 1048573u        /* odd, so no page-sized shift aliases */
#define MAXIO (64u * PG)        /* largest single read or write */
#define MAXH 8                  /* handles per side */
#define LEAF_NMEMB 1024         /* the pool's page-table leaf, calloc(1024, ...),
                                 * never freed; slot arrays have <= 256 */
#define TRACE_MAX (1u << 20)

/* One call armed: the injector counts and fails calls only inside it. */
#define ARMED(expr)                                                          \
	__extension__({                                                          \
		fi_arm();                                                            \
		__typeof__(expr) r_ = (expr);                                        \
		fi_disarm();                                                         \
		r_;                                                                  \
	})

static unsigned char pat[PAT_LEN + MAXIO];
static unsigned char rscratch[MAXIO + 64 * 40];

/* What the parent and its children share (MAP_SHARED). */
#define POINTS_MAX (1u << 16)
struct shared {
	unsigned long ncalls;          /* failable calls of the count run */
	unsigned long per_kind[FI_NKINDS];
	unsigned char trace[TRACE_MAX]; /* their kinds */
	unsigned long npoints;         /* points the fork-mode driver reached */
	unsigned long nfailed;         /* of which failed */
	int status[POINTS_MAX];        /* wait status of the child failing each */
};
static struct shared *sh;

/* ---- the run's context --------------------------------------------------- */

static uint32_t rs;
static int g_phase, g_stop_phase;
static unsigned g_opno;
static char g_op[160];
static int g_reported;

static uint32_t rnd(uint32_t n)
{
	rs ^= rs << 13;
	rs ^= rs >> 17;
	rs ^= rs << 5;
	return n ? rs % n : 0;
}

/* After each operation: on the first failed check, say where it was. */
static void note_failure(void)
{
	if (t_case_failed && !g_reported) {
		g_reported = 1;
		fprintf(stderr, "  first failure (failing call %lu, every %lu-th): phase %d op %u: %s"
		        " (failable calls so far %lu, injected %lu, kinds failed in op 0x%x)\n",
		        fi.fail_at, fi.fail_every, g_phase, g_opno, g_op, fi.calls, fi.injected,
		        fi.op_mask);
	}
}

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* ---- checks ---------------------------------------------------------------- */

static struct pp_pool_stats pool(void)
{
	struct pp_pool_stats st;
	memset(&st, 0xff, sizeof st);
	CHECK_EQ(pp_pool_stats(&st), 0);
	return st;
}

/* No pipe open: nothing may be left behind. */
static void check_empty(void)
{
	struct pp_pool_stats st = pool();
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(fi.maps, st.pages_cached);
	CHECK_EQ(fi.nfds, 0);
	CHECK_EQ(fi_live_callocs(LEAF_NMEMB), 0); /* no ring, no slot array */
	CHECK(fi_live_callocs(0) <= 1);           /* at most the one leaf */
	CHECK_EQ(fi.unexpected, 0);
}

static size_t pick_wsize(void)
{
	switch (rnd(10)) {
	case 0: case 1: case 2:
		return 1 + rnd(300);
	case 3: case 4:
		return 1 + rnd(PG);
	case 5:
		return PG * (1 + rnd(2));
	case 6: case 7:
		return PG + 1 + rnd(8 * PG);
	default:
		return 9 * PG + rnd(16 * PG);
	}
}

/* n bytes still hold the 0xa5 they were filled with (memcmp, not a byte
 * loop: this runs under TSan too). */
static bool untouched(const unsigned char *p, size_t n)
{
	static unsigned char a5[MAXIO];
	if (!a5[0])
		memset(a5, 0xa5, sizeof a5);
	return memcmp(p, a5, n) == 0;
}

/* A pp_setsize's result: -1 ENOMEM when a calloc failed in it (the new
 * slot array, its only allocation: so it was resizing; cap is the pipe's
 * slots before the call), else exactly the model's (want, or -1 with
 * errno eerr). */
static void check_setsize(long r, int err, long want, int eerr, uint32_t cap)
{
	if (fi.op_mask & FI_BIT(FI_CALLOC)) {
		CHECK(want > 0 && want / PG != cap);
		CHECK_EQ(r, -1);
		CHECK_EQ(err, ENOMEM);
	} else {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	}
}

/* ---- the workload -------------------------------------------------------- */

/* What a program gives the sweep: its workload, run phase by phase. */
struct workload {
	const char *name;        /* for the messages: "core", "zc" */
	int phases;              /* phases by default (FI_PHASES) */
	unsigned kinds;          /* the failure kinds it reaches: all, no other */
	void (*begin)(void);     /* before the first phase, or NULL */
	void (*run_phase)(void); /* one phase: g_phase is its number */
	void (*end)(void);       /* after the last phase, or NULL */
	void (*in_child)(void);  /* first thing in a fork's child, or NULL */
};
static const struct workload *wl;

/* Phases of the workload: FI_PHASES, by default the workload's number
 * times PP_TEST_SCALE, at least 3 (fewer would leave out the sealed
 * source, and kinds of failure point). */
static int workload_phases(void)
{
	long def = t_scaled(wl->phases), v;
	if (def < 3)
		def = 3;
	v = t_env_long("FI_PHASES", def);
	return v > 0 ? (int)v : (int)def;
}

static uint32_t workload_seed(void)
{
	const char *s = getenv("FI_SEED");
	return s ? (uint32_t)strtoul(s, NULL, 0) * 2u + 1u : 0x5eed1234u;
}

enum mode { M_COUNT, M_POINT, M_FORK, M_EVERY };

static int quiet_children; /* after a few failing children, hide their output */
static const char *g_prog; /* argv[0], for the replay lines */

/* Fork mode: called in the driver at each failable call, in the child (pid
 * 0) just after the fork, and in the driver when the child has exited. */
static void on_child(pid_t pid, unsigned long n, int status)
{
	if (pid == 0) {
		alarm(10); /* alarms are not inherited; a run takes milliseconds */
		if (wl->in_child)
			wl->in_child();
		if (quiet_children || sh->nfailed >= 5)
			(void)!freopen("/dev/null", "w", stderr);
		return;
	}
	t_progress(); /* the parent's watchdog sees the sweep getting on */
	if (n <= POINTS_MAX)
		sh->status[n - 1] = pid < 0 ? -1 : status;
	sh->npoints = n;
	if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		sh->nfailed++;
	/* A broken library fails most points, some by hanging: stop early. */
	if (sh->nfailed >= 10)
		fi.fork_each = 0;
}

/* The whole workload, in a child; its exit status is the verdict. */
static int child_main(enum mode mode, unsigned long k)
{
	signal(SIGPIPE, SIG_IGN);
	alarm(mode == M_FORK ? 600 : 30);
	/* No idle pages kept: every page is a fresh mmap, a failure point.
	 * The every-k-th runs alternate with a small cache, so that pages also
	 * come from and go to the idle list between failures. */
	CHECK(pp_pool_setcache(mode == M_EVERY && k % 2 == 0 ? 8 : 0) >= 0);
	switch (mode) {
	case M_COUNT:
		fi.trace = sh->trace;
		fi.trace_cap = TRACE_MAX;
		break;
	case M_POINT:
		fi.fail_at = k;
		break;
	case M_FORK:
		fi.fork_each = 1;
		fi.on_child = on_child;
		break;
	case M_EVERY:
		fi.fail_every = k;
		break;
	}
	if (mode != M_COUNT) {
		fi.expect = sh->trace;
		fi.expect_len = sh->ncalls;
	}
	g_stop_phase = -1;
	rs = workload_seed();
	int phases = workload_phases();
	if (wl->begin)
		wl->begin();
	for (g_phase = 0; g_phase < phases; g_phase++) {
		if (g_stop_phase >= 0 && g_phase > g_stop_phase)
			break;
		wl->run_phase();
		/* One call failed: finish this phase and run one more. */
		if (fi.fail_at && fi.injected && g_stop_phase < 0)
			g_stop_phase = g_phase + 1;
	}
	if (wl->end)
		wl->end();
	check_empty();
	CHECK_EQ(fi.mismatch, 0); /* same calls as the count run up to the failure */
	if (fi.fail_at)
		CHECK_EQ(fi.injected, 1);
	if (mode == M_COUNT) {
		sh->ncalls = fi.calls;
		memcpy(sh->per_kind, fi.per_kind, sizeof fi.per_kind);
	}
	if (mode == M_COUNT || (mode == M_FORK && !fi.fail_at))
		CHECK_EQ(fi.injected, 0);
	if (mode == M_FORK && !fi.fail_at)
		CHECK_EQ(fi.calls, sh->ncalls);
	note_failure();
	return t_case_failed ? 1 : 0;
}

/* ---- the parent -------------------------------------------------------------- */

static void describe(int st, char *why, size_t whylen)
{
	if (st == -1)
		snprintf(why, whylen, "fork failed");
	else if (WIFEXITED(st))
		snprintf(why, whylen, "exit status %d", WEXITSTATUS(st));
	else
		snprintf(why, whylen, "killed by signal %d%s", WTERMSIG(st),
		         WTERMSIG(st) == SIGALRM ? " (hung)" : "");
}

/* Run the workload in a child; 0 when it passed, else 1 and why. */
static int run_child(enum mode mode, unsigned long k, char *why, size_t whylen)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		if (quiet_children)
			(void)!freopen("/dev/null", "w", stderr);
		int rc = child_main(mode, k);
		fflush(stderr);
		exit(rc); /* exit, not _exit: ASan's leak check runs here */
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	t_progress();
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	describe(st, why, whylen);
	return 1;
}

static void count_points(void)
{
	char why[128];
	int rc = run_child(M_COUNT, 0, why, sizeof why);
	if (rc)
		fprintf(stderr, "count run (nothing failed) failed: %s\n", why);
	CHECK_EQ(rc, 0);
	fprintf(stderr, "failable calls in the %s workload: %lu (", wl->name, sh->ncalls);
	for (int k = 0; k < FI_NKINDS; k++)
		fprintf(stderr, "%s%s %lu", k ? ", " : "", fi_kind_name[k], sh->per_kind[k]);
	fprintf(stderr, ")\n");
	/* The workload must reach every kind of failure point it can, and
	 * no other. */
	for (int k = 0; k < FI_NKINDS; k++) {
		if ((wl->kinds & FI_BIT(k)) && !sh->per_kind[k])
			fprintf(stderr, "  no %s call in the %s workload\n", fi_kind_name[k], wl->name);
		CHECK(!(wl->kinds & FI_BIT(k)) || sh->per_kind[k] > 0);
		if (!(wl->kinds & FI_BIT(k)))
			CHECK_EQ(sh->per_kind[k], 0);
	}
	CHECK(sh->ncalls > 0 && sh->ncalls <= POINTS_MAX);
}

/*
 * Fail each call k = 1..N in turn.  Rerunning the workload from the start
 * for every k costs N whole runs; instead one driver child runs it once
 * and forks at every failable call, and the fork's child fails that call:
 * the same run as a fresh one failing call k (same start state, same
 * calls before it), without redoing the prefix.  FI_POINT=k does the fresh
 * rerun instead, for one k, to reproduce a failure.
 */
static void fail_each_point(void)
{
	unsigned long n = sh->ncalls, only = (unsigned long)t_env_long("FI_POINT", 0);
	unsigned long failed = 0, per_kind[FI_NKINDS] = { 0 };
	char why[128];
	if (!n)
		SKIP("no count run");
	if (t_env_long("FI_EVERY", 0))
		SKIP("FI_EVERY set");
	if (only) {
		int rc = run_child(M_POINT, only, why, sizeof why);
		fprintf(stderr, "%s workload, failure point %lu (%s): %s\n", wl->name, only,
		        only <= n ? fi_kind_name[sh->trace[only - 1]] : "beyond the last call",
		        rc ? why : "passed");
		CHECK_EQ(rc, 0);
		return;
	}
	sh->npoints = sh->nfailed = 0;
	int rc = run_child(M_FORK, 0, why, sizeof why);
	if (rc)
		fprintf(stderr, "fork-mode driver failed: %s\n", why);
	CHECK_EQ(rc, 0);
	if (sh->npoints != n)
		fprintf(stderr, "the sweep stopped at point %lu of %lu after %lu failures\n",
		        sh->npoints, n, sh->nfailed);
	CHECK_EQ(sh->npoints, n);
	for (unsigned long k = 1; k <= sh->npoints && k <= n; k++) {
		int st = sh->status[k - 1];
		per_kind[sh->trace[k - 1]]++;
		if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			continue;
		failed++;
		describe(st, why, sizeof why);
		if (failed <= 20)
			fprintf(stderr, "failure point %lu (%s) FAILED: %s; reproduce: "
			        "FI_POINT=%lu %s\n", k, fi_kind_name[sh->trace[k - 1]],
			        why, k, g_prog);
	}
	fprintf(stderr, "%s workload: failed each of %lu points one at a time (", wl->name,
	        sh->npoints);
	for (int k = 0; k < FI_NKINDS; k++)
		fprintf(stderr, "%s%s %lu", k ? ", " : "", fi_kind_name[k], per_kind[k]);
	fprintf(stderr, "): %lu failed\n", failed);
	CHECK_EQ(failed, 0);
}

static void fail_every_kth(void)
{
	long only = t_env_long("FI_EVERY", 0), kmax = t_env_long("FI_EVERY_MAX", 0);
	unsigned long failed = 0, runs = 0;
	char why[128];
	if (t_env_long("FI_POINT", 0))
		SKIP("FI_POINT set");
	if (kmax <= 0)
		kmax = 40;
	for (long k = only ? only : 1; k <= (only ? only : kmax); k++) {
		int rc = run_child(M_EVERY, (unsigned long)k, why, sizeof why);
		runs++;
		if (rc) {
			failed++;
			fprintf(stderr, "every %ld-th call failing FAILED: %s; reproduce: "
			        "FI_EVERY=%ld %s\n", k, why, k, g_prog);
			if (failed >= 5)
				quiet_children = 1;
			if (failed >= 10) {
				fprintf(stderr, "stopping after %lu failures\n", failed);
				break;
			}
		}
	}
	quiet_children = 0;
	fprintf(stderr, "%s workload: failed every k-th call for %lu values of k: %lu failed\n",
	        wl->name, runs, failed);
	CHECK_EQ(failed, 0);
}

/* main of a fault-injection program: the three cases on workload w. */
static int fault_sweep_main(const struct workload *w, char **argv)
{
	wl = w;
	g_prog = argv[0];
	for (size_t i = 0; i < sizeof pat; i++) {
		size_t j = i % PAT_LEN;
		uint32_t x = (uint32_t)(j * 2654435761u) ^ (uint32_t)(j >> 11) * 40503u;
		x ^= x >> 15;
		x *= 0x2c1b3c6du;
		pat[i] = (unsigned char)(x ^ (x >> 12));
	}
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	RUN(count_points);
	RUN(fail_each_point);
	RUN(fail_every_kth);
	munmap(sh, sizeof *sh);
	return T_DONE();
}

#endif
