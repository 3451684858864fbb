/*
 * basic_rw.c - reading and writing: the everyday rules of pp_read,
 * pp_write, pp_readv/pp_writev, pp_nread and the status flags.
 *
 * Each scenario runs on a kernel pipe and on a pagepipe and the results are
 * compared step by step: a read returns what is there (across buffers) up
 * to count without waiting for more, blocks while the pipe is empty and a
 * writer exists, fails with EAGAIN when non-blocking; a zero-count read and
 * a zero-length write return 0 (even with no reader, without SIGPIPE);
 * a blocking write returns only when everything is written; pp_nread
 * equals FIONREAD on both ends; pp_getfl/pp_setfl report and toggle
 * PP_NONBLOCK, share it between pp_dup handles and ignore other bits.
 * End of file, EPIPE and signals are in signals_eof.c.
 */
#include "harness/harness.h"
#include "harness/helpers.h"

/* ---- a thread that writes (or reads) after a delay --------------------- */

struct delayed {
	struct tp *t;
	long delay_ms;
	size_t n;
	unsigned seed;
	ssize_t ret;
	int err;
};

static void *delayed_write(void *arg)
{
	struct delayed *d = arg;
	char buf[4096];
	t_sleep_ms(d->delay_ms);
	tp_fill(buf, d->n, d->seed, 0);
	errno = 0;
	d->ret = tp_write(d->t, buf, d->n);
	d->err = errno;
	return NULL;
}

/* ---- cases -------------------------------------------------------------- */

/* A read returns what is there, up to count, crossing buffers, and does
 * not wait for more (the pipes are in blocking mode). */
static void sc_read_available(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char in[16384], out[16384];
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	tp_fill(in, sizeof in, 7, 0);

	TP_REC(r, "write 100", tp_res(tp_write(&t, in, 100)));
	TP_REC(r, "read 1000", tp_res(tp_read(&t, out, 1000)));
	CHECK_EQ(tp_verify(out, 100, 7, 0), -1);

	/* Three buffers' worth in two writes, read back in one call. */
	TP_REC(r, "write 5000", tp_res(tp_write(&t, in + 100, 5000)));
	TP_REC(r, "write 3000", tp_res(tp_write(&t, in + 5100, 3000)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "read 10000", tp_res(tp_read(&t, out, 10000)));
	CHECK_EQ(tp_verify(out, 8000, 7, 100), -1);

	/* Less than is there: exactly count, the rest stays. */
	TP_REC(r, "write 300", tp_res(tp_write(&t, in + 8100, 300)));
	TP_REC(r, "read 100", tp_res(tp_read(&t, out, 100)));
	CHECK_EQ(tp_verify(out, 100, 7, 8100), -1);
	TP_REC(r, "read 150", tp_res(tp_read(&t, out, 150)));
	CHECK_EQ(tp_verify(out, 150, 7, 8200), -1);
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "read 4096", tp_res(tp_read(&t, out, 4096)));
	CHECK_EQ(tp_verify(out, 50, 7, 8350), -1);
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close(&t);

	/* The known answers, so that a shared mistake cannot pass. */
	TP_WANT(r, kernel, 100, 100, 5000, 3000, 8000, 8000, 300, 100, 150, 50,
	        50, 0);
}

static void read_returns_available(void)
{
	TP_BOTH(sc_read_available);
}

/* A blocking read of an empty pipe waits for a writer to write. */
static void sc_read_blocks(struct tp_rec *r, int kernel)
{
	struct tp t;
	pthread_t th;
	char out[64];
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	struct delayed d = { &t, 150, 10, 3, 0, 0 };
	double t0 = t_now();
	CHECK_EQ(pthread_create(&th, NULL, delayed_write, &d), 0);
	TP_REC(r, "blocking read", tp_res(tp_read(&t, out, sizeof out)));
	double waited = t_now() - t0;
	pthread_join(th, NULL);
	CHECK(waited >= 0.12);
	TP_REC(r, "waited", waited >= 0.12);
	CHECK_EQ(tp_verify(out, 10, 3, 0), -1);
	CHECK_EQ(d.ret, 10);
	tp_close(&t);
}

static void read_blocks_until_write(void)
{
	TP_BOTH(sc_read_blocks);
}

