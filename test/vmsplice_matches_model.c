/*
 * vmsplice_matches_model.c - random segment layouts (0-length, 1, 4095,
 * 4096, 4097, 100 KiB, random; unaligned bases; NULL bases of length 0)
 * go into a pipe with pp_vmsplice, then random reads, splices, tees and
 * fan-outs between three pipes move them about.  A model tracks which
 * stream bytes every pipe holds: every byte read must be the caller's,
 * and after every step the released segments must be exactly those whose
 * every copy has been consumed, each released once with its own base and
 * full length; no pool page is ever in use.  The release callback
 * scribbles over the memory it gets back (vmsplice.h), so an early
 * release shows as wrong data.
 * After every case: no pool page in use, no callback with a foreign arg
 * (vmsplice.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "vmsplice.h"

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
	if (tp_pages_in_use() != 0) {
		fprintf(stderr, "after %s: %ld pool pages in use\n", step, tp_pages_in_use());
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

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(random_layouts_model);
	return T_DONE();
}
