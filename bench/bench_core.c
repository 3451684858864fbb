/*
 * bench_core.c - pagepipe against the kernel pipe, in the same run.
 *
 * What it measures, always between two threads of this process (a writer
 * thread and a reader thread), once on a kernel pipe(2) and once on a
 * pagepipe, with the same code path for both:
 *
 *   - throughput for writes of 1 B, 64 B, 4 KiB, 64 KiB and 1 MiB: the
 *     writer writes exactly a fixed byte total in writes of that size, the
 *     reader reads with a 64 KiB buffer until end of file;
 *   - 1-byte ping-pong over two pipes: round trips per second.
 *
 * Every measurement is repeated (alternating kernel and pagepipe, and which
 * of the two goes first) and the median is kept.  The output is a table of
 * the two figures, their ratio (pagepipe/kernel for throughput, kernel
 * latency/pagepipe latency for ping-pong: above 1 means pagepipe is better)
 * and the project's target for that ratio with MET or MISSED.
 *
 * Data is checked, not assumed: the byte at stream position p is p % 251,
 * so the reader checks the first and last byte of every read against its
 * position and compares one read in 16 in full; the byte total received
 * must equal the total written; ping-pong checks each echoed byte.  Lost or
 * corrupted data makes the program exit 1.  Missing a target does not: this
 * is a report, not a test, and absolute figures on a small shared machine
 * are noise -- the ratios are the result.
 *
 * Usage: bench_core [-q] [-r REPS] [-c CASE]
 *   -q       quick mode (1/16 of the work, 3 repetitions): a smoke run
 *   -r REPS  repetitions per measurement (default 5)
 *   -c CASE  run only the cases whose name contains CASE ("1 B", "ping")
 *   PP_BENCH_SCALE=F in the environment multiplies every byte total and the
 *   number of round trips by F (e.g. 0.25, or 4 for steadier figures).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pagepipe.h"

#define KiB 1024UL
#define MiB (1024UL * KiB)
#define PERIOD 251          /* the stream pattern: byte p is p % PERIOD */
#define READ_BUF (64 * KiB) /* the reader's buffer, for both pipes */
#define MAX_WRITE MiB
#define SAMPLE_EVERY 16 /* compare one read in this many in full */
#define MAX_REPS 15

enum kind { KERNEL, PAGEPIPE };
static const char *kind_name[] = { "kernel", "pagepipe" };

/* One pipe of either kind, behind the same small interface. */
struct anypipe {
	enum kind kind;
	int fd[2];
	struct pp_end *end[2];
};

static int ap_open(struct anypipe *p, enum kind kind)
{
	p->kind = kind;
	if (kind == KERNEL)
		return pipe(p->fd);
	return pp_pipe(p->end, 0);
}

static ssize_t ap_read(struct anypipe *p, void *buf, size_t n)
{
	if (p->kind == KERNEL)
		return read(p->fd[0], buf, n);
	return pp_read(p->end[0], buf, n);
}

static ssize_t ap_write(struct anypipe *p, const void *buf, size_t n)
{
	if (p->kind == KERNEL)
		return write(p->fd[1], buf, n);
	return pp_write(p->end[1], buf, n);
}

