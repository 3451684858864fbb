/*
 * fault_inject.c - every allocation and system call the library makes is
 * made to fail, one at a time and many at once, and the pipe must survive.
 *
 * test/fault.h interposes on malloc, calloc, mmap, eventfd, read, write,
 * close, readv/preadv, writev/pwritev, fstat, lseek and fcntl (and watches
 * free and munmap) and fails the n-th call made inside an armed window (the
 * descriptor I/O also by a short transfer); every pp_* call of the
 * workloads below, and only those, runs armed, so the test's own
 * allocations and system calls never fail.
 *
 * Two workloads, each swept the same way (cases count_points,
 * fail_each_point, fail_every_kth, and the same three with _zc).
 *
 * The core workload is a seeded, single-threaded series of phases.  Each phase
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
 * The zero-copy workload (zc) is a series of phases too, each with four
 * pipes (some in packet mode) and three descriptors: a source file (memfd)
 * read at its position or at an offset, a sink file written likewise, and
 * a kernel pipe both ways.  In odd phases the source is sealed with
 * F_SEAL_SHRINK, so pp_splice_from_fd maps its pages into the pipes (file
 * buffers, one mapping and one gift record a call, the first buffer
 * starting inside its page) instead of reading them into pool pages.  Its
 * operations mix pp_splice, pp_tee, pp_fanout
 * (to up to three pipes), pp_vmsplice (1-4 segments of test memory at any
 * alignment, with a release callback), pp_splice_from_fd, pp_splice_to_fd,
 * pp_peek + pp_consume with pp_write, pp_read, pp_setsize, pp_fd and
 * pp_close of single sides.  Its failure points: the mmap of every page
 * (pp_splice_from_fd reserves up to 64), the malloc of every gift record
 * and the calloc of a page-table leaf (pp_vmsplice; ballast handles put
 * that leaf in the middle of a segment, see zc_ballast_make), the
 * descriptor's fstat/lseek/fcntl checks, readv/preadv and writev/pwritev
 * (failed with an errno or cut short), the eventfd updates, and pp_pipe's
 * allocations; from the sealed source: the seals check (fcntl), the
 * position (lseek), the file's mmap, its gift record (malloc), a handle
 * leaf (calloc), each of which makes the call read into pool pages
 * instead, and the final lseek that moves the position (the call then
 * fails, nothing moved, nothing left mapped).  The model is
 * test/fuzz/zc_model.c, shared with the
 * zero-copy fuzz target: every pipe's buffers, the pages they name with
 * their references (tee'd and fanned-out copies share them), the expected
 * bytes of each.  After each call:
 *   - the result: exactly the model's when nothing was injected or only
 *     an eventfd update failed (splice, tee and fan-out allocate nothing);
 *     otherwise -1 with ENOMEM (no page, no gift record), EBADF (fstat),
 *     EINVAL (lseek), the descriptor's own errno (readv/writev failed),
 *     EOVERFLOW (the sealed source's position not moved), or
 *     a shorter count: a whole number of pages (pages missing), a prefix
 *     ending on a chunk boundary (vmsplice), less than asked (the
 *     descriptor cut short), and exactly what the descriptor took is gone
 *     from the pipe; an offset argument moves by the count, a file
 *     position likewise;
 *   - every pipe's whole contents, in place through pp_peek: one segment
 *     per model buffer, same lengths and bytes, the same memory for the
 *     same page in every pipe that holds it (from the sealed source its
 *     mapped pages when nothing failed in the mapping, else pool pages
 *     holding the same bytes: a whole call's pages, no lead, as from an
 *     unsealed file, and exactly that count when the failure was the
 *     call's only one); pp_nread, pp_getsize,
 *     pp_events, pp_fd readiness (unless an eventfd update failed since
 *     the last refresh);
 *   - pool pages_in_use equals the pool pages the model's buffers name
 *     (mapped file pages are not pool pages), mapped pages equal in_use +
 *     cached + the pages of the file mappings some buffer still names (a
 *     call's mapping goes with its last page), live gift records (malloc
 *     blocks made inside pp_vmsplice) equal the segments not yet released,
 *     those made inside pp_splice_from_fd the file mappings not yet gone;
 *   - each release callback came exactly once, when the last reference to
 *     its segment's bytes went (read, spliced out, consumed, or the pipe
 *     closed), with the part of the segment that went in, its bytes intact;
 *   - the sink file holds exactly what was spliced to it, the kernel pipe
 *     what was spliced to it (drained and compared) or what is left of what
 *     the test put in, the source file's position moved by what was taken;
 * and at the end of each phase, all closed: no page in use or mapped, no
 * eventfd, no ring, no gift record, every release made, no mapping of the
 * source file left (/proc/self/maps).  A fork's child gets private copies
 * of the descriptors as they are at the fork (the kernel pipe's contents
 * copied with tee(2), the source's seals too).
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
 * Reproduce one point: FI_WORKLOAD=core|zc FI_POINT=k PROG reruns that
 * workload from the start failing call k (no forking at the other points);
 * FI_EVERY=k PROG runs only fail_every_kth with that k.  FI_WORKLOAD alone
 * runs one workload.  FI_SEED=n picks other workloads, FI_PHASES=n changes
 * their length (default 10 phases core, 6 zc, times PP_TEST_SCALE; at
 * least 3).
 */
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
#include "memfd_maps.h"
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

/* ==== the zero-copy workload ================================================ */

/*
 * Several pipes and three descriptors: a source file (memfd) read at its
 * position or at an offset, a sink file written likewise, and a kernel pipe
 * both ways.  The model is test/fuzz/zc_model.c; here are the calls, what
 * each may do when a call inside it fails, and the descriptors' own model.
 */
#include "fuzz/zc_model.c"

/* The model's failures: recorded, and the run goes on. */
static void zm_fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "  zc: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	t_case_failed = 1;
}

