/*
 * splice_random.h - random sequences of transfers between pipes, checked
 * step by step against a model; splice_matches_model.c runs them on
 * pagepipes, splice_matches_kernel.c on kernel pipes and pagepipes side by
 * side.
 *
 * The model holds every pipe slot by slot: each buffer names a model page
 * (with its bytes and a reference count), an offset, a length and its
 * flags (mergeable under Linux's rule, mergeable under pagepipe's,
 * packet).  From it the driver predicts the exact return value of every
 * call, the bytes every read returns (so packet boundaries and split
 * buffers are checked), pp_nread of every pipe, and the exact number of
 * pages in use: one per distinct page that some buffer still names, so a
 * tee or fanout that copied instead of sharing, or a lost or leaked
 * reference, shows at once.
 *
 * A sequence runs on 5 pipes of 1 to 64 pages (often full): writes
 * (1..200000 bytes: merges, split buffers, wrap-around), reads, pp_splice
 * / pp_tee / pp_fanout (1..4 outputs) with lengths 0, 1, around the first
 * buffer's length, small, huge and SIZE_MAX, PP_SPLICE_NONBLOCK on full
 * and empty pipes (EAGAIN), packet pipes on either side, peeks and
 * consumes, resizes (EBUSY), closed ends (0 at end of input, EPIPE and
 * SIGPIPE or not with PP_NOSIGPIPE), same-pipe and duplicate outputs and
 * unknown flags (EINVAL); and transfers followed at once by small writes
 * to every pipe involved.  Every byte read is compared with the model;
 * after every step pp_pool_stats().pages_in_use equals the model's
 * distinct pages (never more than the slots in use), and is back where it
 * started once all pipes are closed.  On kernel pipes (pipe2, splice(2)
 * with NULL offsets, tee(2)) the same kind of sequences run non-blocking,
 * and return values, errno, bytes, FIONREAD and SIGPIPE must match the
 * pagepipes' and the model's.
 *
 * The intended difference from Linux, not compared (see op_write): pagepipe
 * never appends to a page another pipe shares, nor to the rest of a buffer
 * whose front was spliced away, where Linux still merges.
 *
 * Environment:
 *   PP_SPLICE_SEED      first seed of the random sequences (default 1)
 *   PP_SPLICE_SEQS      sequences per random case (default 100; 20 under
 *                       a sanitizer; times PP_TEST_SCALE)
 *   PP_SPLICE_STEPS     operations per sequence (default 600)
 *   PP_SPLICE_VERBOSE   1: print what the random cases did (a table of
 *                       results per call); 2: also every operation
 * A failing sequence prints its seed and step and the command line that
 * replays it alone.
 */
#ifndef PP_TEST_SPLICE_RANDOM_H
#define PP_TEST_SPLICE_RANDOM_H

#include <stdarg.h>
#include <stdbool.h>

#include "splice.h"

/* ---- the model ------------------------------------------------------------ */

#define MSLOTS 256 /* model ring; more slots than any pipe here has */

struct mpage {
	int refs; /* model buffers naming it */
	unsigned char d[PG];
};
static long m_pages; /* model pages alive: what pages_in_use must be */

static inline struct mpage *mpage_new(void)
{
	struct mpage *pg = malloc(sizeof *pg);
	if (!pg)
		abort();
	pg->refs = 1;
	m_pages++;
	return pg;
}

static inline void mpage_put(struct mpage *pg)
{
	if (--pg->refs == 0) {
		free(pg);
		m_pages--;
	}
}

enum {
	MB_KMERGE = 1, /* Linux would append a write to this buffer */
	MB_PMERGE = 2, /* pagepipe's merge flag: cleared for good when shared */
	MB_PACKET = 4,
};

struct mbuf {
	struct mpage *pg;
	uint32_t off, len;
	unsigned fl;
};

struct mpipe {
	int live;            /* some end is open */
	struct pp_end *e[2]; /* the pagepipe's ends, NULL once closed */
	int kfd[2];          /* the kernel pipe's (kernel comparison), -1 once closed */
	int flags;           /* PP_* it was made with */
	uint32_t cap;        /* capacity in slots */
	uint32_t tail, n;    /* n buffers from b[tail] on, wrapping */
	struct mbuf b[MSLOTS];
};

#define M_RD(p) ((p)->e[0] != NULL)
#define M_WR(p) ((p)->e[1] != NULL)

static inline struct mbuf *m_at(struct mpipe *p, uint32_t i)
{
	return &p->b[(p->tail + i) % MSLOTS];
}

static inline void m_push(struct mpipe *p, struct mbuf b)
{
	if (p->n >= MSLOTS)
		abort();
	*m_at(p, p->n) = b;
	p->n++;
}

/* Drop the first buffer; the caller has dealt with its page reference. */
static inline void m_pop(struct mpipe *p)
{
	p->tail = (p->tail + 1) % MSLOTS;
	p->n--;
}

