/*
 * bench_zerocopy.c - what moving buffer references instead of bytes buys:
 * pp_splice, pp_fanout and pp_splice_from_fd/pp_splice_to_fd against
 * copying through a buffer and against the kernel, in the same run.
 *
 * Four parts, the first two with a single-thread half (all figures are
 * medians of alternating repetitions; the ratios are the result, absolute
 * rates on a small shared machine are noise):
 *
 * 1. pipe to pipe.  A writer thread writes 64 KiB blocks into pipe A, a
 *    mover thread moves A -> B, a reader thread drains B with 64 KiB reads
 *    (pp_read / read(2), so the reader side is the same for all four).
 *    The mover is pp_splice, or pp_read + pp_write through a 64 KiB buffer,
 *    or, on kernel pipes, splice(2), or read(2) + write(2).
 *    What the ratio pp_splice / pp-copy measures: the end-to-end rate of
 *    the whole chain.  The writer's copy into A and the reader's copy out
 *    of B (and its comparison) are in both variants, so this ratio can only
 *    reach 10x if the copying mover's two 64 KiB copies dominate everything
 *    else -- on two CPUs shared by three threads they do not: the chain is
 *    bound by the writer's and reader's memory traffic and by hand-offs, and
 *    removing one of three copies can give at most a few tens of percent.
 *    So a second row, "mover alone", isolates the mover: one thread moves
 *    the same 64 KiB back and forth between two pipes, nothing else
 *    running; there the ratio is the cost of moving 16 slot references
 *    against the cost of copying 64 KiB out and back in.
 *
 * 2. fan-out.  A writer thread writes 64 KiB blocks into a source pipe; a
 *    distributor thread hands every byte to N = 1, 2, 4 pipes, each drained
 *    by its own reader thread.  The distributor is pp_fanout (one copy,
 *    shared by reference), or "copying": pp_read of a block once, then
 *    pp_write of it into each of the N pipes.  Readers are zero-copy
 *    readers: pp_peek, compare the segments in place, pp_consume.  Reported:
 *    the source stream's rate, and cost(4)/cost(1) = rate(1)/rate(4).
 *    With 4 readers there are 6 threads on 2 CPUs, and every reader still
 *    compares every byte it gets (see "Data" below; -s to sample instead),
 *    so readers' work grows with N in both variants; what fan-out removes is
 *    the N-1 extra copies and pages.  On two CPUs this part measures the
 *    scheduler as much as the fan-out: with 64 KiB pipes and 64 KiB blocks
 *    every block needs every reader to run, and a context switch here costs
 *    1.6 us (sched_yield between two threads on one CPU) to 4 us (a futex
 *    hand-off between CPUs), so 4 readers cost about twice 1 even with the
 *    readers sampling.  Hence 2b.
 *
 * 2b. fan-out alone.  The same work on one thread, per 64 KiB block: write
 *    it into the source, pp_fanout it to N pipes (or pp_read it and pp_write
 *    it N times), then each pipe's pp_peek, a sampled check, pp_consume.
 *    cost(4)/cost(1) here is what a fan-out to more readers costs in CPU
 *    work, without the scheduling of more threads than CPUs: the producer's
 *    copy into the source is paid once, and each further reader adds its
 *    slots and references.  The time per block is printed split into those
 *    three phases.  As "mover alone" does for part 1.
 *
 * 3. file to /dev/null.  A 256 MiB temporary file (written, not synced;
 *    served from the page cache) goes through a pipe to /dev/null, one
 *    thread filling the pipe from the file, one draining it to /dev/null:
 *    pp_splice_from_fd + pp_splice_to_fd through a pagepipe, against
 *    splice(2) file -> kernel pipe -> /dev/null.  The kernel moves page-cache
 *    pages by reference; pagepipe still reads an ordinary file's pages
 *    into pool pages (splice_fd.c says why), so expect it to lose here.
 *    Then the same bytes from a memfd sealed against shrinking, whose
 *    pages pagepipe maps instead (one mmap and munmap per call).
 *
 * 4. memory of a fan-out.  Four reader threads are stalled (blocked before
 *    their first read); 256 KiB is fanned out to their four pipes (each
 *    sized with pp_setsize to hold it).  pp_pool_stats().pages_in_use must
 *    grow by one copy, 64 pages, not four (256).  The copying distributor is
 *    measured the same way for comparison.  Then the readers drain and
 *    check, and the pool must be back where it started.
 *
 * Data is checked in every case, against what was written: the stream is a
 * fixed random pattern with a prime period of 65521 bytes (so a stale or
 * misplaced page shows as a mismatch), and every reader compares every byte
 * it receives with the pattern at its stream position (memcmp: stronger
 * than a checksum and as cheap), and its byte total with the total written.
 * The file case checks byte counts in the timed runs (/dev/null keeps
 * nothing) and, once per kind, sends the whole file through the same calls
 * into a kernel pipe whose reader compares every byte.  Lost or corrupted
 * data makes the program exit 1; a missed target does not (a report, not a
 * test).
 *
 * Usage: bench_zerocopy [-q] [-s] [-r REPS] [-c CASE]
 *   -q       quick mode (1/16 of the work, 3 repetitions): a smoke run
 *   -s       readers compare one 4 KiB page of the stream in 16 in full and
 *            the first and last byte of every other (bench.h's check), to take the
 *            readers' comparison out of the figures; byte counts stay exact
 *   -r REPS  repetitions per measurement (default 5)
 *   -c CASE  only the parts whose name contains CASE: "pipe", "mover",
 *            "fanout" (2 and 2b), "fanout alone", "file", "memory"
 *   PP_BENCH_SCALE=F in the environment multiplies every amount by F.
 *   PP_SPIN_NS=0 (read by the library, lock.c) turns its spin-before-sleep
 *   off: worth a comparison run when other processes load the CPUs, where
 *   the spinning waiters have been seen to cost pagepipe a factor of ten.
 *
 * What it shares with bench_core.c (options, alternating repetitions and
 * medians, the stream pattern, writer and checking reader, the MET/MISSED
 * report) is in bench.h; the kernel-or-pagepipe struct tp it shares with
 * the tests, in test/harness/pipe.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bench.h"

#define BLOCK (64 * KiB)     /* writes, moves and reads */
#define PERIOD 65521UL       /* the stream pattern's period, a prime */
#define MAX_READERS 4
#define PEEK_SEGS 64

