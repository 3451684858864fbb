/*
 * capture_procs.c - one stream, written once, read by two processes each at
 * its own pace: the "capture -> encoder + display" case of issue 15, as
 * three processes and no byte copied between them.
 *
 * The capture process makes video-like frames straight in the pages of a
 * PP_SHARED source pipe (pp_reserve, pp_commit), once, and fans each frame
 * out with pp_fanout into two pipes made by pp_pipe_in in the same shared
 * memory, so both get references to the same pages:
 *
 *   capture --(source, 128 KiB)--> pp_fanout --(4 MiB)---> encoder
 *                                            \-(256 KiB)-> display
 *
 * The encoder reads every frame out with pp_read, checks its header and
 * pixels and computes a CRC-32 of it, bit by bit on purpose: that is the
 * work that makes it the slow consumer, and its 4 MiB pipe (pp_setsize,
 * after pp_setmaxsize) lets it lag about 68 frames behind.  The display
 * checks every frame where it lies (pp_peek, pp_consume): it is fast.
 * Each lags on its own, as far as its pipe's capacity lets it; the capture
 * waits only when a pipe is full.  A frame is a 16-byte header (number,
 * length) and pixels computed from the frame's number and the offset; the
 * consumers check the header and every pixel against the frame's place in
 * the stream, so a lost, repeated or torn frame is seen.
 *
 * What it prints.  Each consumer: the frames and bytes it received, and
 * "all intact" or the first bad frame; and its lag: each time it comes
 * back for more data (after a frame, or after a batch of pages), it takes
 * pp_nread of its read end, the bytes the capture has already fanned out
 * to it that it has not yet taken; the largest of these, divided by the
 * frame size, is how many frames it was behind the fan-out at worst.  (It
 * leaves out the at most one frame still in the source pipe, and says
 * nothing of time.)  The capture: the frames it wrote, and the peak of
 * pp_shared_stats' pages_in_ring over the run, sampled after every
 * pp_fanout call: pages of the memory that the three rings name, each
 * counted once however many rings name it.  Beside it, at the same
 * samples, the pages the three pipes' contents would take if each held its
 * own copy (pp_nread of each, in pages), and the two bounds: the largest
 * output pipe's capacity plus the source pipe's (data held once) against
 * the sum of all three capacities (a copy per pipe).  The first bound
 * holds because pp_fanout gives both outputs the same bytes at once: their
 * contents are two tails of one stream, so together they name no more
 * pages than the longer one (a dead reader's pipe too, until the capture
 * closes it, which frees it).  A peak above it fails the run.
 *
 * Lagging on its own has a limit: once the encoder's pipe is full,
 * pp_fanout waits for room in it, so the capture and then the display go
 * at the encoder's pace.  Its pipe's capacity is how far behind it may fall
 * before it holds the others back; a consumer that must never do that
 * needs a pipe as deep as its worst lag (or to be dropped).
 *
 * A consumer that dies: a pp_fanout of the capture fails with EPIPE (at
 * the latest once the dead one's pipe is full; the output pipes have
 * PP_NOSIGPIPE, so it is no signal), and pp_events says POLLERR on the
 * dead one's write end; the capture closes that end, says so, and goes on
 * with the other.  --kill-display-after N makes the display kill itself (SIGKILL)
 * after N frames, to show it: the encoder still gets every frame.
 *
 * Exit status: 0 when the encoder and the display (unless told to die)
 * got every frame intact and the data was held once; 1 otherwise; 2 for
 * a usage or setup error.
 *
 * Usage: capture_procs [FRAMES] [--kill-display-after N]
 *        (default 2000 frames of 60 KiB, 117 MiB; `make demo-capture`)
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"

#define FRAME (60 * 1024)           /* bytes of a frame, header included */
#define SRC_SIZE (128 * 1024)       /* the source pipe: a frame per reservation */
#define ENC_SIZE (4 * 1024 * 1024)  /* the encoder's pipe: it may lag far */
#define DISP_SIZE (256 * 1024)      /* the display's pipe */
#define NONE UINT64_MAX

struct header {
	uint64_t number;
	uint64_t length; /* of the whole frame, header included */
};

/* Pixel i of frame n: what the capture computes and the consumers expect. */
static inline unsigned char pixel(uint64_t n, size_t i)
{
	return (unsigned char)(n * 31 + i * 7 + (i >> 9));
}

