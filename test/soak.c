/*
 * soak.c - a long random workload on many pipes and threads, run in
 * generations, checking that nothing leaks and every byte arrives.
 *
 * A generation makes 9 pagepipes and a kernel connection (a socketpair or
 * a kernel pipe) and runs 18 threads on them for a while:
 *
 *   lane A  writer -> P0 -> reader; in some generations the reader closes
 *           early (data left in the pipe, the writer must see EPIPE).
 *   lane B  writer -> P1 -> mover -> P2 -> reader; the mover alternates
 *           pp_splice, pp_tee then pp_read (checking the bytes) and pp_tee
 *           then pp_consume.
 *   lane C  writer -> P3 -> pp_fanout -> P4, P5 -> one reader each.
 *   lane D  writer -> P6 -> pp_splice_to_fd -> socketpair or kernel pipe
 *           -> pp_splice_from_fd -> P7 -> reader; either descriptor may be
 *           O_NONBLOCK.
 *   lane E  2 writers, each on its own pp_dup'd handle, send fixed-size
 *           records (24..4096 bytes, header + payload) with pp_write or
 *           pp_writev to P8, sometimes a packet pipe, and swap their handle
 *           for a fresh pp_dup now and then; 2 readers (one on a dup) read
 *           whole multiples of the record size.
 *   chaos   holds a pp_dup of both ends of every pipe and, until the
 *           deadline, resizes pipes (pp_setsize, EBUSY allowed), toggles
 *           PP_NONBLOCK on either side (so every worker meets EAGAIN and
 *           waits in poll(2) on pp_fd()), dups and closes handles, and
 *           calls pp_nread, pp_getsize, pp_events, pp_pool_stats.
 *
 * Stream writers (lanes A-D) send stream `seed` (harness/helpers.h's tp_byte) in
 * random pieces by pp_write, pp_writev (random splits, empty segments
 * included) and pp_vmsplice of freshly allocated blocks (1-4 segments,
 * some empty), whose release callbacks are counted per segment.  Every
 * stream reader checks each byte against the stream position it expects
 * (by pp_read, pp_readv, or pp_peek + pp_consume of a random part), so a
 * byte lost, duplicated, reordered or corrupted anywhere in a chain shows.
 * Record readers check that every read is a whole number of records
 * (writes of at most PP_PIPE_BUF are atomic), each intact, each writer's
 * sequence numbers rising, and across readers every record seen once.
 *
 * At the deadline writers and chaos close their handles; end of file then
 * flows down every chain and each thread closes what it holds, so the
 * generation ends with every pipe closed.  Then the main thread checks:
 *   soak_workload        no thread saw a wrong byte, a torn record, an
 *                        unexpected error, and every lane's byte and record
 *                        counts match end to end;
 *   soak_pages_return    pp_pool_stats().pages_in_use == 0 and the idle
 *                        cache within its bound, after every generation;
 *   soak_releases_once   every pp_vmsplice segment that went in (in part
 *                        or whole) was released exactly once, with exactly
 *                        the part that went in, and no other was;
 *   soak_fds_return      as many descriptors open as before the generation
 *                        (pp_fd's eventfds, the kernel connection);
 *   soak_rss_flat        resident memory after each generation (after
 *                        malloc_trim, so glibc's free lists do not count)
 *                        stays within RSS_MARGIN of what the first
 *                        generation, the warm-up, ended with.  Skipped
 *                        under ASan/TSan (their quarantine and shadow grow
 *                        by design) and under valgrind (PP_VALGRIND=1).
 *
 * Environment: PP_SOAK_SECONDS (default 10) is the whole run, cut into
 * generations of about a second (at least 3); PP_SOAK_SEED repeats a run's
 * random choices (thread timing still varies).  The harness's watchdog
 * fails the run when no thread makes progress for PP_CASE_TIMEOUT seconds.
 */
#include "harness/harness.h"
#include "pagepipe.h"
#include "threads.h"
#include "harness/helpers.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Resident memory a later generation may end with above the warm-up's.
 * With one malloc arena and malloc_trim (see main), generation-end RSS is
 * live memory: measured, it moved by under 100 KiB over 10 generations.
 * 1 MiB leaves room for the pool's idle cache (at most 64 pages, 256 KiB)
 * ending up fuller than after the warm-up, for page tables and for the
 * cached thread stacks being touched deeper.  A pipe leaked with data in
 * it is caught at once by pages_in_use; this bound catches what the pool
 * does not count (rings, slot arrays, end handles, pp_fd descriptors'
 * kernel memory is not RSS) once it adds up to 1 MiB over the run. */
#define RSS_MARGIN_KB 1024L

#define NPIPES 9
enum { PA, PB1, PB2, PC1, PC2, PC3, PD1, PD2, PE };
#define BUFMAX (256 * 1024)
#define VSEG 4          /* segments per pp_vmsplice */
#define VREC_MAX 2048   /* pp_vmsplice calls per writer and generation */
#define VPENDING_MAX 48 /* calls whose blocks are not all released yet */
#define REC_WRITERS 2
#define REC_READERS 2
#define SEQ_CAP (1u << 20) /* records per writer and generation */
#define REC_MAGIC 0x4b414f53u /* "SOAK" */
#define HDR 16
#define MAX_GENS 1000

static int g_valgrind;

/* ---- small helpers --------------------------------------------------- */

static uint32_t rnd(uint32_t *rs, uint32_t n)
{
	return n ? tp_rand(rs) % n : 0;
}

