/*
 * fuzz_hostile.c - libFuzzer target: a shared pipe (PP_SHARED) whose
 * control memory a misbehaving peer writes garbage over, between the calls
 * and during them.
 *
 * One input is a program.  Its first byte chooses the pipe's mode (bit 0:
 * packet mode; bit 1: writes to the lock word may name a live holder, this
 * process or the scribbler, which holds calls up for the lock's one-second
 * give-up, so only inputs that ask for it do: else fuzzing crawls); the pipe is always PP_SHARED | PP_NONBLOCK | PP_NOSIGPIPE,
 * so no call may wait for data or room.  Then one step after another, each
 * a byte OP (OP % 16) and its operands:
 *   0 H SIZE            pp_write of SIZE bytes on write handle H
 *   1 H SIZE S          pp_writev, SIZE split in 2 at S/256
 *   2 H SIZE            pp_read on read handle H
 *   3 H SIZE S          pp_readv, 2 segments
 *   4 H MAX K           pp_peek (MAX % 5 segments), then pp_consume of K/255
 *                       of what was peeked (K = ff: one byte past it)
 *   5 SIDE H            pp_nread, pp_events, pp_getsize, pp_shared_stats
 *   6 SIDE H CAP        pp_setsize (CAP picks one of 0 to 2 GiB)
 *   7 H SIZE            pp_splice_to_fd into a kernel pipe, then drained
 *   8 H SIZE            pp_splice_from_fd out of a kernel pipe
 *   9 H SIZE T          pp_splice (T even) or pp_tee to a private pipe,
 *                       then drained
 *   a SIDE H            pp_dup of a handle
 *   b SIDE H            pp_close of a handle
 *   c R I F V..         a write to the ctl memory, now (see mutate())
 *   d R I F V..         the same, then one more step at once
 *   e S S N K           a scribbler: a forked process that writes
 *                       (N%64+1)*64 words of garbage (chosen by the 16-bit
 *                       seed S S) over the ctl memory while this one runs
 *                       the next K%8+1 steps; then it is killed
 *   f SIDE H            pp_fd, and a poll of it (0f, 2f, 4f, 6f, 8f, af,
 *                       cf, ff; the other bytes ending in f are:)
 *   1f|5f|9f|df H SIZE M  pp_reserve of SIZE bytes in M%72 segments on write
 *                       handle H, filled at once; it stays reserved across
 *                       the steps after it, until a commit or a close
 *   3f|7f|bf|ef H K V   pp_commit on write handle H of K%4 0 nothing, 1
 *                       all reserved, 2 V/255 of it, 3 one byte more
 *                       (EINVAL), its bytes the stream's next ones
 * H picks among the side's open handles (a step is skipped when the side
 * has none).  The scribbler process is what another holder of the pipe
 * could be: it is a fork, so it holds the pipe (the library's fork handler
 * makes it a holder) and maps the same memory.
 *
 * The ctl memory is found through the view behind the handle (src/end.h,
 * src/shm.h: the layout is constants there).  Writes to it never clear
 * PP_NONBLOCK from a description's status flags: those are the open
 * description's, which another process may legitimately change (as
 * fcntl(F_SETFL) on a shared file description), and a blocking call on a
 * pipe nobody else writes would rightly wait forever.
 *
 * Checked after every call: it returned within a bound (the lock's one
 * second give-up, and slack), and returned a count no larger than asked,
 * or -1 with an errno the call documents (EIO for a corrupt pipe, EAGAIN,
 * EPIPE, ...).  pp_reserve's segments must be distinct whole pages of the
 * data memory (it is written to them), EBUSY must come exactly when the
 * handle already has a reservation, pp_commit's EINVAL exactly when it has
 * none (n > 0) or n is more than it has; on a clean pipe a reservation is
 * at most half the capacity and a commit gives n, or EPIPE without a
 * reader.  Every byte a read, peek, splice or tee delivers is a byte
 * some write put into the data memory: this target writes only bytes with
 * the top bit set, so any other byte but 0 (pages never written) came from
 * outside the pipe's data.  Until the first write to the ctl memory the
 * pipe must be exactly a pipe: every read returns the next bytes written,
 * EAGAIN only when it is empty, and no EIO.  At the end every handle is
 * closed, and the process must map nothing of the pipe any more.  A
 * crash, a sanitizer report or a hang (libFuzzer's -timeout, the replay's
 * alarm) fails the input too.
 *
 * Built by tools/fuzz.sh (target "hostile") and #included by
 * test/fuzz_replay.c, which replays test/fuzz/corpus_hostile/ (there the
 * entry point is renamed by defining HF_ENTRY).  test/fuzz/make_seeds.sh
 * writes the seeds.  FUZZ_VERBOSE=1 prints every step.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../memfd_maps.h"
#include "../resv_layout.h"
#include "end.h"
#include "fuzz_report.h"
#include "pagepipe.h"

#ifndef HF_ENTRY
#define HF_ENTRY LLVMFuzzerTestOneInput
#endif
int HF_ENTRY(const uint8_t *data, size_t size);

#define HF_HANDLES 6
#define HF_MAX_IO (3 * 65536)
#define HF_STEPS 64

/* A write handle's reservation: its segments, checked to lie in the data
 * memory when pp_reserve handed them out (it never shrinks). */
struct hf_resv {
	struct pp_end *e; /* NULL: a free record */
	int n;
	size_t bytes;
	struct iovec iov[64];
};