#define ZP 4                      /* pipes per phase */
#define FR_SIZE (48u * PG + 123)  /* the source file */
#define FW_MAX (48u * PG)         /* the sink file is emptied beyond this */
#define KP_MAX 65536u             /* a kernel pipe's default capacity */
#define ARENA (1u << 20)          /* caller memory for pp_vmsplice */
#define GIFT_TAG 'g'
#define FILE_TAG 'f'              /* malloc blocks made in pp_splice_from_fd */

static struct {
	int fr, fw, kp[2];       /* source memfd, sink memfd, kernel pipe */
	bool sealed;             /* the source has F_SEAL_SHRINK (odd phases) */
	uint32_t fr_src;         /* the source file holds pat[fr_src ..] */
	off_t fr_pos;            /* its position */
	unsigned char fw_data[FW_MAX + MAXIO + PG]; /* what the sink file holds */
	size_t fw_size;
	off_t fw_pos;
	unsigned char kp_data[KP_MAX]; /* what the kernel pipe holds */
	size_t kp_len;
	size_t arena_used;
} zc;
static unsigned char zc_arena[ARENA];
static unsigned char zc_exp[MAXIO + PG];

/* A live pipe whose `side` is open, or NULL. */
static struct zm_pipe *zc_pick(int side)
{
	struct zm_pipe *c[ZP];
	int n = 0;
	for (int i = 0; i < ZP; i++)
		if (zm_p[i].live && zm_p[i].end[side])
			c[n++] = &zm_p[i];
	return n ? c[rnd((uint32_t)n)] : NULL;
}

/* After a call on pipes t[0..n): an injected eventfd read/write failure
 * leaves their descriptors stale; a call that refreshes them repairs it. */
static void zc_after(struct zm_pipe *const t[], int n, bool refreshed)
{
	for (int i = 0; i < n; i++) {
		if (fi.op_mask & FI_EFDIO_BITS)
			t[i]->stale = true;
		else if (refreshed)
			t[i]->stale = false;
	}
}

static size_t zc_len(void)
{
	switch (rnd(6)) {
	case 0: return 1 + rnd(300);
	case 1: return PG * (1 + rnd(4));
	case 2: return 1 + rnd(4 * PG);
	case 3: return 1 + rnd(24 * PG);
	case 4: return (size_t)1 << 30; /* everything */
	default: return 1 + rnd(64 * PG);
	}
}

/* The descriptors a fork's child must not share with its parent: a copy of
 * each as it is at the fork (maybe in the middle of a call), same number,
 * same contents, same position. */
static void zc_private_fds(void)
{
	static unsigned char buf[FR_SIZE + FW_MAX + MAXIO + PG];
	static const char *const names[2] = { "fi-src", "fi-sink" };
	int fds[2] = { zc.fr, zc.fw };
	for (int i = 0; i < 2; i++) {
		if (fds[i] < 0)
			continue;
		/* Same seals too: a sealed source's pages are still mapped (the
		 * buffers mapped before the fork name the parent's file, whose
		 * bytes are the same and which no one writes). */
		int seals = fcntl(fds[i], F_GET_SEALS);
		off_t pos = lseek(fds[i], 0, SEEK_CUR);
		ssize_t n = pread(fds[i], buf, sizeof buf, 0);
		int nfd = memfd_create(names[i], MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (seals < 0 || pos < 0 || n < 0 || nfd < 0 || pwrite(nfd, buf, (size_t)n, 0) != n ||
		    lseek(nfd, pos, SEEK_SET) != pos ||
		    ((seals & ~F_SEAL_SEAL) && fcntl(nfd, F_ADD_SEALS, seals & ~F_SEAL_SEAL) < 0) ||
		    dup3(nfd, fds[i], O_CLOEXEC) < 0)
			abort();
		close(nfd);
	}
	if (zc.kp[0] >= 0) {
		/* What the kernel pipe holds now (the library may have read from
		 * it already in this call): tee(2) copies without taking it. */
		int np[2], avail = 0;
		if (pipe2(np, O_NONBLOCK | O_CLOEXEC) < 0 || ioctl(zc.kp[0], FIONREAD, &avail) < 0 ||
		    (avail && tee(zc.kp[0], np[1], (size_t)avail, SPLICE_F_NONBLOCK) != avail) ||
		    dup3(np[0], zc.kp[0], O_CLOEXEC) < 0 || dup3(np[1], zc.kp[1], O_CLOEXEC) < 0)
			abort();
		close(np[0]);
		close(np[1]);
	}
}

/* The descriptors against their model. */
static void zc_check_fds(void)
{
	static unsigned char buf[FW_MAX + MAXIO + PG];
	struct stat st;
	CHECK_EQ(lseek(zc.fr, 0, SEEK_CUR), zc.fr_pos);
	CHECK_EQ(lseek(zc.fw, 0, SEEK_CUR), zc.fw_pos);
	CHECK(fstat(zc.fw, &st) == 0);
	CHECK_EQ(st.st_size, zc.fw_size);
	ssize_t n = pread(zc.fw, buf, sizeof buf, 0);
	CHECK_EQ(n, zc.fw_size);
	if (n == (ssize_t)zc.fw_size && memcmp(buf, zc.fw_data, zc.fw_size) != 0) {
		size_t k = 0;
		while (buf[k] == zc.fw_data[k])
			k++;
		fprintf(stderr, "  sink file differs at byte %zu\n", k);
		CHECK(0);
	}
	int avail = -1;
	CHECK(ioctl(zc.kp[0], FIONREAD, &avail) == 0);
	CHECK_EQ(avail, zc.kp_len);
}

/* Everything after each step.  Mapped pages: the pool's, and the sealed
 * source file's that buffers still name (each call's run is unmapped with
 * its last page, by the length it was mapped with). */
static void zc_check_state(void)
{
	zm_check_all();
	struct pp_pool_stats st = pool();
	CHECK_EQ(fi.maps, st.pages_in_use + st.pages_cached + zm_file_pages());
	CHECK_EQ(fi_live_mallocs(GIFT_TAG), zm_gifts_pending()); /* gift records freed */
	CHECK_EQ(fi_live_mallocs(FILE_TAG), zm_runs_live());     /* a run's record too */
	zc_check_fds();
}

/* Empty the kernel pipe, checking it held what the model says. */
static void zc_drain_kp(void)
{
	static unsigned char buf[KP_MAX + 1];
	ssize_t n = read(zc.kp[0], buf, sizeof buf);
	if (n < 0 && errno == EAGAIN)
		n = 0;
	CHECK_EQ(n, zc.kp_len);
	if (n == (ssize_t)zc.kp_len && memcmp(buf, zc.kp_data, zc.kp_len) != 0) {
		fprintf(stderr, "  the kernel pipe holds other bytes than were spliced to it\n");
		CHECK(0);
	}
	zc.kp_len = 0;
}

static void zc_op_write(void)
{
	struct zm_pipe *p = zc_pick(ZM_W);
	if (!p)
		return;
	size_t len = pick_wsize(), merged;
	const unsigned char *src = pat + rnd(PAT_LEN);
	int eerr = 0;
	bool wait;
	long want = zm_write_predict(p, len, &merged, &eerr, &wait);
	snprintf(g_op, sizeof g_op, "pp_write pipe %u, %zu bytes (%zu merged, expect %ld)", p->id,
	         len, merged, want);
	ssize_t r = ARMED(pp_write(p->end[ZM_W], src, len));
	int err = errno;
	if (!(fi.op_mask & FI_ALLOC_BITS)) {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	} else if (r < 0) {
		CHECK_EQ(err, ENOMEM); /* a page failed before anything went in */
		CHECK_EQ(merged, 0);
		CHECK(want > 0);
	} else {
		CHECK(r > 0 && r <= want && (size_t)r >= merged);
	}
	if (r > 0)
		CHECK(zm_write_apply(p, src, len, merged, (size_t)r));
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, true);
}