/* Make bytes [from, from + len) of frame number n at p. */
static void make_part(unsigned char *p, uint64_t n, size_t from, size_t len)
{
	struct header h = { n, FRAME };
	size_t i = 0;
	for (; i < len && from + i < sizeof h; i++)
		p[i] = ((unsigned char *)&h)[from + i];
	for (; i < len; i++)
		p[i] = pixel(n, from + i);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

/* ---- the consumers' check ------------------------------------------------ */

/* A stream of frames checked byte by byte, in pieces of any size. */
struct check {
	uint64_t frames;    /* whole frames seen */
	uint64_t bytes;
	size_t pos;         /* offset in the current frame */
	struct header h;    /* the current frame's header, as it arrives */
	unsigned char diff; /* nonzero: a pixel of the current frame is wrong */
	uint64_t first_bad; /* the first bad frame's place in the stream, or NONE */
	int lag;            /* the most bytes seen waiting in the pipe */
};

static void check_bytes(struct check *c, const unsigned char *p, size_t len)
{
	c->bytes += len;
	while (len) {
		if (c->pos < sizeof c->h) {
			((unsigned char *)&c->h)[c->pos++] = *p++;
			len--;
			continue;
		}
		size_t run = FRAME - c->pos < len ? FRAME - c->pos : len;
		unsigned char d = 0;
		for (size_t i = 0; i < run; i++) /* frame n is the n-th of the stream */
			d |= (unsigned char)(p[i] ^ pixel(c->frames, c->pos + i));
		c->diff |= d;
		c->pos += run;
		p += run;
		len -= run;
		if (c->pos == FRAME) {
			bool bad = c->diff || c->h.number != c->frames || c->h.length != FRAME;
			if (bad && c->first_bad == NONE)
				c->first_bad = c->frames;
			c->frames++;
			c->pos = 0;
			c->diff = 0;
		}
	}
}

/* Note how far behind the fan-out the consumer is, as it comes back for more. */
static void sample_lag(struct check *c, struct pp_end *r)
{
	int q = pp_nread(r);
	if (q > c->lag)
		c->lag = q;
}

/* The consumer's report, flushed at once (so that the processes' lines do
 * not mix); 0 when it got `want` frames intact. */
static int report(const char *who, const struct check *c, uint64_t want, long cap, double secs,
                  const char *extra)
{
	char ok[96];
	if (c->first_bad != NONE)
		snprintf(ok, sizeof ok, "BAD: first bad frame is #%" PRIu64, c->first_bad);
	else if (c->pos)
		snprintf(ok, sizeof ok, "BAD: a torn frame at the end (%zu bytes)", c->pos);
	else if (c->frames < want)
		snprintf(ok, sizeof ok, "BAD: %" PRIu64 " frames missing", want - c->frames);
	else if (c->frames > want)
		snprintf(ok, sizeof ok, "BAD: %" PRIu64 " frames too many", c->frames - want);
	else
		snprintf(ok, sizeof ok, "all intact");
	printf("%s: %" PRIu64 " frames, %" PRIu64 " bytes, %s%s; %.0f frames/s\n"
	       "%s: lag: at most %.1f frames (%d bytes) waiting in its pipe "
	       "(capacity %.1f frames)\n",
	       who, c->frames, c->bytes, ok, extra, secs > 0 ? (double)c->frames / secs : 0.0, who,
	       (double)c->lag / FRAME, c->lag, (double)cap / FRAME);
	fflush(stdout);
	return c->first_bad == NONE && !c->pos && c->frames == want ? 0 : 1;
}

/* CRC-32 (IEEE), bit by bit on purpose: the encoder's work per frame. */
static uint32_t crc32_bits(uint32_t crc, const unsigned char *p, size_t len)
{
	crc = ~crc;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return ~crc;
}

/* The slow consumer: copies each frame out, checks it, "encodes" it. */
static int encoder(struct pp_end *r, uint64_t want)
{
	static unsigned char frame[FRAME];
	struct check c = { .first_bad = NONE };
	uint32_t crc = 0;
	size_t have = 0;
	double t0 = now();
	for (;;) {
		ssize_t k = pp_read(r, frame + have, FRAME - have);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			perror("encoder: pp_read");
			return 1;
		}
		if (k == 0)
			break; /* end of file: the capture closed */
		have += (size_t)k;
		if (have < FRAME)
			continue;
		check_bytes(&c, frame, FRAME);
		crc = crc32_bits(crc, frame, FRAME);
		have = 0;
		sample_lag(&c, r);
	}
	check_bytes(&c, frame, have); /* a torn last frame, if any */
	char extra[40];
	snprintf(extra, sizeof extra, ", crc32 %08" PRIx32, crc);
	int ret = report("encoder", &c, want, pp_getsize(r), now() - t0, extra);
	pp_close(r);
	return ret;
}