static int sampled; /* -s */

static void target(const char *what, double ratio, double goal, int at_least)
{
	int ok = at_least ? ratio >= goal : ratio <= goal;
	printf("  %-44s %7.2fx  target %s%gx  %s\n", what, ratio, at_least ? ">=" : "<=", goal,
	       bench_result(ok));
}

/* Move up to n bytes from a's read end to b's write end by splicing. */
static ssize_t splice_between(struct tp *a, struct tp *b, size_t n)
{
	if (a->kernel)
		return splice(a->fd[0], NULL, b->fd[1], NULL, n, 0);
	return pp_splice(a->e[0], b->e[1], n, 0);
}

/* ---- 1. pipe to pipe ---------------------------------------------------- */

enum mover { M_PP_SPLICE, M_PP_COPY, M_K_SPLICE, M_K_COPY, M_COUNT };
static const char *mover_name[M_COUNT] = {
	"pagepipe pp_splice",
	"pagepipe pp_read+pp_write",
	"kernel splice(2)",
	"kernel read+write",
};

static enum kind mover_kind(enum mover m)
{
	return m == M_K_SPLICE || m == M_K_COPY ? KERNEL : PAGEPIPE;
}

static int mover_splices(enum mover m)
{
	return m == M_PP_SPLICE || m == M_K_SPLICE;
}

struct chain {
	enum mover mover;
	struct tp a, b;
	unsigned long long total;
	pthread_barrier_t start;
	double t0;
	struct rx rx; /* the reader's */
	int werr, merr;
};

static void *chain_writer(void *arg)
{
	struct chain *c = arg;
	pthread_barrier_wait(&c->start);
	c->t0 = t_now();
	c->werr = bench_write_stream(&c->a, c->total, BLOCK);
	bench_close(&c->a, 1);
	return NULL;
}

static void *chain_mover(void *arg)
{
	struct chain *c = arg;
	unsigned char *buf = bench_buf(BLOCK);
	if (!buf)
		die("malloc");
	pthread_barrier_wait(&c->start);
	for (;;) {
		ssize_t r = mover_splices(c->mover) ? splice_between(&c->a, &c->b, BLOCK)
		                                    : tp_read(&c->a, buf, BLOCK);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			c->merr = errno;
			break;
		}
		if (!mover_splices(c->mover) && (c->merr = tp_write_all(&c->b, buf, (size_t)r)))
			break;
	}
	bench_close(&c->b, 1);
	/* a mover that failed must not leave the writer blocked on a full A */
	bench_close(&c->a, 0);
	free(buf);
	return NULL;
}

static void *chain_reader(void *arg)
{
	struct chain *c = arg;
	pthread_barrier_wait(&c->start);
	bench_read_stream(&c->b, BLOCK, sampled, &c->rx);
	return NULL;
}

/* One run of the chain: bytes per second end to end. */
static double run_chain(enum mover m, unsigned long long total)
{
	struct chain c;
	pthread_t t[3];
	memset(&c, 0, sizeof c);
	c.mover = m;
	c.total = total;
	bench_open(&c.a, mover_kind(m));
	bench_open(&c.b, mover_kind(m));
	if (pthread_barrier_init(&c.start, NULL, 3))
		die("pthread_barrier_init");
	if (pthread_create(&t[0], NULL, chain_reader, &c) ||
	    pthread_create(&t[1], NULL, chain_mover, &c) ||
	    pthread_create(&t[2], NULL, chain_writer, &c))
		die("pthread_create");
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	bench_close(&c.b, 0);
	pthread_barrier_destroy(&c.start);
	if (c.werr || c.merr || c.rx.err || c.rx.bad || c.rx.received != total) {
		fprintf(stderr,
		        "DATA ERROR: pipe to pipe, %s: wrote %llu, received %llu, %lu bad "
		        "reads of %lu, errno writer %d mover %d reader %d\n",
		        mover_name[m], total, c.rx.received, c.rx.bad, c.rx.reads, c.werr, c.merr,
		        c.rx.err);
		data_errors++;
	}
	return (double)total / (c.rx.t1 - c.t0);
}

