/*
 * signals_eof.c - end of file, EPIPE/SIGPIPE and interruption by signals.
 *
 * Compared with a kernel pipe running the same scenario:
 *  - a read returns 0 at end of file, only once the last write handle
 *    (pp_dup'd ones included) is closed, and that close wakes every
 *    blocked reader; non-blocking reads see 0 there, not EAGAIN;
 *  - a write with no reader raises SIGPIPE in the calling thread and fails
 *    with EPIPE (PP_NOSIGPIPE: no signal, still EPIPE); closing the last
 *    reader wakes a blocked writer, which returns what it wrote or EPIPE;
 *  - a thread blocked in read (empty pipe) or write (full pipe) that gets a
 *    signal whose handler was installed without SA_RESTART returns -1
 *    EINTR if it moved nothing, or the partial count; with SA_RESTART the
 *    call goes on waiting and completes later (a partial write still
 *    returns its count).
 * Signals are sent to the blocked thread with pthread_kill once /proc says
 * it is asleep.
 */
#include "harness/harness.h"
#include "harness/helpers.h"

/* Counters set by the handlers (in the signalled thread) and read by the
 * main thread: atomics, so that TSan sees the ordering. */
static int n_usr1_, n_pipe_;
static pid_t pipe_tid_;
#define n_usr1 __atomic_load_n(&n_usr1_, __ATOMIC_SEQ_CST)
#define n_pipe __atomic_load_n(&n_pipe_, __ATOMIC_SEQ_CST)
#define pipe_tid __atomic_load_n(&pipe_tid_, __ATOMIC_SEQ_CST)

static void on_usr1(int sig)
{
	int saved = errno;
	(void)sig;
	__atomic_fetch_add(&n_usr1_, 1, __ATOMIC_SEQ_CST);
	errno = saved;
}

static void on_pipe(int sig)
{
	int saved = errno;
	(void)sig;
	__atomic_fetch_add(&n_pipe_, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&pipe_tid_, tp_gettid(), __ATOMIC_SEQ_CST);
	errno = saved;
}

static void zero_counters(void)
{
	__atomic_store_n(&n_usr1_, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&n_pipe_, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&pipe_tid_, 0, __ATOMIC_SEQ_CST);
}

/* ---- a thread doing one blocking call ----------------------------------- */

struct op {
	struct tp *t;
	struct pp_end *e; /* if set (pagepipe), use this handle */
	int fd;           /* if >= 0 (kernel), use this descriptor */
	int write;
	size_t n;
	char *buf;
	ssize_t ret;
	int err;
	pid_t tid;
	int done;
};

