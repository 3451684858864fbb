/*
 * stress_records.c - under many writer and reader threads, no byte is
 * lost, duplicated, reordered or torn, and a write of at most PP_PIPE_BUF
 * bytes (pp_write or pp_writev) is never split or interleaved with
 * another.
 *
 * Record cases.  Writers send records of at most 4096 bytes, each with a
 * header (magic, writer id, length, sequence number, checksum of the
 * payload) and a payload of pseudo-random bytes derived from (id, sequence),
 * so a reader can rebuild what each record must hold.  Sizes are random,
 * with many of exactly 4096 bytes and many tiny ones.
 *   records_stream       4 writers, 1 reader that reassembles the byte stream
 *                        from reads of random sizes (and random readv
 *                        splits): every record must be contiguous and
 *                        intact, each writer's sequence numbers must arrive
 *                        in order, and counts and per-writer checksum totals
 *                        must match what was written.  Run on a default pipe
 *                        and on a one-page pipe (every write waits).
 *   records_fixed        4 writers, 3 readers.  All records have one size R
 *                        and every read asks for a multiple of R.  A write of
 *                        R <= PIPE_BUF bytes is atomic, so the pipe always
 *                        holds a whole number of records, and a read returns
 *                        min(count, bytes there) (the kernel reads under the
 *                        pipe lock; checked against kernel pipes): every read
 *                        must return a multiple of R made of whole records.
 *                        Each (writer, sequence) must be seen exactly once
 *                        across readers, in increasing order within each
 *                        reader, with totals matching.  R = 4096, 512 (many
 *                        records merged into one page) and 1000 (records do
 *                        not divide a page; reads cross buffers).
 *   records_writev       as above, but writers use pp_writev with random
 *                        iovec splits (empty segments included) of records
 *                        <= 4096 bytes: those must be atomic too.
 *   records_packet       packet mode (PP_PACKET), random sizes, 3 readers
 *                        reading 4096 bytes or more: every read must return
 *                        exactly one whole record (packets are never merged
 *                        or split), plus the checks of records_fixed; also
 *                        with a resizing racer.
 *   resize_race          record traffic (stream and fixed variants) while
 *                        another thread resizes the pipe between 4 KiB and
 *                        1 MiB from either end (EBUSY allowed, results
 *                        checked) and calls pp_nread, pp_events and
 *                        pp_getsize; data must still be intact.
 *   nonblock_poll        non-blocking pipe, writers and reader wait in
 *                        poll(2) on pp_fd() after EAGAIN: writes <= 4096 are
 *                        all-or-EAGAIN, data intact, and a descriptor that
 *                        stays unready while pp_events() says ready is a
 *                        lost wakeup.
 * After each case no page may remain in use in the pool (stress.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "threads.h"
#include "stress.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

/* Records                                                             */

#define REC_MAGIC 0x52505045u /* "EPPR" */
#define HDR 16
#define MAXW 8
#define MAXR 8

struct hdr {
	uint32_t magic;
	uint16_t id;  /* writer */
	uint16_t len; /* whole record, header included: HDR..4096 */
	uint32_t seq; /* per writer, from 0 */
	uint32_t sum; /* cksum of the payload */
};
_Static_assert(sizeof(struct hdr) == HDR, "record header layout");

static uint32_t cksum(const unsigned char *p, size_t n)
{
	uint64_t h = 0x6a09e667f3bcc909ULL ^ n;
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		h = (h ^ v) * 0x100000001b3ULL;
		h ^= h >> 29;
		p += 8;
		n -= 8;
	}
	while (n--) {
		h = (h ^ *p++) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return (uint32_t)(h ^ (h >> 32));
}

static uint32_t make_record(unsigned char *buf, unsigned id, uint32_t seq,
                            size_t len)
{
	struct hdr h = {REC_MAGIC, (uint16_t)id, (uint16_t)len, seq, 0};
	gen_payload(buf + HDR, len - HDR, id, seq);
	h.sum = cksum(buf + HDR, len - HDR);
	memcpy(buf, &h, HDR);
	return h.sum;
}