/*
 * The mover alone: one thread, two pipes, 64 KiB moved A -> B, then B -> A,
 * `moves` times, by splicing or by read + write through a buffer.  Returns
 * bytes moved per second.  The 64 KiB must arrive intact at the end.
 */
static double run_mover_alone(enum mover m, long moves)
{
	struct tp p[2];
	unsigned char *buf = bench_buf(BLOCK);
	int err = 0;
	long done = 0;
	if (!buf)
		die("malloc");
	bench_open(&p[0], mover_kind(m));
	bench_open(&p[1], mover_kind(m));
	err = tp_write_all(&p[0], expected(0), BLOCK);
	double t0 = t_now();
	for (; done < moves && !err; done++) {
		struct tp *src = &p[done % 2], *dst = &p[(done + 1) % 2];
		for (size_t left = BLOCK; left && !err;) {
			ssize_t r = mover_splices(m) ? splice_between(src, dst, left)
			                             : tp_read(src, buf, left);
			if (r <= 0) {
				err = r < 0 ? errno : EIO; /* EIO: an unexpected end of file */
				break;
			}
			if (!mover_splices(m))
				err = tp_write_all(dst, buf, (size_t)r);
			left -= (size_t)r;
		}
	}
	double t1 = t_now();
	/* the block is in p[moves % 2] now: read it back and compare */
	size_t got = 0;
	while (!err && got < BLOCK) {
		ssize_t r = tp_read(&p[moves % 2], buf + got, BLOCK - got);
		if (r <= 0) {
			err = r < 0 ? errno : EIO;
			break;
		}
		got += (size_t)r;
	}
	if (!err && memcmp(buf, expected(0), BLOCK) != 0)
		err = -1;
	for (int i = 0; i < 2; i++) {
		bench_close(&p[i], 0);
		bench_close(&p[i], 1);
	}
	free(buf);
	if (err) {
		fprintf(stderr, "DATA ERROR: mover alone, %s: %ld of %ld moves, %s\n",
		        mover_name[m], done, moves,
		        err < 0 ? "the block came back changed" : strerror(err));
		data_errors++;
		return 0;
	}
	return (double)moves * BLOCK / (t1 - t0);
}

/* A byte total of about bytes * scale: whole blocks, at least 16. */
static unsigned long long scaled_total(double bytes, double scale)
{
	unsigned long long total = (unsigned long long)(bytes * scale);
	total -= total % BLOCK;
	return total < 16 * BLOCK ? 16 * BLOCK : total;
}

/* bench_medians runs: the variant is the mover. */
static double chain_variant(int m, const void *total)
{
	return run_chain((enum mover)m, *(const unsigned long long *)total);
}

static double mover_alone_variant(int m, const void *moves)
{
	return run_mover_alone((enum mover)m, *(const long *)moves);
}

static void part_pipe(int reps, double scale, const char *only)
{
	double med[M_COUNT];
	char amt[32];

	if (!only || strstr("pipe", only)) {
		unsigned long long total = scaled_total(512.0 * MiB, scale);
		fmt_amount(amt, sizeof amt, total);
		printf("1. pipe to pipe: writer -> A -> mover -> B -> reader (64 KiB pp_read/read), "
		       "%s per run\n", amt);
		bench_medians(M_COUNT, reps, scale, chain_variant, &total, med);
		for (int m = 0; m < M_COUNT; m++)
			printf("  %-44s %9.1f MB/s\n", mover_name[m], med[m] / 1e6);
		target("pp_splice / pp copy (end to end)", med[M_PP_SPLICE] / med[M_PP_COPY], 10, 1);
		printf("  %-44s %7.2fx\n", "pp_splice / kernel splice", med[M_PP_SPLICE] / med[M_K_SPLICE]);
		printf("  %-44s %7.2fx\n", "pp copy / kernel copy", med[M_PP_COPY] / med[M_K_COPY]);
		printf("  %-44s %7.2fx\n\n", "kernel splice / kernel copy (for reference)",
		       med[M_K_SPLICE] / med[M_K_COPY]);
		fflush(stdout);
	}

	if (!only || strstr("mover", only)) {
		long moves = (long)(8192 * scale);
		if (moves < 64)
			moves = 64;
		fmt_amount(amt, sizeof amt, (unsigned long long)moves * BLOCK);
		printf("1b. mover alone: one thread moves 64 KiB back and forth between two "
		       "pipes, %s per run\n", amt);
		bench_medians(M_COUNT, reps, scale, mover_alone_variant, &moves, med);
		for (int m = 0; m < M_COUNT; m++)
			printf("  %-44s %9.1f MB/s %8.2f us per 64 KiB\n", mover_name[m], med[m] / 1e6,
			       med[m] > 0 ? 1e6 * BLOCK / med[m] : 0);
		target("pp_splice / pp copy (mover alone)", med[M_PP_SPLICE] / med[M_PP_COPY], 10, 1);
		printf("  %-44s %7.2fx\n", "pp_splice / kernel splice", med[M_PP_SPLICE] / med[M_K_SPLICE]);
		printf("  %-44s %7.2fx\n\n", "kernel splice / kernel copy (for reference)",
		       med[M_K_SPLICE] / med[M_K_COPY]);
		fflush(stdout);
	}
}