static void *op_run(void *arg)
{
	struct op *o = arg;
	__atomic_store_n(&o->tid, tp_gettid(), __ATOMIC_RELEASE);
	errno = 0;
	if (o->write) {
		if (o->e)
			o->ret = pp_write(o->e, o->buf, o->n);
		else if (o->fd >= 0)
			o->ret = write(o->fd, o->buf, o->n);
		else
			o->ret = tp_write(o->t, o->buf, o->n);
	} else {
		if (o->e)
			o->ret = pp_read(o->e, o->buf, o->n);
		else if (o->fd >= 0)
			o->ret = read(o->fd, o->buf, o->n);
		else
			o->ret = tp_read(o->t, o->buf, o->n);
	}
	o->err = errno;
	__atomic_store_n(&o->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void op_init(struct op *o, struct tp *t, int write, char *buf, size_t n)
{
	memset(o, 0, sizeof *o);
	o->t = t;
	o->fd = -1;
	o->write = write;
	o->buf = buf;
	o->n = n;
}

/* Start the call in a thread and wait until it sleeps in it. */
static int op_start(struct op *o, pthread_t *th)
{
	if (pthread_create(th, NULL, op_run, o) != 0)
		return 0;
	while (!__atomic_load_n(&o->tid, __ATOMIC_ACQUIRE))
		t_sleep_ms(1);
	return tp_wait_asleep(o->tid, 5.0);
}

static int op_done(struct op *o)
{
	return __atomic_load_n(&o->done, __ATOMIC_ACQUIRE);
}

/* Wait up to ms for the call to return. */
static int op_wait(struct op *o, long ms)
{
	for (long i = 0; i < ms && !op_done(o); i++)
		t_sleep_ms(1);
	return op_done(o);
}

/* If the call is still blocked (a failure already recorded), unblock it by
 * moving data the other way, so the thread can be joined. */
static void op_rescue(struct op *o)
{
	static char junk[4096];
	int nb = 0;
	while (!op_done(o)) {
		if (!nb) {
			tp_setnonblock(o->t, o->write ? 0 : 1, 1);
			nb = 1;
		}
		if (o->write)
			(void)tp_read(o->t, junk, sizeof junk);
		else
			(void)tp_write(o->t, "!", 1);
		t_sleep_ms(5);
	}
}

/* End the thread of o: rescue the call if it is still blocked, join. */
static void op_end(struct op *o, pthread_t th)
{
	op_rescue(o);
	pthread_join(th, NULL);
}

static long op_res(struct op *o)
{
	return o->ret < 0 ? -(long)o->err : (long)o->ret;
}

/* ---- end of file -------------------------------------------------------- */

static void sc_eof(struct tp_rec *r, int kernel)
{
	struct tp t;
	char buf[16];
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "write 5", tp_res(tp_write(&t, "hello", 5)));
	tp_close_end(&t, 1);
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "read 3", tp_res(tp_read(&t, buf, 3)));
	TP_REC(r, "read rest", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "eof", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "eof again", tp_res(tp_read(&t, buf, sizeof buf)));
	CHECK_EQ(tp_setnonblock(&t, 0, 1), 0);
	TP_REC(r, "eof non-blocking", tp_res(tp_read(&t, buf, sizeof buf)));
	tp_close(&t);
	TP_WANT(r, kernel, 5, 5, 3, 2, 0, 0, 0);
}

static void eof_after_writer_closes(void)
{
	TP_BOTH(sc_eof);
}

/* With a second write handle, closing the first is not EOF: a blocked
 * reader sleeps on until the last handle goes. */
static void sc_eof_dup(struct tp_rec *r, int kernel)
{
	struct tp t;
	char buf[16];
	struct op o;
	pthread_t th;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	int wfd = -1;
	struct pp_end *we = NULL;
	if (kernel)
		wfd = dup(t.fd[1]);
	else
		we = pp_dup(t.e[1]);
	tp_close_end(&t, 1);
	TP_REC(r, "read, dup writer open", tp_res(tp_read(&t, buf, sizeof buf)));
	CHECK_EQ(tp_setnonblock(&t, 0, 0), 0);
	op_init(&o, &t, 0, buf, sizeof buf);
	CHECK(op_start(&o, &th));
	t_sleep_ms(50);
	TP_REC(r, "reader still blocked", !op_done(&o));
	double t0 = t_now();
	if (kernel)
		close(wfd);
	else
		pp_close(we);
	TP_REC(r, "woken by last close", op_wait(&o, 5000));
	CHECK(t_now() - t0 < 2.0);
	op_end(&o, th);
	TP_REC(r, "read result", op_res(&o));
	tp_close(&t);
	TP_WANT(r, kernel, -EAGAIN, 1, 1, 0);
}

static void eof_only_after_last_dup_closes(void)
{
	TP_BOTH(sc_eof_dup);
}

/* Closing the writer wakes every blocked reader (each with its own handle). */
static void sc_eof_wakes_all(struct tp_rec *r, int kernel)
{
	struct tp t;
	enum { N = 3 };
	struct op o[N];
	pthread_t th[N];
	char buf[N][8];
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	for (int i = 0; i < N; i++) {
		op_init(&o[i], &t, 0, buf[i], sizeof buf[i]);
		if (kernel)
			o[i].fd = dup(t.fd[0]);
		else
			o[i].e = pp_dup(t.e[0]);
		CHECK(op_start(&o[i], &th[i]));
	}
	t_sleep_ms(30);
	int early = 0;
	for (int i = 0; i < N; i++)
		early += op_done(&o[i]);
	TP_REC(r, "returned before close", early);
	tp_close_end(&t, 1);
	for (int i = 0; i < N; i++) {
		TP_REC(r, "woken", op_wait(&o[i], 5000));
		pthread_join(th[i], NULL);
		TP_REC(r, "result", op_res(&o[i]));
		if (kernel)
			close(o[i].fd);
		else
			pp_close(o[i].e);
	}
	tp_close(&t);
	CHECK_EQ(r->v[0], 0);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(r->v[1 + 2 * i], 1);
		CHECK_EQ(r->v[2 + 2 * i], 0);
	}
}

