/*
 * fault_inject.c - every allocation and system call the library makes is
 * made to fail, one at a time and many at once, and the pipe must survive.
 *
 * test/fault.h interposes on malloc, calloc, mmap, eventfd, read, write and
 * close (and watches free and munmap) and fails the n-th call made inside an
 * armed window; every pp_* call of the workload below, and only those, runs
 * armed, so the test's own allocations never fail.
 *
 * The workload is a seeded, single-threaded series of phases.  Each phase
 * makes a pipe (sometimes in packet mode) and runs random operations on it:
 * writes and writevs of 1 byte to 100 KiB (merges, single pages and the
 * batch path that fills many pages outside the lock), blocking ones only
 * where they cannot block, reads and readvs of random sizes, pp_setsize up
 * and down (also EBUSY and EPERM), pp_dup and pp_close of extra handles,
 * pp_fd on either end.  It ends the phase by draining, by closing with data
 * left, by closing the writers and reading to EOF, or by closing the readers
 * and seeing EPIPE.  The page cache is off (pp_pool_setcache(0)), so every
 * page a write takes is a fresh mmap, i.e. a failure point.
 *
 * A model replays Linux's placement rules (merge into the last buffer,
 * one slot per page, packets) and predicts every return value exactly.
 * After each operation the test checks:
 *   - the result: exactly the model's when nothing was injected; otherwise
 *     -1 with ENOMEM (allocation or mmap failed: pp_pipe, pp_dup, pp_setsize,
 *     and a write that wrote nothing), the injected errno for pp_fd
 *     (EMFILE/ENFILE/ENOMEM), or for a write a shorter count ending on a
 *     page boundary (never less than the bytes it merged, and a write of at
 *     most PP_PIPE_BUF bytes is still all-or-nothing);
 *   - every byte read back is the stream byte at that position (a read
 *     model of the whole stream, so nothing written before a failure may be
 *     lost, duplicated, reordered or corrupted), readv leaves the gaps
 *     between its segments alone;
 *   - pp_nread, pp_getsize (unchanged by a failed pp_setsize), pp_events;
 *   - pages: pool pages_in_use equals the slots the model holds, and the
 *     pages the library has mapped equal in_use + cached (no page leaked);
 *   - pp_fd: its descriptor polls readable exactly while the end is ready,
 *     except after an injected eventfd read/write failure, which the next
 *     read, write or resize must repair;
 * and at the end of each phase, with every handle closed: no page in use,
 * no page mapped, no eventfd open, no ring or slot array (calloc block)
 * left allocated.  ASan's leak checker runs in every child too.
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
 * Reproduce one point: FI_POINT=k PROG reruns the workload from the start
 * failing call k (no forking at the other points); FI_EVERY=k PROG runs
 * only fail_every_kth with that k.  FI_SEED=n picks another workload,
 * FI_PHASES=n changes its length (default 10 phases).
 */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#include "harness.h"
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
static unsigned char wscratch[MAXIO + 64 * 40];
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

/* ---- the model -------------------------------------------------------------- */

struct mbuf {
	uint32_t end; /* offset + len in its page */
	uint32_t len;
};

struct model {
	struct pp_end *h[2][MAXH];
	int nh[2];
	bool packet;
	uint32_t cap;
	struct mbuf b[MAXSLOTS];
	uint32_t bt, bn; /* first slot, slots in use */
	uint64_t wpos, rpos;
	int efd[2];
	bool stale; /* an eventfd update was failed and not yet repaired */
};

static struct mbuf *mb(struct model *m, uint32_t i)
{
	return &m->b[(m->bt + i) % MAXSLOTS];
}

static size_t m_total(struct model *m)
{
	size_t n = 0;
	for (uint32_t i = 0; i < m->bn; i++)
		n += mb(m, i)->len;
	return n;
}

static bool m_ready(struct model *m, int side)
{
	return side == 0 ? (m->bn > 0 || m->nh[1] == 0) : (m->bn < m->cap || m->nh[0] == 0);
}

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* The kernel's answer to a write of len (-1 and *err for an error; -2 if it
 * would block), and the bytes it merges into the last buffer. */
