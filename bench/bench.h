/*
 * bench.h - what the benchmark programs (bench_core.c, bench_zerocopy.c,
 * bench_procs.c) have in common, so that each program holds only its own
 * measurements.
 *
 *   - the command line every benchmark takes: -q (quick: 1/16 of the work,
 *     at most 3 repetitions), -r REPS, -c CASE, plus a program's own flag
 *     letters, and PP_BENCH_SCALE=F from the environment (bench_options);
 *   - medians of repetitions that alternate which variant runs first,
 *     each run under a watchdog alarm so that a hang cannot block the
 *     report forever (bench_medians);
 *   - the pipe the tests use too, test/harness/pipe.h's struct tp (a
 *     kernel pipe or a pagepipe behind one interface, so that both are
 *     measured by the same code), opened and closed or the program dies
 *     (bench_open, bench_close), and the clock of test/harness/clock.h
 *     (t_now);
 *   - the data stream: a periodic pattern (bench_pattern), what the writer
 *     wrote at a stream position (expected), a writer of a whole stream
 *     (bench_write_stream) and a reader that drains a pipe checking every
 *     read against the pattern (bench_read_stream; with no buffer it
 *     reads in place, as bench_peek_stream does a pagepipe: pp_peek, check
 *     in place, pp_consume), both also over any channel with such calls
 *     (struct bench_io: the _io variants);
 *   - the report: counting targets MET / MISSED (bench_result) and data
 *     errors, and the closing lines and exit status (bench_finish): lost or
 *     corrupted data exits 1, a missed target does not (a report, not a
 *     test).
 *
 * Everything is static (inline), so a program using part of it compiles
 * warning-free.  Errors of the machinery itself (malloc, pipe creation,
 * close) end the program with status 2 (die).
 */
#ifndef PP_BENCH_H
#define PP_BENCH_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"
#include "../test/harness/clock.h"
#include "../test/harness/pipe.h"

#define KiB 1024UL
#define MiB (1024UL * KiB)
#define MAX_REPS 15         /* -r's upper bound */
#define SAMPLE_EVERY 16     /* sampled checks compare one page in this many in full */
#define BENCH_MAX_VARIANTS 14/* what bench_medians can alternate between */

static void die(const char *what) __attribute__((noreturn, unused));
static void die(const char *what)
{
	perror(what);
	exit(2);
}

/* ---- the command line ---------------------------------------------------- */

struct bench_opts {
	/* the program says: */
	const char *flags;      /* its own option letters without argument, e.g. "s", or NULL */
	const char *flags_help; /* their help lines (after -q's), or NULL */
	const char *case_help;  /* what follows "-c CASE  " in the help */
	/* bench_options fills in: */
	double scale; /* PP_BENCH_SCALE, divided by 16 with -q */
	int reps;     /* repetitions per measurement */
	int quick;    /* -q */
	const char *only;     /* -c CASE, or NULL */
	unsigned char set[128]; /* set['s']: that flag letter was given */
};

static inline void bench_usage(const struct bench_opts *o, const char *argv0)
{
	fprintf(stderr, "usage: %s [-q]", argv0);
	for (const char *f = o->flags; *f; f++)
		fprintf(stderr, " [-%c]", *f);
	fprintf(stderr,
	        " [-r REPS] [-c CASE]\n"
	        "  -q       quick smoke run (1/16 of the work, 3 repetitions)\n"
	        "%s"
	        "  -r REPS  repetitions per measurement, 1..%d (default 5)\n"
	        "  -c CASE  %s\n"
	        "  env PP_BENCH_SCALE=F multiplies the work by F\n",
	        o->flags_help, MAX_REPS, o->case_help);
	exit(2);
}