/* The display's end with --kill-display-after: it reports, then dies
 * abruptly (with pages peeked and not consumed), unless a frame was bad. */
static int die_abruptly(const struct check *c, long cap, double secs, uint64_t kill_after)
{
	char extra[96];
	snprintf(extra, sizeof extra, " so far; killing itself now (--kill-display-after %" PRIu64 ")",
	         kill_after);
	struct check k = *c;
	k.pos = 0; /* a frame it had begun is not torn: it stopped there */
	if (report("display", &k, k.frames, cap, secs, extra) != 0)
		return 1;
	raise(SIGKILL);
	return 1;
}

/* The fast consumer: checks the frames where they lie.  With kill_after
 * below NONE, it dies by SIGKILL once it has seen that many frames. */
static int display(struct pp_end *r, uint64_t want, uint64_t kill_after)
{
	struct check c = { .first_bad = NONE };
	long cap = pp_getsize(r);
	double t0 = now();
	for (;;) {
		if (c.frames >= kill_after)
			return die_abruptly(&c, cap, now() - t0, kill_after);
		struct iovec iov[64];
		ssize_t k = pp_peek(r, iov, 64);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			perror("display: pp_peek");
			return 1;
		}
		if (k == 0)
			break; /* end of file: the capture closed */
		size_t took = 0;
		for (ssize_t i = 0; i < k && c.frames < kill_after; i++) {
			check_bytes(&c, iov[i].iov_base, iov[i].iov_len);
			took += iov[i].iov_len;
		}
		if (c.frames >= kill_after)
			continue; /* to die, holding what it peeked */
		if (pp_consume(r, took) != (ssize_t)took) {
			perror("display: pp_consume");
			return 1;
		}
		sample_lag(&c, r);
	}
	int ret = report("display", &c, want, cap, now() - t0, "");
	pp_close(r);
	return ret;
}

/* ---- the capture ---------------------------------------------------------- */

struct output {
	const char *name;
	struct pp_end *w;   /* the write end the capture fans out to */
	long cap;
	bool gone;          /* its reader went away: dropped */
	uint64_t frames;    /* whole frames fanned out to it */
};

struct peaks {
	long ring;          /* pages_in_ring */
	long copies;        /* the pipes' contents in pages, added up, same samples */
	long mapped;        /* pages_mapped */
};

static long pages_of(int bytes)
{
	return bytes > 0 ? (bytes + PP_PAGE_SIZE - 1) / PP_PAGE_SIZE : 0;
}

static int sample_pages(struct pp_end *src_r, struct output *o, int n, struct peaks *pk)
{
	long copies = pages_of(pp_nread(src_r));
	for (int i = 0; i < n; i++)
		if (!o[i].gone)
			copies += pages_of(pp_nread(o[i].w));
	struct pp_shared_stats st;
	if (pp_shared_stats(src_r, &st) != 0) {
		perror("capture: pp_shared_stats");
		return -1;
	}
	if (st.pages_in_ring > pk->ring)
		pk->ring = st.pages_in_ring;
	if (copies > pk->copies)
		pk->copies = copies;
	if (st.pages_mapped > pk->mapped)
		pk->mapped = st.pages_mapped;
	return 0;
}

/* Write frame n once into the source pipe, in place. */
static int write_frame(struct pp_end *src_w, uint64_t n)
{
	struct iovec iov[64];
	size_t have = 0;
	/* A shared pipe hands out at most half its capacity per reservation:
	 * 64 KiB here, a whole frame; the loop would make it in parts else. */
	for (size_t done = 0; done < FRAME; done += have) {
		ssize_t k = pp_reserve(src_w, iov, 64, FRAME - done);
		if (k < 0) {
			perror("capture: pp_reserve");
			return -1;
		}
		have = 0;
		for (ssize_t i = 0; i < k; i++) {
			make_part(iov[i].iov_base, n, done + have, iov[i].iov_len);
			have += iov[i].iov_len;
		}
		if (pp_commit(src_w, have) != (ssize_t)have) {
			perror("capture: pp_commit");
			return -1;
		}
	}
	return 0;
}

/* Fan the frame in the source pipe out to every output still there;
 * drops an output whose reader is gone.  Returns the outputs left, or -1. */
