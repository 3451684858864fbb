/*
 * shared_atomic_records.c - PIPE_BUF atomicity between processes: several
 * writer processes share one PP_SHARED pagepipe, as they would share a
 * kernel pipe, and the reader processes get their writes whole.
 *
 * Rules checked (pipe(7) "PIPE_BUF"), each on a kernel pipe and on a
 * shared pagepipe, with every writer and reader a process of its own:
 *   - a write of at most PP_PIPE_BUF bytes is never interleaved with
 *     another: records of random sizes (16..4096 bytes), each saying its
 *     writer, sequence number, length and checksum, arrive whole, in each
 *     writer's order, none lost and none twice, to one reader reading in
 *     random sizes;
 *   - with two readers each reading exactly one record size (records of
 *     one size only), every read returns one whole record: the pipe never
 *     holds part of one; each reader sees each writer's records in order
 *     and the two together see every record once;
 *   - writes above PP_PIPE_BUF may interleave (as on a kernel pipe) but
 *     lose, double and reorder nothing: every byte names its writer and
 *     its place in that writer's stream.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"
#include "harness/pipe.h"
#include "harness/procs.h"

#define NW 3            /* writer processes */
#define MAGIC 0x52ec0a7du

struct hdr {
	uint32_t magic;
	uint16_t len;       /* the whole record, header included */
	uint8_t writer;
	uint8_t pad;
	uint32_t seq;
	uint32_t sum;       /* of the payload */
};

