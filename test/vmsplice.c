/*
 * vmsplice.c - pp_vmsplice: the caller's memory goes into a pipe by
 * reference and comes back through the release callback.
 *
 * What the contract in pagepipe.h promises, case by case:
 *   random_layouts_model     random segment layouts (0-length, 1, 4095, 4096,
 *                            4097, 100 KiB, random; unaligned bases; NULL
 *                            bases of length 0) go into a pipe, then random
 *                            reads, splices, tees and fan-outs between three
 *                            pipes move them about.  A model tracks which
 *                            stream bytes every pipe holds: every byte read
 *                            must be the caller's, and after every step the
 *                            released segments must be exactly those whose
 *                            every copy has been consumed, each released once
 *                            with its own base and full length; no pool page
 *                            is ever in use.
 *   release_after_tee        a pp_tee copy holds the memory: no release until
 *                            both pipes are drained, then one per segment,
 *                            at the exact read that drains its last chunk.
 *   release_after_fanout     the same with pp_fanout to three pipes.
 *   release_after_splice_chain  pp_splice on to a second and third pipe, also
 *                            splitting a chunk between two pipes.
 *   nonblock_partial_splice_flag / nonblock_partial_end_flag
 *                            a nearly full pipe takes part of a vmsplice with
 *                            PP_SPLICE_NONBLOCK, or through a PP_NONBLOCK end:
 *                            the count is what went in and release covers
 *                            only that part of each segment.
 *   full_pipe_eagain_no_release  EAGAIN on a full pipe (also when the last
 *                            buffer has room a write could merge into: a
 *                            vmsplice needs a slot); no release ever follows.
 *   contract_reader_sees_caller_changes  documents the zero-copy contract:
 *                            the bytes are not copied, so a change to the
 *                            caller's memory before release IS what the
 *                            reader (and a tee'd copy) gets.  Callers must not
 *                            do this; the test proves there is no copy.
 *   writes_never_touch_caller_memory  small writes that would merge into the
 *                            last buffer, after vmsplice, after a whole-buffer
 *                            splice and after a tee, never write into the
 *                            caller's memory (guard bytes around it checked).
 *   blocking_wakes_when_reader_drains  a vmsplice blocked on a full pipe
 *                            returns once a reader thread drains it; a 1 MiB
 *                            segment goes through a 64 KiB pipe.
 *   blocked_vmsplice_passes_writer_wake  a vmsplice and then a write sleep on
 *                            a full pipe; one read empties it: both must
 *                            finish (a woken writer that leaves room must
 *                            pass the wake on, as pp_write does).
 *   epipe_and_sigpipe        no reader: EPIPE and SIGPIPE, or EPIPE alone with
 *                            PP_NOSIGPIPE; only empty segments: 0 and no
 *                            signal (as the kernel); no release.
 *   reader_closes_while_blocked  a blocked vmsplice with part placed returns
 *                            that part when the reader goes, with SIGPIPE
 *                            unless PP_NOSIGPIPE; release covers that part.
 *   eintr_nothing_placed     a handler interrupts a vmsplice that placed
 *                            nothing: EINTR and no release.
 *   close_releases           closing the last end of a pipe (and of a pipe a
 *                            tee shared the memory with) calls release; a
 *                            read end closed alone, or a dup left open, does
 *                            not free the data.
 *   errors                   EBADF (read end, NULL, closed), EINVAL (n >
 *                            IOV_MAX, unknown flags), EFAULT (iov NULL with
 *                            n > 0, a NULL base with non-zero length; after
 *                            placed segments it returns their count).
 *   no_pool_pages            vmspliced data takes no pool page, even tee'd and
 *                            spliced; a later 1-byte write takes a fresh one.
 *   arg_and_null_release     each call's callback gets its own arg; a NULL
 *                            release is allowed.
 *   threaded_producer        the classic zero-copy producer: a ring of 8
 *                            buffers, each reused only after its release,
 *                            64 MiB through a 1 MiB pipe (so the producer
 *                            waits for releases, not room) to a consumer
 *                            thread that checks every byte.
 * Early release is caught by scribbling: in the model, the A/B/C cases and
 * the producer, the callback overwrites the released memory at once (the
 * caller owns it again), so a release that comes before a reader has copied
 * the bytes out, even by a moment, shows as wrong data.
 * Every case ends with pages_in_use 0 and no callback with a foreign arg.
 * The harness's watchdog fails a hung case.  PP_VMSPLICE_MB sets the size
 * of the threaded run (default 64, times PP_TEST_SCALE).
 */
#include "harness/harness.h"
#include "pagepipe.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static size_t rnd_below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static void fill_random(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(rnd() >> 24);
}

static long pool_in_use(void)
{
	struct pp_pool_stats st;
	if (pp_pool_stats(&st) != 0)
		return -1;
	return st.pages_in_use;
}

/* Callbacks that got an arg no test gave them. */
static atomic_int foreign_args;

/* The release log: what each callback call reported, in order. */
#define LOG_MAGIC 0x6c6f6721
#define LOG_MAX 512
struct rel_log {
	int magic;
	pthread_mutex_t mu;
	int count;
	struct iovec seg[LOG_MAX];
};

static void log_init(struct rel_log *l)
{
	l->magic = LOG_MAGIC;
	pthread_mutex_init(&l->mu, NULL);
	l->count = 0;
}

static void log_fini(struct rel_log *l)
{
	pthread_mutex_destroy(&l->mu);
	l->magic = 0;
}

static void on_release(void *arg, const struct iovec *iov)
{
	struct rel_log *l = arg;
	if (!l || l->magic != LOG_MAGIC || !iov) {
		atomic_fetch_add(&foreign_args, 1);
		return;
	}
	pthread_mutex_lock(&l->mu);
	if (l->count < LOG_MAX)
		l->seg[l->count] = *iov;
	l->count++;
	pthread_mutex_unlock(&l->mu);
}

/* The same, then poison the released bytes, as a caller reusing its
 * buffer at once would: a release that came before a reader copied the
 * bytes out shows as wrong data.  For callers that compare what they read
 * against a copy of their memory, never against the memory itself. */
static void on_release_poison(void *arg, const struct iovec *iov)
{
	on_release(arg, iov);
	if (iov && iov->iov_base)
		memset(iov->iov_base, 0xEE, iov->iov_len);
}

