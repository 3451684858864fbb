/*
 * setsize.c - capacity: pp_setsize/pp_getsize (F_SETPIPE_SZ/F_GETPIPE_SZ)
 * and the process-wide limit pp_getmaxsize/pp_setmaxsize.
 *
 * Compared with a kernel pipe: rounding up to a power-of-two number of
 * pages (0 -> 4096, 4097 -> 8192, 65537 -> 131072, 1 MiB), EBUSY when the
 * new size has fewer slots than are occupied (slots, not bytes), EINVAL
 * above 2^31, shrinking allowed, more data fits after growing (exact
 * non-blocking counts), data survives resizing even when it wraps around
 * the ring, and growing wakes a writer blocked on a full pipe.
 * Not compared (this process is root, and the kernel's limit is a
 * capability matter): EPERM above pp_getmaxsize(), and pp_setmaxsize, which
 * is restored to its default after every case.
 */
#include "harness/harness.h"
#include "harness/helpers.h"

#define DEFAULT_MAX 1048576L

static void restore_max(void)
{
	CHECK_EQ(pp_setmaxsize(DEFAULT_MAX), DEFAULT_MAX);
	CHECK_EQ(pp_getmaxsize(), DEFAULT_MAX);
}

/* Rounding, on either end; getsize on both ends and on a dup agrees. */
static void sc_rounding(struct tp_rec *r, int kernel)
{
	static const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 8192, 12288, 65535,
	                                65536, 65537, 100000, 262143, 1048575,
	                                1048576, 4096 };
	struct tp t;
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "default size", tp_getsize(&t, 0));
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		TP_REC(r, "setsize", tp_res(tp_setsize(&t, (int)(i & 1), sizes[i])));
		TP_REC(r, "getsize r", tp_getsize(&t, 0));
		TP_REC(r, "getsize w", tp_getsize(&t, 1));
	}
	tp_close(&t);
	long want[] = { 4096, 4096, 4096, 4096, 8192, 8192, 16384, 65536, 65536,
	                131072, 131072, 262144, 1048576, 1048576, 4096 };
	CHECK_EQ(r->v[0], 65536);
	for (int i = 0; i < 15 && 1 + 3 * i + 2 < r->n; i++) {
		CHECK_EQ(r->v[1 + 3 * i], want[i]);
		CHECK_EQ(r->v[2 + 3 * i], want[i]);
		CHECK_EQ(r->v[3 + 3 * i], want[i]);
	}
}

static void rounding_like_kernel(void)
{
	TP_BOTH(sc_rounding);
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, 0), 0);
	struct pp_end *d = pp_dup(e[0]);
	CHECK(d != NULL);
	CHECK_EQ(pp_setsize(d, 20000), 32768);
	CHECK_EQ(pp_getsize(e[0]), 32768);
	CHECK_EQ(pp_getsize(e[1]), 32768);
	CHECK_EQ(pp_getsize(d), 32768);
	pp_close(d);
	pp_close(e[0]);
	pp_close(e[1]);
}

/* EBUSY when fewer slots than are in use - counted in slots: ten small
 * buffers that cannot merge need ten slots though they hold few bytes. */