/* Non-blocking read of an empty pipe: EAGAIN, while a writer exists. */
static void sc_read_nonblock(struct tp_rec *r, int kernel)
{
	struct tp t;
	char buf[100];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "read empty", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "write 5", tp_res(tp_write(&t, "hello", 5)));
	TP_REC(r, "read", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "read drained", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "read 0 bytes", tp_res(tp_read(&t, buf, 0)));
	tp_close(&t);
	CHECK_EQ(r->v[0], -EAGAIN);
	CHECK_EQ(r->v[2], 5);
	CHECK_EQ(r->v[3], -EAGAIN);
	CHECK_EQ(r->v[4], 0);
}

static void read_nonblock_eagain(void)
{
	TP_BOTH(sc_read_nonblock);
}

/* A read of 0 bytes returns 0 at once, even blocking on an empty pipe, and
 * takes nothing. */
static void sc_read_zero(struct tp_rec *r, int kernel)
{
	struct tp t;
	char buf[16];
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "read 0 empty", tp_res(tp_read(&t, buf, 0)));
	TP_REC(r, "read NULL,0 empty", tp_res(tp_read(&t, NULL, 0)));
	TP_REC(r, "write 7", tp_res(tp_write(&t, "1234567", 7)));
	TP_REC(r, "read 0 with data", tp_res(tp_read(&t, buf, 0)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close(&t);
	CHECK_EQ(r->v[0], 0);
	CHECK_EQ(r->v[4], 7);
}

static void read_zero_count(void)
{
	TP_BOTH(sc_read_zero);
}

/* A count far beyond what is there (above the 0x7ffff000 clamp) still
 * returns what is there.  (Counts above SSIZE_MAX are not compared: the
 * kernel fails them with EFAULT from its address-space check.) */
static void sc_read_huge(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[64];
	volatile size_t huge = (size_t)1 << 31; /* hide it from -Wstringop */
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "write 10", tp_res(tp_write(&t, "0123456789", 10)));
	TP_REC(r, "read 2^31", tp_res(tp_read(&t, buf, huge)));
	CHECK(memcmp(buf, "0123456789", 10) == 0);
	huge = (size_t)1 << 40;
	TP_REC(r, "write 3", tp_res(tp_write(&t, "abc", 3)));
	TP_REC(r, "read 2^40", tp_res(tp_read(&t, buf, huge)));
	CHECK(memcmp(buf, "abc", 3) == 0);
	tp_close(&t);
	CHECK_EQ(r->v[1], 10);
	CHECK_EQ(r->v[3], 3);
}

static void read_huge_count(void)
{
	if (t_valgrind())
		SKIP("valgrind would shadow the whole 2^40-byte count of the kernel read");
	TP_BOTH(sc_read_huge);
}

/* pp_getfl reports the flags given to pp_pipe, on both ends and on dups. */
static void getfl_reports_flags(void)
{
	for (int fl = 0; fl < 8; fl++) {
		struct pp_end *e[2];
		CHECK_EQ(pp_pipe(e, fl), 0);
		CHECK_EQ(pp_getfl(e[0]), fl);
		CHECK_EQ(pp_getfl(e[1]), fl);
		struct pp_end *d = pp_dup(e[1]);
		CHECK(d != NULL);
		CHECK_EQ(pp_getfl(d), fl);
		pp_close(d);
		pp_close(e[0]);
		pp_close(e[1]);
	}
}

/* pp_setfl toggles PP_NONBLOCK, and the flag is shared by pp_dup handles
 * like a file description's flags by dup(2)'d descriptors. */
