/*
 * splice_pipes.c - zero-copy transfers between pagepipes: pp_splice,
 * pp_tee and pp_fanout, and the zero-copy reader pp_peek / pp_consume.
 *
 * The core is a model of every pipe, slot by slot: each buffer names a
 * model page (with its bytes and a reference count), an offset, a length
 * and its flags (mergeable under Linux's rule, mergeable under pagepipe's,
 * packet).  From it the test predicts the exact return value of every call,
 * the bytes every read returns (so packet boundaries and split buffers are
 * checked), pp_nread of every pipe, and the exact number of pages in use:
 * one per distinct page that some buffer still names, so a tee or fanout
 * that copied instead of sharing, or a lost or leaked reference, shows at
 * once.  What it checks:
 *
 *  1. random_model: seeded random interleavings, on 5 pagepipes of 1 to
 *     64 pages (often full), of writes (1..200000 bytes: merges, split
 *     buffers, wrap-around), reads, pp_splice / pp_tee / pp_fanout (1..4
 *     outputs) with lengths 0, 1, around the first buffer's length, small,
 *     huge and SIZE_MAX, PP_SPLICE_NONBLOCK on full and empty pipes
 *     (EAGAIN), packet pipes on either side, peeks and consumes, resizes
 *     (EBUSY), closed ends (0 at end of input, EPIPE and SIGPIPE or not with
 *     PP_NOSIGPIPE), same-pipe and duplicate outputs and unknown flags
 *     (EINVAL); and transfers followed at once by small writes to every
 *     pipe involved.  Every byte read is compared with the model.
 *  2. After every step pp_pool_stats().pages_in_use equals the model's
 *     distinct pages (never more than the slots in use), and is 0 once all
 *     pipes are closed; fanout_tee_share_pages checks exact counts, e.g.
 *     that a 4-way fanout of 64 KiB holds 16 pages, not 64.
 *  3. isolation_*: writes to the source or the destinations after a tee, a
 *     partial splice or a fanout never change what another pipe reads;
 *     moved_buffer_merges: a buffer moved whole still takes merges in its
 *     new pipe, using as many slots as on Linux.
 *  4. random_vs_kernel: the same kind of random sequences (writes, reads,
 *     splice, tee, resizes, closes) run on kernel pipes (pipe2, splice(2)
 *     with NULL offsets, tee(2)) and on pagepipes, non-blocking; return
 *     values, errno, bytes, FIONREAD and SIGPIPE must match each other and
 *     the model.  eof_epipe_eagain_order compares which of EAGAIN, EPIPE
 *     and end of input wins; zero_length_and_check_order the argument
 *     checks; events_after_splice what poll reports after a splice.
 *  5. blocking_*: threads blocked in pp_splice / pp_tee / pp_fanout wake
 *     for data and for room, return 0 when the last writer closes, EPIPE
 *     (+SIGPIPE unless PP_NOSIGPIPE) when the reader closes, EINTR from a
 *     handler without SA_RESTART and keep waiting with it (each on kernel
 *     pipes too); a splice that was woken passes the wake on to a reader or
 *     writer still waiting; nonblocking_ends: PP_NONBLOCK on the input's
 *     read end or an output's write end makes the call non-blocking, as
 *     O_NONBLOCK does for splice(2), and on the other ends it does not.
 *     fanout_stream copies a 64 MiB stream of checksummed records to 3
 *     reader threads while a second reader of the source steals some, and
 *     checks that every record went either to all three outputs, in order,
 *     or to the thief, never both or neither.
 *  6. errors: EBADF, EINVAL, EFAULT as the header lists them.
 *  7. peek_consume: segments are the pipe's buffers, in place (the same
 *     memory after a tee or a move), consume frees pages, EINVAL past the
 *     data, 0 at end of file, EAGAIN, a blocking peek wakes for data.
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
 *   PP_SPLICE_STREAM_MB size of the fanout stream (default 64; 16 under a
 *                       sanitizer; times PP_TEST_SCALE)
 * A failing sequence prints its seed and step and the command line that
 * replays it alone.
 */
#include "harness/harness.h"
#include "harness/helpers.h"

#include <stdarg.h>
#include <stdbool.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

#define PG PP_PAGE_SIZE

static long pages_in_use(void)
{
	struct pp_pool_stats st;
	if (pp_pool_stats(&st))
		return -1;
	return st.pages_in_use;
}

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* A call's result as one number: the count, or -errno. */
static long res(ssize_t r)
{
	return r < 0 ? -(long)errno : (long)r;
}

static const char *res_str(long v, char *buf, size_t n)
{
	if (v < 0)
		snprintf(buf, n, "-1 (%s)", strerror((int)-v));
	else
		snprintf(buf, n, "%ld", v);
	return buf;
}

/* Collect a pending SIGPIPE (SIGPIPE is blocked while this is used). */
static int sigpipe_taken(void)
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

static void block_sigpipe(sigset_t *old)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &s, old);
	sigpipe_taken();
}

/* ---- random numbers (xorshift64*) ---------------------------------------- */

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	uint64_t x = r->s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static size_t below(struct rng *r, size_t n)
{
	return n ? (size_t)(rnd(r) % n) : 0;
}

static void rng_seed(struct rng *r, uint64_t seed)
{
	r->s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
	if (!r->s)
		r->s = 1;
	for (int i = 0; i < 4; i++)
		rnd(r);
}

/* ---- the model ------------------------------------------------------------ */

#define MSLOTS 256 /* model ring; more slots than any pipe here has */

struct mpage {
	int refs; /* model buffers naming it */
	unsigned char d[PG];
};
static long m_pages; /* model pages alive: what pages_in_use must be */

static struct mpage *mpage_new(void)
{
	struct mpage *pg = malloc(sizeof *pg);
	if (!pg)
		abort();
	pg->refs = 1;
	m_pages++;
	return pg;
}

static void mpage_put(struct mpage *pg)
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

static struct mbuf *m_at(struct mpipe *p, uint32_t i)
{
	return &p->b[(p->tail + i) % MSLOTS];
}

static void m_push(struct mpipe *p, struct mbuf b)
{
	if (p->n >= MSLOTS)
		abort();
	*m_at(p, p->n) = b;
	p->n++;
}

/* Drop the first buffer; the caller has dealt with its page reference. */
static void m_pop(struct mpipe *p)
{
	p->tail = (p->tail + 1) % MSLOTS;
	p->n--;
}

static size_t m_bytes(struct mpipe *p)
{
	size_t s = 0;
	for (uint32_t i = 0; i < p->n; i++)
		s += m_at(p, i)->len;
	return s;
}

static void m_clear(struct mpipe *p)
{
	while (p->n) {
		mpage_put(m_at(p, 0)->pg);
		m_pop(p);
	}
}

/* Would a write of len bytes put its first len % PG bytes into the last
 * buffer?  Under Linux's rule (kernel) or pagepipe's, which also wants the
 * page to be the pipe's alone. */
static int m_merges(struct mpipe *p, size_t len, int kernel)
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
static long m_write(struct mpipe *p, const unsigned char *src, size_t len, int *sig)
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
static long m_read(struct mpipe *p, unsigned char *out, size_t count)
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
static int m_prep(struct mpipe *in, struct mpipe **outs, int n, long *res, int *sigi)
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
static long m_xfer(struct mpipe *in, struct mpipe **outs, int n, size_t len, int consume)
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

static long m_consume(struct mpipe *p, size_t n)
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

static uint32_t pages_for(size_t size)
{
	uint32_t p = 1;
	while ((size_t)p * PG < size)
		p <<= 1;
	return p;
}

static long m_setsize(struct mpipe *p, size_t size)
{
	uint32_t pages = pages_for(size);
	if (pages < p->n)
		return -EBUSY;
	p->cap = pages;
	return (long)pages * PG;
}

/* ---- the random drivers ------------------------------------------------ */

#define NPIPES 5
#define BIGBUF (320u * 1024)
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
static void hist(int kind, long r, size_t asked)
{
	int k = r == -EAGAIN ? R_EAGAIN : r == -EPIPE ? R_EPIPE : r == -EINVAL ? R_EINVAL
	      : r == -EBUSY ? R_EBUSY : r < 0 ? R_EINVAL : r == 0 ? R_ZERO
	      : (size_t)r >= asked ? R_ALL : R_PART;
	g_hist[kind][k]++;
}

static void hist_print(void)
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

static void w_fail(struct world *w, const char *fmt, ...)
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
static void w_cmp(struct world *w, long got, int gsig, long want, int wsig, long kres, int ksig)
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

static void w_verbose(struct world *w)
{
	if (w->verbose > 1)
		fprintf(stderr, "[%llu:%ld] %s\n", (unsigned long long)w->seed, w->step, w->what);
}

static void w_open(struct world *w, int i)
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
	long got = res(pp_setsize(p->e[1], sz));
	long k = w->kernel ? res(fcntl(p->kfd[1], F_SETPIPE_SZ, (int)sz)) : 0;
	w_cmp(w, got, 0, want, 0, k, 0);
}

static void w_close_end(struct world *w, int i, int side)
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
static int w_pick(struct world *w, int side)
{
	int c[NPIPES], n = 0;
	for (int i = 0; i < NPIPES; i++)
		if (w->p[i].live && (side < 0 || w->p[i].e[side]))
			c[n++] = i;
	return n ? c[below(&w->r, (size_t)n)] : -1;
}

/* After every step: pp_nread (and FIONREAD) of every pipe, and the pages. */
static void w_check(struct world *w)
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
	long in_use = pages_in_use() - w->base_pages;
	if (in_use != m_pages)
		w_fail(w, "pages_in_use %ld, but the pipes' buffers name %ld distinct pages", in_use,
		       m_pages);
	if (in_use > slots)
		w_fail(w, "pages_in_use %ld > slots in use %ld", in_use, slots);
}

static size_t pick_wlen(struct rng *r)
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

static size_t pick_rlen(struct rng *r)
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

