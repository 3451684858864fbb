/*
 * splice_fd_kpipe.c - pp_splice_from_fd and pp_splice_to_fd with a kernel
 * pipe as the descriptor, blocking (a stream both ways, with a thread on
 * the other side) and O_NONBLOCK (EAGAIN, partial counts).
 * After every case: no page of the pool in use and no descriptor leaked
 * (splice_fd.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice_fd.h"

static void kpipe_blocking(void)
{
	uint32_t rs = 0x600d;
	int k[2];
	pthread_t t;
	size_t total = (size_t)t_scaled(1 << 20);
	CHECK_EQ(pipe2(k, O_CLOEXEC), 0);
	struct feeder f = { .fd = k[1], .seed = 81, .total = total, .rs = 3, .how = 2 };
	CHECK_EQ(pthread_create(&t, NULL, feeder_main, &f), 0);
	CHECK_EQ(from_stream(k[0], 81, &rs), total);
	pthread_join(t, NULL);
	CHECK_EQ(f.err, 0);
	close(k[0]);
	CHECK_EQ(pipe2(k, O_CLOEXEC), 0);
	struct drainer d = { .fd = k[0], .seed = 82 };
	CHECK_EQ(pthread_create(&t, NULL, drainer_main, &d), 0);
	to_stream(k[1], total, 82, &rs);
	close(k[1]);
	pthread_join(t, NULL);
	CHECK_EQ(d.got, total);
	CHECK_EQ(d.bad, 0);
	close(k[0]);
}

static void kpipe_nonblock(void)
{
	int k[2];
	struct pp_end *e[2];
	sigset_t old;
	CHECK_EQ(pipe2(k, O_CLOEXEC | O_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	/* Empty: EAGAIN; then what is there. */
	CHECK_ERR(pp_splice_from_fd(k[0], NULL, e[1], 1u << 20, 0), EAGAIN);
	CHECK_EQ(tp_pages_in_use(), 0);
	unsigned char buf[5000];
	tp_fill(buf, sizeof buf, 91, 0);
	CHECK_EQ(write(k[1], buf, sizeof buf), sizeof buf);
	CHECK_EQ(pp_splice_from_fd(k[0], NULL, e[1], 1u << 20, 0), 5000);
	CHECK(take_verify(e[0], 5000, 91, 0));
	/* A small kernel pipe takes part of the pagepipe at a time. */
	CHECK_EQ(fcntl(k[1], F_SETPIPE_SZ, 16384), 16384);
	CHECK(put_stream(e[1], 65536, 92, 0));
	size_t sent = 0;
	for (int round = 0; round < 20 && sent < 65536; round++) {
		ssize_t n = pp_splice_to_fd(e[0], k[1], NULL, 1u << 20, 0);
		CHECK(n > 0 && n <= 16384);
		if (n <= 0)
			break;
		CHECK_EQ(pp_nread(e[0]), 65536 - sent - (size_t)n);
		/* Full now: EAGAIN, and nothing taken from the pipe. */
		if (sent + (size_t)n < 65536) {
			CHECK_ERR(pp_splice_to_fd(e[0], k[1], NULL, 1, PP_SPLICE_NONBLOCK), EAGAIN);
			CHECK_EQ(pp_nread(e[0]), 65536 - sent - (size_t)n);
		}
		CHECK(fd_take_verify(k[0], (size_t)n, 92, sent));
		sent += (size_t)n;
	}
	CHECK_EQ(sent, 65536);
	/* No reader: EPIPE and SIGPIPE from the kernel; no writer: 0. */
	CHECK(put_stream(e[1], 10, 93, 0));
	close(k[0]);
	tp_sigpipe_block(&old);
	CHECK_ERR(pp_splice_to_fd(e[0], k[1], NULL, 10, 0), EPIPE);
	CHECK(tp_sigpipe_taken());
	tp_sigpipe_restore(&old);
	CHECK_EQ(pp_nread(e[0]), 10);
	close(k[1]);
	CHECK_EQ(pipe2(k, O_CLOEXEC), 0);
	close(k[1]);
	CHECK_EQ(pp_splice_from_fd(k[0], NULL, e[1], 100, 0), 0);
	CHECK_EQ(pp_nread(e[0]), 10);
	close(k[0]);
	pp_close(e[0]);
	pp_close(e[1]);
}

int main(void)
{
	t_around_cases(count_fds_before, nothing_left_after);
	RUN(kpipe_blocking);
	RUN(kpipe_nonblock);
	return T_DONE();
}