static void zc_op_read(void)
{
	struct zm_pipe *p = zc_pick(ZM_R);
	if (!p)
		return;
	size_t count = rnd(2) ? 1 + rnd(3 * PG) : 1 + rnd(MAXIO);
	int eerr = 0;
	bool wait;
	long want = zm_read_predict(p, count, &eerr, &wait);
	snprintf(g_op, sizeof g_op, "pp_read pipe %u, %zu bytes (expect %ld)", p->id, count, want);
	memset(rscratch, 0xa5, count + 37);
	ssize_t r = ARMED(pp_read(p->end[ZM_R], rscratch, count));
	int err = errno;
	CHECK_EQ(r, want); /* nothing a read does may fail it */
	if (want < 0)
		CHECK_EQ(err, eerr);
	if (r > 0) {
		size_t got = zm_read_apply(p, count, zc_exp);
		CHECK_EQ(got, r);
		CHECK(memcmp(rscratch, zc_exp, (size_t)r) == 0);
	}
	CHECK(untouched(rscratch + (r > 0 ? r : 0), 37));
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, true);
}

/* pp_splice (kind 0), pp_tee (1), pp_fanout (2). */
static void zc_op_xfer(int kind)
{
	struct zm_pipe *in = zc_pick(ZM_R);
	if (!in)
		return;
	struct zm_pipe *cand[ZP], *outs[ZP];
	int nc = 0;
	for (int i = 0; i < ZP; i++)
		if (zm_p[i].live && zm_p[i].end[ZM_W] && &zm_p[i] != in)
			cand[nc++] = &zm_p[i];
	if (!nc)
		return;
	int n = kind == 2 ? 1 + (int)rnd((uint32_t)nc) : 1;
	for (int i = 0; i < n; i++) { /* n distinct ones */
		int j = i + (int)rnd((uint32_t)(nc - i));
		struct zm_pipe *x = cand[i];
		cand[i] = cand[j];
		cand[j] = x;
		outs[i] = cand[i];
	}
	size_t len = zc_len();
	unsigned flags = (rnd(2) ? PP_SPLICE_NONBLOCK : 0) | (rnd(4) ? 0 : PP_SPLICE_MOVE | PP_SPLICE_MORE);
	int eerr = 0, sigout;
	bool wait;
	long want = zm_xfer_predict(in, outs, n, len, kind != 1, &eerr, &wait, &sigout);
	static const char *const names[] = { "pp_splice", "pp_tee", "pp_fanout" };
	snprintf(g_op, sizeof g_op, "%s pipe %u -> %u%s (%d outs), %zu bytes (expect %ld)",
	         names[kind], in->id, outs[0]->id, n > 1 ? "..." : "", n, len, want);
	struct pp_end *oe[ZP];
	for (int i = 0; i < n; i++)
		oe[i] = outs[i]->end[ZM_W];
	ssize_t r = kind == 0 ? ARMED(pp_splice(in->end[ZM_R], oe[0], len, flags))
	          : kind == 1 ? ARMED(pp_tee(in->end[ZM_R], oe[0], len, flags))
	                      : ARMED(pp_fanout(in->end[ZM_R], oe, n, len, flags));
	int err = errno;
	/* No allocation and no descriptor I/O but the eventfds': nothing may
	 * change the result. */
	CHECK_EQ(r, want);
	if (want < 0)
		CHECK_EQ(err, eerr);
	CHECK_EQ(fi.op_mask & ~FI_EFDIO_BITS, 0);
	if (r > 0 && r == want)
		CHECK_EQ(zm_xfer_apply(in, outs, n, len, kind != 1), r);
	struct zm_pipe *t[ZP + 1];
	t[0] = in;
	for (int i = 0; i < n; i++)
		t[i + 1] = outs[i];
	zc_after(t, n + 1, r > 0);
}

