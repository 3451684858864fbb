/*
 * splice_fd_errors.c - the errors of pp_splice_from_fd and
 * pp_splice_to_fd: ESPIPE, EINVAL, EBADF (bad, closed and wrong-way
 * descriptors, the wrong pagepipe end), EPIPE with and without SIGPIPE,
 * EAGAIN with PP_SPLICE_NONBLOCK, 0 at the pipe's end of file, len 0; a
 * failed call takes nothing from the descriptor and leaves the pipe as it
 * was; at the pool's limit the call gets the pages there are, then ENOMEM.
 * After every case: no page of the pool in use and no descriptor leaked
 * (splice_fd.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice_fd.h"

static void errors_arguments(void)
{
	struct pp_end *e[2];
	int k[2], sv[2];
	int f = tmp_file(10000, 111);
	CHECK(f >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pipe2(k, O_CLOEXEC), 0);
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	CHECK(put_stream(e[1], 50, 112, 0));
	off_t off = 0;

	/* An offset with a kernel pipe is ESPIPE; with a socket, which cannot
	 * pread/pwrite, EINVAL, as splice(2) on Linux 6.x gives. */
	CHECK_ERR(pp_splice_from_fd(k[0], &off, e[1], 10, 0), ESPIPE);
	CHECK_ERR(pp_splice_to_fd(e[0], k[1], &off, 10, 0), ESPIPE);
	CHECK_ERR(pp_splice_from_fd(sv[0], &off, e[1], 10, 0), EINVAL);
	CHECK_ERR(pp_splice_to_fd(e[0], sv[0], &off, 10, 0), EINVAL);
	/* A negative offset. */
	off = -1;
	CHECK_ERR(pp_splice_from_fd(f, &off, e[1], 10, 0), EINVAL);
	CHECK_ERR(pp_splice_to_fd(e[0], f, &off, 10, 0), EINVAL);
	off = INT64_MIN;
	CHECK_ERR(pp_splice_from_fd(f, &off, e[1], 10, 0), EINVAL);
	CHECK_EQ(off, INT64_MIN);
	/* Unknown flags. */
	static const unsigned bad_flags[] = { 0x10, 0x100, 0x80000000u, 0xffffffffu };
	for (size_t i = 0; i < sizeof bad_flags / sizeof bad_flags[0]; i++) {
		CHECK_ERR(pp_splice_from_fd(f, NULL, e[1], 10, bad_flags[i]), EINVAL);
		CHECK_ERR(pp_splice_to_fd(e[0], f, NULL, 10, bad_flags[i]), EINVAL);
	}
	/* Known flags are accepted. */
	struct pp_end *e2[2];
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK_EQ(pp_pipe(e2, 0), 0);
	off = 0;
	CHECK_EQ(pp_splice_from_fd(f, &off, e2[1], 10,
	                           PP_SPLICE_MOVE | PP_SPLICE_MORE | PP_SPLICE_GIFT), 10);
	CHECK_EQ(pp_splice_to_fd(e2[0], null, NULL, 10,
	                         PP_SPLICE_MOVE | PP_SPLICE_MORE | PP_SPLICE_GIFT | PP_SPLICE_NONBLOCK), 10);
	pp_close(e2[0]);
	pp_close(e2[1]);
	close(null);
	CHECK_EQ(pp_nread(e[0]), 50);
	/* Bad descriptors. */
	int closed = dup(f);
	close(closed);
	CHECK_ERR(pp_splice_from_fd(-1, NULL, e[1], 10, 0), EBADF);
	CHECK_ERR(pp_splice_to_fd(e[0], -1, NULL, 10, 0), EBADF);
	CHECK_ERR(pp_splice_from_fd(INT32_MIN, NULL, e[1], 10, 0), EBADF);
	CHECK_ERR(pp_splice_from_fd(closed, NULL, e[1], 10, 0), EBADF);
	CHECK_ERR(pp_splice_to_fd(e[0], closed, NULL, 10, 0), EBADF);
	off = 0;
	CHECK_ERR(pp_splice_from_fd(closed, &off, e[1], 10, 0), EBADF);
	CHECK_ERR(pp_splice_to_fd(e[0], closed, &off, 10, 0), EBADF);
	/* The wrong pagepipe end, or none. */
	CHECK_ERR(pp_splice_from_fd(f, NULL, e[0], 10, 0), EBADF);
	CHECK_ERR(pp_splice_to_fd(e[1], f, NULL, 10, 0), EBADF);
	CHECK_ERR(pp_splice_from_fd(f, NULL, NULL, 10, 0), EBADF);
	CHECK_ERR(pp_splice_to_fd(NULL, f, NULL, 10, 0), EBADF);
	/* Descriptors open the wrong way. */
	int ro = reopen(f, O_RDONLY), wo = reopen(f, O_WRONLY);
	CHECK(ro >= 0 && wo >= 0);
	CHECK_ERR(pp_splice_from_fd(k[1], NULL, e[1], 10, 0), EBADF);
	CHECK_ERR(pp_splice_to_fd(e[0], k[0], NULL, 10, 0), EBADF);
	CHECK_ERR(pp_splice_from_fd(wo, NULL, e[1], 10, 0), EBADF);
	CHECK_ERR(pp_splice_to_fd(e[0], ro, NULL, 10, 0), EBADF);
	off = 0;
	CHECK_ERR(pp_splice_from_fd(wo, &off, e[1], 10, 0), EBADF);
	CHECK_ERR(pp_splice_to_fd(e[0], ro, &off, 10, 0), EBADF);
	CHECK_EQ(off, 0);
	/* Length 0 moves nothing. */
	CHECK_EQ(pp_splice_from_fd(f, NULL, e[1], 0, 0), 0);
	CHECK_EQ(pp_splice_to_fd(e[0], f, NULL, 0, 0), 0);
	off = 5;
	CHECK_EQ(pp_splice_from_fd(f, &off, e[1], 0, 0), 0);
	CHECK_EQ(pp_splice_to_fd(e[0], f, &off, 0, 0), 0);
	CHECK_EQ(off, 5);
	CHECK_EQ(lseek(f, 0, SEEK_CUR), 0);
	/* None of that moved a byte, or kept a page or a slot. */
	CHECK_EQ(pp_nread(e[0]), 50);
	CHECK(take_verify(e[0], 50, 112, 0));
	CHECK_EQ(tp_pages_in_use(), 0);
	CHECK_EQ(pp_free_slots(e[1]), 16);
	CHECK(file_is(f, 10000, 111));
	close(ro);
	close(wo);
	close(sv[0]);
	close(sv[1]);
	close(k[0]);
	close(k[1]);
	pp_close(e[0]);
	pp_close(e[1]);
	close(f);
}

