/*
 * fault_zerocopy.c - every allocation and system call of the zero-copy
 * calls (pp_splice, pp_tee, pp_fanout, pp_vmsplice, pp_splice_from_fd,
 * pp_splice_to_fd, pp_peek/pp_consume) made to fail, one at a time and
 * many at once (fault_sweep.h's sweep): the pipes must survive, exactly as
 * their model (test/fuzz/zc_model.c) says.
 *
 * The zero-copy workload (zc) is a series of phases too, each with four
 * pipes (some in packet mode) and three descriptors: a source file (memfd)
 * read at its position or at an offset, a sink file written likewise, and
 * a kernel pipe both ways.  In odd phases the source is sealed with
 * F_SEAL_SHRINK, so pp_splice_from_fd maps its pages into the pipes (file
 * buffers, one mapping and one gift record a call, the first buffer
 * starting inside its page) instead of reading them into pool pages.  Its
 * operations mix pp_splice, pp_tee, pp_fanout
 * (to up to three pipes), pp_vmsplice (1-4 segments of test memory at any
 * alignment, with a release callback), pp_splice_from_fd, pp_splice_to_fd,
 * pp_peek + pp_consume, pp_reserve + pp_commit (the reservation open
 * across the operations between them) with pp_write, pp_read, pp_setsize,
 * pp_fd and pp_close of single sides.  Its failure points: the mmap of
 * every page (pp_splice_from_fd and pp_reserve take up to 64), the malloc of every gift record
 * and the calloc of a page-table leaf (pp_vmsplice; ballast handles put
 * that leaf in the middle of a segment, see zc_ballast_make), the
 * descriptor's fstat/lseek/fcntl checks, readv/preadv and writev/pwritev
 * (failed with an errno or cut short), the eventfd updates, and pp_pipe's
 * allocations; from the sealed source: the seals check (fcntl), the
 * position (lseek), the file's mmap, its gift record (malloc), a handle
 * leaf (calloc), each of which makes the call read into pool pages
 * instead, and the final lseek that moves the position (the call then
 * fails, nothing moved, nothing left mapped).  The model is
 * test/fuzz/zc_model.c, shared with the
 * zero-copy fuzz target: every pipe's buffers, the pages they name with
 * their references (tee'd and fanned-out copies share them), the expected
 * bytes of each.  After each call:
 *   - the result: exactly the model's when nothing was injected or only
 *     an eventfd update failed (splice, tee and fan-out allocate nothing);
 *     otherwise -1 with ENOMEM (no page, no gift record), EBADF (fstat),
 *     EINVAL (lseek), the descriptor's own errno (readv/writev failed),
 *     EOVERFLOW (the sealed source's position not moved), or
 *     a shorter count: a whole number of pages (pages missing), a prefix
 *     ending on a chunk boundary (vmsplice), less than asked (the
 *     descriptor cut short), and exactly what the descriptor took is gone
 *     from the pipe; an offset argument moves by the count, a file
 *     position likewise;
 *   - every pipe's whole contents, in place through pp_peek: one segment
 *     per model buffer, same lengths and bytes, the same memory for the
 *     same page in every pipe that holds it (from the sealed source its
 *     mapped pages when nothing failed in the mapping, else pool pages
 *     holding the same bytes: a whole call's pages, no lead, as from an
 *     unsealed file, and exactly that count when the failure was the
 *     call's only one); pp_nread, pp_getsize,
 *     pp_events, pp_fd readiness (unless an eventfd update failed since
 *     the last refresh);
 *   - pool pages_in_use equals the pool pages the model's buffers name
 *     (mapped file pages are not pool pages), mapped pages equal in_use +
 *     cached + the pages of the file mappings some buffer still names (a
 *     call's mapping goes with its last page), live gift records (malloc
 *     blocks made inside pp_vmsplice) equal the segments not yet released,
 *     those made inside pp_splice_from_fd the file mappings not yet gone;
 *   - each release callback came exactly once, when the last reference to
 *     its segment's bytes went (read, spliced out, consumed, or the pipe
 *     closed), with the part of the segment that went in, its bytes intact;
 *   - the sink file holds exactly what was spliced to it, the kernel pipe
 *     what was spliced to it (drained and compared) or what is left of what
 *     the test put in, the source file's position moved by what was taken;
 * and at the end of each phase, all closed: no page in use or mapped, no
 * eventfd, no ring, no gift record, every release made, no mapping of the
 * source file left (/proc/self/maps).  A fork's child gets private copies
 * of the descriptors as they are at the fork (the kernel pipe's contents
 * copied with tee(2), the source's seals too).
 *
 * Cases (fault_sweep.h): count_points, fail_each_point, fail_every_kth.
 */
#include "fault_sweep.h"
#include "memfd_maps.h"

/* The model is test/fuzz/zc_model.c; here are the calls, what each may do
 * when a call inside it fails, and the descriptors' own model. */
#include "fuzz/zc_model.c"

/* The model's failures: recorded, and the run goes on. */
static void zm_fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "  zc: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	t_case_failed = 1;
}

#define ZP 4                      /* pipes per phase */
#define FR_SIZE (48u * PG + 123)  /* the source file */
#define FW_MAX (48u * PG)         /* the sink file is emptied beyond this */
#define KP_MAX 65536u             /* a kernel pipe's default capacity */
#define ARENA (1u << 20)          /* caller memory for pp_vmsplice */
#define GIFT_TAG 'g'
#define FILE_TAG 'f'              /* malloc blocks made in pp_splice_from_fd */