static int fan_frame(struct pp_end *src_r, struct output *o, int n, uint64_t number,
                     struct peaks *pk)
{
	size_t moved = 0;
	for (;;) {
		struct pp_end *outs[2];
		int live = 0;
		for (int i = 0; i < n; i++)
			if (!o[i].gone)
				outs[live++] = o[i].w;
		if (!live || moved == FRAME)
			return live;
		ssize_t k = pp_fanout(src_r, outs, live, FRAME - moved, 0);
		if (k > 0) {
			moved += (size_t)k;
			if (sample_pages(src_r, o, n, pk))
				return -1;
			if (moved == FRAME)
				for (int i = 0; i < n; i++)
					o[i].frames += !o[i].gone;
			continue;
		}
		if (k == 0 || errno != EPIPE) {
			if (k < 0 && errno == EINTR)
				continue;
			if (k == 0)
				fprintf(stderr, "capture: pp_fanout: end of input in mid-frame\n");
			else
				perror("capture: pp_fanout");
			return -1;
		}
		/* EPIPE: an output has no reader left.  Which: POLLERR. */
		int dropped = 0;
		for (int i = 0; i < n; i++) {
			short ev = o[i].gone ? 0 : pp_events(o[i].w);
			if (ev > 0 && (ev & POLLERR)) {
				printf("capture: the %s is gone (pp_fanout: EPIPE, POLLERR on its "
				       "pipe) at frame #%" PRIu64 ", after %" PRIu64 " frames fanned out "
				       "to it: dropped it, going on without it\n",
				       o[i].name, number, o[i].frames);
				fflush(stdout);
				o[i].gone = true;
				if (pp_close(o[i].w) != 0)
					perror("capture: pp_close");
				dropped++;
			}
		}
		if (!dropped) {
			fprintf(stderr, "capture: pp_fanout: EPIPE, but no output says POLLERR\n");
			return -1;
		}
	}
}

static int capture(struct pp_end *src_w, struct pp_end *src_r, struct output *o, int n,
                   uint64_t frames, uint64_t *written, struct peaks *pk)
{
	int ret = 0;
	for (uint64_t f = 0; f < frames; f++) {
		if (write_frame(src_w, f)) {
			ret = -1;
			break;
		}
		++*written;
		int live = fan_frame(src_r, o, n, f, pk);
		if (live < 0) {
			ret = -1;
			break;
		}
		if (live == 0) {
			printf("capture: no consumer left, stopping at frame #%" PRIu64 "\n", f);
			break;
		}
	}
	/* End of stream: the consumers see end of file once drained. */
	if (pp_close(src_w) != 0)
		perror("capture: pp_close");
	for (int i = 0; i < n; i++)
		if (!o[i].gone && pp_close(o[i].w) != 0)
			perror("capture: pp_close");
	return ret;
}

/* ---- set-up ----------------------------------------------------------------- */

static int parse_count(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-')
		return -1;
	*v = x;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: capture_procs [FRAMES] [--kill-display-after N]\n");
	exit(2);
}

/* Fork a consumer that keeps only `keep` of the ends. */
static pid_t spawn(struct pp_end *all[], int nall, struct pp_end *keep, int which, uint64_t frames,
                   uint64_t kill_after)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	for (int i = 0; i < nall; i++)
		if (all[i] != keep && pp_close(all[i]) != 0)
			perror("pp_close");
	int ret = which == 0 ? encoder(keep, frames) : display(keep, frames, kill_after);
	fflush(stdout);
	_exit(ret);
}

/* Wait for a consumer: 0 when it exited with status 0, 1 when it was
 * killed by SIGKILL and may_be_killed, -1 otherwise (said on stderr). */
