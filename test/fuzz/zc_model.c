/*
 * zc_model.c - a byte-exact model of pagepipes under the zero-copy calls:
 * pp_splice, pp_tee, pp_fanout, pp_vmsplice, pp_splice_from_fd,
 * pp_splice_to_fd and pp_peek/pp_consume, mixed with pp_write, pp_read and
 * pp_setsize.  Not a program of its own: #included by test/fault_zerocopy.c
 * (the fault-injection workload) and test/fuzz/fuzz_zerocopy.c (the fuzz
 * target, itself #included by test/fuzz_replay.c).  Single-threaded.
 *
 * What it models, following the library's rules (which follow Linux's):
 *   - each pipe's ring: slots naming a page, an offset and a length, with
 *     the flags that decide what later calls do (mergeable, packet), and
 *     the capacity in slots;
 *   - pages with reference counts: a tee or a fan-out gives each output one
 *     more reference to the same page, a whole-buffer pp_splice moves the
 *     reference, a partial one shares the page; a write appends to the
 *     last buffer only when it is mergeable, the bytes fit, and that buffer
 *     holds the page's only reference (so no write ever changes bytes
 *     another pipe can read); buffers from pp_splice_from_fd and
 *     pp_vmsplice are neither mergeable nor packets;
 *   - pp_splice_from_fd from a file sealed with F_SEAL_SHRINK: the file's
 *     own pages, mapped (zm_fill_apply_file), one "run" a call: the first
 *     buffer starts where the offset falls in its page, so a call takes at
 *     most its slots' pages minus that lead (zm_fill_map_predict); they
 *     are not pool pages, never merged into, and their bytes are the
 *     file's as they are now (a shared mapping: a write to the file after
 *     the call shows in the pipe), which the includer keeps in its own
 *     copy of the file; the run is unmapped when its last page goes;
 *   - the expected bytes of every page: a mirror for pool pages, the
 *     caller's pattern for vmsplice'd memory, the includer's copy of the
 *     file for mapped file pages;
 *   - vmsplice gifts: one per segment that went in (in part or whole),
 *     counting its chunks still referenced; its release is due exactly when
 *     the last one goes;
 *   - a write end's reservation (pp_reserve, one per pipe: the includer
 *     has one handle a side): fresh pool pages no slot names yet, each
 *     holding a slot of the capacity (zm_room counts them as used, so
 *     every writer, pp_events and pp_setsize's EBUSY see them), the bytes
 *     the caller put in them in their mirrors; pp_commit pushes the pages
 *     holding its first n bytes as buffers written by pp_write would be
 *     (offset 0, mergeable, or packets in packet mode) and gives the rest
 *     back, and so does closing the write end;
 *   - the pool: pages_in_use is the number of pool pages some slot or
 *     reservation names (mapped file pages are not among them);
 *     zm_file_pages() is how many file pages are mapped (the includer
 *     compares it with the mappings).
 *
 * zm_check_all() compares it with the library after a step: for every live
 * pipe pp_nread, pp_getsize, pp_events of each open end and a pp_fd
 * descriptor's readiness (unless the includer marked it stale), and, through
 * pp_peek on the read end, the whole contents: one segment per model slot,
 * the same lengths, the same bytes, and the same address for the same model
 * page, whichever pipes name it (tee'd and moved buffers are the same
 * memory; vmsplice'd chunks are the caller's own memory, a sealed file's
 * buffers its mapped pages: nothing copied);
 * then pool pages_in_use, and every gift's release: called at most once,
 * exactly once when due, never before, with the part of the segment that
 * went in, the caller's bytes unchanged.
 *
 * Failures go to zm_fail(), declared here and defined by the includer
 * (record and go on, or abort).
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../resv_layout.h"
#include "pagepipe.h"


#define ZM_PG 4096u
#define ZM_MAXPIPES 8
#define ZM_MAXSLOTS 256 /* 1 MiB pipes: pp_getmaxsize()'s default */
#define ZM_MAXPAGES 8192
#define ZM_MAXGIFTS 4096
#define ZM_MAXRUNS 4096
#define ZM_FANOUT_MAX 64
#define ZM_SEGS_MAX 64  /* pages pp_splice_from_fd fills, buffers pp_splice_to_fd writes */

#define ZM_MERGE 1u  /* a write may append to this buffer */
#define ZM_PACKET 2u /* a read takes this buffer alone (or what fits of it) */

enum { ZM_R = 0, ZM_W = 1 };

struct zm_slot {
	int pg;       /* index into zm_pages */
	uint32_t off; /* first byte in the page */
	uint32_t len;
	uint32_t fl;  /* ZM_MERGE, ZM_PACKET */
};

struct zm_page {
	int refs;                    /* slots naming it, in all pipes; 0: unused entry */
	int gift;                    /* -1: a pool or file page; else its vmsplice gift */
	int run;                     /* -1: a pool or user page; else its file run */
	unsigned char *mirror;       /* pool page: the expected bytes (ZM_PG) */
	const unsigned char *bytes;  /* the expected bytes: mirror, or the pattern */
	const unsigned char *addr;   /* where the library has it; NULL: not seen yet */
};

