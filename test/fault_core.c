/*
 * fault_core.c - every allocation and system call of the core calls
 * (pp_pipe, pp_write/writev, pp_read/readv, pp_setsize, pp_dup, pp_close,
 * pp_fd) made to fail, one at a time and many at once (fault_sweep.h's
 * sweep): the pipe must survive, exactly as its model says.
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
 * Cases (fault_sweep.h): count_points, fail_each_point, fail_every_kth.
 */
#include "fault_sweep.h"

static unsigned char wscratch[MAXIO + 64 * 40];

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
	check_setsize(r, errno, want, eerr, m->cap);
	if (!(fi.op_mask & FI_BIT(FI_CALLOC)) && want >= 0)
		m->cap = pages;
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

/* The core workload for the sweep: it makes no descriptor I/O but the
 * eventfds', so it reaches the kinds up to close. */
static const struct workload core_workload = {
	.name = "core",
	.phases = 10,
	.kinds = FI_BIT(FI_CLOSE + 1) - 1,
	.run_phase = run_phase,
};

int main(int argc, char **argv)
{
	(void)argc;
	return fault_sweep_main(&core_workload, argv);
}