static size_t pick_xlen(struct world *w, struct mpipe *in)
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
static void op_write_to(struct world *w, int i, size_t len)
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
	long got = res(pp_write(p->e[1], src, len));
	int gsig = sigpipe_taken();
	long k = 0;
	int ksig = 0;
	if (w->kernel) {
		k = res(write(p->kfd[1], src, len));
		ksig = sigpipe_taken();
	}
	w_cmp(w, got, gsig, want, wsig, k, ksig);
}

static void op_write(struct world *w)
{
	int i = w_pick(w, 1);
	if (i >= 0)
		op_write_to(w, i, pick_wlen(&w->r));
}

static void cmp_bytes(struct world *w, const char *who, const unsigned char *got, long n)
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

static void op_read(struct world *w)
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
	long got = res(pp_read(p->e[0], g_got, count));
	long k = 0;
	if (w->kernel)
		k = res(read(p->kfd[0], g_kgot, count));
	w_cmp(w, got, 0, want, 0, k, 0);
	if (got == want)
		cmp_bytes(w, "pagepipe", g_got, got);
	if (w->kernel && k == want)
		cmp_bytes(w, "kernel", g_kgot, k);
}

/* Read a random pipe empty: lets shared pages go back to one owner. */
static void op_drain_pipe(struct world *w, int i)
{
	struct mpipe *p = &w->p[i];
	snprintf(w->what, sizeof w->what, "drain(pipe %d)", i);
	w_verbose(w);
	for (int rounds = 0; p->n && rounds < MSLOTS + 2 && !w->failed; rounds++) {
		long want = m_read(p, g_exp, BIGBUF);
		long got = res(pp_read(p->e[0], g_got, BIGBUF));
		long k = w->kernel ? res(read(p->kfd[0], g_kgot, BIGBUF)) : 0;
		w_cmp(w, got, 0, want, 0, k, 0);
		if (got == want)
			cmp_bytes(w, "pagepipe", g_got, got);
		if (w->kernel && k == want)
			cmp_bytes(w, "kernel", g_kgot, k);
	}
}

enum { X_SPLICE, X_TEE, X_FANOUT };

static void op_drain(struct world *w)
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

static void op_xfer(struct world *w, int kind, struct xfer_pipes *xp)
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
		got = res(pp_splice(in->e[0], mo[0]->e[1], len, flags));
	} else if (kind == X_TEE) {
		got = res(pp_tee(in->e[0], mo[0]->e[1], len, flags));
	} else {
		struct pp_end *oe[4];
		for (int i = 0; i < n; i++)
			oe[i] = mo[i]->e[1];
		got = res(pp_fanout(in->e[0], oe, n, len, flags));
	}
	int gsig = sigpipe_taken();
	long k = 0;
	int ksig = 0;
	if (w->kernel) {
		if (kind == X_SPLICE)
			k = res(splice(in->kfd[0], NULL, mo[0]->kfd[1], NULL, len, flags));
		else
			k = res(tee(in->kfd[0], mo[0]->kfd[1], len, flags));
		ksig = sigpipe_taken();
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
static void op_combo(struct world *w)
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

static void op_peek(struct world *w)
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
	long got = res(pp_peek(p->e[0], iov, max));
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
	got = res(pp_consume(p->e[0], n));
	w_cmp(w, got, 0, want, 0, 0, 0);
}

static void op_setsize(struct world *w)
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
	long got = res(pp_setsize(p->e[side], sz));
	long k = w->kernel ? res(fcntl(p->kfd[side], F_SETPIPE_SZ, (int)sz)) : 0;
	w_cmp(w, got, 0, want, 0, k, 0);
}

static void op_close(struct world *w)
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

static void w_step(struct world *w)
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

static void run_sequence(int kernel, uint64_t seed, long steps, int verbose)
{
	struct world *w = calloc(1, sizeof *w);
	if (!w)
		abort();
	w->kernel = kernel;
	w->verbose = verbose;
	w->seed = seed;
	w->base_pages = pages_in_use();
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
	long left = pages_in_use();
	if (left != w->base_pages) {
		snprintf(w->what, sizeof w->what, "after closing every pipe");
		w_fail(w, "pages_in_use %ld, want %ld: references lost", left, w->base_pages);
	}
	if (w->failed)
		fprintf(stderr, "    replay: PP_SPLICE_SEED=%llu PP_SPLICE_SEQS=1 PP_SPLICE_STEPS=%ld "
		                "PP_SPLICE_VERBOSE=2 build/test/splice_pipes\n",
		        (unsigned long long)seed, steps);
	free(w);
}

static void run_random(int kernel)
{
	sigset_t old;
	long seed0 = t_env_long("PP_SPLICE_SEED", 1);
	long seqs = t_env_long("PP_SPLICE_SEQS", t_scaled(T_SANITIZED ? 20 : 100));
	long steps = t_env_long("PP_SPLICE_STEPS", 600);
	int verbose = (int)t_env_long("PP_SPLICE_VERBOSE", 0);
	g_reports = 0;
	CHECK_EQ(pages_in_use(), 0);
	block_sigpipe(&old);
	for (long s = 0; s < seqs && g_reports < 12; s++)
		run_sequence(kernel, (uint64_t)(seed0 + s), steps, verbose);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	CHECK_EQ(pages_in_use(), 0);
	if (verbose)
		hist_print();
}

static void random_model(void)
{
	run_random(0);
}

static void random_vs_kernel(void)
{
	run_random(1);
}

/* ---- pages: sharing is exact ------------------------------------------------ */

static void fill_pipe(struct pp_end *w, size_t n, unsigned seed)
{
	unsigned char *buf = malloc(n);
	tp_fill(buf, n, seed, 0);
	CHECK_EQ(pp_write(w, buf, n), (long)n);
	free(buf);
}

/* Read n bytes and check they are bytes [off, off+n) of stream seed. */
static void expect_read(struct pp_end *r, size_t n, unsigned seed, size_t off)
{
	unsigned char *buf = malloc(n + 1);
	ssize_t got = pp_read(r, buf, n + 1);
	CHECK_EQ(got, (long)n);
	if (got == (ssize_t)n)
		CHECK_EQ(tp_verify(buf, n, seed, off), -1);
	free(buf);
}

static void fanout_tee_share_pages(void)
{
	struct pp_end *in[2], *o[4][2], *outs[4];
	CHECK_EQ(pages_in_use(), 0);
	CHECK_EQ(pp_pipe(in, 0), 0);
	for (int k = 0; k < 4; k++) {
		CHECK_EQ(pp_pipe(o[k], PP_NONBLOCK), 0);
		outs[k] = o[k][1];
	}
	fill_pipe(in[1], 65536, 7);
	CHECK_EQ(pages_in_use(), 16);
	CHECK_EQ(pp_fanout(in[0], outs, 4, SIZE_MAX, 0), 65536);
	CHECK_EQ(pages_in_use(), 16); /* 4 x 16 slots, 16 pages */
	CHECK_EQ(pp_nread(in[0]), 0);
	for (int k = 0; k < 4; k++) {
		CHECK_EQ(pp_nread(o[k][0]), 65536);
		CHECK_EQ(pp_events(o[k][1]) & POLLOUT, 0); /* every output is full */
	}
	for (int k = 0; k < 4; k++) {
		expect_read(o[k][0], 65536, 7, 0);
		CHECK_EQ(pages_in_use(), k < 3 ? 16 : 0);
	}

	/* tee to three pipes: the source keeps its data, still 16 pages */
	fill_pipe(in[1], 65536, 8);
	for (int k = 0; k < 3; k++)
		CHECK_EQ(pp_tee(in[0], outs[k], SIZE_MAX, 0), 65536);
	CHECK_EQ(pages_in_use(), 16);
	CHECK_EQ(pp_nread(in[0]), 65536);
	expect_read(in[0], 65536, 8, 0);
	CHECK_EQ(pages_in_use(), 16);
	/* a partial read of every page of a copy frees nothing yet */
	unsigned char buf[100];
	CHECK_EQ(pp_read(o[0][0], buf, 100), 100);
	CHECK_EQ(tp_verify(buf, 100, 8, 0), -1);
	CHECK_EQ(pages_in_use(), 16);
	/* moving the rest of one copy on moves the references, not pages */
	CHECK_EQ(pp_splice(o[0][0], outs[3], SIZE_MAX, PP_SPLICE_NONBLOCK), 65536 - 100);
	CHECK_EQ(pages_in_use(), 16);
	expect_read(o[3][0], 65536 - 100, 8, 0 + 100);
	CHECK_EQ(pages_in_use(), 16);
	expect_read(o[1][0], 65536, 8, 0);
	CHECK_EQ(pages_in_use(), 16);
	expect_read(o[2][0], 65536, 8, 0);
	CHECK_EQ(pages_in_use(), 0);
	pp_close(in[0]);
	pp_close(in[1]);
	for (int k = 0; k < 4; k++) {
		pp_close(o[k][0]);
		pp_close(o[k][1]);
	}
	CHECK_EQ(pages_in_use(), 0);

	/* pipes closed with shared data in them give every page back */
	CHECK_EQ(pp_pipe(in, 0), 0);
	for (int k = 0; k < 4; k++) {
		CHECK_EQ(pp_pipe(o[k], 0), 0);
		outs[k] = o[k][1];
	}
	fill_pipe(in[1], 40000, 9);
	CHECK_EQ(pp_tee(in[0], outs[0], 20000, 0), 20000);
	CHECK_EQ(pp_fanout(in[0], outs + 1, 3, 30000, 0), 30000);
	CHECK_EQ(pages_in_use(), 10);
	pp_close(o[2][0]);
	pp_close(o[2][1]);
	CHECK_EQ(pages_in_use(), 10);
	pp_close(in[0]);
	pp_close(in[1]);
	CHECK_EQ(pages_in_use(), 8);
	for (int k = 0; k < 4; k++) {
		if (k == 2)
			continue;
		pp_close(o[k][0]);
		pp_close(o[k][1]);
	}
	CHECK_EQ(pages_in_use(), 0);
}