/* ---- 2. fan-out --------------------------------------------------------- */

struct fan {
	int n, copying;
	struct pp_end *src[2];
	struct pp_end *out[MAX_READERS][2];
	unsigned long long total;
	pthread_barrier_t start;
	pthread_barrier_t *stall; /* part 4: readers wait here before reading */
	double t0;
	struct rx rx[MAX_READERS]; /* each reader's (reads: segments) */
	int werr, derr;
};

struct reader_arg {
	struct fan *f;
	int i;
};

static void *fan_writer(void *arg)
{
	struct fan *f = arg;
	struct tp p = tp_of(f->src[0], f->src[1]);
	pthread_barrier_wait(&f->start);
	f->t0 = t_now();
	f->werr = bench_write_stream(&p, f->total, BLOCK);
	if (pp_close(f->src[1]))
		die("pp_close");
	return NULL;
}

/* Hand everything in src to the n outputs, by pp_fanout or by copying. */
static int distribute(struct fan *f, unsigned char *buf)
{
	struct pp_end *outs[MAX_READERS];
	for (int i = 0; i < f->n; i++)
		outs[i] = f->out[i][1];
	for (;;) {
		ssize_t r = f->copying ? pp_read(f->src[0], buf, BLOCK)
		                       : pp_fanout(f->src[0], outs, f->n, BLOCK, 0);
		if (r == 0)
			return 0;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		for (int i = 0; f->copying && i < f->n; i++) {
			struct tp p = tp_of(NULL, outs[i]);
			int err = tp_write_all(&p, buf, (size_t)r);
			if (err)
				return err;
		}
	}
}

static void *fan_distributor(void *arg)
{
	struct fan *f = arg;
	unsigned char *buf = bench_buf(BLOCK);
	if (!buf)
		die("malloc");
	pthread_barrier_wait(&f->start);
	f->derr = distribute(f, buf);
	for (int i = 0; i < f->n; i++)
		if (pp_close(f->out[i][1]))
			die("pp_close");
	free(buf);
	return NULL;
}

/* A zero-copy reader: peek, compare in place, consume. */
static void *fan_reader(void *arg)
{
	struct reader_arg *ra = arg;
	struct fan *f = ra->f;

	if (f->stall)
		pthread_barrier_wait(f->stall);
	else
		pthread_barrier_wait(&f->start);
	bench_peek_stream(f->out[ra->i][0], sampled, &f->rx[ra->i]);
	return NULL;
}

static void fan_open(struct fan *f, int n, int copying, unsigned long long total)
{
	memset(f, 0, sizeof *f);
	f->n = n;
	f->copying = copying;
	f->total = total;
	if (pp_pipe(f->src, 0))
		die("pp_pipe");
	for (int i = 0; i < n; i++)
		if (pp_pipe(f->out[i], 0))
			die("pp_pipe");
}

/* Check every reader's count and comparisons; close the read ends. */
static void fan_finish(struct fan *f, const char *what)
{
	for (int i = 0; i < f->n; i++) {
		const struct rx *rx = &f->rx[i];
		if (rx->err || rx->bad || rx->received != f->total || f->werr || f->derr) {
			fprintf(stderr,
			        "DATA ERROR: %s, %s, %d readers, reader %d: wrote %llu, received "
			        "%llu, %lu bad segments of %lu, errno writer %d distributor %d "
			        "reader %d\n",
			        what, f->copying ? "copying" : "pp_fanout", f->n, i, f->total,
			        rx->received, rx->bad, rx->reads, f->werr, f->derr, rx->err);
			data_errors++;
		}
		if (pp_close(f->out[i][0]))
			die("pp_close");
	}
	if (pp_close(f->src[0]))
		die("pp_close");
}

/* One run: the source stream's bytes per second, until the last reader is done. */
static double run_fan(int n, int copying, unsigned long long total)
{
	struct fan f;
	struct reader_arg ra[MAX_READERS];
	pthread_t w, d, r[MAX_READERS];

	fan_open(&f, n, copying, total);
	if (pthread_barrier_init(&f.start, NULL, (unsigned)n + 2))
		die("pthread_barrier_init");
	for (int i = 0; i < n; i++) {
		ra[i] = (struct reader_arg){ &f, i };
		if (pthread_create(&r[i], NULL, fan_reader, &ra[i]))
			die("pthread_create");
	}
	if (pthread_create(&d, NULL, fan_distributor, &f) ||
	    pthread_create(&w, NULL, fan_writer, &f))
		die("pthread_create");
	pthread_join(w, NULL);
	pthread_join(d, NULL);
	double t1 = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(r[i], NULL);
		if (f.rx[i].t1 > t1)
			t1 = f.rx[i].t1;
	}
	pthread_barrier_destroy(&f.start);
	fan_finish(&f, "fan-out");
	return (double)total / (t1 - f.t0);
}