static void ap_close(struct anypipe *p, int which)
{
	int r = p->kind == KERNEL ? close(p->fd[which])
	                          : pp_close(p->end[which]);
	if (r != 0) {
		perror(p->kind == KERNEL ? "close" : "pp_close");
		exit(2);
	}
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned char *pattern; /* pattern[i] == i % PERIOD, PERIOD + MAX_WRITE long */

static void die(const char *what) __attribute__((noreturn));
static void die(const char *what)
{
	perror(what);
	exit(2);
}

/* ---- throughput ------------------------------------------------------- */

struct stream {
	struct anypipe pipe;
	size_t wsize;             /* bytes per write */
	unsigned long long total; /* bytes the writer writes */
	pthread_barrier_t start;
	double t0, t1;
	/* filled by the reader */
	unsigned long long received;
	unsigned long long reads, sampled, bad;
	int rerr; /* errno of a failed read, or 0 */
	int werr; /* errno of a failed write, or 0 */
};

static void *stream_writer(void *arg)
{
	struct stream *s = arg;
	unsigned long long pos = 0;

	pthread_barrier_wait(&s->start);
	s->t0 = now();
	while (pos < s->total) {
		size_t n = s->wsize;
		if (n > s->total - pos)
			n = (size_t)(s->total - pos);
		ssize_t r = ap_write(&s->pipe, pattern + pos % PERIOD, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			s->werr = errno;
			break;
		}
		pos += (unsigned long long)r;
	}
	ap_close(&s->pipe, 1);
	return NULL;
}

static void *stream_reader(void *arg)
{
	struct stream *s = arg;
	unsigned char *buf = malloc(READ_BUF);
	unsigned long long pos = 0;

	if (!buf)
		die("malloc");
	pthread_barrier_wait(&s->start);
	for (;;) {
		ssize_t r = ap_read(&s->pipe, buf, READ_BUF);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			s->rerr = errno;
			break;
		}
		size_t n = (size_t)r;
		const unsigned char *want = pattern + pos % PERIOD;
		if (buf[0] != want[0] || buf[n - 1] != want[n - 1])
			s->bad++;
		else if (s->reads % SAMPLE_EVERY == 0) {
			s->sampled += n;
			if (memcmp(buf, want, n) != 0)
				s->bad++;
		}
		s->reads++;
		pos += n;
	}
	s->t1 = now();
	s->received = pos;
	free(buf);
	return NULL;
}

static int data_errors;

/* One run: returns bytes per second. */
static double run_stream(enum kind kind, size_t wsize, unsigned long long total)
{
	struct stream s;
	pthread_t w, r;

	memset(&s, 0, sizeof s);
	s.wsize = wsize;
	s.total = total;
	if (ap_open(&s.pipe, kind) != 0)
		die(kind == KERNEL ? "pipe" : "pp_pipe");
	if (pthread_barrier_init(&s.start, NULL, 2) != 0)
		die("pthread_barrier_init");
	if (pthread_create(&r, NULL, stream_reader, &s) != 0 ||
	    pthread_create(&w, NULL, stream_writer, &s) != 0)
		die("pthread_create");
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	ap_close(&s.pipe, 0);
	pthread_barrier_destroy(&s.start);

	if (s.werr || s.rerr || s.received != total || s.bad) {
		fprintf(stderr,
		        "DATA ERROR: %s, %zu-byte writes: wrote %llu, received "
		        "%llu, %llu bad reads of %llu, write errno %d, read "
		        "errno %d\n",
		        kind_name[kind], wsize, total, s.received, s.bad, s.reads,
		        s.werr, s.rerr);
		data_errors++;
	}
	return (double)total / (s.t1 - s.t0);
}

/* ---- ping-pong -------------------------------------------------------- */

struct pingpong {
	struct anypipe there, back; /* pinger -> echoer, echoer -> pinger */
	long rounds;
	pthread_barrier_t start;
	long bad;
	int err;
};

static void *echoer(void *arg)
{
	struct pingpong *p = arg;
	unsigned char c;

	pthread_barrier_wait(&p->start);
	for (;;) {
		ssize_t r = ap_read(&p->there, &c, 1);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			p->err = errno;
			break;
		}
		while ((r = ap_write(&p->back, &c, 1)) < 0 && errno == EINTR)
			;
		if (r != 1) {
			p->err = errno;
			break;
		}
	}
	ap_close(&p->back, 1);
	return NULL;
}