/* No reader left on the pipe: EPIPE, SIGPIPE unless PP_NOSIGPIPE, and not
 * a byte taken from the descriptor. */
static void errors_epipe(void)
{
	struct pp_end *e[2];
	sigset_t old;
	int f = tmp_file(10000, 121), sv[2];
	CHECK(f >= 0);
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	CHECK_EQ(write(sv[1], "abc", 3), 3);
	for (int nosig = 0; nosig < 2; nosig++) {
		CHECK_EQ(pp_pipe(e, nosig ? PP_NOSIGPIPE : 0), 0);
		pp_close(e[0]);
		off_t off = 100;
		tp_sigpipe_block(&old);
		CHECK_ERR(pp_splice_from_fd(f, &off, e[1], 10, 0), EPIPE);
		CHECK_EQ(tp_sigpipe_taken(), !nosig);
		CHECK_ERR(pp_splice_from_fd(f, NULL, e[1], 10, PP_SPLICE_NONBLOCK), EPIPE);
		CHECK_EQ(tp_sigpipe_taken(), !nosig);
		CHECK_ERR(pp_splice_from_fd(sv[0], NULL, e[1], 10, 0), EPIPE);
		CHECK_EQ(tp_sigpipe_taken(), !nosig);
		tp_sigpipe_restore(&old);
		CHECK_EQ(off, 100);
		CHECK_EQ(lseek(f, 0, SEEK_CUR), 0);
		CHECK_EQ(fd_nread(sv[0]), 3);
		pp_close(e[1]);
	}
	/* Ignored: EPIPE and the process lives. */
	CHECK_EQ(pp_pipe(e, 0), 0);
	pp_close(e[0]);
	signal(SIGPIPE, SIG_IGN);
	CHECK_ERR(pp_splice_from_fd(f, NULL, e[1], 10, 0), EPIPE);
	signal(SIGPIPE, SIG_DFL);
	pp_close(e[1]);
	close(sv[0]);
	close(sv[1]);
	close(f);
}