/* Both ends of one pipe: EINVAL, nothing happens. */
static void zc_op_same_pipe(void)
{
	struct zm_pipe *p = zc_pick(ZM_R);
	if (!p || !p->end[ZM_W])
		return;
	snprintf(g_op, sizeof g_op, "pp_splice/pp_tee pipe %u to itself", p->id);
	ssize_t r = rnd(2) ? ARMED(pp_splice(p->end[ZM_R], p->end[ZM_W], 100, 0))
	                   : ARMED(pp_tee(p->end[ZM_R], p->end[ZM_W], 100, 0));
	int err = errno;
	CHECK_EQ(r, -1);
	CHECK_EQ(err, EINVAL);
	CHECK_EQ(fi.op_calls, 0);
}

/* edge: the fixed first call of the workload (see zc_ballast_make). */
static void zc_op_vmsplice(bool edge)
{
	struct zm_pipe *p = zc_pick(ZM_W);
	if (!p)
		return;
	struct iovec iov[4];
	const unsigned char *expect[4];
	int n = edge ? 2 : 1 + (int)rnd(4);
	for (int i = 0; i < n; i++) {
		size_t len;
		switch (edge ? 5u + (uint32_t)i : rnd(5)) {
		case 0: len = 0; break;
		case 1: len = 1 + rnd(300); break;
		case 2: len = PG * (1 + rnd(2)); break;
		case 5: len = 2 * PG + 808; break; /* three chunks */
		case 6: len = 3000; break;
		default: len = 1 + rnd(3 * PG + 500); break;
		}
		size_t at = zc.arena_used + rnd(64); /* any alignment */
		if (at + len > ARENA)
			return; /* the arena is used up until the phase ends */
		zc.arena_used = at + len;
		uint32_t from = rnd(PAT_LEN);
		memcpy(zc_arena + at, pat + from, len);
		iov[i].iov_base = zc_arena + at;
		iov[i].iov_len = len;
		expect[i] = pat + from;
	}
	unsigned flags = PP_SPLICE_NONBLOCK | (rnd(2) ? PP_SPLICE_GIFT : 0);
	int eerr = 0;
	bool wait, sig;
	long want = zm_vmsplice_predict(p, iov, n, &eerr, &wait, &sig);
	snprintf(g_op, sizeof g_op, "pp_vmsplice pipe %u, %d segs, %zu %zu.. bytes (expect %ld)",
	         p->id, n, iov[0].iov_len, n > 1 ? iov[1].iov_len : 0, want);
	fi.tag = GIFT_TAG;
	ssize_t r = ARMED(pp_vmsplice(p->end[ZM_W], iov, (unsigned long)n, flags, zm_release, NULL));
	int err = errno;
	fi.tag = 0;
	if (!(fi.op_mask & (FI_BIT(FI_MALLOC) | FI_BIT(FI_CALLOC)))) {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	} else if (r < 0) {
		CHECK_EQ(err, ENOMEM); /* a gift record or a handle failed first */
		CHECK(want > 0);
	} else {
		CHECK(r > 0 && r < want); /* stopped at the failure: what went in */
	}
	if (r > 0)
		CHECK(zm_vmsplice_apply(p, iov, n, expect, (size_t)r));
	/* The ballast did its job: a gift, a new leaf, the second gift. */
	if (edge && !fi.injected)
		CHECK_EQ(fi.op_calls, 3);
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, true);
}

/* The bytes source `src` (0 file at its position, 1 file at an offset,
 * 2 kernel pipe) gives from its start. */
static const unsigned char *zc_src_bytes(int src, off_t off)
{
	if (src == 2)
		return zc.kp_data;
	return pat + zc.fr_src + off;
}

/*
 * From the source file, the kernel pipe, at a position or an offset.  From
 * the sealed source the library maps the file's pages instead of reading:
 * it asks for the seals (fcntl), the position (lseek, without an offset),
 * maps the run (mmap), makes its gift record (malloc) and a handle per page
 * (maybe a page-table leaf: calloc), and at the end moves the position
 * (lseek).  A failure of any but the last makes it read into pool pages
 * instead, as from an unsealed file (a whole call's pages, no lead); the
 * last one fails the call with nothing moved and the run unmapped.
 */
