/*
 * fuzz_ops.c - libFuzzer target: random sequences of pagepipe calls,
 * checked step by step against a model of a Linux pipe.
 *
 * The input is decoded into operations on up to FZ_MAX_PIPES pagepipes in
 * one thread: pp_pipe with random flags (and an invalid one now and then),
 * pp_write/pp_writev/pp_read/pp_readv of decoded sizes (0 .. 300000 bytes,
 * 1-7 iovec segments, empty ones included), pp_setfl toggling PP_NONBLOCK,
 * pp_dup and pp_close of handles, pp_setsize/pp_getsize, pp_setmaxsize,
 * pp_fd, the pool calls (setcache, trim, setlimit), and calls that must
 * fail (wrong end: EBADF; NULL buffer: EFAULT; bad iovcnt: EINVAL).
 * Nothing blocks: a call on a blocking end is made only when the model says
 * it returns at once; otherwise the end is switched to non-blocking for that
 * one call (or the call is skipped).  A closed handle is never used again.
 *
 * The model is exact.  It keeps, per pipe, the ring slots the kernel would
 * have (offset in page, length, stream position of the first byte, packet
 * mode), follows the kernel's write-coalescing and packet rules, and the
 * page pool's counters.  Stream byte p of a pipe is fz_pat(salt, p), so
 * every byte read is checked, and bytes of the read buffer beyond the
 * returned count (and between iovec segments) must be untouched.  After
 * every operation, for every open handle: pp_nread is the model's byte
 * count, pp_getsize its capacity, pp_getfl its flags, pp_events the poll
 * mask a kernel pipe would give (read end POLLIN|POLLRDNORM iff data,
 * POLLHUP iff no writer; write end POLLOUT|POLLWRNORM iff a slot is free,
 * POLLERR iff no reader), a pp_fd descriptor polls readable (timeout 0)
 * exactly while the end is ready; and pp_pool_stats says pages_in_use is the
 * number of occupied slots over all live pipes (one page per slot: no page
 * lost or leaked, never more than the pipes' capacities), pages_cached
 * follows the cache rule, cache_max and limit are what was set.  Return
 * values and errno of every call are predicted, SIGPIPE (kept blocked and
 * collected with sigtimedwait) must be raised exactly when a write fails with
 * EPIPE without PP_NOSIGPIPE, and a descriptor from pp_fd must be closed
 * with its end's last handle.  At the end every handle is closed, the pool
 * must hold no page in use, and its settings are restored.
 *
 * Any disagreement calls abort() after printing what was expected.
 * FUZZ_VERBOSE=1 in the environment prints every operation.
 *
 * Built two ways: by tools/fuzz.sh with clang -fsanitize=fuzzer, and
 * #included by test/fuzz_replay.c, which runs the corpus without libFuzzer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_report.h"
#include "pagepipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_MAX_PIPES 6
#define FZ_MAX_HANDLES 6
#define FZ_MAX_IO 300000u
#define FZ_MAX_SEGS 7
#define FZ_GAP 3                    /* canary bytes between iovec segments */
#define FZ_MAX_BUFFERED (4u << 20)  /* keep a pipe's contents below this */
#define FZ_PAGE 4096u
#define FZ_DEF_MAXSIZE 1048576L
#define FZ_DEF_CACHE LONG_MAX
#define FZ_CACHE_FLOOR 64L
#define FZ_POLLIN_EV (POLLIN | POLLRDNORM)
#define FZ_POLLOUT_EV (POLLOUT | POLLWRNORM)

enum { FZ_R = 0, FZ_W = 1 };

/* ---- the model --------------------------------------------------------- */

struct fz_slot {
	uint64_t pos; /* stream position of the slot's first byte */
	uint32_t off; /* offset of that byte in its page */
	uint32_t len;
};

struct fz_pipe {
	bool live;   /* some side still open */
	unsigned id; /* creation number within the input, for messages */
	int flags;   /* PP_PACKET | PP_NOSIGPIPE given to pp_pipe */
	bool nonblock[2];
	struct pp_end *h[2][FZ_MAX_HANDLES];
	int nh[2];   /* open handles per side; 0: side closed */
	int fd[2];   /* pp_fd descriptor per side, -1 until asked for */
	uint32_t max_pages;
	struct fz_slot *slots; /* a deque: slots[(first + i) & (cap - 1)] */
	uint32_t cap, first, count;
	uint64_t wpos;  /* stream position of the next byte written */
	uint64_t bytes; /* bytes in the pipe */
	uint64_t salt;
};

static struct fz_pipe fz_p[FZ_MAX_PIPES];
static struct {
	long in_use, cached, cache_max, limit;
	long maxsize;
} fz_pool;
static unsigned fz_npipes_made;
static struct fuzz_report fz_rep = { .target = "fuzz_ops" };

static unsigned char fz_wbuf[FZ_MAX_IO + FZ_MAX_SEGS * FZ_GAP + 64];
static unsigned char fz_rbuf[FZ_MAX_IO + FZ_MAX_SEGS * FZ_GAP + 64];
static unsigned char fz_expect[FZ_MAX_IO + 64];

#define FZ_CHECK(cond, ...) FUZZ_CHECK(&fz_rep, cond, __VA_ARGS__)
#define fz_name(...) fuzz_name(&fz_rep, __VA_ARGS__)
#define fz_check_ret(...) fuzz_check_ret(&fz_rep, __VA_ARGS__)