struct zm_gift {
	bool used;
	const unsigned char *base;   /* the caller's segment */
	const unsigned char *expect; /* what it holds (the caller must not change it) */
	size_t placed;               /* bytes of it that went in */
	int chunks;                  /* its chunk pages still referenced */
	int released;                /* release calls seen */
};

/* The pages one pp_splice_from_fd mapped from a sealed file: unmapped
 * together when the last of them goes. */
struct zm_run {
	bool used;
	int pages;  /* mapped */
	int live;   /* of those, still referenced */
};

struct zm_pipe {
	bool live;
	unsigned id;
	struct pp_end *end[2]; /* NULL once that side is closed */
	bool packet;           /* made with PP_PACKET */
	uint32_t cap;          /* capacity in slots */
	struct zm_slot s[ZM_MAXSLOTS];
	uint32_t first, count;
	uint64_t bytes;
	int efd[2];  /* pp_fd descriptors, -1 until asked for */
	bool stale;  /* the includer knows an eventfd update failed */
	/* The write end's pp_reserve not yet committed: its pages (each
	 * holding a slot) and the bytes handed out; resv_n 0: none. */
	int resv_pg[ZM_SEGS_MAX];
	uint32_t resv_n;
	size_t resv_bytes;
};

static struct zm_pipe zm_p[ZM_MAXPIPES];
static struct zm_page zm_pages[ZM_MAXPAGES];
static struct zm_gift zm_gifts[ZM_MAXGIFTS];
static struct zm_run zm_runs[ZM_MAXRUNS];
static long zm_in_use;    /* pool pages with refs > 0 */
static long zm_file_mapped; /* pages of the runs not yet unmapped */
static unsigned long zm_bad_release; /* release calls the model cannot explain */
static struct {
	const void *base;
	size_t len, placed;
	int chunks, why; /* 0 unknown or repeated, 2 length, 3 bytes changed */
} zm_bad_last;      /* the first of them */
static unsigned zm_pipes_made;

/* Report a disagreement with the library (defined by the includer). */
static void zm_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static inline size_t zm_min(size_t a, size_t b)
{
	return a < b ? a : b;
}

static inline struct zm_slot *zm_slot(struct zm_pipe *p, uint32_t i)
{
	return &p->s[(p->first + i) % ZM_MAXSLOTS];
}

static inline struct zm_slot *zm_last(struct zm_pipe *p)
{
	return p->count ? zm_slot(p, p->count - 1) : NULL;
}

/* Free slots: the capacity less the buffers and the reserved pages. */
static inline uint32_t zm_room(const struct zm_pipe *p)
{
	uint32_t used = p->count + p->resv_n;
	return used < p->cap ? p->cap - used : 0;
}

/* ---- pages and gifts ---------------------------------------------------- */

static int zm_page_alloc(void)
{
	for (int i = 1; i < ZM_MAXPAGES; i++)
		if (!zm_pages[i].refs)
			return i;
	fprintf(stderr, "zc_model: out of model pages\n");
	abort();
}

/* A fresh pool page, one reference. */
static int zm_page_anon(void)
{
	int i = zm_page_alloc();
	struct zm_page *g = &zm_pages[i];
	if (!g->mirror && !(g->mirror = malloc(ZM_PG))) {
		fprintf(stderr, "zc_model: out of memory\n");
		abort();
	}
	g->refs = 1;
	g->gift = -1;
	g->run = -1;
	g->bytes = g->mirror;
	g->addr = NULL;
	zm_in_use++;
	return i;
}

/* A chunk of caller memory, one reference. */
static int zm_page_user(int gift, const unsigned char *addr, const unsigned char *expect)
{
	int i = zm_page_alloc();
	struct zm_page *g = &zm_pages[i];
	g->refs = 1;
	g->gift = gift;
	g->run = -1;
	g->bytes = expect;
	g->addr = addr;
	zm_gifts[gift].chunks++;
	return i;
}

/* A page of a file run whose bytes are (the includer's copy of) the
 * file's from that page's start; one reference. */
static int zm_page_file(int run, const unsigned char *bytes)
{
	int i = zm_page_alloc();
	struct zm_page *g = &zm_pages[i];
	g->refs = 1;
	g->gift = -1;
	g->run = run;
	g->bytes = bytes;
	g->addr = NULL;
	zm_runs[run].pages++;
	zm_runs[run].live++;
	zm_file_mapped++;
	return i;
}

static void zm_page_ref(int pg)
{
	zm_pages[pg].refs++;
}

static void zm_page_unref(int pg)
{
	struct zm_page *g = &zm_pages[pg];
	if (--g->refs)
		return;
	g->addr = NULL;
	if (g->run >= 0) {
		struct zm_run *r = &zm_runs[g->run];
		if (!--r->live) { /* the last page: the whole run is unmapped */
			zm_file_mapped -= r->pages;
			r->used = false;
		}
	} else if (g->gift < 0) {
		zm_in_use--;
	} else {
		zm_gifts[g->gift].chunks--;
	}
}

static int zm_gift_new(const unsigned char *base, const unsigned char *expect)
{
	for (int i = 0; i < ZM_MAXGIFTS; i++) {
		struct zm_gift *g = &zm_gifts[i];
		if (!g->used) {
			*g = (struct zm_gift){ .used = true, .base = base, .expect = expect };
			return i;
		}
	}
	fprintf(stderr, "zc_model: out of gift records\n");
	abort();
}