static void zc_op_from_fd(void)
{
	struct zm_pipe *p = zc_pick(ZM_W);
	if (!p)
		return;
	int src = (int)rnd(3);
	size_t len = zc_len();
	off_t off = rnd(FR_SIZE + 2 * PG), off0 = off, pos = src == 0 ? zc.fr_pos : off;
	if (src == 2 && zc.kp_len < KP_MAX / 2 && rnd(4)) {
		/* Something to read in the kernel pipe. */
		size_t add = 1 + rnd(KP_MAX / 2 - 1);
		memcpy(zc.kp_data + zc.kp_len, pat + rnd(PAT_LEN), add);
		/* It takes what fits (a kernel pipe counts buffers, not bytes). */
		ssize_t w = write(zc.kp[1], zc.kp_data + zc.kp_len, add);
		CHECK(w > 0 || errno == EAGAIN);
		zc.kp_len += w > 0 ? (size_t)w : 0;
	}
	bool mapped = zc.sealed && src != 2;
	size_t avail = src == 2 ? zc.kp_len : (pos < (off_t)FR_SIZE ? FR_SIZE - (size_t)pos : 0);
	int eerr = 0;
	bool wait, sig;
	/* want: read into pool pages; mwant: the file's pages mapped, the
	 * first from pos's place in its page. */
	long pwant = zm_fill_predict(p, len, &eerr, &wait, &sig), want = pwant;
	long mwant = mapped ? zm_fill_map_predict(p, len, (uint32_t)(pos % PG), &eerr, &wait, &sig)
	                    : pwant;
	if (want > 0 && !avail) {
		if (src == 2) {
			want = -1; /* an empty kernel pipe with a writer */
			eerr = EAGAIN;
		} else {
			want = 0; /* end of file */
		}
		mwant = want;
	} else if (want > 0) {
		want = (long)min_sz((size_t)want, avail);
		mwant = (long)min_sz((size_t)mwant, avail);
	}
	int fd = src == 2 ? zc.kp[0] : zc.fr;
	snprintf(g_op, sizeof g_op, "pp_splice_from_fd %s%s%s -> pipe %u, %zu bytes at %lld (%zu "
	         "there; expect %ld)", src == 2 ? "kernel pipe" : "file", src == 1 ? " offset" : "",
	         mapped ? " sealed" : "", p->id, len, (long long)pos, avail, mapped ? mwant : want);
	unsigned long injected = fi.injected;
	fi.tag = FILE_TAG;
	ssize_t r = ARMED(pp_splice_from_fd(fd, src == 1 ? &off : NULL, p->end[ZM_W], len, 0));
	int err = errno;
	fi.tag = 0;
	unsigned m = fi.op_mask;
	bool one = fi.injected - injected == 1; /* one failure in this call */
	/* The mapping given up for reading (a failure before it was done), or
	 * the position not moved after it (lseek fails with EOVERFLOW). */
	unsigned map_bits = FI_BIT(FI_FCNTL) | FI_BIT(FI_LSEEK) | FI_ALLOC_BITS;
	bool seek_failed = mapped && src == 0 && (m & FI_BIT(FI_LSEEK)) && r == -1 && err == EOVERFLOW;
	bool file_pages = mapped && !(m & map_bits);
	/* The eventfds are refreshed once the pipe had room for the call and
	 * the descriptor passed the checks. */
	bool refreshed = pwant > 0 && !(m & FI_BIT(FI_FSTAT)) && !(src == 1 && (m & FI_BIT(FI_LSEEK)));
	if (m & FI_BIT(FI_FSTAT)) {
		CHECK_EQ(r, -1); /* reported as a bad descriptor */
		CHECK_EQ(err, EBADF);
	} else if ((m & FI_BIT(FI_LSEEK)) && src == 1) {
		CHECK_EQ(r, -1); /* reported as a descriptor that cannot seek */
		CHECK_EQ(err, EINVAL);
	} else if (seek_failed) {
		/* Mapped, and then the position could not be moved: nothing went
		 * in, nothing is left mapped (checked with the state). */
		CHECK(mwant > 0);
		CHECK_EQ(m & (FI_BIT(FI_FCNTL) | FI_ALLOC_BITS | FI_BIT(FI_READV)), 0);
	} else if (file_pages) {
		/* Mapped: no page, no read, the count exactly. */
		CHECK_EQ(r, mwant);
		if (mwant < 0)
			CHECK_EQ(err, eerr);
		CHECK_EQ(m & FI_BIT(FI_READV), 0);
	} else if (mapped && one && !(m & FI_BIT(FI_READV))) {
		/* The mapping failed; the read that replaced it did not. */
		CHECK(pwant > 0);
		CHECK_EQ(r, want);
	} else if ((m & FI_BIT(FI_LSEEK)) && !mapped) {
		CHECK(0); /* an unsealed file or a pipe is not asked for its position */
	} else if ((m & FI_BIT(FI_READV)) && !(fi.op_short & FI_BIT(FI_READV))) {
		CHECK_EQ(r, -1); /* the descriptor's error, as it is */
		CHECK_EQ(err, fi.op_kind_errno[FI_READV]);
	} else if (m & FI_ALLOC_BITS) {
		/* No page: ENOMEM.  Fewer pages: the descriptor's answer for
		 * less, a whole number of pages (or all there was). */
		CHECK(pwant > 0);
		if (r < 0 && err == ENOMEM)
			;
		else if (want <= 0)
			CHECK(r == want && (want == 0 || err == eerr));
		else
			CHECK(r > 0 && r <= want &&
			      (r == want || r % PG == 0 || (fi.op_short & FI_BIT(FI_READV))));
	} else if (fi.op_short & FI_BIT(FI_READV)) {
		/* The descriptor was asked for less: it gave less, or all it had. */
		if (r != want)
			CHECK(want > 0 && r > 0 && r < want);
	} else {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	}
	if (r > 0) {
		if (file_pages)
			CHECK(zm_fill_apply_file(p, pat + zc.fr_src, (uint64_t)pos, (size_t)r));
		else
			CHECK(zm_fill_apply(p, zc_src_bytes(src, pos), (size_t)r));
		if (src == 0)
			zc.fr_pos += r;
		if (src == 2) {
			memmove(zc.kp_data, zc.kp_data + r, zc.kp_len - (size_t)r);
			zc.kp_len -= (size_t)r;
		}
	}
	if (src == 1)
		CHECK_EQ(off, off0 + (r > 0 ? r : 0)); /* advanced by the count */
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, refreshed);
}