/* Name a read or write step: the call, its pipe, handle, byte count,
 * blocking mode and segments, and the model's state of the pipe. */
static void fz_name_io(const char *call, const struct fz_pipe *p, int j, size_t n, bool toggled,
                       bool nonblock, int nseg)
{
	char segs[24] = "";
	if (nseg)
		snprintf(segs, sizeof segs, " %d segs", nseg);
	fz_name("%s(pipe %u, handle %d, %zu bytes%s) [slots %u/%u, %llu bytes]%s", call, p->id, j, n,
	        toggled ? ", made non-blocking" : (nonblock ? ", non-blocking" : ""), p->count,
	        p->max_pages, (unsigned long long)p->bytes, segs);
}

static inline uint8_t fz_pat(uint64_t salt, uint64_t pos)
{
	uint64_t x = (pos ^ salt) * 0x9e3779b97f4a7c15ull;
	return (uint8_t)((x >> 56) ^ (x >> 29));
}

static inline uint8_t fz_canary(size_t i)
{
	return (uint8_t)(0xa5 ^ (i * 31) ^ (i >> 8));
}

static struct fz_slot *fz_slot_at(struct fz_pipe *p, uint32_t i)
{
	return &p->slots[(p->first + i) & (p->cap - 1)];
}

static void fz_slot_push(struct fz_pipe *p, struct fz_slot s)
{
	if (p->count == p->cap) {
		uint32_t ncap = p->cap ? p->cap * 2 : 16;
		struct fz_slot *ns = malloc(ncap * sizeof *ns);
		if (!ns)
			fuzz_fail(&fz_rep, "out of memory in the model");
		for (uint32_t i = 0; i < p->count; i++)
			ns[i] = *fz_slot_at(p, i);
		free(p->slots);
		p->slots = ns;
		p->cap = ncap;
		p->first = 0;
	}
	*fz_slot_at(p, p->count++) = s;
}

static void fz_slot_pop(struct fz_pipe *p)
{
	p->first = (p->first + 1) & (p->cap - 1);
	p->count--;
}

/* The capacity of the live pipes in pages (pool's pipe_pages), and how
 * many idle pages the pool keeps while in_use pages are in use: the room
 * left in the live pipes, at least 64, at most cache_max. */
static long fz_spare_room(void)
{
	long pages = 0;
	for (int i = 0; i < FZ_MAX_PIPES; i++)
		if (fz_p[i].live)
			pages += fz_p[i].max_pages;
	return pages;
}

static long fz_spare_max(long in_use)
{
	long room = fz_spare_room() - in_use;
	if (room < FZ_CACHE_FLOOR)
		room = FZ_CACHE_FLOOR;
	return room < fz_pool.cache_max ? room : fz_pool.cache_max;
}

/* Idle pages above the bound go back to the system. */
static void fz_pool_trim(void)
{
	long keep = fz_spare_max(fz_pool.in_use);
	if (fz_pool.cached > keep)
		fz_pool.cached = keep;
}

/* The pool's idle-page cache: each freed page is kept, then the cache is
 * cut to fz_spare_max; a page taken comes from the cache first. */
static void fz_pages_freed(long n)
{
	while (n-- > 0) {
		fz_pool.in_use--;
		fz_pool.cached++;
		fz_pool_trim();
	}
}

/* A page is taken from the cache; with the cache empty, a batch is mapped
 * (in_use/8 pages, 1 to 64, within the cache's room and the limit) and its
 * pages beyond the one taken become cached. */
static void fz_pages_taken(long n)
{
	while (n-- > 0) {
		if (fz_pool.cached > 0) {
			fz_pool.cached--;
		} else {
			long b = fz_pool.in_use / 8;
			long room = fz_spare_max(fz_pool.in_use + 1) + 1;
			b = b > 64 ? 64 : b;
			b = b > room ? room : b;
			if (fz_pool.limit && b > fz_pool.limit - fz_pool.in_use)
				b = fz_pool.limit - fz_pool.in_use;
			fz_pool.cached += (b < 1 ? 1 : b) - 1;
		}
		fz_pool.in_use++;
	}
}

/* ---- decoding the input (fuzz_report.h's fuzz_size too) -------------- */

/* A capacity request for pp_setsize / pp_setmaxsize. */
static size_t fz_capacity(struct fuzz_in *in)
{
	static const size_t table[] = {
		0, 1, 4095, 4096, 4097, 8191, 8192, 12288, 16384, 32768, 65535,
		65536, 65537, 131072, 262144, 1048575, 1048576, 1048577, 2097152,
		1ul << 31, (1ul << 31) + 1, (size_t)-1, 8193, 3 * 4096,
	};
	unsigned c = fuzz_byte(in);
	if (c < 200)
		return table[c % (sizeof table / sizeof table[0])];
	size_t v = (size_t)fuzz_byte(in) << 8;
	v |= fuzz_byte(in);
	return v << (c % 8);
}

/* Pages F_SETPIPE_SZ rounds a size to; 0 above 2^31. */
static uint32_t fz_round_pages(size_t size)
{
	if (size > (1ul << 31))
		return 0;
	uint32_t pages = 1;
	while ((size_t)pages * FZ_PAGE < size)
		pages <<= 1;
	return pages;
}

