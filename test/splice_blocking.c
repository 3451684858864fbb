/*
 * splice_blocking.c - when pp_splice, pp_tee and pp_fanout wait, what
 * wakes them, and what poll says about their pipes; each on kernel pipes
 * (splice(2), tee(2)) too where the kernel has the call.
 *   nonblocking_ends      PP_NONBLOCK on the input's read end or an
 *                         output's write end makes the call non-blocking
 *                         (EAGAIN), as O_NONBLOCK does for splice(2); on
 *                         the other ends it does not;
 *   blocking_wakes_for_data / blocking_wakes_for_room  a thread blocked in
 *                         the call wakes for data in the input and for
 *                         room in the output;
 *   blocking_eof_and_epipe  it returns 0 when the input's last writer
 *                         closes, EPIPE (+SIGPIPE unless PP_NOSIGPIPE)
 *                         when the output's reader closes;
 *   blocking_signals      EINTR from a handler without SA_RESTART, and it
 *                         keeps waiting with one;
 *   blocking_splice_passes_wake_to_reader / _writer  a splice that was
 *                         woken passes the wake on to a reader or writer
 *                         still waiting;
 *   events_after_splice   what poll reports after a splice: data arrived
 *                         in the destination, room in the source.
 * Each blocking call runs in a thread (splice.h's jobs), so one that waits
 * when it should not is seen, and released, instead of hanging the test.
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice.h"

#define KCHECK(kernel, cond)                                                               \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "(%s) ", (kernel) ? "kernel" : "pagepipe");       \
			CHECK(cond);                                                       \
		}                                                                          \
	} while (0)
#define KCHECK_EQ(kernel, expr, want)                                                      \
	do {                                                                               \
		long long kv_ = (long long)(expr), kw_ = (long long)(want);                \
		if (kv_ != kw_) {                                                          \
			fprintf(stderr, "(%s) ", (kernel) ? "kernel" : "pagepipe");       \
			CHECK_EQ(kv_, kw_);                                                \
		}                                                                          \
	} while (0)

/* Fill a pipe of 2 slots with 2 pages. */
static void make_full_2(struct tp *t, int kernel, int flags)
{
	char page[PG];
	memset(page, 'F', sizeof page);
	CHECK_EQ(tp_open(t, kernel, flags), 0);
	CHECK_EQ(tp_setsize(t, 1, 8192), 8192);
	CHECK_EQ(tp_write(t, page, PG), PG);
	CHECK_EQ(tp_write(t, page, PG), PG);
}

/*
 * PP_NONBLOCK on the input's read end or on an output's write end makes a
 * transfer fail with EAGAIN instead of waiting, as O_NONBLOCK on either
 * descriptor does for splice(2) and tee(2); the flag on the other ends
 * (the input's write end, an output's read end) does not.  Each call runs
 * in a thread, so that one that waits when it should not is seen (and
 * then released) instead of hanging the test.
 */
enum { NB_IN_EMPTY, NB_OUT_FULL, NB_INWR_EMPTY, NB_OUTRD_FULL, NB_COUNT };