static void zc_op_to_fd(void)
{
	struct zm_pipe *p = zc_pick(ZM_R);
	if (!p)
		return;
	int dst = (int)rnd(3);
	size_t len = zc_len();
	if (zc.fw_size > FW_MAX) { /* start the sink file again */
		CHECK_EQ(ftruncate(zc.fw, 0), 0);
		CHECK_EQ(lseek(zc.fw, 0, SEEK_SET), 0);
		zc.fw_size = 0;
		zc.fw_pos = 0;
	}
	if (dst == 2) {
		zc_drain_kp();
		len = min_sz(len, KP_MAX);
	}
	off_t off = rnd((uint32_t)zc.fw_size + PG), off0 = off, pos = dst == 0 ? zc.fw_pos : off;
	int eerr = 0;
	bool wait;
	long want = zm_drain_predict(p, len, &eerr, &wait);
	int fd = dst == 2 ? zc.kp[1] : zc.fw;
	snprintf(g_op, sizeof g_op, "pp_splice_to_fd pipe %u -> %s%s, %zu bytes at %lld (expect %ld)",
	         p->id, dst == 2 ? "kernel pipe" : "file", dst == 1 ? " offset" : "", len,
	         (long long)pos, want);
	ssize_t r = ARMED(pp_splice_to_fd(p->end[ZM_R], fd, dst == 1 ? &off : NULL, len, 0));
	int err = errno;
	unsigned m = fi.op_mask;
	if (m & FI_BIT(FI_FSTAT)) {
		CHECK_EQ(r, -1);
		CHECK_EQ(err, EBADF);
	} else if (m & FI_BIT(FI_LSEEK)) {
		CHECK_EQ(r, -1);
		CHECK_EQ(err, EINVAL);
		CHECK_EQ(dst, 1);
	} else if ((m & FI_BIT(FI_WRITEV)) && !(fi.op_short & FI_BIT(FI_WRITEV))) {
		CHECK_EQ(r, -1); /* the descriptor's error; the pipe keeps its bytes */
		CHECK_EQ(err, fi.op_kind_errno[FI_WRITEV]);
		CHECK(want > 0);
	} else if (fi.op_short & FI_BIT(FI_WRITEV)) {
		CHECK(want > 0 && r > 0 && r < want); /* the descriptor took less */
	} else {
		/* A failed fcntl (the O_APPEND check) is let go: not an error. */
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	}
	if (r > 0) {
		zm_drop(p, (size_t)r, zc_exp); /* exactly what the descriptor took */
		if (dst == 2) {
			memcpy(zc.kp_data, zc_exp, (size_t)r);
			zc.kp_len = (size_t)r;
			zc_drain_kp();
		} else {
			if ((size_t)pos > zc.fw_size)
				memset(zc.fw_data + zc.fw_size, 0, (size_t)pos - zc.fw_size); /* a hole */
			memcpy(zc.fw_data + pos, zc_exp, (size_t)r);
			if ((size_t)pos + (size_t)r > zc.fw_size)
				zc.fw_size = (size_t)pos + (size_t)r;
			if (dst == 0)
				zc.fw_pos += r;
		}
	}
	if (dst == 1)
		CHECK_EQ(off, off0 + (r > 0 ? r : 0));
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, r > 0);
}

static void zc_op_peek_consume(void)
{
	struct zm_pipe *p = zc_pick(ZM_R);
	if (!p)
		return;
	struct iovec iov[9];
	int max = (int)rnd(9);
	long want = !max ? 0 : !p->count ? (p->end[ZM_W] ? -1 : 0) : (long)min_sz((size_t)max, p->count);
	snprintf(g_op, sizeof g_op, "pp_peek pipe %u, max %d (expect %ld)", p->id, max, want);
	ssize_t r = ARMED(pp_peek(p->end[ZM_R], iov, max));
	int err = errno;
	CHECK_EQ(r, want);
	if (want < 0)
		CHECK_EQ(err, EAGAIN);
	CHECK_EQ(fi.op_calls, 0); /* peeking calls nothing */
	for (int i = 0; i < (int)r; i++) {
		struct zm_slot *s = zm_slot(p, (uint32_t)i);
		CHECK_EQ(iov[i].iov_len, s->len);
		CHECK(iov[i].iov_len == s->len &&
		      memcmp(iov[i].iov_base, zm_pages[s->pg].bytes + s->off, s->len) == 0);
	}
	size_t n;
	switch (rnd(4)) {
	case 0: n = p->bytes; break;
	case 1: n = p->bytes + 1 + rnd(100); break; /* more than there: EINVAL */
	case 2: n = r > 0 ? iov[0].iov_len : 0; break;
	default: n = rnd((uint32_t)p->bytes + 1); break;
	}
	bool ok = n <= p->bytes;
	snprintf(g_op, sizeof g_op, "pp_consume pipe %u, %zu of %llu bytes", p->id, n,
	         (unsigned long long)p->bytes);
	r = ARMED(pp_consume(p->end[ZM_R], n));
	err = errno;
	CHECK_EQ(r, ok ? (long)n : -1);
	if (!ok)
		CHECK_EQ(err, EINVAL);
	if (ok)
		zm_drop(p, n, NULL);
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, ok);
}

static void zc_op_fd(void)
{
	int side = (int)rnd(2);
	struct zm_pipe *p = zc_pick(side);
	if (!p)
		return;
	snprintf(g_op, sizeof g_op, "pp_fd pipe %u side %d (have %d)", p->id, side, p->efd[side]);
	int fd = ARMED(pp_fd(p->end[side]));
	int err = errno;
	struct zm_pipe *t[1] = { p };
	if (p->efd[side] >= 0) {
		CHECK_EQ(fd, p->efd[side]);
		CHECK_EQ(fi.op_calls, 0);
		return;
	}
	if (fi.op_mask & FI_BIT(FI_EVENTFD)) {
		CHECK_EQ(fd, -1);
		CHECK_EQ(err, fi.op_kind_errno[FI_EVENTFD]);
		return;
	}
	CHECK(fd >= 0 && fi_fd_index(fd) >= 0);
	if (fd >= 0)
		p->efd[side] = fd;
	zc_after(t, 1, true);
}

static void zc_op_setsize(void)
{
	static const size_t sizes[] = { 1, 4096, 8192, 16384, 32768, 65536, 131072 };
	int side = (int)rnd(2);
	struct zm_pipe *p = zc_pick(side);
	if (!p)
		return;
	size_t size = sizes[rnd(sizeof sizes / sizeof sizes[0])];
	int eerr = 0;
	long want = zm_setsize_predict(p, size, pp_getmaxsize(), &eerr);
	snprintf(g_op, sizeof g_op, "pp_setsize pipe %u to %zu (%u/%u slots; expect %ld)", p->id,
	         size, p->count, p->cap, want);
	long r = ARMED(pp_setsize(p->end[side], size));
	int err = errno;
	if (fi.op_mask & FI_BIT(FI_CALLOC)) {
		CHECK(want > 0 && want / PG != p->cap); /* a new slot array */
		CHECK_EQ(r, -1);
		CHECK_EQ(err, ENOMEM);
	} else {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	}
	if (r > 0)
		p->cap = (uint32_t)(r / PG);
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, r > 0);
}

