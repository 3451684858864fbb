/*
 * splice_fanout_stream.c - pp_fanout under threads: a 64 MiB stream of
 * checksummed 16-byte records (PP_SPLICE_STREAM_MB; 16 under a sanitizer;
 * times PP_TEST_SCALE) is fanned out by one thread to 3 outputs, each
 * drained by a reader thread, while a thief thread reads the source too.
 * Every record must go either to all three outputs, in order, or to the
 * thief, never both or neither.
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice.h"

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
	CHECK_EQ(tp_pages_in_use(), 0);
}

int main(void)
{
	RUN(fanout_stream);
	return T_DONE();
}