static size_t pick_len(uint64_t *s)
{
	switch (rnd(s, 8)) {
	case 0:
	case 1:
		return 4096;
	case 2:
		return HDR + rnd(s, 17); /* tiny */
	case 3:
		return 4096 - rnd(s, 64);
	default:
		return HDR + rnd(s, 4096 - HDR + 1);
	}
}

/* Split [p, p+len) into 1..max segments, some possibly empty. */
static int split_iov(struct iovec *iov, int max, unsigned char *p, size_t len,
                     uint64_t *s)
{
	int cnt = 1 + (int)rnd(s, (size_t)max), i;
	size_t rem = len;
	for (i = 0; i < cnt - 1; i++) {
		size_t take = rnd(s, rem + 1);
		if (rnd(s, 3) == 0)
			take /= 16;
		iov[i].iov_base = p;
		iov[i].iov_len = take;
		p += take;
		rem -= take;
	}
	iov[i].iov_base = p;
	iov[i].iov_len = rem;
	return cnt;
}

static void hexdump(const char *what, const unsigned char *p, size_t n)
{
	char line[3 * 32 + 1];
	size_t i;
	if (n > 32)
		n = 32;
	for (i = 0; i < n; i++)
		snprintf(line + 3 * i, 4, "%02x ", p[i]);
	line[3 * n] = 0;
	fprintf(stderr, "  %s: %s\n", what, line);
}

/*
 * Check one whole record: header sane, payload checksum equal to the header's
 * and payload equal to what (id, seq) generates.  0 if intact.
 */