static uint32_t payload_sum(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

struct wjob {
	struct tp *t;
	int id;
	long records;   /* records to write (small mode) */
	size_t fixed;   /* every record this long, or 0 for random */
	long bytes;     /* big mode: bytes to write in writes above PIPE_BUF */
};

static void small_writer(void *arg)
{
	struct wjob *j = arg;
	static unsigned char rec[PP_PIPE_BUF];
	uint32_t rs = 1234567u * (uint32_t)(j->id + 1);
	tp_close_end(j->t, 0);
	for (long s = 0; s < j->records; s++) {
		size_t len = j->fixed ? j->fixed : sizeof(struct hdr) + tp_rand(&rs) %
		             (PP_PIPE_BUF - sizeof(struct hdr) + 1);
		struct hdr h = { MAGIC, (uint16_t)len, (uint8_t)j->id, 0, (uint32_t)s, 0 };
		tp_fill(rec + sizeof h, len - sizeof h, (unsigned)(j->id * 1000003 + s), 0);
		h.sum = payload_sum(rec + sizeof h, len - sizeof h);
		memcpy(rec, &h, sizeof h);
		ssize_t r = tp_write(j->t, rec, len);
		if (r != (ssize_t)len) {
			fprintf(stderr, "%s: writer %d record %ld: write %zu returned %zd\n",
			        tp_name(j->t), j->id, s, len, r);
			t_case_failed = 1;
			break;
		}
		if (s % 256 == 0)
			t_progress();
	}
	tp_close_end(j->t, 1);
}

/* What a reader found. */
struct tally {
	long next[NW];          /* one reader: the next sequence due */
	long last[NW];          /* the last sequence seen, -1 none */
	unsigned char *seen;    /* [NW][records]: how often each came */
	long records;
	long bad;
};

/* Check one whole record. */
static void take_record(struct tally *y, const unsigned char *p, size_t len, const char *who)
{
	struct hdr h;
	memcpy(&h, p, sizeof h);
	if (h.magic != MAGIC || h.len != len || h.writer >= NW || h.seq >= (uint32_t)y->records ||
	    h.sum != payload_sum(p + sizeof h, len - sizeof h)) {
		if (y->bad++ < 5)
			fprintf(stderr, "%s: torn or foreign record (magic %x len %u/%zu writer %u seq "
			        "%u)\n", who, h.magic, h.len, len, h.writer, h.seq);
		return;
	}
	if ((long)h.seq <= y->last[h.writer]) {
		if (y->bad++ < 5)
			fprintf(stderr, "%s: writer %u: record %u after %ld\n", who, h.writer, h.seq,
			        y->last[h.writer]);
	}
	y->last[h.writer] = h.seq;
	y->seen[h.writer * y->records + h.seq]++;
}

static void tally_init(struct tally *y, long records)
{
	memset(y, 0, sizeof *y);
	for (int w = 0; w < NW; w++)
		y->last[w] = -1;
	y->records = records;
	y->seen = calloc((size_t)(NW * records), 1);
}

/* Read records of any size in random read sizes, to end of file. */
static void read_records_stream(struct tp *t, struct tally *y)
{
	size_t cap = 1 << 18, have = 0;
	unsigned char *buf = malloc(cap);
	uint32_t rs = 99;
	for (;;) {
		size_t n = 1 + tp_rand(&rs) % 70000;
		if (n > cap - have)
			n = cap - have;
		ssize_t r = tp_read(t, buf + have, n);
		if (r <= 0) {
			CHECK_EQ(r, 0);
			break;
		}
		have += (size_t)r;
		size_t off = 0;
		while (have - off >= sizeof(struct hdr)) {
			struct hdr h;
			memcpy(&h, buf + off, sizeof h);
			if (h.magic != MAGIC || h.len < sizeof h || h.len > PP_PIPE_BUF) {
				fprintf(stderr, "%s: stream lost its framing at a record header\n",
				        tp_name(t));
				y->bad++;
				have = off = 0;
				goto out;
			}
			if (have - off < h.len)
				break;
			take_record(y, buf + off, h.len, tp_name(t));
			off += h.len;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
		t_progress();
	}
out:
	CHECK_EQ(have, 0);
	free(buf);
}

/* Read exactly one record of size len per read, to end of file. */
static void read_records_fixed(struct tp *t, struct tally *y, size_t len)
{
	static unsigned char buf[PP_PIPE_BUF];
	ssize_t r;
	while ((r = tp_read(t, buf, len)) > 0) {
		if ((size_t)r != len) {
			if (y->bad++ < 5)
				fprintf(stderr, "%s: a read of %zu returned %zd: part of a record\n",
				        tp_name(t), len, r);
			continue;
		}
		take_record(y, buf, len, tp_name(t));
	}
	CHECK_EQ(r, 0);
}

struct rjob {
	struct tp *t;
	struct t_sync *s;
	struct tally *y;
	size_t len;
};

/* The second reader: reads, then sends what it saw to the parent. */
static void fixed_reader(void *arg)
{
	struct rjob *j = arg;
	t_sync_keep(j->s, 1);
	tp_close_end(j->t, 1);
	read_records_fixed(j->t, j->y, j->len);
	tp_close_end(j->t, 0);
	if (t_send_all(j->s->fd[1], &j->y->bad, sizeof j->y->bad) != 0 ||
	    t_send_all(j->s->fd[1], j->y->seen, (size_t)(NW * j->y->records)) != 0)
		t_case_failed = 1;
}

/* NW writers of records (fixed size len, or random for 0), one or two
 * readers, on kind. */
static void records(int kind, long n, size_t len, int readers)
{
	struct tp t;
	struct t_sync s;
	struct wjob wj[NW];
	pid_t wp[NW], rp = -1;
	struct tally y, y2;
	if (tp_open_kind(&t, kind, 0) != 0 || t_sync_open(&s) != 0) {
		CHECK(!"open");
		return;
	}
	tally_init(&y, n);
	tally_init(&y2, n);
	for (int w = 0; w < NW; w++) {
		wj[w] = (struct wjob){ &t, w, n, len, 0 };
		wp[w] = t_child(small_writer, &wj[w]);
	}
	struct rjob rj = { &t, &s, &y2, len };
	if (readers == 2)
		rp = t_child(fixed_reader, &rj);
	t_sync_keep(&s, 0);
	tp_close_end(&t, 1);
	if (len)
		read_records_fixed(&t, &y, len);
	else
		read_records_stream(&t, &y);
	tp_close_end(&t, 0);
	if (readers == 2) {
		long bad2 = 0;
		if (t_recv_all(s.fd[0], &bad2, sizeof bad2) != 0 ||
		    t_recv_all(s.fd[0], y2.seen, (size_t)(NW * n)) != 0) {
			fprintf(stderr, "no tally from the second reader\n");
			t_case_failed = 1;
		}
		y.bad += bad2;
	}
	long lost = 0, twice = 0, got2 = 0;
	for (long i = 0; i < NW * n; i++) {
		int c = y.seen[i] + (readers == 2 ? y2.seen[i] : 0);
		lost += c == 0;
		twice += c > 1;
		got2 += readers == 2 && y2.seen[i];
	}
	if (lost || twice || y.bad) {
		fprintf(stderr, "%s: %d writers x %ld records of %zu bytes, %d readers: %ld lost, "
		        "%ld twice, %ld bad\n", tp_name(&t), NW, n, len, readers, lost, twice, y.bad);
		t_case_failed = 1;
	}
	if (readers == 2)
		fprintf(stderr, "  %s: the second reader got %ld of %ld records\n", tp_name(&t),
		        got2, NW * n);
	for (int w = 0; w < NW; w++)
		t_reap(wp[w]);
	t_reap(rp);
	t_sync_close(&s);
	free(y.seen);
	free(y2.seen);
}

static const int kinds[] = { TP_KERNEL, TP_SHARED };

static void records_one_reader(void)
{
	for (int k = 0; k < 2; k++)
		records(kinds[k], t_scaled_san(4000), 0, 1);
}

static void records_two_readers(void)
{
	static const size_t sizes[] = { 4096, 1000, 24 };
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 3; i++)
			records(kinds[k], t_scaled_san(sizes[i] < 100 ? 8000 : 2000), sizes[i], 2);
}

/* ---- writes above PIPE_BUF: every byte tagged -------------------------- */

/* Byte i of writer w's stream: its writer in the top two bits, i's low
 * six bits below. */
static unsigned char tag(int w, long i)
{
	return (unsigned char)((w << 6) | (i & 63));
}

static void big_writer(void *arg)
{
	struct wjob *j = arg;
	size_t cap = 100000;
	unsigned char *buf = malloc(cap);
	uint32_t rs = 777u * (uint32_t)(j->id + 3);
	tp_close_end(j->t, 0);
	long pos = 0;
	while (pos < j->bytes) {
		size_t n = PP_PIPE_BUF + 1 + tp_rand(&rs) % (cap - PP_PIPE_BUF);
		if ((long)n > j->bytes - pos)
			n = (size_t)(j->bytes - pos);
		for (size_t i = 0; i < n; i++)
			buf[i] = tag(j->id, pos + (long)i);
		if (tp_write_all(j->t, buf, n) != 0) {
			fprintf(stderr, "%s: writer %d: write failed at %ld\n", tp_name(j->t), j->id,
			        pos);
			t_case_failed = 1;
			break;
		}
		pos += (long)n;
		t_progress();
	}
	tp_close_end(j->t, 1);
	free(buf);
}

static void big_writes(int kind, long bytes)
{
	struct tp t;
	struct wjob wj[NW];
	pid_t wp[NW];
	if (tp_open_kind(&t, kind, 0) != 0) {
		CHECK(!"open");
		return;
	}
	for (int w = 0; w < NW; w++) {
		wj[w] = (struct wjob){ &t, w, 0, 0, bytes };
		wp[w] = t_child(big_writer, &wj[w]);
	}
	tp_close_end(&t, 1);
	long count[4] = { 0 }, bad = 0, switches = 0;
	int prev = -1;
	static unsigned char buf[65536];
	uint32_t rs = 5;
	ssize_t r;
	while ((r = tp_read(&t, buf, 1 + tp_rand(&rs) % sizeof buf)) > 0) {
		for (ssize_t i = 0; i < r; i++) {
			int w = buf[i] >> 6;
			if (w >= NW || buf[i] != tag(w, count[w])) {
				if (bad++ < 5)
					fprintf(stderr, "%s: byte %02x: writer %d expected at %ld\n",
					        tp_name(&t), buf[i], w, w < NW ? count[w] : -1);
			}
			count[w]++;
			switches += w != prev;
			prev = w;
		}
		t_progress();
	}
	CHECK_EQ(r, 0);
	tp_close_end(&t, 0);
	for (int w = 0; w < NW; w++) {
		if (count[w] != bytes) {
			fprintf(stderr, "%s: writer %d: %ld of %ld bytes arrived\n", tp_name(&t), w,
			        count[w], bytes);
			t_case_failed = 1;
		}
		t_reap(wp[w]);
	}
	if (bad)
		t_case_failed = 1;
	fprintf(stderr, "  %s: %ld runs of one writer's bytes\n", tp_name(&t), switches);
}

static void big_writes_lose_nothing(void)
{
	for (int k = 0; k < 2; k++)
		big_writes(kinds[k], t_scaled_san(6 << 20));
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(records_one_reader);
	RUN(records_two_readers);
	RUN(big_writes_lose_nothing);
	return T_DONE();
}
