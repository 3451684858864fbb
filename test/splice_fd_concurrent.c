/*
 * splice_fd_concurrent.c - two threads splice from two sockets into one
 * pipe while a reader checks that both streams arrive whole: records of
 * at most 4096 bytes over SOCK_SEQPACKET (each record in one piece), and
 * byte-tagged stream sockets (each stream in order).
 * After every case: no page of the pool in use and no descriptor leaked
 * (splice_fd.h).
 * PP_TEST_SCALE scales the records and the data volumes.
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice_fd.h"

/* Records over SOCK_SEQPACKET: a header, then a body of stream seed*1000+sid
 * from seq*4096, 16..4096 bytes in all.  Each splice takes one record,
 * which lands in one page, contiguous in the pipe. */
struct rec_hdr {
	uint32_t magic, sid, seq, len;
};
#define REC_MAGIC 0x52454331u

struct rec_feeder {
	int fd;
	uint32_t sid, count, rs;
	int err;
};

static void *rec_feeder_main(void *arg)
{
	struct rec_feeder *f = arg;
	unsigned char buf[4096];
	for (uint32_t seq = 0; seq < f->count; seq++) {
		uint32_t len = 16 + tp_rand(&f->rs) % (4096 - 16 + 1);
		struct rec_hdr h = { REC_MAGIC, f->sid, seq, len };
		memcpy(buf, &h, sizeof h);
		tp_fill(buf + sizeof h, len - sizeof h, f->sid * 1000 + 7, (size_t)seq * 4096);
		if (write(f->fd, buf, len) != (ssize_t)len) {
			f->err = errno ? errno : -1;
			break;
		}
	}
	close(f->fd);
	return NULL;
}

struct splicer {
	int fd;
	struct pp_end *w;
	uint32_t rs;
	size_t moved;
	long calls;
	int err;
	int stream; /* stream sockets: any length */
};

static void *splicer_main(void *arg)
{
	struct splicer *s = arg;
	for (;;) {
		size_t len = s->stream ? 1 + tp_rand(&s->rs) % 30000
		                       : 4096 + tp_rand(&s->rs) % 8192;
		ssize_t n = pp_splice_from_fd(s->fd, NULL, s->w, len, 0);
		if (n < 0) {
			s->err = errno;
			break;
		}
		if (n == 0)
			break;
		s->moved += (size_t)n;
		s->calls++;
	}
	return NULL;
}

struct rec_reader {
	struct pp_end *r;
	uint32_t next[2];
	size_t bytes;
	int bad;
};

static void *rec_reader_main(void *arg)
{
	struct rec_reader *rr = arg;
	size_t cap = 3 * 65536, have = 0;
	unsigned char *buf = malloc(cap);
	if (!buf) {
		rr->bad = 1;
		return NULL;
	}
	for (;;) {
		ssize_t n = pp_read(rr->r, buf + have, cap - have);
		if (n <= 0) {
			if (n < 0 || have)
				rr->bad = 1;
			break;
		}
		rr->bytes += (size_t)n;
		have += (size_t)n;
		size_t at = 0;
		while (have - at >= sizeof(struct rec_hdr)) {
			struct rec_hdr h;
			memcpy(&h, buf + at, sizeof h);
			if (h.magic != REC_MAGIC || h.sid > 1 || h.len < 16 || h.len > 4096 ||
			    h.seq != rr->next[h.sid]) {
				if (!rr->bad)
					fprintf(stderr, "record at byte %zu: magic %#x sid %u seq %u len %u"
					        " (want seq %u)\n", rr->bytes - have + at, h.magic, h.sid,
					        h.seq, h.len, h.sid <= 1 ? rr->next[h.sid] : 0);
				rr->bad = 1;
				break;
			}
			if (have - at < h.len)
				break;
			if (tp_verify(buf + at + sizeof h, h.len - sizeof h, h.sid * 1000 + 7,
			              (size_t)h.seq * 4096) >= 0) {
				if (!rr->bad)
					fprintf(stderr, "record sid %u seq %u: body differs\n", h.sid, h.seq);
				rr->bad = 1;
			}
			rr->next[h.sid]++;
			at += h.len;
		}
		if (rr->bad)
			break;
		memmove(buf, buf + at, have - at);
		have -= at;
	}
	/* Keep the pipe drained so the splicers never wait forever. */
	if (rr->bad) {
		unsigned char sink[4096];
		while (pp_read(rr->r, sink, sizeof sink) > 0)
			;
	}
	free(buf);
	return NULL;
}