static void nb_scenario(int kernel, int kind, int sc)
{
	static const char *const name[NB_COUNT] = {
		"input read end non-blocking, input empty",
		"output write end non-blocking, output full",
		"input write end non-blocking, input empty",
		"output read end non-blocking, output full",
	};
	struct tp a, b;
	unsigned char buf[2 * PG];
	CHECK_EQ(tp_open(&a, kernel, 0), 0);
	if (sc == NB_OUT_FULL || sc == NB_OUTRD_FULL) {
		make_full_2(&b, kernel, 0);
		CHECK_EQ(tp_write(&a, "data", 4), 4);
	} else {
		CHECK_EQ(tp_open(&b, kernel, 0), 0);
	}
	switch (sc) {
	case NB_IN_EMPTY: CHECK_EQ(tp_setnonblock(&a, 0, 1), 0); break;
	case NB_OUT_FULL: CHECK_EQ(tp_setnonblock(&b, 1, 1), 0); break;
	case NB_INWR_EMPTY: CHECK_EQ(tp_setnonblock(&a, 1, 1), 0); break;
	default: CHECK_EQ(tp_setnonblock(&b, 0, 1), 0); break;
	}
	struct job *j = job_new(kind, &a, &b, 100, 0);
	if (pthread_create(&j->th, NULL, job_main, j)) {
		CHECK(0);
		free(j);
		return;
	}
	int waits = sc == NB_INWR_EMPTY || sc == NB_OUTRD_FULL;
	int done = job_wait(j, waits ? 0.3 : 2.0);
	if (done != !waits) {
		fprintf(stderr, "(%s) %s, %s: the call %s\n", tp_name(&a),
		        kind == J_TEE ? "tee" : "splice", name[sc],
		        waits ? "did not wait" : "waits");
		t_case_failed = 1;
	}
	if (!done) {
		if (sc == NB_IN_EMPTY || sc == NB_INWR_EMPTY)
			CHECK_EQ(tp_write(&a, "data", 4), 4);
		else
			CHECK_EQ(tp_read(&b, buf, sizeof buf), 2 * PG);
		KCHECK(kernel, job_wait(j, 5));
		KCHECK_EQ(kernel, job_res(j), 4);
	} else if (!waits) {
		KCHECK_EQ(kernel, job_res(j), -EAGAIN);
	}
	job_join(j);
	free(j);
	tp_close(&a);
	tp_close(&b);
}

static void nonblocking_ends(void)
{
	for (int kernel = 0; kernel < 2; kernel++)
		for (int kind = J_SPLICE; kind <= J_TEE; kind++)
			for (int sc = 0; sc < NB_COUNT; sc++)
				nb_scenario(kernel, kind, sc);

	/* pp_fanout: any output's PP_NONBLOCK, while the input is empty */
	struct pp_end *a[2], *o[3][2], *outs[3];
	CHECK_EQ(pp_pipe(a, 0), 0);
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(pp_pipe(o[k], 0), 0);
		outs[k] = o[k][1];
	}
	CHECK_EQ(pp_setfl(o[2][1], PP_NONBLOCK), 0);
	struct job *j = job_new(J_FANOUT, NULL, NULL, 100, 0);
	j->fin = a[0];
	memcpy(j->fouts, outs, sizeof outs);
	j->n = 3;
	if (!pthread_create(&j->th, NULL, job_main, j)) {
		int done = job_wait(j, 2.0);
		CHECK(done);
		if (!done)
			CHECK_EQ(pp_write(a[1], "data", 4), 4);
		job_join(j);
		if (done)
			CHECK_EQ(job_res(j), -EAGAIN);
	}
	free(j);
	close_fan(a, o, 3);
	CHECK_EQ(tp_pages_in_use(), 0);
}

static void blocking_wakes_for_data(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		for (int kind = J_SPLICE; kind <= J_TEE; kind++) {
			struct tp a, b;
			unsigned char buf[100];
			CHECK_EQ(tp_open(&a, kernel, 0), 0);
			CHECK_EQ(tp_open(&b, kernel, 0), 0);
			struct job *j = job_new(kind, &a, &b, 100, 0);
			KCHECK(kernel, job_start(j));
			t_sleep_ms(20);
			KCHECK(kernel, !job_done(j));
			tp_fill(buf, 10, 3, 0);
			CHECK_EQ(tp_write(&a, buf, 10), 10);
			KCHECK(kernel, job_wait(j, 5));
			job_join(j);
			KCHECK_EQ(kernel, job_res(j), 10);
			KCHECK_EQ(kernel, tp_nread(&a, 0), kind == J_TEE ? 10 : 0);
			KCHECK_EQ(kernel, tp_read(&b, buf, 100), 10);
			KCHECK_EQ(kernel, tp_verify(buf, 10, 3, 0), -1);
			free(j);
			tp_close(&a);
			tp_close(&b);
		}
	}
	CHECK_EQ(tp_pages_in_use(), 0);
}