static int log_count(struct rel_log *l)
{
	pthread_mutex_lock(&l->mu);
	int n = l->count;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* Calls that reported base; *len gets the last one's length. */
static int log_calls_for(struct rel_log *l, const void *base, size_t *len)
{
	int n = 0;
	pthread_mutex_lock(&l->mu);
	for (int i = 0; i < l->count && i < LOG_MAX; i++)
		if (l->seg[i].iov_base == base) {
			n++;
			if (len)
				*len = l->seg[i].iov_len;
		}
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* CHECK that base was released exactly once, with length len. */
#define CHECK_RELEASED(l, base, len)                                          \
	do {                                                                     \
		size_t got_len_ = (size_t)-1;                                        \
		CHECK_EQ(log_calls_for((l), (base), &got_len_), 1);                  \
		CHECK_EQ(got_len_, (len));                                           \
	} while (0)

static int mkpipe(struct pp_end *p[2], int flags)
{
	p[0] = p[1] = NULL;
	int r = pp_pipe(p, flags);
	CHECK_EQ(r, 0);
	return r;
}

/* Read exactly n bytes (the pipe must hold them); the count read. */
static size_t read_n(struct pp_end *rd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pp_read(rd, (char *)buf + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Discard everything the pipe holds now; the bytes dropped. */
static size_t drain(struct pp_end *rd)
{
	static char sink[65536];
	size_t total = 0;
	int n;
	while ((n = pp_nread(rd)) > 0) {
		ssize_t r = pp_read(rd, sink, (size_t)n < sizeof sink ? (size_t)n : sizeof sink);
		if (r <= 0)
			break;
		total += (size_t)r;
	}
	return total;
}

/* Fill the pipe's slots with full pages, leaving `free_slots` free. */
static void fill_slots(struct pp_end *wr, int free_slots)
{
	static char page[4096];
	long slots = pp_getsize(wr) / 4096;
	for (long i = 0; i < slots - free_slots; i++)
		CHECK_EQ(pp_write(wr, page, sizeof page), 4096);
}

/* Linux thread state letter from /proc ('S' = asleep), or '?'. */
static char thread_state(pid_t tid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Wait until thread tid has been asleep for a while (past its spin), or
 * until *done; false when neither happened within 5 s. */
static bool wait_asleep(_Atomic pid_t *tidp, atomic_int *done)
{
	double end = t_now() + 5;
	int seen = 0;
	while (t_now() < end) {
		if (atomic_load(done))
			return true;
		pid_t tid = atomic_load(tidp);
		if (tid && thread_state(tid) == 'S') {
			if (++seen >= 5)
				return true;
		} else {
			seen = 0;
		}
		t_sleep_ms(2);
	}
	return false;
}

/* After every case (t_around_cases): no callback got a foreign arg, no
 * pool page is in use. */
static void vmsplice_case_end(void)
{
	CHECK_EQ(atomic_exchange(&foreign_args, 0), 0);
	CHECK_EQ(pool_in_use(), 0);
}

/* ---- random layouts, against a model -------------------------------- */

/*
 * Stream bytes are numbered in the order they went in.  A pipe of the
 * model holds a queue of stream ranges [lo, hi), oldest first; each
 * non-empty segment counts the copies of its bytes still unread in any
 * pipe (a tee or fan-out adds copies).  A segment is due for release when
 * that count reaches 0.
 */
#define M_PIPES 3
#define M_RANGES 4096
#define M_SEGS 12

struct mrange {
	size_t lo, hi;
};

struct mpipe {
	struct pp_end *e[2];
	struct mrange q[M_RANGES];
	int nq;
	size_t bytes;
};

struct model {
	struct mpipe p[M_PIPES];
	int nseg;
	unsigned char *mem[M_SEGS]; /* allocations */
	struct iovec iov[M_SEGS];   /* the segments */
	size_t start[M_SEGS];       /* stream offset of each segment */
	size_t unread[M_SEGS];      /* unread copies of its bytes, all pipes */
	unsigned char *stream;      /* the expected bytes */
	size_t total;
	struct rel_log log;
	int bad;
};

static bool mq_push(struct mpipe *p, size_t lo, size_t hi)
{
	if (lo == hi)
		return true;
	if (p->nq && p->q[p->nq - 1].hi == lo) {
		p->q[p->nq - 1].hi = hi;
	} else {
		if (p->nq == M_RANGES)
			return false;
		p->q[p->nq++] = (struct mrange){ lo, hi };
	}
	p->bytes += hi - lo;
	return true;
}

/* Copy the first n bytes' ranges of src's queue to dst (src keeps them). */
static bool mq_copy_front(struct mpipe *src, struct mpipe *dst, size_t n)
{
	for (int i = 0; i < src->nq && n; i++) {
		size_t len = src->q[i].hi - src->q[i].lo;
		size_t take = len < n ? len : n;
		if (!mq_push(dst, src->q[i].lo, src->q[i].lo + take))
			return false;
		n -= take;
	}
	return n == 0;
}

/* Remove the first n bytes of p's queue, into out[] (*nout ranges). */
static void mq_pop(struct mpipe *p, size_t n, struct mrange *out, int *nout)
{
	*nout = 0;
	while (n && p->nq) {
		struct mrange *r = &p->q[0];
		size_t len = r->hi - r->lo;
		size_t take = len < n ? len : n;
		if (out)
			out[(*nout)++] = (struct mrange){ r->lo, r->lo + take };
		r->lo += take;
		n -= take;
		p->bytes -= take;
		if (r->lo == r->hi) {
			memmove(&p->q[0], &p->q[1], (size_t)(p->nq - 1) * sizeof p->q[0]);
			p->nq--;
		}
	}
}

/* Bytes [lo, hi) of the stream were read once: count them off. */
static void model_consumed(struct model *m, size_t lo, size_t hi)
{
	for (int j = 0; j < m->nseg; j++) {
		size_t a = m->start[j], b = a + m->iov[j].iov_len;
		size_t x = lo > a ? lo : a, y = hi < b ? hi : b;
		if (x < y)
			m->unread[j] -= y - x;
	}
}

/* After each step: released = exactly the segments with nothing unread. */
static void model_check_releases(struct model *m, const char *step)
{
	int due = 0;
	for (int j = 0; j < m->nseg; j++) {
		if (!m->iov[j].iov_len)
			continue;
		size_t len = 0;
		int calls = log_calls_for(&m->log, m->iov[j].iov_base, &len);
		if (m->unread[j] == 0) {
			due++;
			if (calls != 1 || len != m->iov[j].iov_len) {
				fprintf(stderr, "after %s: segment %d (len %zu) released %d times, len %zu\n",
				        step, j, m->iov[j].iov_len, calls, len);
				m->bad++;
			}
		} else if (calls) {
			fprintf(stderr, "after %s: segment %d released with %zu bytes unread\n",
			        step, j, m->unread[j]);
			m->bad++;
		}
	}
	if (log_count(&m->log) != due) {
		fprintf(stderr, "after %s: %d release calls, %d due\n", step,
		        log_count(&m->log), due);
		m->bad++;
	}
	if (pool_in_use() != 0) {
		fprintf(stderr, "after %s: %ld pool pages in use\n", step, pool_in_use());
		m->bad++;
	}
}

static size_t pick_len(void)
{
	static const size_t lens[] = { 0, 1, 4095, 4096, 4097, 102400, 2, 8191, 8193 };
	switch (rnd_below(4)) {
	case 0:
		return rnd_below(9000);
	case 1:
		return rnd_below(4);
	default:
		return lens[rnd_below(sizeof lens / sizeof lens[0])];
	}
}

static void model_read(struct model *m, int pi, size_t want)
{
	static unsigned char buf[1 << 20];
	struct mpipe *p = &m->p[pi];
	static struct mrange got[M_RANGES];
	int ngot;
	if (want > sizeof buf)
		want = sizeof buf;
	ssize_t r = pp_read(p->e[0], buf, want);
	size_t expect = p->bytes < want ? p->bytes : want;
	if (r != (ssize_t)expect) {
		fprintf(stderr, "read %zu from pipe %d holding %zu: got %zd\n", want, pi, p->bytes, r);
		m->bad++;
		return;
	}
	mq_pop(p, (size_t)r, got, &ngot);
	size_t at = 0;
	for (int i = 0; i < ngot; i++) {
		size_t len = got[i].hi - got[i].lo;
		if (memcmp(buf + at, m->stream + got[i].lo, len) != 0) {
			fprintf(stderr, "pipe %d: wrong bytes for stream [%zu, %zu)\n", pi,
			        got[i].lo, got[i].hi);
			m->bad++;
		}
		model_consumed(m, got[i].lo, got[i].hi);
		at += len;
	}
}

static void model_move(struct model *m, int from, const int *to, int nto, size_t len, int op)
{
	struct pp_end *outs[M_PIPES];
	for (int i = 0; i < nto; i++)
		outs[i] = m->p[to[i]].e[1];
	ssize_t r;
	if (op == 0)
		r = pp_splice(m->p[from].e[0], outs[0], len, PP_SPLICE_NONBLOCK);
	else if (op == 1)
		r = pp_tee(m->p[from].e[0], outs[0], len, PP_SPLICE_NONBLOCK);
	else
		r = pp_fanout(m->p[from].e[0], outs, nto, len, PP_SPLICE_NONBLOCK);
	if (r < 0) {
		if (errno != EAGAIN) {
			fprintf(stderr, "op %d from %d: errno %d\n", op, from, errno);
			m->bad++;
		}
		return;
	}
	if (r == 0 || (size_t)r > len || (size_t)r > m->p[from].bytes) {
		fprintf(stderr, "op %d of %zu from pipe %d holding %zu moved %zd\n", op, len,
		        from, m->p[from].bytes, r);
		m->bad++;
		return;
	}
	for (int i = 0; i < nto; i++) {
		if (!mq_copy_front(&m->p[from], &m->p[to[i]], (size_t)r)) {
			m->bad++;
			return;
		}
	}
	/* A tee leaves the source alone and adds one copy; splice and fan-out
	 * take the bytes out of the source and add nto - 1 copies. */
	int extra = op == 1 ? 1 : nto - 1;
	struct mrange moved[M_RANGES];
	int nmoved = 0;
	if (op == 1) {
		size_t n = (size_t)r;
		for (int i = 0; i < m->p[from].nq && n; i++) {
			size_t l = m->p[from].q[i].hi - m->p[from].q[i].lo;
			size_t take = l < n ? l : n;
			moved[nmoved++] = (struct mrange){ m->p[from].q[i].lo, m->p[from].q[i].lo + take };
			n -= take;
		}
	} else {
		mq_pop(&m->p[from], (size_t)r, moved, &nmoved);
	}
	for (int i = 0; i < nmoved; i++)
		for (int j = 0; j < m->nseg; j++) {
			size_t a = m->start[j], b = a + m->iov[j].iov_len;
			size_t x = moved[i].lo > a ? moved[i].lo : a;
			size_t y = moved[i].hi < b ? moved[i].hi : b;
			if (x < y)
				m->unread[j] += (y - x) * (size_t)extra;
		}
}

static size_t pick_io_len(void)
{
	static const size_t lens[] = { 1, 7, 100, 4095, 4096, 4097, 65536, 1 << 20 };
	return rnd_below(3) ? lens[rnd_below(sizeof lens / sizeof lens[0])] : 1 + rnd_below(20000);
}

static void model_iteration(struct model *m)
{
	size_t chunks;
	do {
		m->nseg = 1 + (int)rnd_below(M_SEGS);
		chunks = 0;
		m->total = 0;
		for (int j = 0; j < m->nseg; j++) {
			size_t len = pick_len();
			m->iov[j].iov_len = len;
			m->start[j] = m->total;
			m->total += len;
			chunks += (len + 4095) / 4096;
		}
	} while (chunks > 256);

	m->stream = malloc(m->total ? m->total : 1);
	for (int j = 0; j < m->nseg; j++) {
		size_t len = m->iov[j].iov_len;
		size_t skew = rnd_below(64);
		m->mem[j] = malloc(len + 64);
		if (!len && rnd_below(2)) {
			m->iov[j].iov_base = NULL; /* allowed for an empty segment */
		} else {
			m->iov[j].iov_base = m->mem[j] + skew;
			fill_random(m->iov[j].iov_base, len);
			memcpy(m->stream + m->start[j], m->iov[j].iov_base, len);
		}
		m->unread[j] = len;
	}
	log_init(&m->log);
	for (int i = 0; i < M_PIPES; i++) {
		struct mpipe *p = &m->p[i];
		mkpipe(p->e, 0);
		CHECK_EQ(pp_setsize(p->e[1], 1 << 20), 1 << 20);
		p->nq = 0;
		p->bytes = 0;
	}

	ssize_t r = pp_vmsplice(m->p[0].e[1], m->iov, (unsigned long)m->nseg, 0,
	                        on_release_poison, &m->log);
	CHECK_EQ(r, (ssize_t)m->total);
	mq_push(&m->p[0], 0, m->total);
	CHECK_EQ(pp_nread(m->p[0].e[0]), (int)m->total);
	model_check_releases(m, "vmsplice");

	for (int step = 0; step < 60 && !m->bad; step++) {
		int from = (int)rnd_below(M_PIPES);
		int to[2];
		to[0] = (from + 1 + (int)rnd_below(M_PIPES - 1)) % M_PIPES;
		to[1] = 3 - from - to[0];
		if (!m->p[from].bytes)
			continue;
		switch (rnd_below(6)) {
		case 0:
		case 1:
		case 2:
			model_read(m, from, pick_io_len());
			break;
		case 3:
			model_move(m, from, to, 1, pick_io_len(), 0);
			break;
		case 4:
			model_move(m, from, to, 1, pick_io_len(), 1);
			break;
		default:
			model_move(m, from, to, 2, pick_io_len(), 2);
			break;
		}
		model_check_releases(m, "a step");
	}
	for (int i = 0; i < M_PIPES && !m->bad; i++)
		while (m->p[i].bytes && !m->bad)
			model_read(m, i, pick_io_len());
	model_check_releases(m, "draining");
	for (int j = 0; j < m->nseg; j++)
		if (m->iov[j].iov_len && log_calls_for(&m->log, m->iov[j].iov_base, NULL) != 1)
			m->bad++;
	for (int i = 0; i < M_PIPES; i++) {
		CHECK_EQ(pp_nread(m->p[i].e[0]), 0);
		CHECK_EQ(pp_close(m->p[i].e[0]), 0);
		CHECK_EQ(pp_close(m->p[i].e[1]), 0);
	}
	/* Closing drained pipes releases nothing more. */
	int nonempty = 0;
	for (int j = 0; j < m->nseg; j++)
		nonempty += m->iov[j].iov_len > 0;
	CHECK_EQ(log_count(&m->log), nonempty);
	log_fini(&m->log);
	for (int j = 0; j < m->nseg; j++)
		free(m->mem[j]);
	free(m->stream);
}

static void random_layouts_model(void)
{
	static struct model m;
	int iters = t_valgrind() ? 100 : T_SANITIZED ? 500 : 1500;
	rng_state = 0x1234567887654321ull;
	for (int it = 0; it < iters && !m.bad; it++) {
		model_iteration(&m);
		if (m.bad)
			fprintf(stderr, "iteration %d failed (%d segments)\n", it, m.nseg);
	}
	CHECK_EQ(m.bad, 0);
}

/* ---- release only when the last consumer is done --------------------- */

/* Three segments: A of 5000 bytes (chunks 4096 + 904), B 4096, C 1. */
struct abc {
	unsigned char *mem;
	struct iovec iov[3];
	unsigned char want[9097];
};

static void abc_init(struct abc *s)
{
	s->mem = malloc(3 * 8192);
	s->iov[0] = (struct iovec){ s->mem + 3, 5000 };
	s->iov[1] = (struct iovec){ s->mem + 8192 + 1, 4096 };
	s->iov[2] = (struct iovec){ s->mem + 16384 + 4095, 1 };
	size_t at = 0;
	for (int i = 0; i < 3; i++) {
		fill_random(s->iov[i].iov_base, s->iov[i].iov_len);
		memcpy(s->want + at, s->iov[i].iov_base, s->iov[i].iov_len);
		at += s->iov[i].iov_len;
	}
}

/* Read the A/B/C stream from rd, checking the releases step by step: the
 * log must have `before` calls plus those of segments whose last chunk has
 * now been read by this, the last consumer. */
static void abc_read_last(struct abc *s, struct pp_end *rd, struct rel_log *log)
{
	unsigned char got[9097];
	CHECK_EQ(log_count(log), 0);
	CHECK_EQ(read_n(rd, got, 4096), 4096); /* A's first chunk */
	CHECK_EQ(log_count(log), 0);
	CHECK_EQ(read_n(rd, got + 4096, 903), 903); /* all of A but one byte */
	CHECK_EQ(log_count(log), 0);
	CHECK_EQ(read_n(rd, got + 4999, 1), 1); /* A done */
	CHECK_EQ(log_count(log), 1);
	CHECK_RELEASED(log, s->iov[0].iov_base, 5000);
	CHECK_EQ(read_n(rd, got + 5000, 4000), 4000);
	CHECK_EQ(log_count(log), 1);
	CHECK_EQ(read_n(rd, got + 9000, 97), 97); /* B's last 96 and C */
	CHECK_EQ(log_count(log), 3);
	CHECK_RELEASED(log, s->iov[1].iov_base, 4096);
	CHECK_RELEASED(log, s->iov[2].iov_base, 1);
	CHECK(memcmp(got, s->want, sizeof got) == 0);
}

static void release_after_tee(void)
{
	for (int order = 0; order < 2; order++) {
		struct abc s;
		struct rel_log log;
		struct pp_end *p[2], *q[2];
		unsigned char got[9097];
		abc_init(&s);
		log_init(&log);
		mkpipe(p, 0);
		mkpipe(q, 0);
		CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release_poison, &log), 9097);
		CHECK_EQ(pp_tee(p[0], q[1], 100000, 0), 9097);
		CHECK_EQ(pool_in_use(), 0);
		/* The first consumer drains its pipe whole: nothing is released. */
		struct pp_end *first = order ? q[0] : p[0], *last = order ? p[0] : q[0];
		CHECK_EQ(read_n(first, got, sizeof got), sizeof got);
		CHECK(memcmp(got, s.want, sizeof got) == 0);
		CHECK_EQ(pp_nread(first), 0);
		CHECK_EQ(log_count(&log), 0);
		abc_read_last(&s, last, &log);
		for (int i = 0; i < 2; i++) {
			CHECK_EQ(pp_close(p[i]), 0);
			CHECK_EQ(pp_close(q[i]), 0);
		}
		CHECK_EQ(log_count(&log), 3);
		log_fini(&log);
		free(s.mem);
	}
}

static void release_after_fanout(void)
{
	struct abc s;
	struct rel_log log;
	struct pp_end *p[2], *o[3][2];
	unsigned char got[9097];
	abc_init(&s);
	log_init(&log);
	mkpipe(p, 0);
	for (int i = 0; i < 3; i++)
		mkpipe(o[i], 0);
	struct pp_end *outs[3] = { o[0][1], o[1][1], o[2][1] };
	CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release_poison, &log), 9097);
	CHECK_EQ(pp_fanout(p[0], outs, 3, 100000, 0), 9097);
	CHECK_EQ(pp_nread(p[0]), 0); /* the source gave its references away */
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(pool_in_use(), 0);
	/* Two of the three drain; the third drains part of A. */
	CHECK_EQ(read_n(o[1][0], got, sizeof got), sizeof got);
	CHECK(memcmp(got, s.want, sizeof got) == 0);
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(read_n(o[0][0], got, sizeof got), sizeof got);
	CHECK(memcmp(got, s.want, sizeof got) == 0);
	CHECK_EQ(log_count(&log), 0);
	abc_read_last(&s, o[2][0], &log);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(pp_close(o[i][0]), 0);
		CHECK_EQ(pp_close(o[i][1]), 0);
	}
	CHECK_EQ(log_count(&log), 3);
	log_fini(&log);
	free(s.mem);
}

