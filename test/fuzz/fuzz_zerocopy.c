/*
 * fuzz_zerocopy.c - libFuzzer target: the zero-copy calls between several
 * pagepipes and descriptors, checked step by step against the model of
 * test/fuzz/zc_model.c.
 *
 * The input is decoded into operations on up to ZF_PIPES pipes (two exist
 * before the first operation) and three descriptors: a source file (memfd,
 * read at its position or at an offset), a sink file (written likewise) and
 * a non-blocking kernel pipe (both ways; the target puts bytes into it or
 * takes them out between steps).  The source starts unsealed, so its bytes
 * are read into pool pages; an operation (1f, C%3 0) seals it with
 * F_SEAL_SHRINK, and from then on pp_splice_from_fd maps its pages into the
 * pipes instead (file buffers: no pool page, never merged into, the first
 * one starting inside its page, so a call takes up to that many bytes
 * fewer).  Other operations write to the source (pwrite, also past its end)
 * or truncate it (ftruncate: EPERM when it would shrink a sealed file): a
 * mapped buffer shows the file as it is when it is read, a pool copy as it
 * was at the splice.  The operations: pp_pipe (random flags),
 * pp_write, pp_read, pp_splice, pp_tee, pp_fanout (1-4 outputs, duplicates
 * and the input's own pipe included now and then: EINVAL), pp_vmsplice
 * (1-4 segments of caller memory at any alignment, with a release callback),
 * pp_splice_from_fd, pp_splice_to_fd, pp_peek then pp_consume, pp_reserve
 * and pp_commit (the reservation stays open across any other operations,
 * the close of either end included: its pages and slots count, the bytes
 * the caller put in them must be what a commit publishes), pp_setfl,
 * pp_fd, pp_close of either side (so EPIPE, SIGPIPE and end of file happen),
 * pp_setsize, and calls that must fail (bad flags, wrong ends, bad counts,
 * NULL pointers, bad descriptors and offsets).  Nothing blocks: a call that
 * would wait gets PP_SPLICE_NONBLOCK (or, for pp_read/pp_write/pp_peek, its
 * end is made non-blocking for the call, or the call is skipped); and the
 * source file's operations above.
 *
 * After every step (zm_check_all and the descriptors): for every live pipe
 * pp_nread, pp_getsize, pp_events of each open end and pp_fd readiness, and
 * its whole contents through pp_peek: one segment per model buffer, same
 * lengths, same bytes, same page addresses for shared pages (tee'd and
 * fanned-out copies are the same memory, vmsplice'd chunks the caller's,
 * committed pages the very pages pp_reserve handed out);
 * pool pages_in_use equals the pool pages the model's buffers and
 * reservations name (bytes conserved, no page lost or leaked); every vmsplice release came exactly
 * once when its last chunk went, with the right length and the caller's
 * bytes intact; the sink file and the kernel pipe hold exactly what was
 * spliced to them, and the source file's position moved by what was taken,
 * its size and seals and (now and then) its bytes are the model's; once it
 * is sealed, the mappings of it (/proc/self/maps) add up to the model's
 * mapped file pages whenever those change: a run is unmapped exactly when
 * its last page leaves the last pipe; SIGPIPE (kept blocked, collected with
 * sigtimedwait) was raised exactly when EPIPE came without PP_NOSIGPIPE.
 * Every return value and errno is predicted.  At the end every pipe is
 * closed: no page in use, no release missing, no mapping of the source
 * left.
 *
 * A disagreement prints what was expected and calls abort().
 * FUZZ_VERBOSE=1 prints every step.  Built by tools/fuzz.sh (clang
 * -fsanitize=fuzzer) and #included by test/fuzz_replay.c, which replays
 * test/fuzz/corpus_zc/ in `make check` (there the entry point is renamed by
 * defining ZF_ENTRY).  test/fuzz/make_seeds.sh writes the seeds and
 * documents the input language.
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
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../memfd_maps.h"
#include "fuzz_report.h"
#include "pagepipe.h"
#include "zc_model.c"

#ifndef ZF_ENTRY
#define ZF_ENTRY LLVMFuzzerTestOneInput
#endif
int ZF_ENTRY(const uint8_t *data, size_t size);

#define ZF_PIPES 6
#define ZF_MAX_IO 300000u
#define ZF_PAT (1u << 20)               /* pattern bytes, then a copy of the start */
#define ZF_FR_SIZE (200000u)            /* the source file */
#define ZF_FR_AT 777u                   /* it holds zf_pat[ZF_FR_AT ..] */
#define ZF_FR_MAX (600000u)             /* the source file grows up to this */
#define ZF_FW_MAX (256u * 1024)         /* the sink file starts again past this */
#define ZF_KP 65536u                    /* the kernel pipe's capacity */
#define ZF_ARENA (1u << 20)             /* caller memory for pp_vmsplice */
#define ZF_MAX_BUFFERED (2u << 20)      /* keep a pipe's contents below this */
#define ZF_CANARY 7

static unsigned char zf_pat[ZF_PAT + ZF_MAX_IO];
static unsigned char zf_buf[ZF_MAX_IO + 64];
static unsigned char zf_exp[ZF_MAX_IO + 64];
static unsigned char zf_arena[ZF_ARENA];
static size_t zf_arena_used;
static uint32_t zf_cursor; /* where in zf_pat the next bytes written come from */

static struct {
	int fr, fw, kp[2];
	off_t fr_pos, fw_pos;
	size_t fw_size, kp_len;
	size_t fr_size;    /* the source file's size */
	bool fr_sealed;    /* F_SEAL_SHRINK: its pages are mapped */
	bool fr_changed;   /* written, truncated or sealed: made again next time */
	long fr_mapped;    /* the model's mapped file pages when last compared */
	unsigned char fr_data[ZF_FR_MAX + 4096]; /* what the source holds; zeros past fr_size */
	unsigned char fw_data[ZF_FW_MAX + ZF_MAX_IO + 4096];
	unsigned char kp_data[ZF_KP];
} zf;

static int zf_flags[ZF_PIPES];   /* PP_PACKET | PP_NOSIGPIPE of each pipe */
static bool zf_nb[ZF_PIPES][2];  /* PP_NONBLOCK of each end */
static struct fuzz_report zf_rep = { .target = "fuzz_zerocopy" };

/* The model's failures (zc_model.c) end the run too. */
static void zm_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fuzz_vfail(&zf_rep, fmt, ap);
}

#define ZF_CHECK(cond, ...) FUZZ_CHECK(&zf_rep, cond, __VA_ARGS__)
#define zf_name(...) fuzz_name(&zf_rep, __VA_ARGS__)
#define zf_check_ret(got, err, want, want_err) fuzz_check_ret(&zf_rep, got, err, want, want_err, "")

static int zf_index(const struct zm_pipe *p)
{
	return (int)(p - zm_p);
}

/* ---- decoding ----------------------------------------------------------- */


/* A length for the splice calls: a size; ff: "everything" (1 GiB), fe:
 * SIZE_MAX (clamped by the library as read(2) clamps). */