/* ---- isolation --------------------------------------------------------- */

struct two {
	struct pp_end *a[2], *b[2];
};

static void two_open(struct two *t)
{
	CHECK_EQ(pp_pipe(t->a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(t->b, PP_NONBLOCK), 0);
}

static void two_close(struct two *t)
{
	pp_close(t->a[0]);
	pp_close(t->a[1]);
	pp_close(t->b[0]);
	pp_close(t->b[1]);
}

/* Write n bytes of stream seed from offset off. */
static void put(struct pp_end *w, size_t n, unsigned seed, size_t off)
{
	unsigned char *buf = malloc(n);
	tp_fill(buf, n, seed, off);
	CHECK_EQ(pp_write(w, buf, n), (long)n);
	free(buf);
}

/* Read exactly the concatenation of the given stream pieces, then EAGAIN. */
struct piece {
	size_t n;
	unsigned seed;
	size_t off;
};
static void expect_pieces(struct pp_end *r, const struct piece *pc, int np)
{
	unsigned char *buf = malloc(BIGBUF);
	size_t total = 0, at = 0;
	for (int i = 0; i < np; i++)
		total += pc[i].n;
	while (at < total) {
		ssize_t got = pp_read(r, buf + at, BIGBUF - at);
		if (got <= 0) {
			CHECK_EQ(got, (long)(total - at));
			break;
		}
		at += (size_t)got;
	}
	CHECK_EQ(at, total);
	at = 0;
	for (int i = 0; i < np; i++) {
		long bad = tp_verify(buf + at, pc[i].n, pc[i].seed, pc[i].off);
		if (bad >= 0)
			fprintf(stderr, "piece %d (seed %u): first wrong byte at %ld\n", i, pc[i].seed,
			        bad);
		CHECK_EQ(bad, -1);
		at += pc[i].n;
	}
	CHECK_ERR(pp_read(r, buf, 1), EAGAIN);
	free(buf);
}

static void isolation_after_tee(void)
{
	struct two t;
	for (int order = 0; order < 2; order++) {
		two_open(&t);
		put(t.a[1], 100, 1, 0);
		CHECK_EQ(pp_tee(t.a[0], t.b[1], 1000, 0), 100);
		CHECK_EQ(pages_in_use(), 1);
		/* small writes that would merge into the shared last buffer */
		if (order == 0) {
			put(t.a[1], 50, 2, 0);
			put(t.b[1], 30, 3, 0);
		} else {
			put(t.b[1], 30, 3, 0);
			put(t.a[1], 50, 2, 0);
		}
		/* shared pages are never appended to: each write took a page */
		CHECK_EQ(pages_in_use(), 3);
		struct piece pa[] = { { 100, 1, 0 }, { 50, 2, 0 } };
		struct piece pb[] = { { 100, 1, 0 }, { 30, 3, 0 } };
		expect_pieces(t.b[0], pb, 2);
		expect_pieces(t.a[0], pa, 2);
		CHECK_EQ(pages_in_use(), 0);
		two_close(&t);
	}

	/* a tee of part of a buffer, then writes to both, then a second tee
	 * of what the source holds now */
	two_open(&t);
	put(t.a[1], 3000, 4, 0);
	CHECK_EQ(pp_tee(t.a[0], t.b[1], 1234, 0), 1234);
	put(t.a[1], 40, 5, 0);
	put(t.b[1], 40, 6, 0);
	CHECK_EQ(pp_tee(t.a[0], t.b[1], SIZE_MAX, 0), 3040);
	put(t.a[1], 7, 7, 0);
	put(t.b[1], 7, 8, 0);
	struct piece pa[] = { { 3000, 4, 0 }, { 40, 5, 0 }, { 7, 7, 0 } };
	struct piece pb[] = { { 1234, 4, 0 }, { 40, 6, 0 }, { 3000, 4, 0 },
		              { 40, 5, 0 },   { 7, 8, 0 } };
	expect_pieces(t.a[0], pa, 3);
	expect_pieces(t.b[0], pb, 5);
	two_close(&t);
	CHECK_EQ(pages_in_use(), 0);
}

static void isolation_after_partial_splice(void)
{
	struct two t;
	for (int order = 0; order < 2; order++) {
		two_open(&t);
		put(t.a[1], 100, 1, 0);
		CHECK_EQ(pp_splice(t.a[0], t.b[1], 30, 0), 30);
		CHECK_EQ(pp_nread(t.a[0]), 70);
		CHECK_EQ(pages_in_use(), 1);
		if (order == 0) {
			put(t.a[1], 10, 2, 0);
			put(t.b[1], 10, 3, 0);
		} else {
			put(t.b[1], 10, 3, 0);
			put(t.a[1], 10, 2, 0);
		}
		struct piece pa[] = { { 70, 1, 30 }, { 10, 2, 0 } };
		struct piece pb[] = { { 30, 1, 0 }, { 10, 3, 0 } };
		expect_pieces(t.a[0], pa, 2);
		expect_pieces(t.b[0], pb, 2);
		two_close(&t);
	}
	/* a split page whose other half has been read: still no appending
	 * into the bytes the other pipe reads */
	two_open(&t);
	put(t.a[1], 200, 1, 0);
	CHECK_EQ(pp_splice(t.a[0], t.b[1], 150, 0), 150);
	struct piece one[] = { { 50, 1, 150 } };
	expect_pieces(t.a[0], one, 1);
	put(t.a[1], 20, 2, 0);
	put(t.b[1], 20, 3, 0);
	struct piece pa[] = { { 20, 2, 0 } };
	struct piece pb[] = { { 150, 1, 0 }, { 20, 3, 0 } };
	expect_pieces(t.a[0], pa, 1);
	expect_pieces(t.b[0], pb, 2);
	two_close(&t);
	CHECK_EQ(pages_in_use(), 0);
}

static void isolation_after_fanout(void)
{
	struct pp_end *a[2], *o[3][2], *outs[3];
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(pp_pipe(o[k], PP_NONBLOCK), 0);
		outs[k] = o[k][1];
	}
	put(a[1], 5000, 1, 0); /* buffers of 4096 and 904 */
	CHECK_EQ(pp_fanout(a[0], outs, 3, 4500, 0), 4500);
	CHECK_EQ(pages_in_use(), 2);
	for (int k = 0; k < 3; k++)
		put(outs[k], 10, 10 + (unsigned)k, 0);
	put(a[1], 10, 2, 0);
	for (int k = 0; k < 3; k++) {
		struct piece pk[] = { { 4500, 1, 0 }, { 10, 10 + (unsigned)k, 0 } };
		expect_pieces(o[k][0], pk, 2);
	}
	struct piece pa[] = { { 500, 1, 4500 }, { 10, 2, 0 } };
	expect_pieces(a[0], pa, 2);
	pp_close(a[0]);
	pp_close(a[1]);
	for (int k = 0; k < 3; k++) {
		pp_close(o[k][0]);
		pp_close(o[k][1]);
	}
	CHECK_EQ(pages_in_use(), 0);
}

/* Slots a pipe has left: non-blocking page writes until EAGAIN (the pipe
 * must be non-blocking; what was written stays). */
static int tp_free_slots(struct tp *t)
{
	char page[PG];
	int n = 0;
	memset(page, 'f', sizeof page);
	while (tp_write(t, page, PG) == PG)
		n++;
	return n;
}

/* A buffer moved whole keeps taking merges in its new pipe, on Linux and
 * here; the bytes stay right. */
static void moved_buffer_merges(void)
{
	int slots[2];
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		unsigned char buf[200];
		CHECK_EQ(tp_open(&a, kernel, PP_NONBLOCK), 0);
		CHECK_EQ(tp_open(&b, kernel, PP_NONBLOCK), 0);
		tp_fill(buf, 100, 1, 0);
		CHECK_EQ(tp_write(&a, buf, 100), 100);
		ssize_t r = kernel ? splice(a.fd[0], NULL, b.fd[1], NULL, 1000, 0)
		                   : pp_splice(a.e[0], b.e[1], 1000, 0);
		CHECK_EQ(r, 100);
		tp_fill(buf, 50, 2, 0);
		CHECK_EQ(tp_write(&b, buf, 50), 50);
		if (!kernel)
			CHECK_EQ(pages_in_use(), 1);
		CHECK_EQ(tp_read(&b, buf, 200), 150);
		CHECK_EQ(tp_verify(buf, 100, 1, 0), -1);
		CHECK_EQ(tp_verify(buf + 100, 50, 2, 0), -1);
		/* again, and count the slots left */
		tp_fill(buf, 100, 1, 0);
		CHECK_EQ(tp_write(&a, buf, 100), 100);
		r = kernel ? splice(a.fd[0], NULL, b.fd[1], NULL, 1000, 0)
		           : pp_splice(a.e[0], b.e[1], 1000, 0);
		CHECK_EQ(r, 100);
		CHECK_EQ(tp_write(&b, buf, 50), 50);
		slots[kernel] = tp_free_slots(&b);
		tp_close(&a);
		tp_close(&b);
	}
	CHECK_EQ(slots[0], 15);
	CHECK_EQ(slots[0], slots[1]);
	CHECK_EQ(pages_in_use(), 0);
}

/* ---- blocking: threads ----------------------------------------------------- */

enum { J_SPLICE, J_TEE, J_FANOUT, J_READ, J_WRITE, J_PEEK };

struct job {
	int kind;
	struct tp *in, *out; /* kernel or pagepipe; in: read from, out: write to */
	struct pp_end *fin, *fouts[4];
	int n;
	size_t len;
	unsigned flags;
	int catch_sigpipe; /* block SIGPIPE in the thread and report it */
	pthread_t th;
	/* results, published with __atomic */
	long res;
	int sigpipe;
	pid_t tid;
	int done;
	unsigned char buf[8192];
	struct iovec iov[8];
};