/*
 * The release callback to give pp_vmsplice (arg unused).  It runs inside a
 * library call, maybe with a lock held: it only looks and counts, and must
 * not allocate (the fault injector would count that).  It cannot tell
 * whether the release was due: the model learns what the call did only
 * after it returns; zm_check_gifts() does that.
 */
static void zm_release(void *arg, const struct iovec *seg)
{
	(void)arg;
	for (int i = 0; i < ZM_MAXGIFTS; i++) {
		struct zm_gift *g = &zm_gifts[i];
		if (!g->used || g->base != seg->iov_base || g->released)
			continue;
		g->released++;
		/* Whether it was due is checked after the call, when the model
		 * has caught up with it. */
		int why = seg->iov_len != g->placed ? 2 : memcmp(g->base, g->expect, g->placed) ? 3 : -1;
		if (why >= 0 && !zm_bad_release++)
			zm_bad_last = (__typeof__(zm_bad_last)){ seg->iov_base, seg->iov_len, g->placed,
			                                         g->chunks, why };
		return;
	}
	if (!zm_bad_release++) /* unknown, or a second call */
		zm_bad_last = (__typeof__(zm_bad_last)){ seg->iov_base, seg->iov_len, 0, 0, 0 };
}

/* ---- slots -------------------------------------------------------------- */

static void zm_push(struct zm_pipe *p, struct zm_slot s)
{
	if (p->count >= ZM_MAXSLOTS || p->count + p->resv_n >= p->cap)
		zm_fail("model: pipe %u pushed past its %u slots (%u reserved)", p->id, p->cap,
		        p->resv_n);
	*zm_slot(p, p->count++) = s;
	p->bytes += s.len;
}

static void zm_pop(struct zm_pipe *p)
{
	struct zm_slot *s = zm_slot(p, 0);
	zm_page_unref(s->pg);
	p->bytes -= s->len;
	p->first = (p->first + 1) % ZM_MAXSLOTS;
	p->count--;
}

/* Consume the first n bytes, as pp_consume and pp_splice_to_fd do (packet
 * buffers too); their expected bytes go to out (if not NULL). */
static void zm_drop(struct zm_pipe *p, size_t n, unsigned char *out)
{
	while (n && p->count) {
		struct zm_slot *s = zm_slot(p, 0);
		uint32_t t = (uint32_t)zm_min(s->len, n);
		if (out) {
			memcpy(out, zm_pages[s->pg].bytes + s->off, t);
			out += t;
		}
		s->off += t;
		s->len -= t;
		p->bytes -= t;
		n -= t;
		if (!s->len)
			zm_pop(p);
	}
	if (n)
		zm_fail("model: pipe %u dropped %zu bytes more than it holds", p->id, n);
}

/* ---- pipes ------------------------------------------------------------- */

static void zm_reset(void)
{
	for (int i = 0; i < ZM_MAXPAGES; i++) {
		free(zm_pages[i].mirror);
		zm_pages[i] = (struct zm_page){ 0 };
	}
	memset(zm_p, 0, sizeof zm_p);
	memset(zm_gifts, 0, sizeof zm_gifts);
	memset(zm_runs, 0, sizeof zm_runs);
	zm_in_use = 0;
	zm_file_mapped = 0;
	zm_bad_release = 0;
	zm_pipes_made = 0;
}

static void zm_pipe_init(struct zm_pipe *p, struct pp_end *ends[2], bool packet)
{
	memset(p, 0, sizeof *p);
	p->live = true;
	p->id = zm_pipes_made++;
	p->end[ZM_R] = ends[0];
	p->end[ZM_W] = ends[1];
	p->packet = packet;
	p->cap = 16;
	p->efd[0] = p->efd[1] = -1;
}

static void zm_resv_drop(struct zm_pipe *p);

/* pp_close of side's (only) handle: the write end's reservation goes back;
 * the last side frees the data. */
static void zm_close(struct zm_pipe *p, int side)
{
	if (side == ZM_W)
		zm_resv_drop(p);
	p->end[side] = NULL;
	p->efd[side] = -1;
	if (p->end[1 - side])
		return;
	while (p->count)
		zm_pop(p);
	p->live = false;
}

/* ---- pp_write / pp_read ------------------------------------------------- */

/*
 * A non-blocking write of len bytes: the result (-1 and *err on error),
 * and in *merged the bytes appended to the last buffer.  *wait: a blocking
 * write would wait instead (not all of it fits).
 */
static long zm_write_predict(struct zm_pipe *p, size_t len, size_t *merged, int *err, bool *wait)
{
	*merged = 0;
	*wait = false;
	if (!len)
		return 0;
	if (!p->end[ZM_R]) {
		*err = EPIPE;
		return -1;
	}
	size_t chars = len % ZM_PG;
	struct zm_slot *last = zm_last(p);
	if (chars && last && (last->fl & ZM_MERGE) && last->off + last->len + chars <= ZM_PG &&
	    zm_pages[last->pg].gift < 0 && zm_pages[last->pg].run < 0 &&
	    zm_pages[last->pg].refs == 1)
		*merged = chars;
	size_t need = (len - *merged + ZM_PG - 1) / ZM_PG;
	if (need <= zm_room(p))
		return (long)len;
	*wait = true;
	size_t n = *merged + zm_room(p) * ZM_PG;
	if (!n) {
		*err = EAGAIN;
		return -1;
	}
	return (long)n;
}