/* A live pipe chosen by the input, or NULL when there is none. */
static struct fz_pipe *fz_pick_pipe(struct fuzz_in *in)
{
	int live[FZ_MAX_PIPES], n = 0;
	for (int i = 0; i < FZ_MAX_PIPES; i++)
		if (fz_p[i].live)
			live[n++] = i;
	unsigned c = fuzz_byte(in);
	return n ? &fz_p[live[c % (unsigned)n]] : NULL;
}

static int fz_pick_handle(struct fuzz_in *in, struct fz_pipe *p, int side)
{
	unsigned c = fuzz_byte(in);
	return p->nh[side] ? (int)(c % (unsigned)p->nh[side]) : -1;
}

/* What an operation on one side works on: side c & 1 of pipe p (none if p
 * is NULL) and one of that side's open handles; -1 to skip the operation. */
static int fz_pick_side(struct fuzz_in *in, struct fz_pipe *p, unsigned c, int *side)
{
	*side = c & 1;
	return p ? fz_pick_handle(in, p, *side) : -1;
}

/* ---- checks after every step ------------------------------------------ */

static int fz_expect_fl(struct fz_pipe *p, int side)
{
	return p->flags | (p->nonblock[side] ? PP_NONBLOCK : 0);
}

static short fz_expect_events(struct fz_pipe *p, int side)
{
	if (side == FZ_R)
		return (short)((p->bytes ? FZ_POLLIN_EV : 0) | (p->nh[FZ_W] ? 0 : POLLHUP));
	return (short)((p->count < p->max_pages ? FZ_POLLOUT_EV : 0) | (p->nh[FZ_R] ? 0 : POLLERR));
}

static void fz_check_pipe(struct fz_pipe *p)
{
	uint64_t sum = 0;
	uint64_t pos = 0;
	for (uint32_t i = 0; i < p->count; i++) {
		struct fz_slot *s = fz_slot_at(p, i);
		FZ_CHECK(s->len > 0 && s->off + s->len <= FZ_PAGE && s->pos >= pos,
		         "model broken: pipe %u slot %u off %u len %u", p->id, i, s->off, s->len);
		pos = s->pos + s->len;
		sum += s->len;
	}
	FZ_CHECK(sum == p->bytes, "model broken: pipe %u bytes", p->id);
	FZ_CHECK(p->count <= p->max_pages, "model broken: pipe %u %u slots > %u pages", p->id,
	         p->count, p->max_pages);

	for (int side = 0; side < 2; side++) {
		for (int j = 0; j < p->nh[side]; j++) {
			struct pp_end *e = p->h[side][j];
			int nr = pp_nread(e);
			FZ_CHECK(nr >= 0 && (uint64_t)nr == p->bytes,
			         "pipe %u side %d handle %d: pp_nread = %d, model has %llu bytes", p->id,
			         side, j, nr, (unsigned long long)p->bytes);
			long sz = pp_getsize(e);
			FZ_CHECK(sz == (long)p->max_pages * (long)FZ_PAGE,
			         "pipe %u side %d: pp_getsize = %ld, want %ld", p->id, side, sz,
			         (long)p->max_pages * (long)FZ_PAGE);
			int fl = pp_getfl(e);
			FZ_CHECK(fl == fz_expect_fl(p, side), "pipe %u side %d: pp_getfl = %#x, want %#x",
			         p->id, side, fl, fz_expect_fl(p, side));
			short ev = pp_events(e), want = fz_expect_events(p, side);
			FZ_CHECK(ev == want,
			         "pipe %u side %d: pp_events = %#x, want %#x (bytes %llu, slots %u/%u, "
			         "readers %d, writers %d)",
			         p->id, side, ev, want, (unsigned long long)p->bytes, p->count,
			         p->max_pages, p->nh[FZ_R], p->nh[FZ_W]);
		}
		if (p->nh[side] && p->fd[side] >= 0) {
			struct pollfd pfd = { .fd = p->fd[side], .events = POLLIN };
			int n;
			while ((n = poll(&pfd, 1, 0)) == -1 && errno == EINTR)
				; /* a handler ran (libFuzzer's timer), not a failure */
			bool ready = fz_expect_events(p, side) != 0;
			FZ_CHECK(n >= 0, "poll on pp_fd: %s", strerror(errno));
			FZ_CHECK((n == 1 && (pfd.revents & POLLIN)) == ready,
			         "pipe %u side %d: pp_fd %d polls %s, end is %s (events %#x)", p->id, side,
			         p->fd[side], n == 1 ? "readable" : "not readable",
			         ready ? "ready" : "not ready", fz_expect_events(p, side));
		}
	}
}