static double run_fan_alone(int n, int copying, long blocks);

/* A fan-out's parameters for bench_medians (parts 2 and 2b): the variant
 * is `copying`. */
struct fan_run {
	int n;
	unsigned long long total;
	int alone; /* 2b: one thread does it all */
};

static double fan_variant(int copying, const void *ctx)
{
	const struct fan_run *fr = ctx;
	return fr->alone ? run_fan_alone(fr->n, copying, (long)(fr->total / BLOCK))
	                 : run_fan(fr->n, copying, fr->total);
}

static void part_fanout(int reps, double scale)
{
	static const int ns[] = { 1, 2, 4 };
	double med[3][2];
	char amt[32];
	unsigned long long total = scaled_total(256.0 * MiB, scale);
	fmt_amount(amt, sizeof amt, total);
	printf("2. fan-out: writer -> source -> distributor -> N pipes -> N zero-copy readers "
	       "(pp_peek/pp_consume),\n   64 KiB blocks, %s per run, rate of the source "
	       "stream\n", amt);
	printf("  %-10s %16s %22s %10s\n", "readers", "pp_fanout", "copying distributor",
	       "ratio");
	for (int j = 0; j < 3; j++) {
		struct fan_run fr = { ns[j], total, 0 };
		bench_medians(2, reps, scale, fan_variant, &fr, med[j]);
		printf("  %-10d %11.1f MB/s %17.1f MB/s %9.2fx\n", ns[j], med[j][0] / 1e6,
		       med[j][1] / 1e6, med[j][0] / med[j][1]);
		fflush(stdout);
	}
	target("pp_fanout cost per byte, 4 readers / 1", med[0][0] / med[2][0], 1.5, 0);
	printf("  %-44s %7.2fx\n\n", "copying cost per byte, 4 readers / 1", med[0][1] / med[2][1]);
	fflush(stdout);
}

/*
 * 2b. fan-out alone: one thread does a whole fan-out per 64 KiB block, with
 * no other thread to wait for or be scheduled against: it writes the block
 * into the source (the stream's producer), hands it to the n pipes
 * (pp_fanout, or pp_read + n pp_write for copying), then, for each pipe,
 * does a reader's pp_peek, checks the segments and pp_consume.  Readers
 * check by sampling here (one page of the stream in 16 in full, the ends
 * of the others), whatever -s says: what a reader does with the bytes is the
 * application's cost, the same for every way of delivering them, and on
 * one thread it would be counted n times.  Returns source bytes per second;
 * fa_split[variant] keeps the last run's microseconds per block in each
 * phase.
 */
static double fa_split[2][3];

static double run_fan_alone(int n, int copying, long blocks)
{
	struct fan f;
	struct pp_end *outs[MAX_READERS];
	struct iovec iov[PEEK_SEGS];
	unsigned char *buf = bench_buf(BLOCK);
	unsigned long long pos = 0;
	double t[3] = { 0, 0, 0 };
	int err = 0, bad = 0;
	if (!buf)
		die("malloc");
	fan_open(&f, n, copying, (unsigned long long)blocks * BLOCK);
	for (int i = 0; i < n; i++)
		outs[i] = f.out[i][1];
	double t0 = t_now();
	for (long b = 0; b < blocks && !err && !bad; b++, pos += BLOCK) {
		double a = t_now();
		struct tp src = tp_of(f.src[0], f.src[1]);
		err = tp_write_all(&src, expected(pos), BLOCK);
		double m = t_now();
		if (!err && !copying && pp_fanout(f.src[0], outs, n, BLOCK, 0) != (ssize_t)BLOCK)
			err = errno ? errno : EIO;
		if (!err && copying && pp_read(f.src[0], buf, BLOCK) != (ssize_t)BLOCK)
			err = errno ? errno : EIO;
		for (int i = 0; copying && i < n && !err; i++) {
			struct tp p = tp_of(NULL, outs[i]);
			err = tp_write_all(&p, buf, BLOCK);
		}
		double r = t_now();
		for (int i = 0; i < n && !err; i++) {
			ssize_t k = pp_peek(f.out[i][0], iov, PEEK_SEGS);
			size_t got = 0;
			for (ssize_t j = 0; j < k; j++) {
				bad |= check(iov[j].iov_base, iov[j].iov_len, pos + got, 1);
				got += iov[j].iov_len;
			}
			if (k < 0 || got != BLOCK || pp_consume(f.out[i][0], got) != (ssize_t)got)
				err = k < 0 ? errno : EIO;
		}
		double e = t_now();
		t[0] += m - a;
		t[1] += r - m;
		t[2] += e - r;
	}
	double t1 = t_now();
	for (int i = 0; i < 3; i++)
		fa_split[copying][i] = 1e6 * t[i] / (double)blocks;
	if (err || bad) {
		fprintf(stderr, "DATA ERROR: fan-out alone, %s, %d readers: %s\n",
		        copying ? "copying" : "pp_fanout", n,
		        bad ? "a reader got wrong bytes" : strerror(err));
		data_errors++;
	}
	for (int i = 0; i < n; i++) {
		pp_close(f.out[i][0]);
		pp_close(f.out[i][1]);
	}
	pp_close(f.src[0]);
	pp_close(f.src[1]);
	free(buf);
	return (double)blocks * BLOCK / (t1 - t0);
}