static void blocking_wakes_for_room(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		unsigned char buf[PG];
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		make_full_2(&b, kernel, 0);
		tp_fill(buf, 100, 4, 0);
		CHECK_EQ(tp_write(&a, buf, 100), 100);
		struct job *j = job_new(J_SPLICE, &a, &b, 1000, 0);
		KCHECK(kernel, job_start(j));
		t_sleep_ms(20);
		KCHECK(kernel, !job_done(j));
		CHECK_EQ(tp_read(&b, buf, PG), PG); /* one slot free */
		KCHECK(kernel, job_wait(j, 5));
		job_join(j);
		KCHECK_EQ(kernel, job_res(j), 100);
		CHECK_EQ(tp_read(&b, buf, PG), PG);
		KCHECK_EQ(kernel, tp_read(&b, buf, PG), 100);
		KCHECK_EQ(kernel, tp_verify(buf, 100, 4, 0), -1);
		free(j);
		tp_close(&a);
		tp_close(&b);
	}

	/* pp_fanout waits for room in every output, not just the first */
	struct tp a, b, c;
	unsigned char buf[PG];
	CHECK_EQ(tp_open(&a, 0, 0), 0);
	CHECK_EQ(tp_open(&b, 0, 0), 0);
	make_full_2(&c, 0, 0);
	tp_fill(buf, 300, 5, 0);
	CHECK_EQ(tp_write(&a, buf, 300), 300);
	struct job *j = job_new(J_FANOUT, NULL, NULL, SIZE_MAX, 0);
	j->fin = a.e[0];
	j->fouts[0] = b.e[1];
	j->fouts[1] = c.e[1];
	j->n = 2;
	CHECK(job_start(j));
	t_sleep_ms(20);
	CHECK(!job_done(j));
	CHECK_EQ(pp_nread(b.e[0]), 0);
	CHECK_EQ(tp_read(&c, buf, PG), PG);
	CHECK(job_wait(j, 5));
	job_join(j);
	CHECK_EQ(job_res(j), 300);
	CHECK_EQ(tp_read(&b, buf, PG), 300);
	CHECK_EQ(tp_verify(buf, 300, 5, 0), -1);
	free(j);
	tp_close(&a);
	tp_close(&b);
	tp_close(&c);
	CHECK_EQ(tp_pages_in_use(), 0);
}

static void blocking_eof_and_epipe(void)
{
	/* the source's last writer closes: 0 */
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		CHECK_EQ(tp_open(&b, kernel, 0), 0);
		struct job *j = job_new(J_SPLICE, &a, &b, 100, 0);
		KCHECK(kernel, job_start(j));
		tp_close_end(&a, 1);
		KCHECK(kernel, job_wait(j, 5));
		job_join(j);
		KCHECK_EQ(kernel, job_res(j), 0);
		free(j);
		tp_close(&a);
		tp_close(&b);
	}
	/* the destination's reader closes while the splice waits for room:
	 * EPIPE, with SIGPIPE unless PP_NOSIGPIPE */
	for (int mode = 0; mode < 3; mode++) {
		int kernel = mode == 0, nosig = mode == 2;
		struct tp a, b;
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		make_full_2(&b, kernel, nosig ? PP_NOSIGPIPE : 0);
		CHECK_EQ(tp_write(&a, "abc", 3), 3);
		struct job *j = job_new(J_SPLICE, &a, &b, 100, 0);
		j->catch_sigpipe = 1;
		KCHECK(kernel, job_start(j));
		tp_close_end(&b, 0);
		KCHECK(kernel, job_wait(j, 5));
		job_join(j);
		KCHECK_EQ(kernel, job_res(j), -EPIPE);
		KCHECK_EQ(kernel, __atomic_load_n(&j->sigpipe, __ATOMIC_SEQ_CST), !nosig);
		KCHECK_EQ(kernel, tp_nread(&a, 0), 3); /* nothing was taken */
		free(j);
		tp_close(&a);
		tp_close(&b);
	}
	CHECK_EQ(tp_pages_in_use(), 0);
}