static struct {
	int fr, fw, kp[2];       /* source memfd, sink memfd, kernel pipe */
	bool sealed;             /* the source has F_SEAL_SHRINK (odd phases) */
	uint32_t fr_src;         /* the source file holds pat[fr_src ..] */
	off_t fr_pos;            /* its position */
	unsigned char fw_data[FW_MAX + MAXIO + PG]; /* what the sink file holds */
	size_t fw_size;
	off_t fw_pos;
	unsigned char kp_data[KP_MAX]; /* what the kernel pipe holds */
	size_t kp_len;
	size_t arena_used;
} zc;
static unsigned char zc_arena[ARENA];
static unsigned char zc_exp[MAXIO + PG];

/* A live pipe whose `side` is open, or NULL. */
static struct zm_pipe *zc_pick(int side)
{
	struct zm_pipe *c[ZP];
	int n = 0;
	for (int i = 0; i < ZP; i++)
		if (zm_p[i].live && zm_p[i].end[side])
			c[n++] = &zm_p[i];
	return n ? c[rnd((uint32_t)n)] : NULL;
}

/* After a call on pipes t[0..n): an injected eventfd read/write failure
 * leaves their descriptors stale; a call that refreshes them repairs it. */
static void zc_after(struct zm_pipe *const t[], int n, bool refreshed)
{
	for (int i = 0; i < n; i++) {
		if (fi.op_mask & FI_EFDIO_BITS)
			t[i]->stale = true;
		else if (refreshed)
			t[i]->stale = false;
	}
}

static size_t zc_len(void)
{
	switch (rnd(6)) {
	case 0: return 1 + rnd(300);
	case 1: return PG * (1 + rnd(4));
	case 2: return 1 + rnd(4 * PG);
	case 3: return 1 + rnd(24 * PG);
	case 4: return (size_t)1 << 30; /* everything */
	default: return 1 + rnd(64 * PG);
	}
}

/* The descriptors a fork's child must not share with its parent: a copy of
 * each as it is at the fork (maybe in the middle of a call), same number,
 * same contents, same position. */
static void zc_private_fds(void)
{
	static unsigned char buf[FR_SIZE + FW_MAX + MAXIO + PG];
	static const char *const names[2] = { "fi-src", "fi-sink" };
	int fds[2] = { zc.fr, zc.fw };
	for (int i = 0; i < 2; i++) {
		if (fds[i] < 0)
			continue;
		/* Same seals too: a sealed source's pages are still mapped (the
		 * buffers mapped before the fork name the parent's file, whose
		 * bytes are the same and which no one writes). */
		int seals = fcntl(fds[i], F_GET_SEALS);
		off_t pos = lseek(fds[i], 0, SEEK_CUR);
		ssize_t n = pread(fds[i], buf, sizeof buf, 0);
		int nfd = memfd_create(names[i], MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (seals < 0 || pos < 0 || n < 0 || nfd < 0 || pwrite(nfd, buf, (size_t)n, 0) != n ||
		    lseek(nfd, pos, SEEK_SET) != pos ||
		    ((seals & ~F_SEAL_SEAL) && fcntl(nfd, F_ADD_SEALS, seals & ~F_SEAL_SEAL) < 0) ||
		    dup3(nfd, fds[i], O_CLOEXEC) < 0)
			abort();
		close(nfd);
	}
	if (zc.kp[0] >= 0) {
		/* What the kernel pipe holds now (the library may have read from
		 * it already in this call): tee(2) copies without taking it. */
		int np[2], avail = 0;
		if (pipe2(np, O_NONBLOCK | O_CLOEXEC) < 0 || ioctl(zc.kp[0], FIONREAD, &avail) < 0 ||
		    (avail && tee(zc.kp[0], np[1], (size_t)avail, SPLICE_F_NONBLOCK) != avail) ||
		    dup3(np[0], zc.kp[0], O_CLOEXEC) < 0 || dup3(np[1], zc.kp[1], O_CLOEXEC) < 0)
			abort();
		close(np[0]);
		close(np[1]);
	}
}

/* The descriptors against their model. */
static void zc_check_fds(void)
{
	static unsigned char buf[FW_MAX + MAXIO + PG];
	struct stat st;
	CHECK_EQ(lseek(zc.fr, 0, SEEK_CUR), zc.fr_pos);
	CHECK_EQ(lseek(zc.fw, 0, SEEK_CUR), zc.fw_pos);
	CHECK(fstat(zc.fw, &st) == 0);
	CHECK_EQ(st.st_size, zc.fw_size);
	ssize_t n = pread(zc.fw, buf, sizeof buf, 0);
	CHECK_EQ(n, zc.fw_size);
	if (n == (ssize_t)zc.fw_size && memcmp(buf, zc.fw_data, zc.fw_size) != 0) {
		size_t k = 0;
		while (buf[k] == zc.fw_data[k])
			k++;
		fprintf(stderr, "  sink file differs at byte %zu\n", k);
		CHECK(0);
	}
	int avail = -1;
	CHECK(ioctl(zc.kp[0], FIONREAD, &avail) == 0);
	CHECK_EQ(avail, zc.kp_len);
}

/* Everything after each step.  Mapped pages: the pool's, and the sealed
 * source file's that buffers still name (each call's run is unmapped with
 * its last page, by the length it was mapped with). */
static void zc_check_state(void)
{
	zm_check_all();
	struct pp_pool_stats st = pool();
	CHECK_EQ(fi.maps, st.pages_in_use + st.pages_cached + zm_file_pages());
	CHECK_EQ(fi_live_mallocs(GIFT_TAG), zm_gifts_pending()); /* gift records freed */
	CHECK_EQ(fi_live_mallocs(FILE_TAG), zm_runs_live());     /* a run's record too */
	zc_check_fds();
}

/* Empty the kernel pipe, checking it held what the model says. */
static void zc_drain_kp(void)
{
	static unsigned char buf[KP_MAX + 1];
	ssize_t n = read(zc.kp[0], buf, sizeof buf);
	if (n < 0 && errno == EAGAIN)
		n = 0;
	CHECK_EQ(n, zc.kp_len);
	if (n == (ssize_t)zc.kp_len && memcmp(buf, zc.kp_data, zc.kp_len) != 0) {
		fprintf(stderr, "  the kernel pipe holds other bytes than were spliced to it\n");
		CHECK(0);
	}
	zc.kp_len = 0;
}

/* A call's result when no allocation failed in it: exactly the model's
 * (want, or -1 with eerr), and true; false, checking nothing, when one
 * did (the caller checks what such a failure may leave). */
static bool zc_exact(long r, int err, long want, int eerr)
{
	if (fi.op_mask & FI_ALLOC_BITS)
		return false;
	CHECK_EQ(r, want);
	if (want < 0)
		CHECK_EQ(err, eerr);
	return true;
}

static void zc_op_write(void)
{
	struct zm_pipe *p = zc_pick(ZM_W);
	if (!p)
		return;
	size_t len = pick_wsize(), merged;
	const unsigned char *src = pat + rnd(PAT_LEN);
	int eerr = 0;
	bool wait;
	long want = zm_write_predict(p, len, &merged, &eerr, &wait);
	snprintf(g_op, sizeof g_op, "pp_write pipe %u, %zu bytes (%zu merged, expect %ld)", p->id,
	         len, merged, want);
	ssize_t r = ARMED(pp_write(p->end[ZM_W], src, len));
	int err = errno;
	if (!zc_exact(r, err, want, eerr) && r < 0) {
		CHECK_EQ(err, ENOMEM); /* a page failed before anything went in */
		CHECK_EQ(merged, 0);
		CHECK(want > 0);
	} else if (fi.op_mask & FI_ALLOC_BITS) {
		CHECK(r > 0 && r <= want && (size_t)r >= merged);
	}
	if (r > 0)
		CHECK(zm_write_apply(p, src, len, merged, (size_t)r));
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, true);
}