static size_t zf_len(struct fuzz_in *in)
{
	if (in->n && in->p[0] >= 0xfe)
		return fuzz_byte(in) == 0xff ? (size_t)1 << 30 : SIZE_MAX;
	return fuzz_size(in, ZF_MAX_IO);
}

/* A live pipe whose `side` is open, chosen by a byte; NULL if none. */
static struct zm_pipe *zf_pick(struct fuzz_in *in, int side)
{
	int c[ZF_PIPES], n = 0;
	unsigned b = fuzz_byte(in);
	for (int i = 0; i < ZF_PIPES; i++)
		if (zm_p[i].live && zm_p[i].end[side])
			c[n++] = i;
	return n ? &zm_p[c[b % (unsigned)n]] : NULL;
}

/* Any live pipe (even one with a side closed). */
static struct zm_pipe *zf_pick_any(struct fuzz_in *in)
{
	int c[ZF_PIPES], n = 0;
	unsigned b = fuzz_byte(in);
	for (int i = 0; i < ZF_PIPES; i++)
		if (zm_p[i].live)
			c[n++] = i;
	return n ? &zm_p[c[b % (unsigned)n]] : NULL;
}

/* ---- results ------------------------------------------------------- */

static void zf_check_sig(bool want)
{
	bool sig = fuzz_take_sigpipe();
	ZF_CHECK(sig == want, "SIGPIPE %s, want %s", sig ? "raised" : "not raised",
	         want ? "raised" : "not raised");
}

/* SIGPIPE is due for EPIPE from pipe p unless it has PP_NOSIGPIPE. */
static bool zf_sig_due(const struct zm_pipe *p)
{
	return !(zf_flags[zf_index(p)] & PP_NOSIGPIPE);
}

static void zf_set_nb(struct zm_pipe *p, int side, bool nb)
{
	ZF_CHECK(pp_setfl(p->end[side], nb ? PP_NONBLOCK : 0) == 0, "pp_setfl failed: %s",
	         strerror(errno));
}

/* ---- the descriptors ---------------------------------------------------------- */

/* The source file's mappings against the model's file runs: compared when
 * the model's count changed (a leak or a missing unmap shows then; an
 * early unmap would fault at the next check of the contents), or always. */
static void zf_maps_check(bool always)
{
	long pages = zm_file_pages();
	if (!zf.fr_sealed || (!always && pages == zf.fr_mapped))
		return;
	long got = memfd_mapped("zf-src", NULL);
	ZF_CHECK(got >= 0, "/proc/self/maps: %s", strerror(errno));
	ZF_CHECK(got == pages * 4096, "the source file has %ld bytes mapped, the model's buffers "
	         "name %ld file pages of %d calls", got, pages, zm_runs_live());
	zf.fr_mapped = pages;
}

/* The descriptors against their model; the files' contents only when
 * `contents` (they can be large). */
static void zf_fds_check(bool contents)
{
	static unsigned char buf[ZF_FR_MAX + ZF_FW_MAX + ZF_MAX_IO + 4096]; /* either file */
	struct stat st;
	ZF_CHECK(lseek(zf.fr, 0, SEEK_CUR) == zf.fr_pos, "source file position %lld, want %lld",
	         (long long)lseek(zf.fr, 0, SEEK_CUR), (long long)zf.fr_pos);
	ZF_CHECK(fstat(zf.fr, &st) == 0 && (size_t)st.st_size == zf.fr_size,
	         "source file size %lld, want %zu", (long long)st.st_size, zf.fr_size);
	int seals = fcntl(zf.fr, F_GET_SEALS);
	ZF_CHECK(seals >= 0 && !(seals & F_SEAL_SHRINK) == !zf.fr_sealed,
	         "source file seals %#x, want F_SEAL_SHRINK %s", seals, zf.fr_sealed ? "set" : "unset");
	if (contents && zf.fr_changed) {
		ssize_t n = pread(zf.fr, buf, zf.fr_size, 0);
		ZF_CHECK(n == (ssize_t)zf.fr_size && !memcmp(buf, zf.fr_data, zf.fr_size),
		         "the source file holds other bytes than were written to it");
	}
	ZF_CHECK(lseek(zf.fw, 0, SEEK_CUR) == zf.fw_pos, "sink file position %lld, want %lld",
	         (long long)lseek(zf.fw, 0, SEEK_CUR), (long long)zf.fw_pos);
	ZF_CHECK(fstat(zf.fw, &st) == 0 && (size_t)st.st_size == zf.fw_size,
	         "sink file size %lld, want %zu", (long long)st.st_size, zf.fw_size);
	if (!contents)
		goto kp;
	ssize_t n = pread(zf.fw, buf, zf.fw_size, 0);
	ZF_CHECK(n == (ssize_t)zf.fw_size, "pread of the sink file: %zd", n);
	if (memcmp(buf, zf.fw_data, zf.fw_size) != 0) {
		size_t k = 0;
		while (buf[k] == zf.fw_data[k])
			k++;
		zm_fail("the sink file differs at byte %zu: %#x, want %#x", k, buf[k], zf.fw_data[k]);
	}
kp:;
	int avail = -1;
	ZF_CHECK(ioctl(zf.kp[0], FIONREAD, &avail) == 0 && (size_t)avail == zf.kp_len,
	         "the kernel pipe holds %d bytes, want %zu", avail, zf.kp_len);
}

/* Take everything out of the kernel pipe: what the model says it holds. */
static void zf_kp_drain(void)
{
	static unsigned char buf[ZF_KP + 1];
	ssize_t n = read(zf.kp[0], buf, sizeof buf);
	if (n < 0 && errno == EAGAIN)
		n = 0;
	ZF_CHECK(n == (ssize_t)zf.kp_len, "the kernel pipe gave %zd bytes, want %zu", n, zf.kp_len);
	ZF_CHECK(memcmp(buf, zf.kp_data, zf.kp_len) == 0,
	         "the kernel pipe holds other bytes than were spliced to it");
	zf.kp_len = 0;
}