static void fz_check_all(void)
{
	long slots = 0, cap = 0;
	for (int i = 0; i < FZ_MAX_PIPES; i++) {
		if (!fz_p[i].live)
			continue;
		fz_check_pipe(&fz_p[i]);
		slots += fz_p[i].count;
		cap += fz_p[i].max_pages;
	}
	FZ_CHECK(slots == fz_pool.in_use, "model broken: %ld slots, %ld pages", slots,
	         fz_pool.in_use);
	struct pp_pool_stats st;
	FZ_CHECK(pp_pool_stats(&st) == 0, "pp_pool_stats failed");
	FZ_CHECK(st.pages_in_use == fz_pool.in_use,
	         "pages_in_use = %ld, but the live pipes occupy %ld slots (one page each)",
	         st.pages_in_use, fz_pool.in_use);
	FZ_CHECK(st.pages_in_use <= cap, "pages_in_use = %ld exceeds the pipes' capacity %ld",
	         st.pages_in_use, cap);
	FZ_CHECK(st.pages_cached == fz_pool.cached, "pages_cached = %ld, want %ld",
	         st.pages_cached, fz_pool.cached);
	FZ_CHECK(st.pages_cached <= st.cache_max, "pages_cached %ld > cache_max %ld",
	         st.pages_cached, st.cache_max);
	FZ_CHECK(st.pipe_pages == fz_spare_room(), "pipe_pages = %ld, want %ld (the live pipes' sizes)",
	         st.pipe_pages, fz_spare_room());
	FZ_CHECK(st.pages_cached <= FZ_CACHE_FLOOR || st.pages_cached + st.pages_in_use <= st.pipe_pages,
	         "pages_cached %ld beyond the room in the pipes (%ld in use of %ld)",
	         st.pages_cached, st.pages_in_use, st.pipe_pages);
	FZ_CHECK(st.cache_max == fz_pool.cache_max, "cache_max = %ld, want %ld", st.cache_max,
	         fz_pool.cache_max);
	FZ_CHECK(st.limit == fz_pool.limit, "limit = %ld, want %ld", st.limit, fz_pool.limit);
	FZ_CHECK(pp_getmaxsize() == fz_pool.maxsize, "pp_getmaxsize = %ld, want %ld",
	         pp_getmaxsize(), fz_pool.maxsize);
	FZ_CHECK(!fuzz_take_sigpipe(), "a SIGPIPE is pending that no failed write explains");
}

/* ---- iovec layout --------------------------------------------------------- */

/* Split n bytes into nseg segments (sizes from the input, empty ones
 * allowed) laid out in buf with FZ_GAP canary bytes before each. */
static int fz_segments(struct fuzz_in *in, unsigned char *buf, size_t n, int nseg,
                       struct iovec *iov)
{
	size_t left = n, at = 0;
	for (int i = 0; i < nseg; i++) {
		size_t len = left;
		if (i < nseg - 1)
			len = left * fuzz_byte(in) / 255;
		at += FZ_GAP;
		iov[i].iov_base = buf + at;
		iov[i].iov_len = len;
		at += len;
		left -= len;
	}
	return nseg;
}

/* ---- operations ------------------------------------------------------------ */

static void fz_op_pipe(struct fuzz_in *in)
{
	unsigned c = fuzz_byte(in);
	int flags = (c & 1 ? PP_NONBLOCK : 0) | (c & 2 ? PP_PACKET : 0) | (c & 4 ? PP_NOSIGPIPE : 0);
	struct pp_end *ends[2] = { NULL, NULL };
	if ((c & 0xf8) == 0xf8) {
		int bad = flags | (64 << (c % 3)); /* 8 is PP_SHARED, 16 and 32 pp_open's */
		fz_name("pp_pipe(flags %#x): invalid", bad);
		errno = 0;
		FZ_CHECK(pp_pipe(ends, bad) == -1 && errno == EINVAL, "pp_pipe with an unknown flag: "
		         "errno %d, want EINVAL", errno);
		return;
	}
	struct fz_pipe *p = NULL;
	for (int i = 0; i < FZ_MAX_PIPES && !p; i++)
		if (!fz_p[i].live)
			p = &fz_p[i];
	if (!p)
		return;
	fz_name("pp_pipe(flags %#x) -> pipe %u", flags, fz_npipes_made);
	FZ_CHECK(pp_pipe(ends, flags) == 0, "pp_pipe failed: %s", strerror(errno));
	FZ_CHECK(ends[0] && ends[1] && ends[0] != ends[1], "pp_pipe gave bad handles");
	memset(p, 0, sizeof *p);
	p->live = true;
	p->id = fz_npipes_made++;
	p->flags = flags & (PP_PACKET | PP_NOSIGPIPE);
	p->nonblock[0] = p->nonblock[1] = flags & PP_NONBLOCK;
	p->h[FZ_R][0] = ends[0];
	p->h[FZ_W][0] = ends[1];
	p->nh[FZ_R] = p->nh[FZ_W] = 1;
	p->fd[0] = p->fd[1] = -1;
	p->max_pages = 16;
	p->salt = 0x51ed2701u * (uint64_t)(p->id + 1) << 20;
}

/*
 * What a write of n bytes does to the model: the first n % 4096 bytes merge
 * into the last buffer if it is mergeable (not packet mode) and they fit;
 * the rest goes into fresh pages of up to 4096 bytes, one slot each, until
 * the pipe is full (stop 1) or the pool's limit is reached (stop 2).
 * Returns the bytes written; with apply, changes the model.
 */
static size_t fz_sim_write(struct fz_pipe *p, size_t n, int *stop, bool apply)
{
	size_t done = 0, chars = n % FZ_PAGE;
	uint32_t used = p->count;
	long in_use = fz_pool.in_use, taken = 0;
	*stop = 0;
	if (chars && p->count && !(p->flags & PP_PACKET)) {
		struct fz_slot *last = fz_slot_at(p, p->count - 1);
		if (last->off + last->len + chars <= FZ_PAGE) {
			done = chars;
			if (apply)
				last->len += (uint32_t)chars;
		}
	}
	while (done < n) {
		if (used >= p->max_pages) {
			*stop = 1;
			break;
		}
		if (fz_pool.limit && in_use >= fz_pool.limit) {
			*stop = 2;
			break;
		}
		size_t c = n - done < FZ_PAGE ? n - done : FZ_PAGE;
		if (apply)
			fz_slot_push(p, (struct fz_slot){ .pos = p->wpos + done, .off = 0,
			                                  .len = (uint32_t)c });
		done += c;
		used++;
		in_use++;
		taken++;
	}
	if (apply) {
		p->wpos += done;
		p->bytes += done;
		fz_pages_taken(taken);
	}
	return done;
}