struct hf {
	struct fuzz_report rep;
	struct fuzz_in in;
	struct pp_end *h[2][HF_HANDLES];
	int nh[2];
	unsigned char *ctl;  /* the pipe's ctl memory, as this process maps it */
	unsigned char *data; /* its data memory's reserve */
	struct ppi_shm *shm; /* the process's view */
	bool packet;
	bool stalls;         /* lock words naming a live holder are allowed */
	bool dirty;          /* the ctl memory was written to */
	uint64_t wpos, rpos; /* stream positions: written, read (clean pipe) */
	int kin[2], kout[2]; /* kernel pipes: into the pipe, out of it */
	struct pp_end *priv[2];
	pid_t scribbler;
	int race_left;
	uint64_t bound_ns;
	unsigned char *buf;
	struct hf_resv resv[HF_HANDLES]; /* the write handles' pp_reserve, uncommitted */
};

/* The byte at stream position p: always with the top bit set. */
static inline unsigned char hf_pat(uint64_t p)
{
	return (unsigned char)(0x80 | ((uint32_t)(p * 2654435761u) >> 25));
}

static uint64_t hf_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- the ctl memory ------------------------------------------------------- */

/* Offsets of the words a peer would aim at, from the layout in shm.h. */
#define HF_HDR(f) offsetof(struct ppi_shm_hdr, f)
#define HF_RING(f) (PPI_SHM_RING_OFF + offsetof(struct ppi_ring, f))
#define HF_RX(f) (PPI_SHM_RING_OFF + offsetof(struct ppi_shm_rblock, x) + offsetof(struct ppi_shm_rx, f))
static const size_t hf_hdr_words[] = {
	HF_HDR(lock),         HF_HDR(data_pages), HF_HDR(idle_head),   HF_HDR(idle_count),
	HF_HDR(free_head),    HF_RX(fd_used),     HF_RX(fd_used) + 4,  HF_RX(fd_ready),
	HF_RX(fd_ready) + 4,  HF_RX(geom),        HF_HDR(broken),      HF_HDR(magic),
	HF_HDR(reaped_ns),    HF_RX(used),
};
static const size_t hf_ring_words[] = {
	HF_RING(bytes),      HF_RING(head),        HF_RING(tail),        HF_RING(max_usage),
	HF_RING(reserved),   HF_RING(spin_budget), HF_RING(spin_budget) + 4, HF_RING(handles),
	HF_RING(handles) + 4, HF_RING(sleepers),   HF_RING(sleepers) + 4, HF_RING(seq),
	HF_RING(seq) + 4,    HF_RING(refs),
};
#define HF_N(a) (sizeof(a) / sizeof((a)[0]))

/* Is off inside a description's status flags word? */
static bool hf_is_desc_flags(size_t off)
{
	if (off < PPI_SHM_DESCS_OFF || off >= PPI_SHM_DESCS_OFF + PPI_SHM_DESCS * sizeof(struct ppi_shm_desc))
		return false;
	size_t in = (off - PPI_SHM_DESCS_OFF) % sizeof(struct ppi_shm_desc);
	return in >= offsetof(struct ppi_shm_desc, flags) &&
	       in < offsetof(struct ppi_shm_desc, flags) + sizeof(int);
}

/* Store a 32-bit word at off of the ctl memory (a description's flags keep
 * PP_NONBLOCK, see the top). */
static void hf_store(unsigned char *ctl, size_t off, uint32_t val, bool stalls)
{
	off &= ~(size_t)3;
	if (hf_is_desc_flags(off))
		val |= PP_NONBLOCK;
	/* A lock word naming a live holder (this process is holder 0, a
	 * scribbler one of the next few) holds calls up for the lock's
	 * second: only in inputs that ask for it, or fuzzing crawls. */
	if (off == HF_HDR(lock) && !stalls && (val & ~PPI_LOCK_FLAGS) - 1 < 4)
		val += 4;
	__atomic_store_n((uint32_t *)(ctl + off), val, __ATOMIC_RELAXED);
}

static uint32_t hf_load(unsigned char *ctl, size_t off)
{
	return __atomic_load_n((uint32_t *)(ctl + (off & ~(size_t)3)), __ATOMIC_RELAXED);
}

/* Where a write goes: region R, index I, field F.  Kept to the parts of
 * the memory the pipe uses (its tables are large and sparse). */
static size_t hf_target(unsigned char *ctl, unsigned r, unsigned i, unsigned f)
{
	r &= 0xff, i &= 0xff, f &= 0xff;
	switch (r % 8) {
	case 0:
		return hf_hdr_words[f % HF_N(hf_hdr_words)];
	case 1:
		return hf_ring_words[f % HF_N(hf_ring_words)];
	case 2: /* a slot: area i bit 7, index i % 64; page, flags, offset, len */
		return PPI_SHM_SLOTS_OFF + (i >> 7) * PPI_SHM_SLOTS_SIZE +
		       (i % 64) * sizeof(struct ppi_buf) + (f % 4) * 4;
	case 3: /* a page: owner, next */
		return PPI_SHM_PAGES_OFF + (i % 160) * sizeof(struct ppi_shm_page) + (f % 2) * 4;
	case 4: /* a description: holders, side, flags, ring */
		return PPI_SHM_DESCS_OFF + (i % 4) * sizeof(struct ppi_shm_desc) + (f % 4) * 4;
	case 5: /* a holder: state, pid, sleepers, reserved, handles[0..3] */
		return PPI_SHM_HOLDERS_OFF + (i % 4) * sizeof(struct ppi_shm_holder) +
		       (f % 6 < 5 ? (f % 6) * 4 : offsetof(struct ppi_shm_holder, handles) + (f / 6 % 4) * 4);
	case 6: /* anywhere in the header, ring and descriptions */
		return ((size_t)i << 8 | f) % PPI_SHM_HOLDERS_OFF;
	default: { /* a slot of the area in use, near tail or head */
		uint32_t geom = hf_load(ctl, HF_RX(geom));
		uint32_t at = hf_load(ctl, i & 1 ? HF_RING(head) : HF_RING(tail)) + (i >> 1) % 8 - 4;
		uint32_t mask = (1u << (geom & 0xff & 15)) - 1;
		return PPI_SHM_SLOTS_OFF + ((geom >> 8) & 1) * PPI_SHM_SLOTS_SIZE +
		       (size_t)(at & mask) * sizeof(struct ppi_buf) + (f % 4) * 4;
	}
	}
}

