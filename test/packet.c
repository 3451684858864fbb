/*
 * packet.c - packet mode (PP_PACKET), compared with pipe2(O_DIRECT).
 *
 * Every write chunk of up to 4096 bytes is one packet; a write longer than
 * 4096 is cut into 4096-byte packets and a last short one; a read returns
 * at most one packet and discards whatever of it did not fit (readv too);
 * a zero-count read takes nothing; pp_nread counts whole packets; end of
 * file comes after the last packet; packets from several writer threads
 * arrive whole.
 */
#include "harness/harness.h"
#include "harness/helpers.h"

/* Each write is one packet; a read returns one packet even with room for
 * more. */
static void sc_one_packet_per_write(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char in[4096], out[8192];
	tp_fill(in, sizeof in, 1, 0);
	CHECK_EQ(tp_open(&t, kernel, PP_PACKET | PP_NONBLOCK), 0);
	TP_REC(r, "w100", tp_res(tp_write(&t, in, 100)));
	TP_REC(r, "w200", tp_res(tp_write(&t, in + 100, 200)));
	TP_REC(r, "w4096", tp_res(tp_write(&t, in, 4096)));
	TP_REC(r, "w1", tp_res(tp_write(&t, in + 300, 1)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "r", tp_res(tp_read(&t, out, sizeof out)));
	CHECK_EQ(tp_verify(out, 100, 1, 0), -1);
	TP_REC(r, "r", tp_res(tp_read(&t, out, sizeof out)));
	CHECK_EQ(tp_verify(out, 200, 1, 100), -1);
	TP_REC(r, "r", tp_res(tp_read(&t, out, sizeof out)));
	CHECK_EQ(tp_verify(out, 4096, 1, 0), -1);
	TP_REC(r, "r exact size", tp_res(tp_read(&t, out, 1)));
	CHECK_EQ(tp_verify(out, 1, 1, 300), -1);
	TP_REC(r, "r empty", tp_res(tp_read(&t, out, sizeof out)));
	tp_close(&t);
	TP_WANT(r, kernel, 100, 200, 4096, 1, 4397, 100, 200, 4096, 1, -EAGAIN);
}

static void each_write_is_one_packet(void)
{
	TP_BOTH(sc_one_packet_per_write);
}

/* A read smaller than the packet returns its head and discards the rest. */
static void sc_discard(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char in[3000], out[4096];
	tp_fill(in, sizeof in, 2, 0);
	CHECK_EQ(tp_open(&t, kernel, PP_PACKET | PP_NONBLOCK), 0);
	TP_REC(r, "w1000", tp_res(tp_write(&t, in, 1000)));
	TP_REC(r, "w500", tp_res(tp_write(&t, in + 1000, 500)));
	TP_REC(r, "r10", tp_res(tp_read(&t, out, 10)));
	CHECK_EQ(tp_verify(out, 10, 2, 0), -1);
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "r next packet", tp_res(tp_read(&t, out, sizeof out)));
	CHECK_EQ(tp_verify(out, 500, 2, 1000), -1);
	TP_REC(r, "w1000", tp_res(tp_write(&t, in, 1000)));
	TP_REC(r, "r999", tp_res(tp_read(&t, out, 999)));
	TP_REC(r, "r: last byte gone", tp_res(tp_read(&t, out, sizeof out)));
	tp_close(&t);
	TP_WANT(r, kernel, 1000, 500, 10, 500, 500, 1000, 999, -EAGAIN);
}

static void short_read_discards_rest(void)
{
	TP_BOTH(sc_discard);
}

/* A write longer than 4096 is cut into 4096-byte packets. */
static void sc_split(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char in[20000], out[65536];
	tp_fill(in, sizeof in, 3, 0);
	CHECK_EQ(tp_open(&t, kernel, PP_PACKET | PP_NONBLOCK), 0);
	TP_REC(r, "w10000", tp_res(tp_write(&t, in, 10000)));
	TP_REC(r, "w8192", tp_res(tp_write(&t, in + 10000, 8192)));
	TP_REC(r, "w4097", tp_res(tp_write(&t, in, 4097)));
	size_t off[] = { 0, 4096, 8192, 10000, 14096, 0, 4096 };
	for (int i = 0; i < 7; i++) {
		ssize_t n = tp_read(&t, out, sizeof out);
		TP_REC(r, "read", tp_res(n));
		if (n > 0)
			CHECK_EQ(tp_verify(out, (size_t)n, 3, off[i]), -1);
	}
	TP_REC(r, "empty", tp_res(tp_read(&t, out, sizeof out)));
	tp_close(&t);
	TP_WANT(r, kernel, 10000, 8192, 4097, 4096, 4096, 1808, 4096, 4096,
	        4096, 1, -EAGAIN);
}