/* Make one call on a blocking end non-blocking, for a call that would wait. */
static void fz_set_nb(struct pp_end *e, bool nb)
{
	FZ_CHECK(pp_setfl(e, nb ? PP_NONBLOCK : 0) == 0, "pp_setfl failed: %s", strerror(errno));
}

static void fz_op_write(struct fuzz_in *in)
{
	struct fz_pipe *p = fz_pick_pipe(in);
	if (!p)
		return;
	int j = fz_pick_handle(in, p, FZ_W);
	size_t n = fuzz_size(in, FZ_MAX_IO);
	unsigned mode = fuzz_byte(in);
	int nseg = (int)((mode >> 1) & 7); /* 0: pp_write */
	struct iovec iov[FZ_MAX_SEGS];
	if (j < 0)
		return;
	struct pp_end *e = p->h[FZ_W][j];
	if (p->bytes + n > FZ_MAX_BUFFERED)
		n = 0;

	/* Predict. */
	ssize_t want;
	int want_err = 0, stop = 0;
	bool want_sig = false, toggled = false;
	if (n == 0) {
		want = 0;
	} else if (!p->nh[FZ_R]) {
		want = -1;
		want_err = EPIPE;
		want_sig = !(p->flags & PP_NOSIGPIPE);
	} else {
		size_t done = fz_sim_write(p, n, &stop, false);
		if (stop == 1 && !p->nonblock[FZ_W]) {
			/* A blocking write would wait for room. */
			if (!(mode & 1))
				return;
			toggled = true;
		}
		if (done) {
			want = (ssize_t)done;
		} else {
			want = -1;
			want_err = stop == 1 ? EAGAIN : ENOMEM;
		}
	}

	/* The bytes: the stream continues at wpos. */
	unsigned char *src;
	if (nseg) {
		fz_segments(in, fz_wbuf, n, nseg, iov);
		size_t k = 0;
		for (int i = 0; i < nseg; i++) {
			unsigned char *b = iov[i].iov_base;
			for (size_t x = 0; x < iov[i].iov_len; x++, k++)
				b[x] = fz_pat(p->salt, p->wpos + k);
		}
		src = NULL;
	} else {
		src = fz_wbuf;
		for (size_t x = 0; x < n; x++)
			src[x] = fz_pat(p->salt, p->wpos + x);
	}
	fz_name_io(nseg ? "pp_writev" : "pp_write", p, j, n, toggled, p->nonblock[FZ_W], nseg);

	if (toggled)
		fz_set_nb(e, true);
	errno = 0;
	ssize_t got = nseg ? pp_writev(e, iov, nseg) : pp_write(e, src, n);
	int err = errno;
	if (toggled)
		fz_set_nb(e, false);
	bool sig = fuzz_take_sigpipe();
	fz_check_ret(got, err, want, want_err, sig ? ", SIGPIPE" : "");
	FZ_CHECK(sig == want_sig, "SIGPIPE %s, want %s", sig ? "raised" : "not raised",
	         want_sig ? "raised" : "not raised");
	if (got > 0 && n <= PP_PIPE_BUF)
		FZ_CHECK((size_t)got == n, "a write of %zu <= PIPE_BUF bytes was split (%zd)", n, got);
	if (got > 0) {
		size_t done = fz_sim_write(p, n, &stop, true);
		FZ_CHECK(done == (size_t)got, "model broken: applied %zu of %zd", done, got);
	}
}

/*
 * What a read of n bytes takes: bytes across buffers until n are taken, or
 * one packet (the rest of which is discarded).  With apply, changes the
 * model and writes the expected bytes into fz_expect.
 */
static size_t fz_sim_read(struct fz_pipe *p, size_t n, bool apply)
{
	size_t got = 0;
	long freed = 0;
	for (uint32_t i = 0; i < p->count && got < n;) {
		struct fz_slot *s = fz_slot_at(p, i);
		size_t chars = s->len < n - got ? s->len : n - got;
		bool packet = p->flags & PP_PACKET;
		if (apply) {
			for (size_t k = 0; k < chars; k++)
				fz_expect[got + k] = fz_pat(p->salt, s->pos + k);
			uint32_t drop = packet ? s->len : (uint32_t)chars;
			p->bytes -= drop;
			s->pos += drop;
			s->off += drop;
			s->len -= drop;
			if (!s->len) {
				fz_slot_pop(p);
				freed++;
			}
		} else {
			i++;
		}
		got += chars;
		if (packet)
			break;
	}
	if (apply)
		fz_pages_freed(freed);
	return got;
}