static void zc_op_read(void)
{
	struct zm_pipe *p = zc_pick(ZM_R);
	if (!p)
		return;
	size_t count = rnd(2) ? 1 + rnd(3 * PG) : 1 + rnd(MAXIO);
	int eerr = 0;
	bool wait;
	long want = zm_read_predict(p, count, &eerr, &wait);
	snprintf(g_op, sizeof g_op, "pp_read pipe %u, %zu bytes (expect %ld)", p->id, count, want);
	memset(rscratch, 0xa5, count + 37);
	ssize_t r = ARMED(pp_read(p->end[ZM_R], rscratch, count));
	int err = errno;
	CHECK_EQ(r, want); /* nothing a read does may fail it */
	if (want < 0)
		CHECK_EQ(err, eerr);
	if (r > 0) {
		size_t got = zm_read_apply(p, count, zc_exp);
		CHECK_EQ(got, r);
		CHECK(memcmp(rscratch, zc_exp, (size_t)r) == 0);
	}
	CHECK(untouched(rscratch + (r > 0 ? r : 0), 37));
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, true);
}

/* pp_splice (kind 0), pp_tee (1), pp_fanout (2). */
static void zc_op_xfer(int kind)
{
	struct zm_pipe *in = zc_pick(ZM_R);
	if (!in)
		return;
	struct zm_pipe *cand[ZP], *outs[ZP];
	int nc = 0;
	for (int i = 0; i < ZP; i++)
		if (zm_p[i].live && zm_p[i].end[ZM_W] && &zm_p[i] != in)
			cand[nc++] = &zm_p[i];
	if (!nc)
		return;
	int n = kind == 2 ? 1 + (int)rnd((uint32_t)nc) : 1;
	for (int i = 0; i < n; i++) { /* n distinct ones */
		int j = i + (int)rnd((uint32_t)(nc - i));
		struct zm_pipe *x = cand[i];
		cand[i] = cand[j];
		cand[j] = x;
		outs[i] = cand[i];
	}
	size_t len = zc_len();
	unsigned flags = (rnd(2) ? PP_SPLICE_NONBLOCK : 0) | (rnd(4) ? 0 : PP_SPLICE_MOVE | PP_SPLICE_MORE);
	int eerr = 0, sigout;
	bool wait;
	long want = zm_xfer_predict(in, outs, n, len, kind != 1, &eerr, &wait, &sigout);
	static const char *const names[] = { "pp_splice", "pp_tee", "pp_fanout" };
	snprintf(g_op, sizeof g_op, "%s pipe %u -> %u%s (%d outs), %zu bytes (expect %ld)",
	         names[kind], in->id, outs[0]->id, n > 1 ? "..." : "", n, len, want);
	struct pp_end *oe[ZP];
	for (int i = 0; i < n; i++)
		oe[i] = outs[i]->end[ZM_W];
	ssize_t r = kind == 0 ? ARMED(pp_splice(in->end[ZM_R], oe[0], len, flags))
	          : kind == 1 ? ARMED(pp_tee(in->end[ZM_R], oe[0], len, flags))
	                      : ARMED(pp_fanout(in->end[ZM_R], oe, n, len, flags));
	int err = errno;
	/* No allocation and no descriptor I/O but the eventfds': nothing may
	 * change the result. */
	CHECK_EQ(r, want);
	if (want < 0)
		CHECK_EQ(err, eerr);
	CHECK_EQ(fi.op_mask & ~FI_EFDIO_BITS, 0);
	if (r > 0 && r == want)
		CHECK_EQ(zm_xfer_apply(in, outs, n, len, kind != 1), r);
	struct zm_pipe *t[ZP + 1];
	t[0] = in;
	for (int i = 0; i < n; i++)
		t[i + 1] = outs[i];
	zc_after(t, n + 1, r > 0);
}