/* The first n bytes of a write of src[0..len) went in; false if n cannot
 * be what the library did (not the merge plus whole pages). */
static bool zm_write_apply(struct zm_pipe *p, const unsigned char *src, size_t len,
                           size_t merged, size_t n)
{
	if (n < merged || n > len)
		return false;
	if (merged) {
		struct zm_slot *last = zm_last(p);
		memcpy(zm_pages[last->pg].mirror + last->off + last->len, src, merged);
		last->len += (uint32_t)merged;
		p->bytes += merged;
	}
	size_t done = merged;
	while (done < n) {
		size_t c = zm_min(ZM_PG, len - done);
		if (done + c > n || !zm_room(p))
			return false;
		int pg = zm_page_anon();
		memcpy(zm_pages[pg].mirror, src + done, c);
		zm_push(p, (struct zm_slot){ pg, 0, (uint32_t)c, p->packet ? ZM_PACKET : ZM_MERGE });
		done += c;
	}
	return true;
}

/* A non-blocking read of count bytes: the result, -1 with EAGAIN when empty
 * with a writer, 0 at end of file.  *wait: a blocking read would wait. */
static long zm_read_predict(struct zm_pipe *p, size_t count, int *err, bool *wait)
{
	*wait = false;
	if (!count)
		return 0;
	if (!p->count) {
		if (!p->end[ZM_W])
			return 0;
		*wait = true;
		*err = EAGAIN;
		return -1;
	}
	size_t got = 0;
	for (uint32_t i = 0; i < p->count && got < count; i++) {
		struct zm_slot *s = zm_slot(p, i);
		got += zm_min(s->len, count - got);
		if (s->fl & ZM_PACKET)
			break;
	}
	return (long)got;
}

/* Do that read to the model; the expected bytes go to out. */
static size_t zm_read_apply(struct zm_pipe *p, size_t count, unsigned char *out)
{
	size_t got = 0;
	while (p->count && got < count) {
		struct zm_slot *s = zm_slot(p, 0);
		size_t c = zm_min(s->len, count - got);
		bool packet = s->fl & ZM_PACKET;
		memcpy(out + got, zm_pages[s->pg].bytes + s->off, c);
		got += c;
		if (packet || c == s->len) {
			zm_pop(p); /* the rest of a packet is discarded */
		} else {
			s->off += (uint32_t)c;
			s->len -= (uint32_t)c;
			p->bytes -= c;
		}
		if (packet)
			break;
	}
	return got;
}

/* ---- pp_splice / pp_tee / pp_fanout --------------------------------------- */

/*
 * The result of moving (consume) or sharing up to len bytes of `in` to
 * outs[0..n), non-blocking, in the library's order of checks: `in` empty
 * with a writer: EAGAIN; the first full output: EPIPE without a reader,
 * else EAGAIN; any output without a reader: EPIPE; `in` empty without
 * writer: 0.  *wait: a blocking call would wait.  *sigpipe: out index
 * whose missing reader caused EPIPE (-1 none).
 */