/* One run: returns round trips per second. */
static double run_pingpong(enum kind kind, long rounds)
{
	struct pingpong p;
	pthread_t t;
	double t0, t1;
	long done = 0;

	memset(&p, 0, sizeof p);
	p.rounds = rounds;
	if (ap_open(&p.there, kind) != 0 || ap_open(&p.back, kind) != 0)
		die(kind == KERNEL ? "pipe" : "pp_pipe");
	if (pthread_barrier_init(&p.start, NULL, 2) != 0)
		die("pthread_barrier_init");
	if (pthread_create(&t, NULL, echoer, &p) != 0)
		die("pthread_create");
	pthread_barrier_wait(&p.start);
	t0 = now();
	for (long i = 0; i < rounds; i++) {
		unsigned char out = (unsigned char)(i * 7 + 1), in = 0;
		ssize_t r;
		while ((r = ap_write(&p.there, &out, 1)) < 0 && errno == EINTR)
			;
		if (r != 1)
			break;
		while ((r = ap_read(&p.back, &in, 1)) < 0 && errno == EINTR)
			;
		if (r != 1)
			break;
		if (in != out)
			p.bad++;
		done++;
	}
	t1 = now();
	ap_close(&p.there, 1);
	pthread_join(t, NULL);
	/* the echoer has seen EOF and closed its end: back must be at EOF too */
	unsigned char extra;
	ssize_t tail = ap_read(&p.back, &extra, 1);
	ap_close(&p.there, 0);
	ap_close(&p.back, 0);
	pthread_barrier_destroy(&p.start);

	if (done != rounds || p.bad || p.err || tail != 0) {
		fprintf(stderr,
		        "DATA ERROR: %s ping-pong: %ld of %ld round trips, %ld "
		        "wrong bytes, echoer errno %d, final read %zd\n",
		        kind_name[kind], done, rounds, p.bad, p.err, tail);
		data_errors++;
	}
	return (double)rounds / (t1 - t0);
}

/* ---- driver ----------------------------------------------------------- */

struct bcase {
	const char *name;
	size_t wsize;              /* 0: ping-pong */
	unsigned long long amount; /* bytes, or round trips */
	double target;             /* required ratio, 0 for none */
};

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++) /* insertion sort: n is tiny */
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void fmt_rate(char *out, size_t len, const struct bcase *c, double v)
{
	if (c->wsize)
		snprintf(out, len, "%.1f MB/s", v / 1e6);
	else
		snprintf(out, len, "%.0f rt/s %5.1fus", v, 1e6 / v);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
	        "usage: %s [-q] [-r REPS] [-c CASE]\n"
	        "  -q       quick smoke run (1/16 of the work, 3 repetitions)\n"
	        "  -r REPS  repetitions per measurement, 1..%d (default 5)\n"
	        "  -c CASE  only the cases whose name contains CASE\n"
	        "  env PP_BENCH_SCALE=F multiplies the work by F\n",
	        argv0, MAX_REPS);
	exit(2);
}