static void concurrent_from_fd_records(void)
{
	struct pp_end *e[2];
	int sv[2][2];
	pthread_t ft[2], st[2], rt;
	uint32_t count = (uint32_t)t_scaled(1500);
	struct rec_feeder f[2];
	struct splicer s[2];
	struct rec_reader rr = { 0 };
	CHECK_EQ(pp_pipe(e, 0), 0);
	rr.r = e[0];
	CHECK_EQ(pthread_create(&rt, NULL, rec_reader_main, &rr), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(open_pair(sv[i], SOCK_SEQPACKET), 0);
		f[i] = (struct rec_feeder){ .fd = sv[i][1], .sid = (uint32_t)i, .count = count,
		                            .rs = 11u + (uint32_t)i };
		s[i] = (struct splicer){ .fd = sv[i][0], .w = e[1], .rs = 21u + (uint32_t)i };
		CHECK_EQ(pthread_create(&ft[i], NULL, rec_feeder_main, &f[i]), 0);
		CHECK_EQ(pthread_create(&st[i], NULL, splicer_main, &s[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(ft[i], NULL);
		pthread_join(st[i], NULL);
		CHECK_EQ(f[i].err, 0);
		CHECK_EQ(s[i].err, 0);
		CHECK_EQ(s[i].calls, count); /* one record per call */
		close(sv[i][0]);
	}
	pp_close(e[1]);
	pthread_join(rt, NULL);
	CHECK_EQ(rr.bad, 0);
	CHECK_EQ(rr.next[0], count);
	CHECK_EQ(rr.next[1], count);
	CHECK_EQ(rr.bytes, s[0].moved + s[1].moved);
	pp_close(e[0]);
}

/* Stream sockets: calls cut the streams anywhere, so every byte carries its
 * stream (top bit) and its place (a counter mod 127). */
struct tag_feeder {
	int fd;
	int sid;
	size_t total;
	uint32_t rs;
};

static void *tag_feeder_main(void *arg)
{
	struct tag_feeder *f = arg;
	unsigned char buf[10000];
	size_t done = 0;
	while (done < f->total) {
		size_t n = min2(1 + tp_rand(&f->rs) % sizeof buf, f->total - done);
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)((f->sid << 7) | ((done + i) % 127));
		if (write_all(f->fd, buf, n))
			break;
		done += n;
	}
	close(f->fd);
	return NULL;
}

struct tag_reader {
	struct pp_end *r;
	size_t count[2];
	int bad;
};

static void *tag_reader_main(void *arg)
{
	struct tag_reader *tr = arg;
	unsigned char buf[16384];
	for (;;) {
		ssize_t n = pp_read(tr->r, buf, sizeof buf);
		if (n <= 0) {
			if (n < 0)
				tr->bad = 1;
			break;
		}
		for (ssize_t i = 0; i < n; i++) {
			int sid = buf[i] >> 7;
			if ((buf[i] & 0x7f) != tr->count[sid] % 127) {
				if (!tr->bad)
					fprintf(stderr, "stream %d byte %zu: %#x\n", sid, tr->count[sid],
					        buf[i]);
				tr->bad = 1;
			}
			tr->count[sid]++;
		}
	}
	return NULL;
}

static void concurrent_from_fd_streams(void)
{
	struct pp_end *e[2];
	int sv[2][2];
	pthread_t ft[2], st[2], rt;
	size_t total = (size_t)t_scaled(2 << 20);
	struct tag_feeder f[2];
	struct splicer s[2];
	struct tag_reader tr = { 0 };
	CHECK_EQ(pp_pipe(e, 0), 0);
	tr.r = e[0];
	CHECK_EQ(pthread_create(&rt, NULL, tag_reader_main, &tr), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(open_pair(sv[i], SOCK_STREAM), 0);
		f[i] = (struct tag_feeder){ .fd = sv[i][1], .sid = i, .total = total,
		                            .rs = 31u + (uint32_t)i };
		s[i] = (struct splicer){ .fd = sv[i][0], .w = e[1], .rs = 41u + (uint32_t)i,
		                         .stream = 1 };
		CHECK_EQ(pthread_create(&ft[i], NULL, tag_feeder_main, &f[i]), 0);
		CHECK_EQ(pthread_create(&st[i], NULL, splicer_main, &s[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(ft[i], NULL);
		pthread_join(st[i], NULL);
		CHECK_EQ(s[i].err, 0);
		CHECK_EQ(s[i].moved, total);
		close(sv[i][0]);
	}
	pp_close(e[1]);
	pthread_join(rt, NULL);
	CHECK_EQ(tr.bad, 0);
	CHECK_EQ(tr.count[0], total);
	CHECK_EQ(tr.count[1], total);
	pp_close(e[0]);
}

int main(void)
{
	t_around_cases(count_fds_before, nothing_left_after);
	RUN(concurrent_from_fd_records);
	RUN(concurrent_from_fd_streams);
	return T_DONE();
}