static inline size_t m_bytes(struct mpipe *p)
{
	size_t s = 0;
	for (uint32_t i = 0; i < p->n; i++)
		s += m_at(p, i)->len;
	return s;
}

static inline void m_clear(struct mpipe *p)
{
	while (p->n) {
		mpage_put(m_at(p, 0)->pg);
		m_pop(p);
	}
}

/* Would a write of len bytes put its first len % PG bytes into the last
 * buffer?  Under Linux's rule (kernel) or pagepipe's, which also wants the
 * page to be the pipe's alone. */
static inline int m_merges(struct mpipe *p, size_t len, int kernel)
{
	size_t chars = len % PG;
	if (!chars || !p->n)
		return 0;
	struct mbuf *l = m_at(p, p->n - 1);
	if (l->off + l->len + chars > PG)
		return 0;
	if (kernel)
		return (l->fl & MB_KMERGE) != 0;
	return (l->fl & MB_PMERGE) != 0;
}

/* A non-blocking write.  *sig: the call raises SIGPIPE (unless NOSIGPIPE). */
static inline long m_write(struct mpipe *p, const unsigned char *src, size_t len, int *sig)
{
	size_t done = 0;
	*sig = 0;
	if (!len)
		return 0;
	if (!M_RD(p)) {
		*sig = 1;
		return -EPIPE;
	}
	if (m_merges(p, len, 0)) {
		struct mbuf *l = m_at(p, p->n - 1);
		done = len % PG;
		memcpy(l->pg->d + l->off + l->len, src, done);
		l->len += (uint32_t)done;
	}
	while (done < len && p->n < p->cap) {
		size_t take = min_sz(PG, len - done);
		struct mpage *pg = mpage_new();
		memcpy(pg->d, src + done, take);
		m_push(p, (struct mbuf){ pg, 0, (uint32_t)take,
		                         (p->flags & PP_PACKET) ? MB_PACKET
		                                                : MB_KMERGE | MB_PMERGE });
		done += take;
	}
	return done ? (long)done : -EAGAIN;
}

/* A non-blocking read into out. */
static inline long m_read(struct mpipe *p, unsigned char *out, size_t count)
{
	size_t got = 0;
	if (!count)
		return 0;
	if (!p->n)
		return M_WR(p) ? -EAGAIN : 0;
	while (p->n && got < count) {
		struct mbuf *b = m_at(p, 0);
		size_t take = min_sz(b->len, count - got);
		int packet = b->fl & MB_PACKET;
		memcpy(out + got, b->pg->d + b->off, take);
		got += take;
		b->off += (uint32_t)take;
		b->len -= (uint32_t)take;
		if (packet)
			b->len = 0; /* the rest of a packet is discarded */
		if (!b->len) {
			mpage_put(b->pg);
			m_pop(p);
		}
		if (packet)
			break;
	}
	return (long)got;
}

/*
 * The checks before a transfer, in the order pagepipe and Linux make them:
 * an empty input with a writer waits; a full output waits (EPIPE if it has
 * no reader); an output without reader is EPIPE; an empty input without
 * writer is end of input.  Every end in the random drivers has
 * PP_NONBLOCK, so waiting is EAGAIN here.  Returns 1 to go
 * on with the transfer, else 0 with *res set; *sigi: the output whose
 * EPIPE raises SIGPIPE.
 */
static inline int m_prep(struct mpipe *in, struct mpipe **outs, int n, long *res, int *sigi)
{
	*sigi = -1;
	if (!in->n && M_WR(in)) {
		*res = -EAGAIN;
		return 0;
	}
	for (int i = 0; i < n; i++)
		if (outs[i]->n >= outs[i]->cap) {
			if (!M_RD(outs[i])) {
				*sigi = i;
				*res = -EPIPE;
			} else {
				*res = -EAGAIN;
			}
			return 0;
		}
	for (int i = 0; i < n; i++)
		if (!M_RD(outs[i])) {
			*sigi = i;
			*res = -EPIPE;
			return 0;
		}
	if (!in->n) {
		*res = 0;
		return 0;
	}
	return 1;
}

/*
 * The transfer itself (after m_prep said go): up to len bytes, one output
 * slot per buffer, at most the free slots of the fullest output.  A whole
 * buffer spliced to one pipe moves with its flags (Linux and pagepipe both
 * let it take merges there); every other case shares the page and the copy
 * is not mergeable.  What stays in `in` (the rest of a split buffer, a tee'd
 * buffer) stays mergeable for Linux but not for pagepipe, even once the
 * copies are gone.  (These pagepipe rules, and m_merges trusting the merge
 * flag alone, follow src/splice.c and pp_write; the exact page and slot
 * counts depend on them, so a deliberate change there needs the same change
 * here.)
 */