static void eof_wakes_every_reader(void)
{
	TP_BOTH(sc_eof_wakes_all);
}

/* ---- EPIPE and SIGPIPE -------------------------------------------------- */

/* A write with no reader: SIGPIPE in the writing thread, then EPIPE. */
static void sc_sigpipe(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct op o;
	pthread_t th;
	static char buf[5000];
	tp_handle(SIGPIPE, on_pipe, 1);
	zero_counters();
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	tp_close_end(&t, 0);
	op_init(&o, &t, 1, buf, 100);
	CHECK_EQ(pthread_create(&th, NULL, op_run, &o), 0);
	op_end(&o, th);
	TP_REC(r, "write", op_res(&o));
	TP_REC(r, "SIGPIPEs", n_pipe);
	TP_REC(r, "in the writing thread", pipe_tid == o.tid);
	TP_REC(r, "write again", tp_res(tp_write(&t, buf, 5000)));
	TP_REC(r, "SIGPIPEs", n_pipe);
	struct iovec iov[2] = { { buf, 10 }, { buf, 10 } };
	TP_REC(r, "writev", tp_res(tp_writev(&t, iov, 2)));
	TP_REC(r, "SIGPIPEs", n_pipe);
	tp_close(&t);
	tp_default(SIGPIPE);
	TP_WANT(r, kernel, -EPIPE, 1, 1, -EPIPE, 2, -EPIPE, 3);
}

static void epipe_raises_sigpipe(void)
{
	TP_BOTH(sc_sigpipe);
}

/* PP_NOSIGPIPE: EPIPE and no signal - with a counting handler, and with
 * SIGPIPE at its default action (which would kill this program); and no
 * SIGPIPE is left pending either. */
static void nosigpipe_gives_epipe_only(void)
{
	struct pp_end *e[2];
	sigset_t pend;
	tp_handle(SIGPIPE, on_pipe, 1);
	zero_counters();
	CHECK_EQ(pp_pipe(e, PP_NOSIGPIPE), 0);
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_ERR(pp_write(e[1], "x", 1), EPIPE);
	CHECK_ERR(pp_write(e[1], "xyz", 3), EPIPE);
	CHECK_EQ(n_pipe, 0);
	tp_default(SIGPIPE);
	CHECK_ERR(pp_write(e[1], "x", 1), EPIPE);
	struct iovec iov = { "abc", 3 };
	CHECK_ERR(pp_writev(e[1], &iov, 1), EPIPE);
	sigemptyset(&pend);
	CHECK_EQ(sigpending(&pend), 0);
	CHECK(!sigismember(&pend, SIGPIPE));
	CHECK_EQ(pp_close(e[1]), 0);

	/* Without the flag, a blocked SIGPIPE stays pending for the thread,
	 * as the kernel's would. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	CHECK_EQ(pp_pipe(e, 0), 0);
	pp_close(e[0]);
	CHECK_ERR(pp_write(e[1], "x", 1), EPIPE);
	sigemptyset(&pend);
	sigpending(&pend);
	CHECK(sigismember(&pend, SIGPIPE));
	struct timespec zero = { 0, 0 };
	CHECK_EQ(sigtimedwait(&set, NULL, &zero), SIGPIPE);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pp_close(e[1]);
}

/* Closing the last reader wakes a blocked writer: -1 EPIPE if it wrote
 * nothing, else the count it wrote; SIGPIPE either way. */
static void sc_reader_close_wakes_writer(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct op o;
	pthread_t th;
	static char buf[70000];
	tp_handle(SIGPIPE, on_pipe, 1);

	/* Nothing written yet: the pipe is full. */
	zero_counters();
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "fill", tp_res(tp_write(&t, buf, 65536)));
	op_init(&o, &t, 1, buf, 100);
	CHECK(op_start(&o, &th));
	TP_REC(r, "blocked", !op_done(&o));
	tp_close_end(&t, 0);
	TP_REC(r, "woken", op_wait(&o, 5000));
	op_end(&o, th);
	TP_REC(r, "write", op_res(&o));
	TP_REC(r, "SIGPIPEs", n_pipe);
	tp_close(&t);

	/* Part written: 65536 of 70000 went in before it blocked. */
	zero_counters();
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	op_init(&o, &t, 1, buf, 70000);
	CHECK(op_start(&o, &th));
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close_end(&t, 0);
	TP_REC(r, "woken", op_wait(&o, 5000));
	op_end(&o, th);
	TP_REC(r, "write", op_res(&o));
	TP_REC(r, "SIGPIPEs", n_pipe);
	tp_close(&t);
	tp_default(SIGPIPE);
	TP_WANT(r, kernel, 65536, 1, 1, -EPIPE, 1, 65536, 1, 65536, 1);
}

