/*
 * coalesce.c - how writes are packed into ring slots.
 *
 * A kernel pipe merges the first (len % 4096) bytes of a write into the
 * last buffer when the pipe is not empty, that buffer is mergeable (not
 * packet mode) and offset + len + chars <= 4096; the rest goes into fresh
 * pages of up to 4096 bytes, one slot each, and a writer is stopped only
 * when every slot is used.  Which writes fit is therefore observable: these
 * cases drive a kernel pipe and a pagepipe through the same non-blocking
 * sequences and require the same count or EAGAIN at every step.  They also
 * run a small model of that rule, so pp_pool_stats().pages_in_use can be
 * checked slot for slot (one page per occupied slot), e.g. 65536 one-byte
 * writes use 16 pages.
 */
#include "harness/harness.h"
#include "harness/helpers.h"

/* ---- a model of the kernel's ring --------------------------------------- */

#define M_MAXSLOTS 64
struct model {
	int max;   /* slots */
	int n;     /* occupied */
	int packet;
	struct { int off, len; } b[M_MAXSLOTS]; /* b[0] is the oldest */
};

static void m_init(struct model *m, int slots, int packet)
{
	memset(m, 0, sizeof *m);
	m->max = slots;
	m->packet = packet;
}

static long m_write(struct model *m, long len)
{
	long ret = 0;
	if (len == 0)
		return 0;
	long chars = len % 4096;
	if (chars && m->n > 0 && !m->packet) {
		int l = m->n - 1;
		if (m->b[l].off + m->b[l].len + chars <= 4096) {
			m->b[l].len += (int)chars;
			ret = chars;
			len -= chars;
		}
	}
	while (len > 0) {
		if (m->n == m->max)
			return ret ? ret : -EAGAIN;
		int c = len > 4096 ? 4096 : (int)len;
		m->b[m->n].off = 0;
		m->b[m->n].len = c;
		m->n++;
		ret += c;
		len -= c;
	}
	return ret;
}

static void m_pop(struct model *m)
{
	memmove(&m->b[0], &m->b[1], sizeof m->b[0] * (size_t)(m->n - 1));
	m->n--;
}

static long m_read(struct model *m, long count)
{
	long ret = 0;
	if (count == 0)
		return 0;
	while (count > 0 && m->n > 0) {
		int c = m->b[0].len < count ? m->b[0].len : (int)count;
		m->b[0].off += c;
		m->b[0].len -= c;
		ret += c;
		count -= c;
		if (m->packet || m->b[0].len == 0) {
			m_pop(m);
			if (m->packet)
				break;
		}
	}
	return ret ? ret : -EAGAIN;
}

static long m_bytes(const struct model *m)
{
	long s = 0;
	for (int i = 0; i < m->n; i++)
		s += m->b[i].len;
	return s;
}

/* ---- cases -------------------------------------------------------------- */

/* 65536 one-byte writes fit in a default pipe, the next gets EAGAIN, and
 * they occupy 16 pages. */
static void sc_one_byte(struct tp_rec *r, int kernel)
{
	struct tp t;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	long ok = 0, res = 0;
	if (!kernel)
		CHECK_EQ(tp_pages_in_use(), 0);
	for (int i = 0; i < 70000; i++) {
		res = tp_res(tp_write(&t, "x", 1));
		if (res != 1)
			break;
		ok++;
	}
	TP_REC(r, "one-byte writes that fit", ok);
	TP_REC(r, "the next", res);
	TP_REC(r, "nread", tp_nread(&t, 0));
	CHECK_EQ(ok, 65536);
	CHECK_EQ(res, -EAGAIN);
	if (!kernel)
		CHECK_EQ(tp_pages_in_use(), 16);
	char buf[100];
	TP_REC(r, "read 100", tp_res(tp_read(&t, buf, 100)));
	TP_REC(r, "still full", tp_res(tp_write(&t, "x", 1)));
	static char page[4096];
	TP_REC(r, "read 3996", tp_res(tp_read(&t, page, 3996)));
	TP_REC(r, "a slot freed", tp_res(tp_write(&t, page, 4096)));
	TP_REC(r, "full again", tp_res(tp_write(&t, "x", 1)));
	if (!kernel)
		CHECK_EQ(tp_pages_in_use(), 16);
	tp_close(&t);
	if (!kernel)
		CHECK_EQ(tp_pages_in_use(), 0);
}

static void one_byte_writes_fill_16_pages(void)
{
	TP_BOTH(sc_one_byte);
}