static void zc_close(struct zm_pipe *p, int side)
{
	snprintf(g_op, sizeof g_op, "pp_close pipe %u side %d", p->id, side);
	int efd = p->efd[side];
	CHECK_EQ(ARMED(pp_close(p->end[side])), 0);
	if (efd >= 0)
		CHECK_EQ(fi_fd_index(efd), -1); /* its eventfd really closed */
	bool stale = fi.op_mask & FI_EFDIO_BITS;
	zm_close(p, side);
	if (p->live)
		p->stale = stale; /* the other side's descriptor was refreshed */
}

static void zc_op_close(void)
{
	int side = (int)rnd(2);
	struct zm_pipe *p = zc_pick(side);
	if (p)
		zc_close(p, side);
}

static void zc_check_empty(void)
{
	for (int i = 0; i < ZP; i++)
		CHECK(!zm_p[i].live);
	zm_check_gifts();
	CHECK_EQ(zm_gifts_pending(), 0); /* every release came */
	CHECK_EQ(zm_in_use, 0);
	CHECK_EQ(fi_live_mallocs(GIFT_TAG), 0);
	CHECK_EQ(zm_file_pages(), 0);
	CHECK_EQ(fi_live_mallocs(FILE_TAG), 0);
	CHECK_EQ(memfd_mapped("fi-src", NULL), 0); /* every run of the file unmapped, none missed */
	check_empty();
}

/*
 * Ballast, made before the workload with nothing armed and kept to its
 * end: pipes holding vmsplice'd one-byte chunks, one page handle each,
 * 1021 of them.  The pool's first page-table leaf has handles 1..1023, so
 * the workload's first call, a pp_vmsplice of a three-chunk segment, needs
 * a new leaf (calloc) for its third chunk: a failure point in the middle
 * of a segment, whose first two chunks went in and are released later.
 * (Without ballast the leaf comes with the first page of all and its
 * failure is always at the start of a call.)  These handles are not pool
 * pages: pages_in_use does not count them.
 */
#define BALLAST 1021
static struct pp_end *zc_ballast[4][2];
static unsigned char zc_ballast_mem[256];

static void zc_ballast_make(void)
{
	struct iovec iov[256];
	for (int i = 0; i < 256; i++)
		iov[i] = (struct iovec){ zc_ballast_mem + i, 1 };
	int left = BALLAST;
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(pp_pipe(zc_ballast[i], PP_NONBLOCK), 0);
		CHECK_EQ(pp_setsize(zc_ballast[i][1], 256 * PG), 256 * PG);
		int n = left < 256 ? left : 256;
		CHECK_EQ(pp_vmsplice(zc_ballast[i][1], iov, (unsigned long)n, 0, NULL, NULL), n);
		left -= n;
	}
}

static void zc_ballast_drop(void)
{
	for (int i = 0; i < 4; i++)
		for (int s = 0; s < 2; s++)
			CHECK_EQ(pp_close(zc_ballast[i][s]), 0);
}

