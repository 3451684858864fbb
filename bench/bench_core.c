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
 * so the reader checks the first and last byte of every 4 KiB page of the
 * stream it reads against its position and compares one page in 16 in full
 * (bench.h's check); the byte total received
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
 *
 * The options, repetitions, medians, the stream pattern with its writer
 * and checking reader, and the report's MET/MISSED counting are shared
 * with bench_zerocopy.c in bench.h; the kernel-or-pagepipe struct tp with
 * the tests, in test/harness/pipe.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define PERIOD 251          /* the stream pattern: byte p is p % PERIOD */
#define READ_BUF (64 * KiB) /* the reader's buffer, for both pipes */
#define MAX_WRITE MiB

/* ---- throughput ------------------------------------------------------- */

struct stream {
	struct tp pipe;
	size_t wsize;             /* bytes per write */
	unsigned long long total; /* bytes the writer writes */
	pthread_barrier_t start;
	double t0;
	struct rx rx; /* filled by the reader */
	int werr;     /* errno of a failed write, or 0 */
};

static void *stream_writer(void *arg)
{
	struct stream *s = arg;

	pthread_barrier_wait(&s->start);
	s->t0 = t_now();
	s->werr = bench_write_stream(&s->pipe, s->total, s->wsize);
	bench_close(&s->pipe, 1);
	return NULL;
}

static void *stream_reader(void *arg)
{
	struct stream *s = arg;

	pthread_barrier_wait(&s->start);
	bench_read_stream(&s->pipe, READ_BUF, 1, &s->rx);
	return NULL;
}

/* One run: returns bytes per second. */
static double run_stream(enum kind kind, size_t wsize, unsigned long long total)
{
	struct stream s;
	pthread_t w, r;

	memset(&s, 0, sizeof s);
	s.wsize = wsize;
	s.total = total;
	bench_open(&s.pipe, kind);
	if (pthread_barrier_init(&s.start, NULL, 2) != 0)
		die("pthread_barrier_init");
	if (pthread_create(&r, NULL, stream_reader, &s) != 0 ||
	    pthread_create(&w, NULL, stream_writer, &s) != 0)
		die("pthread_create");
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	bench_close(&s.pipe, 0);
	pthread_barrier_destroy(&s.start);

	if (s.werr || s.rx.err || s.rx.received != total || s.rx.bad) {
		fprintf(stderr,
		        "DATA ERROR: %s, %zu-byte writes: wrote %llu, received "
		        "%llu, %lu bad reads of %lu, write errno %d, read "
		        "errno %d\n",
		        tp_name(&s.pipe), wsize, total, s.rx.received, s.rx.bad,
		        s.rx.reads, s.werr, s.rx.err);
		data_errors++;
	}
	return (double)total / (s.rx.t1 - s.t0);
}

/* ---- ping-pong -------------------------------------------------------- */

struct pingpong {
	struct tp there, back; /* pinger -> echoer, echoer -> pinger */
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
		ssize_t r = tp_read(&p->there, &c, 1);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			p->err = errno;
			break;
		}
		while ((r = tp_write(&p->back, &c, 1)) < 0 && errno == EINTR)
			;
		if (r != 1) {
			p->err = errno;
			break;
		}
	}
	bench_close(&p->back, 1);
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
	bench_open(&p.there, kind);
	bench_open(&p.back, kind);
	if (pthread_barrier_init(&p.start, NULL, 2) != 0)
		die("pthread_barrier_init");
	if (pthread_create(&t, NULL, echoer, &p) != 0)
		die("pthread_create");
	pthread_barrier_wait(&p.start);
	t0 = t_now();
	for (long i = 0; i < rounds; i++) {
		unsigned char out = (unsigned char)(i * 7 + 1), in = 0;
		ssize_t r;
		while ((r = tp_write(&p.there, &out, 1)) < 0 && errno == EINTR)
			;
		if (r != 1)
			break;
		while ((r = tp_read(&p.back, &in, 1)) < 0 && errno == EINTR)
			;
		if (r != 1)
			break;
		if (in != out)
			p.bad++;
		done++;
	}
	t1 = t_now();
	bench_close(&p.there, 1);
	pthread_join(t, NULL);
	/* the echoer has seen EOF and closed its end: back must be at EOF too */
	unsigned char extra;
	ssize_t tail = tp_read(&p.back, &extra, 1);
	bench_close(&p.there, 0);
	bench_close(&p.back, 0);
	pthread_barrier_destroy(&p.start);

	if (done != rounds || p.bad || p.err || tail != 0) {
		fprintf(stderr,
		        "DATA ERROR: %s ping-pong: %ld of %ld round trips, %ld "
		        "wrong bytes, echoer errno %d, final read %zd\n",
		        tp_name(&p.there), done, rounds, p.bad, p.err, tail);
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

/* A case's run for bench_medians: the variant is the kind of pipe. */
struct case_run {
	const struct bcase *c;
	unsigned long long amount; /* scaled */
};

static double run_case(int kind, const void *ctx)
{
	const struct case_run *cr = ctx;
	return cr->c->wsize ? run_stream((enum kind)kind, cr->c->wsize, cr->amount)
	                    : run_pingpong((enum kind)kind, (long)cr->amount);
}

static void fmt_rate(char *out, size_t len, const struct bcase *c, double v)
{
	if (c->wsize)
		snprintf(out, len, "%.1f MB/s", v / 1e6);
	else
		snprintf(out, len, "%.0f rt/s %5.1fus", v, 1e6 / v);
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
	struct bench_opts o = { .case_help = "only the cases whose name contains CASE" };

	bench_begin(&o, argc, argv, "bench_core", " vs kernel pipe, writer thread -> reader thread");
	bench_pattern(PERIOD, MAX_WRITE, 0);
	printf("reader buffer 64 KiB, default 64 KiB capacity, %s\n\n", bench_how(&o));
	printf("%-14s %-11s %20s %20s %8s %7s %s\n", "case", "amount", "kernel",
	       "pagepipe", "ratio", "target", "result");
	fflush(stdout);

	for (int ci = 0; ci < ncases; ci++) {
		struct bcase *c = &cases[ci];
		double med[2];
		unsigned long long amount;

		if (o.only && !strstr(c->name, o.only))
			continue;
		if (c->wsize) {
			/* a whole number of writes, at least one */
			amount = (unsigned long long)((double)c->amount * o.scale);
			amount -= amount % c->wsize;
			if (amount < c->wsize)
				amount = c->wsize;
		} else {
			amount = (unsigned long long)((double)c->amount * o.scale);
			if (amount < 100)
				amount = 100;
		}
		struct case_run cr = { c, amount };
		bench_medians(2, o.reps, o.scale, run_case, &cr, med);

		/* Both figures are rates, so pagepipe/kernel is the throughput
		 * ratio and, for ping-pong, kernel latency / pagepipe latency. */
		double ratio = med[PAGEPIPE] / med[KERNEL];
		char amt[32], kf[32], pf[32], tg[16];
		const char *res = "-";
		if (c->wsize)
			fmt_amount(amt, sizeof amt, amount);
		else
			snprintf(amt, sizeof amt, "%llu rt", amount);
		fmt_rate(kf, sizeof kf, c, med[KERNEL]);
		fmt_rate(pf, sizeof pf, c, med[PAGEPIPE]);
		if (c->target > 0) {
			snprintf(tg, sizeof tg, ">=%gx", c->target);
			res = bench_result(ratio >= c->target);
		} else {
			snprintf(tg, sizeof tg, "-");
		}
		printf("%-14s %-11s %20s %20s %7.2fx %7s %s\n", c->name, amt, kf, pf,
		       ratio, tg, res);
		fflush(stdout);
	}

	printf("\n");
	return bench_finish("every run delivered its exact byte count, sampled "
	                    "contents matched");
}