static void reader_close_wakes_blocked_writer(void)
{
	TP_BOTH(sc_reader_close_wakes_writer);
}

/* ---- EINTR and SA_RESTART ------------------------------------------------ */

/* Send SIGUSR1 to the blocked thread until it returns (the first one
 * should do; more only cover a signal that landed just before it slept).
 * Returns how many were sent. */
static int interrupt(struct op *o, pthread_t th)
{
	int sent = 0;
	while (!op_done(o) && sent < 10) {
		pthread_kill(th, SIGUSR1);
		sent++;
		op_wait(o, 500);
	}
	return sent;
}

/* Start o (made by op_init), wait until it sleeps, interrupt it with
 * SIGUSR1 until it returns and end its thread: one signal should do, two
 * at most (one that landed just before it slept). */
static void op_interrupted(struct op *o)
{
	pthread_t th;
	CHECK(op_start(o, &th));
	int sent = interrupt(o, th);
	op_end(o, th);
	CHECK(sent <= 2);
}

static void sc_eintr_read(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct op o;
	char buf[64];
	tp_handle(SIGUSR1, on_usr1, 0);
	zero_counters();
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	op_init(&o, &t, 0, buf, sizeof buf);
	op_interrupted(&o);
	TP_REC(r, "read", op_res(&o));
	TP_REC(r, "handler ran", n_usr1 > 0);
	/* Nothing was lost: the pipe works on. */
	TP_REC(r, "write", tp_res(tp_write(&t, "abc", 3)));
	TP_REC(r, "read", tp_res(tp_read(&t, buf, sizeof buf)));
	tp_close(&t);
	TP_WANT(r, kernel, -EINTR, 1, 3, 3);
}

static void eintr_blocked_read(void)
{
	TP_BOTH(sc_eintr_read);
	tp_default(SIGUSR1);
}

static void sc_eintr_write(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct op o;
	static char buf[70000], out[70000];
	tp_handle(SIGUSR1, on_usr1, 0);

	/* Full pipe, nothing written: EINTR, and nothing of it went in. */
	zero_counters();
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "fill", tp_res(tp_write(&t, buf, 65536)));
	op_init(&o, &t, 1, buf, 100);
	op_interrupted(&o);
	TP_REC(r, "write", op_res(&o));
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close(&t);

	/* Empty pipe, 70000 bytes: 65536 go in, then the signal. */
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	tp_fill(buf, 70000, 12, 0);
	op_init(&o, &t, 1, buf, 70000);
	op_interrupted(&o);
	TP_REC(r, "write", op_res(&o));
	TP_REC(r, "nread", tp_nread(&t, 0));
	ssize_t n = tp_read(&t, out, sizeof out);
	TP_REC(r, "read", tp_res(n));
	CHECK_EQ(tp_verify(out, 65536, 12, 0), -1);
	tp_close(&t);
	TP_WANT(r, kernel, 65536, -EINTR, 65536, 65536, 65536, 65536);
}

static void eintr_blocked_write(void)
{
	TP_BOTH(sc_eintr_write);
	tp_default(SIGUSR1);
}

/* Give the handler time to run, then some more: a restarted call is still
 * waiting after it.  (Under TSan the handler itself runs only once the call
 * returns, so whether it ran is checked after the join.) */