static void *job_main(void *arg)
{
	struct job *j = arg;
	sigset_t old;
	if (j->catch_sigpipe)
		block_sigpipe(&old);
	__atomic_store_n(&j->tid, tp_gettid(), __ATOMIC_SEQ_CST);
	ssize_t r = -1;
	switch (j->kind) {
	case J_SPLICE:
		r = j->in->kernel ? splice(j->in->fd[0], NULL, j->out->fd[1], NULL, j->len, j->flags)
		                  : pp_splice(j->in->e[0], j->out->e[1], j->len, j->flags);
		break;
	case J_TEE:
		r = j->in->kernel ? tee(j->in->fd[0], j->out->fd[1], j->len, j->flags)
		                  : pp_tee(j->in->e[0], j->out->e[1], j->len, j->flags);
		break;
	case J_FANOUT:
		r = pp_fanout(j->fin, j->fouts, j->n, j->len, j->flags);
		break;
	case J_READ:
		r = tp_read(j->in, j->buf, min_sz(j->len, sizeof j->buf));
		break;
	case J_WRITE:
		memset(j->buf, 'w', sizeof j->buf);
		r = tp_write(j->out, j->buf, min_sz(j->len, sizeof j->buf));
		break;
	case J_PEEK:
		r = pp_peek(j->fin, j->iov, 8);
		break;
	}
	__atomic_store_n(&j->res, res(r), __ATOMIC_SEQ_CST);
	if (j->catch_sigpipe) {
		__atomic_store_n(&j->sigpipe, sigpipe_taken(), __ATOMIC_SEQ_CST);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	__atomic_store_n(&j->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Start the job and wait until it sleeps in the call (0 if it never did). */
static int job_start(struct job *j)
{
	__atomic_store_n(&j->tid, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&j->done, 0, __ATOMIC_SEQ_CST);
	if (pthread_create(&j->th, NULL, job_main, j))
		return 0;
	while (!__atomic_load_n(&j->tid, __ATOMIC_SEQ_CST))
		t_sleep_ms(1);
	return tp_wait_asleep(__atomic_load_n(&j->tid, __ATOMIC_SEQ_CST), 5.0) &&
	       !__atomic_load_n(&j->done, __ATOMIC_SEQ_CST);
}

static int job_done(struct job *j)
{
	return __atomic_load_n(&j->done, __ATOMIC_SEQ_CST);
}

/* Wait up to secs for the job to finish; 1 if it did. */
static int job_wait(struct job *j, double secs)
{
	double end = t_now() + secs;
	while (!job_done(j) && t_now() < end)
		t_sleep_ms(2);
	return job_done(j);
}

static long job_res(struct job *j)
{
	return __atomic_load_n(&j->res, __ATOMIC_SEQ_CST);
}

static void job_join(struct job *j)
{
	pthread_join(j->th, NULL);
}

static struct job *job_new(int kind, struct tp *in, struct tp *out, size_t len, unsigned fl)
{
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		abort();
	j->kind = kind;
	j->in = in;
	j->out = out;
	j->len = len;
	j->flags = fl;
	return j;
}

#define KCHECK(kernel, cond)                                                               \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "(%s) ", (kernel) ? "kernel" : "pagepipe");       \
			CHECK(cond);                                                       \
		}                                                                          \
	} while (0)
#define KCHECK_EQ(kernel, expr, want)                                                      \
	do {                                                                               \
		long long kv_ = (long long)(expr), kw_ = (long long)(want);                \
		if (kv_ != kw_) {                                                          \
			fprintf(stderr, "(%s) ", (kernel) ? "kernel" : "pagepipe");       \
			CHECK_EQ(kv_, kw_);                                                \
		}                                                                          \
	} while (0)

/* Fill a pipe of 2 slots with 2 pages. */
static void make_full_2(struct tp *t, int kernel, int flags)
{
	char page[PG];
	memset(page, 'F', sizeof page);
	CHECK_EQ(tp_open(t, kernel, flags), 0);
	CHECK_EQ(tp_setsize(t, 1, 8192), 8192);
	CHECK_EQ(tp_write(t, page, PG), PG);
	CHECK_EQ(tp_write(t, page, PG), PG);
}

/*
 * PP_NONBLOCK on the input's read end or on an output's write end makes a
 * transfer fail with EAGAIN instead of waiting, as O_NONBLOCK on either
 * descriptor does for splice(2) and tee(2); the flag on the other ends
 * (the input's write end, an output's read end) does not.  Each call runs
 * in a thread, so that one that waits when it should not is seen (and
 * then released) instead of hanging the test.
 */
enum { NB_IN_EMPTY, NB_OUT_FULL, NB_INWR_EMPTY, NB_OUTRD_FULL, NB_COUNT };

static void nb_scenario(int kernel, int kind, int sc)
{
	static const char *const name[NB_COUNT] = {
		"input read end non-blocking, input empty",
		"output write end non-blocking, output full",
		"input write end non-blocking, input empty",
		"output read end non-blocking, output full",
	};
	struct tp a, b;
	unsigned char buf[2 * PG];
	CHECK_EQ(tp_open(&a, kernel, 0), 0);
	if (sc == NB_OUT_FULL || sc == NB_OUTRD_FULL) {
		make_full_2(&b, kernel, 0);
		CHECK_EQ(tp_write(&a, "data", 4), 4);
	} else {
		CHECK_EQ(tp_open(&b, kernel, 0), 0);
	}
	switch (sc) {
	case NB_IN_EMPTY: CHECK_EQ(tp_setnonblock(&a, 0, 1), 0); break;
	case NB_OUT_FULL: CHECK_EQ(tp_setnonblock(&b, 1, 1), 0); break;
	case NB_INWR_EMPTY: CHECK_EQ(tp_setnonblock(&a, 1, 1), 0); break;
	default: CHECK_EQ(tp_setnonblock(&b, 0, 1), 0); break;
	}
	struct job *j = job_new(kind, &a, &b, 100, 0);
	if (pthread_create(&j->th, NULL, job_main, j)) {
		CHECK(0);
		free(j);
		return;
	}
	int waits = sc == NB_INWR_EMPTY || sc == NB_OUTRD_FULL;
	int done = job_wait(j, waits ? 0.3 : 2.0);
	if (done != !waits) {
		fprintf(stderr, "(%s) %s, %s: the call %s\n", tp_name(&a),
		        kind == J_TEE ? "tee" : "splice", name[sc],
		        waits ? "did not wait" : "waits");
		t_case_failed = 1;
	}
	if (!done) {
		if (sc == NB_IN_EMPTY || sc == NB_INWR_EMPTY)
			CHECK_EQ(tp_write(&a, "data", 4), 4);
		else
			CHECK_EQ(tp_read(&b, buf, sizeof buf), 2 * PG);
		KCHECK(kernel, job_wait(j, 5));
		KCHECK_EQ(kernel, job_res(j), 4);
	} else if (!waits) {
		KCHECK_EQ(kernel, job_res(j), -EAGAIN);
	}
	job_join(j);
	free(j);
	tp_close(&a);
	tp_close(&b);
}

static void nonblocking_ends(void)
{
	for (int kernel = 0; kernel < 2; kernel++)
		for (int kind = J_SPLICE; kind <= J_TEE; kind++)
			for (int sc = 0; sc < NB_COUNT; sc++)
				nb_scenario(kernel, kind, sc);

	/* pp_fanout: any output's PP_NONBLOCK, while the input is empty */
	struct pp_end *a[2], *o[3][2], *outs[3];
	CHECK_EQ(pp_pipe(a, 0), 0);
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(pp_pipe(o[k], 0), 0);
		outs[k] = o[k][1];
	}
	CHECK_EQ(pp_setfl(o[2][1], PP_NONBLOCK), 0);
	struct job *j = job_new(J_FANOUT, NULL, NULL, 100, 0);
	j->fin = a[0];
	memcpy(j->fouts, outs, sizeof outs);
	j->n = 3;
	if (!pthread_create(&j->th, NULL, job_main, j)) {
		int done = job_wait(j, 2.0);
		CHECK(done);
		if (!done)
			CHECK_EQ(pp_write(a[1], "data", 4), 4);
		job_join(j);
		if (done)
			CHECK_EQ(job_res(j), -EAGAIN);
	}
	free(j);
	pp_close(a[0]);
	pp_close(a[1]);
	for (int k = 0; k < 3; k++) {
		pp_close(o[k][0]);
		pp_close(o[k][1]);
	}
	CHECK_EQ(pages_in_use(), 0);
}

static void blocking_wakes_for_data(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		for (int kind = J_SPLICE; kind <= J_TEE; kind++) {
			struct tp a, b;
			unsigned char buf[100];
			CHECK_EQ(tp_open(&a, kernel, 0), 0);
			CHECK_EQ(tp_open(&b, kernel, 0), 0);
			struct job *j = job_new(kind, &a, &b, 100, 0);
			KCHECK(kernel, job_start(j));
			t_sleep_ms(20);
			KCHECK(kernel, !job_done(j));
			tp_fill(buf, 10, 3, 0);
			CHECK_EQ(tp_write(&a, buf, 10), 10);
			KCHECK(kernel, job_wait(j, 5));
			job_join(j);
			KCHECK_EQ(kernel, job_res(j), 10);
			KCHECK_EQ(kernel, tp_nread(&a, 0), kind == J_TEE ? 10 : 0);
			KCHECK_EQ(kernel, tp_read(&b, buf, 100), 10);
			KCHECK_EQ(kernel, tp_verify(buf, 10, 3, 0), -1);
			free(j);
			tp_close(&a);
			tp_close(&b);
		}
	}
	CHECK_EQ(pages_in_use(), 0);
}