static void zf_fds_reset(void)
{
	if (zf.fr >= 0 && zf.fr_changed) { /* a seal cannot be undone: a new file */
		close(zf.fr);
		zf.fr = -1;
	}
	if (zf.fw < 0) {
		zf.fw = memfd_create("zf-sink", MFD_CLOEXEC);
		if (zf.fw < 0 || pipe2(zf.kp, O_NONBLOCK | O_CLOEXEC) != 0) {
			perror("fuzz_zerocopy: descriptors");
			abort();
		}
	}
	if (zf.fr < 0) {
		/* Sealing allowed, not sealed: read into pool pages, as a file
		 * made without MFD_ALLOW_SEALING would be. */
		zf.fr = memfd_create("zf-src", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (zf.fr < 0 || pwrite(zf.fr, zf_pat + ZF_FR_AT, ZF_FR_SIZE, 0) != (ssize_t)ZF_FR_SIZE) {
			perror("fuzz_zerocopy: the source file");
			abort();
		}
		memcpy(zf.fr_data, zf_pat + ZF_FR_AT, ZF_FR_SIZE);
		memset(zf.fr_data + ZF_FR_SIZE, 0, sizeof zf.fr_data - ZF_FR_SIZE);
	}
	zf.fr_size = ZF_FR_SIZE;
	zf.fr_sealed = zf.fr_changed = false;
	zf.fr_mapped = 0;
	ZF_CHECK(lseek(zf.fr, 0, SEEK_SET) == 0 && ftruncate(zf.fw, 0) == 0 &&
	         lseek(zf.fw, 0, SEEK_SET) == 0, "resetting the files failed");
	zf.fr_pos = zf.fw_pos = 0;
	zf.fw_size = 0;
	unsigned char junk[4096];
	while (read(zf.kp[0], junk, sizeof junk) > 0)
		;
	zf.kp_len = 0;
}

/* ---- operations ----------------------------------------------------------------- */

static void zf_op_pipe(struct fuzz_in *in)
{
	unsigned c = fuzz_byte(in);
	int flags = (c & 1 ? PP_NONBLOCK : 0) | (c & 2 ? PP_PACKET : 0) | (c & 4 ? PP_NOSIGPIPE : 0);
	int i = 0;
	while (i < ZF_PIPES && zm_p[i].live)
		i++;
	if (i == ZF_PIPES)
		return;
	struct pp_end *ends[2] = { NULL, NULL };
	zf_name("pp_pipe(flags %#x) -> pipe %u (slot %d)", flags, zm_pipes_made, i);
	ZF_CHECK(pp_pipe(ends, flags) == 0, "pp_pipe failed: %s", strerror(errno));
	zm_pipe_init(&zm_p[i], ends, flags & PP_PACKET);
	zf_flags[i] = flags & (PP_PACKET | PP_NOSIGPIPE);
	zf_nb[i][0] = zf_nb[i][1] = flags & PP_NONBLOCK;
}

static void zf_op_write(struct fuzz_in *in)
{
	struct zm_pipe *p = zf_pick(in, ZM_W);
	size_t n = fuzz_size(in, ZF_MAX_IO);
	unsigned mode = fuzz_byte(in);
	if (!p)
		return;
	int i = zf_index(p);
	if (p->bytes + n > ZF_MAX_BUFFERED)
		n = 0;
	size_t merged;
	int eerr = 0;
	bool wait, toggled = false;
	long want = zm_write_predict(p, n, &merged, &eerr, &wait);
	if (wait && !zf_nb[i][ZM_W]) {
		if (!(mode & 1))
			return; /* it would wait */
		toggled = true;
	}
	const unsigned char *src = zf_pat + zf_cursor;
	zf_cursor = (zf_cursor + (uint32_t)n + 1) % ZF_PAT;
	zf_name("pp_write(pipe %u, %zu bytes%s) [%u/%u slots, %llu bytes]", p->id, n,
	        toggled ? ", made non-blocking" : "", p->count, p->cap, (unsigned long long)p->bytes);
	if (toggled)
		zf_set_nb(p, ZM_W, true);
	errno = 0;
	ssize_t got = pp_write(p->end[ZM_W], src, n);
	int err = errno;
	if (toggled)
		zf_set_nb(p, ZM_W, false);
	zf_check_ret(got, err, want, eerr);
	zf_check_sig(want < 0 && eerr == EPIPE && zf_sig_due(p));
	if (got > 0)
		ZF_CHECK(zm_write_apply(p, src, n, merged, (size_t)got), "model: write not applied");
}

static void zf_op_read(struct fuzz_in *in)
{
	struct zm_pipe *p = zf_pick(in, ZM_R);
	size_t n = fuzz_size(in, ZF_MAX_IO);
	unsigned mode = fuzz_byte(in);
	if (!p)
		return;
	int i = zf_index(p), eerr = 0;
	bool wait, toggled = false;
	long want = zm_read_predict(p, n, &eerr, &wait);
	if (wait && !zf_nb[i][ZM_R]) {
		if (!(mode & 1))
			return;
		toggled = true;
	}
	memset(zf_buf, 0xa5, n + ZF_CANARY);
	zf_name("pp_read(pipe %u, %zu bytes%s) [%u slots, %llu bytes]", p->id, n,
	        toggled ? ", made non-blocking" : "", p->count, (unsigned long long)p->bytes);
	if (toggled)
		zf_set_nb(p, ZM_R, true);
	errno = 0;
	ssize_t got = pp_read(p->end[ZM_R], zf_buf, n);
	int err = errno;
	if (toggled)
		zf_set_nb(p, ZM_R, false);
	zf_check_ret(got, err, want, eerr);
	size_t k = got > 0 ? (size_t)got : 0;
	if (got > 0) {
		size_t a = zm_read_apply(p, n, zf_exp);
		ZF_CHECK(a == (size_t)got, "model: read applied %zu", a);
		for (size_t x = 0; x < k; x++)
			ZF_CHECK(zf_buf[x] == zf_exp[x], "byte %zu read is %#x, want %#x", x, zf_buf[x],
			         zf_exp[x]);
	}
	for (size_t x = k; x < n + ZF_CANARY; x++)
		ZF_CHECK(zf_buf[x] == 0xa5, "byte %zu of the buffer, beyond the %zu read, was written",
		         x, k);
}

static unsigned zf_splice_flags(unsigned c)
{
	return (c & 1 ? PP_SPLICE_MOVE : 0) | (c & 2 ? PP_SPLICE_NONBLOCK : 0) |
	       (c & 4 ? PP_SPLICE_MORE : 0) | (c & 8 ? PP_SPLICE_GIFT : 0);
}

/* pp_splice (kind 0), pp_tee (1), pp_fanout (2). */
static void zf_op_xfer(struct fuzz_in *in, int kind)
{
	static const char *const names[] = { "pp_splice", "pp_tee", "pp_fanout" };
	struct zm_pipe *src = zf_pick(in, ZM_R);
	int n = kind == 2 ? 1 + (int)(fuzz_byte(in) % 4) : 1;
	struct zm_pipe *outs[4];
	for (int k = 0; k < n; k++)
		outs[k] = zf_pick(in, ZM_W);
	size_t len = zf_len(in);
	unsigned fb = fuzz_byte(in);
	unsigned flags = zf_splice_flags(fb);
	if (!src)
		return;
	for (int k = 0; k < n; k++)
		if (!outs[k])
			return;
	bool bad_flag = (fb & 0xf0) == 0xf0;
	if (bad_flag)
		flags |= 0x10;
	/* Both ends of one pipe, or one pipe twice: EINVAL. */
	bool same = false;
	for (int k = 0; k < n; k++) {
		same |= outs[k] == src;
		for (int j = 0; j < k; j++)
			same |= outs[j] == outs[k];
	}
	long want;
	int eerr = 0, sigout = -1;
	bool wait = false;
	bool consume = kind != 1;
	if (!len && consume)
		want = 0;
	else if (bad_flag)
		want = -1, eerr = EINVAL;
	else if (!len)
		want = 0;
	else if (same)
		want = -1, eerr = EINVAL;
	else
		want = zm_xfer_predict(src, outs, n, len, consume, &eerr, &wait, &sigout);
	/* A call that would wait gets the flag, unless an end's PP_NONBLOCK
	 * already makes it EAGAIN (as O_NONBLOCK does for splice(2)). */
	bool added = false, end_nb = zf_nb[zf_index(src)][ZM_R];
	for (int k = 0; k < n; k++)
		end_nb |= zf_nb[zf_index(outs[k])][ZM_W];
	if (wait && !(flags & PP_SPLICE_NONBLOCK) && !end_nb) {
		flags |= PP_SPLICE_NONBLOCK;
		added = true;
	}
	zf_name("%s(pipe %u -> %u%s, %d outs, %zu bytes, flags %#x%s) [%u slots, %llu bytes]",
	        names[kind], src->id, outs[0]->id, n > 1 ? ",..." : "", n, len, flags,
	        added ? " (nonblock added)" : "", src->count, (unsigned long long)src->bytes);
	struct pp_end *oe[4];
	for (int k = 0; k < n; k++)
		oe[k] = outs[k]->end[ZM_W];
	errno = 0;
	ssize_t got = kind == 0 ? pp_splice(src->end[ZM_R], oe[0], len, flags)
	            : kind == 1 ? pp_tee(src->end[ZM_R], oe[0], len, flags)
	                        : pp_fanout(src->end[ZM_R], oe, n, len, flags);
	int err = errno;
	zf_check_ret(got, err, want, eerr);
	zf_check_sig(sigout >= 0 && zf_sig_due(outs[sigout]));
	if (got > 0) {
		size_t a = zm_xfer_apply(src, outs, n, len, consume);
		ZF_CHECK(a == (size_t)got, "model: transfer applied %zu", a);
	}
}

static void zf_op_vmsplice(struct fuzz_in *in)
{
	struct zm_pipe *p = zf_pick(in, ZM_W);
	int n = 1 + (int)(fuzz_byte(in) % 4);
	struct iovec iov[4];
	const unsigned char *expect[4];
	bool fits = true;
	for (int k = 0; k < n; k++) {
		unsigned c = fuzz_byte(in);
		size_t len = c < 0x40 ? c % 40 : c < 0x80 ? (size_t)(c & 3) * 4096 + 4096
		           : (size_t)(c & 0x7f) * 97 + (c & 1) * 4096;
		size_t at = zf_arena_used + fuzz_byte(in) % 64; /* any alignment */
		if (at + len > ZF_ARENA) { /* used up until the input ends */
			fits = false;
			len = 0;
			at = 0;
		} else {
			zf_arena_used = at + len;
		}
		const unsigned char *from = zf_pat + zf_cursor;
		zf_cursor = (zf_cursor + (uint32_t)len + 3) % ZF_PAT;
		memcpy(zf_arena + at, from, len);
		iov[k] = (struct iovec){ zf_arena + at, len };
		expect[k] = from;
	}
	unsigned fb = fuzz_byte(in);
	unsigned flags = zf_splice_flags(fb);
	if (!p || !fits)
		return;
	int eerr = 0;
	bool wait, sig;
	long want = zm_vmsplice_predict(p, iov, n, &eerr, &wait, &sig);
	bool added = false;
	if (wait && !(flags & PP_SPLICE_NONBLOCK) && !zf_nb[zf_index(p)][ZM_W]) {
		flags |= PP_SPLICE_NONBLOCK;
		added = true;
	}
	zf_name("pp_vmsplice(pipe %u, %d segs: %zu %zu %zu %zu, flags %#x%s) [%u/%u slots]", p->id,
	        n, iov[0].iov_len, n > 1 ? iov[1].iov_len : 0, n > 2 ? iov[2].iov_len : 0,
	        n > 3 ? iov[3].iov_len : 0, flags, added ? " (nonblock added)" : "", p->count, p->cap);
	errno = 0;
	ssize_t got = pp_vmsplice(p->end[ZM_W], iov, (unsigned long)n, flags, zm_release, NULL);
	int err = errno;
	zf_check_ret(got, err, want, eerr);
	zf_check_sig(sig && zf_sig_due(p));
	if (got > 0)
		ZF_CHECK(zm_vmsplice_apply(p, iov, n, expect, (size_t)got), "model: vmsplice not applied");
}

static void zf_op_from_fd(struct fuzz_in *in)
{
	struct zm_pipe *p = zf_pick(in, ZM_W);
	unsigned c = fuzz_byte(in);
	size_t len = zf_len(in);
	unsigned ob = fuzz_byte(in);
	size_t add = fuzz_size(in, ZF_MAX_IO);
	unsigned fb = fuzz_byte(in);
	if (!p)
		return;
	int src = (int)(c % 3); /* 0 file at its position, 1 file at an offset, 2 kernel pipe */
	bool bad_fd = (c & 0xf0) == 0xf0, kp_off = (c & 0xf0) == 0xe0, neg = (c & 0xf0) == 0xd0;
	unsigned flags = zf_splice_flags(fb);
	off_t off = (off_t)ob * 1031, off0;
	if (neg)
		off = -1 - (off_t)ob;
	off0 = off;
	if (src == 2 && add && !bad_fd) { /* bytes for the kernel pipe first */
		add = add < ZF_KP - zf.kp_len ? add : ZF_KP - zf.kp_len;
		memcpy(zf.kp_data + zf.kp_len, zf_pat + zf_cursor, add);
		zf_cursor = (zf_cursor + (uint32_t)add) % ZF_PAT;
		/* It takes what fits (a kernel pipe counts buffers, not bytes). */
		ssize_t w = write(zf.kp[1], zf.kp_data + zf.kp_len, add);
		ZF_CHECK(w >= 0 || errno == EAGAIN, "filling the kernel pipe: %s", strerror(errno));
		zf.kp_len += w > 0 ? (size_t)w : 0;
	}
	off_t pos = src == 0 ? zf.fr_pos : off;
	int fd = bad_fd ? -1 : src == 2 ? zf.kp[0] : zf.fr;
	bool use_off = src == 1 || (src == 2 && kp_off) || (src == 1 && neg);
	/* The sealed file's pages are mapped: its buffers start at pos's place
	 * in its page. */
	bool mapped = zf.fr_sealed && src != 2 && !bad_fd;
	long want;
	int eerr = 0;
	bool wait = false, sig = false;
	if (!len) {
		want = 0;
	} else if (len > (size_t)SSIZE_MAX) {
		want = -1, eerr = EINVAL;
	} else if (bad_fd) {
		want = -1, eerr = EBADF;
	} else if (use_off && src == 2) {
		want = -1, eerr = ESPIPE;
	} else if (use_off && off < 0) {
		want = -1, eerr = EINVAL;
	} else {
		want = mapped ? zm_fill_map_predict(p, len, (uint32_t)(pos % 4096), &eerr, &wait, &sig)
		              : zm_fill_predict(p, len, &eerr, &wait, &sig);
		size_t avail = src == 2 ? zf.kp_len
		             : pos < (off_t)zf.fr_size ? zf.fr_size - (size_t)pos : 0;
		if (want > 0 && !avail) {
			if (src == 2)
				want = -1, eerr = EAGAIN; /* empty, and we hold its writer */
			else
				want = 0;
		} else if (want > 0) {
			want = (long)zm_min((size_t)want, avail);
		}
	}
	bool added = false;
	if (wait && !(flags & PP_SPLICE_NONBLOCK) && !zf_nb[zf_index(p)][ZM_W]) {
		flags |= PP_SPLICE_NONBLOCK;
		added = true;
	}
	zf_name("pp_splice_from_fd(%s%s%s -> pipe %u, %zu bytes at %lld, flags %#x%s) [%u/%u slots]",
	        bad_fd ? "fd -1" : src == 2 ? "kernel pipe" : "file", use_off ? " with offset" : "",
	        mapped ? " (sealed: mapped)" : "", p->id, len, (long long)pos, flags,
	        added ? " (nonblock added)" : "", p->count, p->cap);
	errno = 0;
	ssize_t got = pp_splice_from_fd(fd, use_off ? &off : NULL, p->end[ZM_W], len, flags);
	int err = errno;
	zf_check_ret(got, err, want, eerr);
	zf_check_sig(sig && zf_sig_due(p));
	if (use_off)
		ZF_CHECK(off == off0 + (got > 0 ? got : 0), "the offset is %lld, want %lld",
		         (long long)off, (long long)(off0 + (got > 0 ? got : 0)));
	if (got > 0 && mapped) {
		ZF_CHECK(zm_fill_apply_file(p, zf.fr_data, (uint64_t)pos, (size_t)got),
		         "model: file pages not applied");
		if (src == 0)
			zf.fr_pos += got;
	} else if (got > 0) {
		const unsigned char *from = src == 2 ? zf.kp_data : zf.fr_data + pos;
		ZF_CHECK(zm_fill_apply(p, from, (size_t)got), "model: fill not applied");
		if (src == 0)
			zf.fr_pos += got;
		if (src == 2) {
			memmove(zf.kp_data, zf.kp_data + got, zf.kp_len - (size_t)got);
			zf.kp_len -= (size_t)got;
		}
	}
}

static void zf_op_to_fd(struct fuzz_in *in)
{
	struct zm_pipe *p = zf_pick(in, ZM_R);
	unsigned c = fuzz_byte(in);
	size_t len = zf_len(in);
	unsigned ob = fuzz_byte(in);
	unsigned fb = fuzz_byte(in);
	if (!p)
		return;
	int dst = (int)(c % 3); /* 0 file at its position, 1 file at an offset, 2 kernel pipe */
	bool bad_fd = (c & 0xf0) == 0xf0, kp_off = (c & 0xf0) == 0xe0;
	unsigned flags = zf_splice_flags(fb);
	if (zf.fw_size > ZF_FW_MAX) { /* start the sink file again */
		ZF_CHECK(ftruncate(zf.fw, 0) == 0 && lseek(zf.fw, 0, SEEK_SET) == 0, "truncate");
		zf.fw_size = 0;
		zf.fw_pos = 0;
	}
	if (dst == 2) {
		zf_kp_drain();
		len = zm_min(len, ZF_KP);
	}
	off_t off = (off_t)(ob * 1031u % (zf.fw_size + 4096)), off0 = off;
	off_t pos = dst == 0 ? zf.fw_pos : off;
	int fd = bad_fd ? -1 : dst == 2 ? zf.kp[1] : zf.fw;
	bool use_off = dst == 1 || (dst == 2 && kp_off);
	long want;
	int eerr = 0;
	bool wait = false;
	if (!len)
		want = 0;
	else if (len > (size_t)SSIZE_MAX)
		want = -1, eerr = EINVAL;
	else if (bad_fd)
		want = -1, eerr = EBADF;
	else if (use_off && dst == 2)
		want = -1, eerr = ESPIPE;
	else
		want = zm_drain_predict(p, len, &eerr, &wait);
	bool added = false;
	if (wait && !(flags & PP_SPLICE_NONBLOCK) && !zf_nb[zf_index(p)][ZM_R]) {
		flags |= PP_SPLICE_NONBLOCK;
		added = true;
	}
	zf_name("pp_splice_to_fd(pipe %u -> %s%s, %zu bytes at %lld, flags %#x%s) [%u slots, %llu bytes]",
	        p->id, bad_fd ? "fd -1" : dst == 2 ? "kernel pipe" : "file",
	        use_off ? " with offset" : "", len, (long long)pos, flags,
	        added ? " (nonblock added)" : "", p->count, (unsigned long long)p->bytes);
	errno = 0;
	ssize_t got = pp_splice_to_fd(p->end[ZM_R], fd, use_off ? &off : NULL, len, flags);
	int err = errno;
	zf_check_ret(got, err, want, eerr);
	if (use_off)
		ZF_CHECK(off == off0 + (got > 0 ? got : 0), "the offset is %lld, want %lld",
		         (long long)off, (long long)(off0 + (got > 0 ? got : 0)));
	if (got > 0) {
		zm_drop(p, (size_t)got, zf_exp);
		if (dst == 2) {
			memcpy(zf.kp_data, zf_exp, (size_t)got);
			zf.kp_len = (size_t)got;
		} else {
			if ((size_t)pos > zf.fw_size)
				memset(zf.fw_data + zf.fw_size, 0, (size_t)pos - zf.fw_size);
			memcpy(zf.fw_data + pos, zf_exp, (size_t)got);
			if ((size_t)pos + (size_t)got > zf.fw_size)
				zf.fw_size = (size_t)pos + (size_t)got;
			if (dst == 0)
				zf.fw_pos += got;
		}
	}
}

static void zf_op_peek(struct fuzz_in *in)
{
	struct zm_pipe *p = zf_pick(in, ZM_R);
	unsigned mb = fuzz_byte(in), cb = fuzz_byte(in), vb = fuzz_byte(in);
	if (!p)
		return;
	int i = zf_index(p);
	int max = mb == 0xff ? -1 : mb == 0xfe ? IOV_MAX + 1 : (int)(mb % 10);
	long want;
	int eerr = 0;
	bool toggled = false;
	if (max < 0 || max > IOV_MAX) {
		want = -1, eerr = EINVAL;
	} else if (!max) {
		want = 0;
	} else if (!p->count) {
		if (!p->end[ZM_W]) {
			want = 0;
		} else {
			if (!zf_nb[i][ZM_R]) {
				if (!(cb & 0x80))
					return;
				toggled = true;
			}
			want = -1, eerr = EAGAIN;
		}
	} else {
		want = (long)zm_min((size_t)max, p->count);
	}
	struct iovec iov[10];
	zf_name("pp_peek(pipe %u, max %d%s) [%u slots]", p->id, max,
	        toggled ? ", made non-blocking" : "", p->count);
	if (toggled)
		zf_set_nb(p, ZM_R, true);
	errno = 0;
	ssize_t got = pp_peek(p->end[ZM_R], iov, max);
	int err = errno;
	if (toggled)
		zf_set_nb(p, ZM_R, false);
	zf_check_ret(got, err, want, eerr);
	for (int k = 0; k < (int)got; k++) {
		struct zm_slot *s = zm_slot(p, (uint32_t)k);
		ZF_CHECK(iov[k].iov_len == s->len && !memcmp(iov[k].iov_base, zm_pages[s->pg].bytes + s->off,
		                                             s->len),
		         "segment %d: %zu bytes, want %u, or other bytes", k, iov[k].iov_len, s->len);
	}
	/* Then consume some: all, more than there is (EINVAL), the first
	 * segment, or a share. */
	size_t n;
	switch (cb % 4) {
	case 0: n = p->bytes; break;
	case 1: n = p->bytes + 1 + vb; break;
	case 2: n = got > 0 ? iov[0].iov_len : 0; break;
	default: n = (size_t)(p->bytes * vb / 255); break;
	}
	bool ok = n <= p->bytes;
	zf_name("pp_consume(pipe %u, %zu) [%llu bytes]", p->id, n, (unsigned long long)p->bytes);
	errno = 0;
	got = pp_consume(p->end[ZM_R], n);
	err = errno;
	zf_check_ret(got, err, ok ? (long)n : -1, EINVAL);
	if (ok)
		zm_drop(p, n, NULL);
}

static void zf_op_ctl(struct fuzz_in *in)
{
	unsigned c = fuzz_byte(in);
	int side = c & 1;
	struct zm_pipe *p = zf_pick(in, side);
	if (!p)
		return;
	int i = zf_index(p);
	if (c & 2) {
		zf_name("pp_fd(pipe %u side %d)", p->id, side);
		int fd = pp_fd(p->end[side]);
		ZF_CHECK(fd >= 0, "pp_fd failed: %s", strerror(errno));
		ZF_CHECK(p->efd[side] < 0 || fd == p->efd[side], "pp_fd gave %d, before %d", fd,
		         p->efd[side]);
		p->efd[side] = fd;
	} else {
		bool nb = c & 4;
		zf_name("pp_setfl(pipe %u side %d, %s)", p->id, side, nb ? "PP_NONBLOCK" : "0");
		zf_set_nb(p, side, nb);
		zf_nb[i][side] = nb;
	}
}

static void zf_close(struct zm_pipe *p, int side)
{
	int efd = p->efd[side];
	zf_name("pp_close(pipe %u side %d)", p->id, side);
	ZF_CHECK(pp_close(p->end[side]) == 0, "pp_close failed: %s", strerror(errno));
	if (efd >= 0) {
		errno = 0;
		ZF_CHECK(fcntl(efd, F_GETFD) == -1 && errno == EBADF,
		         "pp_fd descriptor %d still open after its side was closed", efd);
	}
	zm_close(p, side);
}

static void zf_op_close(struct fuzz_in *in)
{
	unsigned c = fuzz_byte(in);
	struct zm_pipe *p = zf_pick(in, c & 1);
	if (p)
		zf_close(p, c & 1);
}

static void zf_op_setsize(struct fuzz_in *in)
{
	static const size_t sizes[] = { 1, 4096, 8192, 12288, 16384, 32768, 65536, 131072,
	                                262144, 1048576, 2097152, 5000 };
	unsigned c = fuzz_byte(in);
	int side = c & 1;
	struct zm_pipe *p = zf_pick(in, side);
	if (!p)
		return;
	size_t size = sizes[(c >> 1) % (sizeof sizes / sizeof sizes[0])];
	int eerr = 0;
	long want = zm_setsize_predict(p, size, pp_getmaxsize(), &eerr);
	zf_name("pp_setsize(pipe %u side %d, %zu) [%u/%u slots]", p->id, side, size, p->count, p->cap);
	errno = 0;
	long got = pp_setsize(p->end[side], size);
	zf_check_ret(got, errno, want, eerr);
	if (got > 0)
		p->cap = (uint32_t)(got / 4096);
}

/*
 * The source file itself (op 1f): C%3 0 seal it with F_SEAL_SHRINK (its
 * pages are mapped from then on, until the input ends), 1 pwrite SIZE bytes
 * at OFF*1031 (past its end: it grows, a hole reads as zeros), 2 ftruncate
 * it to OFF*1031 bytes (shrinking a sealed file: EPERM).  A buffer mapped
 * from it shows what a write puts there; a pool copy does not.
 */
static void zf_op_source(struct fuzz_in *in)
{
	unsigned c = fuzz_byte(in) % 3, ob = fuzz_byte(in);
	size_t n = c == 1 ? fuzz_size(in, ZF_MAX_IO) : 0, at = (size_t)ob * 1031;
	long want = 0, got;
	int eerr = 0, err;
	errno = 0;
	if (c == 0) {
		zf_name("seal the source file (F_SEAL_SHRINK)");
		got = fcntl(zf.fr, F_ADD_SEALS, F_SEAL_SHRINK);
		err = errno;
		zf_check_ret(got, err, 0, 0);
		zf.fr_sealed = true;
	} else if (c == 1) {
		n = zm_min(n, ZF_FR_MAX - at);
		const unsigned char *src = zf_pat + zf_cursor;
		zf_cursor = (zf_cursor + (uint32_t)n + 5) % ZF_PAT;
		zf_name("pwrite(source file, %zu bytes at %zu) [size %zu%s]", n, at, zf.fr_size,
		        zf.fr_sealed ? ", sealed" : "");
		got = pwrite(zf.fr, src, n, (off_t)at);
		err = errno;
		zf_check_ret(got, err, (long)n, 0);
		memcpy(zf.fr_data + at, src, n);
		if (n && at + n > zf.fr_size)
			zf.fr_size = at + n;
	} else {
		if (zf.fr_sealed && at < zf.fr_size)
			want = -1, eerr = EPERM;
		zf_name("ftruncate(source file, %zu) [size %zu%s]", at, zf.fr_size,
		        zf.fr_sealed ? ", sealed" : "");
		got = ftruncate(zf.fr, (off_t)at);
		err = errno;
		zf_check_ret(got, err, want, eerr);
		if (!got && at < zf.fr_size)
			memset(zf.fr_data + at, 0, zf.fr_size - at);
		if (!got)
			zf.fr_size = at;
	}
	zf.fr_changed = true;
}

/* Calls that must fail and change nothing. */
static void zf_op_bad(struct fuzz_in *in)
{
	unsigned c = fuzz_byte(in);
	struct zm_pipe *p = zf_pick_any(in);
	if (!p)
		return;
	struct pp_end *rd = p->end[ZM_R], *wr = p->end[ZM_W];
	struct pp_end *any = rd ? rd : wr;
	ssize_t got = 0;
	int want = 0;
	char byte = 'x';
	struct iovec v = { NULL, 5 };
	errno = 0;
	switch (c % 8) {
	case 0: /* a write end where a read end belongs */
		if (!wr)
			return;
		zf_name("pp_splice/pp_peek/pp_consume/pp_splice_to_fd from a write end (pipe %u)", p->id);
		got = (c & 8) ? pp_peek(wr, &v, 1) : (c & 16) ? pp_consume(wr, 0)
		    : (c & 32) ? pp_splice_to_fd(wr, zf.fw, NULL, 10, 0) : pp_splice(wr, wr, 10, 0);
		want = EBADF;
		break;
	case 1: /* a read end where a write end belongs */
		if (!rd)
			return;
		zf_name("pp_vmsplice/pp_splice_from_fd into a read end (pipe %u)", p->id);
		v.iov_base = &byte;
		v.iov_len = 1;
		got = (c & 8) ? pp_vmsplice(rd, &v, 1, 0, NULL, NULL)
		              : pp_splice_from_fd(zf.fr, NULL, rd, 10, 0);
		want = EBADF;
		break;
	case 2: /* fan-out counts out of range, NULL outputs */
		if (!rd)
			return;
		zf_name("pp_fanout(pipe %u) with a bad count or NULL", p->id);
		if (c & 8) {
			got = pp_fanout(rd, NULL, 1, 10, 0);
			want = EFAULT;
		} else {
			struct pp_end *o[1] = { wr ? wr : rd };
			got = pp_fanout(rd, o, (c & 16) ? 0 : 65, 10, 0);
			want = EINVAL;
		}
		break;
	case 3: /* unknown flags */
		zf_name("an unknown splice flag (pipe %u)", p->id);
		got = (c & 8) ? pp_splice_from_fd(zf.fr, NULL, any, 10, 0x100)
		              : pp_splice_to_fd(any, zf.fw, NULL, 10, 0x100);
		want = EINVAL;
		break;
	case 4: /* a NULL segment */
		if (!wr)
			return;
		zf_name("pp_vmsplice(pipe %u) of a NULL segment", p->id);
		got = pp_vmsplice(wr, (c & 8) ? NULL : &v, 1, 0, NULL, NULL);
		want = EFAULT;
		break;
	case 5: /* peek arguments */
		if (!rd)
			return;
		zf_name("pp_peek(pipe %u) with NULL or a negative count", p->id);
		got = (c & 8) ? pp_peek(rd, NULL, 1) : pp_peek(rd, &v, -1);
		want = (c & 8) ? EFAULT : EINVAL;
		break;
	case 6: { /* too many segments, or a length past SSIZE_MAX */
		if (!wr)
			return;
		zf_name("pp_vmsplice(pipe %u) of too many segments / pp_splice_to_fd past SSIZE_MAX",
		        p->id);
		if ((c & 8) || !rd) {
			v.iov_base = &byte;
			v.iov_len = 1;
			got = pp_vmsplice(wr, &v, IOV_MAX + 1, 0, NULL, NULL);
		} else {
			got = pp_splice_to_fd(rd, zf.fw, NULL, (size_t)SSIZE_MAX + 1, 0);
		}
		want = EINVAL;
		break;
	}
	default: /* a descriptor that is not open */
		zf_name("pp_splice_from_fd / pp_splice_to_fd with a closed descriptor (pipe %u)", p->id);
		got = (c & 8) || !rd ? pp_splice_from_fd(999, NULL, any, 10, 0)
		                     : pp_splice_to_fd(rd, 999, NULL, 10, 0);
		want = EBADF;
		break;
	}
	int err = errno;
	if (zf_rep.verbose)
		fprintf(stderr, "    -> %zd %s\n", got, strerror(err));
	ZF_CHECK(got == -1 && err == want, "returned %zd errno %d (%s), want errno %d (%s)", got, err,
	         strerror(err), want, strerror(want));
}

/*
 * pp_reserve (ops 2f, 4f, .. ef): C PIPE SIZE M MODE.  C%8 7: on a read end
 * (EBADF), else the write end.  M: ff max -1, fe IOV_MAX+1 (EINVAL), fd a
 * NULL iov (EFAULT), fc IOV_MAX, else max M%72 (0: returns 0; past 64 the
 * 64-page bound rules).  MODE bit0: a blocking end that would wait is made
 * non-blocking for the call (else skipped).  The length is a LEN (a SIZE up
 * to ZF_MAX_IO, past the 64-page bound; 1 GiB; SIZE_MAX).  The pages handed out must be fresh
 * (page-aligned, no page the model's pipes name), as many as the model
 * says, each a page but the last; they are filled with pattern bytes at
 * once (their mirrors too), so a page given to anyone else before the
 * commit shows as other bytes in that pipe.  The reservation stays open
 * across the operations that follow until a commit or the close.
 */
static void zf_op_reserve(struct fuzz_in *in)
{
	static struct iovec iov[IOV_MAX + 1];
	unsigned c = fuzz_byte(in);
	int side = c % 8 == 7 ? ZM_R : ZM_W;
	struct zm_pipe *p = zf_pick(in, side);
	size_t len = zf_len(in);
	unsigned mb = fuzz_byte(in), mode = fuzz_byte(in);
	if (!p)
		return;
	int i = zf_index(p);
	int max = mb == 0xff ? -1 : mb == 0xfe ? IOV_MAX + 1 : mb == 0xfd ? 1
	        : mb == 0xfc ? IOV_MAX : (int)(mb % 72);
	bool null_iov = mb == 0xfd;
	long want;
	int eerr = 0;
	bool wait = false, sig = false, toggled = false;
	if (side == ZM_R)
		want = -1, eerr = EBADF;
	else if (max < 0 || max > IOV_MAX)
		want = -1, eerr = EINVAL;
	else if (null_iov)
		want = -1, eerr = EFAULT;
	else
		want = zm_reserve_predict(p, max, len, &eerr, &wait, &sig);
	if (wait && !zf_nb[i][ZM_W]) {
		if (!(mode & 1))
			return; /* it would wait */
		toggled = true;
	}
	zf_name("pp_reserve(pipe %u side %d, max %d%s, %zu bytes%s) [%u+%u/%u slots]", p->id, side,
	        max, null_iov ? ", iov NULL" : "", len, toggled ? ", made non-blocking" : "",
	        p->count, p->resv_n, p->cap);
	/* Segments past those handed out must stay as they were. */
	int seen = max > 0 && max <= IOV_MAX ? max : 0;
	for (int k = 0; k < seen; k++)
		iov[k] = (struct iovec){ (void *)(uintptr_t)0x5a5a, 0x5a5a };
	if (toggled)
		zf_set_nb(p, ZM_W, true);
	errno = 0;
	ssize_t got = pp_reserve(p->end[side], null_iov ? NULL : iov, max, len);
	int err = errno;
	if (toggled)
		zf_set_nb(p, ZM_W, false);
	/* want is pages; the segments they make depend on where they lie. */
	long pages = got > 0 && got <= seen ? resv_layout_pages(iov, got, len, p->packet) : -1;
	zf_check_ret(got > 0 ? pages : got, err, want, eerr);
	zf_check_sig(sig && zf_sig_due(p));
	for (int k = got > 0 ? (int)got : 0; k < seen; k++)
		ZF_CHECK(iov[k].iov_base == (void *)(uintptr_t)0x5a5a && iov[k].iov_len == 0x5a5a,
		         "segment %d of %d was written, %zd handed out", k, seen, got);
	if (got <= 0)
		return;
	for (int k = 0; k < (int)got; k++) {
		for (size_t in = 0; in < iov[k].iov_len; in += ZM_PG)
			ZF_CHECK(!zm_addr_in_use((unsigned char *)iov[k].iov_base + in),
			         "segment %d at %p: a page a pipe of the model still names", k,
			         iov[k].iov_base);
		for (int j = 0; j < k; j++)
			ZF_CHECK((char *)iov[j].iov_base + iov[j].iov_len <= (char *)iov[k].iov_base ||
			                 (char *)iov[k].iov_base + iov[k].iov_len <= (char *)iov[j].iov_base,
			         "segments %d and %d overlap", j, k);
	}
	/* The caller's bytes, in place. */
	const unsigned char *src = zf_pat + zf_cursor;
	size_t at = 0;
	for (int k = 0; k < (int)got; k++) {
		memcpy(iov[k].iov_base, src + at, iov[k].iov_len);
		at += iov[k].iov_len;
	}
	zf_cursor = (zf_cursor + (uint32_t)at + 11) % ZF_PAT;
	ZF_CHECK(zm_reserve_apply(p, iov, got, len, src), "model: reservation not applied");
}

/*
 * pp_commit (ops 3f, 5f, .. ff): C PIPE V.  C%8 7: on a read end (EBADF),
 * else the write end, committing (C>>3)%5: 0 nothing (gives it all back),
 * 1 all reserved, 2 V/255 of it, 3 1+V bytes more than reserved (EINVAL,
 * the reservation stays), 4 V%17 whole pages (maybe more than reserved).
 * Without a reservation: 0 for n 0, else EINVAL.
 */
static void zf_op_commit(struct fuzz_in *in)
{
	unsigned c = fuzz_byte(in);
	int side = c % 8 == 7 ? ZM_R : ZM_W;
	struct zm_pipe *p = zf_pick(in, side);
	unsigned v = fuzz_byte(in);
	if (!p)
		return;
	size_t have = p->resv_bytes, n;
	switch ((c >> 3) % 5) {
	case 0: n = 0; break;
	case 1: n = have; break;
	case 2: n = have * v / 255; break;
	case 3: n = have + 1 + v; break;
	default: n = (size_t)(v % 17) * ZM_PG; break;
	}
	long want;
	int eerr = 0;
	bool sig = false;
	if (side == ZM_R)
		want = -1, eerr = EBADF;
	else
		want = zm_commit_predict(p, n, &eerr, &sig);
	zf_name("pp_commit(pipe %u side %d, %zu of %zu reserved) [%u+%u/%u slots, %llu bytes]", p->id,
	        side, n, have, p->count, p->resv_n, p->cap, (unsigned long long)p->bytes);
	errno = 0;
	ssize_t got = pp_commit(p->end[side], n);
	int err = errno;
	zf_check_ret(got, err, want, eerr);
	zf_check_sig(sig && zf_sig_due(p));
	if (side == ZM_W)
		zm_commit_apply(p, n, got, err);
}

/* ---- the target ------------------------------------------------------------- */

static void zf_check(bool contents)
{
	zm_check_all();
	zf_maps_check(false);
	zf_fds_check(contents);
	ZF_CHECK(!fuzz_take_sigpipe(), "a SIGPIPE is pending that no EPIPE explains");
}

static void zf_setup_once(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	fuzz_setup(&zf_rep);
	for (size_t i = 0; i < sizeof zf_pat; i++) {
		uint64_t x = (uint64_t)(i % ZF_PAT) * 0x9e3779b97f4a7c15ull;
		zf_pat[i] = (unsigned char)((x >> 56) ^ (x >> 29) ^ (x >> 13));
	}
	zf.fr = zf.fw = -1;
}

int ZF_ENTRY(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct pp_pool_stats st;

	zf_setup_once();
	zm_reset();
	zf_rep.step = 0;
	zf_arena_used = 0;
	zf_cursor = 0;
	snprintf(zf_rep.op, sizeof zf_rep.op, "start");
	zf_fds_reset();
	ZF_CHECK(pp_pool_stats(&st) == 0 && st.pages_in_use == 0,
	         "%ld pages in use before any pipe exists", st.pages_in_use);

	/* Two pipes to start with, one blocking and one not. */
	struct fuzz_in first = { (const uint8_t *)"\x04\x01", 2 };
	zf_op_pipe(&first);
	zf_op_pipe(&first);
	zf_check(true);

	while (in.n) {
		unsigned op = fuzz_byte(&in);
		bool to_fd = op % 16 == 9 || op == 0x1f;
		zf_rep.step++;
		snprintf(zf_rep.op, sizeof zf_rep.op, "op %u", op);
		switch (op % 16) {
		case 0: zf_op_pipe(&in); break;
		case 1: zf_op_write(&in); break;
		case 2: zf_op_read(&in); break;
		case 3: case 4: zf_op_xfer(&in, 0); break;
		case 5: zf_op_xfer(&in, 1); break;
		case 6: zf_op_xfer(&in, 2); break;
		case 7: zf_op_vmsplice(&in); break;
		case 8: zf_op_from_fd(&in); break;
		case 9: zf_op_to_fd(&in); break;
		case 10: zf_op_peek(&in); break;
		case 11: zf_op_ctl(&in); break;
		case 12: zf_op_close(&in); break;
		case 13: zf_op_setsize(&in); break;
		case 14: zf_op_bad(&in); break;
		default: /* 0f only the checks; 1f the source file; then
			          * 2f, 4f, .. ef pp_reserve, 3f, 5f, .. ff pp_commit */
			if (op == 0x1f)
				zf_op_source(&in);
			else if (op >= 0x2f)
				(op >> 4) % 2 ? zf_op_commit(&in) : zf_op_reserve(&in);
			break;
		}
		zf_check(to_fd);
	}

	/* Close everything: every page back, every release made. */
	zf_rep.step++;
	for (int i = 0; i < ZF_PIPES; i++) {
		struct zm_pipe *p = &zm_p[i];
		int side = (int)((p->id + zf_rep.step) & 1);
		while (p->live) {
			if (!p->end[side])
				side = 1 - side;
			zf_close(p, side);
			zf_check(false);
		}
	}
	snprintf(zf_rep.op, sizeof zf_rep.op, "teardown");
	ZF_CHECK(pp_pool_stats(&st) == 0 && st.pages_in_use == 0,
	         "%ld pages still in use after every pipe was closed", st.pages_in_use);
	ZF_CHECK(zm_gifts_pending() == 0, "%d vmsplice releases never came", zm_gifts_pending());
	ZF_CHECK(zm_file_pages() == 0, "model: %ld file pages still mapped", zm_file_pages());
	zf_maps_check(true); /* none left: every run was unmapped */
	zf_fds_check(true);
	zf_kp_drain();
	return 0;
}