static void fz_op_read(struct fuzz_in *in)
{
	struct fz_pipe *p = fz_pick_pipe(in);
	if (!p)
		return;
	int j = fz_pick_handle(in, p, FZ_R);
	size_t n = fuzz_size(in, FZ_MAX_IO);
	unsigned mode = fuzz_byte(in);
	int nseg = (int)((mode >> 1) & 7);
	struct iovec iov[FZ_MAX_SEGS];
	if (j < 0)
		return;
	struct pp_end *e = p->h[FZ_R][j];

	ssize_t want;
	int want_err = 0;
	bool toggled = false;
	if (n == 0) {
		want = 0;
	} else if (!p->bytes) {
		if (!p->nh[FZ_W]) {
			want = 0; /* end of file */
		} else {
			if (!p->nonblock[FZ_R]) {
				if (!(mode & 1))
					return;
				toggled = true;
			}
			want = -1;
			want_err = EAGAIN;
		}
	} else {
		want = (ssize_t)fz_sim_read(p, n, false);
	}

	/* The buffer: canaries everywhere, segments (or one span) inside. */
	size_t span = n + (size_t)(nseg ? nseg : 1) * FZ_GAP + 8;
	for (size_t x = 0; x < span; x++)
		fz_rbuf[x] = fz_canary(x);
	if (nseg) {
		fz_segments(in, fz_rbuf, n, nseg, iov);
	} else {
		iov[0].iov_base = fz_rbuf + FZ_GAP;
		iov[0].iov_len = n;
	}
	fz_name_io(nseg ? "pp_readv" : "pp_read", p, j, n, toggled, p->nonblock[FZ_R], nseg);

	if (toggled)
		fz_set_nb(e, true);
	errno = 0;
	ssize_t got = nseg ? pp_readv(e, iov, nseg) : pp_read(e, iov[0].iov_base, n);
	int err = errno;
	if (toggled)
		fz_set_nb(e, false);
	fz_check_ret(got, err, want, want_err, "");
	if (got > 0) {
		size_t applied = fz_sim_read(p, n, true);
		FZ_CHECK(applied == (size_t)got, "model broken: applied %zu of %zd", applied, got);
	}

	/* Every byte: the expected stream up to got, canaries elsewhere. */
	size_t logical = 0, cursor = 0;
	int nv = nseg ? nseg : 1;
	for (int i = 0; i < nv; i++) {
		size_t base = (size_t)((unsigned char *)iov[i].iov_base - fz_rbuf);
		for (; cursor < base; cursor++)
			FZ_CHECK(fz_rbuf[cursor] == fz_canary(cursor),
			         "byte %zu of the buffer, outside every segment, was written", cursor);
		for (size_t x = 0; x < iov[i].iov_len; x++, logical++, cursor++) {
			unsigned char b = fz_rbuf[cursor];
			if (got > 0 && logical < (size_t)got)
				FZ_CHECK(b == fz_expect[logical],
				         "byte %zu read is %#x, the stream has %#x there", logical, b,
				         fz_expect[logical]);
			else
				FZ_CHECK(b == fz_canary(cursor),
				         "byte %zu of the read buffer, beyond the %zd returned, was written",
				         logical, got);
		}
	}
	for (; cursor < span; cursor++)
		FZ_CHECK(fz_rbuf[cursor] == fz_canary(cursor),
		         "byte %zu of the buffer, past the last segment, was written", cursor);
}

static void fz_op_setfl(struct fuzz_in *in)
{
	struct fz_pipe *p = fz_pick_pipe(in);
	unsigned c = fuzz_byte(in);
	int side;
	int j = fz_pick_side(in, p, c, &side);
	if (j < 0)
		return;
	/* Random bits: only PP_NONBLOCK may change. */
	int fl = (int)(fuzz_byte(in) | (c & 0x80 ? 0x100 : 0));
	fz_name("pp_setfl(pipe %u side %d handle %d, %#x)", p->id, side, j, fl);
	FZ_CHECK(pp_setfl(p->h[side][j], fl) == 0, "pp_setfl failed: %s", strerror(errno));
	p->nonblock[side] = fl & PP_NONBLOCK;
}

static void fz_op_dup(struct fuzz_in *in)
{
	struct fz_pipe *p = fz_pick_pipe(in);
	unsigned c = fuzz_byte(in);
	int side;
	int j = fz_pick_side(in, p, c, &side);
	if (j < 0 || p->nh[side] >= FZ_MAX_HANDLES)
		return;
	fz_name("pp_dup(pipe %u side %d handle %d)", p->id, side, j);
	struct pp_end *e = pp_dup(p->h[side][j]);
	FZ_CHECK(e != NULL, "pp_dup failed: %s", strerror(errno));
	for (int s = 0; s < 2; s++)
		for (int k = 0; k < p->nh[s]; k++)
			FZ_CHECK(p->h[s][k] != e, "pp_dup returned a live handle");
	p->h[side][p->nh[side]++] = e;
	if (p->fd[side] >= 0)
		FZ_CHECK(pp_fd(e) == p->fd[side], "a dup handle has another pp_fd descriptor");
}

static void fz_close_handle(struct fz_pipe *p, int side, int j)
{
	fz_name("pp_close(pipe %u side %d handle %d of %d)", p->id, side, j,
	         p->nh[side]);
	FZ_CHECK(pp_close(p->h[side][j]) == 0, "pp_close failed: %s", strerror(errno));
	p->h[side][j] = p->h[side][--p->nh[side]];
	if (p->nh[side])
		return;
	/* The side is closed: its descriptor must be gone. */
	if (p->fd[side] >= 0) {
		errno = 0;
		FZ_CHECK(fcntl(p->fd[side], F_GETFD) == -1 && errno == EBADF,
		         "pp_fd descriptor %d still open after the side's last close", p->fd[side]);
		p->fd[side] = -1;
	}
	if (p->nh[1 - side])
		return;
	/* Both sides closed: the pipe and its data are gone. */
	fz_pages_freed(p->count);
	free(p->slots);
	memset(p, 0, sizeof *p);
	fz_pool_trim(); /* its room is gone too */
}