int main(int argc, char **argv)
{
	struct bcase cases[] = {
		{ "write 1 B", 1, 768 * KiB, 30 },
		{ "write 64 B", 64, 48 * MiB, 10 },
		{ "write 4 KiB", 4 * KiB, 2048 * MiB, 0 },
		{ "write 64 KiB", 64 * KiB, 1536 * MiB, 3 },
		{ "write 1 MiB", MiB, 1536 * MiB, 0 },
		{ "ping-pong 1 B", 0, 50000, 1 },
	};
	int ncases = (int)(sizeof cases / sizeof cases[0]);
	double scale = 1.0;
	int reps = 5, quick = 0, opt;
	const char *env = getenv("PP_BENCH_SCALE");
	const char *only = NULL;

	while ((opt = getopt(argc, argv, "qr:c:h")) != -1) {
		switch (opt) {
		case 'q':
			quick = 1;
			break;
		case 'c':
			only = optarg;
			break;
		case 'r':
			reps = atoi(optarg);
			if (reps < 1 || reps > MAX_REPS)
				usage(argv[0]);
			break;
		default:
			usage(argv[0]);
		}
	}
	if (optind != argc)
		usage(argv[0]);
	if (env && *env) {
		char *endp;
		scale = strtod(env, &endp);
		if (*endp || !(scale > 0) || scale > 1000) {
			fprintf(stderr, "PP_BENCH_SCALE must be a number in (0, 1000]\n");
			return 2;
		}
	}
	if (quick) {
		scale /= 16;
		if (reps > 3)
			reps = 3;
	}

	pattern = malloc(PERIOD + MAX_WRITE);
	if (!pattern)
		die("malloc");
	for (size_t i = 0; i < PERIOD + MAX_WRITE; i++)
		pattern[i] = (unsigned char)(i % PERIOD);
	/* A lost reader must show up as EPIPE, not kill the report. */
	signal(SIGPIPE, SIG_IGN);

	printf("bench_core: pagepipe %s vs kernel pipe, writer thread -> reader "
	       "thread, %ld CPUs\n",
	       pp_version(), sysconf(_SC_NPROCESSORS_ONLN));
	printf("reader buffer 64 KiB, default 64 KiB capacity, median of %d "
	       "alternating runs, scale %g%s\n\n",
	       reps, scale, quick ? " (quick)" : "");
	printf("%-14s %-11s %20s %20s %8s %7s %s\n", "case", "amount", "kernel",
	       "pagepipe", "ratio", "target", "result");
	fflush(stdout);

	int met = 0, missed = 0;
	for (int ci = 0; ci < ncases; ci++) {
		struct bcase *c = &cases[ci];
		double v[2][MAX_REPS], med[2];
		unsigned long long amount;

		if (only && !strstr(c->name, only))
			continue;
		if (c->wsize) {
			/* a whole number of writes, at least one */
			amount = (unsigned long long)((double)c->amount * scale);
			amount -= amount % c->wsize;
			if (amount < c->wsize)
				amount = c->wsize;
		} else {
			amount = (unsigned long long)((double)c->amount * scale);
			if (amount < 100)
				amount = 100;
		}
		for (int rep = 0; rep < reps; rep++) {
			for (int k = 0; k < 2; k++) {
				/* alternate which kind goes first */
				enum kind kind = (enum kind)((k + rep) % 2);
				/* watchdog: a hang must not block the report forever */
				alarm((unsigned)(120 + 120 * scale));
				v[kind][rep] = c->wsize
				                   ? run_stream(kind, c->wsize, amount)
				                   : run_pingpong(kind, (long)amount);
				alarm(0);
			}
		}
		med[KERNEL] = median(v[KERNEL], reps);
		med[PAGEPIPE] = median(v[PAGEPIPE], reps);

		/* Both figures are rates, so pagepipe/kernel is the throughput
		 * ratio and, for ping-pong, kernel latency / pagepipe latency. */
		double ratio = med[PAGEPIPE] / med[KERNEL];
		char amt[32], kf[32], pf[32], tg[16];
		const char *res = "-";
		if (c->wsize) {
			if (amount >= 10 * MiB)
				snprintf(amt, sizeof amt, "%llu MiB", amount / MiB);
			else
				snprintf(amt, sizeof amt, "%llu KiB", amount / KiB);
		} else {
			snprintf(amt, sizeof amt, "%llu rt", amount);
		}
		fmt_rate(kf, sizeof kf, c, med[KERNEL]);
		fmt_rate(pf, sizeof pf, c, med[PAGEPIPE]);
		if (c->target > 0) {
			snprintf(tg, sizeof tg, ">=%gx", c->target);
			if (ratio >= c->target) {
				res = "MET";
				met++;
			} else {
				res = "MISSED";
				missed++;
			}
		} else {
			snprintf(tg, sizeof tg, "-");
		}
		printf("%-14s %-11s %20s %20s %7.2fx %7s %s\n", c->name, amt, kf, pf,
		       ratio, tg, res);
		fflush(stdout);
	}
	free(pattern);

	printf("\ntargets: %d met, %d missed (a report, not a test)\n", met,
	       missed);
	if (data_errors) {
		printf("DATA ERRORS: %d runs lost or corrupted data\n", data_errors);
		return 1;
	}
	printf("data: every run delivered its exact byte count, sampled "
	       "contents matched\n");
	return 0;
}