/* PP_SPLICE_NONBLOCK: EAGAIN on a full pipe (from_fd) without touching the
 * descriptor, on an empty one with a writer (to_fd); 0 at end of file. */
static void errors_nonblock_and_eof(void)
{
	struct pp_end *e[2];
	int f = tmp_file(100000, 131), sv[2];
	CHECK(f >= 0);
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	CHECK_EQ(write(sv[1], "abc", 3), 3);
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pp_free_slots(e[1]), 16);
	off_t off = 4096;
	CHECK_ERR(pp_splice_from_fd(f, &off, e[1], 10, PP_SPLICE_NONBLOCK), EAGAIN);
	CHECK_EQ(off, 4096);
	CHECK_ERR(pp_splice_from_fd(f, NULL, e[1], 10, PP_SPLICE_NONBLOCK), EAGAIN);
	CHECK_EQ(lseek(f, 0, SEEK_CUR), 0);
	CHECK_ERR(pp_splice_from_fd(sv[0], NULL, e[1], 10, PP_SPLICE_NONBLOCK), EAGAIN);
	CHECK_EQ(fd_nread(sv[0]), 3);
	CHECK_EQ(pp_nread(e[0]), 65536);
	CHECK_EQ(tp_pages_in_use(), 16);
	/* Empty, writer open. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK_EQ(pp_splice_to_fd(e[0], null, NULL, BIG_LEN, 0), 65536);
	CHECK_ERR(pp_splice_to_fd(e[0], null, NULL, 10, PP_SPLICE_NONBLOCK), EAGAIN);
	CHECK_ERR(pp_splice_to_fd(e[0], sv[0], NULL, 10, PP_SPLICE_NONBLOCK), EAGAIN);
	off = 0;
	CHECK_ERR(pp_splice_to_fd(e[0], f, &off, 10, PP_SPLICE_NONBLOCK), EAGAIN);
	CHECK_EQ(off, 0);
	/* Empty, no writer: end of file, waiting or not. */
	pp_close(e[1]);
	CHECK_EQ(pp_splice_to_fd(e[0], sv[0], NULL, 10, 0), 0);
	CHECK_EQ(pp_splice_to_fd(e[0], sv[0], NULL, 10, PP_SPLICE_NONBLOCK), 0);
	CHECK_EQ(pp_splice_to_fd(e[0], f, &off, 10, 0), 0);
	CHECK_EQ(off, 0);
	CHECK_EQ(fd_nread(sv[1]), 0);
	CHECK(file_is(f, 100000, 131));
	pp_close(e[0]);
	close(null);
	close(sv[0]);
	close(sv[1]);
	close(f);
}

/* A pool bound: the splice gets the pages there are, then ENOMEM. */
static void pool_limit(void)
{
	struct pp_end *e[2];
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	CHECK(zero >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	long old = pp_pool_setlimit(2);
	CHECK_EQ(old, 0);
	CHECK_EQ(pp_splice_from_fd(zero, NULL, e[1], 65536, 0), 8192);
	CHECK_ERR(pp_splice_from_fd(zero, NULL, e[1], 65536, 0), ENOMEM);
	CHECK_EQ(pp_nread(e[0]), 8192);
	pp_pool_setlimit(old);
	CHECK_EQ(pp_splice_from_fd(zero, NULL, e[1], 65536, 0), 65536 - 8192);
	pp_close(e[0]);
	pp_close(e[1]);
	close(zero);
}

int main(void)
{
	t_around_cases(count_fds_before, nothing_left_after);
	RUN(errors_arguments);
	RUN(errors_epipe);
	RUN(errors_nonblock_and_eof);
	RUN(pool_limit);
	return T_DONE();
}