/* Both ends of one pipe: EINVAL, nothing happens. */
static void zc_op_same_pipe(void)
{
	struct zm_pipe *p = zc_pick(ZM_R);
	if (!p || !p->end[ZM_W])
		return;
	snprintf(g_op, sizeof g_op, "pp_splice/pp_tee pipe %u to itself", p->id);
	ssize_t r = rnd(2) ? ARMED(pp_splice(p->end[ZM_R], p->end[ZM_W], 100, 0))
	                   : ARMED(pp_tee(p->end[ZM_R], p->end[ZM_W], 100, 0));
	int err = errno;
	CHECK_EQ(r, -1);
	CHECK_EQ(err, EINVAL);
	CHECK_EQ(fi.op_calls, 0);
}

/* edge: the fixed first call of the workload (see zc_ballast_make). */
static void zc_op_vmsplice(bool edge)
{
	struct zm_pipe *p = zc_pick(ZM_W);
	if (!p)
		return;
	struct iovec iov[4];
	const unsigned char *expect[4];
	int n = edge ? 2 : 1 + (int)rnd(4);
	for (int i = 0; i < n; i++) {
		size_t len;
		switch (edge ? 5u + (uint32_t)i : rnd(5)) {
		case 0: len = 0; break;
		case 1: len = 1 + rnd(300); break;
		case 2: len = PG * (1 + rnd(2)); break;
		case 5: len = 2 * PG + 808; break; /* three chunks */
		case 6: len = 3000; break;
		default: len = 1 + rnd(3 * PG + 500); break;
		}
		size_t at = zc.arena_used + rnd(64); /* any alignment */
		if (at + len > ARENA)
			return; /* the arena is used up until the phase ends */
		zc.arena_used = at + len;
		uint32_t from = rnd(PAT_LEN);
		memcpy(zc_arena + at, pat + from, len);
		iov[i].iov_base = zc_arena + at;
		iov[i].iov_len = len;
		expect[i] = pat + from;
	}
	unsigned flags = PP_SPLICE_NONBLOCK | (rnd(2) ? PP_SPLICE_GIFT : 0);
	int eerr = 0;
	bool wait, sig;
	long want = zm_vmsplice_predict(p, iov, n, &eerr, &wait, &sig);
	snprintf(g_op, sizeof g_op, "pp_vmsplice pipe %u, %d segs, %zu %zu.. bytes (expect %ld)",
	         p->id, n, iov[0].iov_len, n > 1 ? iov[1].iov_len : 0, want);
	fi.tag = GIFT_TAG;
	ssize_t r = ARMED(pp_vmsplice(p->end[ZM_W], iov, (unsigned long)n, flags, zm_release, NULL));
	int err = errno;
	fi.tag = 0;
	if (!(fi.op_mask & (FI_BIT(FI_MALLOC) | FI_BIT(FI_CALLOC)))) {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	} else if (r < 0) {
		CHECK_EQ(err, ENOMEM); /* a gift record or a handle failed first */
		CHECK(want > 0);
	} else {
		CHECK(r > 0 && r < want); /* stopped at the failure: what went in */
	}
	if (r > 0)
		CHECK(zm_vmsplice_apply(p, iov, n, expect, (size_t)r));
	/* The ballast did its job: a gift, a new leaf, the second gift. */
	if (edge && !fi.injected)
		CHECK_EQ(fi.op_calls, 3);
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, true);
}

/* The bytes source `src` (0 file at its position, 1 file at an offset,
 * 2 kernel pipe) gives from its start. */
static const unsigned char *zc_src_bytes(int src, off_t off)
{
	if (src == 2)
		return zc.kp_data;
	return pat + zc.fr_src + off;
}

/*
 * From the source file, the kernel pipe, at a position or an offset.  From
 * the sealed source the library maps the file's pages instead of reading:
 * it asks for the seals (fcntl), the position (lseek, without an offset),
 * maps the run (mmap), makes its gift record (malloc) and a handle per page
 * (maybe a page-table leaf: calloc), and at the end moves the position
 * (lseek).  A failure of any but the last makes it read into pool pages
 * instead, as from an unsealed file (a whole call's pages, no lead); the
 * last one fails the call with nothing moved and the run unmapped.
 */