static int n_usr1_;
static void on_usr1(int sig)
{
	(void)sig;
	__atomic_fetch_add(&n_usr1_, 1, __ATOMIC_SEQ_CST);
}

static void blocking_signals(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		for (int full = 0; full < 2; full++) {
			for (int restart = 0; restart < 2; restart++) {
				struct tp a, b;
				unsigned char buf[PG];
				tp_handle(SIGUSR1, on_usr1, restart);
				CHECK_EQ(tp_open(&a, kernel, 0), 0);
				if (full) {
					make_full_2(&b, kernel, 0);
					CHECK_EQ(tp_write(&a, "xyz", 3), 3);
				} else {
					CHECK_EQ(tp_open(&b, kernel, 0), 0);
				}
				struct job *j = job_new(J_SPLICE, &a, &b, 100, 0);
				int before = __atomic_load_n(&n_usr1_, __ATOMIC_SEQ_CST);
				KCHECK(kernel, job_start(j));
				pthread_kill(j->th, SIGUSR1);
				if (!restart) {
					KCHECK(kernel, job_wait(j, 5));
					KCHECK_EQ(kernel, job_res(j), -EINTR);
				} else {
					/* SA_RESTART: still waiting after the handler ran.
					 * (ThreadSanitizer runs the handler only once the
					 * call returns, so do not wait long for it; that it
					 * ran is checked after the join.) */
					double end = t_now() + 0.3;
					while (__atomic_load_n(&n_usr1_, __ATOMIC_SEQ_CST) == before &&
					       t_now() < end)
						t_sleep_ms(1);
					KCHECK(kernel, tp_wait_asleep(j->tid, 5.0));
					KCHECK(kernel, !job_done(j));
					if (full)
						CHECK_EQ(tp_read(&b, buf, PG), PG);
					else
						CHECK_EQ(tp_write(&a, "xyz", 3), 3);
					KCHECK(kernel, job_wait(j, 5));
					KCHECK_EQ(kernel, job_res(j), 3);
				}
				if (!job_done(j)) { /* unstick it to join */
					tp_close_end(&a, 1);
					tp_close_end(&b, 0);
				}
				job_join(j);
				KCHECK(kernel, __atomic_load_n(&n_usr1_, __ATOMIC_SEQ_CST) > before);
				free(j);
				tp_close(&a);
				tp_close(&b);
			}
		}
	}
	tp_default(SIGUSR1);
	CHECK_EQ(tp_pages_in_use(), 0);
}

/*
 * A thread that waited in pp_splice and leaves the condition true for
 * others must pass the wake on, as pp_read and pp_write do.  On Linux a
 * splice waits non-exclusively, so the write that ends the wait wakes it
 * and one reader (or writer) besides; pagepipe wakes one sleeper only, so
 * if that one is the splice it has to wake the next.  First: a splice and
 * a read both wait on an empty pipe, the splice first; two bytes arrive in
 * one write.  Either the splice takes one and the reader gets the other,
 * or the reader runs first and takes both while the splice goes on waiting
 * (Linux often does that); but a reader asleep with a byte in the pipe is
 * a lost wakeup.
 */
static void blocking_splice_passes_wake_to_reader(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		CHECK_EQ(tp_open(&b, kernel, 0), 0);
		struct job *s = job_new(J_SPLICE, &a, &b, 1, 0);
		struct job *r = job_new(J_READ, &a, NULL, 100, 0);
		KCHECK(kernel, job_start(s));
		KCHECK(kernel, job_start(r));
		CHECK_EQ(tp_write(&a, "xy", 2), 2);
		int ok = job_wait(r, 2);
		if (!ok)
			fprintf(stderr, "(%s) reader still asleep with %d byte(s) in the pipe\n",
			        tp_name(&a), tp_nread(&a, 0));
		KCHECK(kernel, ok);
		if (ok && job_res(r) == 1)
			KCHECK(kernel, job_wait(s, 5)); /* then the splice took the other */
		tp_close_end(&a, 1); /* ends a wait still going on */
		job_join(s);
		job_join(r);
		long sr = job_res(s), rr = job_res(r);
		KCHECK(kernel, (sr == 1 && rr == 1) || (sr == 0 && rr == 2));
		KCHECK_EQ(kernel, tp_nread(&b, 0), sr);
		free(s);
		free(r);
		tp_close(&a);
		tp_close(&b);
	}
	CHECK_EQ(tp_pages_in_use(), 0);
}