static void part_fanout_alone(int reps, double scale)
{
	static const int ns[] = { 1, 2, 4 };
	double med[3][2];
	char amt[32];
	long blocks = (long)(16384 * scale);
	if (blocks < 64)
		blocks = 64;
	fmt_amount(amt, sizeof amt, (unsigned long long)blocks * BLOCK);
	printf("2b. fan-out alone: one thread writes a 64 KiB block, fans it out to N pipes "
	       "and reads\n    each (pp_peek, sampled check, pp_consume), %s per run; us per block: "
	       "total (write +\n    distribute + readers, last run)\n", amt);
	printf("  %-7s %30s %30s\n", "readers", "pp_fanout", "copying distributor");
	for (int j = 0; j < 3; j++) {
		struct fan_run fr = { ns[j], (unsigned long long)blocks * BLOCK, 1 };
		bench_medians(2, reps, scale, fan_variant, &fr, med[j]);
		printf("  %-7d", ns[j]);
		for (int v = 0; v < 2; v++)
			printf("   %6.2f (%5.2f + %5.2f + %5.2f)", 1e6 * BLOCK / med[j][v],
			       fa_split[v][0], fa_split[v][1], fa_split[v][2]);
		printf("\n");
		fflush(stdout);
	}
	target("pp_fanout cost, 4 readers / 1 (alone)", med[0][0] / med[2][0], 1.5, 0);
	printf("  %-44s %7.2fx\n\n", "copying cost, 4 readers / 1 (alone)",
	       med[0][1] / med[2][1]);
	fflush(stdout);
}

/* ---- 3. file to /dev/null ----------------------------------------------- */

struct filerun {
	enum kind kind;
	int file, sink;
	unsigned long long size;
	struct tp p;
	pthread_barrier_t start;
	double t0, t1;
	unsigned long long in, out;
	int ierr, oerr;
};

static void *file_filler(void *arg)
{
	struct filerun *fr = arg;
	loff_t koff = 0;
	off_t off = 0;
	pthread_barrier_wait(&fr->start);
	fr->t0 = t_now();
	for (;;) {
		ssize_t r = fr->kind == KERNEL
		                    ? splice(fr->file, &koff, fr->p.fd[1], NULL, BLOCK, 0)
		                    : pp_splice_from_fd(fr->file, &off, fr->p.e[1], BLOCK, 0);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fr->ierr = errno;
			break;
		}
		fr->in += (unsigned long long)r;
	}
	bench_close(&fr->p, 1);
	return NULL;
}

static void *file_drainer(void *arg)
{
	struct filerun *fr = arg;
	pthread_barrier_wait(&fr->start);
	for (;;) {
		ssize_t r = fr->kind == KERNEL
		                    ? splice(fr->p.fd[0], NULL, fr->sink, NULL, BLOCK, 0)
		                    : pp_splice_to_fd(fr->p.e[0], fr->sink, NULL, BLOCK, 0);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fr->oerr = errno;
			break;
		}
		fr->out += (unsigned long long)r;
	}
	fr->t1 = t_now();
	bench_close(&fr->p, 0); /* a filler stuck on a full pipe gets EPIPE */
	return NULL;
}

/* The checker of a verification run: reads the sink pipe, compares every
 * byte, -s or not: this run is the content check. */
struct sinkcheck {
	struct tp p; /* a kernel pipe; only its read end is used */
	struct rx rx;
};

static void *sink_checker(void *arg)
{
	struct sinkcheck *sc = arg;
	bench_read_stream(&sc->p, BLOCK, 0, &sc->rx);
	return NULL;
}

/*
 * One run: file -> pipe -> sink.  verify: the sink is a kernel pipe whose
 * reader compares every byte, instead of /dev/null.  Returns bytes/s.
 */
static double run_file(enum kind kind, int file, int devnull, unsigned long long size, int verify)
{
	struct filerun fr;
	struct sinkcheck sc;
	pthread_t t[3];

	memset(&fr, 0, sizeof fr);
	memset(&sc, 0, sizeof sc);
	fr.kind = kind;
	fr.file = file;
	fr.size = size;
	fr.sink = devnull;
	bench_open(&fr.p, kind);
	if (verify) {
		bench_open(&sc.p, KERNEL);
		fr.sink = sc.p.fd[1];
		if (pthread_create(&t[2], NULL, sink_checker, &sc))
			die("pthread_create");
	}
	if (pthread_barrier_init(&fr.start, NULL, 2))
		die("pthread_barrier_init");
	if (pthread_create(&t[0], NULL, file_drainer, &fr) ||
	    pthread_create(&t[1], NULL, file_filler, &fr))
		die("pthread_create");
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	pthread_barrier_destroy(&fr.start);
	if (verify) {
		bench_close(&sc.p, 1);
		pthread_join(t[2], NULL);
		bench_close(&sc.p, 0);
	}
	if (fr.ierr || fr.oerr || fr.in != size || fr.out != size ||
	    (verify && (sc.rx.err || sc.rx.bad || sc.rx.received != size))) {
		fprintf(stderr,
		        "DATA ERROR: file to %s, %s: file %llu bytes, filled %llu, drained "
		        "%llu, errno %d/%d; checked %llu, %lu bad reads of %lu, errno %d\n",
		        verify ? "checking pipe" : "/dev/null", tp_name(&fr.p), size, fr.in,
		        fr.out, fr.ierr, fr.oerr, sc.rx.received, sc.rx.bad, sc.rx.reads,
		        sc.rx.err);
		data_errors++;
	}
	return (double)size / (fr.t1 - fr.t0);
}