static void blocking_wakes_for_room(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		unsigned char buf[PG];
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		make_full_2(&b, kernel, 0);
		tp_fill(buf, 100, 4, 0);
		CHECK_EQ(tp_write(&a, buf, 100), 100);
		struct job *j = job_new(J_SPLICE, &a, &b, 1000, 0);
		KCHECK(kernel, job_start(j));
		t_sleep_ms(20);
		KCHECK(kernel, !job_done(j));
		CHECK_EQ(tp_read(&b, buf, PG), PG); /* one slot free */
		KCHECK(kernel, job_wait(j, 5));
		job_join(j);
		KCHECK_EQ(kernel, job_res(j), 100);
		CHECK_EQ(tp_read(&b, buf, PG), PG);
		KCHECK_EQ(kernel, tp_read(&b, buf, PG), 100);
		KCHECK_EQ(kernel, tp_verify(buf, 100, 4, 0), -1);
		free(j);
		tp_close(&a);
		tp_close(&b);
	}

	/* pp_fanout waits for room in every output, not just the first */
	struct tp a, b, c;
	unsigned char buf[PG];
	CHECK_EQ(tp_open(&a, 0, 0), 0);
	CHECK_EQ(tp_open(&b, 0, 0), 0);
	make_full_2(&c, 0, 0);
	tp_fill(buf, 300, 5, 0);
	CHECK_EQ(tp_write(&a, buf, 300), 300);
	struct job *j = job_new(J_FANOUT, NULL, NULL, SIZE_MAX, 0);
	j->fin = a.e[0];
	j->fouts[0] = b.e[1];
	j->fouts[1] = c.e[1];
	j->n = 2;
	CHECK(job_start(j));
	t_sleep_ms(20);
	CHECK(!job_done(j));
	CHECK_EQ(pp_nread(b.e[0]), 0);
	CHECK_EQ(tp_read(&c, buf, PG), PG);
	CHECK(job_wait(j, 5));
	job_join(j);
	CHECK_EQ(job_res(j), 300);
	CHECK_EQ(tp_read(&b, buf, PG), 300);
	CHECK_EQ(tp_verify(buf, 300, 5, 0), -1);
	free(j);
	tp_close(&a);
	tp_close(&b);
	tp_close(&c);
	CHECK_EQ(pages_in_use(), 0);
}

static void blocking_eof_and_epipe(void)
{
	/* the source's last writer closes: 0 */
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		CHECK_EQ(tp_open(&b, kernel, 0), 0);
		struct job *j = job_new(J_SPLICE, &a, &b, 100, 0);
		KCHECK(kernel, job_start(j));
		tp_close_end(&a, 1);
		KCHECK(kernel, job_wait(j, 5));
		job_join(j);
		KCHECK_EQ(kernel, job_res(j), 0);
		free(j);
		tp_close(&a);
		tp_close(&b);
	}
	/* the destination's reader closes while the splice waits for room:
	 * EPIPE, with SIGPIPE unless PP_NOSIGPIPE */
	for (int mode = 0; mode < 3; mode++) {
		int kernel = mode == 0, nosig = mode == 2;
		struct tp a, b;
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		make_full_2(&b, kernel, nosig ? PP_NOSIGPIPE : 0);
		CHECK_EQ(tp_write(&a, "abc", 3), 3);
		struct job *j = job_new(J_SPLICE, &a, &b, 100, 0);
		j->catch_sigpipe = 1;
		KCHECK(kernel, job_start(j));
		tp_close_end(&b, 0);
		KCHECK(kernel, job_wait(j, 5));
		job_join(j);
		KCHECK_EQ(kernel, job_res(j), -EPIPE);
		KCHECK_EQ(kernel, __atomic_load_n(&j->sigpipe, __ATOMIC_SEQ_CST), !nosig);
		KCHECK_EQ(kernel, tp_nread(&a, 0), 3); /* nothing was taken */
		free(j);
		tp_close(&a);
		tp_close(&b);
	}
	CHECK_EQ(pages_in_use(), 0);
}

static int n_usr1_;
static void on_usr1(int sig)
{
	(void)sig;
	__atomic_fetch_add(&n_usr1_, 1, __ATOMIC_SEQ_CST);
}

static void blocking_signals(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		for (int full = 0; full < 2; full++) {
			for (int restart = 0; restart < 2; restart++) {
				struct tp a, b;
				unsigned char buf[PG];
				tp_handle(SIGUSR1, on_usr1, restart);
				CHECK_EQ(tp_open(&a, kernel, 0), 0);
				if (full) {
					make_full_2(&b, kernel, 0);
					CHECK_EQ(tp_write(&a, "xyz", 3), 3);
				} else {
					CHECK_EQ(tp_open(&b, kernel, 0), 0);
				}
				struct job *j = job_new(J_SPLICE, &a, &b, 100, 0);
				int before = __atomic_load_n(&n_usr1_, __ATOMIC_SEQ_CST);
				KCHECK(kernel, job_start(j));
				pthread_kill(j->th, SIGUSR1);
				if (!restart) {
					KCHECK(kernel, job_wait(j, 5));
					KCHECK_EQ(kernel, job_res(j), -EINTR);
				} else {
					/* SA_RESTART: still waiting after the handler ran.
					 * (ThreadSanitizer runs the handler only once the
					 * call returns, so do not wait long for it; that it
					 * ran is checked after the join.) */
					double end = t_now() + 0.3;
					while (__atomic_load_n(&n_usr1_, __ATOMIC_SEQ_CST) == before &&
					       t_now() < end)
						t_sleep_ms(1);
					KCHECK(kernel, tp_wait_asleep(j->tid, 5.0));
					KCHECK(kernel, !job_done(j));
					if (full)
						CHECK_EQ(tp_read(&b, buf, PG), PG);
					else
						CHECK_EQ(tp_write(&a, "xyz", 3), 3);
					KCHECK(kernel, job_wait(j, 5));
					KCHECK_EQ(kernel, job_res(j), 3);
				}
				if (!job_done(j)) { /* unstick it to join */
					tp_close_end(&a, 1);
					tp_close_end(&b, 0);
				}
				job_join(j);
				KCHECK(kernel, __atomic_load_n(&n_usr1_, __ATOMIC_SEQ_CST) > before);
				free(j);
				tp_close(&a);
				tp_close(&b);
			}
		}
	}
	tp_default(SIGUSR1);
	CHECK_EQ(pages_in_use(), 0);
}

/*
 * A thread that waited in pp_splice and leaves the condition true for
 * others must pass the wake on, as pp_read and pp_write do.  On Linux a
 * splice waits non-exclusively, so the write that ends the wait wakes it
 * and one reader (or writer) besides; pagepipe wakes one sleeper only, so
 * if that one is the splice it has to wake the next.  First: a splice and
 * a read both wait on an empty pipe, the splice first; two bytes arrive in
 * one write.  Either the splice takes one and the reader gets the other,
 * or the reader runs first and takes both while the splice goes on waiting
 * (Linux often does that); but a reader asleep with a byte in the pipe is
 * a lost wakeup.
 */
static void blocking_splice_passes_wake_to_reader(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		CHECK_EQ(tp_open(&b, kernel, 0), 0);
		struct job *s = job_new(J_SPLICE, &a, &b, 1, 0);
		struct job *r = job_new(J_READ, &a, NULL, 100, 0);
		KCHECK(kernel, job_start(s));
		KCHECK(kernel, job_start(r));
		CHECK_EQ(tp_write(&a, "xy", 2), 2);
		int ok = job_wait(r, 2);
		if (!ok)
			fprintf(stderr, "(%s) reader still asleep with %d byte(s) in the pipe\n",
			        tp_name(&a), tp_nread(&a, 0));
		KCHECK(kernel, ok);
		if (ok && job_res(r) == 1)
			KCHECK(kernel, job_wait(s, 5)); /* then the splice took the other */
		tp_close_end(&a, 1); /* ends a wait still going on */
		job_join(s);
		job_join(r);
		long sr = job_res(s), rr = job_res(r);
		KCHECK(kernel, (sr == 1 && rr == 1) || (sr == 0 && rr == 2));
		KCHECK_EQ(kernel, tp_nread(&b, 0), sr);
		free(s);
		free(r);
		tp_close(&a);
		tp_close(&b);
	}
	CHECK_EQ(pages_in_use(), 0);
}

/* Second: a splice and a write both wait for room in a full pipe, the
 * splice first; a reader frees two slots; the splice fills one; the writer
 * must get the other. */
static void blocking_splice_passes_wake_to_writer(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		unsigned char buf[2 * PG];
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		make_full_2(&b, kernel, 0);
		CHECK_EQ(tp_write(&a, "abc", 3), 3);
		struct job *s = job_new(J_SPLICE, &a, &b, 100, 0);
		struct job *w = job_new(J_WRITE, NULL, &b, 100, 0);
		KCHECK(kernel, job_start(s));
		KCHECK(kernel, job_start(w));
		CHECK_EQ(tp_read(&b, buf, sizeof buf), 2 * PG);
		KCHECK(kernel, job_wait(s, 5));
		KCHECK_EQ(kernel, job_res(s), 3);
		int ok = job_wait(w, 2);
		if (!ok)
			fprintf(stderr, "(%s) writer still asleep with a free slot\n", tp_name(&b));
		KCHECK(kernel, ok);
		tp_setsize(&b, 1, 65536); /* unsticks the writer if it was not woken */
		job_join(s);
		job_join(w);
		KCHECK_EQ(kernel, job_res(w), 100);
		free(s);
		free(w);
		tp_close(&a);
		tp_close(&b);
	}
	CHECK_EQ(pages_in_use(), 0);
}

/*
 * The stream: records of 16 bytes (index, hash of index).  A writer thread
 * streams them into the source; a fanout thread moves everything to three
 * outputs, each drained by a reader thread that checks every record and
 * marks it in its bitmap; a thief thread reads the source too (record
 * multiples: every buffer is a multiple of 16 bytes) and marks what it gets.
 * In the end all three outputs got the same records in order, and every
 * record went to the outputs or to the thief, never both, never neither.
 */
struct stream {
	size_t nrec;
	struct pp_end *src[2], *thief_end, *o[3][2];
	uint8_t *seen[4]; /* bitmaps: outputs 0..2, thief */
	long bad[4];      /* records that failed their check */
	size_t got[4];    /* records received */
	uint64_t sum[4];  /* order-sensitive checksum of what was received */
	long fan_err;
	int stop_thief;
};

