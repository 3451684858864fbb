/*
 * vmsplice_close_and_signals.c - pp_vmsplice and closed ends, signals:
 *   epipe_and_sigpipe        no reader: EPIPE and SIGPIPE, or EPIPE alone
 *                            with PP_NOSIGPIPE; only empty segments: 0 and
 *                            no signal (as the kernel); no release;
 *   reader_closes_while_blocked  a blocked vmsplice with part placed
 *                            returns that part when the reader goes, with
 *                            SIGPIPE unless PP_NOSIGPIPE; release covers
 *                            that part;
 *   eintr_nothing_placed     a handler interrupts a vmsplice that placed
 *                            nothing: EINTR and no release;
 *   close_releases           closing the last end of a pipe (and of a pipe
 *                            a tee shared the memory with) calls release; a
 *                            read end closed alone, or a dup left open,
 *                            does not free the data.
 * After every case: no pool page in use, no callback with a foreign arg
 * (vmsplice.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "vmsplice.h"

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void epipe_and_sigpipe(void)
{
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = on_sigpipe;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &old);
	struct rel_log log;
	log_init(&log);
	unsigned char buf[64] = { 1 };
	struct iovec iov[2] = { { buf, 10 }, { buf + 10, 54 } };
	struct iovec empty[2] = { { buf, 0 }, { NULL, 0 } };
	for (int nosig = 0; nosig < 2; nosig++) {
		struct pp_end *p[2];
		mkpipe(p, nosig ? PP_NOSIGPIPE : 0);
		CHECK_EQ(pp_close(p[0]), 0);
		sigpipes = 0;
		CHECK_ERR(pp_vmsplice(p[1], iov, 2, 0, on_release, &log), EPIPE);
		CHECK_EQ(sigpipes, nosig ? 0 : 1);
		CHECK_ERR(pp_vmsplice(p[1], iov, 1, PP_SPLICE_NONBLOCK, on_release, &log), EPIPE);
		CHECK_EQ(sigpipes, nosig ? 0 : 2);
		/* Nothing to place: 0, no error and no signal, as vmsplice(2). */
		CHECK_EQ(pp_vmsplice(p[1], empty, 2, 0, on_release, &log), 0);
		CHECK_EQ(pp_vmsplice(p[1], NULL, 0, 0, on_release, &log), 0);
		CHECK_EQ(sigpipes, nosig ? 0 : 2);
		CHECK_EQ(pp_close(p[1]), 0);
	}
	CHECK_EQ(log_count(&log), 0);
	sigaction(SIGPIPE, &old, NULL);
	log_fini(&log);
}

static void reader_closes_while_blocked(void)
{
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = on_sigpipe;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &old);
	for (int nosig = 0; nosig < 2; nosig++) {
		struct pp_end *p[2];
		struct rel_log log;
		log_init(&log);
		mkpipe(p, nosig ? PP_NOSIGPIPE : 0);
		fill_slots(p[1], 2);
		unsigned char *a = malloc(3 * 4096 + 5);
		fill_random(a, 3 * 4096 + 5);
		struct iovec iov = { a, 3 * 4096 + 5 };
		struct blocker b = { .end = p[1], .iov = &iov, .n = 1, .log = &log };
		pthread_t t;
		sigpipes = 0;
		CHECK_EQ(pthread_create(&t, NULL, blocker_main, &b), 0);
		/* It places two chunks and sleeps (Linux's vmsplice would return
		 * 8192 at once: then it never sees the reader go). */
		CHECK(wait_asleep(&b.tid, &b.done));
		int early = atomic_load(&b.done);
		CHECK_EQ(pp_close(p[0]), 0);
		pthread_join(t, NULL);
		CHECK_EQ(b.ret, 8192);
		/* As pp_write: the thread that found no reader got SIGPIPE. */
		CHECK_EQ(sigpipes, nosig || early ? 0 : 1);
		/* The data is still in the pipe: freed with its last end. */
		CHECK_EQ(log_count(&log), 0);
		CHECK_EQ(pp_close(p[1]), 0);
		CHECK_EQ(log_count(&log), 1);
		CHECK_RELEASED(&log, a, 8192);
		log_fini(&log);
		free(a);
	}
	sigaction(SIGPIPE, &old, NULL);
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void eintr_nothing_placed(void)
{
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = on_usr1; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, &old);
	struct pp_end *p[2];
	struct rel_log log;
	log_init(&log);
	mkpipe(p, 0);
	fill_slots(p[1], 0);
	unsigned char a[100] = { 7 };
	struct iovec iov[2] = { { a, 50 }, { a + 50, 50 } };
	struct blocker b = { .end = p[1], .iov = iov, .n = 2, .log = &log };
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, blocker_main, &b), 0);
	CHECK(wait_asleep(&b.tid, &b.done));
	CHECK(!atomic_load(&b.done));
	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, -1);
	CHECK_EQ(b.err, EINTR);
	CHECK_EQ(pp_nread(p[0]), 65536);
	CHECK_EQ(drain(p[0]), 65536);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(log_count(&log), 0);
	sigaction(SIGUSR1, &old, NULL);
	log_fini(&log);
}

static void close_releases(void)
{
	struct abc s;
	struct rel_log log;
	abc_init(&s);
	log_init(&log);
	struct pp_end *p[2], *q[2];
	unsigned char got[16];

	/* Read end closed first: the data stays until the write end goes. */
	mkpipe(p, PP_NOSIGPIPE);
	CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release, &log), 9097);
	CHECK_EQ(read_n(p[0], got, 10), 10); /* part of A read */
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(log_count(&log), 3);
	CHECK_RELEASED(&log, s.iov[0].iov_base, 5000); /* all that went in */
	CHECK_RELEASED(&log, s.iov[1].iov_base, 4096);
	CHECK_RELEASED(&log, s.iov[2].iov_base, 1);

	/* Write end closed first, a dup of the read end left open. */
	log.count = 0;
	mkpipe(p, 0);
	CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release, &log), 9097);
	struct pp_end *dup = pp_dup(p[0]);
	CHECK(dup != NULL);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(log_count(&log), 0);
	CHECK_EQ(pp_close(dup), 0);
	CHECK_EQ(log_count(&log), 3);

	/* Tee'd: closing the first pipe releases nothing, the second does. */
	log.count = 0;
	mkpipe(p, 0);
	mkpipe(q, 0);
	CHECK_EQ(pp_vmsplice(p[1], s.iov, 3, 0, on_release, &log), 9097);
	CHECK_EQ(pp_tee(p[0], q[1], 5000, 0), 5000); /* A only */
	CHECK_EQ(pp_close(p[0]), 0);
	CHECK_EQ(pp_close(p[1]), 0);
	CHECK_EQ(log_count(&log), 2); /* B and C were only in p */
	CHECK_RELEASED(&log, s.iov[1].iov_base, 4096);
	CHECK_RELEASED(&log, s.iov[2].iov_base, 1);
	CHECK_EQ(pp_close(q[1]), 0);
	CHECK_EQ(read_n(q[0], got, 16), 16);
	CHECK(memcmp(got, s.want, 16) == 0);
	CHECK_EQ(log_count(&log), 2);
	CHECK_EQ(pp_close(q[0]), 0);
	CHECK_EQ(log_count(&log), 3);
	CHECK_RELEASED(&log, s.iov[0].iov_base, 5000);

	log_fini(&log);
	free(s.mem);
}

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(epipe_and_sigpipe);
	RUN(reader_closes_while_blocked);
	RUN(eintr_nothing_placed);
	RUN(close_releases);
	return T_DONE();
}