static inline long m_xfer(struct mpipe *in, struct mpipe **outs, int n, size_t len, int consume)
{
	uint32_t room = UINT32_MAX, cur = 0;
	size_t done = 0;
	for (int i = 0; i < n; i++)
		if (outs[i]->cap - outs[i]->n < room)
			room = outs[i]->cap - outs[i]->n;
	while (done < len && room && cur < in->n) {
		struct mbuf *b = m_at(in, cur);
		size_t take = min_sz(b->len, len - done);
		int whole = take == b->len;
		int moved = consume && whole && n == 1;
		struct mbuf nb = *b;
		nb.len = (uint32_t)take;
		if (!moved) {
			nb.fl &= ~(unsigned)(MB_KMERGE | MB_PMERGE);
			b->fl &= ~(unsigned)MB_PMERGE; /* pagepipe: shared for good */
		}
		for (int i = 0; i < n; i++) {
			if (!moved)
				nb.pg->refs++;
			m_push(outs[i], nb);
		}
		if (consume) {
			if (whole) {
				if (!moved)
					mpage_put(b->pg);
				m_pop(in);
			} else {
				b->off += (uint32_t)take;
				b->len -= (uint32_t)take;
			}
		} else if (whole) {
			cur++;
		}
		done += take;
		room--;
	}
	return (long)done;
}

static inline long m_consume(struct mpipe *p, size_t n)
{
	if (n > m_bytes(p))
		return -EINVAL;
	size_t left = n;
	while (left) {
		struct mbuf *b = m_at(p, 0);
		size_t take = min_sz(b->len, left);
		b->off += (uint32_t)take;
		b->len -= (uint32_t)take;
		left -= take;
		if (!b->len) {
			mpage_put(b->pg);
			m_pop(p);
		}
	}
	return (long)n;
}

static inline uint32_t pages_for(size_t size)
{
	uint32_t p = 1;
	while ((size_t)p * PG < size)
		p <<= 1;
	return p;
}

static inline long m_setsize(struct mpipe *p, size_t size)
{
	uint32_t pages = pages_for(size);
	if (pages < p->n)
		return -EBUSY;
	p->cap = pages;
	return (long)pages * PG;
}

/* ---- the random drivers ------------------------------------------------ */

#define NPIPES 5
#define POOLSZ (512u * 1024)

static unsigned char *g_pool; /* random bytes, where writes take their data */
static unsigned char *g_exp, *g_got, *g_kgot;

struct world {
	int kernel; /* run kernel pipes alongside and compare */
	int verbose;
	int failed;
	uint64_t seed;
	long step;
	long base_pages;
	struct rng r;
	char what[200]; /* the operation under way, for messages */
	struct mpipe p[NPIPES];
};

static int g_reports; /* failures printed so far in this case */

/* What the random cases did, printed with PP_SPLICE_VERBOSE: per kind of
 * call, how often it returned each kind of result. */
enum { H_WRITE, H_READ, H_SPLICE, H_TEE, H_FANOUT, H_PEEK, H_CONSUME, H_SETSIZE, H_KINDS };
enum { R_ALL, R_PART, R_ZERO, R_EAGAIN, R_EPIPE, R_EINVAL, R_EBUSY, R_KINDS };
static long g_hist[H_KINDS][R_KINDS];
static long g_adjusted; /* writes made whole pages to avoid the merge difference */

/* Count a call's outcome: asked for `want` bytes, the model said r. */
static inline void hist(int kind, long r, size_t asked)
{
	int k = r == -EAGAIN ? R_EAGAIN : r == -EPIPE ? R_EPIPE : r == -EINVAL ? R_EINVAL
	      : r == -EBUSY ? R_EBUSY : r < 0 ? R_EINVAL : r == 0 ? R_ZERO
	      : (size_t)r >= asked ? R_ALL : R_PART;
	g_hist[kind][k]++;
}

static inline void hist_print(void)
{
	static const char *const kn[] = { "write", "read", "splice", "tee", "fanout",
		                          "peek", "consume", "setsize" };
	fprintf(stderr, "%-8s %8s %8s %8s %8s %8s %8s %8s\n", "", "all", "part", "zero", "EAGAIN",
	        "EPIPE", "EINVAL", "EBUSY");
	for (int i = 0; i < H_KINDS; i++) {
		fprintf(stderr, "%-8s", kn[i]);
		for (int j = 0; j < R_KINDS; j++)
			fprintf(stderr, " %8ld", g_hist[i][j]);
		fputc('\n', stderr);
	}
	fprintf(stderr, "writes made whole pages (kernel merge difference): %ld\n", g_adjusted);
	memset(g_hist, 0, sizeof g_hist);
	g_adjusted = 0;
}