static size_t pick_size(uint32_t *rs, size_t max)
{
	size_t n;
	switch (rnd(rs, 8)) {
	case 0:
	case 1:
		n = 1 + rnd(rs, 64);
		break;
	case 2:
	case 3:
		n = 1 + rnd(rs, 4096);
		break;
	case 4:
		n = 4096;
		break;
	case 5:
		n = 1 + rnd(rs, 65536);
		break;
	case 6:
		n = 4096 * (1 + rnd(rs, 16));
		break;
	default:
		n = 1 + rnd(rs, (uint32_t)max);
		break;
	}
	return n < max ? n : max;
}

/* Split [p, p+len) into 1..maxn segments, some possibly empty. */
static int split(struct iovec *iov, int maxn, unsigned char *p, size_t len, uint32_t *rs)
{
	int n = 0;
	while (n < maxn - 1 && rnd(rs, 3)) {
		size_t k = rnd(rs, (uint32_t)len + 1);
		iov[n++] = (struct iovec){ p, k };
		p += k;
		len -= k;
	}
	iov[n++] = (struct iovec){ p, len };
	return n;
}

/* After EAGAIN: wait (briefly) until the end may be ready.  A pp_fd()
 * descriptor is readable while its end is ready, for either side. */
static void wait_end(struct pp_end *e)
{
	int fd = pp_fd(e);
	if (fd < 0) {
		TFAIL("pp_fd failed (errno %d)", errno);
		t_sleep_ms(1);
		return;
	}
	struct pollfd p = { fd, POLLIN, 0 };
	poll(&p, 1, 20);
}

static void wait_fd(int fd, short ev)
{
	struct pollfd p = { fd, ev, 0 };
	poll(&p, 1, 20);
}

/* Flip PP_NONBLOCK on a side (through a handle of it). */
static void toggle_nonblock(struct pp_end *e, uint32_t *rs)
{
	int fl = pp_getfl(e);
	TCHECK(fl >= 0);
	if (fl >= 0)
		TCHECK(pp_setfl(e, rnd(rs, 2) ? (fl | PP_NONBLOCK) : (fl & ~PP_NONBLOCK)) == 0);
}

static void make_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t a;
	pthread_attr_init(&a);
	/* Small fixed stacks, so glibc's stack cache keeps them all from one
	 * generation to the next and RSS does not move with the stacks. */
	pthread_attr_setstacksize(&a, T_SAN_FACTOR < 1.0 ? (4u << 20) : (512u << 10));
	if (pthread_create(t, &a, fn, arg) != 0) {
		perror("pthread_create");
		exit(1);
	}
	pthread_attr_destroy(&a);
}

static long rss_kb(void)
{
	long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &res) != 2)
		res = -1;
	fclose(f);
	return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ---- vmsplice accounting ----------------------------------------------- */

struct vrec {             /* one pp_vmsplice call */
	int n;
	unsigned char *base[VSEG];
	size_t len[VSEG];
	size_t expect[VSEG];  /* bytes of segment i that went in (0: none) */
	bool owned[VSEG];     /* base[i] is ours to free */
	bool freed[VSEG];
	atomic_int calls[VSEG];
	_Atomic size_t got[VSEG];
};

static atomic_long g_stray_releases; /* callbacks for no known segment */
static atomic_long g_releases;

/* The release callback: may run in any thread, perhaps under a pipe's
 * lock, so it only counts. */
static void on_release(void *arg, const struct iovec *seg)
{
	struct vrec *v = arg;
	atomic_fetch_add(&g_releases, 1);
	for (int i = 0; i < v->n; i++) {
		if (v->len[i] && v->base[i] == seg->iov_base) {
			atomic_store(&v->got[i], seg->iov_len);
			atomic_fetch_add(&v->calls[i], 1);
			return;
		}
	}
	atomic_fetch_add(&g_stray_releases, 1);
}

/* ---- the generation ---------------------------------------------------- */

struct gen;

struct sw { /* a stream writer */
	struct gen *g;
	const char *name;
	struct pp_end *e;
	unsigned seed;
	uint32_t rs;
	bool epipe_ok;
	size_t written;
	struct vrec *recs;
	int nrecs, lo;
};

struct sr { /* a stream reader */
	struct gen *g;
	const char *name;
	struct pp_end *e;
	unsigned seed;
	uint32_t rs;
	size_t abort_at; /* close after this many bytes; SIZE_MAX: read to EOF */
	size_t got;
	long bad;
};

struct mv { /* lane B's mover (nout 1) or lane C's fan-out (nout 2) */
	struct gen *g;
	struct pp_end *in, *out[2];
	int nout;
	unsigned seed;
	uint32_t rs;
	size_t pos;
	long bad;
};

struct fdx { /* lane D: pipe -> descriptor, or descriptor -> pipe */
	struct gen *g;
	struct pp_end *e;
	int fd;
	uint32_t rs;
	size_t moved;
};

struct rw { /* a record writer */
	struct gen *g;
	struct pp_end *e;
	int id;
	uint32_t rs;
	uint32_t nseq;
};

struct rr { /* a record reader */
	struct gen *g;
	struct pp_end *e;
	uint32_t rs;
	long count;
};

struct gen {
	int no;
	double deadline;
	unsigned seed;
	size_t rec;      /* lane E's record size */
	unsigned rec_seed;
	_Atomic uint64_t *seen[REC_WRITERS]; /* lane E: bitmaps of sequence numbers */
	struct pp_end *chaos_ends[NPIPES][2];
	uint32_t chaos_rs;
	long chaos_ops;
	struct sw w[4];  /* lanes A-D */
	struct sr r[5];  /* A, B, C (2), D */
	struct mv mb, mc;
	struct fdx to_fd, from_fd;
	struct rw rw[REC_WRITERS];
	struct rr rr[REC_READERS];
};