static void zc_op_from_fd(void)
{
	struct zm_pipe *p = zc_pick(ZM_W);
	if (!p)
		return;
	int src = (int)rnd(3);
	size_t len = zc_len();
	off_t off = rnd(FR_SIZE + 2 * PG), off0 = off, pos = src == 0 ? zc.fr_pos : off;
	if (src == 2 && zc.kp_len < KP_MAX / 2 && rnd(4)) {
		/* Something to read in the kernel pipe. */
		size_t add = 1 + rnd(KP_MAX / 2 - 1);
		memcpy(zc.kp_data + zc.kp_len, pat + rnd(PAT_LEN), add);
		/* It takes what fits (a kernel pipe counts buffers, not bytes). */
		ssize_t w = write(zc.kp[1], zc.kp_data + zc.kp_len, add);
		CHECK(w > 0 || errno == EAGAIN);
		zc.kp_len += w > 0 ? (size_t)w : 0;
	}
	bool mapped = zc.sealed && src != 2;
	size_t avail = src == 2 ? zc.kp_len : (pos < (off_t)FR_SIZE ? FR_SIZE - (size_t)pos : 0);
	int eerr = 0;
	bool wait, sig;
	/* want: read into pool pages; mwant: the file's pages mapped, the
	 * first from pos's place in its page. */
	long pwant = zm_fill_predict(p, len, &eerr, &wait, &sig), want = pwant;
	long mwant = mapped ? zm_fill_map_predict(p, len, (uint32_t)(pos % PG), &eerr, &wait, &sig)
	                    : pwant;
	if (want > 0 && !avail) {
		if (src == 2) {
			want = -1; /* an empty kernel pipe with a writer */
			eerr = EAGAIN;
		} else {
			want = 0; /* end of file */
		}
		mwant = want;
	} else if (want > 0) {
		want = (long)min_sz((size_t)want, avail);
		mwant = (long)min_sz((size_t)mwant, avail);
	}
	int fd = src == 2 ? zc.kp[0] : zc.fr;
	snprintf(g_op, sizeof g_op, "pp_splice_from_fd %s%s%s -> pipe %u, %zu bytes at %lld (%zu "
	         "there; expect %ld)", src == 2 ? "kernel pipe" : "file", src == 1 ? " offset" : "",
	         mapped ? " sealed" : "", p->id, len, (long long)pos, avail, mapped ? mwant : want);
	unsigned long injected = fi.injected;
	fi.tag = FILE_TAG;
	ssize_t r = ARMED(pp_splice_from_fd(fd, src == 1 ? &off : NULL, p->end[ZM_W], len, 0));
	int err = errno;
	fi.tag = 0;
	unsigned m = fi.op_mask;
	bool one = fi.injected - injected == 1; /* one failure in this call */
	/* The mapping given up for reading (a failure before it was done), or
	 * the position not moved after it (lseek fails with EOVERFLOW). */
	unsigned map_bits = FI_BIT(FI_FCNTL) | FI_BIT(FI_LSEEK) | FI_ALLOC_BITS;
	bool seek_failed = mapped && src == 0 && (m & FI_BIT(FI_LSEEK)) && r == -1 && err == EOVERFLOW;
	bool file_pages = mapped && !(m & map_bits);
	/* The eventfds are refreshed once the pipe had room for the call and
	 * the descriptor passed the checks. */
	bool refreshed = pwant > 0 && !(m & FI_BIT(FI_FSTAT)) && !(src == 1 && (m & FI_BIT(FI_LSEEK)));
	if (m & FI_BIT(FI_FSTAT)) {
		CHECK_EQ(r, -1); /* reported as a bad descriptor */
		CHECK_EQ(err, EBADF);
	} else if ((m & FI_BIT(FI_LSEEK)) && src == 1) {
		CHECK_EQ(r, -1); /* reported as a descriptor that cannot seek */
		CHECK_EQ(err, EINVAL);
	} else if (seek_failed) {
		/* Mapped, and then the position could not be moved: nothing went
		 * in, nothing is left mapped (checked with the state). */
		CHECK(mwant > 0);
		CHECK_EQ(m & (FI_BIT(FI_FCNTL) | FI_ALLOC_BITS | FI_BIT(FI_READV)), 0);
	} else if (file_pages) {
		/* Mapped: no page, no read, the count exactly. */
		CHECK_EQ(r, mwant);
		if (mwant < 0)
			CHECK_EQ(err, eerr);
		CHECK_EQ(m & FI_BIT(FI_READV), 0);
	} else if (mapped && one && !(m & FI_BIT(FI_READV))) {
		/* The mapping failed; the read that replaced it did not. */
		CHECK(pwant > 0);
		CHECK_EQ(r, want);
	} else if ((m & FI_BIT(FI_LSEEK)) && !mapped) {
		CHECK(0); /* an unsealed file or a pipe is not asked for its position */
	} else if ((m & FI_BIT(FI_READV)) && !(fi.op_short & FI_BIT(FI_READV))) {
		CHECK_EQ(r, -1); /* the descriptor's error, as it is */
		CHECK_EQ(err, fi.op_kind_errno[FI_READV]);
	} else if (m & FI_ALLOC_BITS) {
		/* No page: ENOMEM.  Fewer pages: the descriptor's answer for
		 * less, a whole number of pages (or all there was). */
		CHECK(pwant > 0);
		if (r < 0 && err == ENOMEM)
			;
		else if (want <= 0)
			CHECK(r == want && (want == 0 || err == eerr));
		else
			CHECK(r > 0 && r <= want &&
			      (r == want || r % PG == 0 || (fi.op_short & FI_BIT(FI_READV))));
	} else if (fi.op_short & FI_BIT(FI_READV)) {
		/* The descriptor was asked for less: it gave less, or all it had. */
		if (r != want)
			CHECK(want > 0 && r > 0 && r < want);
	} else {
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	}
	if (r > 0) {
		if (file_pages)
			CHECK(zm_fill_apply_file(p, pat + zc.fr_src, (uint64_t)pos, (size_t)r));
		else
			CHECK(zm_fill_apply(p, zc_src_bytes(src, pos), (size_t)r));
		if (src == 0)
			zc.fr_pos += r;
		if (src == 2) {
			memmove(zc.kp_data, zc.kp_data + r, zc.kp_len - (size_t)r);
			zc.kp_len -= (size_t)r;
		}
	}
	if (src == 1)
		CHECK_EQ(off, off0 + (r > 0 ? r : 0)); /* advanced by the count */
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, refreshed);
}