static inline void w_fail(struct world *w, const char *fmt, ...)
{
	va_list ap;
	t_case_failed = 1;
	if (g_reports++ > 12) {
		w->failed = 1;
		return;
	}
	if (!w->failed)
		fprintf(stderr, "%s: seed %llu, step %ld: %s\n",
		        w->kernel ? "random_vs_kernel" : "random_model",
		        (unsigned long long)w->seed, w->step, w->what);
	fputs("    ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	w->failed = 1;
}

/* Compare a call's result with the model's and, in kernel mode, the
 * kernel's (kres/ksig ignored otherwise). */
static inline void w_cmp(struct world *w, long got, int gsig, long want, int wsig, long kres, int ksig)
{
	char a[64], b[64], c[64];
	if (w->kernel && (kres != got || ksig != gsig)) {
		w_fail(w, "differs from the kernel: kernel %s%s, pagepipe %s%s (model %s)",
		       res_str(kres, a, sizeof a), ksig ? " +SIGPIPE" : "",
		       res_str(got, b, sizeof b), gsig ? " +SIGPIPE" : "",
		       res_str(want, c, sizeof c));
		return;
	}
	if (got != want)
		w_fail(w, "returned %s, model says %s", res_str(got, a, sizeof a),
		       res_str(want, b, sizeof b));
	if (gsig != wsig)
		w_fail(w, "SIGPIPE %s, model says %s", gsig ? "raised" : "not raised",
		       wsig ? "raised" : "not raised");
}

static inline void w_verbose(struct world *w)
{
	if (w->verbose > 1)
		fprintf(stderr, "[%llu:%ld] %s\n", (unsigned long long)w->seed, w->step, w->what);
}

static inline void w_open(struct world *w, int i)
{
	static const size_t sizes[] = { 4096, 8192, 8192, 16384, 65536, 262144 };
	struct mpipe *p = &w->p[i];
	int fl = PP_NONBLOCK;
	if (below(&w->r, 4) == 0)
		fl |= PP_PACKET;
	/* The kernel always raises SIGPIPE: PP_NOSIGPIPE only without it. */
	if (!w->kernel && below(&w->r, 2))
		fl |= PP_NOSIGPIPE;
	p->flags = fl;
	p->tail = p->n = 0;
	p->cap = 16;
	p->kfd[0] = p->kfd[1] = -1;
	p->e[0] = p->e[1] = NULL;
	if (pp_pipe(p->e, fl)) {
		w_fail(w, "pp_pipe: %s", strerror(errno));
		return;
	}
	if (w->kernel &&
	    pipe2(p->kfd, O_NONBLOCK | O_CLOEXEC | ((fl & PP_PACKET) ? O_DIRECT : 0))) {
		w_fail(w, "pipe2: %s", strerror(errno));
		return;
	}
	p->live = 1;
	size_t sz = sizes[below(&w->r, sizeof sizes / sizeof sizes[0])];
	snprintf(w->what, sizeof w->what, "open pipe %d (%s%s, %zu bytes)", i,
	         (fl & PP_PACKET) ? "packet" : "stream", (fl & PP_NOSIGPIPE) ? ", nosigpipe" : "",
	         sz);
	w_verbose(w);
	long want = m_setsize(p, sz);
	long got = tp_res(pp_setsize(p->e[1], sz));
	long k = w->kernel ? tp_res(fcntl(p->kfd[1], F_SETPIPE_SZ, (int)sz)) : 0;
	w_cmp(w, got, 0, want, 0, k, 0);
}

static inline void w_close_end(struct world *w, int i, int side)
{
	struct mpipe *p = &w->p[i];
	if (pp_close(p->e[side]))
		w_fail(w, "pp_close: %s", strerror(errno));
	p->e[side] = NULL;
	if (w->kernel && p->kfd[side] >= 0) {
		close(p->kfd[side]);
		p->kfd[side] = -1;
	}
	if (!p->e[0] && !p->e[1]) {
		m_clear(p);
		p->live = 0;
	}
}

/* A random pipe with `side` open (-1: any live pipe), or -1. */
static inline int w_pick(struct world *w, int side)
{
	int c[NPIPES], n = 0;
	for (int i = 0; i < NPIPES; i++)
		if (w->p[i].live && (side < 0 || w->p[i].e[side]))
			c[n++] = i;
	return n ? c[below(&w->r, (size_t)n)] : -1;
}

/* After every step: pp_nread (and FIONREAD) of every pipe, and the pages. */
static inline void w_check(struct world *w)
{
	long slots = 0;
	for (int i = 0; i < NPIPES; i++) {
		struct mpipe *p = &w->p[i];
		if (!p->live)
			continue;
		int side = p->e[0] ? 0 : 1;
		long want = (long)m_bytes(p);
		long got = pp_nread(p->e[side]);
		if (got != want)
			w_fail(w, "pp_nread(pipe %d) = %ld, model %ld", i, got, want);
		if (w->kernel) {
			int kn = -1;
			ioctl(p->kfd[side], FIONREAD, &kn);
			if (kn != want)
				w_fail(w, "FIONREAD(kernel pipe %d) = %d, model %ld", i, kn, want);
		}
		slots += p->n;
	}
	long in_use = tp_pages_in_use() - w->base_pages;
	if (in_use != m_pages)
		w_fail(w, "pages_in_use %ld, but the pipes' buffers name %ld distinct pages", in_use,
		       m_pages);
	if (in_use > slots)
		w_fail(w, "pages_in_use %ld > slots in use %ld", in_use, slots);
}

static inline size_t pick_wlen(struct rng *r)
{
	switch (below(r, 9)) {
	case 0: return 1 + below(r, 16);
	case 1: return 1 + below(r, 512);
	case 2: return PG - 2 + below(r, 5);
	case 3: return 1 + below(r, PG);
	case 4: return PG * (1 + below(r, 8));
	case 5: return 1 + below(r, 20000);
	case 6: return 1 + below(r, 200000);
	default: return 1 + below(r, 3000);
	}
}

static inline size_t pick_rlen(struct rng *r)
{
	switch (below(r, 8)) {
	case 0: return below(r, 2);
	case 1: return 1 + below(r, 64);
	case 2: return PG - 1 + below(r, 3);
	case 3: return 1 + below(r, 20000);
	case 4: return BIGBUF;
	default: return 1 + below(r, 300000);
	}
}

static inline size_t pick_xlen(struct world *w, struct mpipe *in)
{
	size_t front = in->n ? m_at(in, 0)->len : 0, all = m_bytes(in);
	switch (below(&w->r, 11)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return front > 1 ? front - 1 : 1;
	case 3: return front ? front : 1;
	case 4: return front + 1;
	case 5: return 1 + below(&w->r, 5000);
	case 6: return 1 + below(&w->r, 300000);
	case 7: return SIZE_MAX;
	case 8: return all ? all : 1;
	default: {
		/* the end of a random buffer, give or take one byte */
		size_t s = 0, k = in->n ? below(&w->r, in->n) + 1 : 0;
		for (uint32_t i = 0; i < k; i++)
			s += m_at(in, i)->len;
		s += below(&w->r, 3);
		return s > 1 ? s - 1 : 1;
	}
	}
}

/* Write len bytes to pipe i (write end open). */
static inline void op_write_to(struct world *w, int i, size_t len)
{
	struct mpipe *p = &w->p[i];
	if (w->kernel && m_merges(p, len, 1) != m_merges(p, len, 0)) {
		/*
		 * Intended difference, not compared: Linux appends to the
		 * last buffer even when its page is shared with another pipe
		 * (after a tee or fanout) or the buffer is what a splice left
		 * of it; pagepipe never does ("shared pages are never
		 * appended to").  The write would take a slot more in the
		 * pagepipe and everything after would differ by design, so
		 * write whole pages instead, which neither ever merges.
		 */
		len &= ~(size_t)(PG - 1);
		if (!len)
			len = PG;
		g_adjusted++;
	}
	const unsigned char *src = g_pool + below(&w->r, POOLSZ - len + 1);
	snprintf(w->what, sizeof w->what, "write(pipe %d, %zu)", i, len);
	w_verbose(w);
	int sig;
	long want = m_write(p, src, len, &sig);
	hist(H_WRITE, want, len);
	int wsig = sig && !(p->flags & PP_NOSIGPIPE);
	long got = tp_res(pp_write(p->e[1], src, len));
	int gsig = tp_sigpipe_taken();
	long k = 0;
	int ksig = 0;
	if (w->kernel) {
		k = tp_res(write(p->kfd[1], src, len));
		ksig = tp_sigpipe_taken();
	}
	w_cmp(w, got, gsig, want, wsig, k, ksig);
}

static inline void op_write(struct world *w)
{
	int i = w_pick(w, 1);
	if (i >= 0)
		op_write_to(w, i, pick_wlen(&w->r));
}

static inline void cmp_bytes(struct world *w, const char *who, const unsigned char *got, long n)
{
	if (n <= 0)
		return;
	for (long j = 0; j < n; j++)
		if (got[j] != g_exp[j]) {
			w_fail(w, "%s: byte %ld of %ld is 0x%02x, model 0x%02x", who, j, n, got[j],
			       g_exp[j]);
			return;
		}
}

static inline void op_read(struct world *w)
{
	int i = w_pick(w, 0);
	if (i < 0)
		return;
	struct mpipe *p = &w->p[i];
	size_t count = pick_rlen(&w->r);
	snprintf(w->what, sizeof w->what, "read(pipe %d, %zu)", i, count);
	w_verbose(w);
	long want = m_read(p, g_exp, count);
	hist(H_READ, want, count);
	long got = tp_res(pp_read(p->e[0], g_got, count));
	long k = 0;
	if (w->kernel)
		k = tp_res(read(p->kfd[0], g_kgot, count));
	w_cmp(w, got, 0, want, 0, k, 0);
	if (got == want)
		cmp_bytes(w, "pagepipe", g_got, got);
	if (w->kernel && k == want)
		cmp_bytes(w, "kernel", g_kgot, k);
}

/* Read a random pipe empty: lets shared pages go back to one owner. */
static inline void op_drain_pipe(struct world *w, int i)
{
	struct mpipe *p = &w->p[i];
	snprintf(w->what, sizeof w->what, "drain(pipe %d)", i);
	w_verbose(w);
	for (int rounds = 0; p->n && rounds < MSLOTS + 2 && !w->failed; rounds++) {
		long want = m_read(p, g_exp, BIGBUF);
		long got = tp_res(pp_read(p->e[0], g_got, BIGBUF));
		long k = w->kernel ? tp_res(read(p->kfd[0], g_kgot, BIGBUF)) : 0;
		w_cmp(w, got, 0, want, 0, k, 0);
		if (got == want)
			cmp_bytes(w, "pagepipe", g_got, got);
		if (w->kernel && k == want)
			cmp_bytes(w, "kernel", g_kgot, k);
	}
}

enum { X_SPLICE, X_TEE, X_FANOUT };

static inline void op_drain(struct world *w)
{
	int i = w_pick(w, 0);
	if (i >= 0)
		op_drain_pipe(w, i);
}

/* The pipes of the last transfer, for op_combo. */
struct xfer_pipes {
	int src, n, o[4];
	long res;
};

static inline void op_xfer(struct world *w, int kind, struct xfer_pipes *xp)
{
	static const char *const names[] = { "splice", "tee", "fanout" };
	static const unsigned flagsets[] = {
		0, PP_SPLICE_NONBLOCK, PP_SPLICE_NONBLOCK, PP_SPLICE_MOVE, PP_SPLICE_MORE,
		PP_SPLICE_GIFT, PP_SPLICE_MOVE | PP_SPLICE_NONBLOCK | PP_SPLICE_MORE | PP_SPLICE_GIFT,
	};
	int src = w_pick(w, 0);
	if (src < 0)
		return;
	struct mpipe *in = &w->p[src];
	int n = kind == X_FANOUT ? 1 + (int)below(&w->r, 4) : 1;
	int cand[NPIPES], nc = 0, o[4];
	for (int i = 0; i < NPIPES; i++)
		if (i != src && w->p[i].live && w->p[i].e[1])
			cand[nc++] = i;
	int bad = 0; /* EINVAL expected */
	if (in->e[1] && below(&w->r, 25) == 0) {
		/* the input's own write end among the outputs */
		n = 1;
		o[0] = src;
		bad = 1;
	} else {
		if (n > nc)
			n = nc;
		if (!n)
			return;
		for (int i = 0; i < n; i++) {
			size_t j = below(&w->r, (size_t)(nc - i));
			o[i] = cand[j];
			cand[j] = cand[nc - i - 1];
		}
		if (kind == X_FANOUT && n > 1 && below(&w->r, 20) == 0) {
			o[n - 1] = o[0]; /* the same pipe twice */
			bad = 1;
		}
	}
	struct mpipe *mo[4];
	for (int i = 0; i < n; i++)
		mo[i] = &w->p[o[i]];
	size_t len = pick_xlen(w, in);
	unsigned flags = flagsets[below(&w->r, sizeof flagsets / sizeof flagsets[0])];
	if (below(&w->r, 40) == 0) {
		flags |= 0x10u << below(&w->r, 28); /* not a splice flag */
		bad = 1;
	}
	/* With len 0, Linux returns 0 before looking at the arguments (and tee
	 * before the descriptors); zero_length_and_check_order covers that. */
	if (bad && !len)
		len = 1;

	long want;
	int sigi = -1;
	if (bad) {
		want = -EINVAL;
	} else if (!len) {
		want = 0;
	} else {
		if (!m_prep(in, mo, n, &want, &sigi)) {
			/* A call that would wait must not: the test has a single
			 * thread.  Every end here has PP_NONBLOCK (O_NONBLOCK),
			 * which is enough, as for splice(2); half the time add
			 * PP_SPLICE_NONBLOCK too. */
			if (want == -EAGAIN && below(&w->r, 2))
				flags |= PP_SPLICE_NONBLOCK;
		} else {
			want = m_xfer(in, mo, n, len, kind != X_TEE);
		}
	}
	int wsig = sigi >= 0 && !(mo[sigi]->flags & PP_NOSIGPIPE);
	hist(H_SPLICE + kind, want, len);

	int at = snprintf(w->what, sizeof w->what, "%s(pipe %d -> pipe", names[kind], src);
	for (int i = 0; i < n && at < (int)sizeof w->what; i++)
		at += snprintf(w->what + at, sizeof w->what - (size_t)at, " %d", o[i]);
	if (at < (int)sizeof w->what)
		snprintf(w->what + at, sizeof w->what - (size_t)at, ", len %zu, flags %#x)", len,
		         flags);
	w_verbose(w);

	long got;
	if (kind == X_SPLICE) {
		got = tp_res(pp_splice(in->e[0], mo[0]->e[1], len, flags));
	} else if (kind == X_TEE) {
		got = tp_res(pp_tee(in->e[0], mo[0]->e[1], len, flags));
	} else {
		struct pp_end *oe[4];
		for (int i = 0; i < n; i++)
			oe[i] = mo[i]->e[1];
		got = tp_res(pp_fanout(in->e[0], oe, n, len, flags));
	}
	int gsig = tp_sigpipe_taken();
	long k = 0;
	int ksig = 0;
	if (w->kernel) {
		if (kind == X_SPLICE)
			k = tp_res(splice(in->kfd[0], NULL, mo[0]->kfd[1], NULL, len, flags));
		else
			k = tp_res(tee(in->kfd[0], mo[0]->kfd[1], len, flags));
		ksig = tp_sigpipe_taken();
	}
	w_cmp(w, got, gsig, want, wsig, k, ksig);
	if (xp) {
		xp->src = src;
		xp->n = n;
		memcpy(xp->o, o, sizeof o);
		xp->res = want;
	}
}

/*
 * A transfer, then perhaps the draining of one output (so the pages it
 * shared have one owner again), then small writes to the source and the
 * outputs, which would merge into the buffers the transfer shared, split
 * or moved: the moments where isolation and merging matter, too rare when
 * left to chance.
 */
static inline void op_combo(struct world *w)
{
	struct xfer_pipes xp;
	xp.res = 0;
	op_xfer(w, w->kernel ? (int)below(&w->r, 2) : (int)below(&w->r, 3), &xp);
	if (xp.res <= 0 || w->failed)
		return;
	if (below(&w->r, 2) && w->p[xp.o[0]].e[0])
		op_drain_pipe(w, xp.o[below(&w->r, (size_t)xp.n)]);
	if (!w->failed && w->p[xp.src].e[1])
		op_write_to(w, xp.src, 1 + below(&w->r, 100));
	for (int i = 0; i < xp.n && !w->failed; i++)
		if (w->p[xp.o[i]].e[1] && below(&w->r, 2))
			op_write_to(w, xp.o[i], 1 + below(&w->r, 100));
}

static inline void op_peek(struct world *w)
{
	int i = w_pick(w, 0);
	if (i < 0)
		return;
	struct mpipe *p = &w->p[i];
	struct iovec iov[70];
	int max = below(&w->r, 4) ? 1 + (int)below(&w->r, 20) : below(&w->r, 2) ? 0 : 70;
	snprintf(w->what, sizeof w->what, "peek(pipe %d, max %d)", i, max);
	w_verbose(w);
	long want = !max ? 0 : !p->n ? (M_WR(p) ? -EAGAIN : 0) : (long)min_sz(p->n, (size_t)max);
	long got = tp_res(pp_peek(p->e[0], iov, max));
	hist(H_PEEK, want, (size_t)max);
	w_cmp(w, got, 0, want, 0, 0, 0);
	for (long k = 0; k < got && got == want && !w->failed; k++) {
		struct mbuf *b = m_at(p, (uint32_t)k);
		if (iov[k].iov_len != b->len || !iov[k].iov_base ||
		    memcmp(iov[k].iov_base, b->pg->d + b->off, b->len))
			w_fail(w, "segment %ld: %zu bytes, model buffer %u bytes%s", k, iov[k].iov_len,
			       b->len, iov[k].iov_len == b->len ? " (contents differ)" : "");
	}
	if (w->failed || below(&w->r, 4) == 0)
		return;
	size_t avail = m_bytes(p), n;
	switch (below(&w->r, 6)) {
	case 0: n = 0; break;
	case 1: n = avail; break;
	case 2: n = avail + 1 + below(&w->r, 3); break;
	case 3: n = p->n ? m_at(p, 0)->len : 0; break;
	default: n = below(&w->r, avail + 1); break;
	}
	snprintf(w->what, sizeof w->what, "consume(pipe %d, %zu of %zu)", i, n, avail);
	w_verbose(w);
	want = m_consume(p, n);
	hist(H_CONSUME, want, n);
	got = tp_res(pp_consume(p->e[0], n));
	w_cmp(w, got, 0, want, 0, 0, 0);
}

static inline void op_setsize(struct world *w)
{
	static const size_t sizes[] = { 1, 4096, 8192, 12000, 16384, 32768, 65536, 262144 };
	int i = w_pick(w, -1);
	if (i < 0)
		return;
	struct mpipe *p = &w->p[i];
	int side = p->e[0] ? 0 : 1;
	size_t sz = sizes[below(&w->r, sizeof sizes / sizeof sizes[0])];
	snprintf(w->what, sizeof w->what, "setsize(pipe %d, %zu) holding %u buffers", i, sz, p->n);
	w_verbose(w);
	long want = m_setsize(p, sz);
	hist(H_SETSIZE, want, 1);
	long got = tp_res(pp_setsize(p->e[side], sz));
	long k = w->kernel ? tp_res(fcntl(p->kfd[side], F_SETPIPE_SZ, (int)sz)) : 0;
	w_cmp(w, got, 0, want, 0, k, 0);
}

static inline void op_close(struct world *w)
{
	int i = w_pick(w, -1);
	if (i < 0)
		return;
	struct mpipe *p = &w->p[i];
	int side = !p->e[0] ? 1 : !p->e[1] ? 0 : (int)below(&w->r, 2);
	snprintf(w->what, sizeof w->what, "close(pipe %d, %s end)", i, side ? "write" : "read");
	w_verbose(w);
	w_close_end(w, i, side);
}

static inline void w_step(struct world *w)
{
	for (int i = 0; i < NPIPES; i++) {
		struct mpipe *p = &w->p[i];
		if (!p->live && below(&w->r, 4) == 0)
			w_open(w, i);
		else if (p->live && (!p->e[0] || !p->e[1]) && below(&w->r, 25) == 0)
			w_close_end(w, i, p->e[0] ? 0 : 1); /* a half-closed pipe goes */
	}
	unsigned x = (unsigned)below(&w->r, 100);
	if (x < 26)
		op_write(w);
	else if (x < 44)
		op_read(w);
	else if (x < 57)
		op_xfer(w, X_SPLICE, NULL);
	else if (x < 66)
		op_xfer(w, X_TEE, NULL);
	else if (x < 74)
		op_xfer(w, w->kernel ? (int)below(&w->r, 2) : X_FANOUT, NULL);
	else if (x < 80)
		op_combo(w);
	else if (x < 87)
		w->kernel ? op_read(w) : op_peek(w);
	else if (x < 91)
		op_setsize(w);
	else if (x < 93)
		op_close(w);
	else
		op_drain(w);
	if (!w->failed)
		w_check(w);
}

static inline void run_sequence(int kernel, uint64_t seed, long steps, int verbose)
{
	struct world *w = calloc(1, sizeof *w);
	if (!w)
		abort();
	w->kernel = kernel;
	w->verbose = verbose;
	w->seed = seed;
	w->base_pages = tp_pages_in_use();
	rng_seed(&w->r, seed);
	for (int i = 0; i < NPIPES; i++)
		w_open(w, i);
	for (w->step = 0; w->step < steps && !w->failed; w->step++)
		w_step(w);
	for (int i = 0; i < NPIPES; i++)
		for (int side = 0; side < 2; side++)
			if (w->p[i].e[side])
				w_close_end(w, i, side);
	if (m_pages != 0)
		w_fail(w, "the model itself leaked %ld pages", m_pages);
	long left = tp_pages_in_use();
	if (left != w->base_pages) {
		snprintf(w->what, sizeof w->what, "after closing every pipe");
		w_fail(w, "pages_in_use %ld, want %ld: references lost", left, w->base_pages);
	}
	if (w->failed)
		fprintf(stderr, "    replay: PP_SPLICE_SEED=%llu PP_SPLICE_SEQS=1 PP_SPLICE_STEPS=%ld "
		                "PP_SPLICE_VERBOSE=2 %s\n",
		        (unsigned long long)seed, steps, program_invocation_name);
	free(w);
}

static inline void run_random(int kernel)
{
	sigset_t old;
	long seed0 = t_env_long("PP_SPLICE_SEED", 1);
	long seqs = t_env_long("PP_SPLICE_SEQS", t_scaled(T_SANITIZED ? 20 : 100));
	long steps = t_env_long("PP_SPLICE_STEPS", 600);
	int verbose = (int)t_env_long("PP_SPLICE_VERBOSE", 0);
	g_reports = 0;
	CHECK_EQ(tp_pages_in_use(), 0);
	tp_sigpipe_block(&old);
	for (long s = 0; s < seqs && g_reports < 12; s++) {
		run_sequence(kernel, (uint64_t)(seed0 + s), steps, verbose);
		t_progress();
	}
	tp_sigpipe_restore(&old);
	CHECK_EQ(tp_pages_in_use(), 0);
	if (verbose)
		hist_print();
}

/* The random bytes writes take their data from, and the read buffers;
 * main calls this before the first case. */
static inline void random_setup(void)
{
	struct rng r;
	g_pool = malloc(POOLSZ);
	g_exp = malloc(BIGBUF);
	g_got = malloc(BIGBUF);
	g_kgot = malloc(BIGBUF);
	if (!g_pool || !g_exp || !g_got || !g_kgot)
		exit(2);
	rng_seed(&r, 2024);
	for (size_t i = 0; i < POOLSZ; i++)
		g_pool[i] = (unsigned char)(rnd(&r) >> 56);
}

static inline void random_teardown(void)
{
	free(g_pool);
	free(g_exp);
	free(g_got);
	free(g_kgot);
}

#endif