static void fz_op_close(struct fuzz_in *in)
{
	struct fz_pipe *p = fz_pick_pipe(in);
	unsigned c = fuzz_byte(in);
	int side;
	int j = fz_pick_side(in, p, c, &side);
	if (j < 0)
		return;
	fz_close_handle(p, side, j);
}

static void fz_op_setsize(struct fuzz_in *in)
{
	struct fz_pipe *p = fz_pick_pipe(in);
	unsigned c = fuzz_byte(in);
	size_t size = fz_capacity(in);
	int side;
	int j = fz_pick_side(in, p, c, &side);
	if (j < 0)
		return;
	long want;
	int want_err = 0;
	uint32_t pages = fz_round_pages(size);
	if (!pages) {
		want_err = EINVAL;
	} else if (pages > p->max_pages && (long)pages * (long)FZ_PAGE > fz_pool.maxsize) {
		want_err = EPERM;
	} else if (pages < p->count) {
		want_err = EBUSY;
	}
	want = want_err ? -1 : (long)pages * (long)FZ_PAGE;
	fz_name("pp_setsize(pipe %u side %d, %zu) [slots %u/%u, max %ld]",
	         p->id, side, size, p->count, p->max_pages, fz_pool.maxsize);
	errno = 0;
	long got = pp_setsize(p->h[side][j], size);
	int err = errno;
	fz_check_ret(got, err, want, want_err, "");
	if (got > 0) {
		p->max_pages = pages;
		fz_pool_trim(); /* a smaller pipe leaves less room */
	}
}

static void fz_op_fd(struct fuzz_in *in)
{
	struct fz_pipe *p = fz_pick_pipe(in);
	unsigned c = fuzz_byte(in);
	int side;
	int j = fz_pick_side(in, p, c, &side);
	if (j < 0)
		return;
	fz_name("pp_fd(pipe %u side %d handle %d)", p->id, side, j);
	int fd = pp_fd(p->h[side][j]);
	FZ_CHECK(fd >= 0, "pp_fd failed: %s", strerror(errno));
	if (p->fd[side] >= 0)
		FZ_CHECK(fd == p->fd[side], "pp_fd gave %d, earlier %d", fd, p->fd[side]);
	int other = p->fd[1 - side];
	FZ_CHECK(fd != other, "both sides got descriptor %d", fd);
	int fdfl = fcntl(fd, F_GETFD);
	FZ_CHECK(fdfl >= 0 && (fdfl & FD_CLOEXEC), "pp_fd descriptor is not close-on-exec");
	p->fd[side] = fd;
}

/* pp_pool_setcache or pp_pool_setlimit: the old bound back and the new
 * one kept, or EINVAL for a negative one; 1 if the bound changed. */
static int fz_set_bound(const char *call, long (*set)(long), long pages, long *bound)
{
	fz_name("%s(%ld)", call, pages);
	long got = set(pages);
	if (pages < 0) {
		FZ_CHECK(got == -1 && errno == EINVAL, "returned %ld, want EINVAL", got);
		return 0;
	}
	FZ_CHECK(got == *bound, "returned %ld, want the old bound %ld", got, *bound);
	*bound = pages;
	return 1;
}

static void fz_op_pool(struct fuzz_in *in)
{
	unsigned c = fuzz_byte(in), v = fuzz_byte(in);
	long got, want;
	errno = 0;
	switch (c % 5) {
	case 0: /* cache bound; 255 is the invalid negative one */
		if (fz_set_bound("pp_pool_setcache", pp_pool_setcache, v == 255 ? -1 : (long)(v % 130),
		                 &fz_pool.cache_max))
			fz_pool_trim();
		break;
	case 1:
		fz_name("pp_pool_trim()");
		got = pp_pool_trim();
		FZ_CHECK(got == fz_pool.cached, "returned %ld, want %ld cached pages", got,
		         fz_pool.cached);
		fz_pool.cached = 0;
		break;
	case 2: /* limit: 0 none, small ones to hit ENOMEM, 255 invalid */
		fz_set_bound("pp_pool_setlimit", pp_pool_setlimit, v == 255 ? -1 : (long)(v % 80),
		             &fz_pool.limit);
		break;
	case 3: {
		struct fuzz_in sub = { in->p, in->n };
		size_t size = fz_capacity(&sub);
		in->p = sub.p;
		in->n = sub.n;
		uint32_t pages = size ? fz_round_pages(size) : 0;
		want = pages ? (long)pages * (long)FZ_PAGE : -1;
		fz_name("pp_setmaxsize(%zu)", size);
		got = pp_setmaxsize(size);
		FZ_CHECK(got == want && (want >= 0 || errno == EINVAL), "returned %ld (errno %d), want %ld",
		         got, errno, want);
		if (got > 0)
			fz_pool.maxsize = got;
		break;
	}
	default: {
		struct pp_pool_stats st;
		fz_name("pp_pool_stats(NULL)");
		FZ_CHECK(pp_pool_stats(NULL) == -1 && errno == EFAULT, "want EFAULT");
		FZ_CHECK(pp_pool_stats(&st) == 0, "pp_pool_stats failed");
		break;
	}
	}
}