static void long_write_splits_into_pages(void)
{
	TP_BOTH(sc_split);
}

/* A non-blocking long write in packet mode writes the packets that fit. */
static void sc_partial(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char in[100000];
	CHECK_EQ(tp_open(&t, kernel, PP_PACKET | PP_NONBLOCK), 0);
	for (int i = 0; i < 14; i++)
		TP_REC(r, "w1", tp_res(tp_write(&t, in, 1)));
	TP_REC(r, "w10000: two slots left", tp_res(tp_write(&t, in, 10000)));
	TP_REC(r, "w1 full", tp_res(tp_write(&t, in, 1)));
	TP_REC(r, "nread", tp_nread(&t, 1));
	tp_close(&t);
	CHECK_EQ(r->v[14], 8192);
	CHECK_EQ(r->v[15], -EAGAIN);
}

static void nonblocking_long_write_partial(void)
{
	TP_BOTH(sc_partial);
}

/* readv reads one packet spread over the segments, and discards the rest;
 * writev makes one packet of all its segments. */
static void sc_vectors(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char in[5000], a[50], b[50], c[4096];
	tp_fill(in, sizeof in, 4, 0);
	CHECK_EQ(tp_open(&t, kernel, PP_PACKET | PP_NONBLOCK), 0);
	struct iovec w[3] = { { in, 100 }, { in + 100, 100 }, { in + 200, 100 } };
	TP_REC(r, "writev 3x100", tp_res(tp_writev(&t, w, 3)));
	TP_REC(r, "w80", tp_res(tp_write(&t, in + 300, 80)));
	struct iovec rv[2] = { { a, 50 }, { b, 50 } };
	TP_REC(r, "readv 2x50 of 300", tp_res(tp_readv(&t, rv, 2)));
	CHECK_EQ(tp_verify(a, 50, 4, 0), -1);
	CHECK_EQ(tp_verify(b, 50, 4, 50), -1);
	TP_REC(r, "readv 2x50 of 80", tp_res(tp_readv(&t, rv, 2)));
	CHECK_EQ(tp_verify(a, 50, 4, 300), -1);
	CHECK_EQ(tp_verify(b, 30, 4, 350), -1);
	struct iovec w2[2] = { { in, 3000 }, { in + 3000, 2000 } };
	TP_REC(r, "writev 5000", tp_res(tp_writev(&t, w2, 2)));
	struct iovec rv2[2] = { { a, 50 }, { c, 4096 } };
	TP_REC(r, "readv", tp_res(tp_readv(&t, rv2, 2)));
	CHECK_EQ(tp_verify(a, 50, 4, 0), -1);
	CHECK_EQ(tp_verify(c, 4046, 4, 50), -1);
	TP_REC(r, "readv", tp_res(tp_readv(&t, rv2, 2)));
	CHECK_EQ(tp_verify(a, 50, 4, 4096), -1);
	CHECK_EQ(tp_verify(c, 854, 4, 4146), -1);
	TP_REC(r, "readv empty", tp_res(tp_readv(&t, rv2, 2)));
	tp_close(&t);
	TP_WANT(r, kernel, 300, 80, 100, 80, 5000, 4096, 904, -EAGAIN);
}

static void readv_writev_packets(void)
{
	TP_BOTH(sc_vectors);
}

/* A zero-count read takes nothing (the packet is still whole after it);
 * pp_nread counts the packets' bytes; EOF after the last packet. */