/* A value for a word that holds old. */
static uint32_t hf_value(struct fuzz_in *in, uint32_t old)
{
	unsigned c = fuzz_byte(in);
	switch (c % 16) {
	case 0: return 0;
	case 1: return 1;
	case 2: return old + 1;
	case 3: return old - 1;
	case 4: return 0xffffffffu;
	case 5: return 0x80000000u;
	case 6: return 0x7fffffffu;
	case 7: return old ^ (1u << (c >> 4 << 1));
	case 8: return fuzz_byte(in);
	case 9: return 4096;
	case 10: return 4097;
	case 11: return PPI_SHM_MAX_PAGES;
	case 12: return PPI_SHM_MAX_SLOTS;
	case 13: return old + fuzz_byte(in);
	case 14: return old - fuzz_byte(in);
	default: {
		uint32_t v = fuzz_byte(in);
		v |= (uint32_t)fuzz_byte(in) << 8;
		v |= (uint32_t)fuzz_byte(in) << 16;
		return v | (uint32_t)fuzz_byte(in) << 24;
	}
	}
}

static void hf_mutate(struct hf *f)
{
	unsigned r = fuzz_byte(&f->in), i = fuzz_byte(&f->in), fl = fuzz_byte(&f->in);
	size_t off = hf_target(f->ctl, r, i, fl);
	uint32_t old = hf_load(f->ctl, off), val = hf_value(&f->in, old);
	fuzz_name(&f->rep, "ctl[%#zx] = %#x (was %#x)", off, val, old);
	hf_store(f->ctl, off, val, f->stalls);
	f->dirty = true;
}

/* ---- the scribbler ------------------------------------------------------------ */

static uint32_t hf_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