static void release_after_splice_chain(void)
{
	struct abc s;
	struct rel_log log;
	struct pp_end *p0[2], *p1[2], *p2[2];
	unsigned char got[9097];
	abc_init(&s);
	log_init(&log);
	mkpipe(p0, 0);
	mkpipe(p1, 0);
	mkpipe(p2, 0);
	CHECK_EQ(pp_vmsplice(p0[1], s.iov, 3, 0, on_release_poison, &log), 9097);
	/* p0 -> p1 in two splices (the first splits A's first chunk), then all
	 * of p1 -> p2: the bytes travel, the caller's memory stays lent. */
	CHECK_EQ(pp_splice(p0[0], p1[1], 100, 0), 100);
	CHECK_EQ(pp_splice(p0[0], p1[1], 100000, 0), 8997);
	CHECK_EQ(pp_nread(p0[0]), 0);
	CHECK_EQ(pp_splice(p1[0], p2[1], 100000, 0), 9097);
	CHECK_EQ(pp_nread(p1[0]), 0);
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(pool_in_use(), 0);
	abc_read_last(&s, p2[0], &log);

	/* A chunk split between two pipes: released when both halves are read. */
	struct rel_log log2;
	log_init(&log2);
	CHECK_EQ(pp_vmsplice(p0[1], &s.iov[1], 1, 0, on_release, &log2), 4096);
	CHECK_EQ(pp_splice(p0[0], p1[1], 1000, 0), 1000);
	CHECK_EQ(read_n(p1[0], got, 1000), 1000);
	CHECK(memcmp(got, s.iov[1].iov_base, 1000) == 0);
	CHECK_EQ(log_count(&log2), 0);
	CHECK_EQ(read_n(p0[0], got, 3095), 3095);
	CHECK_EQ(log_count(&log2), 0);
	CHECK_EQ(read_n(p0[0], got + 3095, 1), 1);
	CHECK(memcmp(got, (char *)s.iov[1].iov_base + 1000, 3096) == 0);
	CHECK_EQ(log_count(&log2), 1);
	CHECK_RELEASED(&log2, s.iov[1].iov_base, 4096);

	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pp_close(p0[i]), 0);
		CHECK_EQ(pp_close(p1[i]), 0);
		CHECK_EQ(pp_close(p2[i]), 0);
	}
	CHECK_EQ(log_count(&log), 3);
	CHECK_EQ(log_count(&log2), 1);
	log_fini(&log);
	log_fini(&log2);
	free(s.mem);
}