static void zc_run_phase(void)
{
	zm_reset();
	zc.arena_used = 0;
	zc.fr = memfd_create("fi-src", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	zc.fw = memfd_create("fi-sink", MFD_CLOEXEC);
	CHECK(zc.fr >= 0 && zc.fw >= 0 && pipe2(zc.kp, O_NONBLOCK | O_CLOEXEC) == 0);
	zc.fr_src = rnd(PAT_LEN - FR_SIZE);
	CHECK_EQ(pwrite(zc.fr, pat + zc.fr_src, FR_SIZE, 0), FR_SIZE);
	/* Odd phases: the source sealed against shrinking, its pages mapped. */
	zc.sealed = g_phase % 2 == 1;
	if (zc.sealed)
		CHECK_EQ(fcntl(zc.fr, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	zc.fr_pos = zc.fw_pos = 0;
	zc.fw_size = zc.kp_len = 0;

	g_opno = 0;
	for (int i = 0; i < ZP; i++) {
		bool packet = rnd(4) == 0;
		int flags = PP_NONBLOCK | PP_NOSIGPIPE | (packet ? PP_PACKET : 0);
		struct pp_end *ends[2] = { NULL, NULL };
		snprintf(g_op, sizeof g_op, "pp_pipe %d (flags 0x%x)", i, flags);
		int r = ARMED(pp_pipe(ends, flags));
		int err = errno;
		if (fi.op_mask & FI_ALLOC_BITS) {
			CHECK_EQ(r, -1);
			CHECK_EQ(err, ENOMEM);
			zm_p[i].live = false;
			zm_pipes_made++;
		} else {
			CHECK_EQ(r, 0);
			CHECK_EQ(fi.op_mask, 0);
			if (!r)
				zm_pipe_init(&zm_p[i], ends, packet);
		}
		zc_check_state();
		note_failure();
	}

	if (g_phase == 0) {
		g_opno = 0;
		zc_op_vmsplice(true);
		zc_check_state();
		note_failure();
	}
	int nops = g_stop_phase == g_phase ? 8 : 30 + (int)rnd(20);
	for (g_opno = 1; g_opno <= (unsigned)nops; g_opno++) {
		uint32_t c = rnd(100);
		if (c < 12)
			zc_op_write();
		else if (c < 21)
			zc_op_read();
		else if (c < 32)
			zc_op_xfer(0);
		else if (c < 40)
			zc_op_xfer(1);
		else if (c < 48)
			zc_op_xfer(2);
		else if (c < 58)
			zc_op_vmsplice(false);
		else if (c < 68)
			zc_op_from_fd();
		else if (c < 78)
			zc_op_to_fd();
		else if (c < 84)
			zc_op_peek_consume();
		else if (c < 92)
			zc_op_fd();
		else if (c < 96)
			zc_op_setsize();
		else if (c < 98)
			zc_op_close();
		else
			zc_op_same_pipe();
		zc_check_state();
		note_failure();
	}

	/* The end: drain some pipes by reading, close the others with data
	 * (and gifts) in them, in random side order. */
	for (int i = 0; i < ZP; i++) {
		struct zm_pipe *p = &zm_p[i];
		if (!p->live)
			continue;
		if (rnd(2) && p->end[ZM_R]) {
			for (int k = 0; k < 600 && p->count; k++) {
				size_t count = 1 + rnd(MAXIO);
				int eerr;
				bool wait;
				long want = zm_read_predict(p, count, &eerr, &wait);
				snprintf(g_op, sizeof g_op, "draining pp_read pipe %u, %zu (expect %ld)",
				         p->id, count, want);
				ssize_t r = ARMED(pp_read(p->end[ZM_R], rscratch, count));
				CHECK_EQ(r, want);
				if (r > 0) {
					CHECK_EQ(zm_read_apply(p, count, zc_exp), r);
					CHECK(memcmp(rscratch, zc_exp, (size_t)r) == 0);
				}
				struct zm_pipe *t[1] = { p };
				zc_after(t, 1, true);
				zc_check_state();
				note_failure();
			}
		}
		int first = (int)rnd(2);
		for (int s = 0; s < 2; s++) {
			int side = s ? 1 - first : first;
			if (p->live && p->end[side]) {
				zc_close(p, side);
				zc_check_state();
				note_failure();
			}
		}
	}
	zc_check_empty();
	note_failure();
	close(zc.fr);
	close(zc.fw);
	close(zc.kp[0]);
	close(zc.kp[1]);
	zc.fr = zc.fw = zc.kp[0] = zc.kp[1] = -1;
}

/* The two workloads: the core calls (run_phase) and the zero-copy calls
 * (zc_run_phase). */
enum workload { WL_CORE, WL_ZC };
static enum workload g_wl;
static const char *const wl_name[] = { "core", "zc" };

/* Phases of the workload: FI_PHASES, by default 10 (core) or 6 (zc, whose
 * phases have more calls and more checks) times PP_TEST_SCALE, at least 3
 * (fewer would leave out the sealed source, and kinds of failure point). */
static int workload_phases(void)
{
	long def = t_scaled(g_wl == WL_ZC ? 6 : 10), v;
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
static const char *g_prog = "build/test/fault_inject";

/* Fork mode: called in the driver at each failable call, in the child (pid
 * 0) just after the fork, and in the driver when the child has exited. */
static void on_child(pid_t pid, unsigned long n, int status)
{
	if (pid == 0) {
		alarm(10); /* alarms are not inherited; a run takes milliseconds */
		if (g_wl == WL_ZC)
			zc_private_fds();
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
	if (g_wl == WL_ZC)
		zc_ballast_make();
	for (g_phase = 0; g_phase < phases; g_phase++) {
		if (g_stop_phase >= 0 && g_phase > g_stop_phase)
			break;
		if (g_wl == WL_ZC)
			zc_run_phase();
		else
			run_phase();
		/* One call failed: finish this phase and run one more. */
		if (fi.fail_at && fi.injected && g_stop_phase < 0)
			g_stop_phase = g_phase + 1;
	}
	if (g_wl == WL_ZC)
		zc_ballast_drop();
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
	fprintf(stderr, "failable calls in the %s workload: %lu (", wl_name[g_wl], sh->ncalls);
	for (int k = 0; k < FI_NKINDS; k++)
		fprintf(stderr, "%s%s %lu", k ? ", " : "", fi_kind_name[k], sh->per_kind[k]);
	fprintf(stderr, ")\n");
	/* The workload must reach every kind of failure point it can: the
	 * core calls make no descriptor I/O but the eventfds'. */
	unsigned need = g_wl == WL_ZC ? (1u << FI_NKINDS) - 1 : (1u << (FI_CLOSE + 1)) - 1;
	for (int k = 0; k < FI_NKINDS; k++) {
		if ((need & FI_BIT(k)) && !sh->per_kind[k])
			fprintf(stderr, "  no %s call in the %s workload\n", fi_kind_name[k], wl_name[g_wl]);
		CHECK(!(need & FI_BIT(k)) || sh->per_kind[k] > 0);
		if (g_wl == WL_CORE && k > FI_CLOSE)
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
		fprintf(stderr, "%s workload, failure point %lu (%s): %s\n", wl_name[g_wl], only,
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
			        "FI_WORKLOAD=%s FI_POINT=%lu %s\n", k, fi_kind_name[sh->trace[k - 1]],
			        why, wl_name[g_wl], k, g_prog);
	}
	fprintf(stderr, "%s workload: failed each of %lu points one at a time (", wl_name[g_wl],
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
			        "FI_WORKLOAD=%s FI_EVERY=%ld %s\n", k, why, wl_name[g_wl], k, g_prog);
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
	        wl_name[g_wl], runs, failed);
	CHECK_EQ(failed, 0);
}

/* The same three on the zero-copy workload (g_wl is set by main). */
static void count_points_zc(void)
{
	count_points();
}

static void fail_each_point_zc(void)
{
	fail_each_point();
}

static void fail_every_kth_zc(void)
{
	fail_every_kth();
}

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
	/* FI_WORKLOAD=core or zc: only that one (for FI_POINT / FI_EVERY). */
	const char *only = getenv("FI_WORKLOAD");
	if (!only || !strcmp(only, "core")) {
		g_wl = WL_CORE;
		RUN(count_points);
		RUN(fail_each_point);
		RUN(fail_every_kth);
	}
	if (!only || !strcmp(only, "zc")) {
		g_wl = WL_ZC;
		RUN(count_points_zc);
		RUN(fail_each_point_zc);
		RUN(fail_every_kth_zc);
	}
	munmap(sh, sizeof *sh);
	return T_DONE();
}