static bool before_deadline(struct gen *g)
{
	return t_now() < g->deadline;
}

/* ---- stream writers ---------------------------------------------------- */

/* Free the blocks of finished pp_vmsplice calls whose release came. */
static void reclaim(struct sw *w)
{
	for (int k = w->lo; k < w->nrecs; k++) {
		struct vrec *v = &w->recs[k];
		bool settled = true;
		for (int i = 0; i < v->n; i++) {
			if (!v->owned[i] || v->freed[i])
				continue;
			if (atomic_load(&v->calls[i]) > 0) {
				free(v->base[i]);
				v->freed[i] = true;
			} else {
				settled = false;
			}
		}
		if (settled && k == w->lo)
			w->lo++;
	}
}

/* pp_vmsplice stream bytes from pos; -2 when no record slot is free. */
static ssize_t sw_vmsplice(struct sw *w, size_t pos)
{
	reclaim(w);
	if (w->nrecs >= VREC_MAX || w->nrecs - w->lo >= VPENDING_MAX)
		return -2;
	struct vrec *v = &w->recs[w->nrecs++];
	struct iovec iov[VSEG];
	size_t off = pos;
	v->n = 1 + (int)rnd(&w->rs, VSEG);
	for (int i = 0; i < v->n; i++) {
		size_t len = rnd(&w->rs, 5) ? 1 + rnd(&w->rs, 16384) : 0;
		v->len[i] = len;
		if (len) {
			v->base[i] = malloc(len);
			if (!v->base[i])
				abort();
			v->owned[i] = true;
			tp_fill(v->base[i], len, w->seed, off);
			off += len;
		} else {
			v->base[i] = (unsigned char *)w; /* any non-NULL address */
		}
		iov[i] = (struct iovec){ v->base[i], len };
	}
	unsigned fl = rnd(&w->rs, 4) ? 0 : PP_SPLICE_NONBLOCK;
	if (!rnd(&w->rs, 4))
		fl |= PP_SPLICE_GIFT;
	ssize_t n = pp_vmsplice(w->e, iov, (unsigned long)v->n, fl, on_release, v);
	int err = errno;
	size_t placed = n > 0 ? (size_t)n : 0, start = 0;
	if (n == 0 && off != pos)
		TFAIL("%s: pp_vmsplice of %zu bytes returned 0", w->name, off - pos);
	for (int i = 0; i < v->n; i++) {
		if (v->len[i] && start < placed)
			v->expect[i] = v->len[i] < placed - start ? v->len[i] : placed - start;
		start += v->len[i];
		if (v->owned[i] && !v->expect[i]) { /* never went in: no release due */
			free(v->base[i]);
			v->freed[i] = true;
		}
	}
	errno = err;
	return n;
}

static void *stream_writer(void *arg)
{
	struct sw *w = arg;
	unsigned char *buf = malloc(BUFMAX);
	size_t pos = 0;
	if (!buf)
		abort();
	while (before_deadline(w->g)) {
		uint32_t op = rnd(&w->rs, 10);
		ssize_t n;
		if (op == 9)
			n = sw_vmsplice(w, pos);
		else
			n = -2;
		if (n == -2) {
			size_t len = pick_size(&w->rs, BUFMAX);
			tp_fill(buf, len, w->seed, pos);
			if (op < 5) {
				n = pp_write(w->e, buf, len);
			} else {
				struct iovec iov[8];
				int k = split(iov, 8, buf, len, &w->rs);
				n = pp_writev(w->e, iov, k);
			}
			if (n == 0)
				TFAIL("%s: write of %zu returned 0", w->name, len);
		}
		if (n < 0) {
			if (errno == EAGAIN) {
				wait_end(w->e);
				continue;
			}
			if (errno == EPIPE && w->epipe_ok)
				break;
			TFAIL("gen %d %s: write failed at %zu (errno %d)", w->g->no, w->name, pos,
			      errno);
			break;
		}
		pos += (size_t)n;
		t_progress();
	}
	reclaim(w);
	w->written = pos;
	TCHECK(pp_close(w->e) == 0);
	free(buf);
	return NULL;
}

/* ---- stream readers ---------------------------------------------------- */

static void sr_take(struct sr *r, const void *p, size_t n)
{
	long was = r->bad;
	tp_take(p, n, r->seed, &r->got, &r->bad);
	if (was < 0 && r->bad >= 0)
		TFAIL("gen %d %s: wrong byte at stream position %ld", r->g->no, r->name, r->bad);
}

static void *stream_reader(void *arg)
{
	struct sr *r = arg;
	unsigned char *buf = malloc(BUFMAX);
	if (!buf)
		abort();
	while (r->got < r->abort_at) {
		uint32_t op = rnd(&r->rs, 20);
		ssize_t n;
		if (op == 19) {
			toggle_nonblock(r->e, &r->rs);
			continue;
		}
		if (op < 8) {
			n = pp_read(r->e, buf, pick_size(&r->rs, BUFMAX));
			if (n > 0)
				sr_take(r, buf, (size_t)n);
		} else if (op < 13) {
			struct iovec iov[8];
			int k = split(iov, 8, buf, pick_size(&r->rs, BUFMAX), &r->rs);
			n = pp_readv(r->e, iov, k);
			size_t left = n > 0 ? (size_t)n : 0;
			for (int i = 0; i < k && left; i++) {
				size_t part = iov[i].iov_len < left ? iov[i].iov_len : left;
				sr_take(r, iov[i].iov_base, part);
				left -= part;
			}
		} else {
			struct iovec iov[16];
			int max = 1 + (int)rnd(&r->rs, 16);
			n = pp_peek(r->e, iov, max);
			if (n > max) {
				TFAIL("%s: pp_peek(max %d) returned %zd", r->name, max, n);
				break;
			}
			if (n > 0) {
				size_t total = 0, take;
				for (int i = 0; i < n; i++)
					total += iov[i].iov_len;
				take = rnd(&r->rs, 2) ? total : rnd(&r->rs, (uint32_t)total + 1);
				size_t left = take;
				for (int i = 0; i < n && left; i++) {
					size_t part = iov[i].iov_len < left ? iov[i].iov_len : left;
					sr_take(r, iov[i].iov_base, part);
					left -= part;
				}
				ssize_t c = pp_consume(r->e, take);
				if (c != (ssize_t)take)
					TFAIL("%s: pp_consume(%zu) returned %zd (errno %d)", r->name, take,
					      c, errno);
				n = 1;
			}
		}
		if (n == 0)
			break; /* end of file */
		if (n < 0) {
			if (errno == EAGAIN) {
				wait_end(r->e);
				continue;
			}
			TFAIL("gen %d %s: read failed at %zu (errno %d)", r->g->no, r->name, r->got,
			      errno);
			break;
		}
		t_progress();
	}
	TCHECK(pp_close(r->e) == 0);
	free(buf);
	return NULL;
}

