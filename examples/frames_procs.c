/*
 * frames_procs.c - two processes, no byte copied: a producer process makes
 * video-like frames straight in the pipe's pages (pp_reserve, pp_commit),
 * a consumer process checks them where they lie (pp_peek, pp_consume).
 *
 * The pipe is a PP_SHARED pagepipe made before fork(2), so the child holds
 * both ends as it would hold inherited descriptors; each process closes the
 * end it does not use, and the consumer sees end of file when the producer
 * closes its write end (or dies).  A frame is a 16-byte header (number,
 * length) and its pixels, which the producer computes in place; the
 * consumer checks every frame's header and pixels and prints what it got.
 *
 * Usage: frames_procs [FRAMES]   (default 5000 frames of 60 KiB)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"

#define FRAME (60 * 1024)

struct header {
	uint64_t number;
	uint64_t length; /* of the whole frame, header included */
};

/* Pixel i of frame n: what the producer computes and the consumer expects. */
static inline unsigned char pixel(uint64_t n, size_t i)
{
	return (unsigned char)(n * 31 + i * 7 + (i >> 9));
}

/* Make bytes [from, from + n) of frame number n at p. */
static void make_part(unsigned char *p, uint64_t number, size_t from, size_t n)
{
	struct header h = { number, FRAME };
	for (size_t i = 0; i < n; i++) {
		size_t f = from + i; /* offset in the frame */
		p[i] = f < sizeof h ? ((unsigned char *)&h)[f] : pixel(number, f);
	}
}

static int producer(struct pp_end *w, uint64_t frames)
{
	for (uint64_t n = 0; n < frames; n++) {
		struct iovec iov[16];
		size_t have = 0;
		/* A frame may need two reservations when the pipe has less room
		 * than a frame (a shared pipe hands out half its capacity at
		 * most): make it in parts, each committed as it is made. */
		for (size_t done = 0; done < FRAME; done += have) {
			ssize_t k = pp_reserve(w, iov, 16, FRAME - done);
			if (k < 0) {
				perror("pp_reserve");
				return 1;
			}
			have = 0;
			for (ssize_t i = 0; i < k; i++) {
				make_part(iov[i].iov_base, n, done + have, iov[i].iov_len);
				have += iov[i].iov_len;
			}
			if (pp_commit(w, have) != (ssize_t)have) {
				perror("pp_commit");
				return 1;
			}
		}
	}
	return pp_close(w) == 0 ? 0 : 1;
}

static int consumer(struct pp_end *r)
{
	uint64_t frames = 0, bad = 0, pos = 0; /* pos: offset in the current frame */
	struct header h;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct iovec iov[16];
		ssize_t k = pp_peek(r, iov, 16);
		if (k < 0) {
			perror("pp_peek");
			return 1;
		}
		if (k == 0)
			break; /* end of file: the producer closed */
		size_t took = 0;
		for (ssize_t s = 0; s < k; s++) {
			const unsigned char *p = iov[s].iov_base;
			for (size_t i = 0; i < iov[s].iov_len; i++, pos++) {
				if (pos < sizeof h)
					((unsigned char *)&h)[pos] = p[i];
				else if (p[i] != pixel(h.number, pos))
					bad++;
				if (pos + 1 == FRAME) {
					bad += h.number != frames || h.length != FRAME;
					frames++;
					pos = (uint64_t)-1;
				}
			}
			took += iov[s].iov_len;
		}
		if (pp_consume(r, took) != (ssize_t)took) {
			perror("pp_consume");
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("consumer: %" PRIu64 " frames of %d KiB, %" PRIu64 " bad bytes or headers, "
	       "%.0f frames/s (no byte copied by the pipe)\n",
	       frames, FRAME / 1024, bad, (double)frames / s);
	pp_close(r);
	return bad || pos ? 1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t frames = argc > 1 ? strtoull(argv[1], NULL, 10) : 5000;
	struct pp_end *e[2];
	if (pp_pipe(e, PP_SHARED) != 0) {
		perror("pp_pipe");
		return 1;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) { /* the producer */
		pp_close(e[0]);
		_exit(producer(e[1], frames));
	}
	pp_close(e[1]);
	int ret = consumer(e[0]);
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "producer failed\n");
		ret = 1;
	}
	return ret;
}