/* Parse the command line and PP_BENCH_SCALE into o; a bad one exits 2. */
static inline void bench_options(struct bench_opts *o, int argc, char **argv)
{
	char optstr[64];
	const char *env = getenv("PP_BENCH_SCALE");
	int opt;

	if (!o->flags)
		o->flags = "";
	if (!o->flags_help)
		o->flags_help = "";
	o->scale = 1.0;
	o->reps = 5;
	o->quick = 0;
	o->only = NULL;
	memset(o->set, 0, sizeof o->set);
	snprintf(optstr, sizeof optstr, "q%sr:c:h", o->flags);
	while ((opt = getopt(argc, argv, optstr)) != -1) {
		switch (opt) {
		case 'q':
			o->quick = 1;
			break;
		case 'c':
			o->only = optarg;
			break;
		case 'r':
			o->reps = atoi(optarg);
			if (o->reps < 1 || o->reps > MAX_REPS)
				bench_usage(o, argv[0]);
			break;
		default:
			if (opt == 'h' || opt == '?' || opt == ':' || !strchr(o->flags, opt))
				bench_usage(o, argv[0]);
			o->set[opt & 127] = 1;
		}
	}
	if (optind != argc)
		bench_usage(o, argv[0]);
	if (env && *env) {
		char *endp;
		o->scale = strtod(env, &endp);
		if (*endp || !(o->scale > 0) || o->scale > 1000) {
			fprintf(stderr, "PP_BENCH_SCALE must be a number in (0, 1000]\n");
			exit(2);
		}
	}
	if (o->quick) {
		o->scale /= 16;
		if (o->reps > 3)
			o->reps = 3;
	}
}

/*
 * A benchmark's start: parse the command line (bench_options), let a lost
 * reader show up as EPIPE instead of killing the report, and print the
 * report's first line, "NAME: pagepipe VERSIONWHAT, N CPUs" (WHAT starts
 * with its separator: " vs ...", ", ...").
 */
static inline void bench_begin(struct bench_opts *o, int argc, char **argv, const char *name,
                               const char *what)
{
	bench_options(o, argc, argv);
	signal(SIGPIPE, SIG_IGN);
	printf("%s: pagepipe %s%s, %ld CPUs\n", name, pp_version(), what,
	       sysconf(_SC_NPROCESSORS_ONLN));
}

/* How the figures are made, for the report's head: "median of N
 * alternating runs, scale S", and " (quick)" with -q. */
static inline const char *bench_how(const struct bench_opts *o)
{
	static char how[96];
	snprintf(how, sizeof how, "median of %d alternating runs, scale %g%s", o->reps, o->scale,
	         o->quick ? " (quick)" : "");
	return how;
}

/* ---- repetitions and medians --------------------------------------------- */

static inline double median(double *v, int n)
{
	for (int i = 1; i < n; i++) /* insertion sort: n is tiny */
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Watchdog for one run: a hang must not block the report forever. */
static inline void bench_arm(double scale)
{
	alarm((unsigned)(120 + 120 * scale));
}

/* One run of variant (0 .. nvariants-1) with the caller's parameters in
 * ctx: returns a rate (higher is better). */
typedef double (*bench_run_fn)(int variant, const void *ctx);

/*
 * Run every variant reps times, rotating which of them goes first in each
 * repetition (so no variant always has a warm or a cold start), each run
 * under the watchdog; med[v] is the median of variant v's runs.
 */
static inline void bench_medians(int nvariants, int reps, double scale, bench_run_fn run,
                                 const void *ctx, double *med)
{
	double v[BENCH_MAX_VARIANTS][MAX_REPS];
	for (int rep = 0; rep < reps; rep++)
		for (int k = 0; k < nvariants; k++) {
			int var = (k + rep) % nvariants;
			bench_arm(scale);
			v[var][rep] = run(var, ctx);
			alarm(0);
		}
	for (int var = 0; var < nvariants; var++)
		med[var] = median(v[var], reps);
}

/* ---- one pipe of either kind -------------------------------------------- */

/* The two variants most measurements alternate between, as indices. */
enum kind { KERNEL, PAGEPIPE };

/* Open a pipe of that kind (test/harness/pipe.h's struct tp). */
static inline void bench_open(struct tp *p, enum kind kind)
{
	if (tp_open(p, kind == KERNEL, 0) != 0)
		die(kind == KERNEL ? "pipe" : "pp_pipe");
}

static inline void bench_close(struct tp *p, int which)
{
	if (tp_close_end(p, which) != 0)
		die(p->kernel ? "close" : "pp_close");
}

/* ---- the data stream ------------------------------------------------------ */

static unsigned char *pattern __attribute__((unused)); /* [i] == [i % pattern_period] */
static size_t pattern_period __attribute__((unused));

/*
 * A buffer for reads and writes, page-aligned as coreutils cat's is.  The
 * kernel copies into user memory (rep movsb) much more slowly when the
 * buffer is not cache-line aligned, on some CPUs: on an AMD EPYC, a
 * kernel pipe between two processes read into a 16-byte aligned buffer
 * moved 64 KiB writes at 1.1-1.3 GB/s, into a page-aligned one at
 * 2.2-2.4.  malloc's alignment depends on what was allocated before, so
 * a benchmark reading into malloc's memory would measure the allocator's
 * luck.  Freed with free(); dies when out of memory.
 */
static inline void *bench_buf(size_t n)
{
	void *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
	if (!p)
		die("aligned_alloc");
	return p;
}

/*
 * Make the stream pattern: its first period bytes are i (so byte p of the
 * stream is p % period), or with random set a fixed xorshift sequence (so
 * no shifted or stale page can pass for the right one); then repeated, so
 * that expected(pos) is valid for max_chunk bytes.
 */
static inline void bench_pattern(size_t period, size_t max_chunk, int random)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	pattern = malloc(period + max_chunk);
	if (!pattern)
		die("malloc");
	pattern_period = period;
	for (size_t i = 0; i < period; i++) {
		if (random) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			pattern[i] = (unsigned char)(x >> 24);
		} else {
			pattern[i] = (unsigned char)i;
		}
	}
	for (size_t i = period; i < period + max_chunk; i++)
		pattern[i] = pattern[i - period];
}