static void zc_op_to_fd(void)
{
	struct zm_pipe *p = zc_pick(ZM_R);
	if (!p)
		return;
	int dst = (int)rnd(3);
	size_t len = zc_len();
	if (zc.fw_size > FW_MAX) { /* start the sink file again */
		CHECK_EQ(ftruncate(zc.fw, 0), 0);
		CHECK_EQ(lseek(zc.fw, 0, SEEK_SET), 0);
		zc.fw_size = 0;
		zc.fw_pos = 0;
	}
	if (dst == 2) {
		zc_drain_kp();
		len = min_sz(len, KP_MAX);
	}
	off_t off = rnd((uint32_t)zc.fw_size + PG), off0 = off, pos = dst == 0 ? zc.fw_pos : off;
	int eerr = 0;
	bool wait;
	long want = zm_drain_predict(p, len, &eerr, &wait);
	int fd = dst == 2 ? zc.kp[1] : zc.fw;
	snprintf(g_op, sizeof g_op, "pp_splice_to_fd pipe %u -> %s%s, %zu bytes at %lld (expect %ld)",
	         p->id, dst == 2 ? "kernel pipe" : "file", dst == 1 ? " offset" : "", len,
	         (long long)pos, want);
	ssize_t r = ARMED(pp_splice_to_fd(p->end[ZM_R], fd, dst == 1 ? &off : NULL, len, 0));
	int err = errno;
	unsigned m = fi.op_mask;
	if (m & FI_BIT(FI_FSTAT)) {
		CHECK_EQ(r, -1);
		CHECK_EQ(err, EBADF);
	} else if (m & FI_BIT(FI_LSEEK)) {
		CHECK_EQ(r, -1);
		CHECK_EQ(err, EINVAL);
		CHECK_EQ(dst, 1);
	} else if ((m & FI_BIT(FI_WRITEV)) && !(fi.op_short & FI_BIT(FI_WRITEV))) {
		CHECK_EQ(r, -1); /* the descriptor's error; the pipe keeps its bytes */
		CHECK_EQ(err, fi.op_kind_errno[FI_WRITEV]);
		CHECK(want > 0);
	} else if (fi.op_short & FI_BIT(FI_WRITEV)) {
		CHECK(want > 0 && r > 0 && r < want); /* the descriptor took less */
	} else {
		/* A failed fcntl (the O_APPEND check) is let go: not an error. */
		CHECK_EQ(r, want);
		if (want < 0)
			CHECK_EQ(err, eerr);
	}
	if (r > 0) {
		zm_drop(p, (size_t)r, zc_exp); /* exactly what the descriptor took */
		if (dst == 2) {
			memcpy(zc.kp_data, zc_exp, (size_t)r);
			zc.kp_len = (size_t)r;
			zc_drain_kp();
		} else {
			if ((size_t)pos > zc.fw_size)
				memset(zc.fw_data + zc.fw_size, 0, (size_t)pos - zc.fw_size); /* a hole */
			memcpy(zc.fw_data + pos, zc_exp, (size_t)r);
			if ((size_t)pos + (size_t)r > zc.fw_size)
				zc.fw_size = (size_t)pos + (size_t)r;
			if (dst == 0)
				zc.fw_pos += r;
		}
	}
	if (dst == 1)
		CHECK_EQ(off, off0 + (r > 0 ? r : 0));
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, r > 0);
}

static void zc_op_peek_consume(void)
{
	struct zm_pipe *p = zc_pick(ZM_R);
	if (!p)
		return;
	struct iovec iov[9];
	int max = (int)rnd(9);
	long want = !max ? 0 : !p->count ? (p->end[ZM_W] ? -1 : 0) : (long)min_sz((size_t)max, p->count);
	snprintf(g_op, sizeof g_op, "pp_peek pipe %u, max %d (expect %ld)", p->id, max, want);
	ssize_t r = ARMED(pp_peek(p->end[ZM_R], iov, max));
	int err = errno;
	CHECK_EQ(r, want);
	if (want < 0)
		CHECK_EQ(err, EAGAIN);
	CHECK_EQ(fi.op_calls, 0); /* peeking calls nothing */
	for (int i = 0; i < (int)r; i++) {
		struct zm_slot *s = zm_slot(p, (uint32_t)i);
		CHECK_EQ(iov[i].iov_len, s->len);
		CHECK(iov[i].iov_len == s->len &&
		      memcmp(iov[i].iov_base, zm_pages[s->pg].bytes + s->off, s->len) == 0);
	}
	size_t n;
	switch (rnd(4)) {
	case 0: n = p->bytes; break;
	case 1: n = p->bytes + 1 + rnd(100); break; /* more than there: EINVAL */
	case 2: n = r > 0 ? iov[0].iov_len : 0; break;
	default: n = rnd((uint32_t)p->bytes + 1); break;
	}
	bool ok = n <= p->bytes;
	snprintf(g_op, sizeof g_op, "pp_consume pipe %u, %zu of %llu bytes", p->id, n,
	         (unsigned long long)p->bytes);
	r = ARMED(pp_consume(p->end[ZM_R], n));
	err = errno;
	CHECK_EQ(r, ok ? (long)n : -1);
	if (!ok)
		CHECK_EQ(err, EINVAL);
	if (ok)
		zm_drop(p, n, NULL);
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, ok);
}

/*
 * pp_reserve on a write end that has no reservation, its segments filled
 * with pattern bytes; or, on one that has, pp_commit of all, a part, none,
 * or one byte too many (EINVAL: it stays).  A reservation stays open across
 * the operations between the two (or until the write end is closed).  The
 * reserve's failure points are the pool pages it takes (mmap): fewer pages
 * than the model says (a whole number: the first ones), or ENOMEM and
 * nothing reserved.  A commit allocates nothing.
 */
