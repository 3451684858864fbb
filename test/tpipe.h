/*
 * tpipe.h - helpers shared by the unit tests (after harness.h).
 *
 * The point of most tests is that a pagepipe behaves like a kernel pipe, so
 * a scenario is written once against "struct tp", which is either a
 * pagepipe or a kernel pipe made with pipe2(2), and run on both; the test
 * then compares what each returned.  Also here: a per-case watchdog
 * (RUNW), sleeping and timing, data patterns (and streams of them written
 * and checked in random-sized pieces), a "wait until that thread is asleep
 * in the kernel" helper for the signal tests, the pool's pages in use, and
 * counting open descriptors.
 *
 * Everything is static inline so that a program using only part of it
 * compiles warning-free.
 */
#ifndef PP_TEST_TPIPE_H
#define PP_TEST_TPIPE_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"

/* ---- watchdog ---------------------------------------------------------- */

static const char *tp_case_name = "?";

static void tp_alarm(int sig)
{
	char msg[200];
	int n = snprintf(msg, sizeof msg, "TIMEOUT: case %s hung (watchdog)\n",
	                 tp_case_name);
	(void)sig;
	if (n > 0)
		(void)!write(2, msg, (size_t)n);
	n = snprintf(msg, sizeof msg, "FAIL %s\n", tp_case_name);
	if (n > 0)
		(void)!write(1, msg, (size_t)n);
	_exit(3);
}

/* Seconds a case may take before the watchdog kills the program. */
static inline unsigned tp_timeout(void)
{
	const char *s = getenv("PP_CASE_TIMEOUT");
	long v = s ? atol(s) : 0;
	return v > 0 ? (unsigned)v : 40;
}

static inline void tp_arm(const char *name)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = tp_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	tp_case_name = name;
	alarm(tp_timeout());
}

/* RUN with a watchdog: a case that hangs fails the program instead. */
#define RUNW(fn)                                                             \
	do {                                                                     \
		tp_arm(#fn);                                                         \
		RUN(fn);                                                             \
		alarm(0);                                                            \
	} while (0)

/* ---- time -------------------------------------------------------------- */

static inline void tp_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* The pool's counters now (every field poisoned first, so a call that
 * filled nothing shows); a failing pp_pool_stats ends the program. */
static inline struct pp_pool_stats tp_pool_stats(void)
{
	struct pp_pool_stats st;
	memset(&st, 0xff, sizeof st);
	if (pp_pool_stats(&st) != 0) {
		perror("pp_pool_stats");
		abort();
	}
	return st;
}

static inline double tp_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Iteration scale: PP_TEST_SCALE (default 1) multiplies loop counts. */
static inline long tp_scale(long n)
{
	const char *s = getenv("PP_TEST_SCALE");
	double f = s ? atof(s) : 1.0;
	long v = (long)((double)n * (f > 0 ? f : 1.0));
	return v > 0 ? v : 1;
}

/* ---- data -------------------------------------------------------------- */

/* Byte i of the test stream seeded with seed: never constant, so shifted,
 * duplicated or dropped data is caught. */
static inline unsigned char tp_byte(unsigned seed, size_t i)
{
	uint32_t x = (uint32_t)(i * 2654435761u) ^ (seed * 40503u) ^ (uint32_t)(i >> 12);
	x ^= x >> 13;
	return (unsigned char)(x ^ (x >> 7));
}

static inline void tp_fill(void *buf, size_t n, unsigned seed, size_t off)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < n; i++)
		p[i] = tp_byte(seed, off + i);
}

/* Index of the first byte that is not stream byte off+i, or -1. */
static inline long tp_verify(const void *buf, size_t n, unsigned seed, size_t off)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < n; i++)
		if (p[i] != tp_byte(seed, off + i))
			return (long)i;
	return -1;
}

