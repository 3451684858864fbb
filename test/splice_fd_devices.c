/*
 * splice_fd_devices.c - pp_splice_from_fd and pp_splice_to_fd with
 * character devices as the descriptor: /dev/null, /dev/zero, /dev/full
 * (ENOSPC, nothing taken from the pipe), and a pseudo-terminal.
 * After every case: no page of the pool in use and no descriptor leaked
 * (splice_fd.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice_fd.h"
#include <termios.h>

static void devices(void)
{
	struct pp_end *e[2];
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
	CHECK(null >= 0 && zero >= 0 && full >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	/* /dev/zero fills every slot; then the pipe is full. */
	CHECK_EQ(pp_splice_from_fd(zero, NULL, e[1], BIG_LEN, 0), 65536);
	CHECK_ERR(pp_splice_from_fd(zero, NULL, e[1], 1, PP_SPLICE_NONBLOCK), EAGAIN);
	static unsigned char b[65536];
	memset(b, 0xee, sizeof b);
	CHECK_EQ(pp_read(e[0], b, 1000), 1000);
	size_t nz = 0;
	for (size_t i = 0; i < 1000; i++)
		nz += b[i] != 0;
	CHECK_EQ(nz, 0);
	/* /dev/full: ENOSPC, nothing consumed. */
	CHECK_ERR(pp_splice_to_fd(e[0], full, NULL, 100, 0), ENOSPC);
	CHECK_EQ(pp_nread(e[0]), 64536);
	/* /dev/null takes what is asked, then everything. */
	CHECK_EQ(pp_splice_to_fd(e[0], null, NULL, 100, 0), 100);
	CHECK_EQ(pp_nread(e[0]), 64436);
	CHECK_EQ(pp_splice_to_fd(e[0], null, NULL, BIG_LEN, 0), 64436);
	CHECK_EQ(pp_nread(e[0]), 0);
	CHECK_EQ(tp_pages_in_use(), 0);
	/* /dev/null reads as end of file. */
	CHECK_EQ(pp_splice_from_fd(null, NULL, e[1], 100, 0), 0);
	CHECK_EQ(pp_nread(e[0]), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(null);
	close(zero);
	close(full);
}

static void pty(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		SKIP("posix_openpt failed");
	char *name = NULL;
	int s = -1;
	if (grantpt(m) == 0 && unlockpt(m) == 0 && (name = ptsname(m)) != NULL)
		s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	struct termios tio;
	if (s < 0 || tcgetattr(s, &tio)) {
		if (s >= 0)
			close(s);
		close(m);
		SKIP("no pseudo-terminal slave");
	}
	cfmakeraw(&tio);
	CHECK_EQ(tcsetattr(s, TCSANOW, &tio), 0);
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, 0), 0);
	/* pipe -> master -> slave */
	CHECK(put_stream(e[1], 300, 101, 0));
	size_t sent = 0;
	for (int i = 0; i < 100 && sent < 300; i++) {
		ssize_t n = pp_splice_to_fd(e[0], m, NULL, 300, 0);
		CHECK(n > 0);
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	CHECK_EQ(sent, 300);
	CHECK_EQ(set_nonblock(s, 1), 0);
	CHECK(fd_take_verify(s, 300, 101, 0));
	/* slave -> master -> pipe */
	unsigned char buf[300];
	tp_fill(buf, sizeof buf, 102, 0);
	CHECK_EQ(write(s, buf, sizeof buf), sizeof buf);
	size_t got = 0;
	for (int i = 0; i < 100 && got < 300; i++) {
		struct pollfd p = { m, POLLIN, 0 };
		if (poll(&p, 1, 2000) != 1)
			break;
		ssize_t n = pp_splice_from_fd(m, NULL, e[1], 300 - got, 0);
		CHECK(n > 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	CHECK_EQ(got, 300);
	CHECK(take_verify(e[0], got, 102, 0));
	pp_close(e[0]);
	pp_close(e[1]);
	close(s);
	close(m);
}

int main(void)
{
	t_around_cases(count_fds_before, nothing_left_after);
	RUN(devices);
	RUN(pty);
	return T_DONE();
}