static long write_expect(struct model *m, size_t len, bool nb, size_t *merged, int *err)
{
	*merged = 0;
	if (!m->nh[0]) {
		*err = EPIPE;
		return -1;
	}
	size_t chars = len % PG;
	if (!m->packet && chars && m->bn && mb(m, m->bn - 1)->end + chars <= PG)
		*merged = chars;
	size_t need = (len - *merged + PG - 1) / PG;
	size_t room = m->cap - m->bn;
	if (need <= room)
		return (long)len;
	if (!nb)
		return -2;
	size_t n = *merged + room * PG;
	if (!n) {
		*err = EAGAIN;
		return -1;
	}
	return (long)n;
}

/* Put the first n bytes of a write of len into the model as the library
 * places them; false if n cannot be such a prefix. */
static bool apply_write(struct model *m, size_t len, size_t merged, size_t n)
{
	size_t left = n, wl = len - merged;
	if (merged) {
		if (n < merged)
			return false;
		mb(m, m->bn - 1)->end += (uint32_t)merged;
		mb(m, m->bn - 1)->len += (uint32_t)merged;
		left -= merged;
	}
	while (left) {
		size_t c = min_sz(PG, wl);
		if (c > left || m->bn >= m->cap)
			return false;
		*mb(m, m->bn) = (struct mbuf){ (uint32_t)c, (uint32_t)c };
		m->bn++;
		left -= c;
		wl -= c;
	}
	m->wpos += n;
	return true;
}

static long read_expect(struct model *m, size_t count, int *err)
{
	if (!m->bn) {
		if (m->nh[1]) {
			*err = EAGAIN;
			return -1;
		}
		return 0;
	}
	return (long)min_sz(count, m->packet ? mb(m, 0)->len : m_total(m));
}

static void apply_read(struct model *m, size_t n)
{
	if (m->packet) {
		if (m->bn) { /* a packet read consumes the whole packet */
			m->rpos += mb(m, 0)->len;
			m->bt = (m->bt + 1) % MAXSLOTS;
			m->bn--;
		}
		return;
	}
	m->rpos += n;
	while (n) {
		struct mbuf *b = mb(m, 0);
		size_t t = min_sz(b->len, n);
		b->len -= (uint32_t)t;
		n -= t;
		if (!b->len) {
			m->bt = (m->bt + 1) % MAXSLOTS;
			m->bn--;
		}
	}
}

/* ---- checks ---------------------------------------------------------------- */

static struct pp_pool_stats pool(void)
{
	struct pp_pool_stats st;
	memset(&st, 0xff, sizeof st);
	CHECK_EQ(pp_pool_stats(&st), 0);
	return st;
}