/* The file case's parameters for bench_medians: the variant is the kind. */
struct file_run {
	int file, devnull;
	unsigned long long size;
};

static double file_variant(int kind, const void *ctx)
{
	const struct file_run *fr = ctx;
	return run_file((enum kind)kind, fr->file, fr->devnull, fr->size, 0);
}

/* Fill fd with size bytes of the stream. */
static void fill_file(int fd, unsigned long long size)
{
	for (unsigned long long pos = 0; pos < size;) {
		size_t n = size - pos < MiB ? (size_t)(size - pos) : MiB;
		ssize_t r = write(fd, expected(pos), n);
		if (r <= 0)
			die("writing the temporary file");
		pos += (unsigned long long)r;
	}
}

/* Check, then time, one source file through both pipes. */
static void file_case(int file, int devnull, unsigned long long size, int reps, double scale,
                      const char *pp_what)
{
	/* the content check, once per kind, untimed; it also warms the cache */
	run_file(KERNEL, file, devnull, size, 1);
	run_file(PAGEPIPE, file, devnull, size, 1);

	double med[2];
	struct file_run fr = { file, devnull, size };
	bench_medians(2, reps, scale, file_variant, &fr, med);
	printf("  %-44s %9.1f MB/s\n", "kernel splice(2) file -> pipe -> /dev/null",
	       med[KERNEL] / 1e6);
	printf("  %-44s %9.1f MB/s\n", pp_what, med[PAGEPIPE] / 1e6);
	printf("  %-44s %7.2fx  (no target)\n", "pagepipe / kernel", med[PAGEPIPE] / med[KERNEL]);
	fflush(stdout);
}