/* ---- partial, EAGAIN ------------------------------------------------- */

/* A nearly full pipe (2 free slots) takes [A: 100][B: 20000] partly:
 * A whole and B's first 4096 bytes.  how: 0 PP_SPLICE_NONBLOCK, 1 a
 * PP_NONBLOCK end set with pp_setfl, 2 PP_NONBLOCK from pp_pipe. */
static void partial_case(int how)
{
	struct pp_end *p[2];
	struct rel_log log;
	unsigned char *a = malloc(100 + 1), *b = malloc(20000 + 1);
	fill_random(a, 101);
	fill_random(b, 20001);
	log_init(&log);
	mkpipe(p, how == 2 ? PP_NONBLOCK : 0);
	fill_slots(p[1], 2);
	if (how == 1)
		CHECK_EQ(pp_setfl(p[1], PP_NONBLOCK), 0);
	CHECK_EQ(pool_in_use(), 14);
	struct iovec iov[3] = { { a + 1, 100 }, { NULL, 0 }, { b + 1, 20000 } };
	unsigned flags = how == 0 ? PP_SPLICE_NONBLOCK : 0;
	CHECK_EQ(pp_vmsplice(p[1], iov, 3, flags, on_release, &log), 4196);
	CHECK_EQ(pp_nread(p[0]), 14 * 4096 + 4196);
	CHECK_EQ(pool_in_use(), 14); /* the vmspliced part took no page */
	CHECK_EQ(log_count(&log), 0);
	/* Now full: nothing more goes in. */
	CHECK_ERR(pp_vmsplice(p[1], iov, 3, flags, on_release, &log), EAGAIN);
	static unsigned char got[14 * 4096 + 4196];
	CHECK_EQ(read_n(p[0], got, sizeof got), sizeof got);
	CHECK(memcmp(got + 14 * 4096, a + 1, 100) == 0);
	CHECK(memcmp(got + 14 * 4096 + 100, b + 1, 4096) == 0);
	CHECK_EQ(log_count(&log), 2);
	CHECK_RELEASED(&log, a + 1, 100);
	CHECK_RELEASED(&log, b + 1, 4096); /* only the part that went in */

	/* One free slot, one long segment: its first page goes in. */
	fill_slots(p[1], 1);
	struct iovec one = { b + 1, 20000 };
	CHECK_EQ(pp_vmsplice(p[1], &one, 1, flags, on_release, &log), 4096);
	CHECK_EQ(drain(p[0]), 15 * 4096 + 4096);
	CHECK_EQ(log_count(&log), 3);
	CHECK_EQ(log.seg[2].iov_base, b + 1);
	CHECK_EQ(log.seg[2].iov_len, 4096);

	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(log_count(&log), 3);
	log_fini(&log);
	free(a);
	free(b);
}

static void nonblock_partial_splice_flag(void)
{
	partial_case(0);
}

static void nonblock_partial_end_flag(void)
{
	partial_case(1);
	partial_case(2);
}

static void full_pipe_eagain_no_release(void)
{
	struct rel_log log;
	unsigned char a[16] = "caller's bytes";
	struct iovec iov[2] = { { a, 1 }, { a + 1, 10 } };
	log_init(&log);
	for (int how = 0; how < 2; how++) {
		struct pp_end *p[2];
		mkpipe(p, how ? PP_NONBLOCK : 0);
		unsigned flags = how ? 0 : PP_SPLICE_NONBLOCK;
		fill_slots(p[1], 0);
		CHECK_ERR(pp_vmsplice(p[1], iov, 2, flags, on_release, &log), EAGAIN);
		CHECK_EQ(pp_nread(p[0]), 65536);
		/* Every slot used, but the last buffer has room: a write merges
		 * into it, a vmsplice needs a slot of its own. */
		CHECK_EQ(drain(p[0]), 65536);
		fill_slots(p[1], 1);
		CHECK_EQ(pp_write(p[1], "x", 1), 1);
		CHECK_ERR(pp_vmsplice(p[1], iov, 1, flags, on_release, &log), EAGAIN);
		CHECK_EQ(pp_setfl(p[1], PP_NONBLOCK), 0);
		CHECK_EQ(pp_write(p[1], "y", 1), 1);
		CHECK_EQ(pp_nread(p[0]), 15 * 4096 + 2);
		CHECK_EQ(drain(p[0]), 15 * 4096 + 2);
		CHECK_EQ(pp_close(p[1]), 0);
		CHECK_EQ(pp_close(p[0]), 0);
	}
	CHECK_EQ(log_count(&log), 0); /* never, not even after drain and close */
	log_fini(&log);
}

/* ---- the zero-copy contract, and no write into caller memory ---------- */