/* Everything observable about the pipe against the model. */
static void check_state(struct model *m)
{
	size_t total = m_total(m);
	for (int s = 0; s < 2; s++) {
		if (!m->nh[s])
			continue;
		struct pp_end *e = m->h[s][rnd((uint32_t)m->nh[s])];
		CHECK_EQ(pp_nread(e), (long long)total);
		CHECK_EQ(pp_getsize(e), (long long)m->cap * PG);
		short want = s == 0 ? (short)((m->bn ? POLLIN | POLLRDNORM : 0) | (m->nh[1] ? 0 : POLLHUP))
		                    : (short)((m->bn < m->cap ? POLLOUT | POLLWRNORM : 0) |
		                              (m->nh[0] ? 0 : POLLERR));
		CHECK_EQ(pp_events(e), want);
		if (m->efd[s] >= 0 && !m->stale) {
			struct pollfd p = { .fd = m->efd[s], .events = POLLIN };
			CHECK_EQ(poll(&p, 1, 0) >= 0, 1);
			CHECK_EQ(!!(p.revents & POLLIN), m_ready(m, s));
		}
	}
	struct pp_pool_stats st = pool();
	CHECK_EQ(st.pages_in_use, m->bn);
	CHECK_EQ(fi.maps, st.pages_in_use + st.pages_cached);
	CHECK_EQ(m->wpos - m->rpos, total); /* the model agrees with itself */
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

/* An operation that refreshes every eventfd (read, write, resize) ran:
 * it repaired any earlier failed update unless it failed one itself. */
static void efd_after(struct model *m, bool refreshed)
{
	if (fi.op_mask & FI_EFDIO_BITS)
		m->stale = true;
	else if (refreshed)
		m->stale = false;
}

/* ---- operations ------------------------------------------------------------- */

static struct pp_end *pick(struct model *m, int side)
{
	return m->h[side][rnd((uint32_t)m->nh[side])];
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

/* Split len bytes into segments placed apart in buf, gaps filled with
 * junk; returns the count. */
static int make_iov(struct iovec *iov, unsigned char *buf, size_t len)
{
	int n = 1 + (int)rnd(6);
	size_t off = 0, left = len;
	for (int i = 0; i < n; i++) {
		size_t c = i == n - 1 ? left : (rnd(4) == 0 ? 0 : rnd((uint32_t)left + 1));
		memset(buf + off, 0xa5, 37);
		off += 37;
		iov[i].iov_base = buf + off;
		iov[i].iov_len = c;
		off += c;
		left -= c;
	}
	memset(buf + off, 0xa5, 37);
	return n;
}

static void op_write(struct model *m, bool vec)
{
	struct pp_end *w = pick(m, 1);
	size_t len = pick_wsize();
	const unsigned char *src = pat + m->wpos % PAT_LEN;
	size_t merged;
	int eerr = 0;
	long want = write_expect(m, len, true, &merged, &eerr);
	bool block = want == (long)len && rnd(3) == 0;
	snprintf(g_op, sizeof g_op, "%s %zu bytes%s (%zu merged, expect %ld)",
	         vec ? "pp_writev" : "pp_write", len, block ? " blocking" : "", merged, want);
	if (block)
		CHECK_EQ(pp_setfl(w, 0), 0);
	ssize_t r;
	int err;
	if (vec) {
		struct iovec iov[8];
		int n = make_iov(iov, wscratch, len);
		for (int i = 0, off = 0; i < n; off += (int)iov[i].iov_len, i++)
			memcpy(iov[i].iov_base, src + off, iov[i].iov_len);
		r = ARMED(pp_writev(w, iov, n));
	} else {
		r = ARMED(pp_write(w, src, len));
	}
	err = errno;
	if (block)
		CHECK_EQ(pp_setfl(w, PP_NONBLOCK), 0);

	if (!(fi.op_mask & FI_ALLOC_BITS)) {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	} else if (r < 0) {
		/* A failed page: ENOMEM, and only if nothing went in. */
		CHECK_EQ(err, ENOMEM);
		CHECK_EQ(merged, 0);
		CHECK(want > 0);
	} else {
		CHECK(r > 0 && r <= want);
		CHECK((size_t)r >= merged);
	}
	if (r > 0)
		CHECK(apply_write(m, len, merged, (size_t)r));
	efd_after(m, true);
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

static void op_read(struct model *m, bool vec)
{
	struct pp_end *rd = pick(m, 0);
	/* Small, or about what is there (a little less or more), or large. */
	size_t total = m_total(m), count;
	switch (rnd(4)) {
	case 0: case 1:
		count = 1 + rnd(5000);
		break;
	case 2:
		count = 1 + rnd((uint32_t)total + 2 * PG);
		break;
	default:
		count = 1 + rnd(MAXIO);
		break;
	}
	count = min_sz(count, MAXIO);
	int eerr = 0;
	long want = read_expect(m, count, &eerr);
	bool block = want >= 0 && rnd(3) == 0;
	snprintf(g_op, sizeof g_op, "%s %zu%s (expect %ld)", vec ? "pp_readv" : "pp_read",
	         count, block ? " blocking" : "", want);
	if (block)
		CHECK_EQ(pp_setfl(rd, 0), 0);
	struct iovec iov[8];
	int n = 1;
	if (vec) {
		n = make_iov(iov, rscratch, count);
	} else {
		memset(rscratch, 0xa5, 37);
		iov[0].iov_base = rscratch + 37;
		iov[0].iov_len = count;
		memset(rscratch + 37 + count, 0xa5, 37);
	}
	for (int i = 0; i < n; i++)
		memset(iov[i].iov_base, 0xa5, iov[i].iov_len);
	ssize_t r = vec ? ARMED(pp_readv(rd, iov, n))
	                : ARMED(pp_read(rd, iov[0].iov_base, count));
	int err = errno;
	if (block)
		CHECK_EQ(pp_setfl(rd, PP_NONBLOCK), 0);
	/* Nothing a read does may fail it. */
	CHECK_EQ(r, want);
	if (want < 0)
		CHECK_EQ(err, eerr);
	/* Every byte read is the stream's; the rest of each segment and the
	 * gaps around the segments are untouched. */
	const unsigned char *exp = pat + m->rpos % PAT_LEN;
	size_t got = 0, bad = 0;
	for (int i = 0; i < n; i++) {
		const unsigned char *b = iov[i].iov_base;
		size_t c = r > 0 ? min_sz(iov[i].iov_len, (size_t)r - got) : 0;
		if (c && memcmp(b, exp + got, c) != 0) {
			fprintf(stderr, "  data mismatch in segment %d at stream offset %llu\n", i,
			        (unsigned long long)(m->rpos + got));
			bad++;
		}
		bad += !untouched(b + c, iov[i].iov_len - c) + !untouched(b - 37, 37);
		got += c;
	}
	bad += !untouched((unsigned char *)iov[n - 1].iov_base + iov[n - 1].iov_len, 37);
	CHECK_EQ(bad, 0);
	if (r > 0)
		apply_read(m, (size_t)r);
	efd_after(m, true);
}

static void op_setsize(struct model *m)
{
	static const size_t sizes[] = { 1, 4096, 5000, 8192, 16384, 32768, 65536,
	                                131072, 262144, 524288, 1048576, 2097152 };
	size_t size = sizes[rnd(sizeof sizes / sizeof sizes[0])];
	int side = m->nh[0] && (!m->nh[1] || rnd(2)) ? 0 : 1;
	struct pp_end *e = pick(m, side);
	uint32_t pages = 1;
	while ((size_t)pages * PG < size)
		pages <<= 1;
	long want;
	int eerr = 0;
	if (pages > m->cap && (long)pages * PG > pp_getmaxsize()) {
		want = -1;
		eerr = EPERM;
	} else if (pages < m->bn) {
		want = -1;
		eerr = EBUSY;
	} else {
		want = (long)pages * PG;
	}
	snprintf(g_op, sizeof g_op, "pp_setsize %zu (from %u pages, %u used; expect %ld)", size,
	         m->cap, m->bn, want);
	long r = ARMED(pp_setsize(e, size));
	int err = errno;
	if (fi.op_mask & FI_BIT(FI_CALLOC)) {
		CHECK(want > 0 && pages != m->cap); /* the only call that allocates */
		CHECK_EQ(r, -1);
		CHECK_EQ(err, ENOMEM);
	} else {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
		else
			m->cap = pages;
	}
	efd_after(m, r > 0);
}

static void op_dup(struct model *m)
{
	int side = (int)rnd(2);
	if (!m->nh[side] || m->nh[side] >= MAXH)
		return;
	struct pp_end *e = pick(m, side);
	snprintf(g_op, sizeof g_op, "pp_dup side %d (%d handles)", side, m->nh[side]);
	struct pp_end *d = ARMED(pp_dup(e));
	int err = errno;
	if (fi.op_mask & FI_BIT(FI_MALLOC)) {
		CHECK(d == NULL);
		CHECK_EQ(err, ENOMEM);
	} else {
		CHECK(d != NULL);
		CHECK_EQ(fi.op_mask, 0);
	}
	if (d) {
		m->h[side][m->nh[side]++] = d;
		CHECK_EQ(pp_getfl(d), pp_getfl(e));
	}
}

/* Close handle i of side.  Closing the last one closes its eventfd. */
static void close_handle(struct model *m, int side, int i)
{
	struct pp_end *e = m->h[side][i];
	snprintf(g_op, sizeof g_op, "pp_close side %d (%d handles)", side, m->nh[side]);
	CHECK_EQ(ARMED(pp_close(e)), 0);
	m->h[side][i] = m->h[side][--m->nh[side]];
	if (!m->nh[side]) {
		if (m->efd[side] >= 0)
			CHECK_EQ(fi_fd_index(m->efd[side]), -1); /* really closed */
		m->efd[side] = -1;
	}
	if (!m->nh[0] && !m->nh[1]) {
		m->bn = 0; /* the ring is gone, its pages with it */
		m->rpos = m->wpos;
	}
	efd_after(m, false);
}

static void op_close_dup(struct model *m)
{
	int side = (int)rnd(2);
	if (m->nh[side] > 1)
		close_handle(m, side, (int)rnd((uint32_t)m->nh[side]));
}

static void op_fd(struct model *m)
{
	int side = (int)rnd(2);
	if (!m->nh[side])
		return;
	snprintf(g_op, sizeof g_op, "pp_fd side %d (have %d)", side, m->efd[side]);
	int fd = ARMED(pp_fd(pick(m, side)));
	int err = errno;
	if (m->efd[side] >= 0) {
		CHECK_EQ(fd, m->efd[side]); /* made once, then the same */
		CHECK_EQ(fi.op_calls, 0);
		return;
	}
	if (fi.op_mask & FI_BIT(FI_EVENTFD)) {
		CHECK_EQ(fd, -1);
		CHECK_EQ(err, fi.op_errno);
		CHECK(err == EMFILE || err == ENFILE || err == ENOMEM);
		return;
	}
	CHECK(fd >= 0);
	CHECK(fi_fd_index(fd) >= 0);
	if (fd >= 0)
		m->efd[side] = fd;
	efd_after(m, true);
}

/* ---- the workload ------------------------------------------------------------ */

/* Close every handle of side, checking what the other side sees. */
static void close_side(struct model *m, int side)
{
	while (m->nh[side]) {
		close_handle(m, side, (int)rnd((uint32_t)m->nh[side]));
		check_state(m);
		note_failure();
	}
}

static void end_phase(struct model *m)
{
	switch (rnd(4)) {
	case 0: /* drain, then close */
		for (int i = 0; m->bn && i < 600; i++) {
			op_read(m, rnd(2));
			check_state(m);
			note_failure();
		}
		CHECK_EQ(m->bn, 0);
		close_side(m, rnd(2));
		close_side(m, 0);
		close_side(m, 1);
		break;
	case 1: /* close with data left in it */
		close_side(m, rnd(2));
		close_side(m, 0);
		close_side(m, 1);
		break;
	case 2: /* writers go: read the rest, then EOF */
		close_side(m, 1);
		for (int i = 0; i < 600; i++) {
			bool empty = m->bn == 0;
			op_read(m, rnd(2));
			check_state(m);
			note_failure();
			if (empty)
				break;
		}
		CHECK_EQ(m->bn, 0);
		close_side(m, 0);
		break;
	default: /* readers go: EPIPE */
		close_side(m, 0);
		op_write(m, rnd(2));
		check_state(m);
		note_failure();
		close_side(m, 1);
		break;
	}
	check_empty();
	note_failure();
}

static void run_phase(void)
{
	struct model m;
	memset(&m, 0, sizeof m);
	m.efd[0] = m.efd[1] = -1;
	m.cap = 16;
	m.packet = rnd(3) == 0;
	/* Continue the stream across phases, at a fresh offset. */
	m.wpos = m.rpos = rnd(PAT_LEN);
	int flags = PP_NONBLOCK | PP_NOSIGPIPE | (m.packet ? PP_PACKET : 0);
	struct pp_end *ends[2] = { NULL, NULL };

	g_opno = 0;
	snprintf(g_op, sizeof g_op, "pp_pipe(flags 0x%x)", flags);
	int r = ARMED(pp_pipe(ends, flags));
	int err = errno;
	if (fi.op_mask & FI_ALLOC_BITS) {
		CHECK_EQ(r, -1);
		CHECK_EQ(err, ENOMEM);
		check_empty();
		note_failure();
		return;
	}
	CHECK_EQ(r, 0);
	CHECK_EQ(fi.op_mask, 0);
	if (r) {
		note_failure();
		return;
	}
	m.h[0][0] = ends[0];
	m.h[1][0] = ends[1];
	m.nh[0] = m.nh[1] = 1;
	check_state(&m);
	note_failure();

	/* The phase after a single failure only has to show that new pipes
	 * still work: keep it short. */
	int nops = g_stop_phase == g_phase ? 8 : 20 + (int)rnd(20);
	for (g_opno = 1; g_opno <= (unsigned)nops; g_opno++) {
		uint32_t c = rnd(100);
		if (c < 30)
			op_write(&m, false);
		else if (c < 40)
			op_write(&m, true);
		else if (c < 60)
			op_read(&m, false);
		else if (c < 68)
			op_read(&m, true);
		else if (c < 77)
			op_setsize(&m);
		else if (c < 84)
			op_dup(&m);
		else if (c < 89)
			op_close_dup(&m);
		else
			op_fd(&m);
		check_state(&m);
		note_failure();
	}
	end_phase(&m);
}

static int workload_phases(void)
{
	const char *s = getenv("FI_PHASES");
	long v = s ? atol(s) : 10;
	return v > 0 ? (int)v : 10;
}

static uint32_t workload_seed(void)
{
	const char *s = getenv("FI_SEED");
	return s ? (uint32_t)strtoul(s, NULL, 0) * 2u + 1u : 0x5eed1234u;
}

enum mode { M_COUNT, M_POINT, M_FORK, M_EVERY };

static int quiet_children; /* after a few failing children, hide their output */
static const char *g_prog = "build/test/fault_inject";

/* Fork mode: called in the driver at each failable call, in the child (pid
 * 0) just after the fork, and in the driver when the child has exited. */
static void on_child(pid_t pid, unsigned long n, int status)
{
	if (pid == 0) {
		alarm(10); /* alarms are not inherited; a run takes milliseconds */
		if (quiet_children || sh->nfailed >= 5)
			(void)!freopen("/dev/null", "w", stderr);
		return;
	}
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
	for (g_phase = 0; g_phase < phases; g_phase++) {
		if (g_stop_phase >= 0 && g_phase > g_stop_phase)
			break;
		run_phase();
		/* One call failed: finish this phase and run one more. */
		if (fi.fail_at && fi.injected && g_stop_phase < 0)
			g_stop_phase = g_phase + 1;
	}
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
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	describe(st, why, whylen);
	return 1;
}

static long env_long(const char *name)
{
	const char *s = getenv(name);
	return s ? atol(s) : 0;
}

static void count_points(void)
{
	char why[128];
	int rc = run_child(M_COUNT, 0, why, sizeof why);
	if (rc)
		fprintf(stderr, "count run (nothing failed) failed: %s\n", why);
	CHECK_EQ(rc, 0);
	fprintf(stderr, "failable calls in the workload: %lu (", sh->ncalls);
	for (int k = 0; k < FI_NKINDS; k++)
		fprintf(stderr, "%s%s %lu", k ? ", " : "", fi_kind_name[k], sh->per_kind[k]);
	fprintf(stderr, ")\n");
	/* The workload must reach every kind of failure point. */
	for (int k = 0; k < FI_NKINDS; k++)
		CHECK(sh->per_kind[k] > 0);
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
	unsigned long n = sh->ncalls, only = (unsigned long)env_long("FI_POINT");
	unsigned long failed = 0, per_kind[FI_NKINDS] = { 0 };
	char why[128];
	if (!n)
		SKIP("no count run");
	if (env_long("FI_EVERY"))
		SKIP("FI_EVERY set");
	if (only) {
		int rc = run_child(M_POINT, only, why, sizeof why);
		fprintf(stderr, "failure point %lu (%s): %s\n", only,
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
			        "FI_POINT=%lu %s\n", k, fi_kind_name[sh->trace[k - 1]], why, k,
			        g_prog);
	}
	fprintf(stderr, "failed each of %lu points one at a time (", sh->npoints);
	for (int k = 0; k < FI_NKINDS; k++)
		fprintf(stderr, "%s%s %lu", k ? ", " : "", fi_kind_name[k], per_kind[k]);
	fprintf(stderr, "): %lu failed\n", failed);
	CHECK_EQ(failed, 0);
}

static void fail_every_kth(void)
{
	long only = env_long("FI_EVERY"), kmax = env_long("FI_EVERY_MAX");
	unsigned long failed = 0, runs = 0;
	char why[128];
	if (env_long("FI_POINT"))
		SKIP("FI_POINT set");
	if (kmax <= 0)
		kmax = 40;
	for (long k = only ? only : 1; k <= (only ? only : kmax); k++) {
		int rc = run_child(M_EVERY, (unsigned long)k, why, sizeof why);
		runs++;
		if (rc) {
			failed++;
			fprintf(stderr, "every %ld-th call failing FAILED: %s; reproduce: FI_EVERY=%ld %s\n",
			        k, why, k, g_prog);
			if (failed >= 5)
				quiet_children = 1;
			if (failed >= 10) {
				fprintf(stderr, "stopping after %lu failures\n", failed);
				break;
			}
		}
	}
	quiet_children = 0;
	fprintf(stderr, "failed every k-th call for %lu values of k: %lu failed\n", runs, failed);
	CHECK_EQ(failed, 0);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#define TIMED(fn)                                                            \
	do {                                                                     \
		double t0_ = now();                                                  \
		RUN(fn);                                                             \
		fprintf(stderr, "  (%s: %.1f s)\n", #fn, now() - t0_);               \
	} while (0)

int main(int argc, char **argv)
{
	(void)argc;
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
	TIMED(count_points);
	TIMED(fail_each_point);
	TIMED(fail_every_kth);
	munmap(sh, sizeof *sh);
	return T_DONE();
}
