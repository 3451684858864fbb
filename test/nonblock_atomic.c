/*
 * nonblock_atomic.c - non-blocking writes and write atomicity.
 *
 * Non-blocking: a write of at most 4096 bytes goes in whole or fails with
 * EAGAIN (and then writes nothing); a longer one writes what fits, and the
 * exact count is compared with a kernel pipe in a table of states.
 * Atomicity: several threads write records of 4096 bytes, or of random
 * sizes up to 4096 (some with writev), each tagged with writer id,
 * sequence number and length; a reader with random read sizes checks that
 * the stream is a sequence of whole records, never interleaved.  Run on a
 * kernel pipe too, as a check on the test itself.
 */
#include "harness/harness.h"
#include "harness/helpers.h"

/* A full pipe refuses every write of at most 4096 bytes that cannot merge,
 * and writes nothing of it. */
static void sc_small_all_or_nothing(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[8192];
	static const size_t sizes[] = { 4096, 4095, 2048, 200, 97, 1 };
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	for (int i = 0; i < 15; i++)
		TP_REC(r, "4096", tp_res(tp_write(&t, buf, 4096)));
	TP_REC(r, "4000", tp_res(tp_write(&t, buf, 4000)));
	/* Full: only what merges into the last page (96 bytes) can go in. */
	for (size_t i = 0; i < 5; i++) {
		TP_REC(r, "small write on full pipe", tp_res(tp_write(&t, buf, sizes[i])));
		TP_REC(r, "nread", tp_nread(&t, 0));
	}
	TP_REC(r, "95 merges", tp_res(tp_write(&t, buf, 95)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "2 does not", tp_res(tp_write(&t, buf, 2)));
	TP_REC(r, "1 merges", tp_res(tp_write(&t, buf, 1)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	for (size_t i = 0; i < 6; i++)
		TP_REC(r, "small write on full pipe", tp_res(tp_write(&t, buf, sizes[i])));
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close(&t);
	const long E = -EAGAIN;
	TP_WANT(r, kernel, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096,
	        4096, 4096, 4096, 4096, 4096, 4096, 4000, E, 65440, E, 65440, E,
	        65440, E, 65440, E, 65440, 95, 65535, E, 1, 65536, E, E, E, E,
	        E, E, 65536);
}

static void small_writes_all_or_eagain(void)
{
	TP_BOTH(sc_small_all_or_nothing);
}

/* Longer writes write exactly what fits; compared with the kernel in a
 * table of pipe states, and the bytes written are the write's prefix. */
struct partial_case {
	const char *name;
	long setsize;      /* 0: default */
	long prefill[20];  /* writes first, 0-terminated */
	long drain;        /* then read this much */
	long write;        /* the write under test */
};

static const struct partial_case pcases[] = {
	{ "empty, 100000", 0, { 0 }, 0, 100000 },
	{ "100 in, 70000", 0, { 100, 0 }, 0, 70000 },
	{ "4096 in, 8193", 0, { 4096, 0 }, 0, 8193 },
	{ "15 pages in, 4097", 0, { 61440, 0 }, 0, 4097 },
	{ "15 pages + 100, 5000 (merge then full)", 0, { 61440, 100, 0 }, 0, 5000 },
	{ "15 pages + 4000, 5000 (no merge)", 0, { 61440, 4000, 0 }, 0, 5000 },
	{ "full, 5000", 0, { 65536, 0 }, 0, 5000 },
	{ "full, one page read, 10000", 0, { 65536, 0 }, 4096, 10000 },
	{ "full, 100 read, 10000", 0, { 65536, 0 }, 100, 10000 },
	{ "2 slots, 3 pages", 8192, { 0 }, 0, 12291 },
	{ "1 slot, 10 in, 8000", 4096, { 10, 0 }, 0, 8000 },
	{ "1 slot, 10 in, 4087+4096", 4096, { 10, 0 }, 0, 8183 },
	{ "4 slots, 3 odd in, 9000", 16384, { 4000, 100, 4000, 0 }, 0, 9000 },
	{ "256 KiB, 1 MiB", 262144, { 0 }, 0, 1 << 20 },
};
static int pcase;

static void sc_partial(struct tp_rec *r, int kernel)
{
	const struct partial_case *c = &pcases[pcase];
	struct tp t;
	static char buf[1 << 20], out[1 << 20];
	size_t wpos = 0, rpos = 0;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	if (c->setsize)
		TP_REC(r, "setsize", tp_setsize(&t, 1, (size_t)c->setsize));
	for (int i = 0; c->prefill[i]; i++) {
		tp_fill(buf, (size_t)c->prefill[i], 8, wpos);
		ssize_t n = tp_write(&t, buf, (size_t)c->prefill[i]);
		TP_REC(r, "prefill", tp_res(n));
		if (n > 0)
			wpos += (size_t)n;
	}
	if (c->drain) {
		ssize_t n = tp_read(&t, out, (size_t)c->drain);
		TP_REC(r, "drain", tp_res(n));
		if (n > 0)
			rpos += (size_t)n;
	}
	tp_fill(buf, (size_t)c->write, 8, wpos);
	ssize_t n = tp_write(&t, buf, (size_t)c->write);
	TP_REC(r, "the write", tp_res(n));
	if (n > 0)
		wpos += (size_t)n;
	TP_REC(r, "nread", tp_nread(&t, 0));
	/* Everything in the pipe is the stream, in order, and nothing more. */
	size_t got = 0;
	for (;;) {
		ssize_t m = tp_read(&t, out, sizeof out);
		if (m <= 0)
			break;
		CHECK_EQ(tp_verify(out, (size_t)m, 8, rpos), -1);
		rpos += (size_t)m;
		got += (size_t)m;
	}
	CHECK_EQ(rpos, wpos);
	TP_REC(r, "read back", (long)got);
	tp_close(&t);
}

static void long_writes_partial_like_kernel(void)
{
	for (pcase = 0; pcase < (int)(sizeof pcases / sizeof pcases[0]); pcase++) {
		int before = t_case_failed;
		t_case_failed = 0;
		TP_BOTH(sc_partial);
		if (t_case_failed)
			fprintf(stderr, "  ^ in table case \"%s\"\n", pcases[pcase].name);
		t_case_failed |= before;
	}
}

/* ---- record streams ----------------------------------------------------- */

#define REC_MAGIC 0x5043u
struct rec_hdr {
	uint16_t magic;
	uint16_t writer;
	uint32_t seq;
	uint32_t len;
};

struct rec_writer {
	struct tp *t;
	struct pp_end *e; /* own dup handle (pagepipe) */
	int fd;           /* own dup descriptor (kernel) */
	int id;
	int count;
	int random_sizes;
	int nonblock;
	long partial;     /* writes that returned a short count: must stay 0 */
	long errors;
	long eagains;
};

static ssize_t rw_write(struct rec_writer *w, const void *buf, size_t n)
{
	return w->t->kernel ? write(w->fd, buf, n) : pp_write(w->e, buf, n);
}

static ssize_t rw_writev(struct rec_writer *w, const struct iovec *iov, int cnt)
{
	return w->t->kernel ? writev(w->fd, iov, cnt) : pp_writev(w->e, iov, cnt);
}

static void *rec_write(void *arg)
{
	struct rec_writer *w = arg;
	static __thread unsigned char buf[4096];
	uint32_t s = (uint32_t)w->id * 2654435761u + 7;
	for (int i = 0; i < w->count; i++) {
		size_t len = 4096;
		if (w->random_sizes)
			len = sizeof(struct rec_hdr) + tp_rand(&s) % (4096 - sizeof(struct rec_hdr) + 1);
		struct rec_hdr h = { REC_MAGIC, (uint16_t)w->id, (uint32_t)i, (uint32_t)len };
		tp_fill(buf, len, (unsigned)(w->id * 100000 + i), 0);
		memcpy(buf, &h, sizeof h);
		int use_vec = (tp_rand(&s) % 3) == 0;
		for (;;) {
			ssize_t n;
			if (use_vec) {
				/* three segments, one call: still one atomic write */
				size_t a = len / 3, b = len / 3;
				struct iovec iov[3] = {
					{ buf, a }, { buf + a, b }, { buf + a + b, len - a - b },
				};
				n = rw_writev(w, iov, 3);
			} else {
				n = rw_write(w, buf, len);
			}
			if (n == (ssize_t)len)
				break;
			if (n >= 0) {
				w->partial++;
				break;
			}
			if (errno == EAGAIN && w->nonblock) {
				w->eagains++;
				sched_yield();
				continue;
			}
			w->errors++;
			break;
		}
	}
	if (w->t->kernel)
		close(w->fd);
	else
		pp_close(w->e);
	return NULL;
}

#define NW 4
static int g_random_sizes, g_nonblock;

/* Reads the whole stream (random read sizes) and checks that it is made of
 * whole records in per-writer order. */
static void sc_records(struct tp_rec *r, int kernel)
{
	struct tp t;
	pthread_t th[NW];
	struct rec_writer w[NW];
	int count = (int)t_scaled(g_random_sizes ? 600 : 300);
	uint32_t next[NW] = { 0 };
	static unsigned char stream[3 * 4096 + 65536];
	size_t have = 0;
	long bad = 0, records = 0;
	uint32_t s = 31337;

	CHECK_EQ(tp_open(&t, kernel, g_nonblock ? PP_NONBLOCK : 0), 0);
	/* A small pipe makes the writers meet on a full pipe often. */
	CHECK_EQ(tp_setsize(&t, 0, 2 * 4096), 8192);
	if (g_nonblock)
		CHECK_EQ(tp_setnonblock(&t, 0, 0), 0); /* reader blocks */
	for (int i = 0; i < NW; i++) {
		w[i] = (struct rec_writer){ &t, NULL, -1, i, count, g_random_sizes,
		                            g_nonblock, 0, 0, 0 };
		if (kernel)
			w[i].fd = dup(t.fd[1]);
		else
			w[i].e = pp_dup(t.e[1]);
	}
	tp_close_end(&t, 1);
	for (int i = 0; i < NW; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, rec_write, &w[i]), 0);

	for (;;) {
		size_t want = 1 + tp_rand(&s) % 6000;
		if (want > sizeof stream - have)
			want = sizeof stream - have;
		ssize_t n = tp_read(&t, stream + have, want);
		if (n <= 0)
			break;
		have += (size_t)n;
		/* Take out every complete record. */
		size_t pos = 0;
		while (have - pos >= sizeof(struct rec_hdr)) {
			struct rec_hdr h;
			memcpy(&h, stream + pos, sizeof h);
			if (h.magic != REC_MAGIC || h.writer >= NW || h.len > 4096 ||
			    h.len < sizeof h || h.seq != next[h.writer]) {
				if (bad++ < 3)
					fprintf(stderr, "%s: record header broken at record %ld: "
					        "magic %#x writer %u seq %u len %u\n", tp_name(&t),
					        records, h.magic, h.writer, h.seq, h.len);
				pos = have; /* the stream is lost; drop it */
				break;
			}
			if (have - pos < h.len)
				break;
			long b = tp_verify(stream + pos + sizeof h, h.len - sizeof h,
			                   h.writer * 100000u + h.seq, sizeof h);
			if (b != -1 && bad++ < 3)
				fprintf(stderr, "%s: record %u/%u interleaved at byte %ld\n",
				        tp_name(&t), h.writer, h.seq, b + (long)sizeof h);
			next[h.writer]++;
			records++;
			pos += h.len;
		}
		memmove(stream, stream + pos, have - pos);
		have -= pos;
	}
	long partial = 0, errors = 0;
	for (int i = 0; i < NW; i++) {
		pthread_join(th[i], NULL);
		partial += w[i].partial;
		errors += w[i].errors;
		if (!bad)
			CHECK_EQ(next[i], (uint32_t)count);
	}
	TP_REC(r, "records", records);
	TP_REC(r, "bad", bad);
	TP_REC(r, "partial writes", partial);
	TP_REC(r, "errors", errors);
	TP_REC(r, "leftover bytes", (long)have);
	CHECK_EQ(bad, 0);
	CHECK_EQ(partial, 0);
	CHECK_EQ(errors, 0);
	CHECK_EQ(have, 0);
	CHECK_EQ(records, (long)NW * count);
	tp_close(&t);
}

static void atomic_4096_records(void)
{
	g_random_sizes = 0;
	g_nonblock = 0;
	TP_BOTH(sc_records);
}

static void atomic_random_records(void)
{
	g_random_sizes = 1;
	g_nonblock = 0;
	TP_BOTH(sc_records);
}

static void atomic_nonblocking_writers(void)
{
	g_random_sizes = 1;
	g_nonblock = 1;
	TP_BOTH(sc_records);
}

int main(void)
{
	RUN(small_writes_all_or_eagain);
	RUN(long_writes_partial_like_kernel);
	RUN(atomic_4096_records);
	RUN(atomic_random_records);
	RUN(atomic_nonblocking_writers);
	return T_DONE();
}