static uint64_t rec_hash(uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull + 0x1234567;
	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	return x ^ (x >> 32);
}

static void *stream_writer(void *arg)
{
	struct stream *s = arg;
	struct rng r;
	uint64_t *buf = malloc(65536);
	size_t next = 0;
	rng_seed(&r, 77);
	while (next < s->nrec) {
		size_t k = min_sz(1 + below(&r, 4096), s->nrec - next);
		for (size_t i = 0; i < k; i++) {
			buf[2 * i] = next + i;
			buf[2 * i + 1] = rec_hash(next + i);
		}
		if (pp_write(s->src[1], buf, k * 16) != (ssize_t)(k * 16))
			break;
		next += k;
	}
	pp_close(s->src[1]);
	free(buf);
	return NULL;
}

/* Check the records in buf[0..n) and mark them for consumer c. */
static void stream_take(struct stream *s, int c, const unsigned char *buf, size_t n,
                        uint64_t *last)
{
	for (size_t at = 0; at + 16 <= n; at += 16) {
		uint64_t rec[2];
		memcpy(rec, buf + at, 16);
		if (rec[0] >= s->nrec || rec[1] != rec_hash(rec[0]) ||
		    (*last != UINT64_MAX && rec[0] <= *last) ||
		    (s->seen[c][rec[0] / 8] & (1u << (rec[0] % 8)))) {
			s->bad[c]++;
			continue;
		}
		*last = rec[0];
		s->seen[c][rec[0] / 8] |= (uint8_t)(1u << (rec[0] % 8));
		s->got[c]++;
		s->sum[c] = (s->sum[c] ^ rec[1]) * 0x100000001B3ull;
	}
	if (n % 16)
		s->bad[c]++; /* a torn record */
}

struct stream_reader {
	struct stream *s;
	int c;
};

static void *stream_reader(void *arg)
{
	struct stream_reader *sr = arg;
	struct stream *s = sr->s;
	unsigned char *buf = malloc(65536);
	uint64_t last = UINT64_MAX;
	ssize_t n;
	while ((n = pp_read(s->o[sr->c][0], buf, 65536)) > 0)
		stream_take(s, sr->c, buf, (size_t)n, &last);
	if (n < 0)
		s->bad[sr->c]++;
	free(buf);
	return NULL;
}