/* ---- movers ------------------------------------------------------------ */

/* After EAGAIN from a transfer: wait for data in `in` if it has none,
 * else for room in the outputs. */
static void mv_wait(struct mv *m)
{
	short ev = pp_events(m->in);
	if (!(ev & (POLLIN | POLLHUP))) {
		wait_end(m->in);
		return;
	}
	for (int i = 0; i < m->nout; i++)
		if (!(pp_events(m->out[i]) & (POLLOUT | POLLERR))) {
			wait_end(m->out[i]);
			return;
		}
}

static void *mover(void *arg)
{
	struct mv *m = arg;
	unsigned char *buf = malloc(BUFMAX);
	if (!buf)
		abort();
	for (;;) {
		size_t len = pick_size(&m->rs, BUFMAX);
		unsigned fl = rnd(&m->rs, 4) ? 0 : PP_SPLICE_NONBLOCK;
		uint32_t op = rnd(&m->rs, 4);
		ssize_t n;
		if (m->nout == 2)
			n = pp_fanout(m->in, m->out, 2, len, fl);
		else if (op < 2)
			n = pp_splice(m->in, m->out[0], len, fl);
		else
			n = pp_tee(m->in, m->out[0], len, fl);
		if (n > (ssize_t)len) {
			TFAIL("mover: moved %zd of %zu", n, len);
			break;
		}
		if (n > 0 && m->nout == 1 && op >= 2) {
			/* tee left the bytes in `in`: take them off, the same count */
			ssize_t k;
			if (op == 2) {
				k = pp_read(m->in, buf, (size_t)n);
				if (k > 0) {
					long was = m->bad;
					tp_take(buf, (size_t)k, m->seed, &m->pos, &m->bad);
					if (was < 0 && m->bad >= 0)
						TFAIL("gen %d mover: wrong byte at %ld after tee", m->g->no,
						      m->bad);
				}
			} else {
				k = pp_consume(m->in, (size_t)n);
				if (k > 0)
					m->pos += (size_t)k;
			}
			if (k != n) {
				TFAIL("mover: took %zd of the %zd bytes teed (errno %d)", k, n, errno);
				break;
			}
		} else if (n > 0) {
			m->pos += (size_t)n;
		}
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EAGAIN) {
				mv_wait(m);
				continue;
			}
			TFAIL("gen %d mover: transfer failed (errno %d)", m->g->no, errno);
			break;
		}
		t_progress();
	}
	for (int i = 0; i < m->nout; i++)
		TCHECK(pp_close(m->out[i]) == 0);
	TCHECK(pp_close(m->in) == 0);
	free(buf);
	return NULL;
}

/* Move between x->e and x->fd until the end, into the descriptor (out) or
 * out of it; on EAGAIN wait for whichever side is not ready. */
static void fd_move(struct fdx *x, bool out)
{
	const char *call = out ? "pp_splice_to_fd" : "pp_splice_from_fd";
	for (;;) {
		unsigned fl = rnd(&x->rs, 4) ? 0 : PP_SPLICE_NONBLOCK;
		size_t len = pick_size(&x->rs, BUFMAX);
		ssize_t n = out ? pp_splice_to_fd(x->e, x->fd, NULL, len, fl)
		                : pp_splice_from_fd(x->fd, NULL, x->e, len, fl);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EAGAIN) {
				/* The pipe side ready: the descriptor is full (out) or empty. */
				if (pp_events(x->e) & (out ? POLLIN | POLLHUP : POLLOUT | POLLERR))
					wait_fd(x->fd, out ? POLLOUT : POLLIN);
				else
					wait_end(x->e);
				continue;
			}
			TFAIL("gen %d %s failed (errno %d)", x->g->no, call, errno);
			break;
		}
		x->moved += (size_t)n;
		t_progress();
	}
	TCHECK(close(x->fd) == 0);
	TCHECK(pp_close(x->e) == 0);
}

static void *to_fd(void *arg)
{
	fd_move(arg, true);
	return NULL;
}

static void *from_fd(void *arg)
{
	fd_move(arg, false);
	return NULL;
}

/* ---- records ------------------------------------------------------------ */

struct hdr {
	uint32_t magic;
	uint16_t id;
	uint16_t len;
	uint32_t seq;
	uint32_t check; /* mixes the fields above */
};
_Static_assert(sizeof(struct hdr) == HDR, "record header");