/* Small deterministic PRNG (xorshift32), so failures reproduce. */
static inline uint32_t tp_rand(uint32_t *s)
{
	uint32_t x = *s ? *s : 0x9e3779b9u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* The next chunk of a stream written in random sizes: 1..max bytes (PRNG
 * state *rs), no more than the total - pos left, filled with stream seed
 * from position pos into buf.  Returns its length. */
static inline size_t tp_chunk(void *buf, size_t max, uint32_t *rs, unsigned seed,
                              size_t pos, size_t total)
{
	size_t n = 1 + tp_rand(rs) % max;
	if (n > total - pos)
		n = total - pos;
	tp_fill(buf, n, seed, pos);
	return n;
}

/* Take n received bytes that should be stream seed from position *got:
 * the first wrong byte's stream position goes to *bad (if *bad is still
 * -1), and *got moves on by n. */
static inline void tp_take(const void *buf, size_t n, unsigned seed, size_t *got, long *bad)
{
	long b = tp_verify(buf, n, seed, *got);
	if (b >= 0 && *bad < 0)
		*bad = (long)*got + b;
	*got += n;
}

/* ---- one pipe, kernel or pagepipe -------------------------------------- */

struct tp {
	int kernel;          /* 1: fd[] is a kernel pipe; 0: e[] a pagepipe */
	int fd[2];
	struct pp_end *e[2];
};

static inline const char *tp_name(const struct tp *t)
{
	return t->kernel ? "kernel" : "pagepipe";
}

/* Open a pipe; flags are PP_* (PP_PACKET is O_DIRECT for the kernel;
 * PP_NOSIGPIPE has no kernel equivalent and is ignored there). */
static inline int tp_open(struct tp *t, int kernel, int flags)
{
	memset(t, 0, sizeof *t);
	t->kernel = kernel;
	t->fd[0] = t->fd[1] = -1;
	if (kernel) {
		int kf = O_CLOEXEC;
		if (flags & PP_NONBLOCK)
			kf |= O_NONBLOCK;
		if (flags & PP_PACKET)
			kf |= O_DIRECT;
		return pipe2(t->fd, kf);
	}
	return pp_pipe(t->e, flags);
}

/* Hide a value from the compiler, so that deliberately bad arguments (NULL
 * buffers, negative counts) reach the kernel without -Werror objecting. */
#define TP_HIDE(x)                                                           \
	({                                                                       \
		__typeof__(x) h_ = (x);                                              \
		__asm__("" : "+r"(h_));                                              \
		h_;                                                                  \
	})

static inline ssize_t tp_read(struct tp *t, void *buf, size_t n)
{
	return t->kernel ? read(t->fd[0], TP_HIDE(buf), TP_HIDE(n))
	                 : pp_read(t->e[0], buf, n);
}

static inline ssize_t tp_write(struct tp *t, const void *buf, size_t n)
{
	return t->kernel ? write(t->fd[1], TP_HIDE(buf), TP_HIDE(n))
	                 : pp_write(t->e[1], buf, n);
}

static inline ssize_t tp_readv(struct tp *t, const struct iovec *iov, int cnt)
{
	return t->kernel ? readv(t->fd[0], TP_HIDE(iov), TP_HIDE(cnt))
	                 : pp_readv(t->e[0], iov, cnt);
}

static inline ssize_t tp_writev(struct tp *t, const struct iovec *iov, int cnt)
{
	return t->kernel ? writev(t->fd[1], TP_HIDE(iov), TP_HIDE(cnt))
	                 : pp_writev(t->e[1], iov, cnt);
}

/* Close one end (0 read, 1 write); closing an end already closed is a no-op. */
static inline int tp_close_end(struct tp *t, int which)
{
	int r = 0;
	if (t->kernel) {
		if (t->fd[which] >= 0)
			r = close(t->fd[which]);
		t->fd[which] = -1;
	} else {
		if (t->e[which])
			r = pp_close(t->e[which]);
		t->e[which] = NULL;
	}
	return r;
}

static inline void tp_close(struct tp *t)
{
	tp_close_end(t, 0);
	tp_close_end(t, 1);
}

/* FIONREAD / pp_nread on an end. */
static inline int tp_nread(struct tp *t, int which)
{
	if (t->kernel) {
		int n = -1;
		if (ioctl(t->fd[which], FIONREAD, &n) == -1)
			return -1;
		return n;
	}
	return pp_nread(t->e[which]);
}

static inline long tp_getsize(struct tp *t, int which)
{
	return t->kernel ? (long)fcntl(t->fd[which], F_GETPIPE_SZ)
	                 : pp_getsize(t->e[which]);
}

static inline long tp_setsize(struct tp *t, int which, size_t size)
{
	if (t->kernel)
		return (long)fcntl(t->fd[which], F_SETPIPE_SZ, (unsigned long)size);
	return pp_setsize(t->e[which], size);
}

static inline int tp_setnonblock(struct tp *t, int which, int on)
{
	if (t->kernel) {
		int fl = fcntl(t->fd[which], F_GETFL);
		if (fl == -1)
			return -1;
		fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
		return fcntl(t->fd[which], F_SETFL, fl);
	}
	int fl = pp_getfl(t->e[which]);
	if (fl == -1)
		return -1;
	return pp_setfl(t->e[which], on ? (fl | PP_NONBLOCK) : (fl & ~PP_NONBLOCK));
}

/* Every poll event bit a pipe can report. */
#define TP_ALL_EVENTS                                                        \
	(POLLIN | POLLPRI | POLLOUT | POLLRDNORM | POLLRDBAND | POLLWRNORM |      \
	 POLLWRBAND)

/* The events of an end now: poll(2) with timeout 0 for the kernel,
 * pp_events for a pagepipe. */
static inline int tp_events(struct tp *t, int which)
{
	if (t->kernel) {
		struct pollfd p = { t->fd[which], TP_ALL_EVENTS, 0 };
		if (poll(&p, 1, 0) == -1)
			return -1;
		return p.revents;
	}
	return pp_events(t->e[which]);
}

/* Write/read results as one number: the count, or -errno. */
static inline long tp_res(ssize_t r)
{
	return r < 0 ? -(long)errno : (long)r;
}

/* ---- recording and comparing ------------------------------------------ */

/* A scenario run on both pipes records its results in a tp_rec; the case
 * then compares the kernel's record with the pagepipe's step by step. */
#define TP_REC_MAX 4096
struct tp_rec {
	int n;
	long v[TP_REC_MAX];
	const char *what[TP_REC_MAX];
};

#define TP_REC(r, label, x)                                                  \
	do {                                                                     \
		if ((r)->n < TP_REC_MAX) {                                           \
			(r)->what[(r)->n] = (label);                                     \
			(r)->v[(r)->n++] = (long)(x);                                    \
		}                                                                    \
	} while (0)

/* Compare two records; report the first difference and fail the case. */
#define TP_CMP(k, p) tp_cmp(__FILE__, __LINE__, (k), (p))
static inline int tp_cmp(const char *file, int line, const struct tp_rec *k,
                         const struct tp_rec *p)
{
	int n = k->n < p->n ? k->n : p->n;
	for (int i = 0; i < n; i++) {
		if (k->v[i] != p->v[i]) {
			fprintf(stderr, "%s:%d: differs from kernel at step %d (%s): "
			        "kernel %ld, pagepipe %ld\n", file, line, i,
			        k->what[i] ? k->what[i] : "?", k->v[i], p->v[i]);
			t_case_failed = 1;
			return 0;
		}
	}
	if (k->n != p->n) {
		fprintf(stderr, "%s:%d: kernel took %d steps, pagepipe %d\n", file,
		        line, k->n, p->n);
		t_case_failed = 1;
		return 0;
	}
	return 1;
}

/* Check a record against the known answers, naming the step that differs. */
#define TP_WANT(r, kernel, ...)                                              \
	do {                                                                     \
		const long w_[] = { __VA_ARGS__ };                                   \
		tp_want(__FILE__, __LINE__, (r), (kernel), w_,                       \
		        (int)(sizeof w_ / sizeof w_[0]));                            \
	} while (0)
static inline void tp_want(const char *file, int line, const struct tp_rec *r,
                           int kernel, const long *w, int n)
{
	const char *who = kernel ? "kernel" : "pagepipe";
	if (r->n != n) {
		fprintf(stderr, "%s:%d: %s: %d steps recorded, want %d\n", file, line,
		        who, r->n, n);
		t_case_failed = 1;
	}
	for (int i = 0; i < n && i < r->n; i++) {
		if (r->v[i] != w[i]) {
			fprintf(stderr, "%s:%d: %s: step %d (%s) = %ld, want %ld\n", file,
			        line, who, i, r->what[i] ? r->what[i] : "?", r->v[i], w[i]);
			t_case_failed = 1;
		}
	}
}

/* Run scenario sc(struct tp_rec *, int kernel) on a kernel pipe and on a
 * pagepipe, and compare the two records. */
#define TP_BOTH(sc)                                                          \
	do {                                                                     \
		static struct tp_rec r_[2];                                          \
		memset(r_, 0, sizeof r_);                                            \
		sc(&r_[0], 1);                                                       \
		sc(&r_[1], 0);                                                       \
		TP_CMP(&r_[0], &r_[1]);                                              \
	} while (0)

/* ---- threads and signals ----------------------------------------------- */

static inline pid_t tp_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* State letter of thread tid from /proc (R, S, D, ...), or 0. */
static inline char tp_thread_state(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return (p && p[1] == ' ') ? p[2] : 0;
}

/* Wait until thread tid sleeps (state S) for a few consecutive looks, i.e.
 * it is blocked in the call under test.  Returns 1, or 0 on timeout. */
static inline int tp_wait_asleep(pid_t tid, double timeout)
{
	double end = tp_now() + timeout;
	int streak = 0;
	while (tp_now() < end) {
		if (tp_thread_state(tid) == 'S') {
			if (++streak >= 5)
				return 1;
		} else {
			streak = 0;
		}
		tp_sleep_ms(10);
	}
	return 0;
}

/* Install handler for sig, with or without SA_RESTART. */
static inline void tp_handle(int sig, void (*fn)(int), int restart)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(sig, &sa, NULL);
}

static inline void tp_default(int sig)
{
	signal(sig, SIG_DFL);
}

/* ---- the page pool ------------------------------------------------------ */

/* Pages of the pool in use now (pp_pool_stats), or -1. */
static inline long tp_pages_in_use(void)
{
	struct pp_pool_stats st;
	if (pp_pool_stats(&st) != 0)
		return -1;
	return st.pages_in_use;
}

/* ---- descriptors -------------------------------------------------------- */

/* Number of open descriptors of this process. */
static inline int tp_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *de;
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

#endif