/* Second: a splice and a write both wait for room in a full pipe, the
 * splice first; a reader frees two slots; the splice fills one; the writer
 * must get the other. */
static void blocking_splice_passes_wake_to_writer(void)
{
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		unsigned char buf[2 * PG];
		CHECK_EQ(tp_open(&a, kernel, 0), 0);
		make_full_2(&b, kernel, 0);
		CHECK_EQ(tp_write(&a, "abc", 3), 3);
		struct job *s = job_new(J_SPLICE, &a, &b, 100, 0);
		struct job *w = job_new(J_WRITE, NULL, &b, 100, 0);
		KCHECK(kernel, job_start(s));
		KCHECK(kernel, job_start(w));
		CHECK_EQ(tp_read(&b, buf, sizeof buf), 2 * PG);
		KCHECK(kernel, job_wait(s, 5));
		KCHECK_EQ(kernel, job_res(s), 3);
		int ok = job_wait(w, 2);
		if (!ok)
			fprintf(stderr, "(%s) writer still asleep with a free slot\n", tp_name(&b));
		KCHECK(kernel, ok);
		tp_setsize(&b, 1, 65536); /* unsticks the writer if it was not woken */
		job_join(s);
		job_join(w);
		KCHECK_EQ(kernel, job_res(w), 100);
		free(s);
		free(w);
		tp_close(&a);
		tp_close(&b);
	}
	CHECK_EQ(tp_pages_in_use(), 0);
}

/* What poll would say after a splice, compared with a kernel pipe: data
 * arrived in the destination, room appeared in the source. */
static void events_after_splice(void)
{
	int ev[2][4];
	for (int kernel = 0; kernel < 2; kernel++) {
		struct tp a, b;
		char page[PG];
		memset(page, 'e', sizeof page);
		CHECK_EQ(tp_open(&a, kernel, PP_NONBLOCK), 0);
		CHECK_EQ(tp_open(&b, kernel, PP_NONBLOCK), 0);
		CHECK_EQ(tp_setsize(&a, 1, 4096), 4096);
		CHECK_EQ(tp_write(&a, page, PG), PG);
		ev[kernel][0] = tp_events(&a, 1);
		ev[kernel][1] = tp_events(&b, 0);
		ssize_t r = kernel ? splice(a.fd[0], NULL, b.fd[1], NULL, 100, 0)
		                   : pp_splice(a.e[0], b.e[1], 100, 0);
		KCHECK_EQ(kernel, r, 100);
		r = kernel ? splice(a.fd[0], NULL, b.fd[1], NULL, 5000, 0)
		           : pp_splice(a.e[0], b.e[1], 5000, 0);
		KCHECK_EQ(kernel, r, PG - 100);
		ev[kernel][2] = tp_events(&a, 1);
		ev[kernel][3] = tp_events(&b, 0);
		tp_close(&a);
		tp_close(&b);
	}
	for (int i = 0; i < 4; i++)
		CHECK_EQ(ev[0][i], ev[1][i]);
	CHECK_EQ(ev[0][2] & POLLOUT, POLLOUT);
	CHECK_EQ(ev[0][3] & POLLIN, POLLIN);
	CHECK_EQ(tp_pages_in_use(), 0);
}

int main(void)
{
	RUN(nonblocking_ends);
	RUN(blocking_wakes_for_data);
	RUN(blocking_wakes_for_room);
	RUN(blocking_eof_and_epipe);
	RUN(blocking_signals);
	RUN(blocking_splice_passes_wake_to_reader);
	RUN(blocking_splice_passes_wake_to_writer);
	RUN(events_after_splice);
	return T_DONE();
}