static void zc_op_reserve_commit(void)
{
	struct zm_pipe *p = zc_pick(ZM_W);
	if (!p)
		return;
	int eerr = 0;
	bool wait, sig;
	if (!p->resv_n) {
		static struct iovec iov[72];
		size_t len = zc_len();
		int max = 1 + (int)rnd(71);
		long want = zm_reserve_predict(p, max, len, &eerr, &wait, &sig);
		snprintf(g_op, sizeof g_op, "pp_reserve pipe %u, max %d, %zu bytes (expect %ld)",
		         p->id, max, len, want);
		ssize_t r = ARMED(pp_reserve(p->end[ZM_W], iov, max, len));
		int err = errno;
		/* want is pages; the segments they make depend on where they lie. */
		long pages = r > 0 && r <= max ? resv_layout_pages(iov, r, len, p->packet) : -1;
		if (!zc_exact(r > 0 ? pages : r, err, want, eerr) && r < 0) {
			CHECK_EQ(err, ENOMEM); /* no page could be had */
			CHECK(want > 0);
		} else if (fi.op_mask & FI_ALLOC_BITS) {
			CHECK(pages > 0 && pages < want); /* some pages could not */
		}
		if (r > 0) {
			size_t have = 0;
			for (ssize_t i = 0; i < r; i++)
				have += iov[i].iov_len;
			size_t at = rnd(PAT_LEN - have);
			for (ssize_t i = 0, off = 0; i < r; off += (ssize_t)iov[i].iov_len, i++)
				memcpy(iov[i].iov_base, pat + at + off, iov[i].iov_len);
			CHECK(zm_reserve_apply(p, iov, r, have < len ? have : len, pat + at));
		}
		struct zm_pipe *t[1] = { p };
		zc_after(t, 1, true);
		return;
	}
	size_t n;
	switch (rnd(4)) {
	case 0: n = p->resv_bytes; break;
	case 1: n = rnd((uint32_t)p->resv_bytes + 1); break;
	case 2: n = 0; break;
	default: n = p->resv_bytes + 1; break; /* EINVAL */
	}
	long want = zm_commit_predict(p, n, &eerr, &sig);
	snprintf(g_op, sizeof g_op, "pp_commit pipe %u, %zu of %zu bytes (expect %ld)", p->id, n,
	         p->resv_bytes, want);
	ssize_t r = ARMED(pp_commit(p->end[ZM_W], n));
	int err = errno;
	CHECK_EQ(r, want);
	if (want < 0)
		CHECK_EQ(err, eerr);
	zm_commit_apply(p, n, r, err);
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, true);
}

static void zc_op_fd(void)
{
	int side = (int)rnd(2);
	struct zm_pipe *p = zc_pick(side);
	if (!p)
		return;
	snprintf(g_op, sizeof g_op, "pp_fd pipe %u side %d (have %d)", p->id, side, p->efd[side]);
	int fd = ARMED(pp_fd(p->end[side]));
	int err = errno;
	struct zm_pipe *t[1] = { p };
	if (p->efd[side] >= 0) {
		CHECK_EQ(fd, p->efd[side]);
		CHECK_EQ(fi.op_calls, 0);
		return;
	}
	if (fi.op_mask & FI_BIT(FI_EVENTFD)) {
		CHECK_EQ(fd, -1);
		CHECK_EQ(err, fi.op_kind_errno[FI_EVENTFD]);
		return;
	}
	CHECK(fd >= 0 && fi_fd_index(fd) >= 0);
	if (fd >= 0)
		p->efd[side] = fd;
	zc_after(t, 1, true);
}

static void zc_op_setsize(void)
{
	static const size_t sizes[] = { 1, 4096, 8192, 16384, 32768, 65536, 131072 };
	int side = (int)rnd(2);
	struct zm_pipe *p = zc_pick(side);
	if (!p)
		return;
	size_t size = sizes[rnd(sizeof sizes / sizeof sizes[0])];
	int eerr = 0;
	long want = zm_setsize_predict(p, size, pp_getmaxsize(), &eerr);
	snprintf(g_op, sizeof g_op, "pp_setsize pipe %u to %zu (%u/%u slots; expect %ld)", p->id,
	         size, p->count, p->cap, want);
	long r = ARMED(pp_setsize(p->end[side], size));
	check_setsize(r, errno, want, eerr, p->cap);
	if (r > 0)
		p->cap = (uint32_t)(r / PG);
	struct zm_pipe *t[1] = { p };
	zc_after(t, 1, r > 0);
}

static void zc_close(struct zm_pipe *p, int side)
{
	snprintf(g_op, sizeof g_op, "pp_close pipe %u side %d", p->id, side);
	int efd = p->efd[side];
	CHECK_EQ(ARMED(pp_close(p->end[side])), 0);
	if (efd >= 0)
		CHECK_EQ(fi_fd_index(efd), -1); /* its eventfd really closed */
	bool stale = fi.op_mask & FI_EFDIO_BITS;
	zm_close(p, side);
	if (p->live)
		p->stale = stale; /* the other side's descriptor was refreshed */
}

static void zc_op_close(void)
{
	int side = (int)rnd(2);
	struct zm_pipe *p = zc_pick(side);
	if (p)
		zc_close(p, side);
}

static void zc_check_empty(void)
{
	for (int i = 0; i < ZP; i++)
		CHECK(!zm_p[i].live);
	zm_check_gifts();
	CHECK_EQ(zm_gifts_pending(), 0); /* every release came */
	CHECK_EQ(zm_in_use, 0);
	CHECK_EQ(fi_live_mallocs(GIFT_TAG), 0);
	CHECK_EQ(zm_file_pages(), 0);
	CHECK_EQ(fi_live_mallocs(FILE_TAG), 0);
	CHECK_EQ(memfd_mapped("fi-src", NULL), 0); /* every run of the file unmapped, none missed */
	check_empty();
}

/*
 * Ballast, made before the workload with nothing armed and kept to its
 * end: pipes holding vmsplice'd one-byte chunks, one page handle each,
 * 1021 of them.  The pool's first page-table leaf has handles 1..1023, so
 * the workload's first call, a pp_vmsplice of a three-chunk segment, needs
 * a new leaf (calloc) for its third chunk: a failure point in the middle
 * of a segment, whose first two chunks went in and are released later.
 * (Without ballast the leaf comes with the first page of all and its
 * failure is always at the start of a call.)  These handles are not pool
 * pages: pages_in_use does not count them.
 */
#define BALLAST 1021
static struct pp_end *zc_ballast[4][2];
static unsigned char zc_ballast_mem[256];

