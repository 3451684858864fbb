/*
 * gen.c - data source and checking sink for bench/bench_tool.sh (not a
 * benchmark itself: the Makefile builds it as $(BUILD)/bench-tools/gen,
 * outside the directory bench/run.sh runs).
 *
 *   gen BYTES            write BYTES bytes of the pattern to standard output
 *                        in 1 MiB writes, so that the source costs next to
 *                        nothing and is never the bottleneck;
 *   gen -r BYTES [-t F]  read standard input to its end in reads of up to
 *                        1 MiB and discard it (like `cat >/dev/null'), but
 *                        check that exactly BYTES bytes came and that they
 *                        are the pattern: the first 8 bytes of every read and
 *                        every 16th read in full (a sampled check, cheap
 *                        enough not to change the figures).  With -t, write
 *                        to file F two CLOCK_REALTIME times as
 *                        seconds.nanoseconds (the clock of `date +%s.%N'):
 *                        when the BYTES-th byte arrived (or the end of the
 *                        input, if it never did), then when the end of the
 *                        input was seen; so a script can time one output of
 *                        a pipeline on its own, both its data and its end.
 *   gen -r -k BYTES      the same, but keep everything read, in fresh memory
 *                        mapped 1 MiB at a time and never given back: what
 *                        holding a whole backlog in RAM costs a reader with
 *                        no tool at all (the slow-output case's cap).
 *
 * BYTES is a decimal number with an optional K, M or G suffix (powers of
 * 1024).  The pattern is a 1 MiB block of xorshift64 output repeated; any
 * lost, duplicated or reordered block shows (a block is not periodic).
 * Exit status: 0 fine, 1 wrong count or data (with a message on stderr),
 * 2 usage or system error.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#define BLOCK (1UL << 20)
#define SAMPLE_EVERY 16

/* The pattern twice over, so any window of up to BLOCK bytes starting at
 * any offset within the block is contiguous. */
static unsigned char *pattern;

static void make_pattern(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	/* Page aligned, as a real program's buffers would be: copies to and
	 * from a misaligned buffer are markedly slower and would weigh on
	 * every figure. */
	pattern = aligned_alloc(4096, 2 * BLOCK);
	if (!pattern) {
		perror("gen: malloc");
		exit(2);
	}
	for (size_t i = 0; i < BLOCK; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(pattern + i, &x, 8);
	}
	memcpy(pattern + BLOCK, pattern, BLOCK);
}

static int parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int write_stream(uint64_t total)
{
	uint64_t pos = 0;

	while (pos < total) {
		size_t off = (size_t)(pos % BLOCK);
		size_t len = BLOCK;
		ssize_t n;

		if (total - pos < len)
			len = (size_t)(total - pos);
		n = write(STDOUT_FILENO, pattern + off, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "gen: write after %llu bytes: %s\n",
			        (unsigned long long)pos, strerror(errno));
			return 1;
		}
		pos += (uint64_t)n;
	}
	return 0;
}

/* With keep: the block the next read goes into, fresh from the system
 * once the current one is full (populated in one call, as the library's
 * pool maps its batches); full blocks are never given back. */
static unsigned char *keep_block(unsigned char *cur, size_t *fill)
{
	if (cur && *fill < BLOCK)
		return cur;
	unsigned char *b = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE,
	                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	*fill = 0;
	return b == MAP_FAILED ? NULL : b;
}

static int read_stream(uint64_t expect, const char *timefile, int keep)
{
	unsigned char *buf = aligned_alloc(4096, BLOCK), *kept = NULL;
	size_t fill = 0;
	uint64_t pos = 0, reads = 0;
	struct timespec full = {0, 0}, eof;
	int bad = 0, got_full = 0;

	if (!buf) {
		perror("gen: malloc");
		return 2;
	}
	for (;;) {
		unsigned char *at = buf;
		size_t room = BLOCK;
		if (keep) {
			if (!(kept = keep_block(kept, &fill))) {
				perror("gen: mmap");
				return 2;
			}
			at = kept + fill;
			room = BLOCK - fill;
		}
		ssize_t n = read(STDIN_FILENO, at, room);
		size_t off, check;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "gen: read after %llu bytes: %s\n",
			        (unsigned long long)pos, strerror(errno));
			return 2;
		}
		if (n == 0)
			break;
		fill += (size_t)n;
		off = (size_t)(pos % BLOCK);
		check = reads++ % SAMPLE_EVERY == 0 ? (size_t)n : ((size_t)n < 8 ? (size_t)n : 8);
		if (!bad && memcmp(at, pattern + off, check) != 0) {
			size_t i = 0;
			while (at[i] == pattern[off + i])
				i++;
			fprintf(stderr, "gen: wrong data at byte %llu\n",
			        (unsigned long long)(pos + i));
			bad = 1;
		}
		pos += (uint64_t)n;
		if (!got_full && pos >= expect && timefile) {
			clock_gettime(CLOCK_REALTIME, &full);
			got_full = 1;
		}
	}
	if (timefile) {
		FILE *f;

		clock_gettime(CLOCK_REALTIME, &eof);
		if (!got_full)
			full = eof;
		f = fopen(timefile, "w");
		if (!f ||
		    fprintf(f, "%lld.%09ld %lld.%09ld\n", (long long)full.tv_sec, full.tv_nsec,
		            (long long)eof.tv_sec, eof.tv_nsec) < 0 ||
		    fclose(f) != 0) {
			fprintf(stderr, "gen: %s: %s\n", timefile, strerror(errno));
			return 2;
		}
	}
	if (pos != expect) {
		fprintf(stderr, "gen: got %llu bytes, expected %llu\n",
		        (unsigned long long)pos, (unsigned long long)expect);
		bad = 1;
	}
	free(buf);
	return bad;
}

static void usage(void)
{
	fprintf(stderr, "usage: gen BYTES | gen -r [-k] BYTES [-t TIMEFILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *timefile = NULL;
	int opt, readmode = 0, keep = 0;
	uint64_t bytes;

	while ((opt = getopt(argc, argv, "rkt:")) != -1) {
		switch (opt) {
		case 'r':
			readmode = 1;
			break;
		case 'k':
			keep = 1;
			break;
		case 't':
			timefile = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || parse_bytes(argv[optind], &bytes) != 0 ||
	    ((timefile || keep) && !readmode))
		usage();
	make_pattern();
	return readmode ? read_stream(bytes, timefile, keep) : write_stream(bytes);
}