static uint32_t hdr_check(const struct hdr *h)
{
	uint32_t x = h->magic ^ ((uint32_t)h->id << 16 | h->len) ^ (h->seq * 2654435761u);
	return x ^ (x >> 15);
}

static unsigned rec_stream(struct gen *g, int id)
{
	return g->rec_seed + 7919u * (unsigned)id;
}

static void make_rec(struct gen *g, unsigned char *p, int id, uint32_t seq)
{
	struct hdr h = { REC_MAGIC, (uint16_t)id, (uint16_t)g->rec, seq, 0 };
	h.check = hdr_check(&h);
	memcpy(p, &h, HDR);
	tp_fill(p + HDR, g->rec - HDR, rec_stream(g, id), (size_t)seq * g->rec);
}

static void *rec_writer(void *arg)
{
	struct rw *w = arg;
	struct gen *g = w->g;
	unsigned char buf[4096];
	bool made = false;
	while (w->nseq < SEQ_CAP && before_deadline(g)) {
		if (!made)
			make_rec(g, buf, w->id, w->nseq);
		made = true;
		ssize_t n;
		if (rnd(&w->rs, 3)) {
			n = pp_write(w->e, buf, g->rec);
		} else {
			struct iovec iov[8];
			int k = split(iov, 8, buf, g->rec, &w->rs);
			n = pp_writev(w->e, iov, k);
		}
		if (n == -1 && errno == EAGAIN) {
			wait_end(w->e);
			continue;
		}
		if (n != (ssize_t)g->rec) {
			TFAIL("gen %d record writer %d: write of %zu returned %zd (errno %d)%s", g->no,
			      w->id, g->rec, n, errno, n > 0 ? ": split" : "");
			break;
		}
		w->nseq++;
		made = false;
		if (!rnd(&w->rs, 500)) { /* swap the handle for a fresh dup */
			struct pp_end *d = pp_dup(w->e);
			TCHECK(d != NULL);
			if (d) {
				TCHECK(pp_close(w->e) == 0);
				w->e = d;
			}
		}
		t_progress();
	}
	TCHECK(pp_close(w->e) == 0);
	return NULL;
}

static bool rec_check(struct rr *r, const unsigned char *p, uint32_t last[])
{
	struct gen *g = r->g;
	struct hdr h;
	memcpy(&h, p, HDR);
	if (h.magic != REC_MAGIC || h.check != hdr_check(&h) || h.id >= REC_WRITERS ||
	    h.len != g->rec || h.seq >= SEQ_CAP) {
		TFAIL("gen %d record reader: bad record header (magic %#x id %u len %u seq %u)",
		      g->no, h.magic, h.id, h.len, h.seq);
		return false;
	}
	if (last[h.id] != UINT32_MAX && h.seq <= last[h.id])
		TFAIL("gen %d record reader: writer %u's record %u after %u", g->no, h.id, h.seq,
		      last[h.id]);
	last[h.id] = h.seq;
	if (tp_verify(p + HDR, g->rec - HDR, rec_stream(g, h.id), (size_t)h.seq * g->rec) >= 0)
		TFAIL("gen %d record reader: record %u/%u corrupted", g->no, h.id, h.seq);
	uint64_t bit = 1ull << (h.seq % 64);
	if (atomic_fetch_or(&g->seen[h.id][h.seq / 64], bit) & bit)
		TFAIL("gen %d: record %u/%u read twice", g->no, h.id, h.seq);
	r->count++;
	return true;
}

static void *rec_reader(void *arg)
{
	struct rr *r = arg;
	struct gen *g = r->g;
	size_t cap = 8 * g->rec;
	unsigned char *buf = malloc(cap);
	uint32_t last[REC_WRITERS];
	bool ok = true;
	if (!buf)
		abort();
	for (int i = 0; i < REC_WRITERS; i++)
		last[i] = UINT32_MAX;
	for (;;) {
		size_t want = g->rec * (1 + rnd(&r->rs, 8));
		ssize_t n;
		if (!rnd(&r->rs, 200)) {
			toggle_nonblock(r->e, &r->rs);
			continue;
		}
		if (rnd(&r->rs, 3)) {
			n = pp_read(r->e, buf, want);
		} else {
			struct iovec iov[8];
			int k = split(iov, 8, buf, want, &r->rs);
			n = pp_readv(r->e, iov, k);
		}
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EAGAIN) {
				wait_end(r->e);
				continue;
			}
			TFAIL("gen %d record reader: read failed (errno %d)", g->no, errno);
			break;
		}
		if ((size_t)n % g->rec) {
			TFAIL("gen %d record reader: read of %zu returned %zd, not whole records of %zu",
			      g->no, want, n, g->rec);
			ok = false;
		}
		for (size_t off = 0; ok && off + g->rec <= (size_t)n; off += g->rec)
			ok = rec_check(r, buf + off, last);
		t_progress();
	}
	TCHECK(pp_close(r->e) == 0);
	free(buf);
	return NULL;
}

/* ---- chaos -------------------------------------------------------------- */

static const size_t sizes[] = { 4096, 8192, 16384, 65536, 131072, 262144, 1048576 };

