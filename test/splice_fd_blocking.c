/*
 * splice_fd_blocking.c - what wakes a blocked descriptor splice:
 * pp_splice_to_fd asleep on an empty pipe wakes for a writer, for the
 * last writer's close (0) and for a signal handler (EINTR);
 * pp_splice_from_fd asleep on a full pipe wakes for a reader, for the
 * last reader's close (EPIPE) and for a signal handler.
 * After every case: no page of the pool in use and no descriptor leaked
 * (splice_fd.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice_fd.h"

static void on_usr1(int sig)
{
	(void)sig;
}

static void block_to_fd_wakes(void)
{
	struct pp_end *e[2];
	pthread_t t;
	int f = tmp_file(0, 0);
	CHECK(f >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	tp_handle(SIGUSR1, on_usr1, 0);
	struct blocked b = { .end = e[0], .fd = f, .use_off = 1, .off = 10, .to = 1,
	                     .len = 1u << 20 };
	/* A writer wakes it. */
	CHECK(start_blocked(&t, &b));
	CHECK(put_stream(e[1], 5000, 141, 0));
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, 5000);
	CHECK_EQ(b.off, 5010);
	unsigned char buf[5000];
	CHECK_EQ(pread_all(f, buf, 5000, 10), 5000);
	CHECK(tp_verify(buf, 5000, 141, 0) < 0);
	/* A signal handler: EINTR. */
	CHECK(start_blocked(&t, &b));
	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, -1);
	CHECK_EQ(b.err, EINTR);
	CHECK_EQ(b.off, 5010);
	/* The last writer's close: end of file. */
	CHECK(start_blocked(&t, &b));
	pp_close(e[1]);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, 0);
	CHECK_EQ(b.off, 5010);
	tp_default(SIGUSR1);
	pp_close(e[0]);
	close(f);
}

static void block_from_fd_wakes(void)
{
	struct pp_end *e[2];
	pthread_t t;
	int f = tmp_file(100000, 151);
	CHECK(f >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	tp_handle(SIGUSR1, on_usr1, 0);
	CHECK_EQ(pp_free_slots(e[1]), 16);
	struct blocked b = { .end = e[1], .fd = f, .use_off = 1, .off = 8192, .to = 0,
	                     .len = 10000 };
	/* A reader frees a slot: it moves what fits there. */
	CHECK(start_blocked(&t, &b));
	char page[4096];
	CHECK_EQ(pp_read(e[0], page, sizeof page), 4096);
	pthread_join(t, NULL);
	CHECK(b.ret > 0 && b.ret <= 4096);
	CHECK_EQ(b.off, 8192 + (b.ret > 0 ? b.ret : 0));
	CHECK_EQ(pp_nread(e[0]), 61440 + (b.ret > 0 ? b.ret : 0));
	CHECK_EQ(lseek(f, 0, SEEK_CUR), 0);
	/* Full again: growing the pipe wakes it. */
	if (b.ret < 4096)
		pp_free_slots(e[1]);
	off_t at = b.off;
	b.len = 1u << 20;
	CHECK(start_blocked(&t, &b));
	CHECK_EQ(pp_setsize(e[0], 2 * 65536), 2 * 65536);
	pthread_join(t, NULL);
	CHECK(b.ret > 65536 - 4096 && b.ret <= 65536);
	CHECK_EQ(b.off, at + (b.ret > 0 ? b.ret : 0));
	if (b.ret < 65536)
		pp_free_slots(e[1]);
	at = b.off;
	/* A signal handler gives EINTR. */
	CHECK(start_blocked(&t, &b));
	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, -1);
	CHECK_EQ(b.err, EINTR);
	CHECK_EQ(b.off, at);
	/* The last reader's close: EPIPE and SIGPIPE in that thread. */
	CHECK(start_blocked(&t, &b));
	pp_close(e[0]);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, -1);
	CHECK_EQ(b.err, EPIPE);
	CHECK_EQ(b.sigpipe, 1);
	CHECK_EQ(b.off, at);
	tp_default(SIGUSR1);
	pp_close(e[1]);
	close(f);
}

int main(void)
{
	t_around_cases(count_fds_before, nothing_left_after);
	RUN(block_to_fd_wakes);
	RUN(block_from_fd_wakes);
	return T_DONE();
}