static void contract_reader_sees_caller_changes(void)
{
	/* NOT something a caller may do: the memory is lent until release.
	 * The test does it to prove the reader gets the caller's memory
	 * itself, not a copy taken at vmsplice time. */
	struct pp_end *p[2], *q[2];
	struct rel_log log;
	unsigned char *buf = malloc(8192), got[8192];
	memset(buf, 'a', 8192);
	log_init(&log);
	mkpipe(p, 0);
	mkpipe(q, 0);
	struct iovec iov = { buf, 8192 };
	CHECK_EQ(pp_vmsplice(p[1], &iov, 1, 0, on_release, &log), 8192);
	CHECK_EQ(pp_tee(p[0], q[1], 8192, 0), 8192);
	buf[0] = 'Z';
	buf[5000] = 'Y';
	CHECK_EQ(read_n(p[0], got, 10), 10);
	CHECK_EQ(got[0], 'Z');
	CHECK_EQ(got[1], 'a');
	buf[20] = 'X'; /* after a partial read of the same chunk */
	CHECK_EQ(read_n(p[0], got + 10, 8182), 8182);
	CHECK_EQ(got[20], 'X');
	CHECK_EQ(got[5000], 'Y');
	CHECK_EQ(log_count(&log), 0); /* q still holds it */
	buf[8191] = 'W';
	CHECK_EQ(read_n(q[0], got, 8192), 8192);
	CHECK_EQ(got[0], 'Z');
	CHECK_EQ(got[20], 'X');
	CHECK_EQ(got[5000], 'Y');
	CHECK_EQ(got[8191], 'W');
	CHECK_EQ(log_count(&log), 1);
	CHECK_RELEASED(&log, buf, 8192);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pp_close(p[i]), 0);
		CHECK_EQ(pp_close(q[i]), 0);
	}
	log_fini(&log);
	free(buf);
}

static uint64_t checksum(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void writes_never_touch_caller_memory(void)
{
	/* Each segment is 100 bytes inside a 4096-byte region: a write merged
	 * into its buffer would land in the region right after it. */
	enum { REG = 4096, NSEG = 4 };
	unsigned char *reg = malloc(NSEG * REG);
	fill_random(reg, NSEG * REG);
	uint64_t sum = checksum(reg, NSEG * REG);
	struct rel_log log;
	log_init(&log);
	struct pp_end *p[2], *q[2], *t[2];
	mkpipe(p, 0);
	mkpipe(q, 0);
	mkpipe(t, 0);
	struct iovec iov[NSEG];
	for (int i = 0; i < NSEG; i++)
		iov[i] = (struct iovec){ reg + i * REG + 7, 100 };

	/* 1: vmsplice, then small writes right after it. */
	CHECK_EQ(pp_vmsplice(p[1], &iov[0], 1, 0, on_release, &log), 100);
	for (int i = 0; i < 20; i++)
		CHECK_EQ(pp_write(p[1], "0123456789", 1 + (size_t)i % 10), 1 + i % 10);
	struct iovec wv[2] = { { "ab", 2 }, { "cd", 2 } };
	CHECK_EQ(pp_writev(p[1], wv, 2), 4);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);

	/* 2: the user buffer moved whole to q, then writes to q. */
	CHECK_EQ(pp_vmsplice(t[1], &iov[1], 1, 0, on_release, &log), 100);
	CHECK_EQ(pp_splice(t[0], q[1], 100, 0), 100);
	CHECK_EQ(pp_write(q[1], "xyz", 3), 3);
	CHECK_EQ(pp_write(q[1], "w", 1), 1);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);

	/* 3: tee'd to t, then writes to both. */
	unsigned char head[214];
	CHECK_EQ(drain(t[0]), 0);
	CHECK_EQ(pp_nread(p[0]), 214); /* step 1: 100 + 110 + 4 */
	CHECK_EQ(read_n(p[0], head, sizeof head), sizeof head);
	CHECK(memcmp(head, iov[0].iov_base, 100) == 0);
	for (int i = 0, at = 100; i < 20; at += 1 + i % 10, i++)
		CHECK(memcmp(head + at, "0123456789", 1 + (size_t)i % 10) == 0);
	CHECK(memcmp(head + 210, "abcd", 4) == 0);
	CHECK_EQ(pp_vmsplice(p[1], &iov[2], 1, 0, on_release, &log), 100);
	CHECK_EQ(pp_tee(p[0], t[1], 100, 0), 100);
	CHECK_EQ(pp_write(p[1], "P", 1), 1);
	CHECK_EQ(pp_write(t[1], "T", 1), 1);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);

	/* 4: packet mode. */
	struct pp_end *k[2];
	mkpipe(k, PP_PACKET);
	CHECK_EQ(pp_vmsplice(k[1], &iov[3], 1, 0, on_release, &log), 100);
	CHECK_EQ(pp_write(k[1], "k", 1), 1);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);

	/* What the readers get: the caller's bytes, then the writes. */
	unsigned char got[200];
	CHECK_EQ(read_n(p[0], got, 101), 101);
	CHECK(memcmp(got, iov[2].iov_base, 100) == 0);
	CHECK_EQ(got[100], 'P');
	CHECK_EQ(read_n(t[0], got, 101), 101);
	CHECK(memcmp(got, iov[2].iov_base, 100) == 0);
	CHECK_EQ(got[100], 'T');
	CHECK_EQ(read_n(q[0], got, 104), 104);
	CHECK(memcmp(got, iov[1].iov_base, 100) == 0);
	CHECK(memcmp(got + 100, "xyzw", 4) == 0);
	/* vmspliced buffers are not packets, as in Linux: the read runs on
	 * into the 'k' packet and stops after it. */
	CHECK_EQ(pp_read(k[0], got, sizeof got), 101);
	CHECK(memcmp(got, iov[3].iov_base, 100) == 0);
	CHECK_EQ(got[100], 'k');
	CHECK_EQ(log_count(&log), 4);
	for (int i = 0; i < NSEG; i++)
		CHECK_RELEASED(&log, iov[i].iov_base, 100);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pp_close(p[i]), 0);
		CHECK_EQ(pp_close(q[i]), 0);
		CHECK_EQ(pp_close(t[i]), 0);
		CHECK_EQ(pp_close(k[i]), 0);
	}
	log_fini(&log);
	free(reg);
}

/* ---- blocking -------------------------------------------------------- */

struct blocker {
	struct pp_end *end;
	const struct iovec *iov;
	unsigned long n;
	struct rel_log *log;
	int is_write; /* pp_write of iov[0] instead of pp_vmsplice */
	_Atomic pid_t tid;
	atomic_int done;
	ssize_t ret;
	int err;
};

static void *blocker_main(void *arg)
{
	struct blocker *b = arg;
	atomic_store(&b->tid, gettid());
	errno = 0;
	if (b->is_write)
		b->ret = pp_write(b->end, b->iov[0].iov_base, b->iov[0].iov_len);
	else
		b->ret = pp_vmsplice(b->end, b->iov, b->n, 0, on_release, b->log);
	b->err = errno;
	atomic_store(&b->done, 1);
	return NULL;
}

struct drainer {
	struct pp_end *rd;
	unsigned char *out;
	size_t want;
	size_t got;
	long delay_ms;
	atomic_int started;
};

static void *drainer_main(void *arg)
{
	struct drainer *d = arg;
	t_sleep_ms(d->delay_ms);
	uint64_t rng = 12345; /* its own: rnd() belongs to the main thread */
	atomic_store(&d->started, 1);
	while (d->got < d->want) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size_t n = 1 + (size_t)((rng >> 33) % 20000);
		if (n > d->want - d->got)
			n = d->want - d->got;
		ssize_t r = pp_read(d->rd, d->out + d->got, n);
		if (r <= 0)
			break;
		d->got += (size_t)r;
	}
	return NULL;
}