static void sc_setfl_shared(struct tp_rec *r, int kernel)
{
	struct tp t;
	char buf[32];
	int dupfd = -1;
	struct pp_end *pdup = NULL;
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	if (kernel)
		dupfd = dup(t.fd[0]);
	else
		pdup = pp_dup(t.e[0]);
	CHECK(kernel ? dupfd >= 0 : pdup != NULL);

	/* Non-blocking through the original: both handles now say EAGAIN. */
	CHECK_EQ(tp_setnonblock(&t, 0, 1), 0);
	TP_REC(r, "read orig", tp_res(tp_read(&t, buf, sizeof buf)));
	ssize_t n = kernel ? read(dupfd, buf, sizeof buf) : pp_read(pdup, buf, sizeof buf);
	TP_REC(r, "read dup", tp_res(n));
	int fl = kernel ? !!(fcntl(dupfd, F_GETFL) & O_NONBLOCK)
	                : !!(pp_getfl(pdup) & PP_NONBLOCK);
	TP_REC(r, "dup nonblock", fl);

	/* Back to blocking through the dup: the original blocks again. */
	if (kernel)
		CHECK_EQ(fcntl(dupfd, F_SETFL, fcntl(dupfd, F_GETFL) & ~O_NONBLOCK), 0);
	else
		CHECK_EQ(pp_setfl(pdup, pp_getfl(pdup) & ~PP_NONBLOCK), 0);
	fl = kernel ? !!(fcntl(t.fd[0], F_GETFL) & O_NONBLOCK)
	            : !!(pp_getfl(t.e[0]) & PP_NONBLOCK);
	TP_REC(r, "orig nonblock", fl);
	pthread_t th;
	struct delayed d = { &t, 120, 4, 9, 0, 0 };
	double t0 = t_now();
	CHECK_EQ(pthread_create(&th, NULL, delayed_write, &d), 0);
	TP_REC(r, "blocking read", tp_res(tp_read(&t, buf, sizeof buf)));
	double waited = t_now() - t0;
	pthread_join(th, NULL);
	CHECK(waited >= 0.09);
	CHECK_EQ(tp_verify(buf, 4, 9, 0), -1);

	if (kernel)
		close(dupfd);
	else
		pp_close(pdup);
	tp_close(&t);
	CHECK_EQ(r->v[0], -EAGAIN);
	CHECK_EQ(r->v[1], -EAGAIN);
	CHECK_EQ(r->v[2], 1);
	CHECK_EQ(r->v[3], 0);
	CHECK_EQ(r->v[4], 4);
}

static void setfl_toggles_shared(void)
{
	TP_BOTH(sc_setfl_shared);
}

/* Only PP_NONBLOCK changes; PP_PACKET, PP_NOSIGPIPE and unknown bits in
 * the argument are ignored (neither set nor cleared), and the behaviour
 * follows the flags reported. */
static void setfl_ignores_other_bits(void)
{
	struct pp_end *e[2];
	char buf[8];

	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pp_setfl(e[0], PP_NONBLOCK | PP_PACKET | PP_NOSIGPIPE | 0x7f00), 0);
	CHECK_EQ(pp_getfl(e[0]), PP_NONBLOCK);
	CHECK_EQ(pp_getfl(e[1]), 0); /* the other end has its own flags */
	CHECK_ERR(pp_read(e[0], buf, sizeof buf), EAGAIN);
	CHECK_EQ(pp_setfl(e[1], PP_PACKET), 0);
	CHECK_EQ(pp_getfl(e[1]), 0);
	/* Still a byte stream: two writes come back as one read. */
	CHECK_EQ(pp_write(e[1], "ab", 2), 2);
	CHECK_EQ(pp_write(e[1], "cd", 2), 2);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 4);
	CHECK_EQ(pp_setfl(e[0], -1), 0); /* every bit: only NONBLOCK counts */
	CHECK_EQ(pp_getfl(e[0]), PP_NONBLOCK);
	CHECK_EQ(pp_setfl(e[0], 0), 0);
	CHECK_EQ(pp_getfl(e[0]), 0);
	pp_close(e[0]);
	pp_close(e[1]);

	/* Created with PACKET|NOSIGPIPE: setfl(0) keeps them, setfl toggles
	 * only NONBLOCK. */
	CHECK_EQ(pp_pipe(e, PP_PACKET | PP_NOSIGPIPE), 0);
	CHECK_EQ(pp_setfl(e[1], 0), 0);
	CHECK_EQ(pp_getfl(e[1]), PP_PACKET | PP_NOSIGPIPE);
	CHECK_EQ(pp_setfl(e[1], PP_NONBLOCK), 0);
	CHECK_EQ(pp_getfl(e[1]), PP_PACKET | PP_NOSIGPIPE | PP_NONBLOCK);
	CHECK_EQ(pp_write(e[1], "ab", 2), 2);
	CHECK_EQ(pp_write(e[1], "cd", 2), 2);
	CHECK_EQ(pp_read(e[0], buf, sizeof buf), 2); /* still packets */
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_ERR(pp_write(e[1], "x", 1), EPIPE); /* and still no SIGPIPE */
	pp_close(e[1]);
}

/* A blocking write of 1 MiB returns only when all of it is written, while
 * a slow reader thread drains it. */
struct drain {
	struct tp *t;
	size_t total;
	size_t got;
	long bad;
	double first;
};