/* What the writer wrote at stream position pos (up to max_chunk bytes). */
static inline const unsigned char *expected(unsigned long long pos)
{
	return pattern + pos % pattern_period;
}

/*
 * Check n received bytes that sit at stream position pos; returns 1 if they
 * are wrong.  With sample set the check depends on stream positions only,
 * never on how the reader's transport cut the stream into reads or
 * segments: of every SAMPLE_PAGE-byte page of the stream the part in p is
 * compared in full for one page in SAMPLE_EVERY, else by its first and last
 * byte.  So every reader does the same work on the same bytes: a reader in
 * place pulls the same cache lines from the writer's CPU whether its
 * transport hands it a 4 KiB segment or a 64 KiB one (a per-segment sample
 * touched 16 times fewer lines of a 64 KiB chunk than of 16 pages).
 */
#define SAMPLE_PAGE 4096ull
static inline int check(const unsigned char *p, size_t n, unsigned long long pos, int sample)
{
	if (!sample)
		return memcmp(p, expected(pos), n) != 0;
	for (unsigned long long at = pos, end = pos + n; at < end;) {
		unsigned long long page_end = (at / SAMPLE_PAGE + 1) * SAMPLE_PAGE;
		size_t part = (size_t)((page_end < end ? page_end : end) - at);
		const unsigned char *got = p + (at - pos), *want = expected(at);
		if ((at / SAMPLE_PAGE) % SAMPLE_EVERY == 0 ? memcmp(got, want, part) != 0
		                                          : got[0] != want[0] ||
		                                                got[part - 1] != want[part - 1])
			return 1;
		at += part;
	}
	return 0;
}

/*
 * A channel the stream helpers use: read and write as read(2) and write(2)
 * do (a count, or -1 with errno), and where the channel has an in-place
 * reader (else NULL), peek and consume as pp_peek and pp_consume.  struct
 * tp is one (bench_tp_io); a program may bring others (bench_procs.c's
 * rings in shared memory).
 */
struct bench_io {
	ssize_t (*read)(void *ctx, void *buf, size_t n);
	ssize_t (*write)(void *ctx, const void *buf, size_t n);
	ssize_t (*peek)(void *ctx, struct iovec *iov, int max);
	ssize_t (*consume)(void *ctx, size_t n);
	void *ctx;
};

static inline ssize_t bench_tp_read(void *p, void *buf, size_t n)
{
	return tp_read(p, buf, n);
}

static inline ssize_t bench_tp_write(void *p, const void *buf, size_t n)
{
	return tp_write(p, buf, n);
}

static inline ssize_t bench_tp_peek(void *p, struct iovec *iov, int max)
{
	return pp_peek(((struct tp *)p)->e[0], iov, max);
}

static inline ssize_t bench_tp_consume(void *p, size_t n)
{
	return pp_consume(((struct tp *)p)->e[0], n);
}

static inline struct bench_io bench_tp_io(struct tp *p)
{
	struct bench_io io = { bench_tp_read, bench_tp_write, p->kernel ? NULL : bench_tp_peek,
		               p->kernel ? NULL : bench_tp_consume, p };
	return io;
}