static void blocking_wakes_when_reader_drains(void)
{
	struct pp_end *p[2];
	struct rel_log log;
	log_init(&log);
	mkpipe(p, 0);

	/* A full pipe; a reader thread drains it after 100 ms. */
	unsigned char *seg = malloc(3000);
	fill_random(seg, 3000);
	fill_slots(p[1], 0);
	unsigned char *out = malloc(65536 + 3000);
	struct drainer d = { .rd = p[0], .out = out, .want = 65536 + 3000, .delay_ms = 100 };
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, drainer_main, &d), 0);
	struct iovec iov = { seg, 3000 };
	CHECK_EQ(pp_vmsplice(p[1], &iov, 1, 0, on_release, &log), 3000);
	CHECK(atomic_load(&d.started)); /* it waited for the reader */
	pthread_join(t, NULL);
	CHECK_EQ(d.got, 65536 + 3000);
	CHECK(memcmp(out + 65536, seg, 3000) == 0);
	CHECK_EQ(log_count(&log), 1);
	CHECK_RELEASED(&log, seg, 3000);

	/* 1 MiB of caller memory through a 64 KiB pipe.  A blocking call may
	 * return a short count (Linux's vmsplice does, once the pipe is full);
	 * then the rest goes in with the next call, so each call's release
	 * covers what that call placed. */
	size_t big = 1 << 20;
	unsigned char *src = malloc(big + 1), *dst = malloc(big);
	fill_random(src, big + 1);
	struct rel_log log2;
	log_init(&log2);
	struct drainer d2 = { .rd = p[0], .out = dst, .want = big, .delay_ms = 20 };
	CHECK_EQ(pthread_create(&t, NULL, drainer_main, &d2), 0);
	size_t placed = 0;
	int calls = 0;
	while (placed < big && calls < 10000) {
		struct iovec v = { src + 1 + placed, big - placed };
		ssize_t r = pp_vmsplice(p[1], &v, 1, 0, on_release, &log2);
		CHECK(r > 0);
		if (r <= 0)
			break;
		placed += (size_t)r;
		calls++;
	}
	pthread_join(t, NULL);
	CHECK_EQ(d2.got, big);
	CHECK(memcmp(dst, src + 1, big) == 0);
	CHECK_EQ(log_count(&log2), calls);
	size_t sum = 0;
	for (int i = 0; i < calls && i < LOG_MAX; i++)
		sum += log2.seg[i].iov_len;
	CHECK_EQ(sum, big);
	CHECK_EQ(log2.seg[0].iov_base, src + 1);

	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	log_fini(&log);
	log_fini(&log2);
	free(seg);
	free(out);
	free(src);
	free(dst);
}

/* A vmsplice sleeps on a full pipe, then a pp_write sleeps behind it.  One
 * read frees all 16 slots; the first sleeper is woken, takes one slot and
 * leaves 15 free: the write must not stay asleep.  (order 1: the write
 * sleeps first.) */
static void blocked_vmsplice_passes_writer_wake(void)
{
	for (int order = 0; order < 2; order++) {
		struct pp_end *p[2];
		struct rel_log log;
		log_init(&log);
		mkpipe(p, PP_NOSIGPIPE);
		fill_slots(p[1], 0);
		unsigned char *a = malloc(4096), *w = malloc(4096);
		memset(a, 'v', 4096);
		memset(w, 'w', 4096);
		struct iovec va = { a, 4096 }, vw = { w, 4096 };
		struct blocker bv = { .end = p[1], .iov = &va, .n = 1, .log = &log };
		struct blocker bw = { .end = p[1], .iov = &vw, .n = 1, .is_write = 1 };
		struct blocker *first = order ? &bw : &bv, *second = order ? &bv : &bw;
		pthread_t t1, t2;
		CHECK_EQ(pthread_create(&t1, NULL, blocker_main, first), 0);
		CHECK(wait_asleep(&first->tid, &first->done));
		CHECK_EQ(pthread_create(&t2, NULL, blocker_main, second), 0);
		CHECK(wait_asleep(&second->tid, &second->done));
		CHECK(!atomic_load(&bv.done));
		CHECK(!atomic_load(&bw.done));
		static unsigned char sink[65536];
		CHECK_EQ(pp_read(p[0], sink, sizeof sink), 65536); /* all 16 slots at once */
		double end = t_now() + 3;
		while ((!atomic_load(&bv.done) || !atomic_load(&bw.done)) && t_now() < end)
			t_sleep_ms(2);
		if (!atomic_load(&bv.done) || !atomic_load(&bw.done))
			fprintf(stderr, "order %d: %s still asleep 3 s after the pipe was emptied "
			        "(%d bytes in it)\n", order,
			        atomic_load(&bv.done) ? "pp_write" : "pp_vmsplice", pp_nread(p[0]));
		CHECK(atomic_load(&bv.done));
		CHECK(atomic_load(&bw.done));
		/* Unblock whatever still sleeps, so the case ends. */
		CHECK_EQ(pp_close(p[0]), 0);
		pthread_join(t1, NULL);
		pthread_join(t2, NULL);
		CHECK_EQ(bv.ret, 4096);
		CHECK_EQ(bw.ret, 4096);
		CHECK_EQ(pp_close(p[1]), 0);
		CHECK_EQ(log_count(&log), bv.ret > 0 ? 1 : 0);
		log_fini(&log);
		free(a);
		free(w);
	}
}

/* ---- EPIPE, EINTR, close ----------------------------------------------- */

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void epipe_and_sigpipe(void)
{
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = on_sigpipe;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &old);
	struct rel_log log;
	log_init(&log);
	unsigned char buf[64] = { 1 };
	struct iovec iov[2] = { { buf, 10 }, { buf + 10, 54 } };
	struct iovec empty[2] = { { buf, 0 }, { NULL, 0 } };
	for (int nosig = 0; nosig < 2; nosig++) {
		struct pp_end *p[2];
		mkpipe(p, nosig ? PP_NOSIGPIPE : 0);
		CHECK_EQ(pp_close(p[0]), 0);
		sigpipes = 0;
		CHECK_ERR(pp_vmsplice(p[1], iov, 2, 0, on_release, &log), EPIPE);
		CHECK_EQ(sigpipes, nosig ? 0 : 1);
		CHECK_ERR(pp_vmsplice(p[1], iov, 1, PP_SPLICE_NONBLOCK, on_release, &log), EPIPE);
		CHECK_EQ(sigpipes, nosig ? 0 : 2);
		/* Nothing to place: 0, no error and no signal, as vmsplice(2). */
		CHECK_EQ(pp_vmsplice(p[1], empty, 2, 0, on_release, &log), 0);
		CHECK_EQ(pp_vmsplice(p[1], NULL, 0, 0, on_release, &log), 0);
		CHECK_EQ(sigpipes, nosig ? 0 : 2);
		CHECK_EQ(pp_close(p[1]), 0);
	}
	CHECK_EQ(log_count(&log), 0);
	sigaction(SIGPIPE, &old, NULL);
	log_fini(&log);
}

static void reader_closes_while_blocked(void)
{
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = on_sigpipe;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &old);
	for (int nosig = 0; nosig < 2; nosig++) {
		struct pp_end *p[2];
		struct rel_log log;
		log_init(&log);
		mkpipe(p, nosig ? PP_NOSIGPIPE : 0);
		fill_slots(p[1], 2);
		unsigned char *a = malloc(3 * 4096 + 5);
		fill_random(a, 3 * 4096 + 5);
		struct iovec iov = { a, 3 * 4096 + 5 };
		struct blocker b = { .end = p[1], .iov = &iov, .n = 1, .log = &log };
		pthread_t t;
		sigpipes = 0;
		CHECK_EQ(pthread_create(&t, NULL, blocker_main, &b), 0);
		/* It places two chunks and sleeps (Linux's vmsplice would return
		 * 8192 at once: then it never sees the reader go). */
		CHECK(wait_asleep(&b.tid, &b.done));
		int early = atomic_load(&b.done);
		CHECK_EQ(pp_close(p[0]), 0);
		pthread_join(t, NULL);
		CHECK_EQ(b.ret, 8192);
		/* As pp_write: the thread that found no reader got SIGPIPE. */
		CHECK_EQ(sigpipes, nosig || early ? 0 : 1);
		/* The data is still in the pipe: freed with its last end. */
		CHECK_EQ(log_count(&log), 0);
		CHECK_EQ(pp_close(p[1]), 0);
		CHECK_EQ(log_count(&log), 1);
		CHECK_RELEASED(&log, a, 8192);
		log_fini(&log);
		free(a);
	}
	sigaction(SIGPIPE, &old, NULL);
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void eintr_nothing_placed(void)
{
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = on_usr1; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, &old);
	struct pp_end *p[2];
	struct rel_log log;
	log_init(&log);
	mkpipe(p, 0);
	fill_slots(p[1], 0);
	unsigned char a[100] = { 7 };
	struct iovec iov[2] = { { a, 50 }, { a + 50, 50 } };
	struct blocker b = { .end = p[1], .iov = iov, .n = 2, .log = &log };
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, blocker_main, &b), 0);
	CHECK(wait_asleep(&b.tid, &b.done));
	CHECK(!atomic_load(&b.done));
	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, -1);
	CHECK_EQ(b.err, EINTR);
	CHECK_EQ(pp_nread(p[0]), 65536);
	CHECK_EQ(drain(p[0]), 65536);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(log_count(&log), 0);
	sigaction(SIGUSR1, &old, NULL);
	log_fini(&log);
}