static int wait_child(pid_t pid, const char *name, bool may_be_killed)
{
	int st;
	pid_t w;
	while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
		;
	if (w != pid) {
		perror("capture: waitpid");
		return -1;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (may_be_killed && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
		return 1;
	if (WIFSIGNALED(st))
		fprintf(stderr, "capture: the %s was killed by signal %d\n", name, WTERMSIG(st));
	else
		fprintf(stderr, "capture: the %s failed (exit status %d)\n", name, WEXITSTATUS(st));
	return -1;
}

int main(int argc, char **argv)
{
	uint64_t frames = 2000, kill_after = NONE;
	bool have_count = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--kill-display-after")) {
			if (i + 1 >= argc || parse_count(argv[++i], &kill_after))
				usage();
		} else if (!have_count && !parse_count(argv[i], &frames)) {
			have_count = true;
		} else {
			usage();
		}
	}
	bool kill_mode = kill_after != NONE;

	/* The source pipe, and two pipes in its memory for the consumers.
	 * PP_NOSIGPIPE: a consumer's death is an EPIPE to handle, not a
	 * signal that would kill the capture. */
	struct pp_end *src[2], *enc[2], *disp[2];
	if (pp_pipe(src, PP_SHARED) != 0) {
		perror("pp_pipe");
		return 2;
	}
	if (pp_pipe_in(enc, PP_NOSIGPIPE, src[1]) != 0 || pp_pipe_in(disp, PP_NOSIGPIPE, src[1]) != 0) {
		perror("pp_pipe_in");
		return 2;
	}
	if (pp_setmaxsize(ENC_SIZE) < 0 || pp_setsize(src[0], SRC_SIZE) < 0 ||
	    pp_setsize(enc[0], ENC_SIZE) < 0 || pp_setsize(disp[0], DISP_SIZE) < 0) {
		perror("pp_setsize");
		return 2;
	}
	struct output o[2] = {
		{ .name = "encoder", .w = enc[1], .cap = pp_getsize(enc[1]) },
		{ .name = "display", .w = disp[1], .cap = pp_getsize(disp[1]) },
	};
	long src_cap = pp_getsize(src[1]);
	printf("capture: %" PRIu64 " frames of %d KiB (%.1f MiB) -> source pipe %ld KiB -> "
	       "pp_fanout -> encoder pipe %ld KiB, display pipe %ld KiB\n",
	       frames, FRAME / 1024, mib(frames * FRAME), src_cap / 1024, o[0].cap / 1024,
	       o[1].cap / 1024);

	struct pp_end *all[6] = { src[0], src[1], enc[0], enc[1], disp[0], disp[1] };
	pid_t pe = spawn(all, 6, enc[0], 0, frames, kill_after);
	if (pe < 0) {
		perror("fork");
		return 2;
	}
	pid_t pd = spawn(all, 6, disp[0], 1, frames, kill_after);
	if (pd < 0) {
		perror("fork");
		kill(pe, SIGKILL);
		waitpid(pe, NULL, 0);
		return 2;
	}
	/* The capture reads only the source pipe; the consumers' read ends
	 * are theirs (while it held them, their death would go unseen). */
	pp_close(enc[0]);
	pp_close(disp[0]);

	struct peaks pk = { 0, 0, 0 };
	uint64_t written = 0;
	double t0 = now();
	int err = capture(src[1], src[0], o, 2, frames, &written, &pk);
	double secs = now() - t0;
	int enc_st = wait_child(pe, "encoder", false);
	int disp_st = wait_child(pd, "display", kill_mode);
	struct pp_shared_stats st;
	bool stats_ok = pp_shared_stats(src[0], &st) == 0;
	pp_close(src[0]);

	long pg = PP_PAGE_SIZE;
	long once = (o[0].cap > o[1].cap ? o[0].cap : o[1].cap) / pg + src_cap / pg;
	long sum = (o[0].cap + o[1].cap + src_cap) / pg;
	bool held_once = pk.ring <= once;
	printf("capture: %" PRIu64 " frames written once (%.1f MiB), %.0f frames/s\n"
	       "capture: pages in use (pages_in_ring): peak %ld; the pipes' contents added up: "
	       "peak %ld pages; memory mapped: peak %ld pages\n"
	       "capture: bound if held once: %ld (largest pipe) + %ld (source) = %ld pages; "
	       "with a copy per pipe: %ld pages\n"
	       "capture: data held once: %s (peak %ld %s %ld)\n",
	       written, mib(written * FRAME), secs > 0 ? (double)written / secs : 0.0, pk.ring,
	       pk.copies, pk.mapped, once - src_cap / pg, src_cap / pg, once, sum,
	       held_once ? "yes" : "NO", pk.ring, held_once ? "<=" : ">", once);
	for (int i = 0; i < 2; i++)
		if (!o[i].gone)
			printf("capture: the %s kept its reader to the end (%" PRIu64 " frames fanned out)\n",
			       o[i].name, o[i].frames);
	if (stats_ok && st.pages_in_ring)
		printf("capture: %ld pages still in rings at the end\n", st.pages_in_ring);

	const char *why = err ? "the capture failed"
	                  : enc_st != 0 || o[0].gone ? "the encoder did not get every frame"
	                  : disp_st < 0 || (!kill_mode && o[1].gone) ? "the display did not get every frame"
	                  : written != frames ? "not every frame was written"
	                  : !held_once ? "the data was not held once"
	                  : NULL;
	if (why)
		printf("capture_procs: FAILED: %s\n", why);
	else if (disp_st == 1)
		printf("capture_procs: ok: the encoder got every frame intact; the display died "
		       "as asked%s\n", o[1].gone ? " and was dropped" : ", after the last fan-out");
	else
		printf("capture_procs: ok: both consumers got every frame intact\n");
	return why ? 1 : 0;
}