static long zm_xfer_predict(struct zm_pipe *in, struct zm_pipe *const outs[], int n, size_t len,
                            bool consume, int *err, bool *wait, int *sigpipe)
{
	(void)consume;
	*wait = false;
	*sigpipe = -1;
	if (!len)
		return 0;
	if (!in->count && in->end[ZM_W]) {
		*wait = true;
		*err = EAGAIN;
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (zm_room(outs[i]))
			continue;
		if (!outs[i]->end[ZM_R]) {
			*err = EPIPE;
			*sigpipe = i;
			return -1;
		}
		*wait = true;
		*err = EAGAIN;
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (!outs[i]->end[ZM_R]) {
			*err = EPIPE;
			*sigpipe = i;
			return -1;
		}
	uint32_t room = UINT32_MAX;
	for (int i = 0; i < n; i++)
		if (zm_room(outs[i]) < room)
			room = zm_room(outs[i]);
	size_t done = 0;
	for (uint32_t i = 0; i < in->count && done < len && room; i++, room--)
		done += zm_min(zm_slot(in, i)->len, len - done);
	return (long)done;
}

/* Do it to the model (after a successful call); returns the bytes moved. */
static size_t zm_xfer_apply(struct zm_pipe *in, struct zm_pipe *const outs[], int n, size_t len,
                            bool consume)
{
	uint32_t room = UINT32_MAX;
	for (int i = 0; i < n; i++)
		if (zm_room(outs[i]) < room)
			room = zm_room(outs[i]);
	size_t done = 0;
	uint32_t cur = 0;
	while (done < len && room && cur < in->count) {
		struct zm_slot *b = zm_slot(in, cur);
		uint32_t take = (uint32_t)zm_min(b->len, len - done);
		bool whole = take == b->len;
		bool moved = consume && whole && n == 1;
		struct zm_slot nb = *b;
		nb.len = take;
		if (!moved) { /* shared: the copies and the original, for good */
			nb.fl &= ~ZM_MERGE;
			b->fl &= ~ZM_MERGE;
		}
		for (int i = 0; i < n; i++) {
			if (!moved)
				zm_page_ref(nb.pg);
			zm_push(outs[i], nb);
		}
		if (consume) {
			if (whole) {
				if (moved) /* the reference went with it */
					zm_page_ref(b->pg);
				zm_pop(in);
			} else {
				b->off += take;
				b->len -= take;
				in->bytes -= take;
			}
		} else if (whole) {
			cur++;
		}
		done += take;
		room--;
	}
	return done;
}

/* ---- pp_vmsplice ------------------------------------------------------- */

/*
 * Non-blocking pp_vmsplice of iov[0..n): each segment in chunks of at most
 * a page, until the pipe is full.  The result; *wait: a blocking call
 * would wait (nothing fits).
 */
static long zm_vmsplice_predict(struct zm_pipe *p, const struct iovec *iov, int n, int *err,
                                bool *wait, bool *sigpipe)
{
	uint32_t room = zm_room(p);
	size_t placed = 0;
	*wait = *sigpipe = false;
	for (int i = 0; i < n; i++) {
		for (size_t off = 0; off < iov[i].iov_len; off += ZM_PG) {
			if (!p->end[ZM_R]) {
				*sigpipe = true;
				*err = EPIPE;
				return placed ? (long)placed : -1;
			}
			if (!room) {
				if (!placed) {
					*wait = true;
					*err = EAGAIN;
					return -1;
				}
				return (long)placed;
			}
			placed += zm_min(ZM_PG, iov[i].iov_len - off);
			room--;
		}
	}
	return (long)placed;
}

/* The first r bytes of iov went in; expect[i] is what segment i holds.
 * False if r cannot be what the library did (not on a chunk boundary). */
static bool zm_vmsplice_apply(struct zm_pipe *p, const struct iovec *iov, int n,
                              const unsigned char *const expect[], size_t r)
{
	size_t placed = 0;
	for (int i = 0; i < n && placed < r; i++) {
		const unsigned char *base = iov[i].iov_base;
		if (!iov[i].iov_len)
			continue;
		int gi = zm_gift_new(base, expect[i]);
		struct zm_gift *g = &zm_gifts[gi];
		for (size_t off = 0; off < iov[i].iov_len && placed < r; off += ZM_PG) {
			size_t c = zm_min(ZM_PG, iov[i].iov_len - off);
			if (placed + c > r || !zm_room(p))
				return false;
			int pg = zm_page_user(gi, base + off, expect[i] + off);
			zm_push(p, (struct zm_slot){ pg, 0, (uint32_t)c, 0 });
			placed += c;
			g->placed += c;
		}
	}
	return placed == r;
}

/* ---- pp_splice_from_fd / pp_splice_to_fd / pp_consume ------------------- */

/* The slots pp_splice_from_fd reserves for len: at most 64, its free
 * slots, enough for len. */
static size_t zm_fill_slots(const struct zm_pipe *p, size_t len)
{
	return zm_min(zm_min((len + ZM_PG - 1) / ZM_PG, zm_room(p)), ZM_SEGS_MAX);
}

/*
 * pp_splice_from_fd of len, non-blocking: the most the pipe takes (a page
 * for each slot it reserves, zm_fill_slots), or -1: EPIPE without a
 * reader, EAGAIN when full (*wait).  The descriptor may give less.
 */
static long zm_fill_predict(struct zm_pipe *p, size_t len, int *err, bool *wait, bool *sigpipe)
{
	*wait = *sigpipe = false;
	if (!len)
		return 0;
	if (!p->end[ZM_R]) {
		*sigpipe = true;
		*err = EPIPE;
		return -1;
	}
	size_t k = zm_fill_slots(p, len);
	if (!k) {
		*wait = true;
		*err = EAGAIN;
		return -1;
	}
	return (long)zm_min(len, k * ZM_PG);
}

/*
 * The same from a sealed file whose pages are mapped, at a file offset
 * `lead` bytes into its page: the reserved slots hold the pages from that
 * page on, so lead bytes fewer.  (The file may hold less.)
 */
static long zm_fill_map_predict(struct zm_pipe *p, size_t len, uint32_t lead, int *err,
                                bool *wait, bool *sigpipe)
{
	long n = zm_fill_predict(p, len, err, wait, sigpipe);
	if (n > 0)
		n = (long)zm_min((size_t)n, zm_fill_slots(p, len) * ZM_PG - lead);
	return n;
}

/* n bytes from a descriptor went in, in fresh pages: not mergeable, not
 * packets. */
static bool zm_fill_apply(struct zm_pipe *p, const unsigned char *src, size_t n)
{
	for (size_t done = 0; done < n;) {
		size_t c = zm_min(ZM_PG, n - done);
		if (!zm_room(p))
			return false;
		int pg = zm_page_anon();
		memcpy(zm_pages[pg].mirror, src + done, c);
		zm_push(p, (struct zm_slot){ pg, 0, (uint32_t)c, 0 });
		done += c;
	}
	return true;
}

/*
 * n bytes of a sealed file from offset pos went in as its own mapped pages,
 * one run: the first buffer from pos's place in its page, the others from
 * their page's start; not mergeable, not packets, not pool pages.  file is
 * the includer's copy of the file (byte 0 at file offset 0), which it keeps
 * up to date: the buffers show the file as it is.
 */
static bool zm_fill_apply_file(struct zm_pipe *p, const unsigned char *file, uint64_t pos,
                               size_t n)
{
	if (!n)
		return true;
	int run = -1;
	for (int i = 0; i < ZM_MAXRUNS && run < 0; i++)
		if (!zm_runs[i].used)
			run = i;
	if (run < 0) {
		fprintf(stderr, "zc_model: out of file runs\n");
		abort();
	}
	zm_runs[run] = (struct zm_run){ .used = true };
	uint32_t at = (uint32_t)(pos % ZM_PG);
	uint64_t page = pos - at;
	for (size_t done = 0; done < n; page += ZM_PG, at = 0) {
		size_t c = zm_min(ZM_PG - at, n - done);
		if (!zm_room(p))
			return false;
		int pg = zm_page_file(run, file + page);
		zm_push(p, (struct zm_slot){ pg, at, (uint32_t)c, 0 });
		done += c;
	}
	return true;
}

/* Mapped file pages now (of runs some buffer still names). */
static long zm_file_pages(void)
{
	return zm_file_mapped;
}

/* File runs not yet unmapped (each has its gift record). */
static int zm_runs_live(void)
{
	int n = 0;
	for (int i = 0; i < ZM_MAXRUNS; i++)
		n += zm_runs[i].used;
	return n;
}

/*
 * pp_splice_to_fd of len, non-blocking: the most it offers the descriptor
 * (the first 64 buffers, at most len bytes), 0 at end of file, -1 with
 * EAGAIN when empty with a writer (*wait).  The descriptor may take less.
 */
static long zm_drain_predict(struct zm_pipe *p, size_t len, int *err, bool *wait)
{
	*wait = false;
	if (!len)
		return 0;
	if (!p->count) {
		if (!p->end[ZM_W])
			return 0;
		*wait = true;
		*err = EAGAIN;
		return -1;
	}
	size_t planned = 0;
	for (uint32_t i = 0; i < p->count && i < ZM_SEGS_MAX && planned < len; i++)
		planned += zm_min(zm_slot(p, i)->len, len - planned);
	return (long)planned;
}

/* ---- pp_reserve / pp_commit ------------------------------------------------ */

/* Pages one reservation holds at most (PPI_RESV_MAX). */
#define ZM_RESV_MAX 64

/*
 * pp_reserve(len, max segments) on a private pipe's write end, after the
 * argument checks (EBADF, EINVAL, EFAULT), non-blocking: EBUSY while the
 * end has a reservation; 0 for len or max 0; EPIPE (*sigpipe) without a
 * reader; EAGAIN (*wait) without a free slot; else the pages handed out
 * (pp_reserve returns the segments they make, which depend on where the
 * pages lie: resv_layout_pages): enough for len, at most 64, max and the
 * free slots.
 */
__attribute__((unused)) static long zm_reserve_predict(struct zm_pipe *p, int max, size_t len,
                                                       int *err, bool *wait, bool *sigpipe)
{
	*wait = *sigpipe = false;
	if (p->resv_n) {
		*err = EBUSY;
		return -1;
	}
	if (!max || !len)
		return 0;
	if (!p->end[ZM_R]) {
		*sigpipe = true;
		*err = EPIPE;
		return -1;
	}
	size_t pages = len / ZM_PG + (len % ZM_PG != 0); /* len may be SIZE_MAX */
	size_t want = zm_min(zm_min(pages, ZM_RESV_MAX), (size_t)max);
	if (!zm_room(p)) {
		*wait = true;
		*err = EAGAIN;
		return -1;
	}
	return (long)zm_min(want, zm_room(p));
}

/*
 * The library handed out k segments for len bytes at iov, and the caller
 * put src[0..) in them (each segment the next bytes): fresh pool pages,
 * known to be at those addresses, held by the reservation.  False if the
 * segments are not laid out as promised (resv_layout_pages).
 */
__attribute__((unused)) static bool zm_reserve_apply(struct zm_pipe *p, const struct iovec *iov,
                                                     long k, size_t len,
                                                     const unsigned char *src)
{
	long pages = resv_layout_pages(iov, k, len, p->packet);
	if (p->resv_n || k <= 0 || pages <= 0 || pages > ZM_RESV_MAX)
		return false;
	size_t at = 0;
	for (long i = 0; i < k; i++) {
		for (size_t in = 0; in < iov[i].iov_len; in += ZM_PG) {
			size_t c = zm_min(ZM_PG, iov[i].iov_len - in);
			int pg = zm_page_anon();
			memcpy(zm_pages[pg].mirror, src + at, c);
			zm_pages[pg].addr = (unsigned char *)iov[i].iov_base + in;
			p->resv_pg[p->resv_n++] = pg;
			at += c;
		}
	}
	p->resv_bytes = at;
	return true;
}

/* Give the reservation back: its pages return to the pool, its slots are
 * room again. */
static void zm_resv_drop(struct zm_pipe *p)
{
	for (uint32_t i = 0; i < p->resv_n; i++)
		zm_page_unref(p->resv_pg[i]);
	p->resv_n = 0;
	p->resv_bytes = 0;
}

/*
 * pp_commit(n) on the write end: without a reservation 0 for n 0, else
 * EINVAL; EINVAL for n past what was reserved (the reservation stays);
 * EPIPE (*sigpipe) for n > 0 without a reader (the reservation is given
 * back: zm_commit_apply with the result); else n.
 */
__attribute__((unused)) static long zm_commit_predict(const struct zm_pipe *p, size_t n, int *err,
                                                      bool *sigpipe)
{
	*sigpipe = false;
	if (!p->resv_n) {
		if (!n)
			return 0;
		*err = EINVAL;
		return -1;
	}
	if (n > p->resv_bytes) {
		*err = EINVAL;
		return -1;
	}
	if (n && !p->end[ZM_R]) {
		*sigpipe = true;
		*err = EPIPE;
		return -1;
	}
	return (long)n;
}

/* Do what a pp_commit(n) that returned got (-1: err) did: the pages
 * holding the first n bytes pushed, as pp_write's pages (offset 0;
 * mergeable, or packets), the others given back. */
__attribute__((unused)) static void zm_commit_apply(struct zm_pipe *p, size_t n, long got, int err)
{
	if (!p->resv_n || (got < 0 && err != EPIPE))
		return; /* nothing reserved, or EINVAL: it stays */
	uint32_t k = p->resv_n, used = 0;
	p->resv_n = 0; /* its slots become the buffers' or room */
	p->resv_bytes = 0;
	if (got > 0) {
		for (size_t done = 0; done < n && used < k; used++) {
			uint32_t c = (uint32_t)zm_min(ZM_PG, n - done);
			zm_push(p, (struct zm_slot){ p->resv_pg[used], 0, c,
			                             p->packet ? ZM_PACKET : ZM_MERGE });
			done += c;
		}
	}
	for (uint32_t i = used; i < k; i++)
		zm_page_unref(p->resv_pg[i]);
}

/* Is addr the start of a page some buffer or reservation of the model
 * names (seen by the library there)? */
__attribute__((unused)) static bool zm_addr_in_use(const void *addr)
{
	for (int i = 1; i < ZM_MAXPAGES; i++)
		if (zm_pages[i].refs && zm_pages[i].addr == addr)
			return true;
	return false;
}

/* ---- pp_setsize ----------------------------------------------------------- */

static uint32_t zm_round_pages(size_t size)
{
	if (size > (1ul << 31))
		return 0;
	uint32_t pages = 1;
	while ((size_t)pages * ZM_PG < size)
		pages <<= 1;
	return pages;
}

static long zm_setsize_predict(struct zm_pipe *p, size_t size, long maxsize, int *err)
{
	uint32_t pages = zm_round_pages(size);
	if (!pages) {
		*err = EINVAL;
		return -1;
	}
	if (pages > p->cap && (long)pages * (long)ZM_PG > maxsize) {
		*err = EPERM;
		return -1;
	}
	if (pages < p->count + p->resv_n) {
		*err = EBUSY;
		return -1;
	}
	if (pages > ZM_MAXSLOTS) { /* beyond what the model holds: the caller avoids it */
		*err = E2BIG;
		return -1;
	}
	return (long)pages * (long)ZM_PG;
}

/* ---- checks --------------------------------------------------------------- */

static short zm_events(const struct zm_pipe *p, int side)
{
	if (side == ZM_R)
		return (short)((p->count ? POLLIN | POLLRDNORM : 0) | (p->end[ZM_W] ? 0 : POLLHUP));
	return (short)((zm_room(p) ? POLLOUT | POLLWRNORM : 0) | (p->end[ZM_R] ? 0 : POLLERR));
}

/* One pipe against the library. */
static void zm_check_pipe(struct zm_pipe *p)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < p->count; i++) {
		struct zm_slot *s = zm_slot(p, i);
		if (!s->len || s->off + s->len > ZM_PG || zm_pages[s->pg].refs <= 0)
			zm_fail("model broken: pipe %u slot %u", p->id, i);
		sum += s->len;
	}
	if (sum != p->bytes || p->count + p->resv_n > p->cap)
		zm_fail("model broken: pipe %u bytes %llu/%llu, %u+%u/%u slots", p->id,
		        (unsigned long long)sum, (unsigned long long)p->bytes, p->count, p->resv_n,
		        p->cap);

	for (int side = 0; side < 2; side++) {
		struct pp_end *e = p->end[side];
		if (!e)
			continue;
		int nr = pp_nread(e);
		if (nr < 0 || (uint64_t)nr != p->bytes)
			zm_fail("pipe %u side %d: pp_nread = %d, model has %llu bytes", p->id, side, nr,
			        (unsigned long long)p->bytes);
		long sz = pp_getsize(e);
		if (sz != (long)p->cap * (long)ZM_PG)
			zm_fail("pipe %u side %d: pp_getsize = %ld, model %ld", p->id, side, sz,
			        (long)p->cap * (long)ZM_PG);
		short ev = pp_events(e), want = zm_events(p, side);
		if (ev != want)
			zm_fail("pipe %u side %d: pp_events = %#x, model %#x (%u/%u slots, %s reader, "
			        "%s writer)", p->id, side, ev, want, p->count, p->cap,
			        p->end[ZM_R] ? "a" : "no", p->end[ZM_W] ? "a" : "no");
		if (p->efd[side] >= 0 && !p->stale) {
			struct pollfd pfd = { .fd = p->efd[side], .events = POLLIN };
			int n;
			while ((n = poll(&pfd, 1, 0)) == -1 && errno == EINTR)
				;
			bool readable = n == 1 && (pfd.revents & POLLIN);
			if (readable != (want != 0))
				zm_fail("pipe %u side %d: pp_fd %d polls %s, the end is %s", p->id, side,
				        p->efd[side], readable ? "readable" : "not readable",
				        want ? "ready" : "not ready");
		}
	}

	/* The contents, slot by slot, in place. */
	struct pp_end *rd = p->end[ZM_R];
	if (!rd)
		return;
	struct iovec iov[ZM_MAXSLOTS + 1];
	errno = 0;
	if (!p->count && p->end[ZM_W]) {
		/* Empty with a writer: a peek of 0 segments does not wait. */
		ssize_t n = pp_peek(rd, iov, 0);
		if (n != 0)
			zm_fail("pipe %u: pp_peek(max 0) = %zd (%s)", p->id, n, strerror(errno));
		return;
	}
	ssize_t n = pp_peek(rd, iov, ZM_MAXSLOTS + 1);
	if (n != (ssize_t)p->count) {
		zm_fail("pipe %u: pp_peek gave %zd segments (%s), the model has %u slots", p->id, n,
		        n < 0 ? strerror(errno) : "-", p->count);
		return;
	}
	for (uint32_t i = 0; i < p->count; i++) {
		struct zm_slot *s = zm_slot(p, i);
		struct zm_page *g = &zm_pages[s->pg];
		const unsigned char *b = iov[i].iov_base;
		if (iov[i].iov_len != s->len) {
			zm_fail("pipe %u slot %u: %zu bytes, the model has %u", p->id, i, iov[i].iov_len,
			        s->len);
			return;
		}
		if (memcmp(b, g->bytes + s->off, s->len) != 0) {
			size_t k = 0;
			while (b[k] == g->bytes[s->off + k])
				k++;
			zm_fail("pipe %u slot %u (%u bytes at %u): byte %zu is %#x, want %#x", p->id, i,
			        s->len, s->off, k, b[k], g->bytes[s->off + k]);
			return;
		}
		if (!g->addr)
			g->addr = b - s->off;
		else if (g->addr != b - s->off)
			zm_fail("pipe %u slot %u: its page is at %p, the model's page %d was at %p "
			        "(a copy where there should be none, or shared pages mixed up)",
			        p->id, i, (const void *)(b - s->off), s->pg, (const void *)g->addr);
	}
}