static void close_releases(void)
{
	struct abc s;
	struct rel_log log;
	abc_init(&s);
	log_init(&log);
	struct pp_end *p[2], *q[2];
	unsigned char got[16];

	/* Read end closed first: the data stays until the write end goes. */
	mkpipe(p, PP_NOSIGPIPE);
	CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release, &log), 9097);
	CHECK_EQ(read_n(p[0], got, 10), 10); /* part of A read */
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(log_count(&log), 3);
	CHECK_RELEASED(&log, s.iov[0].iov_base, 5000); /* all that went in */
	CHECK_RELEASED(&log, s.iov[1].iov_base, 4096);
	CHECK_RELEASED(&log, s.iov[2].iov_base, 1);

	/* Write end closed first, a dup of the read end left open. */
	log.count = 0;
	mkpipe(p, 0);
	CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release, &log), 9097);
	struct pp_end *dup = pp_dup(p[0]);
	CHECK(dup != NULL);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(pp_close(dup), 0);
	CHECK_EQ(log_count(&log), 3);

	/* Tee'd: closing the first pipe releases nothing, the second does. */
	log.count = 0;
	mkpipe(p, 0);
	mkpipe(q, 0);
	CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release, &log), 9097);
	CHECK_EQ(pp_tee(p[0], q[1], 5000, 0), 5000); /* A only */
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(log_count(&log), 2); /* B and C were only in p */
	CHECK_RELEASED(&log, s.iov[1].iov_base, 4096);
	CHECK_RELEASED(&log, s.iov[2].iov_base, 1);
	CHECK_EQ(pp_close(q[1]), 0);
	CHECK_EQ(read_n(q[0], got, 16), 16);
	CHECK(memcmp(got, s.want, 16) == 0);
	CHECK_EQ(log_count(&log), 2);
	CHECK_EQ(pp_close(q[0]), 0);
	CHECK_EQ(log_count(&log), 3);
	CHECK_RELEASED(&log, s.iov[0].iov_base, 5000);

	log_fini(&log);
	free(s.mem);
}

/* ---- errors, pool, arg -------------------------------------------------- */

static void errors(void)
{
	struct pp_end *p[2];
	struct rel_log log;
	log_init(&log);
	mkpipe(p, 0);
	unsigned char buf[32];
	memset(buf, 'e', sizeof buf);
	struct iovec ok = { buf, 8 };
	CHECK_ERR(pp_vmsplice(p[0], &ok, 1, 0, on_release, &log), EBADF);
	CHECK_ERR(pp_vmsplice(NULL, &ok, 1, 0, on_release, &log), EBADF);

	struct iovec *many = calloc(IOV_MAX + 1, sizeof *many);
	for (int i = 0; i <= IOV_MAX; i++)
		many[i] = (struct iovec){ buf, 1 };
	CHECK_ERR(pp_vmsplice(p[1], many, IOV_MAX + 1, 0, on_release, &log), EINVAL);
	CHECK_ERR(pp_vmsplice(p[1], many, ULONG_MAX, 0, on_release, &log), EINVAL);
	free(many);
	CHECK_ERR(pp_vmsplice(p[1], &ok, 1, 0x10, on_release, &log), EINVAL);
	CHECK_ERR(pp_vmsplice(p[1], &ok, 1, 0x80000000u, on_release, &log), EINVAL);
	CHECK_ERR(pp_vmsplice(p[1], &ok, 1, ~0u, on_release, &log), EINVAL);
	/* Every SPLICE flag is accepted (MOVE, MORE and GIFT are hints). */
	CHECK_EQ(pp_vmsplice(p[1], &ok, 1,
	                     PP_SPLICE_MOVE | PP_SPLICE_NONBLOCK | PP_SPLICE_MORE | PP_SPLICE_GIFT,
	                     on_release, &log), 8);
	CHECK_EQ(drain(p[0]), 8);
	CHECK_EQ(log_count(&log), 1);

	CHECK_ERR(pp_vmsplice(p[1], NULL, 1, 0, on_release, &log), EFAULT);
	struct iovec nul = { NULL, 5 };
	CHECK_ERR(pp_vmsplice(p[1], &nul, 1, 0, on_release, &log), EFAULT);
	CHECK_EQ(pp_nread(p[0]), 0);
	CHECK_EQ(log_count(&log), 1); /* no release for a failed call */
	/* A NULL base after segments that went in: their count, as Linux. */
	struct iovec mixed[3] = { { buf, 5 }, { buf + 5, 3 }, { NULL, 5 } };
	CHECK_EQ(pp_vmsplice(p[1], mixed, 3, 0, on_release, &log), 8);
	CHECK_EQ(drain(p[0]), 8);
	CHECK_EQ(log_count(&log), 3);
	CHECK_RELEASED(&log, buf + 5, 3);
	/* A NULL base of length 0 is no fault. */
	struct iovec nul0[2] = { { NULL, 0 }, { buf + 20, 4 } };
	CHECK_EQ(pp_vmsplice(p[1], nul0, 2, 0, on_release, &log), 4);
	CHECK_EQ(drain(p[0]), 4);
	CHECK_EQ(log_count(&log), 4);
	CHECK_RELEASED(&log, buf + 20, 4);

	/* A closed handle. */
	struct pp_end *w = p[1];
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_ERR(pp_vmsplice(w, &ok, 1, 0, on_release, &log), EBADF);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(log_count(&log), 4);
	log_fini(&log);
}

static void no_pool_pages(void)
{
	CHECK_EQ(pool_in_use(), 0);
	struct pp_end *p[2], *q[2], *s[2];
	struct rel_log log;
	log_init(&log);
	mkpipe(p, 0);
	mkpipe(q, 0);
	mkpipe(s, 0);
	CHECK_EQ(pp_setsize(p[1], 1 << 20), 1 << 20);
	CHECK_EQ(pp_setsize(q[1], 1 << 20), 1 << 20);
	CHECK_EQ(pp_setsize(s[1], 1 << 20), 1 << 20);
	size_t len = 100 * 1024 + 3;
	unsigned char *a = malloc(len);
	fill_random(a, len);
	struct iovec iov[2] = { { a, 1 }, { a + 1, len - 1 } };
	CHECK_EQ(pp_vmsplice(p[1], iov, 2, 0, on_release, &log), (ssize_t)len);
	CHECK_EQ(pool_in_use(), 0);
	CHECK_EQ(pp_tee(p[0], q[1], len, 0), (ssize_t)len);
	CHECK_EQ(pool_in_use(), 0);
	CHECK_EQ(pp_splice(q[0], s[1], 10000, 0), 10000);
	CHECK_EQ(pool_in_use(), 0);
	/* A write after vmspliced data cannot merge: one fresh page. */
	CHECK_EQ(pp_write(p[1], "z", 1), 1);
	CHECK_EQ(pool_in_use(), 1);
	CHECK_EQ(drain(p[0]), len + 1);
	CHECK_EQ(pool_in_use(), 0);
	CHECK_EQ(drain(q[0]), len - 10000);
	CHECK_EQ(drain(s[0]), 10000);
	CHECK_EQ(pool_in_use(), 0);
	CHECK_EQ(log_count(&log), 2);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pp_close(p[i]), 0);
		CHECK_EQ(pp_close(q[i]), 0);
		CHECK_EQ(pp_close(s[i]), 0);
	}
	log_fini(&log);
	free(a);
}

static void arg_and_null_release(void)
{
	struct pp_end *p[2];
	struct rel_log l1, l2;
	log_init(&l1);
	log_init(&l2);
	mkpipe(p, 0);
	unsigned char a[300];
	fill_random(a, sizeof a);
	struct iovec i1 = { a, 100 }, i2 = { a + 100, 100 }, i3 = { a + 200, 100 };
	CHECK_EQ(pp_vmsplice(p[1], &i1, 1, 0, on_release, &l1), 100);
	CHECK_EQ(pp_vmsplice(p[1], &i2, 1, 0, on_release, &l2), 100);
	CHECK_EQ(pp_vmsplice(p[1], &i3, 1, 0, NULL, &l1), 100); /* no callback */
	CHECK_EQ(pp_vmsplice(p[1], &i1, 1, 0, on_release, &l2), 100); /* lent twice */
	unsigned char got[400];
	CHECK_EQ(read_n(p[0], got, 400), 400);
	CHECK(memcmp(got, a, 300) == 0);
	CHECK(memcmp(got + 300, a, 100) == 0);
	CHECK_EQ(log_count(&l1), 1);
	CHECK_EQ(log_count(&l2), 2);
	CHECK_RELEASED(&l1, a, 100);
	CHECK_RELEASED(&l2, a + 100, 100);
	CHECK_RELEASED(&l2, a, 100);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	log_fini(&l1);
	log_fini(&l2);
}