static void zc_ballast_make(void)
{
	struct iovec iov[256];
	for (int i = 0; i < 256; i++)
		iov[i] = (struct iovec){ zc_ballast_mem + i, 1 };
	int left = BALLAST;
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(pp_pipe(zc_ballast[i], PP_NONBLOCK), 0);
		CHECK_EQ(pp_setsize(zc_ballast[i][1], 256 * PG), 256 * PG);
		int n = left < 256 ? left : 256;
		CHECK_EQ(pp_vmsplice(zc_ballast[i][1], iov, (unsigned long)n, 0, NULL, NULL), n);
		left -= n;
	}
}

static void zc_ballast_drop(void)
{
	for (int i = 0; i < 4; i++)
		for (int s = 0; s < 2; s++)
			CHECK_EQ(pp_close(zc_ballast[i][s]), 0);
}

static void zc_run_phase(void)
{
	zm_reset();
	zc.arena_used = 0;
	zc.fr = memfd_create("fi-src", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	zc.fw = memfd_create("fi-sink", MFD_CLOEXEC);
	CHECK(zc.fr >= 0 && zc.fw >= 0 && pipe2(zc.kp, O_NONBLOCK | O_CLOEXEC) == 0);
	zc.fr_src = rnd(PAT_LEN - FR_SIZE);
	CHECK_EQ(pwrite(zc.fr, pat + zc.fr_src, FR_SIZE, 0), FR_SIZE);
	/* Odd phases: the source sealed against shrinking, its pages mapped. */
	zc.sealed = g_phase % 2 == 1;
	if (zc.sealed)
		CHECK_EQ(fcntl(zc.fr, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	zc.fr_pos = zc.fw_pos = 0;
	zc.fw_size = zc.kp_len = 0;

	g_opno = 0;
	for (int i = 0; i < ZP; i++) {
		bool packet = rnd(4) == 0;
		int flags = PP_NONBLOCK | PP_NOSIGPIPE | (packet ? PP_PACKET : 0);
		struct pp_end *ends[2] = { NULL, NULL };
		snprintf(g_op, sizeof g_op, "pp_pipe %d (flags 0x%x)", i, flags);
		int r = ARMED(pp_pipe(ends, flags));
		int err = errno;
		if (fi.op_mask & FI_ALLOC_BITS) {
			CHECK_EQ(r, -1);
			CHECK_EQ(err, ENOMEM);
			zm_p[i].live = false;
			zm_pipes_made++;
		} else {
			CHECK_EQ(r, 0);
			CHECK_EQ(fi.op_mask, 0);
			if (!r)
				zm_pipe_init(&zm_p[i], ends, packet);
		}
		zc_check_state();
		note_failure();
	}

	if (g_phase == 0) {
		g_opno = 0;
		zc_op_vmsplice(true);
		zc_check_state();
		note_failure();
	}
	int nops = g_stop_phase == g_phase ? 8 : 30 + (int)rnd(20);
	for (g_opno = 1; g_opno <= (unsigned)nops; g_opno++) {
		uint32_t c = rnd(100);
		if (c < 12)
			zc_op_write();
		else if (c < 21)
			zc_op_read();
		else if (c < 32)
			zc_op_xfer(0);
		else if (c < 40)
			zc_op_xfer(1);
		else if (c < 48)
			zc_op_xfer(2);
		else if (c < 58)
			zc_op_vmsplice(false);
		else if (c < 68)
			zc_op_from_fd();
		else if (c < 78)
			zc_op_to_fd();
		else if (c < 81)
			zc_op_peek_consume();
		else if (c < 84)
			zc_op_reserve_commit();
		else if (c < 92)
			zc_op_fd();
		else if (c < 96)
			zc_op_setsize();
		else if (c < 98)
			zc_op_close();
		else
			zc_op_same_pipe();
		zc_check_state();
		note_failure();
	}

	/* The end: drain some pipes by reading, close the others with data
	 * (and gifts) in them, in random side order. */
	for (int i = 0; i < ZP; i++) {
		struct zm_pipe *p = &zm_p[i];
		if (!p->live)
			continue;
		if (rnd(2) && p->end[ZM_R]) {
			for (int k = 0; k < 600 && p->count; k++) {
				size_t count = 1 + rnd(MAXIO);
				int eerr;
				bool wait;
				long want = zm_read_predict(p, count, &eerr, &wait);
				snprintf(g_op, sizeof g_op, "draining pp_read pipe %u, %zu (expect %ld)",
				         p->id, count, want);
				ssize_t r = ARMED(pp_read(p->end[ZM_R], rscratch, count));
				CHECK_EQ(r, want);
				if (r > 0) {
					CHECK_EQ(zm_read_apply(p, count, zc_exp), r);
					CHECK(memcmp(rscratch, zc_exp, (size_t)r) == 0);
				}
				struct zm_pipe *t[1] = { p };
				zc_after(t, 1, true);
				zc_check_state();
				note_failure();
			}
		}
		int first = (int)rnd(2);
		for (int s = 0; s < 2; s++) {
			int side = s ? 1 - first : first;
			if (p->live && p->end[side]) {
				zc_close(p, side);
				zc_check_state();
				note_failure();
			}
		}
	}
	zc_check_empty();
	note_failure();
	close(zc.fr);
	close(zc.fw);
	close(zc.kp[0]);
	close(zc.kp[1]);
	zc.fr = zc.fw = zc.kp[0] = zc.kp[1] = -1;
}

/* The zero-copy workload for the sweep: six phases (more calls and more
 * checks each than the core's), every kind of failure point. */
static const struct workload zc_workload = {
	.name = "zc",
	.phases = 6,
	.kinds = FI_BIT(FI_NKINDS) - 1,
	.begin = zc_ballast_make,
	.run_phase = zc_run_phase,
	.end = zc_ballast_drop,
	.in_child = zc_private_fds,
};

int main(int argc, char **argv)
{
	(void)argc;
	return fault_sweep_main(&zc_workload, argv);
}