static void sc_ebusy(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char in[65536], out[65536];
	size_t wpos = 0;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	for (int i = 0; i < 5; i++) {
		tp_fill(in, 4100, 6, wpos);
		TP_REC(r, "4000", tp_res(tp_write(&t, in, 4000)));
		TP_REC(r, "100", tp_res(tp_write(&t, in + 4000, 100)));
		wpos += 4100;
	}
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "4 slots", tp_res(tp_setsize(&t, 0, 16384)));
	TP_REC(r, "8 slots", tp_res(tp_setsize(&t, 1, 32768)));
	TP_REC(r, "getsize", tp_getsize(&t, 0));
	TP_REC(r, "16 slots", tp_res(tp_setsize(&t, 1, 10 * 4096)));
	TP_REC(r, "getsize", tp_getsize(&t, 0));
	/* Read two buffers away: eight slots are enough now. */
	TP_REC(r, "read", tp_res(tp_read(&t, out, 4100)));
	CHECK_EQ(tp_verify(out, 4100, 6, 0), -1);
	TP_REC(r, "8 slots", tp_res(tp_setsize(&t, 0, 32768)));
	TP_REC(r, "4 slots", tp_res(tp_setsize(&t, 0, 16384)));
	/* The data is intact and in order after the resizes. */
	ssize_t n = tp_read(&t, out, sizeof out);
	TP_REC(r, "read rest", tp_res(n));
	CHECK_EQ(tp_verify(out, 16400, 6, 4100), -1);
	TP_REC(r, "1 slot when empty", tp_res(tp_setsize(&t, 0, 1)));
	tp_close(&t);
	const long B = -EBUSY;
	TP_WANT(r, kernel, 4000, 100, 4000, 100, 4000, 100, 4000, 100, 4000, 100,
	        20500, B, B, 65536, 65536, 65536, 4100, 32768, B, 16400, 4096);
}

static void ebusy_below_used_slots(void)
{
	TP_BOTH(sc_ebusy);
}

/* EINVAL above 2^31 (both); pagepipe only: size_t values past 32 bits,
 * which the kernel's unsigned int argument would truncate. */
static void sc_einval(struct tp_rec *r, int kernel)
{
	struct tp t;
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "2^31+1", tp_res(tp_setsize(&t, 0, ((size_t)1 << 31) + 1)));
	TP_REC(r, "2^32-1", tp_res(tp_setsize(&t, 0, 0xffffffffu)));
	TP_REC(r, "size unchanged", tp_getsize(&t, 0));
	tp_close(&t);
	CHECK_EQ(r->v[0], -EINVAL);
	CHECK_EQ(r->v[1], -EINVAL);
	CHECK_EQ(r->v[2], 65536);
}

static void einval_above_2_31(void)
{
	TP_BOTH(sc_einval);
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_ERR(pp_setsize(e[0], ((size_t)1 << 32) + 4096), EINVAL);
	CHECK_ERR(pp_setsize(e[1], SIZE_MAX), EINVAL);
	CHECK_EQ(pp_getsize(e[0]), 65536);
	/* 2^31 itself is not EINVAL: past the default limit, so EPERM. */
	CHECK_ERR(pp_setsize(e[0], (size_t)1 << 31), EPERM);
	pp_close(e[0]);
	pp_close(e[1]);
}

/* The limit: EPERM when growing past it, never when shrinking or staying;
 * pp_setmaxsize rounds, rejects 0 and sizes above 2^31, and applies to
 * every pipe. */