static void *stream_thief(void *arg)
{
	struct stream *s = arg;
	unsigned char buf[1024];
	uint64_t last = UINT64_MAX;
	struct rng r;
	ssize_t n;
	rng_seed(&r, 99);
	for (;;) {
		n = pp_read(s->thief_end, buf, 16 * (1 + below(&r, 64)));
		if (n <= 0)
			break;
		stream_take(s, 3, buf, (size_t)n, &last);
		t_sleep_ms(0); /* yield-ish: steal some, not most */
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
	if (n < 0)
		s->bad[3]++;
	return NULL;
}

static void *stream_fanout(void *arg)
{
	struct stream *s = arg;
	struct pp_end *outs[3] = { s->o[0][1], s->o[1][1], s->o[2][1] };
	struct rng r;
	ssize_t n;
	rng_seed(&r, 55);
	for (;;) {
		size_t len = below(&r, 3) ? SIZE_MAX : 16 * (1 + below(&r, 2000));
		n = pp_fanout(s->src[0], outs, 3, len, 0);
		if (n <= 0)
			break;
		if (n % 16 || (size_t)n > len) {
			s->fan_err = n;
			break;
		}
	}
	if (n < 0)
		s->fan_err = -errno;
	for (int k = 0; k < 3; k++)
		pp_close(s->o[k][1]);
	return NULL;
}

static void fanout_stream(void)
{
	struct stream s;
	memset(&s, 0, sizeof s);
	long mb = t_env_long("PP_SPLICE_STREAM_MB", t_scaled(T_SANITIZED ? 16 : 64));
	s.nrec = (size_t)mb * 1048576 / 16;
	CHECK_EQ(pp_pipe(s.src, 0), 0);
	s.thief_end = pp_dup(s.src[0]);
	CHECK(s.thief_end != NULL);
	for (int k = 0; k < 3; k++)
		CHECK_EQ(pp_pipe(s.o[k], 0), 0);
	for (int c = 0; c < 4; c++)
		s.seen[c] = calloc(s.nrec / 8 + 1, 1);
	pthread_t w, f, t, rd[3];
	struct stream_reader sr[3];
	pthread_create(&w, NULL, stream_writer, &s);
	pthread_create(&f, NULL, stream_fanout, &s);
	pthread_create(&t, NULL, stream_thief, &s);
	for (int k = 0; k < 3; k++) {
		sr[k].s = &s;
		sr[k].c = k;
		pthread_create(&rd[k], NULL, stream_reader, &sr[k]);
	}
	double t0 = t_now();
	pthread_join(w, NULL);
	pthread_join(f, NULL);
	pthread_join(t, NULL);
	for (int k = 0; k < 3; k++)
		pthread_join(rd[k], NULL);
	double secs = t_now() - t0;

	CHECK_EQ(s.fan_err, 0);
	for (int c = 0; c < 4; c++)
		CHECK_EQ(s.bad[c], 0);
	CHECK_EQ(s.got[0], s.got[1]);
	CHECK_EQ(s.got[0], s.got[2]);
	CHECK(s.sum[0] == s.sum[1] && s.sum[0] == s.sum[2]);
	CHECK_EQ(s.got[0] + s.got[3], s.nrec);
	size_t both = 0, neither = 0, unequal = 0;
	for (size_t i = 0; i < s.nrec / 8 + 1; i++) {
		uint8_t o0 = s.seen[0][i], th = s.seen[3][i];
		if (o0 != s.seen[1][i] || o0 != s.seen[2][i])
			unequal++;
		both += (o0 & th) != 0;
		uint8_t all = (i == s.nrec / 8) ? (uint8_t)((1u << (s.nrec % 8)) - 1) : 0xff;
		neither += ((o0 | th) & all) != all;
	}
	CHECK_EQ(unequal, 0);
	CHECK_EQ(both, 0);
	CHECK_EQ(neither, 0);
	if (getenv("PP_SPLICE_VERBOSE"))
		fprintf(stderr, "stream: %ld MiB in %.2f s, thief took %zu of %zu records\n", mb,
		        secs, s.got[3], s.nrec);
	pp_close(s.thief_end);
	pp_close(s.src[0]);
	for (int k = 0; k < 3; k++)
		pp_close(s.o[k][0]);
	for (int c = 0; c < 4; c++)
		free(s.seen[c]);
	CHECK_EQ(pages_in_use(), 0);
}

/* ---- errors ---------------------------------------------------------------- */

static void errors(void)
{
	struct pp_end *a[2], *b[2], *c[2];
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(b, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(c, PP_NONBLOCK), 0);
	CHECK_EQ(pp_write(a[1], "hello", 5), 5);
	struct pp_end *none = TP_HIDE((struct pp_end *)NULL);

	/* wrong sides and NULL */
	CHECK_ERR(pp_splice(none, b[1], 5, 0), EBADF);
	CHECK_ERR(pp_splice(a[0], none, 5, 0), EBADF);
	CHECK_ERR(pp_splice(a[1], b[1], 5, 0), EBADF);
	CHECK_ERR(pp_splice(a[0], b[0], 5, 0), EBADF);
	CHECK_ERR(pp_splice(a[1], b[0], 5, 0), EBADF);
	CHECK_ERR(pp_tee(none, b[1], 5, 0), EBADF);
	CHECK_ERR(pp_tee(a[0], none, 5, 0), EBADF);
	CHECK_ERR(pp_tee(a[1], b[1], 5, 0), EBADF);
	CHECK_ERR(pp_tee(a[0], b[0], 5, 0), EBADF);
	struct pp_end *o1[2] = { b[1], c[0] }, *o2[2] = { b[1], none };
	CHECK_ERR(pp_fanout(a[0], o1, 2, 5, 0), EBADF);
	CHECK_ERR(pp_fanout(a[0], o2, 2, 5, 0), EBADF);
	CHECK_ERR(pp_fanout(a[1], o1, 1, 5, 0), EBADF);
	CHECK_ERR(pp_fanout(none, o1, 1, 5, 0), EBADF);

	/* the same pipe */
	struct pp_end *a1dup = pp_dup(a[1]);
	CHECK(a1dup != NULL);
	CHECK_ERR(pp_splice(a[0], a[1], 5, 0), EINVAL);
	CHECK_ERR(pp_splice(a[0], a1dup, 5, 0), EINVAL);
	CHECK_ERR(pp_tee(a[0], a[1], 5, 0), EINVAL);
	CHECK_ERR(pp_splice(a[0], a[1], 5, PP_SPLICE_NONBLOCK), EINVAL);
	struct pp_end *self[2] = { b[1], a1dup };
	CHECK_ERR(pp_fanout(a[0], self, 2, 5, 0), EINVAL);

	/* fanout counts and duplicates */
	struct pp_end *many[66];
	struct pp_end *mp[66][2];
	for (int i = 0; i < 66; i++) {
		CHECK_EQ(pp_pipe(mp[i], PP_NONBLOCK), 0);
		many[i] = mp[i][1];
	}
	CHECK_ERR(pp_fanout(a[0], many, 0, 5, 0), EINVAL);
	CHECK_ERR(pp_fanout(a[0], many, -1, 5, 0), EINVAL);
	CHECK_ERR(pp_fanout(a[0], many, 65, 5, 0), EINVAL);
	CHECK_EQ(pp_nread(a[0]), 5);
	struct pp_end *b1dup = pp_dup(b[1]);
	struct pp_end *dup1[3] = { b[1], c[1], b[1] }, *dup2[2] = { b1dup, b[1] };
	CHECK_ERR(pp_fanout(a[0], dup1, 3, 5, 0), EINVAL);
	CHECK_ERR(pp_fanout(a[0], dup2, 2, 5, 0), EINVAL);

	/* unknown flags */
	CHECK_ERR(pp_splice(a[0], b[1], 5, 0x10), EINVAL);
	CHECK_ERR(pp_tee(a[0], b[1], 5, 0x100), EINVAL);
	CHECK_ERR(pp_fanout(a[0], many, 2, 5, 0x80000000u), EINVAL);

	/* outs NULL */
	CHECK_ERR(pp_fanout(a[0], TP_HIDE((struct pp_end *const *)NULL), 1, 5, 0), EFAULT);

	/* a closed handle (still in quarantine) */
	struct pp_end *gone = pp_dup(c[1]);
	CHECK_EQ(pp_close(gone), 0);
	CHECK_ERR(pp_splice(a[0], gone, 5, 0), EBADF);

	/* none of that moved a byte */
	CHECK_EQ(pp_nread(a[0]), 5);
	CHECK_EQ(pp_nread(b[0]), 0);
	for (int i = 0; i < 66; i++)
		CHECK_EQ(pp_nread(mp[i][0]), 0);

	/* 64 outputs is allowed */
	CHECK_EQ(pp_fanout(a[0], many, 64, 5, 0), 5);
	CHECK_EQ(pages_in_use(), 1);
	for (int i = 0; i < 64; i++) {
		char buf[8];
		CHECK_EQ(pp_read(mp[i][0], buf, sizeof buf), 5);
		CHECK_EQ(memcmp(buf, "hello", 5), 0);
	}
	CHECK_EQ(pages_in_use(), 0);

	/* peek / consume */
	struct iovec iov[4];
	CHECK_ERR(pp_peek(a[1], iov, 4), EBADF);
	CHECK_ERR(pp_peek(none, iov, 4), EBADF);
	CHECK_ERR(pp_peek(a[0], iov, -1), EINVAL);
	CHECK_ERR(pp_peek(a[0], iov, IOV_MAX + 1), EINVAL);
	CHECK_ERR(pp_peek(a[0], TP_HIDE((struct iovec *)NULL), 4), EFAULT);
	CHECK_ERR(pp_consume(a[1], 0), EBADF);
	CHECK_ERR(pp_consume(none, 0), EBADF);

	pp_close(a1dup);
	pp_close(b1dup);
	for (int i = 0; i < 66; i++) {
		pp_close(mp[i][0]);
		pp_close(mp[i][1]);
	}
	struct pp_end **all[] = { a, b, c };
	for (int i = 0; i < 3; i++) {
		pp_close(all[i][0]);
		pp_close(all[i][1]);
	}
	CHECK_EQ(pages_in_use(), 0);
}

/*
 * Linux checks a zero length first: splice(2) returns 0 for len 0 before
 * looking at its flags or descriptors; tee(2) checks its flags, then
 * returns 0 for len 0.  With a length, splice(2) and tee(2) check the
 * flags before the descriptors.  (pp_fanout has no kernel counterpart.)
 */
static void zero_length_and_check_order(void)
{
	if (t_valgrind())
		SKIP("valgrind fails splice(2) and tee(2) on a bad descriptor with EBADF before the kernel checks len and flags");
	int ka[2], kb[2];
	struct pp_end *pa[2], *pb[2];
	struct pp_end *none = TP_HIDE((struct pp_end *)NULL);
	CHECK_EQ(pipe2(ka, O_NONBLOCK), 0);
	CHECK_EQ(pipe2(kb, O_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(pa, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(pb, PP_NONBLOCK), 0);
	struct {
		const char *what;
		long k, p;
	} c[] = {
		{ "splice(bad in, out, 0, 0)", res(splice(TP_HIDE(-1), NULL, kb[1], NULL, 0, 0)),
		  res(pp_splice(none, pb[1], 0, 0)) },
		{ "splice(in, write end of in, 0, 0)", res(splice(ka[0], NULL, ka[1], NULL, 0, 0)),
		  res(pp_splice(pa[0], pa[1], 0, 0)) },
		{ "splice(in, out, 0, unknown flag)",
		  res(splice(ka[0], NULL, kb[1], NULL, 0, TP_HIDE(0x100u))),
		  res(pp_splice(pa[0], pb[1], 0, 0x100)) },
		{ "tee(bad in, out, 0, 0)", res(tee(TP_HIDE(-1), kb[1], 0, 0)),
		  res(pp_tee(none, pb[1], 0, 0)) },
		{ "tee(in, write end of in, 0, 0)", res(tee(ka[0], ka[1], 0, 0)),
		  res(pp_tee(pa[0], pa[1], 0, 0)) },
		{ "tee(in, out, 0, unknown flag)", res(tee(ka[0], kb[1], 0, TP_HIDE(0x100u))),
		  res(pp_tee(pa[0], pb[1], 0, 0x100)) },
		{ "splice(bad in, out, 1, unknown flag)",
		  res(splice(TP_HIDE(-1), NULL, kb[1], NULL, 1, TP_HIDE(0x100u))),
		  res(pp_splice(none, pb[1], 1, 0x100)) },
		{ "tee(bad in, out, 1, unknown flag)", res(tee(TP_HIDE(-1), kb[1], 1, TP_HIDE(0x100u))),
		  res(pp_tee(none, pb[1], 1, 0x100)) },
		{ "splice(in, write end of in, 1, 0)", res(splice(ka[0], NULL, ka[1], NULL, 1, 0)),
		  res(pp_splice(pa[0], pa[1], 1, 0)) },
		{ "splice(write end, out, 1, 0)", res(splice(ka[1], NULL, kb[1], NULL, 1, 0)),
		  res(pp_splice(pa[1], pb[1], 1, 0)) },
		{ "tee(in, read end, 1, 0)", res(tee(ka[0], kb[0], 1, 0)), res(pp_tee(pa[0], pb[0], 1, 0)) },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
		if (c[i].k != c[i].p) {
			char x[64], y[64];
			fprintf(stderr, "%s: kernel %s, pagepipe %s\n", c[i].what,
			        res_str(c[i].k, x, sizeof x), res_str(c[i].p, y, sizeof y));
			t_case_failed = 1;
		}
	close(ka[0]);
	close(ka[1]);
	close(kb[0]);
	close(kb[1]);
	pp_close(pa[0]);
	pp_close(pa[1]);
	pp_close(pb[0]);
	pp_close(pb[1]);
}

/*
 * Which answer wins when several apply, compared with the kernel for
 * splice and tee (non-blocking): an empty input with a writer waits
 * (EAGAIN) even when the output has no reader; a full output waits, or is
 * EPIPE without a reader, even at end of input; an output without reader
 * is EPIPE (with SIGPIPE) before end of input is 0.
 */
enum { S_EMPTY_EOF, S_EMPTY_EOF_NORD, S_EMPTY_EOF_FULL, S_EMPTY_EOF_FULL_NORD,
       S_EMPTY_NORD, S_DATA_NORD, S_DATA_FULL, S_DATA_EOF, S_COUNT };

static long order_scenario(int kernel, int tee_it, int sc, int *sig)
{
	struct tp a, b;
	char page[PG];
	memset(page, 'o', sizeof page);
	CHECK_EQ(tp_open(&a, kernel, PP_NONBLOCK), 0);
	CHECK_EQ(tp_open(&b, kernel, PP_NONBLOCK), 0);
	if (sc >= S_DATA_NORD)
		CHECK_EQ(tp_write(&a, page, 10), 10);
	if (sc != S_EMPTY_NORD && sc != S_DATA_NORD && sc != S_DATA_FULL)
		tp_close_end(&a, 1);
	if (sc == S_EMPTY_EOF_FULL || sc == S_EMPTY_EOF_FULL_NORD || sc == S_DATA_FULL) {
		CHECK_EQ(tp_setsize(&b, 1, PG), PG);
		CHECK_EQ(tp_write(&b, page, PG), PG);
	}
	if (sc == S_EMPTY_EOF_NORD || sc == S_EMPTY_EOF_FULL_NORD || sc == S_EMPTY_NORD ||
	    sc == S_DATA_NORD)
		tp_close_end(&b, 0);
	sigpipe_taken();
	long r;
	if (kernel)
		r = tee_it ? res(tee(a.fd[0], b.fd[1], 100, SPLICE_F_NONBLOCK))
		           : res(splice(a.fd[0], NULL, b.fd[1], NULL, 100, SPLICE_F_NONBLOCK));
	else
		r = tee_it ? res(pp_tee(a.e[0], b.e[1], 100, PP_SPLICE_NONBLOCK))
		           : res(pp_splice(a.e[0], b.e[1], 100, PP_SPLICE_NONBLOCK));
	*sig = sigpipe_taken();
	tp_close(&a);
	tp_close(&b);
	return r;
}

static void eof_epipe_eagain_order(void)
{
	static const long want[S_COUNT] = { 0, -EPIPE, -EAGAIN, -EPIPE, -EAGAIN, -EPIPE, -EAGAIN, 10 };
	static const char *const name[S_COUNT] = {
		"empty, no writer", "empty, no writer; output without reader",
		"empty, no writer; output full", "empty, no writer; output full without reader",
		"empty with writer; output without reader", "data; output without reader",
		"data; output full", "data, no writer",
	};
	sigset_t old;
	block_sigpipe(&old);
	for (int tee_it = 0; tee_it < 2; tee_it++)
		for (int sc = 0; sc < S_COUNT; sc++) {
			int ksig, psig;
			long k = order_scenario(1, tee_it, sc, &ksig);
			long p = order_scenario(0, tee_it, sc, &psig);
			if (k != p || ksig != psig || p != want[sc] || psig != (want[sc] == -EPIPE)) {
				char x[64], y[64];
				fprintf(stderr, "%s, %s: kernel %s%s, pagepipe %s%s\n",
				        tee_it ? "tee" : "splice", name[sc], res_str(k, x, sizeof x),
				        ksig ? " +SIGPIPE" : "", res_str(p, y, sizeof y),
				        psig ? " +SIGPIPE" : "");
				t_case_failed = 1;
			}
		}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	CHECK_EQ(pages_in_use(), 0);
}

/* What poll would say after a splice, compared with a kernel pipe: data
 * arrived in the destination, room appeared in the source. */
static void events_after_splice(void)
{
	int ev[2][4];
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		char page[PG];
		memset(page, 'e', sizeof page);
		CHECK_EQ(tp_open(&a, kernel, PP_NONBLOCK), 0);
		CHECK_EQ(tp_open(&b, kernel, PP_NONBLOCK), 0);
		CHECK_EQ(tp_setsize(&a, 1, 4096), 4096);
		CHECK_EQ(tp_write(&a, page, PG), PG);
		ev[kernel][0] = tp_events(&a, 1);
		ev[kernel][1] = tp_events(&b, 0);
		ssize_t r = kernel ? splice(a.fd[0], NULL, b.fd[1], NULL, 100, 0)
		                   : pp_splice(a.e[0], b.e[1], 100, 0);
		KCHECK_EQ(kernel, r, 100);
		r = kernel ? splice(a.fd[0], NULL, b.fd[1], NULL, 5000, 0)
		           : pp_splice(a.e[0], b.e[1], 5000, 0);
		KCHECK_EQ(kernel, r, PG - 100);
		ev[kernel][2] = tp_events(&a, 1);
		ev[kernel][3] = tp_events(&b, 0);
		tp_close(&a);
		tp_close(&b);
	}
	for (int i = 0; i < 4; i++)
		CHECK_EQ(ev[0][i], ev[1][i]);
	CHECK_EQ(ev[0][2] & POLLOUT, POLLOUT);
	CHECK_EQ(ev[0][3] & POLLIN, POLLIN);
	CHECK_EQ(pages_in_use(), 0);
}

/* ---- peek / consume ---------------------------------------------------------- */

static void peek_consume(void)
{
	struct pp_end *a[2], *b[2];
	struct iovec iov[8];
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(b, PP_NONBLOCK), 0);

	CHECK_ERR(pp_peek(a[0], iov, 8), EAGAIN);
	CHECK_EQ(pp_peek(a[0], iov, 0), 0);
	CHECK_EQ(pp_consume(a[0], 0), 0);
	CHECK_ERR(pp_consume(a[0], 1), EINVAL);

	/* 100; then 5000: its first 904 bytes merge into that buffer, 4096
	 * take a page; then 3000, which fits nowhere: buffers of 1004, 4096
	 * and 3000 bytes */
	put(a[1], 100, 1, 0);
	put(a[1], 5000, 1, 100);
	put(a[1], 3000, 1, 5100);
	CHECK_EQ(pages_in_use(), 3);
	CHECK_EQ(pp_peek(a[0], iov, 8), 3);
	CHECK_EQ(iov[0].iov_len, 1004);
	CHECK_EQ(iov[1].iov_len, 4096);
	CHECK_EQ(iov[2].iov_len, 3000);
	CHECK_EQ(pp_nread(a[0]), 8100);
	size_t off = 0;
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(tp_verify(iov[k].iov_base, iov[k].iov_len, 1, off), -1);
		off += iov[k].iov_len;
	}
	/* peeking does not consume; max limits the segments */
	CHECK_EQ(pp_peek(a[0], iov, 1), 1);
	CHECK_EQ(iov[0].iov_len, 1004);
	CHECK_EQ(pp_nread(a[0]), 8100);

	/* consume part of the first segment: no page freed */
	CHECK_EQ(pp_consume(a[0], 4), 4);
	CHECK_EQ(pages_in_use(), 3);
	CHECK_EQ(pp_peek(a[0], iov, 8), 3);
	CHECK_EQ(iov[0].iov_len, 1000);
	CHECK_EQ(tp_verify(iov[0].iov_base, 1000, 1, 4), -1);
	/* more than there is: EINVAL, nothing consumed */
	CHECK_ERR(pp_consume(a[0], 8100 - 4 + 1), EINVAL);
	CHECK_EQ(pp_nread(a[0]), 8096);
	/* the rest of the first segment: its page goes */
	CHECK_EQ(pp_consume(a[0], 1000), 1000);
	CHECK_EQ(pages_in_use(), 2);
	CHECK_EQ(pp_peek(a[0], iov, 8), 2);
	CHECK_EQ(tp_verify(iov[0].iov_base, 4096, 1, 1004), -1);
	/* a write that merges into the last buffer leaves the segment held
	 * for it as it was; a new peek shows the longer buffer */
	unsigned char keep[3000];
	void *last_base = iov[1].iov_base;
	memcpy(keep, iov[1].iov_base, 3000);
	put(a[1], 7, 2, 0);
	CHECK_EQ(pages_in_use(), 2);
	CHECK_EQ(memcmp(keep, last_base, 3000), 0);
	CHECK_EQ(pp_peek(a[0], iov, 8), 2);
	CHECK_EQ(iov[1].iov_len, 3007);
	CHECK(iov[1].iov_base == last_base);
	CHECK_EQ(tp_verify((unsigned char *)iov[1].iov_base + 3000, 7, 2, 0), -1);
	/* a read picks up where consume left off */
	unsigned char buf[16];
	CHECK_EQ(pp_read(a[0], buf, 16), 16);
	CHECK_EQ(tp_verify(buf, 16, 1, 1004), -1);
	CHECK_EQ(pp_consume(a[0], 4096 - 16 + 3007), 4096 - 16 + 3007);
	CHECK_EQ(pages_in_use(), 0);
	CHECK_ERR(pp_peek(a[0], iov, 8), EAGAIN);

	/* zero copy: a tee'd segment is the same memory in both pipes, and a
	 * moved one is where it was */
	put(a[1], 300, 3, 0);
	CHECK_EQ(pp_peek(a[0], iov, 8), 1);
	void *where = iov[0].iov_base;
	CHECK_EQ(pp_tee(a[0], b[1], 100, 0), 100);
	CHECK_EQ(pp_peek(b[0], iov, 8), 1);
	CHECK(iov[0].iov_base == where);
	CHECK_EQ(iov[0].iov_len, 100);
	CHECK_EQ(pp_consume(b[0], 100), 100);
	CHECK_EQ(pp_splice(a[0], b[1], SIZE_MAX, 0), 300);
	CHECK_EQ(pp_peek(b[0], iov, 8), 1);
	CHECK(iov[0].iov_base == where);
	CHECK_EQ(tp_verify(iov[0].iov_base, 300, 3, 0), -1);

	/* packets: one segment each; a consumed part leaves the rest */
	struct pp_end *p[2];
	CHECK_EQ(pp_pipe(p, PP_NONBLOCK | PP_PACKET), 0);
	put(p[1], 10, 4, 0);
	put(p[1], 20, 4, 10);
	CHECK_EQ(pp_peek(p[0], iov, 8), 2);
	CHECK_EQ(iov[0].iov_len, 10);
	CHECK_EQ(iov[1].iov_len, 20);
	CHECK_EQ(pp_consume(p[0], 15), 15);
	CHECK_EQ(pp_peek(p[0], iov, 8), 1);
	CHECK_EQ(iov[0].iov_len, 15);
	CHECK_EQ(pp_read(p[0], buf, 16), 15);
	CHECK_EQ(tp_verify(buf, 15, 4, 15), -1);

	/* end of file: 0 */
	pp_close(p[1]);
	CHECK_EQ(pp_peek(p[0], iov, 8), 0);
	pp_close(p[0]);
	pp_close(a[1]);
	CHECK_EQ(pp_peek(a[0], iov, 8), 0);
	CHECK_EQ(pp_consume(a[0], 0), 0);
	pp_close(a[0]);
	pp_close(b[0]);
	pp_close(b[1]);
	CHECK_EQ(pages_in_use(), 0);

	/* a blocking peek waits for data */
	struct pp_end *c[2];
	CHECK_EQ(pp_pipe(c, 0), 0);
	struct job *j = job_new(J_PEEK, NULL, NULL, 0, 0);
	j->fin = c[0];
	CHECK(job_start(j));
	put(c[1], 42, 5, 0);
	CHECK(job_wait(j, 5));
	job_join(j);
	CHECK_EQ(job_res(j), 1);
	CHECK_EQ(j->iov[0].iov_len, 42);
	CHECK_EQ(tp_verify(j->iov[0].iov_base, 42, 5, 0), -1);
	CHECK_EQ(pp_consume(c[0], 42), 42);
	/* and returns 0 when the writer closes */
	CHECK(job_start(j));
	pp_close(c[1]);
	CHECK(job_wait(j, 5));
	job_join(j);
	CHECK_EQ(job_res(j), 0);
	free(j);
	pp_close(c[0]);
	CHECK_EQ(pages_in_use(), 0);
}

int main(void)
{
	g_pool = malloc(POOLSZ);
	g_exp = malloc(BIGBUF);
	g_got = malloc(BIGBUF);
	g_kgot = malloc(BIGBUF);
	if (!g_pool || !g_exp || !g_got || !g_kgot)
		return 2;
	struct rng r;
	rng_seed(&r, 2024);
	for (size_t i = 0; i < POOLSZ; i++)
		g_pool[i] = (unsigned char)(rnd(&r) >> 56);

	RUN(errors);
	RUN(zero_length_and_check_order);
	RUN(fanout_tee_share_pages);
	RUN(isolation_after_tee);
	RUN(isolation_after_partial_splice);
	RUN(isolation_after_fanout);
	RUN(moved_buffer_merges);
	RUN(peek_consume);
	RUN(eof_epipe_eagain_order);
	RUN(events_after_splice);
	RUN(nonblocking_ends);
	RUN(blocking_wakes_for_data);
	RUN(blocking_wakes_for_room);
	RUN(blocking_eof_and_epipe);
	RUN(blocking_signals);
	RUN(blocking_splice_passes_wake_to_reader);
	RUN(blocking_splice_passes_wake_to_writer);
	RUN(fanout_stream);
	RUN(random_model);
	RUN(random_vs_kernel);

	free(g_pool);
	free(g_exp);
	free(g_got);
	free(g_kgot);
	return T_DONE();
}