static void *chaos(void *arg)
{
	struct gen *g = arg;
	uint32_t *rs = &g->chaos_rs;
	while (before_deadline(g)) {
		int p = (int)rnd(rs, NPIPES), side = (int)rnd(rs, 2);
		struct pp_end *e = g->chaos_ends[p][side];
		switch (rnd(rs, 8)) {
		case 0:
		case 1: {
			size_t sz = sizes[rnd(rs, sizeof sizes / sizeof sizes[0])];
			long got = pp_setsize(e, sz);
			if (got != (long)sz && !(got == -1 && errno == EBUSY))
				TFAIL("pp_setsize(%zu) = %ld (errno %d)", sz, got, errno);
			break;
		}
		case 2:
		case 3:
			toggle_nonblock(e, rs);
			break;
		case 4: {
			int nr = pp_nread(e);
			long sz = pp_getsize(e);
			short ev = pp_events(e);
			if (nr < 0 || sz < 4096 || sz > 1048576 || (sz & (sz - 1)) || ev < 0)
				TFAIL("nread %d getsize %ld events %d (errno %d)", nr, sz, ev, errno);
			break;
		}
		case 5: {
			struct pp_end *d = pp_dup(e);
			TCHECK(d != NULL);
			if (d && rnd(rs, 2)) {
				TCHECK(pp_close(e) == 0); /* keep the new one instead */
				g->chaos_ends[p][side] = d;
			} else if (d) {
				TCHECK(pp_close(d) == 0);
			}
			break;
		}
		case 6: {
			struct pp_pool_stats st;
			TCHECK(pp_pool_stats(&st) == 0);
			/* Idle pages: within the room left in the open pipes,
			 * or the pool's floor of 64. */
			TCHECK(st.pages_in_use >= 0 && st.pages_cached <= st.cache_max);
			TCHECK(st.pages_cached <= 64 ||
			       st.pages_cached <= st.pipe_pages - st.pages_in_use);
			break;
		}
		default:
			t_sleep_ms(1);
			break;
		}
		g->chaos_ops++;
		t_progress();
	}
	for (int p = 0; p < NPIPES; p++)
		for (int s = 0; s < 2; s++)
			TCHECK(pp_close(g->chaos_ends[p][s]) == 0);
	return NULL;
}

/* ---- the main thread ------------------------------------------------------ */

static double g_seconds = 10;
static unsigned g_seed;
static int g_ngens;
static long g_rss[MAX_GENS];
static long g_fail_pages, g_fail_releases, g_fail_fds, g_fail_data;
static long g_total_bytes, g_total_records, g_total_vmsplice, g_total_released;

static void setup_pipe(struct pp_end *e[2], int flags, uint32_t *rs)
{
	if (pp_pipe(e, flags | PP_NOSIGPIPE) != 0) {
		perror("pp_pipe");
		exit(1);
	}
	if (rnd(rs, 2))
		CHECK(pp_setsize(e[rnd(rs, 2)], sizes[rnd(rs, sizeof sizes / sizeof sizes[0])]) > 0);
	for (int s = 0; s < 2; s++)
		if (!rnd(rs, 6))
			CHECK(pp_setfl(e[s], PP_NONBLOCK) == 0);
}

static void run_generation(struct gen *g, double len)
{
	uint32_t rs = g->seed;
	struct pp_end *p[NPIPES][2];
	int kfd[2];
	pthread_t t[32];
	int nt = 0;

	for (int i = 0; i < NPIPES; i++) {
		int flags = (i == PE && !rnd(&rs, 3)) ? PP_PACKET : 0;
		setup_pipe(p[i], flags, &rs);
		for (int s = 0; s < 2; s++) {
			g->chaos_ends[i][s] = pp_dup(p[i][s]);
			CHECK(g->chaos_ends[i][s] != NULL);
			if (!g->chaos_ends[i][s])
				exit(1);
		}
	}
	if (rnd(&rs, 2))
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, kfd) == 0);
	else
		CHECK(pipe2(kfd, O_CLOEXEC) == 0);
	for (int s = 0; s < 2; s++)
		if (!rnd(&rs, 4))
			CHECK(fcntl(kfd[s], F_SETFL, fcntl(kfd[s], F_GETFL) | O_NONBLOCK) == 0);

	static const size_t recs[] = { 24, 64, 512, 1000, 4096 };
	g->rec = recs[rnd(&rs, 5)];
	g->rec_seed = tp_rand(&rs);
	for (int i = 0; i < REC_WRITERS; i++) {
		g->seen[i] = calloc(SEQ_CAP / 64, sizeof(uint64_t));
		if (!g->seen[i])
			abort();
	}
	g->chaos_rs = tp_rand(&rs);

	/* Stream writers and readers of lanes A-D. */
	struct pp_end *wend[4] = { p[PA][1], p[PB1][1], p[PC1][1], p[PD1][1] };
	static const char *wname[4] = { "writer A", "writer B", "writer C", "writer D" };
	for (int i = 0; i < 4; i++) {
		g->w[i] = (struct sw){ .g = g, .name = wname[i], .e = wend[i], .seed = tp_rand(&rs),
		                       .rs = tp_rand(&rs), .epipe_ok = i == 0 };
		g->w[i].recs = calloc(VREC_MAX, sizeof(struct vrec));
		if (!g->w[i].recs)
			abort();
	}
	bool abort_a = !rnd(&rs, 3);
	struct pp_end *rend[5] = { p[PA][0], p[PB2][0], p[PC2][0], p[PC3][0], p[PD2][0] };
	static const char *rname[5] = { "reader A", "reader B", "reader C1", "reader C2",
	                                 "reader D" };
	static const int rlane[5] = { 0, 1, 2, 2, 3 };
	for (int i = 0; i < 5; i++)
		g->r[i] = (struct sr){ .g = g, .name = rname[i], .e = rend[i],
		                       .seed = g->w[rlane[i]].seed, .rs = tp_rand(&rs),
		                       .abort_at = (i == 0 && abort_a) ? rnd(&rs, 1 << 22) : SIZE_MAX,
		                       .bad = -1 };
	g->mb = (struct mv){ .g = g, .in = p[PB1][0], .out = { p[PB2][1] }, .nout = 1,
	                     .seed = g->w[1].seed, .rs = tp_rand(&rs), .bad = -1 };
	g->mc = (struct mv){ .g = g, .in = p[PC1][0], .out = { p[PC2][1], p[PC3][1] },
	                     .nout = 2, .seed = g->w[2].seed, .rs = tp_rand(&rs), .bad = -1 };
	g->to_fd = (struct fdx){ .g = g, .e = p[PD1][0], .fd = kfd[1], .rs = tp_rand(&rs) };
	g->from_fd = (struct fdx){ .g = g, .e = p[PD2][1], .fd = kfd[0], .rs = tp_rand(&rs) };

	/* Lane E: every writer and reader on a handle of its own. */
	for (int i = 0; i < REC_WRITERS; i++) {
		struct pp_end *e = i ? pp_dup(p[PE][1]) : p[PE][1];
		CHECK(e != NULL);
		g->rw[i] = (struct rw){ .g = g, .e = e, .id = i, .rs = tp_rand(&rs) };
	}
	for (int i = 0; i < REC_READERS; i++) {
		struct pp_end *e = i ? pp_dup(p[PE][0]) : p[PE][0];
		CHECK(e != NULL);
		g->rr[i] = (struct rr){ .g = g, .e = e, .rs = tp_rand(&rs) };
	}

	g->deadline = t_now() + len;
	for (int i = 0; i < 4; i++)
		make_thread(&t[nt++], stream_writer, &g->w[i]);
	for (int i = 0; i < 5; i++)
		make_thread(&t[nt++], stream_reader, &g->r[i]);
	make_thread(&t[nt++], mover, &g->mb);
	make_thread(&t[nt++], mover, &g->mc);
	make_thread(&t[nt++], to_fd, &g->to_fd);
	make_thread(&t[nt++], from_fd, &g->from_fd);
	for (int i = 0; i < REC_WRITERS; i++)
		make_thread(&t[nt++], rec_writer, &g->rw[i]);
	for (int i = 0; i < REC_READERS; i++)
		make_thread(&t[nt++], rec_reader, &g->rr[i]);
	make_thread(&t[nt++], chaos, g);
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
}