/* Every gift: released once when due, never before; returns how many are
 * released now (their records are then free again). */
static void zm_check_gifts(void)
{
	if (zm_bad_release) {
		static const char *const why[] = {
			"for no segment the model has, or a second time", "before its last chunk went",
			"with the wrong length", "after the caller's bytes changed",
		};
		zm_fail("%lu bad release call(s); the first: %p, %zu bytes, %s (placed %zu, %d "
		        "chunks left)", zm_bad_release, zm_bad_last.base, zm_bad_last.len,
		        why[zm_bad_last.why], zm_bad_last.placed, zm_bad_last.chunks);
		zm_bad_release = 0;
	}
	for (int i = 0; i < ZM_MAXGIFTS; i++) {
		struct zm_gift *g = &zm_gifts[i];
		if (!g->used)
			continue;
		bool due = !g->chunks;
		if (g->released != (due ? 1 : 0))
			zm_fail("gift %d (segment %p, %zu bytes placed, %d chunks left): release called "
			        "%d times, want %d", i, (const void *)g->base, g->placed, g->chunks,
			        g->released, due ? 1 : 0);
		if (due)
			g->used = false;
	}
}

static void zm_check_pool(long extra_in_use)
{
	struct pp_pool_stats st;
	if (pp_pool_stats(&st) != 0) {
		zm_fail("pp_pool_stats failed");
		return;
	}
	if (st.pages_in_use != zm_in_use + extra_in_use)
		zm_fail("pages_in_use = %ld, the model's pipes hold %ld pool pages", st.pages_in_use,
		        zm_in_use + extra_in_use);
}

static void zm_check_all(void)
{
	for (int i = 0; i < ZM_MAXPIPES; i++)
		if (zm_p[i].live)
			zm_check_pipe(&zm_p[i]);
	zm_check_pool(0);
	zm_check_gifts();
}

/* Any gift records in use (not yet released)? */
static int zm_gifts_pending(void)
{
	int n = 0;
	for (int i = 0; i < ZM_MAXGIFTS; i++)
		n += zm_gifts[i].used;
	return n;
}