static void maxsize_and_eperm(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_getmaxsize(), DEFAULT_MAX);
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pp_setsize(e[0], DEFAULT_MAX), DEFAULT_MAX); /* at the limit */
	CHECK_ERR(pp_setsize(e[0], DEFAULT_MAX + 1), EPERM);
	CHECK_ERR(pp_setsize(e[1], 2 * DEFAULT_MAX), EPERM);
	CHECK_EQ(pp_getsize(e[0]), DEFAULT_MAX);

	CHECK_EQ(pp_setmaxsize(4 << 20), 4 << 20);
	CHECK_EQ(pp_getmaxsize(), 4 << 20);
	CHECK_EQ(pp_setsize(e[0], 3 << 20), 4 << 20);
	CHECK_ERR(pp_setsize(e[0], (4 << 20) + 1), EPERM);

	/* Lower the limit under the pipe: it may keep or shrink its size. */
	CHECK_EQ(pp_setmaxsize(DEFAULT_MAX), DEFAULT_MAX);
	CHECK_EQ(pp_getsize(e[0]), 4 << 20);
	CHECK_EQ(pp_setsize(e[0], 4 << 20), 4 << 20); /* not growing */
	CHECK_EQ(pp_setsize(e[0], 2 << 20), 2 << 20); /* shrinking */
	CHECK_ERR(pp_setsize(e[0], 3 << 20), EPERM);  /* growing past it */
	CHECK_EQ(pp_setsize(e[0], 65536), 65536);

	/* Rounding and errors of setmaxsize. */
	CHECK_EQ(pp_setmaxsize(5000000), 8388608);
	CHECK_EQ(pp_getmaxsize(), 8388608);
	CHECK_EQ(pp_setmaxsize(1), 4096);
	CHECK_EQ(pp_getmaxsize(), 4096);
	CHECK_EQ(pp_setsize(e[0], 8192), 8192); /* shrinking from 64 KiB */
	CHECK_EQ(pp_setsize(e[0], 4096), 4096);
	CHECK_ERR(pp_setsize(e[0], 8192), EPERM); /* growing past 4096 */
	CHECK_ERR(pp_setmaxsize(0), EINVAL);
	CHECK_ERR(pp_setmaxsize(((size_t)1 << 31) + 1), EINVAL);
	CHECK_EQ(pp_getmaxsize(), 4096);
	/* A new pipe still starts at 16 pages, whatever the limit. */
	struct pp_end *f[2];
	CHECK_EQ(pp_pipe(f, 0), 0);
	CHECK_EQ(pp_getsize(f[0]), 65536);
	pp_close(f[0]);
	pp_close(f[1]);
	pp_close(e[0]);
	pp_close(e[1]);
	restore_max();
}

/* Shrinking an empty pipe is allowed, and then less fits. */
static void sc_shrink(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[70000];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "shrink to 1 page", tp_res(tp_setsize(&t, 1, 4096)));
	TP_REC(r, "write 70000", tp_res(tp_write(&t, buf, 70000)));
	TP_REC(r, "write 1", tp_res(tp_write(&t, buf, 1)));
	TP_REC(r, "read", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "3000", tp_res(tp_write(&t, buf, 3000)));
	TP_REC(r, "1096 merges", tp_res(tp_write(&t, buf, 1096)));
	TP_REC(r, "1", tp_res(tp_write(&t, buf, 1)));
	TP_REC(r, "shrink to 2 pages", tp_res(tp_setsize(&t, 1, 8192)));
	TP_REC(r, "1", tp_res(tp_write(&t, buf, 1)));
	tp_close(&t);
	TP_WANT(r, kernel, 4096, 4096, -EAGAIN, 4096, 3000, 1096, -EAGAIN, 8192,
	        1);
}

static void shrinking_allowed(void)
{
	TP_BOTH(sc_shrink);
}

/* After growing, more fits: exact non-blocking counts. */
static void sc_grow(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[1 << 20];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "fill", tp_res(tp_write(&t, buf, 100000)));
	TP_REC(r, "grow to 128 KiB", tp_res(tp_setsize(&t, 0, 131072)));
	TP_REC(r, "write 100000", tp_res(tp_write(&t, buf, 100000)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "grow to 1 MiB", tp_res(tp_setsize(&t, 1, 1 << 20)));
	TP_REC(r, "write 1 MiB", tp_res(tp_write(&t, buf, 1 << 20)));
	TP_REC(r, "nread", tp_nread(&t, 1));
	TP_REC(r, "getsize", tp_getsize(&t, 0));
	tp_close(&t);
	TP_WANT(r, kernel, 65536, 131072, 65536, 131072, 1048576, 917504,
	        1048576, 1048576);
}

static void growing_lets_more_in(void)
{
	TP_BOTH(sc_grow);
}

/* Data survives resizes when the occupied slots wrap around the end of the
 * ring (the new ring must take them in order). */