/* Write stream bytes [0, total) in writes of up to wsize, each again after
 * a short count or EINTR until whole; 0, or an errno. */
static inline int bench_write_stream_io(const struct bench_io *io, unsigned long long total,
                                        size_t wsize)
{
	for (unsigned long long pos = 0; pos < total;) {
		size_t n = total - pos < wsize ? (size_t)(total - pos) : wsize;
		const unsigned char *p = expected(pos);
		for (size_t done = 0; done < n;) {
			ssize_t r = io->write(io->ctx, p + done, n - done);
			if (r < 0 && errno != EINTR)
				return errno;
			if (r > 0)
				done += (size_t)r;
		}
		pos += n;
	}
	return 0;
}

static inline int bench_write_stream(struct tp *p, unsigned long long total, size_t wsize)
{
	struct bench_io io = bench_tp_io(p);
	return bench_write_stream_io(&io, total, wsize);
}

/* What a reader of the stream got. */
struct rx {
	double t1;                 /* when it saw the end of file */
	unsigned long long received;
	unsigned long reads, bad;  /* reads, and reads that did not match */
	int err;                   /* errno of a failed read, or 0 */
};

/*
 * Read io to its end of file, checking every read against the stream
 * (sampled, or in full) into *rx: with a bufsize buffer, or with bufsize 0
 * in place: io->peek (up to 64 segments, each checked where it lies and
 * counted as a read), then io->consume of what it peeked.
 */
static inline void bench_read_stream_io(const struct bench_io *io, size_t bufsize, int sample,
                                        struct rx *rx)
{
	unsigned char *buf = bufsize ? bench_buf(bufsize) : NULL;
	struct iovec iov[64];
	unsigned long long pos = 0;
	if (bufsize && !buf)
		die("malloc");
	for (;;) {
		ssize_t k = buf ? io->read(io->ctx, buf, bufsize) : io->peek(io->ctx, iov, 64);
		if (k == 0)
			break;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			rx->err = errno;
			break;
		}
		if (buf) {
			iov[0] = (struct iovec){ buf, (size_t)k };
			k = 1;
		}
		size_t got = 0;
		for (ssize_t s = 0; s < k; s++) {
			rx->bad += (unsigned long)check(iov[s].iov_base, iov[s].iov_len, pos + got, sample);
			rx->reads++;
			got += iov[s].iov_len;
		}
		if (!buf && io->consume(io->ctx, got) != (ssize_t)got) {
			rx->err = errno;
			break;
		}
		pos += got;
	}
	rx->t1 = t_now();
	rx->received = pos;
	free(buf);
}

static inline void bench_read_stream(struct tp *p, size_t bufsize, int sample, struct rx *rx)
{
	struct bench_io io = bench_tp_io(p);
	bench_read_stream_io(&io, bufsize, sample, rx);
}

/* The zero-copy reader of a pagepipe read end: pp_peek, pp_consume. */
static inline void bench_peek_stream(struct pp_end *in, int sample, struct rx *rx)
{
	struct tp p = tp_of(in, NULL);
	bench_read_stream(&p, 0, sample, rx);
}

/* ---- the report ---------------------------------------------------------- */

static int data_errors __attribute__((unused)); /* runs that lost or corrupted data */
static int met __attribute__((unused)), missed __attribute__((unused)); /* targets */

/* Count a target as met (ok) or missed; returns the word to print. */
static inline const char *bench_result(int ok)
{
	if (ok)
		met++;
	else
		missed++;
	return ok ? "MET" : "MISSED";
}

static inline void fmt_amount(char *out, size_t len, unsigned long long bytes)
{
	if (bytes >= 10 * MiB)
		snprintf(out, len, "%llu MiB", bytes / MiB);
	else
		snprintf(out, len, "%llu KiB", bytes / KiB);
}

/* The closing lines; returns main's exit status: 1 if data went wrong. */
static inline int bench_finish(const char *data_ok)
{
	free(pattern);
	printf("targets: %d met, %d missed (a report, not a test)\n", met, missed);
	if (data_errors) {
		printf("DATA ERRORS: %d runs lost or corrupted data\n", data_errors);
		return 1;
	}
	printf("data: %s\n", data_ok);
	return 0;
}

#endif