/* After the threads are gone: does every count add up? */
static void check_generation(struct gen *g)
{
	long data_fails = 0, rel_fails = 0;
	struct sw *w = g->w;
	struct sr *r = g->r;
#define DCHECK(c, ...)                                                       \
	do {                                                                     \
		if (!(c)) {                                                          \
			fprintf(stderr, "gen %d: ", g->no);                              \
			fprintf(stderr, __VA_ARGS__);                                    \
			fprintf(stderr, "\n");                                           \
			data_fails++;                                                    \
		}                                                                    \
	} while (0)
	/* lane A: everything, or (reader closed early) a prefix */
	if (r[0].got >= r[0].abort_at)
		DCHECK(r[0].got <= w[0].written, "lane A read %zu of %zu", r[0].got, w[0].written);
	else
		DCHECK(r[0].got == w[0].written, "lane A: read %zu, written %zu", r[0].got,
		       w[0].written);
	DCHECK(g->mb.pos == w[1].written && r[1].got == w[1].written,
	       "lane B: written %zu, mover %zu, read %zu", w[1].written, g->mb.pos, r[1].got);
	DCHECK(g->mc.pos == w[2].written && r[2].got == w[2].written && r[3].got == w[2].written,
	       "lane C: written %zu, fanned out %zu, read %zu and %zu", w[2].written, g->mc.pos,
	       r[2].got, r[3].got);
	DCHECK(g->to_fd.moved == w[3].written && g->from_fd.moved == w[3].written &&
	       r[4].got == w[3].written,
	       "lane D: written %zu, to fd %zu, from fd %zu, read %zu", w[3].written,
	       g->to_fd.moved, g->from_fd.moved, r[4].got);
	for (int i = 0; i < 5; i++)
		DCHECK(r[i].bad < 0, "%s: wrong byte at %ld", r[i].name, r[i].bad);
	DCHECK(g->mb.bad < 0, "mover B: wrong byte at %ld", g->mb.bad);

	/* lane E: each record exactly once */
	long sent = 0, got = 0;
	for (int i = 0; i < REC_WRITERS; i++) {
		sent += g->rw[i].nseq;
		for (uint32_t s = 0; s < g->rw[i].nseq; s++)
			if (!(atomic_load(&g->seen[i][s / 64]) & (1ull << (s % 64)))) {
				DCHECK(0, "record %d/%u never read", i, s);
				break;
			}
	}
	for (int i = 0; i < REC_READERS; i++)
		got += g->rr[i].count;
	DCHECK(sent == got, "lane E: %ld records written, %ld read", sent, got);

	/* vmsplice: each segment that went in released once, with its part */
	long calls = 0;
	for (int i = 0; i < 4; i++) {
		for (int k = 0; k < w[i].nrecs; k++) {
			struct vrec *v = &w[i].recs[k];
			for (int s = 0; s < v->n; s++) {
				int c = atomic_load(&v->calls[s]);
				size_t gotlen = atomic_load(&v->got[s]);
				if (c != (v->expect[s] ? 1 : 0) || (c && gotlen != v->expect[s])) {
					if (rel_fails++ < 10)
						fprintf(stderr, "gen %d %s: vmsplice %d segment %d of %zu bytes:"
						        " %zu went in, released %d times (with %zu)\n", g->no,
						        w[i].name, k, s, v->len[s], v->expect[s], c, gotlen);
				}
				if (v->owned[s] && !v->freed[s])
					free(v->base[s]);
				calls += c;
			}
		}
		g_total_vmsplice += w[i].nrecs;
		free(w[i].recs);
	}
	g_total_released += calls;
	for (int i = 0; i < REC_WRITERS; i++)
		free(g->seen[i]);
	for (int i = 0; i < 4; i++)
		g_total_bytes += (long)w[i].written;
	g_total_records += sent;
	g_fail_data += data_fails;
	g_fail_releases += rel_fails;
	if (data_fails || rel_fails)
		fprintf(stderr, "gen %d (seed %u): %ld count mismatches, %ld release errors\n", g->no,
		        g->seed, data_fails, rel_fails);
#undef DCHECK
}

