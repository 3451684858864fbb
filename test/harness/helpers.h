/*
 * helpers.h - what many test programs use besides the case runner (after
 * harness.h): the test data stream, scenarios recorded on a kernel pipe
 * and on a pagepipe and compared step by step, thread states and signal
 * handlers, the pool's pages in use, and counting open descriptors.  The
 * pipe itself, kernel or pagepipe, is pipe.h's struct tp.
 *
 *   - data: tp_byte(seed, i) is byte i of the stream seeded with seed,
 *     never constant, so shifted, duplicated or dropped data shows;
 *     tp_fill / tp_verify write and check a stretch of it, tp_rand is a
 *     small deterministic PRNG, tp_chunk / tp_take write and check a
 *     stream in random-sized pieces;
 *   - comparing: a scenario sc(struct tp_rec *, int kernel) records its
 *     results with TP_REC; TP_BOTH(sc) runs it on a kernel pipe and on a
 *     pagepipe and compares the records (TP_CMP: the first difference;
 *     TP_BOTH_ALL: every one), TP_WANT checks one against known answers;
 *   - threads and signals: tp_gettid, tp_thread_state (from /proc),
 *     tp_wait_asleep (a thread is blocked in the call under test),
 *     tp_handle / tp_default (install a handler, with or without
 *     SA_RESTART; back to the default), tp_sigpipe_block /
 *     tp_sigpipe_taken / tp_sigpipe_restore (did that call raise
 *     SIGPIPE?);
 *   - the pool: tp_pool_stats, tp_pages_in_use;
 *   - descriptors: tp_count_fds; tp_fds_note / tp_fds_same, hooks for
 *     t_around_cases that fail a case which leaves a descriptor open;
 *   - tp_self_exe: this program's path, for cases that exec it again;
 *   - tp_send_fd / tp_recv_fd: a descriptor over a unix socket (SCM_RIGHTS).
 *
 * Everything is static inline so that a program using only part of it
 * compiles warning-free.
 */
#ifndef PP_TEST_HELPERS_H
#define PP_TEST_HELPERS_H

#include <dirent.h>
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
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"
#include "harness.h"
#include "pipe.h"

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

/* Check the k segments a pp_peek gave (each of 1..PP_PAGE_SIZE bytes)
 * against stream seed from position pos; their total.  The stream position
 * of the first wrong byte goes to *bad (if *bad is still -1). */
static inline size_t tp_peeked(const struct iovec *iov, ssize_t k, unsigned seed, size_t pos,
                               long *bad)
{
	size_t have = 0;
	for (ssize_t i = 0; i < k; i++) {
		long b = tp_verify(iov[i].iov_base, iov[i].iov_len, seed, pos + have);
		if (b >= 0 && *bad < 0)
			*bad = (long)(pos + have) + b;
		CHECK(iov[i].iov_len > 0 && iov[i].iov_len <= PP_PAGE_SIZE);
		have += iov[i].iov_len;
	}
	return have;
}

/* pp_peek up to max segments of read end rd into iov and check them
 * (tp_peeked): their total, or 0 at end of file (a peek that fails fails
 * the case, and ends the stream too). */
static inline size_t tp_peek_check(struct pp_end *rd, struct iovec *iov, int max, unsigned seed,
                                   size_t pos, long *bad)
{
	ssize_t k = pp_peek(rd, iov, max);
	CHECK(k >= 0);
	return k > 0 ? tp_peeked(iov, k, seed, pos, bad) : 0;
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

/* Compare two records and fail the case if they differ: report the
 * first difference, or with all set every one. */
#define TP_CMP(k, p) tp_cmp(__FILE__, __LINE__, (k), (p), 0)
static inline int tp_cmp(const char *file, int line, const struct tp_rec *k,
                         const struct tp_rec *p, int all)
{
	int n = k->n < p->n ? k->n : p->n, same = 1;
	for (int i = 0; i < n && (same || all); i++) {
		if (k->v[i] != p->v[i]) {
			fprintf(stderr, "%s:%d: differs from kernel at step %d (%s): "
			        "kernel %ld, pagepipe %ld\n", file, line, i,
			        k->what[i] ? k->what[i] : "?", k->v[i], p->v[i]);
			t_case_failed = 1;
			same = 0;
		}
	}
	if ((same || all) && k->n != p->n) {
		fprintf(stderr, "%s:%d: kernel took %d steps, pagepipe %d\n", file,
		        line, k->n, p->n);
		t_case_failed = 1;
		same = 0;
	}
	return same;
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
 * pagepipe, and compare the two records: TP_BOTH reports the first step
 * that differs, TP_BOTH_ALL every one. */
#define TP_BOTH(sc) tp_both(__FILE__, __LINE__, (sc), 0)
#define TP_BOTH_ALL(sc) tp_both(__FILE__, __LINE__, (sc), 1)
static inline void tp_both(const char *file, int line, void (*sc)(struct tp_rec *, int),
                           int all)
{
	static struct tp_rec r[2];
	memset(r, 0, sizeof r);
	sc(&r[0], 1);
	sc(&r[1], 0);
	tp_cmp(file, line, &r[0], &r[1], all);
}

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
	double end = t_now() + timeout;
	int streak = 0;
	while (t_now() < end) {
		if (tp_thread_state(tid) == 'S') {
			if (++streak >= 5)
				return 1;
		} else {
			streak = 0;
		}
		t_sleep_ms(10);
	}
	return 0;
}

/* SIGPIPE, blocked in this thread around calls that may raise it:
 * tp_sigpipe_taken() says whether one came (and takes it, so a stale one
 * cannot fake the next result). */
static inline int tp_sigpipe_taken(void)
{
	sigset_t s;
	struct timespec zero = { 0, 0 };
	int n = 0;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	while (sigtimedwait(&s, NULL, &zero) == SIGPIPE)
		n = 1;
	return n;
}

static inline void tp_sigpipe_block(sigset_t *old)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &s, old);
	tp_sigpipe_taken();
}

static inline void tp_sigpipe_restore(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
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

/* t_around_cases(tp_fds_note, tp_fds_same): a case must close every
 * descriptor it opens. */
static inline int *tp_fds_mark(void)
{
	static int before;
	return &before;
}
static inline void tp_fds_note(void)
{
	*tp_fds_mark() = tp_count_fds();
}
static inline void tp_fds_same(void)
{
	CHECK_EQ(tp_count_fds(), *tp_fds_mark());
}

/* This program's own path into path[size], for cases that exec it as a
 * helper; exits 2 when /proc cannot say. */
static inline void tp_self_exe(char *path, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", path, size - 1);
	if (n <= 0) {
		perror("readlink /proc/self/exe");
		exit(2);
	}
	path[n] = 0;
}

/* ---- descriptors over a unix socket (SCM_RIGHTS) ------------------------ */

/* Send fd with one byte on sock: 0, or -1 with errno (no SIGPIPE). */
static inline int tp_send_fd(int sock, int fd)
{
	char byte = 'F';
	struct iovec iov = { &byte, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		                .msg_controllen = sizeof u.buf };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	return sendmsg(sock, &m, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* The descriptor received on sock (close-on-exec), or -1. */
static inline int tp_recv_fd(int sock)
{
	char byte;
	struct iovec iov = { &byte, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		                .msg_controllen = sizeof u.buf };
	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof fd);
	return fd;
}

#endif