static void *drain_reader(void *arg)
{
	struct drain *d = arg;
	static __thread char buf[10000];
	uint32_t seed = 12345;
	t_sleep_ms(100); /* let the writer fill the pipe and block */
	d->first = t_now();
	d->bad = -1;
	while (d->got < d->total) {
		size_t want = 1 + tp_rand(&seed) % sizeof buf;
		ssize_t n = tp_read(d->t, buf, want);
		if (n <= 0)
			break;
		tp_take(buf, (size_t)n, 21, &d->got, &d->bad);
	}
	return NULL;
}

static void sc_write_blocks(struct tp_rec *r, int kernel)
{
	const size_t total = 1 << 20;
	struct tp t;
	pthread_t th;
	char *buf = malloc(total);
	CHECK(buf != NULL);
	if (!buf)
		return;
	tp_fill(buf, total, 21, 0);
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	struct drain d = { &t, total, 0, -1, 0 };
	double t0 = t_now();
	CHECK_EQ(pthread_create(&th, NULL, drain_reader, &d), 0);
	TP_REC(r, "write 1 MiB", tp_res(tp_write(&t, buf, total)));
	double done = t_now();
	pthread_join(th, NULL);
	TP_REC(r, "bytes read", (long)d.got);
	TP_REC(r, "first bad byte", d.bad);
	CHECK(done - t0 >= 0.08); /* it had to wait for the reader */
	CHECK_EQ(r->v[0], (long)total);
	CHECK_EQ(d.got, total);
	CHECK_EQ(d.bad, -1);
	tp_close(&t);
	free(buf);
}

static void write_blocks_until_all_written(void)
{
	TP_BOTH(sc_write_blocks);
}

/* A zero-length write returns 0: with a reader, on a full non-blocking
 * pipe, and with no reader left (no EPIPE, no SIGPIPE - as the kernel). */
static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void sc_zero_write(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char big[65536];
	tp_handle(SIGPIPE, on_sigpipe, 0);
	sigpipes = 0;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "write 0", tp_res(tp_write(&t, big, 0)));
	TP_REC(r, "write NULL,0", tp_res(tp_write(&t, NULL, 0)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "fill", tp_res(tp_write(&t, big, sizeof big)));
	TP_REC(r, "write 1 full", tp_res(tp_write(&t, big, 1)));
	TP_REC(r, "write 0 full", tp_res(tp_write(&t, big, 0)));
	tp_close_end(&t, 0);
	TP_REC(r, "write 0 no reader", tp_res(tp_write(&t, big, 0)));
	TP_REC(r, "sigpipes", sigpipes);
	TP_REC(r, "write 1 no reader", tp_res(tp_write(&t, big, 1)));
	TP_REC(r, "sigpipes", sigpipes);
	tp_close(&t);
	tp_default(SIGPIPE);
	CHECK_EQ(r->v[0], 0);
	CHECK_EQ(r->v[4], -EAGAIN);
	CHECK_EQ(r->v[6], 0);
	CHECK_EQ(r->v[7], 0);
	CHECK_EQ(r->v[8], -EPIPE);
	CHECK_EQ(r->v[9], 1);
}

static void zero_length_write(void)
{
	TP_BOTH(sc_zero_write);
}

/* pp_nread equals FIONREAD, on both ends, through a seeded mix of writes
 * and reads of many sizes. */
static void sc_nread(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[20000];
	uint32_t seed = 777;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "nread empty r", tp_nread(&t, 0));
	TP_REC(r, "nread empty w", tp_nread(&t, 1));
	for (int i = 0; i < 300; i++) {
		uint32_t x = tp_rand(&seed);
		size_t n = 1 + (tp_rand(&seed) % ((x & 3) ? 300 : 20000));
		if (x & 0x10)
			TP_REC(r, "write", tp_res(tp_write(&t, buf, n)));
		else
			TP_REC(r, "read", tp_res(tp_read(&t, buf, n)));
		TP_REC(r, "nread r", tp_nread(&t, 0));
		TP_REC(r, "nread w", tp_nread(&t, 1));
	}
	tp_close(&t);
}