static void sc_wrap(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[65536];
	size_t wpos = 0, rpos = 0;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	static const struct { int write_pages, read_pages; size_t newsize; } steps[] = {
		{ 12, 10, 0 },      /* head at 12, tail at 10 */
		{ 8, 0, 131072 },   /* 10 slots in use, wrapping; grow */
		{ 20, 15, 65536 },  /* shrink with 15 in use, wrapped in 32 */
		{ 1, 9, 32768 },    /* 7 in use; shrink to 8 */
		{ 1, 0, 16384 },    /* 8 in use: EBUSY */
		{ 0, 5, 16384 },    /* 3 in use: ok */
		{ 3, 2, 1 << 20 },  /* grow a lot */
		{ 200, 150, 4096 }, /* EBUSY, then 53 in use */
	};
	for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
		for (int i = 0; i < steps[s].write_pages; i++) {
			tp_fill(buf, 4096, 44, wpos);
			ssize_t n = tp_write(&t, buf, 4096);
			TP_REC(r, "write page", tp_res(n));
			if (n > 0)
				wpos += (size_t)n;
		}
		for (int i = 0; i < steps[s].read_pages; i++) {
			ssize_t n = tp_read(&t, buf, 4096);
			TP_REC(r, "read page", tp_res(n));
			if (n > 0) {
				CHECK_EQ(tp_verify(buf, (size_t)n, 44, rpos), -1);
				rpos += (size_t)n;
			}
		}
		if (steps[s].newsize)
			TP_REC(r, "setsize", tp_res(tp_setsize(&t, 0, steps[s].newsize)));
		TP_REC(r, "nread", tp_nread(&t, 0));
	}
	for (;;) {
		ssize_t n = tp_read(&t, buf, sizeof buf);
		if (n <= 0)
			break;
		CHECK_EQ(tp_verify(buf, (size_t)n, 44, rpos), -1);
		rpos += (size_t)n;
	}
	CHECK_EQ(rpos, wpos);
	TP_REC(r, "total", (long)rpos);
	tp_close(&t);
}

static void resize_keeps_wrapped_data(void)
{
	TP_BOTH(sc_wrap);
}

/* Growing the pipe wakes a writer blocked on a full pipe. */
struct bw {
	struct tp *t;
	size_t n;
	ssize_t ret;
	int done;
};

static void *blocked_write(void *arg)
{
	struct bw *b = arg;
	static char buf[8192];
	b->ret = tp_write(b->t, buf, b->n);
	__atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void sc_grow_wakes(struct tp_rec *r, int kernel)
{
	struct tp t;
	pthread_t th;
	static char buf[65536];
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "fill", tp_res(tp_write(&t, buf, 65536)));
	struct bw b = { &t, 8192, 0, 0 };
	CHECK_EQ(pthread_create(&th, NULL, blocked_write, &b), 0);
	t_sleep_ms(100);
	TP_REC(r, "blocked", !__atomic_load_n(&b.done, __ATOMIC_ACQUIRE));
	TP_REC(r, "grow", tp_res(tp_setsize(&t, 0, 131072)));
	int woke = 0;
	for (int i = 0; i < 3000 && !woke; i++) {
		woke = __atomic_load_n(&b.done, __ATOMIC_ACQUIRE);
		if (!woke)
			t_sleep_ms(1);
	}
	TP_REC(r, "woken by growing", woke);
	if (!woke) { /* unblock it so the case can end */
		tp_setnonblock(&t, 0, 1);
		while (!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE)) {
			(void)tp_read(&t, buf, sizeof buf);
			t_sleep_ms(5);
		}
	}
	pthread_join(th, NULL);
	TP_REC(r, "write", (long)b.ret);
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close(&t);
	TP_WANT(r, kernel, 65536, 1, 131072, 1, 8192, 73728);
}

static void growing_wakes_blocked_writer(void)
{
	TP_BOTH(sc_grow_wakes);
}

int main(void)
{
	RUN(rounding_like_kernel);
	RUN(ebusy_below_used_slots);
	RUN(einval_above_2_31);
	RUN(maxsize_and_eperm);
	RUN(shrinking_allowed);
	RUN(growing_lets_more_in);
	RUN(resize_keeps_wrapped_data);
	RUN(growing_wakes_blocked_writer);
	return T_DONE();
}