static int check_record(const unsigned char *p, int nw, long nrec,
                        unsigned char *scratch, struct hdr *out,
                        unsigned long long where)
{
	struct hdr h;
	memcpy(&h, p, HDR);
	if (h.magic != REC_MAGIC || h.len < HDR || h.len > 4096 || h.id >= nw ||
	    h.seq >= nrec) {
		TFAIL("bad record header at stream byte %llu: magic %#x id %u len %u "
		      "seq %u (torn or interleaved write?)",
		      where, h.magic, h.id, h.len, h.seq);
		hexdump("bytes", p, HDR);
		return -1;
	}
	if (cksum(p + HDR, h.len - HDR) != h.sum) {
		TFAIL("record writer %u seq %u len %u at stream byte %llu: payload "
		      "checksum mismatch", h.id, h.seq, h.len, where);
		return -1;
	}
	gen_payload(scratch, h.len - HDR, h.id, h.seq);
	if (memcmp(scratch, p + HDR, h.len - HDR) != 0) {
		TFAIL("record writer %u seq %u len %u at stream byte %llu: payload "
		      "differs from the generated one", h.id, h.seq, h.len, where);
		return -1;
	}
	*out = h;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Record traffic: writers, readers, racer                             */

enum {
	F_WRITEV = 1,   /* writers use pp_writev with random splits */
	F_READV = 2,    /* readers sometimes use pp_readv */
	F_RESIZE = 4,   /* a racer resizes and queries the pipe */
	F_NONBLOCK = 8, /* non-blocking pipe, waits in poll on pp_fd */
	F_PACKET = 16,  /* packet mode: each read returns one whole record */
};

struct run {
	int nw, nr, flags;
	size_t fixed; /* record size, 0 for random sizes */
	long nrec;    /* records per writer */
	atomic_int writers_left;
	atomic_int broken; /* stream out of step: readers just drain */
	atomic_ullong wsum[MAXW], rsum[MAXW];
	atomic_long wcnt[MAXW], rcnt[MAXW];
	atomic_uchar *seen[MAXW];
	atomic_long reads, resize_ok, resize_busy, racer_ops, fd_waits;
};

struct tctx {
	struct run *R;
	struct pp_end *h, *h2;
	int id;
	uint64_t seed;
};

/*
 * Wait until the end's descriptor is ready.  A poll that times out while
 * pp_events() reports the end ready, and still does after a second wait, is
 * a lost wakeup.  A true deadlock is left to the watchdog.
 */
static void wait_fd(struct run *R, struct pp_end *h, short want_ev,
                    short ready_ev, const char *who)
{
	int fd = pp_fd(h);
	struct pollfd p;
	if (fd < 0) {
		TFAIL("%s: pp_fd failed (errno %d)", who, errno);
		usleep(1000);
		return;
	}
	atomic_fetch_add(&R->fd_waits, 1);
	p.fd = fd;
	p.events = want_ev;
	p.revents = 0;
	int n = poll(&p, 1, 2000);
	if (n < 0)
		TFAIL("%s: poll failed (errno %d)", who, errno);
	if (n != 0)
		return;
	short ev = pp_events(h);
	if (ev < 0 || !(ev & ready_ev))
		return; /* not ready: no wakeup was owed */
	p.revents = 0;
	if (poll(&p, 1, 1000) == 0)
		TFAIL("%s: pp_events() = %#x says ready, but pp_fd() stayed unready "
		      "for 3 s (lost wakeup)", who, (unsigned)ev);
}

static void *writer_main(void *arg)
{
	struct tctx *c = arg;
	struct run *R = c->R;
	unsigned char *buf = malloc(4096);
	uint64_t s = c->seed;
	unsigned long long sum = 0;
	long cnt = 0;
	if (!buf)
		abort();
	for (long seq = 0; seq < R->nrec; seq++) {
		size_t len = R->fixed ? R->fixed : pick_len(&s);
		if (R->flags & F_RESIZE) {
			/* keep pace with the racer, so that the race really happens
			 * however fast the traffic is: a racer step per 4 records,
			 * and at least 64 before the last one */
			long need = seq / 4 + (seq == R->nrec - 1 ? 64 : 0);
			while (atomic_load(&R->racer_ops) < need)
				sched_yield();
		}
		uint32_t rs = make_record(buf, (unsigned)c->id, (uint32_t)seq, len);
		ssize_t n;
		for (;;) {
			if ((R->flags & F_WRITEV) && rnd(&s, 4) != 0) {
				struct iovec iov[12];
				int k = split_iov(iov, 12, buf, len, &s);
				n = pp_writev(c->h, iov, k);
			} else {
				n = pp_write(c->h, buf, len);
			}
			if (n == -1 && errno == EAGAIN && (R->flags & F_NONBLOCK)) {
				wait_fd(R, c->h, PPFD_WRITE_EVENTS, POLLOUT, "writer");
				continue;
			}
			break;
		}
		if (n != (ssize_t)len) {
			TFAIL("writer %d seq %ld: write of %zu returned %zd (errno %d)%s",
			      c->id, seq, len, n, errno,
			      n > 0 ? ": a write <= PIPE_BUF was split" : "");
			break;
		}
		sum += rs;
		cnt++;
		t_progress();
	}
	atomic_store(&R->wsum[c->id], sum);
	atomic_store(&R->wcnt[c->id], cnt);
	free(buf);
	atomic_fetch_sub(&R->writers_left, 1);
	TCHECK(pp_close(c->h) == 0);
	return NULL;
}

static ssize_t rec_read(struct tctx *c, unsigned char *p, size_t want,
                        uint64_t *s)
{
	struct run *R = c->R;
	for (;;) {
		ssize_t n;
		if ((R->flags & F_READV) && rnd(s, 3) == 0) {
			struct iovec iov[8];
			int k = split_iov(iov, 8, p, want, s);
			n = pp_readv(c->h, iov, k);
		} else {
			n = pp_read(c->h, p, want);
		}
		if (n == -1 && errno == EAGAIN && (R->flags & F_NONBLOCK)) {
			wait_fd(R, c->h, POLLIN, POLLIN | POLLHUP, "reader");
			continue;
		}
		if (n > (ssize_t)want)
			TFAIL("read of %zu returned %zd", want, n);
		atomic_fetch_add_explicit(&R->reads, 1, memory_order_relaxed);
		return n;
	}
}

static size_t pick_read(uint64_t *s)
{
	switch (rnd(s, 8)) {
	case 0:
		return 1 + rnd(s, 16);
	case 1:
		return 4096;
	case 2:
		return 1 + rnd(s, 4096);
	case 3:
		return 65536;
	default:
		return 1 + rnd(s, 32768);
	}
}

/* A reader's end: its per-writer sums and counts go into the run's
 * totals, its buffers are freed, its handle closed. */
static void reader_finish(struct tctx *c, const unsigned long long *sum, const long *cnt,
                          unsigned char *buf, unsigned char *scratch)
{
	struct run *R = c->R;
	for (int i = 0; i < R->nw; i++) {
		atomic_fetch_add(&R->rsum[i], sum[i]);
		atomic_fetch_add(&R->rcnt[i], cnt[i]);
	}
	free(buf);
	free(scratch);
	TCHECK(pp_close(c->h) == 0);
}

/* The single reader: rebuild the byte stream and check it record by record. */
static void *reader_stream(void *arg)
{
	struct tctx *c = arg;
	struct run *R = c->R;
	size_t cap = 65536 + 4096, have = 0;
	unsigned char *buf = malloc(cap), *scratch = malloc(4096);
	uint32_t next[MAXW] = {0};
	unsigned long long sum[MAXW] = {0}, pos = 0;
	long cnt[MAXW] = {0};
	uint64_t s = c->seed;
	int broken = 0;
	if (!buf || !scratch)
		abort();
	for (;;) {
		size_t want = pick_read(&s);
		ssize_t n = rec_read(c, buf + (broken ? 0 : have), want, &s);
		if (n < 0) {
			TFAIL("reader: read failed (errno %d)", errno);
			break; /* closing makes the writers fail with EPIPE */
		}
		if (n == 0)
			break;
		t_progress();
		if (broken)
			continue;
		have += (size_t)n;
		size_t off = 0;
		while (have - off >= HDR) {
			struct hdr h;
			memcpy(&h, buf + off, HDR);
			if (h.len >= HDR && h.len <= 4096 && have - off < h.len)
				break; /* rest of it comes with the next read */
			if (check_record(buf + off, R->nw, R->nrec, scratch, &h,
			                 pos + off) != 0) {
				broken = 1;
				break;
			}
			if (h.seq != next[h.id]) {
				TFAIL("writer %u: record seq %u arrived, want %u "
				      "(lost or reordered)", h.id, h.seq, next[h.id]);
				broken = 1;
				break;
			}
			next[h.id]++;
			sum[h.id] += h.sum;
			cnt[h.id]++;
			off += h.len;
		}
		if (broken) {
			atomic_store(&R->broken, 1);
			continue;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
		pos += off;
	}
	if (!broken && have != 0)
		TFAIL("reader: end of file inside a record (%zu bytes left)", have);
	reader_finish(c, sum, cnt, buf, scratch);
	return NULL;
}

/*
 * A whole record h taken by reader id of several: each writer's records
 * must reach a reader in increasing order (last[] is the reader's latest
 * sequence number per writer), and each record exactly one reader; the
 * reader counts it and adds up its checksum.
 */
static void take_record(struct run *R, int id, const struct hdr *h, long *last,
                        unsigned long long *sum, long *cnt)
{
	if ((long)h->seq <= last[h->id])
		TFAIL("reader %d: writer %u seq %u after seq %ld (reordered)", id, h->id,
		      h->seq, last[h->id]);
	last[h->id] = h->seq;
	if (atomic_exchange(&R->seen[h->id][h->seq], 1) != 0)
		TFAIL("writer %u seq %u read twice", h->id, h->seq);
	sum[h->id] += h->sum;
	cnt[h->id]++;
}

/*
 * One of several readers.  Fixed-size records: reads of k * R bytes.
 * Packet mode: reads of 4096 or more, each returning exactly one record.
 */
static void *reader_fixed(void *arg)
{
	struct tctx *c = arg;
	struct run *R = c->R;
	int packet = (R->flags & F_PACKET) != 0;
	size_t rs = packet ? 4096 : R->fixed;
	size_t kmax = 16384 / rs;
	unsigned char *buf = malloc(kmax * rs), *scratch = malloc(4096);
	long last[MAXW];
	unsigned long long sum[MAXW] = {0};
	long cnt[MAXW] = {0};
	uint64_t s = c->seed;
	if (!buf || !scratch)
		abort();
	for (int i = 0; i < MAXW; i++)
		last[i] = -1;
	for (;;) {
		size_t want = packet ? 4096 + rnd(&s, 16384 - 4096 + 1)
		                     : rs * (1 + rnd(&s, kmax));
		ssize_t n = rec_read(c, buf, want, &s);
		if (n < 0) {
			TFAIL("reader %d: read failed (errno %d)", c->id, errno);
			break;
		}
		if (n == 0)
			break;
		t_progress();
		if (atomic_load(&R->broken))
			continue;
		if (packet) {
			struct hdr h;
			if (n < HDR ||
			    check_record(buf, R->nw, R->nrec, scratch, &h, 0) != 0) {
				TFAIL("reader %d: packet read of %zu returned %zd bytes that "
				      "are not one whole record", c->id, want, n);
				atomic_store(&R->broken, 1);
				continue;
			}
			if (h.len != n) {
				TFAIL("reader %d: packet read returned %zd bytes, the record "
				      "(writer %u seq %u) has %u: packets merged or split",
				      c->id, n, h.id, h.seq, h.len);
				atomic_store(&R->broken, 1);
				continue;
			}
			take_record(R, c->id, &h, last, sum, cnt);
			continue;
		}
		if ((size_t)n % rs != 0) {
			TFAIL("reader %d: read of %zu returned %zd, not a multiple of "
			      "the record size %zu: a record was split between reads",
			      c->id, want, n, rs);
			atomic_store(&R->broken, 1);
			continue;
		}
		for (size_t off = 0; off < (size_t)n; off += rs) {
			struct hdr h;
			if (check_record(buf + off, R->nw, R->nrec, scratch, &h, 0) != 0) {
				atomic_store(&R->broken, 1);
				break;
			}
			if (h.len != rs) {
				TFAIL("reader %d: record of %u bytes, want %zu", c->id, h.len,
				      rs);
				atomic_store(&R->broken, 1);
				break;
			}
			take_record(R, c->id, &h, last, sum, cnt);
		}
	}
	reader_finish(c, sum, cnt, buf, scratch);
	return NULL;
}

static int valid_size(long v)
{
	return v >= 4096 && v <= (1L << 20) && (v & (v - 1)) == 0;
}

static int valid_events(short ev, int is_read)
{
	short in = POLLIN | POLLRDNORM, out = POLLOUT | POLLWRNORM;
	if (is_read)
		return (ev & ~in) == 0 && !(ev & POLLIN) == !(ev & POLLRDNORM);
	return (ev & ~out) == 0 && !(ev & POLLOUT) == !(ev & POLLWRNORM);
}

/*
 * Resize (4 KiB .. 1 MiB, either end) and query the pipe while the traffic
 * runs.  It holds a handle of each end, so neither POLLHUP nor POLLERR may
 * show until it closes them after the last writer is done.
 */
static void *racer_main(void *arg)
{
	struct tctx *c = arg;
	struct run *R = c->R;
	uint64_t s = c->seed;
	while (atomic_load(&R->writers_left) > 0) {
		int rd = rnd(&s, 2) == 0;
		struct pp_end *e = rd ? c->h : c->h2;
		long v;
		short ev;
		switch (rnd(&s, 8)) {
		case 0:
		case 1: {
			size_t want = rnd(&s, 3) == 0 ? (size_t)4096 << rnd(&s, 9)
			                              : 4096 + rnd(&s, (1 << 20) - 4096 + 1);
			v = pp_setsize(e, want);
			if (v == -1 && errno == EBUSY) {
				atomic_fetch_add(&R->resize_busy, 1);
			} else if (v == -1) {
				TFAIL("pp_setsize(%zu) failed, errno %d", want, errno);
			} else if (!valid_size(v) || (size_t)v < want ||
			           (v > 4096 && (size_t)v >= 2 * want)) {
				TFAIL("pp_setsize(%zu) returned %ld", want, v);
			} else {
				atomic_fetch_add(&R->resize_ok, 1);
			}
			break;
		}
		case 2:
			v = pp_nread(e);
			if (v < 0 || v > (1L << 20))
				TFAIL("pp_nread = %ld (errno %d)", v, errno);
			break;
		case 3:
		case 4:
			ev = pp_events(e);
			if (ev == -1 || !valid_events(ev, rd))
				TFAIL("pp_events(%s end) = %#x while both ends are open",
				      rd ? "read" : "write", (unsigned)ev);
			break;
		case 5:
			v = pp_getsize(e);
			if (!valid_size(v))
				TFAIL("pp_getsize = %ld", v);
			break;
		case 6:
			sched_yield();
			break;
		default:
			usleep(20 + (useconds_t)rnd(&s, 200));
			break;
		}
		atomic_fetch_add(&R->racer_ops, 1);
	}
	TCHECK(pp_close(c->h) == 0);
	TCHECK(pp_close(c->h2) == 0);
	return NULL;
}

/*
 * Run one record workload.  Every thread gets its own dup'd handle and
 * closes it when done, so the end of file the readers see comes from the
 * last writer's close.
 */
static void run_records(int nw, int nr, size_t fixed, int flags, long nrec,
                        long pipe_size)
{
	struct run *R = calloc(1, sizeof *R);
	struct tctx ctx[MAXW + MAXR + 1];
	pthread_t th[MAXW + MAXR + 1];
	struct pp_end *e[2];
	int nt = 0;
	struct timespec t0, t1;

	if (!R)
		abort();
	R->nw = nw;
	R->nr = nr;
	R->fixed = fixed;
	R->flags = flags;
	R->nrec = nrec;
	atomic_store(&R->writers_left, nw);
	for (int i = 0; i < nw; i++) {
		R->seen[i] = calloc((size_t)nrec, sizeof(atomic_uchar));
		if (!R->seen[i])
			abort();
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int pf = PP_NOSIGPIPE | ((flags & F_NONBLOCK) ? PP_NONBLOCK : 0) |
	         ((flags & F_PACKET) ? PP_PACKET : 0);
	if (pp_pipe(e, pf) != 0) {
		CHECK(!"pp_pipe");
		goto out;
	}
	if (pipe_size)
		CHECK_EQ(pp_setsize(e[1], (size_t)pipe_size), pipe_size);

	for (int i = 0; i < nw + nr; i++) {
		int w = i < nw;
		ctx[nt] = (struct tctx){R, pp_dup(e[w ? 1 : 0]), NULL,
		                        w ? i : i - nw, new_seed()};
		CHECK(ctx[nt].h != NULL);
		nt++;
	}
	if (flags & F_RESIZE) {
		ctx[nt] = (struct tctx){R, pp_dup(e[0]), pp_dup(e[1]), 0, new_seed()};
		CHECK(ctx[nt].h && ctx[nt].h2);
		nt++;
	}
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_EQ(pp_close(e[1]), 0);
	for (int i = 0; i < nt; i++) {
		void *(*fn)(void *);
		if (i < nw)
			fn = writer_main;
		else if (i < nw + nr)
			fn = fixed || (flags & F_PACKET) ? reader_fixed : reader_stream;
		else
			fn = racer_main;
		start_thread(&th[i], fn, &ctx[i]);
	}
	for (int i = 0; i < nt; i++)
		join_thread(th[i]);

	CHECK_EQ(atomic_load(&R->broken), 0);
	/* after a damaged record the readers only drained: counts say nothing */
	for (int i = 0; i < nw && !atomic_load(&R->broken); i++) {
		long wc = atomic_load(&R->wcnt[i]), rc = atomic_load(&R->rcnt[i]);
		if (wc != nrec || rc != nrec ||
		    atomic_load(&R->wsum[i]) != atomic_load(&R->rsum[i])) {
			fprintf(stderr, "writer %d: wrote %ld of %ld records, read %ld, "
			        "checksum total written %llu read %llu\n", i, wc, nrec,
			        rc, (unsigned long long)atomic_load(&R->wsum[i]),
			        (unsigned long long)atomic_load(&R->rsum[i]));
			CHECK(!"record counts or checksums differ");
		}
	}
	if (flags & F_RESIZE) {
		/* The race must really have happened (writers keep pace). */
		CHECK(atomic_load(&R->resize_ok) > 0);
		CHECK(atomic_load(&R->racer_ops) >= 64);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "  records nw=%d nr=%d fixed=%zu flags=%d: %ld records "
	        "in %.2f s, %ld reads, %ld resizes ok, %ld EBUSY, %ld fd waits\n",
	        nw, nr, fixed, flags, nrec * nw,
	        (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
	        atomic_load(&R->reads), atomic_load(&R->resize_ok),
	        atomic_load(&R->resize_busy), atomic_load(&R->fd_waits));
out:
	for (int i = 0; i < nw; i++)
		free(R->seen[i]);
	free(R);
}

static void records_stream(void)
{
	run_records(4, 1, 0, F_READV, t_scaled_san(6000), 0);
	run_records(4, 1, 0, 0, t_scaled_san(2000), 4096);
}

static void records_fixed(void)
{
	run_records(4, 3, 4096, F_READV, t_scaled_san(4000), 0);
	run_records(4, 3, 512, F_READV, t_scaled_san(12000), 0);
	run_records(4, 3, 1000, 0, t_scaled_san(6000), 16384);
}

static void records_writev(void)
{
	run_records(4, 1, 0, F_WRITEV | F_READV, t_scaled_san(4000), 0);
	run_records(4, 3, 4096, F_WRITEV, t_scaled_san(3000), 0);
	run_records(4, 3, 700, F_WRITEV | F_READV, t_scaled_san(6000), 8192);
}

static void records_packet(void)
{
	run_records(4, 3, 0, F_WRITEV | F_READV | F_PACKET, t_scaled_san(4000), 0);
	run_records(4, 3, 0, F_PACKET | F_RESIZE, t_scaled_san(1000), 8192);
}

static void resize_race(void)
{
	run_records(4, 1, 0, F_RESIZE | F_READV, t_scaled_san(2000), 0);
	run_records(4, 3, 4096, F_RESIZE, t_scaled_san(1500), 0);
}

static void nonblock_poll(void)
{
	run_records(4, 1, 0, F_NONBLOCK | F_WRITEV | F_READV, t_scaled_san(2000), 0);
	run_records(4, 3, 2048, F_NONBLOCK, t_scaled_san(1500), 8192);
}

int main(void)
{
	stress_start("stress_records");
	RUN(records_stream);
	RUN(records_fixed);
	RUN(records_writev);
	RUN(records_packet);
	RUN(resize_race);
	RUN(nonblock_poll);
	return T_DONE();
}