static void part_file(int reps, double scale)
{
	unsigned long long size = scaled_total(256.0 * MiB, scale);
	const char *dir = getenv("TMPDIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/bench_zerocopy.XXXXXX", dir && *dir ? dir : "/tmp");
	int file = mkstemp(path);
	if (file < 0)
		die("mkstemp");
	unlink(path); /* nothing is left behind, whatever happens */
	fill_file(file, size);
	int devnull = open("/dev/null", O_WRONLY);
	if (devnull < 0)
		die("/dev/null");

	char amt[32];
	fmt_amount(amt, sizeof amt, size);
	printf("3. file to /dev/null: a %s file (page cache) -> pipe -> /dev/null, filler "
	       "and drainer threads, 64 KiB per call\n", amt);
	file_case(file, devnull, size, reps, scale, "pp_splice_from_fd (reads) + pp_splice_to_fd");
	close(file);

	/* The same bytes in a memfd sealed against shrinking: pagepipe maps
	 * its pages instead of reading them (splice_fd.c). */
	int mfd = memfd_create("bench_zerocopy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		die("memfd_create");
	fill_file(mfd, size);
	if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
		die("F_ADD_SEALS");
	printf("  the same from a sealed memfd (F_SEAL_SHRINK: pagepipe maps its pages)\n");
	file_case(mfd, devnull, size, reps, scale, "pp_splice_from_fd (maps) + pp_splice_to_fd");
	printf("\n");
	close(mfd);
	close(devnull);
}

/* ---- 4. memory of a fan-out to stalled readers ---------------------------- */

#define MEM_BYTES (256 * KiB)

static long pages_in_use(void)
{
	struct pp_pool_stats st;
	if (pp_pool_stats(&st))
		die("pp_pool_stats");
	return st.pages_in_use;
}

/* Fan MEM_BYTES out to 4 stalled readers; returns the pages it took. */
static long mem_run(int copying, long *left_after)
{
	struct fan f;
	struct reader_arg ra[MAX_READERS];
	pthread_t r[MAX_READERS];
	pthread_barrier_t stall;
	unsigned char *buf = bench_buf(BLOCK);
	long base = pages_in_use(), used = -1;

	if (!buf)
		die("malloc");
	fan_open(&f, MAX_READERS, copying, MEM_BYTES);
	if (pp_setsize(f.src[1], MEM_BYTES) != (long)MEM_BYTES)
		die("pp_setsize");
	for (int i = 0; i < MAX_READERS; i++)
		if (pp_setsize(f.out[i][1], MEM_BYTES) != (long)MEM_BYTES)
			die("pp_setsize");
	if (pthread_barrier_init(&stall, NULL, MAX_READERS + 1))
		die("pthread_barrier_init");
	f.stall = &stall;
	for (int i = 0; i < MAX_READERS; i++) {
		ra[i] = (struct reader_arg){ &f, i };
		if (pthread_create(&r[i], NULL, fan_reader, &ra[i]))
			die("pthread_create");
	}
	/* the readers are blocked on `stall`: nothing drains the outputs */
	struct tp src = tp_of(f.src[0], f.src[1]);
	f.werr = tp_write_all(&src, expected(0), MEM_BYTES);
	if (pp_close(f.src[1]))
		die("pp_close");
	/* All of it fits everywhere; a call that would wait means a bug. */
	struct pp_end *outs[MAX_READERS];
	for (int i = 0; i < MAX_READERS; i++) {
		outs[i] = f.out[i][1];
		/* copying: non-blocking, so that a full output fails, not hangs */
		if (copying && pp_setfl(outs[i], PP_NONBLOCK))
			die("pp_setfl");
	}
	for (size_t moved = 0; !f.werr && !f.derr && moved < MEM_BYTES;) {
		ssize_t n = copying ? pp_read(f.src[0], buf, BLOCK)
		                    : pp_fanout(f.src[0], outs, MAX_READERS, MEM_BYTES,
		                                PP_SPLICE_NONBLOCK);
		if (n <= 0) {
			f.derr = n < 0 ? errno : EIO;
			break;
		}
		for (int i = 0; copying && i < MAX_READERS && !f.derr; i++) {
			ssize_t w = pp_write(outs[i], buf, (size_t)n);
			if (w != n)
				f.derr = w < 0 ? errno : EIO;
		}
		moved += (size_t)n;
	}
	if (!f.werr && !f.derr)
		used = pages_in_use() - base;
	for (int i = 0; i < MAX_READERS; i++)
		if (pp_close(outs[i]))
			die("pp_close");
	pthread_barrier_wait(&stall); /* let the readers drain and check */
	for (int i = 0; i < MAX_READERS; i++)
		pthread_join(r[i], NULL);
	pthread_barrier_destroy(&stall);
	fan_finish(&f, "memory");
	*left_after = pages_in_use() - base;
	free(buf);
	return used;
}

static void part_memory(void)
{
	long left_fan, left_copy;
	long one_copy = (long)(MEM_BYTES / PP_PAGE_SIZE);
	printf("4. memory: 256 KiB fanned out to 4 stalled readers (pipes sized to hold it)\n");
	bench_arm(0);
	long fan = mem_run(0, &left_fan);
	long copy = mem_run(1, &left_copy);
	alarm(0);
	printf("  %-44s %7ld pages in use (one copy: %ld, four: %ld)\n", "pp_fanout", fan,
	       one_copy, 4 * one_copy);
	printf("  %-44s %7ld pages in use\n", "copying distributor", copy);
	printf("  %-44s %7ld / %ld pages\n", "still in use after the readers drained", left_fan,
	       left_copy);
	int ok = fan == one_copy;
	printf("  %-44s %7ld  target %ld  %s\n", "pp_fanout pages for 4 readers", fan, one_copy,
	       bench_result(ok));
	if (fan < 0 || copy < 0 || left_fan || left_copy) {
		fprintf(stderr, "DATA ERROR: memory part: the fan-out failed or pages were not "
		                "returned after draining (%ld, %ld pages left)\n",
		        left_fan, left_copy);
		data_errors++;
	}
	printf("\n");
	fflush(stdout);
}

/* ---- driver ----------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct bench_opts o = {
		.flags = "s",
		.flags_help = "  -s       readers sample their comparison (1 page in 16 in full)\n",
		.case_help = "only the parts whose name contains CASE: pipe, mover, fanout,\n"
		             "           fanout alone, file, memory",
	};

	bench_begin(&o, argc, argv, "bench_zerocopy",
	            ", zero-copy paths vs copying and vs the kernel");
	sampled = o.set['s'];
	/* A random pattern, so that no shifted or stale page can pass for the
	 * right one; valid for chunks of up to 1 MiB. */
	bench_pattern(PERIOD, MiB, 1);
	printf("%s, readers compare %s\n\n", bench_how(&o),
	       sampled ? "1 page in 16 (sampled)" : "every byte");
	fflush(stdout);

	if (!o.only || strstr("pipe", o.only) || strstr("mover", o.only))
		part_pipe(o.reps, o.scale, o.only);
	if (!o.only || strstr("fanout", o.only))
		part_fanout(o.reps, o.scale);
	if (!o.only || strstr("fanout alone", o.only))
		part_fanout_alone(o.reps, o.scale);
	if (!o.only || strstr("file", o.only))
		part_file(o.reps, o.scale);
	if (!o.only || strstr("memory", o.only))
		part_memory();

	return bench_finish(sampled ? "every reader got the exact byte count, and its bytes "
	                              "matched what was written (sampled)"
	                            : "every reader got the exact byte count, and its bytes "
	                              "matched what was written (every byte compared)");
}