static double env_double(const char *name, double dflt)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return dflt;
	double v = strtod(s, &end);
	return *end || !(v > 0) ? dflt : v;
}

static void soak_workload(void)
{
	int gens = (int)(g_seconds + 0.5);
	if (gens < 3)
		gens = 3;
	if (gens > MAX_GENS)
		gens = MAX_GENS;
	double len = g_seconds / gens;
	uint32_t rs = g_seed;
	fprintf(stderr, "soak: %.1f s in %d generations of %.2f s, seed %u\n", g_seconds, gens,
	        len, g_seed);
	for (int n = 0; n < gens; n++) {
		struct gen *g = calloc(1, sizeof *g);
		if (!g)
			abort();
		g->no = n;
		g->seed = tp_rand(&rs);
		int fds = tp_count_fds();
		long stray = atomic_load(&g_stray_releases);
		double t0 = t_now();
		run_generation(g, len);
		check_generation(g);

		struct pp_pool_stats st;
		CHECK(pp_pool_stats(&st) == 0);
		if (st.pages_in_use != 0 || st.pipe_pages != 0 || st.pages_cached > 64 ||
		    st.pages_cached > st.cache_max) {
			fprintf(stderr, "gen %d: %ld pages in use, %ld cached (bound %ld), %ld pipe pages"
			        " with every pipe closed\n", n, st.pages_in_use, st.pages_cached,
			        st.cache_max, st.pipe_pages);
			g_fail_pages++;
		}
		if (atomic_load(&g_stray_releases) != stray) {
			fprintf(stderr, "gen %d: release callback for an unknown segment\n", n);
			g_fail_releases++;
		}
		int fds_after = tp_count_fds();
		if (fds_after != fds) {
			fprintf(stderr, "gen %d: %d descriptors open before, %d after\n", n, fds,
			        fds_after);
			g_fail_fds++;
		}
		malloc_trim(0);
		g_rss[n] = rss_kb();
		g_ngens = n + 1;
		fprintf(stderr, "  gen %d: %.2f s, %zu+%zu+%zu+%zu bytes, %u+%u records of %zu,"
		        " %d vmsplices, %ld chaos ops, rss %ld KiB\n", n, t_now() - t0,
		        g->w[0].written, g->w[1].written, g->w[2].written, g->w[3].written,
		        g->rw[0].nseq, g->rw[1].nseq, g->rec,
		        g->w[0].nrecs + g->w[1].nrecs + g->w[2].nrecs + g->w[3].nrecs,
		        g->chaos_ops, g_rss[n]);
		free(g);
	}
	fprintf(stderr, "soak: %ld stream bytes, %ld records, %ld vmsplice calls, %ld releases\n",
	        g_total_bytes, g_total_records, g_total_vmsplice, g_total_released);
	threads_case_end(); /* helper threads' failures, and no page in use */
	CHECK_EQ(g_fail_data, 0);
	CHECK(g_total_bytes > 0 && g_total_records > 0);
}

static void soak_pages_return(void)
{
	CHECK_EQ(g_fail_pages, 0);
}

static void soak_releases_once(void)
{
	CHECK_EQ(g_fail_releases, 0);
	CHECK(g_total_vmsplice > 0 && g_total_released > 0);
}

static void soak_fds_return(void)
{
	CHECK_EQ(g_fail_fds, 0);
}

static void soak_rss_flat(void)
{
	if (T_SAN_FACTOR < 1.0)
		SKIP("RSS is not flat under a sanitizer by design (quarantine, shadow)");
	if (g_valgrind)
		SKIP("RSS is valgrind's under valgrind");
	long warm = g_rss[0], worst = 0;
	int at = 0;
	CHECK(warm > 0);
	for (int n = 1; n < g_ngens; n++)
		if (g_rss[n] > worst) {
			worst = g_rss[n];
			at = n;
		}
	fprintf(stderr, "rss after warm-up %ld KiB, highest later %ld KiB (gen %d), last %ld KiB,"
	        " margin %ld KiB\n", warm, worst, at, g_rss[g_ngens - 1], RSS_MARGIN_KB);
	CHECK(worst <= warm + RSS_MARGIN_KB);
}

int main(void)
{
	const char *s = getenv("PP_SOAK_SEED");
	g_valgrind = t_valgrind();
	g_seconds = env_double("PP_SOAK_SECONDS", 10);
	g_seed = s ? (unsigned)strtoul(s, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
	if (!g_seed)
		g_seed = 1;
	/* One malloc arena, and a fixed mmap threshold: malloc_trim(0) gives
	 * back every free page of the main arena but not the top of the
	 * per-thread arenas glibc would make for 18 threads (up to 16 here,
	 * each keeping a few hundred KiB), and blocks of 64 KiB and more (the
	 * threads' buffers) are mapped and unmapped rather than left in the
	 * heap.  So generation-end RSS is live memory, not allocator slack. */
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	signal(SIGPIPE, SIG_IGN); /* a descriptor side closed early fails, not kills */
	RUN(soak_workload);
	RUN(soak_pages_return);
	RUN(soak_releases_once);
	RUN(soak_fds_return);
	RUN(soak_rss_flat);
	return T_DONE();
}
