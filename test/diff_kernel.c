/*
 * diff_kernel.c - differential test: pagepipe against a real kernel pipe.
 *
 * Thousands of random sequences of operations run side by side on a kernel
 * pipe (pipe2) and on a pagepipe (pp_pipe), and every observable result is
 * compared: return values, errno on failure, the bytes read (and that no
 * byte past the returned count was touched), FIONREAD vs pp_nread, poll(2)
 * revents vs pp_events, F_GETPIPE_SZ/F_SETPIPE_SZ vs pp_getsize/pp_setsize,
 * F_GETFL vs pp_getfl, whether SIGPIPE was raised, and that a pp_fd()
 * descriptor polls readable exactly while the kernel end is ready.
 *
 * The operations: read, write, readv and writev of sizes chosen to hit the
 * interesting edges (0, 1, small writes that merge, 4095/4096/4097, page
 * multiples, up to 300000 bytes), with 0..IOV_MAX segments including empty
 * ones; toggling O_NONBLOCK / PP_NONBLOCK; dup and close of the handles of
 * each end (closing the last one makes the other side see EOF or EPIPE);
 * resizing to random sizes up to 1 MiB (including ones below the data held,
 * for EBUSY, and above 2^31, for EINVAL); reads on the write end and writes
 * on the read end (EBADF); invalid iovec counts and lengths (EINVAL).  It
 * runs in stream mode and in packet mode (pipe2 O_DIRECT vs PP_PACKET).
 *
 * The test is single-threaded, so no call may block.  A call on a blocking
 * end is first tried on the kernel pipe with O_NONBLOCK set for that call
 * only: if the kernel would have had to wait (EAGAIN, or a short write), the
 * pagepipe call is made non-blocking too; otherwise the pagepipe call runs
 * in blocking mode and must return at once, which the harness's watchdog
 * enforces: a sequence that has not ended after PP_CASE_TIMEOUT seconds
 * fails the program, naming its seed.  SIGPIPE is ignored and blocked, and
 * after every call the pending SIGPIPE is collected with sigtimedwait() to
 * compare who raised it.
 *
 * Each sequence is deterministic from its seed.  Environment:
 *   PP_DIFF_SEED     first seed (default 1); sequence i uses seed SEED+i
 *   PP_DIFF_ITERS    number of random sequences per mode (default 300,
 *                    150 under ThreadSanitizer, times PP_TEST_SCALE)
 *   PP_DIFF_VERBOSE  1: print every operation and both results
 * A mismatch prints the mode, seed, step, operation and both results, with
 * the command line that replays just that sequence, and fails the case.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

#define MAXH 4                         /* handles (dups) per end */
#define RMAX 200000                    /* largest read */
#define WMAX 300000                    /* largest write */
#define MAXSEG (IOV_MAX + 1)           /* iovec arrays, one past the limit */
#define RBUF (RMAX + MAXSEG + 64)      /* read data, one-byte gaps, slack */
#define POOL (2u << 20)                /* random bytes writes are taken from */
#define MAXREPORTS 6                   /* mismatches printed per case */

/* ThreadSanitizer makes every byte copied costly: run fewer sequences. */
enum { K_READ, K_READV, K_WRITE, K_WRITEV };
static const char *const kind_name[] = { "read", "readv", "write", "writev" };

/* The state of one sequence: both pipes and every handle on them. */
struct seq {
	uint64_t rng;
	unsigned long long seed;
	const char *mode;
	int packet, nosig;
	int nh[2];                    /* open handles per end */
	int kfd[2][MAXH];             /* kernel fds, parallel to ph */
	struct pp_end *ph[2][MAXH];   /* pagepipe handles */
	int nb[2];                    /* non-blocking status of each end */
	int ppfd[2];                  /* pp_fd() of each end, -1 if not asked */
	long step;
	int failed;
	int scripted;                 /* not from a seed (one_byte_fill) */
	char op[400];                 /* the operation running now */
};

/* Segment lengths for readv/writev; cnt is passed as is (may be invalid). */
struct segs {
	int cnt;
	int huge;                     /* one length is SIZE_MAX */
	size_t len[MAXSEG];
};

static unsigned char g_kbuf[RBUF], g_pbuf[RBUF];
static unsigned char g_pool[POOL];
static struct iovec g_kiov[MAXSEG], g_piov[MAXSEG];
static struct segs g_segs;
static sigset_t g_pipeset;
static unsigned long long g_seed0 = 1;
static long g_iters;
static int g_verbose;
static int g_reports;
static const char *g_argv0 = "diff_kernel";
static char g_note[300]; /* the sequence running, for the watchdog */

/* ---- random numbers (splitmix64) ---- */