static void sc_zero_eof(struct tp_rec *r, int kernel)
{
	struct tp t;
	char out[64];
	CHECK_EQ(tp_open(&t, kernel, PP_PACKET), 0);
	TP_REC(r, "w10", tp_res(tp_write(&t, "0123456789", 10)));
	TP_REC(r, "w5", tp_res(tp_write(&t, "abcde", 5)));
	TP_REC(r, "r0", tp_res(tp_read(&t, out, 0)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "r64", tp_res(tp_read(&t, out, sizeof out)));
	CHECK(memcmp(out, "0123456789", 10) == 0);
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close_end(&t, 1);
	TP_REC(r, "r2", tp_res(tp_read(&t, out, 2)));
	CHECK(memcmp(out, "ab", 2) == 0);
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "eof", tp_res(tp_read(&t, out, sizeof out)));
	tp_close(&t);
	TP_WANT(r, kernel, 10, 5, 0, 15, 10, 5, 2, 0, 0);
}

static void zero_read_nread_and_eof(void)
{
	TP_BOTH(sc_zero_eof);
}

/* Several writer threads send packets of random sizes <= 4096, each
 * carrying (writer, sequence, length) in its head: every read returns
 * exactly one whole packet, in per-writer order. */
#define NWRITERS 3
struct pk_writer {
	struct tp *t;
	struct pp_end *e; /* own dup handle for the pagepipe */
	int fd;
	int id;
	int count;
	int errors;
};

static void *pk_write(void *arg)
{
	struct pk_writer *w = arg;
	static __thread unsigned char buf[4096];
	uint32_t s = (uint32_t)w->id * 1000003u + 1;
	for (int i = 0; i < w->count; i++) {
		size_t len = 12 + tp_rand(&s) % (4096 - 12 + 1);
		uint32_t hdr[3] = { (uint32_t)w->id, (uint32_t)i, (uint32_t)len };
		tp_fill(buf, len, (unsigned)(w->id * 65536 + i), 0);
		memcpy(buf, hdr, sizeof hdr);
		ssize_t n = w->t->kernel ? write(w->fd, buf, len) : pp_write(w->e, buf, len);
		if (n != (ssize_t)len)
			w->errors++;
	}
	if (w->t->kernel)
		close(w->fd);
	else
		pp_close(w->e);
	return NULL;
}

static void sc_threads(struct tp_rec *r, int kernel)
{
	struct tp t;
	pthread_t th[NWRITERS];
	struct pk_writer w[NWRITERS];
	static unsigned char buf[8192];
	int count = (int)t_scaled(400);
	int next[NWRITERS] = { 0 };
	long bad = 0, packets = 0;
	CHECK_EQ(tp_open(&t, kernel, PP_PACKET), 0);
	for (int i = 0; i < NWRITERS; i++) {
		w[i] = (struct pk_writer){ &t, NULL, -1, i, count, 0 };
		if (kernel)
			w[i].fd = dup(t.fd[1]);
		else
			w[i].e = pp_dup(t.e[1]);
	}
	tp_close_end(&t, 1); /* EOF once every writer closed its handle */
	for (int i = 0; i < NWRITERS; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, pk_write, &w[i]), 0);
	for (;;) {
		ssize_t n = tp_read(&t, buf, sizeof buf);
		if (n <= 0)
			break;
		uint32_t hdr[3];
		memcpy(hdr, buf, sizeof hdr);
		packets++;
		if (n < 12 || hdr[0] >= NWRITERS || hdr[2] != (uint32_t)n ||
		    hdr[1] != (uint32_t)next[hdr[0]] ||
		    tp_verify(buf + 12, (size_t)n - 12, hdr[0] * 65536 + hdr[1], 12) != -1) {
			if (bad++ < 3)
				fprintf(stderr, "%s: bad packet: %zd bytes, header %u %u %u\n",
				        tp_name(&t), n, hdr[0], hdr[1], hdr[2]);
			continue;
		}
		next[hdr[0]]++;
	}
	for (int i = 0; i < NWRITERS; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(w[i].errors, 0);
		CHECK_EQ(next[i], count);
	}
	TP_REC(r, "packets", packets);
	TP_REC(r, "bad", bad);
	CHECK_EQ(bad, 0);
	tp_close(&t);
}

static void packets_from_threads_arrive_whole(void)
{
	TP_BOTH(sc_threads);
}

int main(void)
{
	RUN(each_write_is_one_packet);
	RUN(short_read_discards_rest);
	RUN(long_write_splits_into_pages);
	RUN(nonblocking_long_write_partial);
	RUN(readv_writev_packets);
	RUN(zero_read_nread_and_eof);
	RUN(packets_from_threads_arrive_whole);
	return T_DONE();
}