/* The forked peer: n words of garbage, a pause now and then, then exit. */
__attribute__((noreturn)) static void hf_scribble(unsigned char *ctl, uint64_t seed, unsigned n,
                                                  bool stalls)
{
	for (unsigned k = 0; k < n; k++) {
		uint32_t a = hf_rand(&seed), b = hf_rand(&seed);
		size_t off = hf_target(ctl, a, a >> 8, a >> 16);
		uint32_t old = hf_load(ctl, off), val;
		switch (b % 8) {
		case 0: val = 0; break;
		case 1: val = old + 1; break;
		case 2: val = old - 1; break;
		case 3: val = b >> 3; break;
		case 4: val = (b >> 3) & 0xff; break;
		case 5: val = 0x80000000u | ((b >> 3) & 0x3ff); break;
		case 6: val = old ^ (1u << (b >> 27)); break;
		default: val = old; break;
		}
		hf_store(ctl, off, val, stalls);
		if (k % 32 == 31) {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
	}
	_exit(0);
}

static void hf_scribbler_stop(struct hf *f)
{
	if (f->scribbler <= 0)
		return;
	kill(f->scribbler, SIGKILL);
	while (waitpid(f->scribbler, NULL, 0) < 0 && errno == EINTR)
		;
	f->scribbler = 0;
	f->race_left = 0;
}

/* ---- checks ---------------------------------------------------------------- */

/* Did the call return in time? */
static void hf_timed(struct hf *f, uint64_t t0)
{
	uint64_t took = hf_now() - t0;
	FUZZ_CHECK(&f->rep, took <= f->bound_ns, "the call took %.3f s (bound %.3f s)", took / 1e9,
	           f->bound_ns / 1e9);
	/* A lock word naming a live holder (ours, or the scribbler's) holds
	 * every call up for the lock's second: let go of it, as that peer
	 * would, so an input costs seconds at most. */
	if (took > 200 * 1000000ull && f->nh[0] + f->nh[1])
		hf_store(f->ctl, HF_HDR(lock), 0, true);
}

/* -1 is allowed only with one of the errnos in the 0-ended list. */
static void hf_ret(struct hf *f, long ret, int err, size_t max, const int *errs)
{
	if (f->rep.verbose)
		fprintf(stderr, "    -> %ld %s\n", ret, ret < 0 ? strerror(err) : "");
	if (ret >= 0) {
		FUZZ_CHECK(&f->rep, (size_t)ret <= max, "returned %ld, more than the %zu asked", ret, max);
		return;
	}
	FUZZ_CHECK(&f->rep, ret == -1, "returned %ld", ret);
	for (const int *e = errs; *e; e++)
		if (err == *e)
			return;
	FUZZ_CHECK(&f->rep, 0, "failed with errno %d (%s), not one this call may give", err,
	           strerror(err));
}

static const int hf_rd_errs[] = { EAGAIN, EIO, 0 };
static const int hf_wr_errs[] = { EAGAIN, EPIPE, EIO, ENOMEM, 0 };

/* Bytes delivered out of the pipe, n of them at p. */
static void hf_delivered(struct hf *f, const unsigned char *p, size_t n, bool consumes)
{
	if (!n)
		return;
	if (f->dirty) {
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(&f->rep, p[i] == 0 || (p[i] & 0x80),
			           "byte %zu of %zu delivered is %#x: no write wrote it", i, n, p[i]);
		return;
	}
	/* A clean pipe: the next bytes; in packet mode a read may have
	 * dropped the rest of a packet before them. */
	uint64_t at = f->rpos;
	for (;;) {
		FUZZ_CHECK(&f->rep, at + n <= f->wpos,
		           "%zu bytes delivered are not the bytes written at %llu..%llu", n,
		           (unsigned long long)f->rpos, (unsigned long long)f->wpos);
		size_t i = 0;
		while (i < n && p[i] == hf_pat(at + i))
			i++;
		if (i == n)
			break;
		FUZZ_CHECK(&f->rep, f->packet, "byte %zu of %zu delivered is %#x, want %#x", i, n, p[i],
		           hf_pat(at + i));
		at++;
	}
	if (consumes)
		f->rpos = at + n;
}

/* A clean stream pipe with no data must say EAGAIN, one with data give some. */
static void hf_clean_read(struct hf *f, long ret, int err, size_t asked)
{
	if (f->dirty || !asked)
		return;
	FUZZ_CHECK(&f->rep, ret >= 0 || err != EIO, "EIO on a pipe nobody wrote over");
	bool have = f->wpos > f->rpos;
	if (!f->packet && have)
		FUZZ_CHECK(&f->rep, ret > 0, "returned %ld with %llu bytes in the pipe", ret,
		           (unsigned long long)(f->wpos - f->rpos));
	if (!have && f->nh[1])
		FUZZ_CHECK(&f->rep, ret == -1 && err == EAGAIN, "returned %ld on an empty pipe", ret);
}

/* ---- steps ------------------------------------------------------------------ */

/* The reservation record of write handle e (NULL: none). */
static struct hf_resv *hf_resv_of(struct hf *f, struct pp_end *e)
{
	for (int i = 0; i < HF_HANDLES; i++)
		if (f->resv[i].e == e)
			return &f->resv[i];
	return NULL;
}

static struct pp_end *hf_handle(struct hf *f, int side)
{
	unsigned c = fuzz_byte(&f->in);
	return f->nh[side] ? f->h[side][c % f->nh[side]] : NULL;
}

static void hf_fill(struct hf *f, unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = hf_pat(f->wpos + i);
}

static void hf_write(struct hf *f, bool vec)
{
	struct pp_end *e = hf_handle(f, 1);
	size_t n = fuzz_size(&f->in, HF_MAX_IO);
	size_t s = vec ? n * fuzz_byte(&f->in) / 256 : n;
	if (!e)
		return;
	fuzz_name(&f->rep, "pp_write%s(%zu)", vec ? "v" : "", n);
	hf_fill(f, f->buf, n);
	struct iovec iov[2] = { { f->buf, s }, { f->buf + s, n - s } };
	uint64_t t0 = hf_now();
	ssize_t ret = vec ? pp_writev(e, iov, 2) : pp_write(e, f->buf, n);
	int err = errno;
	hf_timed(f, t0);
	hf_ret(f, ret, err, n, hf_wr_errs);
	if (!f->dirty)
		FUZZ_CHECK(&f->rep, ret >= 0 || err == (f->nh[0] ? EAGAIN : EPIPE),
		           "write failed (%s) on a clean pipe", strerror(err));
	if (ret > 0)
		f->wpos += (uint64_t)ret;
}

static void hf_read(struct hf *f, bool vec)
{
	struct pp_end *e = hf_handle(f, 0);
	size_t n = fuzz_size(&f->in, HF_MAX_IO);
	size_t s = vec ? n * fuzz_byte(&f->in) / 256 : n;
	if (!e)
		return;
	fuzz_name(&f->rep, "pp_read%s(%zu)", vec ? "v" : "", n);
	memset(f->buf, 0x11, n);
	struct iovec iov[2] = { { f->buf, s }, { f->buf + s, n - s } };
	uint64_t t0 = hf_now();
	ssize_t ret = vec ? pp_readv(e, iov, 2) : pp_read(e, f->buf, n);
	int err = errno;
	hf_timed(f, t0);
	hf_ret(f, ret, err, n, hf_rd_errs);
	hf_clean_read(f, ret, err, n);
	if (ret > 0)
		hf_delivered(f, f->buf, (size_t)ret, true);
}

static void hf_peek(struct hf *f)
{
	struct pp_end *e = hf_handle(f, 0);
	int max = (int)(fuzz_byte(&f->in) % 5);
	unsigned k = fuzz_byte(&f->in);
	if (!e)
		return;
	fuzz_name(&f->rep, "pp_peek(%d)", max);
	struct iovec iov[4];
	uint64_t t0 = hf_now();
	ssize_t ret = pp_peek(e, iov, max);
	int err = errno;
	hf_timed(f, t0);
	hf_ret(f, ret, err, (size_t)max, hf_rd_errs);
	size_t total = 0;
	for (ssize_t i = 0; i < ret; i++) {
		unsigned char *b = iov[i].iov_base;
		size_t len = iov[i].iov_len;
		size_t mapped = LOAD(f->shm->m->mapped);
		FUZZ_CHECK(&f->rep,
		           len <= PP_PAGE_SIZE && b >= f->data + PP_PAGE_SIZE &&
		               b + len <= f->data + mapped * PP_PAGE_SIZE,
		           "segment %zd (%p, %zu) is outside the data memory [%p, %p)", i, (void *)b, len,
		           (void *)(f->data + PP_PAGE_SIZE), (void *)(f->data + mapped * PP_PAGE_SIZE));
		if (f->dirty) {
			hf_delivered(f, b, len, false);
		} else if (!f->packet) { /* the segments are the next bytes, in order */
			uint64_t keep = f->rpos;
			f->rpos += total;
			hf_delivered(f, b, len, false);
			f->rpos = keep;
		}
		total += len;
	}
	size_t n = k == 0xff ? total + 1 : total * k / 255;
	fuzz_name(&f->rep, "pp_consume(%zu) of %zu peeked", n, total);
	t0 = hf_now();
	ret = pp_consume(e, n);
	err = errno;
	hf_timed(f, t0);
	static const int errs[] = { EINVAL, EIO, 0 };
	hf_ret(f, ret, err, n, errs);
	/* (In packet mode the next read's bytes are searched for from rpos
	 * on, which covers what a consume took.) */
	if (!f->dirty && !f->packet) {
		if (n <= total)
			FUZZ_CHECK(&f->rep, ret == (ssize_t)n, "consume of %zu peeked bytes: %zd", n, ret);
		if (ret > 0)
			f->rpos += (uint64_t)ret;
	}
}

static void hf_look(struct hf *f)
{
	int side = fuzz_byte(&f->in) & 1;
	struct pp_end *e = hf_handle(f, side);
	if (!e)
		return;
	fuzz_name(&f->rep, "pp_nread, pp_events, pp_getsize, pp_shared_stats (side %d)", side);
	uint64_t t0 = hf_now();
	int nr = side == 0 ? pp_nread(e) : 0;
	short ev = pp_events(e);
	long sz = pp_getsize(e);
	struct pp_shared_stats st;
	int sr = pp_shared_stats(e, &st);
	int err = errno;
	hf_timed(f, t0);
	FUZZ_CHECK(&f->rep, nr >= 0 || (nr == -1 && errno == EIO), "pp_nread: %d", nr);
	FUZZ_CHECK(&f->rep, ev >= 0, "pp_events: %d", ev);
	FUZZ_CHECK(&f->rep, sz > 0 || (f->dirty && sz >= 0), "pp_getsize: %ld", sz);
	FUZZ_CHECK(&f->rep, sr == 0 || (sr == -1 && err == EIO), "pp_shared_stats: %d (%s)", sr,
	           strerror(err));
	if (!f->dirty) {
		if (side == 0 && !f->packet)
			FUZZ_CHECK(&f->rep, (uint64_t)nr == f->wpos - f->rpos, "pp_nread %d, want %llu", nr,
			           (unsigned long long)(f->wpos - f->rpos));
		FUZZ_CHECK(&f->rep, sr == 0, "pp_shared_stats failed on a clean pipe");
	}
}

static void hf_setsize(struct hf *f)
{
	int side = fuzz_byte(&f->in) & 1;
	struct pp_end *e = hf_handle(f, side);
	static const size_t caps[] = { 0, 1, 4096, 8192, 16384, 65536, 65537, 1 << 20, (size_t)1 << 31 };
	size_t cap = caps[fuzz_byte(&f->in) % HF_N(caps)];
	if (!e)
		return;
	fuzz_name(&f->rep, "pp_setsize(%zu)", cap);
	uint64_t t0 = hf_now();
	long ret = pp_setsize(e, cap);
	int err = errno;
	hf_timed(f, t0);
	static const int errs[] = { EINVAL, EBUSY, EPERM, ENOMEM, EIO, 0 };
	hf_ret(f, ret, err, LONG_MAX, errs);
}

static void hf_splice_fd(struct hf *f, bool out)
{
	struct pp_end *e = hf_handle(f, out ? 0 : 1);
	size_t n = fuzz_size(&f->in, 65536);
	if (!e)
		return;
	static const int errs[] = { EAGAIN, EPIPE, EIO, ENOMEM, 0 };
	if (out) {
		fuzz_name(&f->rep, "pp_splice_to_fd(%zu)", n);
		uint64_t t0 = hf_now();
		ssize_t ret = pp_splice_to_fd(e, f->kout[1], NULL, n, PP_SPLICE_NONBLOCK);
		int err = errno;
		hf_timed(f, t0);
		hf_ret(f, ret, err, n, errs);
		hf_clean_read(f, ret, err, n);
		ssize_t got = ret > 0 ? read(f->kout[0], f->buf, (size_t)ret) : 0;
		FUZZ_CHECK(&f->rep, got == (ret > 0 ? ret : 0), "the kernel pipe holds %zd, not %zd", got,
		           ret);
		if (got > 0)
			hf_delivered(f, f->buf, (size_t)got, true);
		return;
	}
	fuzz_name(&f->rep, "pp_splice_from_fd(%zu)", n);
	hf_fill(f, f->buf, n);
	ssize_t put = n ? write(f->kin[1], f->buf, n) : 0;
	FUZZ_CHECK(&f->rep, put == (ssize_t)n, "the kernel pipe took %zd of %zu", put, n);
	uint64_t t0 = hf_now();
	ssize_t ret = pp_splice_from_fd(f->kin[0], NULL, e, n, PP_SPLICE_NONBLOCK);
	int err = errno;
	hf_timed(f, t0);
	hf_ret(f, ret, err, n, errs);
	if (ret > 0)
		f->wpos += (uint64_t)ret;
	while (read(f->kin[0], f->buf, HF_MAX_IO) > 0) /* what it left never went in */
		;
}

static void hf_splice_pipe(struct hf *f)
{
	struct pp_end *e = hf_handle(f, 0);
	size_t n = fuzz_size(&f->in, 65536);
	bool tee = fuzz_byte(&f->in) & 1;
	if (!e)
		return;
	fuzz_name(&f->rep, "pp_%s(%zu) to a private pipe", tee ? "tee" : "splice", n);
	uint64_t t0 = hf_now();
	ssize_t ret = tee ? pp_tee(e, f->priv[1], n, PP_SPLICE_NONBLOCK)
	                  : pp_splice(e, f->priv[1], n, PP_SPLICE_NONBLOCK);
	int err = errno;
	hf_timed(f, t0);
	static const int errs[] = { EAGAIN, EIO, ENOMEM, 0 };
	hf_ret(f, ret, err, n, errs);
	if (!tee)
		hf_clean_read(f, ret, err, n);
	size_t got = 0;
	ssize_t k;
	while (got < HF_MAX_IO && (k = pp_read(f->priv[0], f->buf + got, HF_MAX_IO - got)) > 0)
		got += (size_t)k;
	FUZZ_CHECK(&f->rep, got == (size_t)(ret > 0 ? ret : 0), "the private pipe holds %zu, not %zd",
	           got, ret);
	if (got) {
		uint64_t keep = f->rpos;
		hf_delivered(f, f->buf, got, true);
		if (tee)
			f->rpos = keep; /* tee leaves the bytes there */
	}
}

static void hf_dup_close(struct hf *f, bool close_it)
{
	int side = fuzz_byte(&f->in) & 1;
	unsigned c = fuzz_byte(&f->in);
	if (!f->nh[side])
		return;
	unsigned i = c % f->nh[side];
	uint64_t t0 = hf_now();
	if (!close_it) {
		if (f->nh[side] == HF_HANDLES)
			return;
		fuzz_name(&f->rep, "pp_dup(side %d handle %u)", side, i);
		struct pp_end *d = pp_dup(f->h[side][i]);
		int err = errno;
		hf_timed(f, t0);
		FUZZ_CHECK(&f->rep, d || err == EIO || err == ENOMEM, "pp_dup: %s", strerror(err));
		FUZZ_CHECK(&f->rep, d || f->dirty, "pp_dup failed on a clean pipe");
		if (d)
			f->h[side][f->nh[side]++] = d;
		return;
	}
	fuzz_name(&f->rep, "pp_close(side %d handle %u)", side, i);
	/* The last handle of the pipe unmaps it: the scribbler must be gone. */
	if (f->nh[0] + f->nh[1] == 1)
		hf_scribbler_stop(f);
	struct pp_end *e = f->h[side][i];
	f->h[side][i] = f->h[side][--f->nh[side]];
	struct hf_resv *r = side ? hf_resv_of(f, e) : NULL;
	if (r) /* pp_close gives it back */
		r->e = NULL;
	int ret = pp_close(e);
	int err = errno;
	hf_timed(f, t0);
	FUZZ_CHECK(&f->rep, ret == 0 || err == EIO, "pp_close: %s", strerror(err));
	FUZZ_CHECK(&f->rep, ret == 0 || f->dirty, "pp_close failed on a clean pipe");
}

static void hf_fd(struct hf *f)
{
	int side = fuzz_byte(&f->in) & 1;
	struct pp_end *e = hf_handle(f, side);
	if (!e)
		return;
	fuzz_name(&f->rep, "pp_fd(side %d) and poll", side);
	uint64_t t0 = hf_now();
	int fd = pp_fd(e);
	int err = errno;
	hf_timed(f, t0);
	FUZZ_CHECK(&f->rep, fd >= 0 || err == EIO, "pp_fd: %s", strerror(err));
	if (fd >= 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		FUZZ_CHECK(&f->rep, poll(&p, 1, 0) >= 0, "poll: %s", strerror(errno));
	}
}

/* A byte put in reserved space before the commit decides what it holds:
 * the top bit set (every byte this target writes has it), but not the
 * stream's byte at that place, so a page a reader sees too early shows. */
static inline unsigned char hf_resv_pat(size_t i)
{
	return (unsigned char)(0x80 | ((i * 13 + 5) & 0x7f));
}

/*
 * pp_reserve on write handle H of SIZE bytes in M%72 segments.  EBUSY
 * exactly when the handle has a reservation (that state is the handle's,
 * in this process: no write to the shared memory changes it); else the
 * segments handed out (their pages at most M, 64, and on a clean pipe
 * half its capacity) or an error a write may give.  The segments must be
 * runs of whole pages of the data memory (the last one shorter), no two
 * overlapping, none beginning where the one before ends (one page each in
 * packet mode); they are filled at once
 * (so a page that is also in the ring shows as other bytes on a clean
 * pipe) and stay reserved across the steps that follow.
 */
static void hf_reserve(struct hf *f)
{
	struct pp_end *e = hf_handle(f, 1);
	size_t len = fuzz_size(&f->in, HF_MAX_IO);
	int max = (int)(fuzz_byte(&f->in) % 72);
	if (!e)
		return;
	struct hf_resv *held = hf_resv_of(f, e), *r = held ? held : hf_resv_of(f, NULL);
	long cap = f->dirty ? 0 : pp_getsize(e) / PP_PAGE_SIZE;
	fuzz_name(&f->rep, "pp_reserve(%zu, max %d)%s", len, max, held ? " (holds one)" : "");
	struct iovec iov[72];
	uint64_t t0 = hf_now();
	ssize_t ret = pp_reserve(e, iov, max, len);
	int err = errno;
	hf_timed(f, t0);
	static const int errs[] = { EAGAIN, EPIPE, EIO, ENOMEM, EBUSY, 0 };
	hf_ret(f, ret, err, (size_t)(max < 64 ? max : 64), errs);
	FUZZ_CHECK(&f->rep, (ret == -1 && err == EBUSY) == !!held,
	           "returned %zd (%s), the handle %s a reservation", ret, ret < 0 ? strerror(err) : "-",
	           held ? "has" : "has no");
	if (!f->dirty && !held) {
		if (!max || !len)
			FUZZ_CHECK(&f->rep, ret == 0, "returned %zd for nothing asked", ret);
		else if (!f->nh[0])
			FUZZ_CHECK(&f->rep, ret == -1 && err == EPIPE, "no reader, yet %zd (%s)", ret,
			           ret < 0 ? strerror(err) : "-");
		else
			FUZZ_CHECK(&f->rep, ret > 0 || err == EAGAIN, "failed (%s) on a clean pipe",
			           strerror(err));
	}
	if (ret <= 0)
		return;
	long pages = resv_layout_pages(iov, ret, len, f->packet);
	FUZZ_CHECK(&f->rep, pages > 0, "the %zd segments for %zu bytes are not runs of whole pages%s",
	           ret, len, f->packet ? " (packet mode: a page each)" : "");
	size_t mapped = LOAD(f->shm->m->mapped), at = 0;
	for (ssize_t i = 0; i < ret; i++) {
		unsigned char *b = iov[i].iov_base;
		size_t c = iov[i].iov_len, span = (c + PP_PAGE_SIZE - 1) & ~(size_t)(PP_PAGE_SIZE - 1);
		FUZZ_CHECK(&f->rep,
		           b >= f->data + PP_PAGE_SIZE && b + span <= f->data + mapped * PP_PAGE_SIZE,
		           "segment %zd (%p, %zu bytes) is not in the data memory [%p, %p)", i,
		           (void *)b, c, (void *)(f->data + PP_PAGE_SIZE),
		           (void *)(f->data + mapped * PP_PAGE_SIZE));
		for (ssize_t j = 0; j < i; j++) {
			unsigned char *o = iov[j].iov_base;
			FUZZ_CHECK(&f->rep, o + iov[j].iov_len <= b || b + c <= o,
			           "segments %zd and %zd overlap", j, i);
		}
		for (size_t k = 0; k < c; k++)
			b[k] = hf_resv_pat(at + k);
		at += c;
	}
	FUZZ_CHECK(&f->rep, pages <= (max < 64 ? max : 64), "%ld pages for max %d", pages, max);
	if (!f->dirty && !held) {
		long half = cap / 2 > 1 ? cap / 2 : 1;
		FUZZ_CHECK(&f->rep, pages <= half, "%ld pages of a %ld-page shared pipe: more than half",
		           pages, cap);
	}
	FUZZ_CHECK(&f->rep, r != NULL, "more reservations than write handles");
	*r = (struct hf_resv){ .e = e, .n = (int)ret, .bytes = at };
	memcpy(r->iov, iov, (size_t)ret * sizeof iov[0]);
}

/*
 * pp_commit on write handle H: K%4 0 nothing, 1 all reserved, 2 V/255 of
 * it, 3 one byte more (EINVAL: it stays).  What the handle has reserved
 * is known here, so: without a reservation 0 for 0, else EINVAL; past it
 * EINVAL; else n, or EPIPE (a clean pipe: exactly when no reader is left
 * and n > 0), and the reservation is over; or EIO (the lock could not be
 * had), and it stays, to commit again.  The first n bytes are the
 * stream's next ones, put in place just before.
 */
static void hf_commit(struct hf *f)
{
	struct pp_end *e = hf_handle(f, 1);
	unsigned k = fuzz_byte(&f->in), v = fuzz_byte(&f->in);
	if (!e)
		return;
	struct hf_resv *r = hf_resv_of(f, e);
	size_t have = r ? r->bytes : 0, n;
	switch (k % 4) {
	case 0: n = 0; break;
	case 1: n = have; break;
	case 2: n = have * v / 255; break;
	default: n = have + 1; break;
	}
	fuzz_name(&f->rep, "pp_commit(%zu of %zu reserved)", n, have);
	if (r && n <= have) {
		size_t at = 0;
		for (int i = 0; i < r->n && at < n; i++) {
			unsigned char *b = r->iov[i].iov_base;
			size_t c = n - at < r->iov[i].iov_len ? n - at : r->iov[i].iov_len;
			for (size_t j = 0; j < c; j++)
				b[j] = hf_pat(f->wpos + at + j);
			at += c;
		}
	}
	uint64_t t0 = hf_now();
	ssize_t ret = pp_commit(e, n);
	int err = errno;
	hf_timed(f, t0);
	static const int errs[] = { EINVAL, EPIPE, EIO, 0 };
	hf_ret(f, ret, err, n, errs);
	if (!r || n > have) {
		FUZZ_CHECK(&f->rep, n ? ret == -1 && err == EINVAL : ret == 0,
		           "returned %zd (%s), want %s", ret, ret < 0 ? strerror(err) : "-",
		           n ? "EINVAL" : "0");
		return;
	}
	FUZZ_CHECK(&f->rep, ret == (ssize_t)n || (ret == -1 && (err == EPIPE || err == EIO)),
	           "returned %zd (%s), want %zu, EPIPE or EIO", ret, ret < 0 ? strerror(err) : "-", n);
	if (!f->dirty)
		FUZZ_CHECK(&f->rep, n && !f->nh[0] ? ret == -1 && err == EPIPE : ret == (ssize_t)n,
		           "returned %zd (%s) on a clean pipe with %d readers", ret,
		           ret < 0 ? strerror(err) : "-", f->nh[0]);
	if (ret > 0)
		f->wpos += (uint64_t)ret;
	if (!(ret == -1 && err == EIO))
		r->e = NULL; /* over; after EIO it is still the handle's */
}

static void hf_race(struct hf *f)
{
	uint64_t seed = fuzz_byte(&f->in);
	seed |= (uint64_t)fuzz_byte(&f->in) << 8;
	unsigned n = (fuzz_byte(&f->in) % 64 + 1) * 64;
	unsigned k = fuzz_byte(&f->in) % 8 + 1;
	if (f->scribbler > 0 || !f->nh[0] + !f->nh[1] == 2)
		return;
	fuzz_name(&f->rep, "a scribbler (seed %llu, %u words) for %u steps",
	          (unsigned long long)seed, n, k);
	fflush(NULL);
	pid_t pid = fork();
	FUZZ_CHECK(&f->rep, pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		hf_scribble(f->ctl, seed, n, f->stalls);
	f->scribbler = pid;
	f->race_left = (int)k;
	f->dirty = true;
}

static void hf_step(struct hf *f, unsigned op)
{
	switch (op % 16) {
	case 0: hf_write(f, false); break;
	case 1: hf_write(f, true); break;
	case 2: hf_read(f, false); break;
	case 3: hf_read(f, true); break;
	case 4: hf_peek(f); break;
	case 5: hf_look(f); break;
	case 6: hf_setsize(f); break;
	case 7: hf_splice_fd(f, true); break;
	case 8: hf_splice_fd(f, false); break;
	case 9: hf_splice_pipe(f); break;
	case 10: hf_dup_close(f, false); break;
	case 11: hf_dup_close(f, true); break;
	case 12: hf_mutate(f); break;
	case 13: hf_mutate(f); hf_step(f, fuzz_byte(&f->in) % 12); break;
	case 14: hf_race(f); break;
	default: /* 0f, 2f, 4f, 6f, 8f, af, cf, ff (as in inputs made before
	          * the others came) */
		switch (op) {
		case 0x1f: case 0x5f: case 0x9f: case 0xdf: hf_reserve(f); break;
		case 0x3f: case 0x7f: case 0xbf: case 0xef: hf_commit(f); break;
		default: hf_fd(f); break;
		}
		break;
	}
}

/* ---- the run ---------------------------------------------------------------- */

int HF_ENTRY(const uint8_t *data, size_t size)
{
	static struct hf f;
	static bool setup;
	if (!setup) {
		fuzz_setup(&f.rep);
		setup = true;
	}
	bool verbose = f.rep.verbose;
	f = (struct hf){ .rep = { .target = "fuzz_hostile", .verbose = verbose },
		         .in = { data, size } };
	const char *vg = getenv("PP_VALGRIND");
	f.bound_ns = (vg && *vg == '1' ? 20 : 4) * 1000000000ull;
	unsigned mode = fuzz_byte(&f.in);
	f.packet = mode & 1;
	f.stalls = mode & 2;
	struct pp_end *ends[2];
	int fl = PP_SHARED | PP_NONBLOCK | PP_NOSIGPIPE | (f.packet ? PP_PACKET : 0);
	FUZZ_CHECK(&f.rep, pp_pipe(ends, fl) == 0, "pp_pipe: %s", strerror(errno));
	f.h[0][0] = ends[0];
	f.h[1][0] = ends[1];
	f.nh[0] = f.nh[1] = 1;
	f.ctl = (unsigned char *)ends[0]->shm->hdr;
	f.data = ends[0]->shm->data;
	f.shm = ends[0]->shm;
	FUZZ_CHECK(&f.rep, pp_pipe(f.priv, PP_NONBLOCK | PP_NOSIGPIPE) == 0, "pp_pipe: %s",
	           strerror(errno));
	FUZZ_CHECK(&f.rep, pipe2(f.kin, O_NONBLOCK | O_CLOEXEC) == 0 &&
	                       pipe2(f.kout, O_NONBLOCK | O_CLOEXEC) == 0,
	           "pipe2: %s", strerror(errno));
	fcntl(f.kin[0], F_SETPIPE_SZ, 1 << 18);
	fcntl(f.kout[0], F_SETPIPE_SZ, 1 << 18);
	f.buf = malloc(HF_MAX_IO + 1);
	FUZZ_CHECK(&f.rep, f.buf, "out of memory");

	for (f.rep.step = 1; f.in.n && f.rep.step <= HF_STEPS && f.nh[0] + f.nh[1]; f.rep.step++) {
		hf_step(&f, fuzz_byte(&f.in));
		if (f.scribbler > 0 && --f.race_left <= 0)
			hf_scribbler_stop(&f);
	}
	hf_scribbler_stop(&f);

	for (int s = 0; s < 2; s++)
		while (f.nh[s]) {
			fuzz_name(&f.rep, "pp_close at the end (side %d)", s);
			uint64_t t0 = hf_now();
			struct pp_end *e = f.h[s][--f.nh[s]];
			struct hf_resv *r = s ? hf_resv_of(&f, e) : NULL;
			if (r)
				r->e = NULL;
			int ret = pp_close(e);
			int err = errno;
			hf_timed(&f, t0);
			FUZZ_CHECK(&f.rep, ret == 0 || (f.dirty && err == EIO), "pp_close: %s",
			           strerror(err));
		}
	fuzz_name(&f.rep, "the end");
	int maps = 0;
	long ctl = memfd_mapped("pagepipe-ctl", &maps), dat = memfd_mapped("pagepipe-data", NULL);
	FUZZ_CHECK(&f.rep, ctl == 0 && dat == 0,
	           "every handle is closed, yet %ld bytes of ctl and %ld of data are mapped", ctl, dat);
	pp_close(f.priv[0]);
	pp_close(f.priv[1]);
	close(f.kin[0]);
	close(f.kin[1]);
	close(f.kout[0]);
	close(f.kout[1]);
	free(f.buf);
	f.buf = NULL;
	return 0;
}