/* A full pipe still takes a write whose bytes merge into the last buffer. */
static void sc_full_merge(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[8192];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	for (int i = 0; i < 8; i++) {
		/* 4000 then 100 cannot merge: every write takes a slot. */
		TP_REC(r, "4000", tp_res(tp_write(&t, buf, 4000)));
		TP_REC(r, "100", tp_res(tp_write(&t, buf, 100)));
	}
	TP_REC(r, "full: 4096", tp_res(tp_write(&t, buf, 4096)));
	TP_REC(r, "full: 100 merges", tp_res(tp_write(&t, buf, 100)));
	TP_REC(r, "full: 3000 merges", tp_res(tp_write(&t, buf, 3000)));
	TP_REC(r, "full: 897 too many", tp_res(tp_write(&t, buf, 897)));
	TP_REC(r, "full: 896 fills", tp_res(tp_write(&t, buf, 896)));
	TP_REC(r, "full: 1", tp_res(tp_write(&t, buf, 1)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	if (!kernel)
		CHECK_EQ(tp_pages_in_use(), 16);
	tp_close(&t);
	CHECK_EQ(r->v[16], -EAGAIN);
	CHECK_EQ(r->v[17], 100);
	CHECK_EQ(r->v[19], -EAGAIN);
	CHECK_EQ(r->v[20], 896);
	CHECK_EQ(r->v[21], -EAGAIN);
}

static void full_pipe_takes_merging_write(void)
{
	TP_BOTH(sc_full_merge);
}

/* After a partial read the buffer's offset still counts: offset + len +
 * chars must fit in the page, not just len + chars. */
static void sc_offset(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[8192];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "setsize 2 slots", tp_setsize(&t, 0, 8192));
	TP_REC(r, "3000", tp_res(tp_write(&t, buf, 3000)));
	TP_REC(r, "read 2000", tp_res(tp_read(&t, buf, 2000)));
	TP_REC(r, "1000 merges (2000+1000+1000)", tp_res(tp_write(&t, buf, 1000)));
	TP_REC(r, "200 does not (4000+200)", tp_res(tp_write(&t, buf, 200)));
	TP_REC(r, "4096: no slot", tp_res(tp_write(&t, buf, 4096)));
	TP_REC(r, "3896 merges into the second", tp_res(tp_write(&t, buf, 3896)));
	TP_REC(r, "1: nothing fits", tp_res(tp_write(&t, buf, 1)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	if (!kernel)
		CHECK_EQ(tp_pages_in_use(), 2);
	tp_close(&t);
	TP_WANT(r, kernel, 8192, 3000, 2000, 1000, 200, -EAGAIN, 3896, -EAGAIN,
	        6096);
}

static void merge_counts_buffer_offset(void)
{
	TP_BOTH(sc_offset);
}

/* Fixed sequences of non-blocking writes (each run to the end, EAGAINs
 * included): same results as the kernel and as the model, and the pages
 * in use equal the model's slots after every step. */
static const long seq_a[] = { 4000, 200, 200, 200, 200, 200, 200, 200, 200,
                              200, 200, 200, 200, 200, 200, 200, 200, 200,
                              200, 200, 200, 200, 200, 200, 4000, 200, 0 };
static const long seq_b[] = { 100, 8292, 100, 4097, 4095, 1, 1, 5000, 3000,
                              8192, 100, 4097, 12000, 20000, 4096, 50, 4046,
                              1, 9000, 0 };
static const long seq_c[] = { 1, 4096, 1, 4095, 2, 4094, 3, 4093, 4, 4097, 4,
                              8191, 8193, 3, 4096, 4096, 4096, 4096, 4096,
                              4096, 4096, 4096, 4096, 100, 4096, 0 };
static const long seq_d[] = { 70000, 1, 4096, 100000, 0 };
static const long seq_e[] = { 100, 70000, 100, 5000, 368, 0 };
static const long *const seqs[] = { seq_a, seq_b, seq_c, seq_d, seq_e };
static int seq_pick;

static void sc_sequence(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct model m;
	static char buf[100000];
	const long *s = seqs[seq_pick];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	m_init(&m, 16, 0);
	for (int i = 0; s[i]; i++) {
		/* Each write is repeated until it fails or 40 times, so that the
		 * EAGAIN point of each length is reached. */
		for (int k = 0; k < 40; k++) {
			long got = tp_res(tp_write(&t, buf, (size_t)s[i]));
			long want = m_write(&m, s[i]);
			TP_REC(r, "write", got);
			if (got != want) {
				fprintf(stderr, "seq %d step %d (%ld bytes) rep %d: %s %ld, "
				        "model %ld\n", seq_pick, i, s[i], k, tp_name(&t),
				        got, want);
				t_case_failed = 1;
			}
			if (!kernel && tp_pages_in_use() != m.n) {
				fprintf(stderr, "seq %d step %d rep %d: pages_in_use %ld, "
				        "model slots %d\n", seq_pick, i, k, tp_pages_in_use(), m.n);
				t_case_failed = 1;
			}
			if (got < 0)
				break;
		}
		TP_REC(r, "nread", tp_nread(&t, 0));
		CHECK_EQ(tp_nread(&t, 0), m_bytes(&m));
	}
	tp_close(&t);
}

static void merge_sequences_vs_kernel(void)
{
	for (seq_pick = 0; seq_pick < (int)(sizeof seqs / sizeof seqs[0]); seq_pick++)
		TP_BOTH(sc_sequence);
}

/* Seeded random writes and reads on pipes of several sizes: the kernel,
 * the model and the pagepipe agree on every result and every byte count,
 * the pages in use follow the model's slots, and the data is intact. */
static uint32_t rnd_seed;
static int rnd_slots;

static long rnd_len(uint32_t *s)
{
	uint32_t x = tp_rand(s);
	switch (x % 8) {
	case 0: case 1: case 2:
		return 1 + (long)(tp_rand(s) % 200);
	case 3:
		return 4096 * (1 + (long)(tp_rand(s) % 3)) + (long)(tp_rand(s) % 5) - 2;
	case 4:
		return 3900 + (long)(tp_rand(s) % 300);
	case 5:
		return 1 + (long)(tp_rand(s) % 20000);
	default:
		return 1 + (long)(tp_rand(s) % 4096);
	}
}

static void sc_random(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct model m;
	static char buf[70000];
	uint32_t s = rnd_seed;
	size_t wpos = 0, rpos = 0;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "setsize", tp_setsize(&t, 1, (size_t)rnd_slots * 4096));
	m_init(&m, rnd_slots, 0);
	int steps = (int)t_scaled(600);
	for (int i = 0; i < steps; i++) {
		uint32_t op = tp_rand(&s) % 10;
		long len = rnd_len(&s);
		long got, want;
		if (op < 6) {
			tp_fill(buf, (size_t)len, 17, wpos);
			got = tp_res(tp_write(&t, buf, (size_t)len));
			want = m_write(&m, len);
			TP_REC(r, "write", got);
			if (got > 0)
				wpos += (size_t)got;
		} else {
			got = tp_res(tp_read(&t, buf, (size_t)len));
			want = m_read(&m, len);
			TP_REC(r, "read", got);
			if (got > 0) {
				long b = tp_verify(buf, (size_t)got, 17, rpos);
				if (b >= 0) {
					fprintf(stderr, "%s: bad byte at stream offset %zu\n",
					        tp_name(&t), rpos + (size_t)b);
					t_case_failed = 1;
				}
				rpos += (size_t)got;
			}
		}
		if (got != want) {
			fprintf(stderr, "seed %u slots %d step %d: %s %ld -> %s %ld, "
			        "model %ld\n", rnd_seed, rnd_slots, i,
			        op < 6 ? "write" : "read", len, tp_name(&t), got, want);
			t_case_failed = 1;
			break;
		}
		long pages = kernel ? m.n : tp_pages_in_use();
		if (pages != m.n) {
			fprintf(stderr, "seed %u slots %d step %d: pages_in_use %ld, "
			        "model slots %d\n", rnd_seed, rnd_slots, i, pages, m.n);
			t_case_failed = 1;
			break;
		}
		TP_REC(r, "nread", tp_nread(&t, 0));
	}
	tp_close(&t);
}

static void random_mix_vs_kernel(void)
{
	static const int sizes[] = { 1, 2, 4, 16 };
	for (int si = 0; si < 4; si++) {
		for (uint32_t seed = 1; seed <= 3; seed++) {
			rnd_seed = seed * 7919u + (uint32_t)si;
			rnd_slots = sizes[si];
			TP_BOTH(sc_random);
		}
	}
}

/* Packet mode never merges: every write takes a slot of its own. */
static void sc_packet_fill(struct tp_rec *r, int kernel)
{
	struct tp t;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK | PP_PACKET), 0);
	long ok = 0, res = 0;
	for (int i = 0; i < 100; i++) {
		res = tp_res(tp_write(&t, "y", 1));
		if (res != 1)
			break;
		ok++;
	}
	TP_REC(r, "one-byte packets that fit", ok);
	TP_REC(r, "the next", res);
	TP_REC(r, "nread", tp_nread(&t, 0));
	if (!kernel)
		CHECK_EQ(tp_pages_in_use(), 16);
	CHECK_EQ(ok, 16);
	CHECK_EQ(res, -EAGAIN);
	tp_close(&t);

	/* The model, run on a packet pipe with random lengths and reads. */
	static char buf[20000];
	struct model m;
	uint32_t s = 2024;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK | PP_PACKET), 0);
	m_init(&m, 16, 1);
	for (int i = 0; i < 300; i++) {
		long len = rnd_len(&s), got, want;
		if (tp_rand(&s) % 3) {
			got = tp_res(tp_write(&t, buf, (size_t)len));
			want = m_write(&m, len);
		} else {
			got = tp_res(tp_read(&t, buf, (size_t)len));
			want = m_read(&m, len);
		}
		TP_REC(r, "op", got);
		if (got != want || (!kernel && tp_pages_in_use() != m.n)) {
			fprintf(stderr, "packet step %d len %ld: %s %ld, model %ld, "
			        "slots %d\n", i, len, tp_name(&t), got, want, m.n);
			t_case_failed = 1;
			break;
		}
	}
	tp_close(&t);
}

static void packet_mode_never_merges(void)
{
	TP_BOTH(sc_packet_fill);
}

int main(void)
{
	RUN(one_byte_writes_fill_16_pages);
	RUN(full_pipe_takes_merging_write);
	RUN(merge_counts_buffer_offset);
	RUN(merge_sequences_vs_kernel);
	RUN(random_mix_vs_kernel);
	RUN(packet_mode_never_merges);
	return T_DONE();
}