/* Calls that must fail and change nothing. */
static void fz_op_bad(struct fuzz_in *in)
{
	struct fz_pipe *p = fz_pick_pipe(in);
	unsigned c = fuzz_byte(in);
	int side;
	int j = fz_pick_side(in, p, c, &side);
	if (j < 0)
		return;
	struct pp_end *e = p->h[side][j];
	char one = 'x';
	struct iovec v = { .iov_base = &one, .iov_len = 1 };
	ssize_t r;
	int want = 0;
	errno = 0;
	switch ((c >> 1) % 4) {
	case 0: /* the wrong end */
		fz_name("%s on the %s end of pipe %u", side == FZ_R ? "pp_write" : "pp_read",
		        side == FZ_R ? "read" : "write", p->id);
		r = side == FZ_R ? pp_write(e, &one, 1) : pp_read(e, &one, 1);
		want = EBADF;
		break;
	case 1: { /* NULL buffer with a count: EFAULT before anything else */
		void *volatile nul = NULL;
		fz_name("%s(NULL, 5) on pipe %u", side == FZ_R ? "pp_read" : "pp_write", p->id);
		r = side == FZ_R ? pp_read(e, nul, 5) : pp_write(e, nul, 5);
		want = EFAULT;
		break;
	}
	case 2: { /* iovcnt out of range */
		volatile int cnt = c & 0x10 ? -1 : IOV_MAX + 1;
		fz_name("%s(iovcnt %d) on pipe %u", side == FZ_R ? "pp_readv" : "pp_writev", cnt,
		        p->id);
		r = side == FZ_R ? pp_readv(e, &v, cnt) : pp_writev(e, &v, cnt);
		want = EINVAL;
		break;
	}
	default: { /* a segment too long to add up */
		struct iovec two[2] = { { &one, 1 }, { &one, (size_t)SSIZE_MAX } };
		fz_name("%s(lengths past SSIZE_MAX) on pipe %u",
		        side == FZ_R ? "pp_readv" : "pp_writev", p->id);
		r = side == FZ_R ? pp_readv(e, two, 2) : pp_writev(e, two, 2);
		want = EINVAL;
		break;
	}
	}
	FZ_CHECK(r == -1 && errno == want, "returned %zd errno %d (%s), want errno %d (%s)", r,
	         errno, strerror(errno), want, strerror(want));
}

/* ---- the target -------------------------------------------------------- */

static void fz_setup_once(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	fuzz_setup(&fz_rep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct pp_pool_stats st;

	fz_setup_once();
	fz_rep.step = 0;
	fz_npipes_made = 0;
	snprintf(fz_rep.op, sizeof fz_rep.op, "start");
	memset(fz_p, 0, sizeof fz_p);

	/* Each input starts from a clean pool with default settings. */
	FZ_CHECK(pp_pool_stats(&st) == 0, "pp_pool_stats failed");
	FZ_CHECK(st.pages_in_use == 0, "%ld pages in use before any pipe exists", st.pages_in_use);
	FZ_CHECK(st.cache_max == FZ_DEF_CACHE && st.limit == 0 && pp_getmaxsize() == FZ_DEF_MAXSIZE,
	         "pool settings were not restored: cache %ld limit %ld maxsize %ld", st.cache_max,
	         st.limit, pp_getmaxsize());
	fz_pool.in_use = 0;
	fz_pool.cached = st.pages_cached;
	fz_pool.cache_max = st.cache_max;
	fz_pool.limit = 0;
	fz_pool.maxsize = FZ_DEF_MAXSIZE;

	/* One pipe to start with, so that most inputs do something. */
	struct fuzz_in first = { (const uint8_t *)"\0", 1 };
	fz_op_pipe(&first);
	fz_check_all();

	while (in.n) {
		unsigned op = fuzz_byte(&in);
		fz_rep.step++;
		snprintf(fz_rep.op, sizeof fz_rep.op, "op %u", op);
		switch (op % 16) {
		case 0: fz_op_pipe(&in); break;
		case 1: case 2: case 3: fz_op_write(&in); break;
		case 4: case 5: case 6: fz_op_read(&in); break;
		case 7: fz_op_setfl(&in); break;
		case 8: fz_op_dup(&in); break;
		case 9: fz_op_close(&in); break;
		case 10: case 11: fz_op_setsize(&in); break;
		case 12: fz_op_fd(&in); break;
		case 13: fz_op_pool(&in); break;
		case 14: fz_op_bad(&in); break;
		default: /* a no-op: only the checks below */ break;
		}
		fz_check_all();
	}

	/* Tear down: close everything, in an order the input chose. */
	fz_rep.step++;
	for (int i = 0; i < FZ_MAX_PIPES; i++) {
		struct fz_pipe *p = &fz_p[i];
		while (p->live) {
			int side = (int)((p->id + fz_rep.step) & 1);
			if (!p->nh[side])
				side = 1 - side;
			fz_close_handle(p, side, p->nh[side] - 1);
			fz_check_all();
		}
	}
	snprintf(fz_rep.op, sizeof fz_rep.op, "teardown");
	FZ_CHECK(pp_pool_stats(&st) == 0 && st.pages_in_use == 0,
	         "%ld pages still in use after every pipe was closed", st.pages_in_use);
	FZ_CHECK(pp_pool_setcache(FZ_DEF_CACHE) >= 0 && pp_pool_setlimit(0) >= 0 &&
	         pp_setmaxsize(FZ_DEF_MAXSIZE) == FZ_DEF_MAXSIZE,
	         "restoring the pool settings failed");
	return 0;
}