static void wait_handler(void)
{
	for (int i = 0; i < 500 && !n_usr1; i++)
		t_sleep_ms(1);
	t_sleep_ms(100);
}

/* With SA_RESTART the handler runs and the call waits on, then completes. */
static void sc_restart(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct op o;
	pthread_t th;
	static char buf[70000], out[70000];
	tp_handle(SIGUSR1, on_usr1, 1);

	/* A read. */
	zero_counters();
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	op_init(&o, &t, 0, out, 100);
	CHECK(op_start(&o, &th));
	pthread_kill(th, SIGUSR1);
	wait_handler();
	TP_REC(r, "read still waiting", !op_done(&o));
	TP_REC(r, "write", tp_res(tp_write(&t, "12345", 5)));
	TP_REC(r, "read returned", op_wait(&o, 5000));
	op_end(&o, th);
	TP_REC(r, "handler ran", n_usr1 == 1);
	TP_REC(r, "read", op_res(&o));
	tp_close(&t);

	/* A write to a full pipe that wrote nothing yet. */
	zero_counters();
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	TP_REC(r, "fill", tp_res(tp_write(&t, buf, 65536)));
	op_init(&o, &t, 1, buf, 100);
	CHECK(op_start(&o, &th));
	pthread_kill(th, SIGUSR1);
	wait_handler();
	TP_REC(r, "write still waiting", !op_done(&o));
	TP_REC(r, "read", tp_res(tp_read(&t, out, 4096)));
	TP_REC(r, "write returned", op_wait(&o, 5000));
	op_end(&o, th);
	TP_REC(r, "handler ran", n_usr1 == 1);
	TP_REC(r, "write", op_res(&o));
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close(&t);

	/* A write that wrote part: returns its count even with SA_RESTART. */
	zero_counters();
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	op_init(&o, &t, 1, buf, 70000);
	CHECK(op_start(&o, &th));
	pthread_kill(th, SIGUSR1);
	TP_REC(r, "partial write returned", op_wait(&o, 5000));
	op_end(&o, th);
	TP_REC(r, "handler ran", n_usr1 == 1);
	TP_REC(r, "write", op_res(&o));
	tp_close(&t);
	TP_WANT(r, kernel, 1, 5, 1, 1, 5, 65536, 1, 4096, 1, 1, 100, 61540, 1,
	        1, 65536);
}

static void sa_restart_restarts(void)
{
	TP_BOTH(sc_restart);
	tp_default(SIGUSR1);
}

/* A signal whose handler is ignored (SIG_IGN) does not interrupt. */
static void sc_ignored(struct tp_rec *r, int kernel)
{
	struct tp t;
	struct op o;
	pthread_t th;
	char out[16];
	signal(SIGUSR2, SIG_IGN);
	CHECK_EQ(tp_open(&t, kernel, 0), 0);
	op_init(&o, &t, 0, out, sizeof out);
	CHECK(op_start(&o, &th));
	pthread_kill(th, SIGUSR2);
	t_sleep_ms(100);
	TP_REC(r, "read still waiting", !op_done(&o));
	TP_REC(r, "write", tp_res(tp_write(&t, "ok", 2)));
	TP_REC(r, "returned", op_wait(&o, 5000));
	op_end(&o, th);
	TP_REC(r, "read", op_res(&o));
	tp_close(&t);
	tp_default(SIGUSR2);
	CHECK_EQ(r->v[0], 1);
	CHECK_EQ(r->v[3], 2);
}

static void ignored_signal_does_not_interrupt(void)
{
	TP_BOTH(sc_ignored);
}

int main(void)
{
	RUN(eof_after_writer_closes);
	RUN(eof_only_after_last_dup_closes);
	RUN(eof_wakes_every_reader);
	RUN(epipe_raises_sigpipe);
	RUN(nosigpipe_gives_epipe_only);
	RUN(reader_close_wakes_blocked_writer);
	RUN(eintr_blocked_read);
	RUN(eintr_blocked_write);
	RUN(sa_restart_restarts);
	RUN(ignored_signal_does_not_interrupt);
	return T_DONE();
}