static void nread_matches_fionread(void)
{
	TP_BOTH(sc_nread);
	/* And on dup handles, and after the writer is gone. */
	struct pp_end *e[2];
	char buf[5000];
	CHECK_EQ(pp_pipe(e, 0), 0);
	struct pp_end *d0 = pp_dup(e[0]), *d1 = pp_dup(e[1]);
	CHECK(d0 && d1);
	CHECK_EQ(pp_write(e[1], buf, 4500), 4500);
	CHECK_EQ(pp_nread(e[0]), 4500);
	CHECK_EQ(pp_nread(d0), 4500);
	CHECK_EQ(pp_nread(d1), 4500);
	CHECK_EQ(pp_read(d0, buf, 1000), 1000);
	CHECK_EQ(pp_nread(e[1]), 3500);
	pp_close(e[1]);
	pp_close(d1);
	CHECK_EQ(pp_nread(e[0]), 3500);
	pp_close(d0);
	pp_close(e[0]);
}

/* readv/writev scatter and gather like the kernel's, segments in order. */
static void sc_vectors(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char in[12000], out[12000];
	tp_fill(in, sizeof in, 5, 0);
	memset(out, 0, sizeof out);
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	struct iovec w[4] = {
		{ in, 10 }, { in + 10, 0 }, { in + 10, 5000 }, { in + 5010, 90 },
	};
	TP_REC(r, "writev", tp_res(tp_writev(&t, w, 4)));
	TP_REC(r, "writev 0 segs", tp_res(tp_writev(&t, w, 0)));
	struct iovec rv[3] = { { out, 3 }, { out + 3, 4000 }, { out + 4003, 3 } };
	TP_REC(r, "readv", tp_res(tp_readv(&t, rv, 3)));
	CHECK_EQ(tp_verify(out, 4006, 5, 0), -1);
	struct iovec rv2[2] = { { out, 50 }, { out + 50, 10000 } };
	TP_REC(r, "readv rest", tp_res(tp_readv(&t, rv2, 2)));
	CHECK_EQ(tp_verify(out, 1094, 5, 4006), -1);
	TP_REC(r, "readv empty", tp_res(tp_readv(&t, rv2, 2)));
	TP_REC(r, "readv 0 segs", tp_res(tp_readv(&t, rv2, 0)));
	tp_close(&t);
	CHECK_EQ(r->v[0], 5100);
	CHECK_EQ(r->v[2], 4006);
	CHECK_EQ(r->v[3], 1094);
}

static void readv_writev(void)
{
	TP_BOTH(sc_vectors);
}

/* A byte stream between two threads, random write and read sizes, arrives
 * whole and in order. */
struct streamer {
	struct tp *t;
	size_t total;
	size_t done;
	long bad;
};

static void *stream_writer(void *arg)
{
	struct streamer *s = arg;
	static __thread char buf[20000];
	uint32_t seed = 99;
	while (s->done < s->total) {
		size_t n = tp_chunk(buf, sizeof buf, &seed, 31, s->done, s->total);
		ssize_t w = tp_write(s->t, buf, n);
		if (w != (ssize_t)n)
			break;
		s->done += n;
	}
	tp_close_end(s->t, 1);
	return NULL;
}

static void sc_stream(struct tp_rec *r, int kernel)
{
	struct tp t;
	pthread_t th;
	static char buf[30000];
	uint32_t seed = 4242;
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	struct streamer s = { &t, (size_t)t_scaled(4L << 20), 0, -1 };
	CHECK_EQ(pthread_create(&th, NULL, stream_writer, &s), 0);
	size_t got = 0;
	long bad = -1;
	for (;;) {
		size_t want = 1 + tp_rand(&seed) % sizeof buf;
		ssize_t n = tp_read(&t, buf, want);
		if (n <= 0) {
			TP_REC(r, "last read", tp_res(n));
			break;
		}
		tp_take(buf, (size_t)n, 31, &got, &bad);
	}
	pthread_join(th, NULL);
	TP_REC(r, "written", (long)s.done);
	TP_REC(r, "read", (long)got);
	TP_REC(r, "first bad byte", bad);
	CHECK_EQ(got, s.total);
	CHECK_EQ(bad, -1);
	tp_close(&t);
}

static void stream_between_threads(void)
{
	TP_BOTH(sc_stream);
}

int main(void)
{
	RUN(read_returns_available);
	RUN(read_blocks_until_write);
	RUN(read_nonblock_eagain);
	RUN(read_zero_count);
	RUN(read_huge_count);
	RUN(getfl_reports_flags);
	RUN(setfl_toggles_shared);
	RUN(setfl_ignores_other_bits);
	RUN(write_blocks_until_all_written);
	RUN(zero_length_write);
	RUN(nread_matches_fionread);
	RUN(readv_writev);
	RUN(stream_between_threads);
	return T_DONE();
}