/* ---- the classic zero-copy producer ----------------------------------- */

#define PBUFS 8
#define PBUF_SIZE (64 * 1024 + 64)

/* Byte k of the stream. */
static inline unsigned char pat(uint64_t k)
{
	uint64_t x = (k >> 3) * 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	return (unsigned char)(x >> (8 * (k & 7)));
}

struct prod;
struct pslot {
	struct prod *pr;
	int idx;
	unsigned char *mem;
	int outstanding;  /* segments not yet released (guarded by pr->mu) */
	const void *base[2]; /* the segments in flight */
};

struct prod {
	struct pp_end *p[2];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pslot slot[PBUFS];
	uint64_t total;
	long segs_sent, releases, short_calls;
	atomic_int bad;
	uint64_t rng;
};

static void prod_release(void *arg, const struct iovec *iov)
{
	struct pslot *s = arg;
	struct prod *pr = s->pr;
	/* The buffer is the producer's again: scribble on it at once, so a
	 * release that comes before a reader has copied the bytes out shows
	 * as wrong data even when the producer is slow to reuse it. */
	memset(iov->iov_base, 0xEE, iov->iov_len);
	pthread_mutex_lock(&pr->mu);
	if (iov->iov_base != s->base[0] && iov->iov_base != s->base[1])
		atomic_fetch_add(&pr->bad, 1);
	if (--s->outstanding < 0)
		atomic_fetch_add(&pr->bad, 1);
	pr->releases++;
	pthread_cond_broadcast(&pr->cv);
	pthread_mutex_unlock(&pr->mu);
}

static void *producer_main(void *arg)
{
	struct prod *pr = arg;
	uint64_t k = 0;
	for (long seq = 0; k < pr->total; seq++) {
		struct pslot *s = &pr->slot[seq % PBUFS];
		pthread_mutex_lock(&pr->mu);
		while (s->outstanding)
			pthread_cond_wait(&pr->cv, &pr->mu);
		pthread_mutex_unlock(&pr->mu);

		/* A random length and alignment, cut in two segments. */
		pr->rng = pr->rng * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t rv = pr->rng >> 11;
		size_t skew = rv % 64;
		size_t len = 1 + (rv >> 6) % (64 * 1024);
		if (len > pr->total - k)
			len = (size_t)(pr->total - k);
		size_t cut = (rv >> 24) % (len + 1);
		unsigned char *b = s->mem + skew;
		for (size_t i = 0; i < len; i++)
			b[i] = pat(k + i);
		size_t done = 0;
		while (done < len) {
			struct iovec iov[2];
			int n = 0;
			if (done < cut)
				iov[n++] = (struct iovec){ b + done, cut - done };
			iov[n++] = (struct iovec){ b + (done > cut ? done : cut),
			                           len - (done > cut ? done : cut) };
			pthread_mutex_lock(&pr->mu);
			s->base[0] = iov[0].iov_base;
			s->base[1] = n > 1 ? iov[1].iov_base : iov[0].iov_base;
			for (int i = 0; i < n; i++)
				s->outstanding += iov[i].iov_len > 0;
			pthread_mutex_unlock(&pr->mu);
			ssize_t r = pp_vmsplice(pr->p[1], iov, (unsigned long)n, 0, prod_release, s);
			if (r <= 0) {
				atomic_fetch_add(&pr->bad, 1);
				fprintf(stderr, "producer: vmsplice %zd errno %d\n", r, errno);
				return NULL;
			}
			/* Segments that got nothing have no release coming. */
			pthread_mutex_lock(&pr->mu);
			size_t at = 0;
			for (int i = 0; i < n; i++) {
				if (iov[i].iov_len && at >= (size_t)r)
					s->outstanding--;
				else if (iov[i].iov_len)
					pr->segs_sent++;
				at += iov[i].iov_len;
			}
			if ((size_t)r < len - done)
				pr->short_calls++;
			pthread_mutex_unlock(&pr->mu);
			done += (size_t)r;
			/* Wait for this call's segments before lending the rest of
			 * the buffer again: keeps base[] unambiguous. */
			if (done < len) {
				pthread_mutex_lock(&pr->mu);
				while (s->outstanding)
					pthread_cond_wait(&pr->cv, &pr->mu);
				pthread_mutex_unlock(&pr->mu);
			}
		}
		k += len;
	}
	pp_close(pr->p[1]);
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct prod *pr = arg;
	static unsigned char buf[65536];
	uint64_t k = 0, rng = 42;
	for (;;) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size_t want = 1 + (rng >> 33) % sizeof buf;
		ssize_t r = pp_read(pr->p[0], buf, want);
		if (r < 0) {
			atomic_fetch_add(&pr->bad, 1);
			break;
		}
		if (r == 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != pat(k + (uint64_t)i)) {
				if (atomic_fetch_add(&pr->bad, 1) < 5)
					fprintf(stderr, "consumer: byte %llu is %u, want %u\n",
					        (unsigned long long)(k + (uint64_t)i), buf[i],
					        pat(k + (uint64_t)i));
				break;
			}
		k += (uint64_t)r;
	}
	if (k != pr->total) {
		fprintf(stderr, "consumer: got %llu bytes, want %llu\n", (unsigned long long)k,
		        (unsigned long long)pr->total);
		atomic_fetch_add(&pr->bad, 1);
	}
	return NULL;
}

static void threaded_producer(void)
{
	static struct prod pr;
	long mb = t_env_long("PP_VMSPLICE_MB", t_scaled(64));
	if (mb < 1)
		mb = t_scaled(64);
	pr.total = (uint64_t)mb << 20;
	pr.rng = 7;
	pthread_mutex_init(&pr.mu, NULL);
	pthread_cond_init(&pr.cv, NULL);
	for (int i = 0; i < PBUFS; i++) {
		pr.slot[i] = (struct pslot){ .pr = &pr, .idx = i, .mem = malloc(PBUF_SIZE) };
	}
	if (mkpipe(pr.p, 0) == 0) {
		/* Room for all 8 buffers: the producer waits for releases, not
		 * for room, and rewrites a buffer the moment it is released. */
		CHECK_EQ(pp_setsize(pr.p[1], 1 << 20), 1 << 20);
		pthread_t tp, tc;
		double t0 = t_now();
		CHECK_EQ(pthread_create(&tc, NULL, consumer_main, &pr), 0);
		CHECK_EQ(pthread_create(&tp, NULL, producer_main, &pr), 0);
		pthread_join(tp, NULL);
		pthread_join(tc, NULL);
		fprintf(stderr, "threaded_producer: %ld MiB in %.2f s, %ld segments, %ld short calls\n",
		        mb, t_now() - t0, pr.segs_sent, pr.short_calls);
		CHECK_EQ(pp_close(pr.p[0]), 0);
	}
	CHECK_EQ(atomic_load(&pr.bad), 0);
	CHECK_EQ(pr.releases, pr.segs_sent);
	CHECK(pr.segs_sent > 0);
	for (int i = 0; i < PBUFS; i++) {
		CHECK_EQ(pr.slot[i].outstanding, 0);
		free(pr.slot[i].mem);
	}
	pthread_mutex_destroy(&pr.mu);
	pthread_cond_destroy(&pr.cv);
}

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(errors);
	RUN(arg_and_null_release);
	RUN(no_pool_pages);
	RUN(release_after_tee);
	RUN(release_after_fanout);
	RUN(release_after_splice_chain);
	RUN(nonblock_partial_splice_flag);
	RUN(nonblock_partial_end_flag);
	RUN(full_pipe_eagain_no_release);
	RUN(contract_reader_sees_caller_changes);
	RUN(writes_never_touch_caller_memory);
	RUN(close_releases);
	RUN(epipe_and_sigpipe);
	RUN(reader_closes_while_blocked);
	RUN(eintr_nothing_placed);
	RUN(blocking_wakes_when_reader_drains);
	RUN(blocked_vmsplice_passes_writer_wake);
	RUN(random_layouts_model);
	RUN(threaded_producer);
	return T_DONE();
}