static uint64_t rnext(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned long rnd(struct seq *s, unsigned long n)
{
	return n ? (unsigned long)(rnext(&s->rng) % n) : 0;
}

/* ---- reporting ---- */

static const char *ename(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "?";
}

/* Record the first mismatch of a sequence and stop it. */
__attribute__((format(printf, 2, 3)))
static void mismatch(struct seq *s, const char *fmt, ...)
{
	va_list ap;
	if (s->failed)
		return;
	s->failed = 1;
	t_case_failed = 1;
	if (++g_reports > MAXREPORTS) {
		if (g_reports == MAXREPORTS + 1)
			fprintf(stderr, "(further mismatches in this case not shown)\n");
		return;
	}
	fprintf(stderr, "MISMATCH mode %s seed %llu step %ld\n  operation: %s\n  ",
	        s->mode, s->seed, s->step, s->op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (s->scripted)
		fprintf(stderr, "\n  replay: PP_DIFF_ITERS=0 PP_DIFF_VERBOSE=1 %s\n",
		        g_argv0);
	else
		fprintf(stderr, "\n  replay: PP_DIFF_SEED=%llu PP_DIFF_ITERS=1 "
		        "PP_DIFF_VERBOSE=1 %s\n", s->seed, g_argv0);
}

/* Compare a kernel and a pagepipe result (and errno when -1). */
static int same(struct seq *s, const char *what, long kr, int ke, long pr,
                int pe)
{
	if (kr == pr && (kr != -1 || ke == pe))
		return 1;
	mismatch(s, "%s: kernel %ld%s%s, pagepipe %ld%s%s", what,
	         kr, kr == -1 ? " errno " : "", kr == -1 ? ename(ke) : "",
	         pr, pr == -1 ? " errno " : "", pr == -1 ? ename(pe) : "");
	return 0;
}

static const char *evstr(int ev, char *b, size_t n)
{
	snprintf(b, n, "%#x%s%s%s%s%s%s", ev & 0xffff,
	         ev & POLLIN ? " IN" : "", ev & POLLRDNORM ? " RDNORM" : "",
	         ev & POLLOUT ? " OUT" : "", ev & POLLWRNORM ? " WRNORM" : "",
	         ev & POLLERR ? " ERR" : "", ev & POLLHUP ? " HUP" : "");
	return b;
}

/* How many SIGPIPEs are pending now (and take them). */
static int take_sigpipe(void)
{
	struct timespec zero = { 0, 0 };
	int n = 0;
	while (sigtimedwait(&g_pipeset, NULL, &zero) == SIGPIPE)
		n++;
	return n;
}

/* ---- sizes ---- */

static size_t write_size(struct seq *s)
{
	static const size_t edge[] = { 4095, 4096, 4097, 8191, 8192, 8193,
	                               12287, 12288, 12289, 65535, 65536, 65537 };
	unsigned long r = rnd(s, 100);
	if (r < 4)
		return 0;
	if (r < 40)
		return 1 + rnd(s, 100);
	if (r < 55)
		return edge[rnd(s, sizeof edge / sizeof edge[0])];
	if (r < 65)
		return (1 + rnd(s, 24)) * 4096 + rnd(s, 3) - 1;
	if (r < 75)
		return 1 + rnd(s, 4096);
	if (r < 90)
		return 1 + rnd(s, 65536);
	return 1 + rnd(s, WMAX);
}

static size_t read_size(struct seq *s)
{
	unsigned long r = rnd(s, 100);
	if (r < 5)
		return 0;
	if (r < 15)
		return 1;
	if (r < 35)
		return 1 + rnd(s, 100);
	if (r < 55)
		return 4090 + rnd(s, 12);
	if (r < 65)
		return (1 + rnd(s, 16)) * 4096 + rnd(s, 3) - 1;
	if (r < 80)
		return rnd(s, 65537);
	return rnd(s, RMAX + 1);
}

static int seg_count(struct seq *s)
{
	unsigned long r = rnd(s, 100);
	if (r < 6)
		return 0;
	if (r < 50)
		return 1 + (int)rnd(s, 4);
	if (r < 85)
		return 5 + (int)rnd(s, 12);
	if (r < 97)
		return 17 + (int)rnd(s, 48);
	return rnd(s, 2) ? IOV_MAX : 65 + (int)rnd(s, IOV_MAX - 65);
}

/* Split total bytes over cnt segments, about one in five of them empty. */
static void make_segs(struct seq *s, struct segs *sg, int cnt, size_t total)
{
	unsigned w[MAXSEG];
	unsigned long long sum = 0;
	size_t left = total;
	int i;
	sg->cnt = cnt;
	sg->huge = 0;
	if (cnt <= 0)
		return;
	for (i = 0; i < cnt; i++) {
		w[i] = rnd(s, 5) == 0 ? 0 : 1 + (unsigned)rnd(s, 1000);
		sum += w[i];
	}
	for (i = 0; i < cnt - 1; i++) {
		size_t len = sum ? (size_t)((unsigned long long)total * w[i] / sum) : 0;
		if (len > left)
			len = left;
		sg->len[i] = len;
		left -= len;
	}
	sg->len[cnt - 1] = left;
}

/* ---- the pipes ---- */

static int seq_open(struct seq *s, int packet, int nb, int nosig)
{
	int kf[2];
	struct pp_end *pe[2];
	int kfl = (nb ? O_NONBLOCK : 0) | (packet ? O_DIRECT : 0);
	int pfl = (nb ? PP_NONBLOCK : 0) | (packet ? PP_PACKET : 0) |
	          (nosig ? PP_NOSIGPIPE : 0);
	snprintf(s->op, sizeof s->op, "open (%s%s%s)", packet ? "packet" : "stream",
	         nb ? ", non-blocking" : "", nosig ? ", PP_NOSIGPIPE" : "");
	s->packet = packet;
	s->nosig = nosig;
	s->mode = packet ? "packet" : "stream";
	s->ppfd[0] = s->ppfd[1] = -1;
	if (pipe2(kf, kfl) != 0) {
		fprintf(stderr, "pipe2: %s\n", strerror(errno));
		t_case_failed = 1;
		s->failed = 1;
		return -1;
	}
	errno = 0;
	if (pp_pipe(pe, pfl) != 0) {
		mismatch(s, "pp_pipe failed: %s", ename(errno));
		close(kf[0]);
		close(kf[1]);
		return -1;
	}
	for (int e = 0; e < 2; e++) {
		s->nh[e] = 1;
		s->kfd[e][0] = kf[e];
		s->ph[e][0] = pe[e];
		s->nb[e] = nb;
	}
	return 0;
}

/* The F_SETFL flags of end e of the kernel pipe.  pipe2(O_DIRECT) puts
 * O_DIRECT on the write end's file only: packet mode belongs to the writer. */
static int k_flags(struct seq *s, int e, int nb)
{
	return (nb ? O_NONBLOCK : 0) | (s->packet && e == 1 ? O_DIRECT : 0);
}

/* Set or clear O_NONBLOCK on a kernel fd of end e, keeping O_DIRECT. */
static void k_setnb(struct seq *s, int e, int fd, int nb)
{
	if (fcntl(fd, F_SETFL, k_flags(s, e, nb)) != 0) {
		fprintf(stderr, "F_SETFL: %s\n", strerror(errno));
		t_case_failed = 1;
		s->failed = 1;
	}
}

/* Run a read/write-type call on end e, handle j, on both pipes.
 * K_READ/K_WRITE use n; K_READV/K_WRITEV use sg.  Returns the kernel's
 * result (-1 also when the sequence failed). */
static long io(struct seq *s, int kind, int e, int j, size_t n,
               const struct segs *sg)
{
	int isw = kind == K_WRITE || kind == K_WRITEV;
	int vec = kind == K_READV || kind == K_WRITEV;
	int kfd = s->kfd[e][j];
	struct pp_end *h = s->ph[e][j];
	size_t total = 0, extent = 0, off = 0;
	const unsigned char *src = g_pool;
	const struct iovec *kv = g_kiov, *pv = g_piov;
	volatile int cnt = vec ? sg->cnt : 0;
	int nseg = 0, huge = vec && sg->huge;
	unsigned char canary = (unsigned char)rnd(s, 256);
	long kr, pr;
	int ke, pe, ksig, psig, blocking, wouldblock, temp;

	if (vec) {
		nseg = sg->cnt < 0 ? 0 : sg->cnt > MAXSEG ? MAXSEG : sg->cnt;
		for (int i = 0; i < nseg; i++)
			if (sg->len[i] != SIZE_MAX)
				total += sg->len[i];
	} else {
		total = n;
	}
	if (isw)
		src = g_pool + rnd(s, POOL - total + 1);
	if (vec) {
		for (int i = 0; i < nseg; i++) {
			size_t len = sg->len[i], step = len == SIZE_MAX ? 0 : len;
			if (isw) {
				g_kiov[i].iov_base = (void *)(src + off);
				off += step;
			} else {
				g_kiov[i].iov_base = g_kbuf + off;
				g_piov[i].iov_base = g_pbuf + off;
				off += step + 1;   /* a gap byte that must stay intact */
			}
			g_kiov[i].iov_len = len;
			if (isw)
				g_piov[i] = g_kiov[i];
			else
				g_piov[i].iov_len = len;
		}
		if (sg->cnt == 0 && rnd(s, 2))
			kv = pv = NULL;
		extent = off + 16;
	} else {
		extent = (n > RMAX ? RMAX : n) + 16;   /* huge counts: see random_step */
	}
	if (!isw) {
		memset(g_kbuf, canary, extent);
		memset(g_pbuf, canary, extent);
	}
	blocking = !s->nb[e];
	snprintf(s->op, sizeof s->op, "%s on the %s end (handle %d of %d, %s) of "
	         "%zu bytes%s", kind_name[kind], e ? "write" : "read", j, s->nh[e],
	         blocking ? "blocking" : "non-blocking", total, huge ? " + SIZE_MAX" : "");
	if (vec) {
		size_t l = strlen(s->op);
		snprintf(s->op + l, sizeof s->op - l, " in %d segments%s [", sg->cnt,
		         kv ? "" : " (NULL iov)");
		for (int i = 0; i < nseg && i < 12; i++) {
			l = strlen(s->op);
			if (sg->len[i] == SIZE_MAX)
				snprintf(s->op + l, sizeof s->op - l, "%sSIZE_MAX", i ? " " : "");
			else
				snprintf(s->op + l, sizeof s->op - l, "%s%zu", i ? " " : "",
				         sg->len[i]);
		}
		l = strlen(s->op);
		snprintf(s->op + l, sizeof s->op - l, "%s]", nseg > 12 ? " ..." : "");
	}

	/* The kernel, without waiting. */
	if (blocking)
		k_setnb(s, e, kfd, 1);
	errno = 0;
	switch (kind) {
	case K_READ: kr = read(kfd, g_kbuf, n); break;
	case K_READV: kr = readv(kfd, kv, cnt); break;
	case K_WRITE: kr = write(kfd, src, n); break;
	default: kr = writev(kfd, kv, cnt); break;
	}
	ke = errno;
	ksig = take_sigpipe();
	if (blocking)
		k_setnb(s, e, kfd, 0);
	if (s->failed)
		return -1;
	wouldblock = (kr == -1 && ke == EAGAIN) ||
	             (isw && kr >= 0 && (size_t)kr < total);

	/* The pagepipe: blocking only where the kernel would not have waited. */
	temp = blocking && wouldblock;
	if (temp && pp_setfl(h, PP_NONBLOCK) != 0) {
		mismatch(s, "pp_setfl(PP_NONBLOCK) failed: %s", ename(errno));
		return -1;
	}
	errno = 0;
	switch (kind) {
	case K_READ: pr = pp_read(h, g_pbuf, n); break;
	case K_READV: pr = pp_readv(h, pv, cnt); break;
	case K_WRITE: pr = pp_write(h, src, n); break;
	default: pr = pp_writev(h, pv, cnt); break;
	}
	pe = errno;
	psig = take_sigpipe();
	if (temp && pp_setfl(h, 0) != 0) {
		mismatch(s, "pp_setfl(0) failed: %s", ename(errno));
		return -1;
	}
	if (g_verbose)
		fprintf(stderr, "  %ld: %s%s -> kernel %ld%s%s pp %ld%s%s\n", s->step,
		        s->op, temp ? " (would block: both non-blocking)" : "",
		        kr, kr == -1 ? " " : "", kr == -1 ? ename(ke) : "",
		        pr, pr == -1 ? " " : "", pr == -1 ? ename(pe) : "");

	if (!same(s, "result", kr, ke, pr, pe))
		return -1;
	if (!isw && !huge && memcmp(g_kbuf, g_pbuf, extent) != 0) {
		size_t d = 0;
		while (g_kbuf[d] == g_pbuf[d])
			d++;
		mismatch(s, "both returned %ld but the buffers differ first at offset "
		         "%zu: kernel byte %#x, pagepipe byte %#x (canary %#x)", kr, d,
		         g_kbuf[d], g_pbuf[d], canary);
		return -1;
	}
	if (psig != (s->nosig ? 0 : ksig) || (!isw && ksig)) {
		mismatch(s, "SIGPIPE raised %d time(s) by the kernel call, %d by "
		         "pagepipe (PP_NOSIGPIPE %s)", ksig, psig, s->nosig ? "set" : "clear");
		return -1;
	}
	return kr;
}

/* F_GETFL vs pp_getfl, on two random handles of end e.  O_NONBLOCK is
 * compared with the kernel; PP_PACKET and PP_NOSIGPIPE must be what pp_pipe
 * was given, on both ends (the kernel shows O_DIRECT on the write end only,
 * and pp_setfl must not change them). */
static void check_fl(struct seq *s, int e)
{
	int j1 = (int)rnd(s, (unsigned long)s->nh[e]);
	int j2 = (int)rnd(s, (unsigned long)s->nh[e]);
	int kfl = fcntl(s->kfd[e][j1], F_GETFL);
	int pfl, want;
	errno = 0;
	pfl = pp_getfl(s->ph[e][j2]);
	want = ((kfl & O_NONBLOCK) ? PP_NONBLOCK : 0) |
	       (s->packet ? PP_PACKET : 0) | (s->nosig ? PP_NOSIGPIPE : 0);
	if (pfl != want)
		mismatch(s, "%s end: F_GETFL %#x, so pp_getfl should be %#x, got %d "
		         "(%#x)", e ? "write" : "read", kfl, want, pfl, (unsigned)pfl);
	if (((kfl & O_DIRECT) != 0) != (s->packet && e == 1)) {
		fprintf(stderr, "test bug: O_DIRECT lost on the kernel pipe\n");
		t_case_failed = 1;
		s->failed = 1;
	}
}

/* After every step: poll vs pp_events for each open end, pp_fd readiness,
 * FIONREAD vs pp_nread and F_GETPIPE_SZ vs pp_getsize.  Once the sequence
 * has failed it does nothing. */
static void check_state(struct seq *s)
{
	char b1[80], b2[80];
	int e, j;
	for (e = 0; e < 2 && !s->failed; e++) {
		struct pollfd p;
		int ke, pe, r;
		if (!s->nh[e])
			continue;
		snprintf(s->op, sizeof s->op, "state check of the %s end",
		         e ? "write" : "read");
		j = (int)rnd(s, (unsigned long)s->nh[e]);
		p.fd = s->kfd[e][j];
		p.events = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM;
		p.revents = 0;
		r = poll(&p, 1, 0);
		ke = r > 0 ? p.revents : 0;
		j = (int)rnd(s, (unsigned long)s->nh[e]);
		errno = 0;
		pe = pp_events(s->ph[e][j]);
		if (r < 0 || ke != pe) {
			mismatch(s, "poll revents %s, pp_events %s", evstr(ke, b1, sizeof b1),
			         evstr(pe, b2, sizeof b2));
			return;
		}
		if (s->ppfd[e] >= 0) {
			struct pollfd q = { .fd = s->ppfd[e], .events = POLLIN, .revents = 0 };
			int want = (ke & (e ? POLLOUT | POLLERR : POLLIN | POLLHUP)) != 0;
			int got;
			r = poll(&q, 1, 0);
			got = r > 0 && (q.revents & POLLIN);
			if (r < 0 || (q.revents & POLLNVAL) || got != want) {
				mismatch(s, "pp_fd %d polls %sreadable (revents %s) but the kernel "
				         "end's revents are %s", s->ppfd[e], got ? "" : "not ",
				         evstr(q.revents, b1, sizeof b1), evstr(ke, b2, sizeof b2));
				return;
			}
		}
		if (rnd(s, 8) == 0)
			check_fl(s, e);
	}
	if (s->failed || (!s->nh[0] && !s->nh[1]))
		return;
	e = s->nh[0] && s->nh[1] ? (int)rnd(s, 2) : s->nh[1] ? 1 : 0;
	{
		int kn = -1, pn, kz, pz, ke, pe;
		snprintf(s->op, sizeof s->op, "FIONREAD / F_GETPIPE_SZ on the %s end",
		         e ? "write" : "read");
		j = (int)rnd(s, (unsigned long)s->nh[e]);
		errno = 0;
		if (ioctl(s->kfd[e][j], FIONREAD, &kn) != 0)
			kn = -1;
		ke = errno;
		errno = 0;
		pn = pp_nread(s->ph[e][j]);
		pe = errno;
		if (!same(s, "FIONREAD vs pp_nread", kn, ke, pn, pe))
			return;
		errno = 0;
		kz = fcntl(s->kfd[e][j], F_GETPIPE_SZ);
		ke = errno;
		errno = 0;
		pz = (int)pp_getsize(s->ph[e][j]);
		pe = errno;
		same(s, "F_GETPIPE_SZ vs pp_getsize", kz, ke, pz, pe);
	}
}

static void op_setfl(struct seq *s, int e, int j, int nb)
{
	static const int junk[] = { 0, 0, PP_PACKET, PP_NOSIGPIPE, 0x100,
	                            PP_PACKET | PP_NOSIGPIPE };
	int kfl = k_flags(s, e, nb);
	int pfl = (nb ? PP_NONBLOCK : 0) | junk[rnd(s, 6)];
	long kr, pr;
	int ke, pe;
	snprintf(s->op, sizeof s->op, "F_SETFL %#x / pp_setfl(%#x) on the %s end "
	         "(handle %d of %d)", kfl, pfl, e ? "write" : "read", j, s->nh[e]);
	errno = 0;
	kr = fcntl(s->kfd[e][j], F_SETFL, kfl);
	ke = errno;
	errno = 0;
	pr = pp_setfl(s->ph[e][j], pfl);
	pe = errno;
	if (g_verbose)
		fprintf(stderr, "  %ld: %s -> %ld %ld\n", s->step, s->op, kr, pr);
	if (!same(s, "result", kr, ke, pr, pe))
		return;
	if (kr == 0)
		s->nb[e] = nb;
	check_fl(s, e);
}

static void op_dup(struct seq *s, int e, int j)
{
	int nk;
	struct pp_end *np;
	snprintf(s->op, sizeof s->op, "dup / pp_dup of the %s end (handle %d of %d)",
	         e ? "write" : "read", j, s->nh[e]);
	if (g_verbose)
		fprintf(stderr, "  %ld: %s\n", s->step, s->op);
	nk = dup(s->kfd[e][j]);
	if (nk < 0) {
		fprintf(stderr, "dup: %s\n", strerror(errno));
		t_case_failed = 1;
		s->failed = 1;
		return;
	}
	errno = 0;
	np = pp_dup(s->ph[e][j]);
	if (!np) {
		mismatch(s, "dup returned %d, pp_dup returned NULL, errno %s", nk,
		         ename(errno));
		close(nk);
		return;
	}
	s->kfd[e][s->nh[e]] = nk;
	s->ph[e][s->nh[e]] = np;
	s->nh[e]++;
}

static void op_close(struct seq *s, int e, int j)
{
	long kr, pr;
	int ke, pe, last = s->nh[e] == 1;
	snprintf(s->op, sizeof s->op, "close / pp_close of the %s end (handle %d "
	         "of %d%s)", e ? "write" : "read", j, s->nh[e], last ? ", the last" : "");
	if (g_verbose)
		fprintf(stderr, "  %ld: %s\n", s->step, s->op);
	errno = 0;
	kr = close(s->kfd[e][j]);
	ke = errno;
	errno = 0;
	pr = pp_close(s->ph[e][j]);
	pe = errno;
	s->nh[e]--;
	s->kfd[e][j] = s->kfd[e][s->nh[e]];
	s->ph[e][j] = s->ph[e][s->nh[e]];
	same(s, "result", kr, ke, pr, pe);
	if (last && s->ppfd[e] >= 0) {
		int fd = s->ppfd[e];
		s->ppfd[e] = -1;
		errno = 0;
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			mismatch(s, "pp_fd %d of the %s end is still open after its last "
			         "handle was closed", fd, e ? "write" : "read");
	}
}

static void op_ppfd(struct seq *s, int e, int j)
{
	int fd;
	snprintf(s->op, sizeof s->op, "pp_fd of the %s end (handle %d of %d)",
	         e ? "write" : "read", j, s->nh[e]);
	errno = 0;
	fd = pp_fd(s->ph[e][j]);
	if (g_verbose)
		fprintf(stderr, "  %ld: %s -> %d\n", s->step, s->op, fd);
	if (fd < 0) {
		mismatch(s, "pp_fd failed: %s", ename(errno));
		return;
	}
	if (s->ppfd[e] >= 0 && fd != s->ppfd[e]) {
		mismatch(s, "pp_fd returned %d, but an earlier call on this end "
		         "returned %d (dups must share it)", fd, s->ppfd[e]);
		return;
	}
	for (int x = 0; x < 2; x++)
		for (int k = 0; k < s->nh[x]; k++)
			if (s->kfd[x][k] == fd) {
				mismatch(s, "pp_fd returned %d, a kernel pipe fd of this test", fd);
				return;
			}
	if (s->ppfd[!e] >= 0 && s->ppfd[!e] == fd) {
		mismatch(s, "pp_fd returned %d for both ends", fd);
		return;
	}
	s->ppfd[e] = fd;
}

static void op_setsize(struct seq *s, int e, int j, unsigned long sz)
{
	long kr, pr;
	int ke, pe;
	snprintf(s->op, sizeof s->op, "F_SETPIPE_SZ / pp_setsize(%lu) on the %s end",
	         sz, e ? "write" : "read");
	errno = 0;
	kr = fcntl(s->kfd[e][j], F_SETPIPE_SZ, sz);
	ke = errno;
	errno = 0;
	pr = pp_setsize(s->ph[e][j], sz);
	pe = errno;
	if (g_verbose)
		fprintf(stderr, "  %ld: %s -> kernel %ld%s%s pp %ld%s%s\n", s->step, s->op,
		        kr, kr == -1 ? " " : "", kr == -1 ? ename(ke) : "",
		        pr, pr == -1 ? " " : "", pr == -1 ? ename(pe) : "");
	same(s, "result", kr, ke, pr, pe);
}

static unsigned long pick_pipe_size(struct seq *s, int kfd)
{
	static const unsigned long fixed[] = { 0, 1, 4095, 4096, 4097, 8192, 12288,
	                                       65536, 65537, 131072, (1UL << 20) - 1,
	                                       1UL << 20 };
	unsigned long r = rnd(s, 100);
	int held = 0;
	if (r < 40)
		return fixed[rnd(s, sizeof fixed / sizeof fixed[0])];
	if (r < 60) {      /* at most the bytes held: EBUSY when slots are used */
		if (ioctl(kfd, FIONREAD, &held) != 0)
			held = 0;
		return rnd(s, (unsigned long)held + 1);
	}
	if (r < 70)
		return 4096UL << rnd(s, 9);
	if (r < 97)
		return 1 + rnd(s, 1UL << 20);
	return rnd(s, 2) ? 0x80000001UL : 0xffffffffUL;
}

/* Close every handle left, in a random order of ends. */
static void seq_close_all(struct seq *s)
{
	int first = (int)rnd(s, 2);
	for (int k = 0; k < 2; k++) {
		int e = k ? !first : first;
		while (s->nh[e] > 0) {
			if (s->failed) {          /* just release, no more comparing */
				s->nh[e]--;
				close(s->kfd[e][s->nh[e]]);
				pp_close(s->ph[e][s->nh[e]]);
				s->ppfd[e] = -1;
			} else {
				op_close(s, e, (int)rnd(s, (unsigned long)s->nh[e]));
			}
		}
	}
}

static void seq_init(struct seq *s, unsigned long long seed, int packet)
{
	memset(s, 0, sizeof *s);
	s->seed = seed;
	s->rng = seed * 0x2545f4914f6cdd1dULL + (packet ? 0x51ed27ULL : 0x7f4a7c15ULL);
	s->ppfd[0] = s->ppfd[1] = -1;
	s->mode = packet ? "packet" : "stream";
	snprintf(g_note, sizeof g_note, "the %s sequence of seed %llu (replay: PP_DIFF_SEED=%llu "
	         "PP_DIFF_ITERS=1 PP_DIFF_VERBOSE=1 %s)", s->mode, seed, seed, g_argv0);
	t_progress_at(g_note);
}

static void seq_finish(struct seq *s, int fds0)
{
	seq_close_all(s);
	if (fds0 >= 0 && !s->failed) {
		int fds1 = tp_count_fds();
		if (fds1 != fds0) {
			snprintf(s->op, sizeof s->op, "end of sequence, all handles closed");
			mismatch(s, "%d file descriptors open before the sequence, %d after",
			         fds0, fds1);
		}
	}
}

/* ---- the random sequences ---- */

static int open_end(struct seq *s, int want)
{
	if (want >= 0)
		return s->nh[want] ? want : -1;
	if (s->nh[0] && s->nh[1])
		return (int)rnd(s, 2);
	return s->nh[0] ? 0 : s->nh[1] ? 1 : -1;
}

static void random_step(struct seq *s)
{
	unsigned long r = rnd(s, 1000);
	int e, j, k;
	size_t n;

	if (r < 220) {                                   /* write */
		if ((e = open_end(s, 1)) < 0)
			return;
		io(s, K_WRITE, e, (int)rnd(s, (unsigned long)s->nh[e]), write_size(s), NULL);
	} else if (r < 430) {                            /* read */
		if ((e = open_end(s, 0)) < 0)
			return;
		io(s, K_READ, e, (int)rnd(s, (unsigned long)s->nh[e]), read_size(s), NULL);
	} else if (r < 510) {                            /* writev */
		if ((e = open_end(s, 1)) < 0)
			return;
		k = seg_count(s);
		make_segs(s, &g_segs, k, k ? write_size(s) : 0);
		io(s, K_WRITEV, e, (int)rnd(s, (unsigned long)s->nh[e]), 0, &g_segs);
	} else if (r < 590) {                            /* readv */
		if ((e = open_end(s, 0)) < 0)
			return;
		k = seg_count(s);
		make_segs(s, &g_segs, k, k ? read_size(s) : 0);
		io(s, K_READV, e, (int)rnd(s, (unsigned long)s->nh[e]), 0, &g_segs);
	} else if (r < 650) {                            /* burst of small writes */
		if ((e = open_end(s, 1)) < 0)
			return;
		k = 1 + (int)rnd(s, 40);
		n = rnd(s, 2) ? 100 : 4096;
		while (k-- > 0 && !s->failed && s->nh[e])
			io(s, K_WRITE, e, (int)rnd(s, (unsigned long)s->nh[e]), 1 + rnd(s, n),
			   NULL);
	} else if (r < 690) {                            /* burst of small reads */
		if ((e = open_end(s, 0)) < 0)
			return;
		k = 1 + (int)rnd(s, 40);
		while (k-- > 0 && !s->failed)
			io(s, K_READ, e, (int)rnd(s, (unsigned long)s->nh[e]), 1 + rnd(s, 5000),
			   NULL);
	} else if (r < 730) {                            /* O_NONBLOCK */
		if ((e = open_end(s, -1)) < 0)
			return;
		op_setfl(s, e, (int)rnd(s, (unsigned long)s->nh[e]),
		         rnd(s, 4) ? !s->nb[e] : s->nb[e]);
	} else if (r < 760) {                            /* dup */
		if ((e = open_end(s, -1)) < 0 || s->nh[e] >= MAXH)
			return;
		op_dup(s, e, (int)rnd(s, (unsigned long)s->nh[e]));
	} else if (r < 780) {                            /* close */
		if ((e = open_end(s, -1)) < 0)
			return;
		if (s->nh[e] == 1 && rnd(s, 3))              /* keep ends open longer */
			return;
		op_close(s, e, (int)rnd(s, (unsigned long)s->nh[e]));
	} else if (r < 800) {                            /* pp_fd */
		if ((e = open_end(s, -1)) < 0)
			return;
		op_ppfd(s, e, (int)rnd(s, (unsigned long)s->nh[e]));
	} else if (r < 870) {                            /* F_SETPIPE_SZ */
		if ((e = open_end(s, -1)) < 0)
			return;
		j = (int)rnd(s, (unsigned long)s->nh[e]);
		op_setsize(s, e, j, pick_pipe_size(s, s->kfd[e][j]));
	} else if (r < 930) {                            /* wrong end: EBADF */
		int kind = (int)rnd(s, 4);
		int w = kind == K_WRITE || kind == K_WRITEV;
		if ((e = open_end(s, w ? 0 : 1)) < 0)
			return;
		j = (int)rnd(s, (unsigned long)s->nh[e]);
		if (kind == K_READ || kind == K_WRITE) {
			io(s, kind, e, j, w ? write_size(s) : read_size(s), NULL);
		} else {
			k = seg_count(s);
			make_segs(s, &g_segs, k, k ? (w ? write_size(s) : read_size(s)) : 0);
			io(s, kind, e, j, 0, &g_segs);
		}
	} else if (r < 960) {                            /* bad iovecs: EINVAL */
		int w = (int)rnd(s, 2);
		int how = (int)rnd(s, 4);
		if ((e = open_end(s, w)) < 0)
			return;
		if (how == 3) {
			k = 1 + (int)rnd(s, 4);
			make_segs(s, &g_segs, k, rnd(s, 200));
			g_segs.len[rnd(s, (unsigned long)k)] = SIZE_MAX;
			g_segs.huge = 1;
		} else {
			make_segs(s, &g_segs, MAXSEG, MAXSEG);
			g_segs.cnt = how == 0 ? -1 : how == 1 ? IOV_MAX + 1 : INT_MIN;
		}
		io(s, w ? K_WRITEV : K_READV, e, (int)rnd(s, (unsigned long)s->nh[e]), 0,
		   &g_segs);
	} else {                                         /* read everything */
		int held = 0;
		if ((e = open_end(s, 0)) < 0)
			return;
		j = (int)rnd(s, (unsigned long)s->nh[e]);
		n = RMAX;
		/* A count past 0x7ffff000 is clamped by read(2); safe with our
		 * buffer while the pipe holds no more than it. */
		if (rnd(s, 2) && ioctl(s->kfd[e][j], FIONREAD, &held) == 0 &&
		    held <= RMAX) {
			static const size_t big[] = { 0x7ffff000, 0x7ffff001, 0x80000000,
			                              0xffffffff };
			n = big[rnd(s, 4)];
		}
		io(s, K_READ, e, j, n, NULL);
	}
}

static void random_sequence(int packet, unsigned long long seed)
{
	struct seq s;
	int fds0 = tp_count_fds();
	long steps;
	seq_init(&s, seed, packet);
	if (seq_open(&s, packet, (int)rnd(&s, 2), (int)rnd(&s, 2)) != 0)
		return;
	steps = 50 + (long)rnd(&s, 350);
	check_state(&s);
	for (s.step = 1; s.step <= steps && !s.failed && (s.nh[0] || s.nh[1]);
	     s.step++) {
		random_step(&s);
		check_state(&s);
	}
	seq_finish(&s, fds0);
}

static int packet_supported(void)
{
	int p[2];
	if (pipe2(p, O_DIRECT) != 0)
		return 0;
	close(p[0]);
	close(p[1]);
	return 1;
}

static void random_runs(int packet)
{
	g_reports = 0;
	for (long i = 0; i < g_iters; i++)
		random_sequence(packet, g_seed0 + (unsigned long long)i);
	if (g_reports)
		fprintf(stderr, "%s: %d of %ld sequences mismatched\n",
		        packet ? "packet" : "stream", g_reports, g_iters);
}

static void random_stream(void)
{
	random_runs(0);
}

static void random_packet(void)
{
	if (!packet_supported())
		SKIP("pipe2(O_DIRECT) not supported by this kernel");
	random_runs(1);
}

/* ---- scripted cases ---- */

/* The next step of a script: a read or write of n bytes on handle 0 of end
 * e of both pipes, unless the sequence already failed (then -1). */
static long script_io(struct seq *s, int kind, int e, size_t n)
{
	s->step++;
	return s->failed ? -1 : io(s, kind, e, 0, n, NULL);
}

/* One-byte non-blocking writes until EAGAIN: both must stop at the same
 * byte (65536 in stream mode, 16 packets in packet mode); then probe the
 * full pipe and drain it. */
static void one_byte_fill_mode(int packet)
{
	struct seq s;
	int fds0 = tp_count_fds();
	long count = 0, r, want = packet ? 16 : 65536;
	seq_init(&s, 0, packet);
	s.scripted = 1;
	if (seq_open(&s, packet, 1, 1) != 0)
		return;
	for (s.step = 1; !s.failed && count <= want + 10; s.step++) {
		r = io(&s, K_WRITE, 1, 0, 1, NULL);
		if (r != 1)
			break;
		count++;
		if ((count & 4095) == 0)
			check_state(&s);
	}
	if (!s.failed && count != want)
		fprintf(stderr, "note: the kernel pipe took %ld one-byte writes, "
		        "expected %ld\n", count, want);
	check_state(&s);
	/* The full pipe: one more byte, a big write, a read, a page's read. */
	script_io(&s, K_WRITE, 1, 1);
	script_io(&s, K_WRITE, 1, 4097);
	script_io(&s, K_WRITE, 1, 0);
	script_io(&s, K_READ, 0, 1);
	check_state(&s);
	script_io(&s, K_WRITE, 1, 1);
	script_io(&s, K_READ, 0, packet ? 1 : 4095);
	check_state(&s);
	script_io(&s, K_WRITE, 1, 4096);
	script_io(&s, K_WRITE, 1, 1);
	check_state(&s);
	/* Drain, comparing every byte. */
	while (!s.failed) {
		r = script_io(&s, K_READ, 0, packet ? 4096 : 10000);
		check_state(&s);
		if (r <= 0)
			break;
	}
	seq_finish(&s, fds0);
}

static void one_byte_fill(void)
{
	g_reports = 0;
	one_byte_fill_mode(0);
}

static void one_byte_fill_packet(void)
{
	g_reports = 0;
	if (!packet_supported())
		SKIP("pipe2(O_DIRECT) not supported by this kernel");
	one_byte_fill_mode(1);
}

/* Writes of mixed sizes into a non-blocking pipe of a random capacity until
 * one fails with EAGAIN: both must take the same bytes; then drain. */
static void mixed_fill_one(int packet, unsigned long long seed)
{
	static const unsigned long caps[] = { 0, 4096, 8192, 16384, 65536, 262144,
	                                      1UL << 20 };
	struct seq s;
	int fds0 = tp_count_fds();
	long r, kept = 0;
	unsigned long cap;
	seq_init(&s, seed, packet);
	if (seq_open(&s, packet, 1, 1) != 0)
		return;
	cap = caps[rnd(&s, sizeof caps / sizeof caps[0])];
	s.step = 1;
	if (cap)
		op_setsize(&s, (int)rnd(&s, 2), 0, cap);
	for (s.step = 2; !s.failed && s.step < 200000; s.step++) {
		size_t n = write_size(&s);
		r = io(&s, K_WRITE, 1, 0, n ? n : 1, NULL);
		if (r < 0)
			break;
		kept += r;
	}
	check_state(&s);
	if (!s.failed && g_verbose)
		fprintf(stderr, "  both pipes took %ld bytes\n", kept);
	while (!s.failed) {
		size_t n = read_size(&s);
		s.step++;
		r = io(&s, K_READ, 0, 0, n ? n : 1, NULL);
		if (r < 0)
			break;
		kept -= r;
	}
	check_state(&s);
	if (!s.failed && !packet && kept != 0)   /* packet reads may discard */
		mismatch(&s, "drained %ld bytes fewer than were written", kept);
	seq_finish(&s, fds0);
}

static void mixed_fill(void)
{
	long n = g_iters <= 0 ? 0 : g_iters / 3 > 0 ? g_iters / 3 : 1;
	int packet = packet_supported();
	g_reports = 0;
	for (long i = 0; i < n; i++) {
		mixed_fill_one(0, g_seed0 + (unsigned long long)i);
		if (packet)
			mixed_fill_one(1, g_seed0 + (unsigned long long)i);
	}
}

int main(int argc, char **argv)
{
	const char *v;
	uint64_t x = 0x1234567890abcdefULL;
	(void)argc;
	if (argv[0])
		g_argv0 = argv[0];
	if ((v = getenv("PP_DIFF_SEED")) && *v)
		g_seed0 = strtoull(v, NULL, 0);
	g_iters = t_env_long("PP_DIFF_ITERS", t_scaled(T_TSAN ? 150 : 300));
	if ((v = getenv("PP_DIFF_VERBOSE")) && *v)
		g_verbose = atoi(v);

	/* SIGPIPE: ignored, and blocked so each one stays pending to be counted. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&g_pipeset);
	sigaddset(&g_pipeset, SIGPIPE);
	sigprocmask(SIG_BLOCK, &g_pipeset, NULL);

	for (size_t i = 0; i < POOL; i += 8) {
		uint64_t w = rnext(&x);
		memcpy(g_pool + i, &w, 8);
	}

	RUN(one_byte_fill);
	RUN(one_byte_fill_packet);
	RUN(mixed_fill);
	RUN(random_stream);
	RUN(random_packet);
	return T_DONE();
}
