/*
 * vmsplice_blocking.c - a pp_vmsplice waiting for room:
 *   blocking_wakes_when_reader_drains  a vmsplice blocked on a full pipe
 *                            returns once a reader thread drains it; a
 *                            1 MiB segment goes through a 64 KiB pipe;
 *   blocked_vmsplice_passes_writer_wake  a vmsplice and then a write sleep
 *                            on a full pipe; one read empties it: both
 *                            must finish (a woken writer that leaves room
 *                            must pass the wake on, as pp_write does).
 * After every case: no pool page in use, no callback with a foreign arg
 * (vmsplice.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "vmsplice.h"

struct drainer {
	struct pp_end *rd;
	unsigned char *out;
	size_t want;
	size_t got;
	long delay_ms;
	atomic_int started;
};

static void *drainer_main(void *arg)
{
	struct drainer *d = arg;
	t_sleep_ms(d->delay_ms);
	uint64_t rng = 12345; /* its own: rnd() belongs to the main thread */
	atomic_store(&d->started, 1);
	while (d->got < d->want) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size_t n = 1 + (size_t)((rng >> 33) % 20000);
		if (n > d->want - d->got)
			n = d->want - d->got;
		ssize_t r = pp_read(d->rd, d->out + d->got, n);
		if (r <= 0)
			break;
		d->got += (size_t)r;
	}
	return NULL;
}

static void blocking_wakes_when_reader_drains(void)
{
	struct pp_end *p[2];
	struct rel_log log;
	log_init(&log);
	mkpipe(p, 0);

	/* A full pipe; a reader thread drains it after 100 ms. */
	unsigned char *seg = malloc(3000);
	fill_random(seg, 3000);
	fill_slots(p[1], 0);
	unsigned char *out = malloc(65536 + 3000);
	struct drainer d = { .rd = p[0], .out = out, .want = 65536 + 3000, .delay_ms = 100 };
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, drainer_main, &d), 0);
	struct iovec iov = { seg, 3000 };
	CHECK_EQ(pp_vmsplice(p[1], &iov, 1, 0, on_release, &log), 3000);
	CHECK(atomic_load(&d.started)); /* it waited for the reader */
	pthread_join(t, NULL);
	CHECK_EQ(d.got, 65536 + 3000);
	CHECK(memcmp(out + 65536, seg, 3000) == 0);
	CHECK_EQ(log_count(&log), 1);
	CHECK_RELEASED(&log, seg, 3000);

	/* 1 MiB of caller memory through a 64 KiB pipe.  A blocking call may
	 * return a short count (Linux's vmsplice does, once the pipe is full);
	 * then the rest goes in with the next call, so each call's release
	 * covers what that call placed. */
	size_t big = 1 << 20;
	unsigned char *src = malloc(big + 1), *dst = malloc(big);
	fill_random(src, big + 1);
	struct rel_log log2;
	log_init(&log2);
	struct drainer d2 = { .rd = p[0], .out = dst, .want = big, .delay_ms = 20 };
	CHECK_EQ(pthread_create(&t, NULL, drainer_main, &d2), 0);
	size_t placed = 0;
	int calls = 0;
	while (placed < big && calls < 10000) {
		struct iovec v = { src + 1 + placed, big - placed };
		ssize_t r = pp_vmsplice(p[1], &v, 1, 0, on_release, &log2);
		CHECK(r > 0);
		if (r <= 0)
			break;
		placed += (size_t)r;
		calls++;
	}
	pthread_join(t, NULL);
	CHECK_EQ(d2.got, big);
	CHECK(memcmp(dst, src + 1, big) == 0);
	CHECK_EQ(log_count(&log2), calls);
	size_t sum = 0;
	for (int i = 0; i < calls && i < LOG_MAX; i++)
		sum += log2.seg[i].iov_len;
	CHECK_EQ(sum, big);
	CHECK_EQ(log2.seg[0].iov_base, src + 1);

	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	log_fini(&log);
	log_fini(&log2);
	free(seg);
	free(out);
	free(src);
	free(dst);
}

/* A vmsplice sleeps on a full pipe, then a pp_write sleeps behind it.  One
 * read frees all 16 slots; the first sleeper is woken, takes one slot and
 * leaves 15 free: the write must not stay asleep.  (order 1: the write
 * sleeps first.) */
static void blocked_vmsplice_passes_writer_wake(void)
{
	for (int order = 0; order < 2; order++) {
		struct pp_end *p[2];
		struct rel_log log;
		log_init(&log);
		mkpipe(p, PP_NOSIGPIPE);
		fill_slots(p[1], 0);
		unsigned char *a = malloc(4096), *w = malloc(4096);
		memset(a, 'v', 4096);
		memset(w, 'w', 4096);
		struct iovec va = { a, 4096 }, vw = { w, 4096 };
		struct blocker bv = { .end = p[1], .iov = &va, .n = 1, .log = &log };
		struct blocker bw = { .end = p[1], .iov = &vw, .n = 1, .is_write = 1 };
		struct blocker *first = order ? &bw : &bv, *second = order ? &bv : &bw;
		pthread_t t1, t2;
		CHECK_EQ(pthread_create(&t1, NULL, blocker_main, first), 0);
		CHECK(wait_asleep(&first->tid, &first->done));
		CHECK_EQ(pthread_create(&t2, NULL, blocker_main, second), 0);
		CHECK(wait_asleep(&second->tid, &second->done));
		CHECK(!atomic_load(&bv.done));
		CHECK(!atomic_load(&bw.done));
		static unsigned char sink[65536];
		CHECK_EQ(pp_read(p[0], sink, sizeof sink), 65536); /* all 16 slots at once */
		double end = t_now() + 3;
		while ((!atomic_load(&bv.done) || !atomic_load(&bw.done)) && t_now() < end)
			t_sleep_ms(2);
		if (!atomic_load(&bv.done) || !atomic_load(&bw.done))
			fprintf(stderr, "order %d: %s still asleep 3 s after the pipe was emptied "
			        "(%d bytes in it)\n", order,
			        atomic_load(&bv.done) ? "pp_write" : "pp_vmsplice", pp_nread(p[0]));
		CHECK(atomic_load(&bv.done));
		CHECK(atomic_load(&bw.done));
		/* Unblock whatever still sleeps, so the case ends. */
		CHECK_EQ(pp_close(p[0]), 0);
		pthread_join(t1, NULL);
		pthread_join(t2, NULL);
		CHECK_EQ(bv.ret, 4096);
		CHECK_EQ(bw.ret, 4096);
		CHECK_EQ(pp_close(p[1]), 0);
		CHECK_EQ(log_count(&log), bv.ret > 0 ? 1 : 0);
		log_fini(&log);
		free(a);
		free(w);
	}
}

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(blocking_wakes_when_reader_drains);
	RUN(blocked_vmsplice_passes_writer_wake);
	return T_DONE();
}
