/*
 * splice_fd_socket.c - pp_splice_from_fd and pp_splice_to_fd on AF_UNIX
 * stream sockets: both ways with a thread on the other side; a short
 * write into a full non-blocking socket leaves exactly the rest in the
 * pipe, in order; EAGAIN from an empty non-blocking socket; the socket's
 * own O_NONBLOCK decides whether the descriptor side blocks; a closed peer
 * gives EPIPE plus the kernel's SIGPIPE one way and 0 the other.
 * After every case: no page of the pool in use and no descriptor leaked
 * (splice_fd.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice_fd.h"

/* A socket both ways, with a thread at the other end. */
static void socket_stream_both_ways(void)
{
	uint32_t rs = 0x5eed;
	int sv[2];
	size_t total = (size_t)t_scaled(2 << 20);
	pthread_t t;
	/* socket -> pipe */
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	struct feeder f = { .fd = sv[1], .seed = 51, .total = total, .rs = 9, .how = 1 };
	CHECK_EQ(pthread_create(&t, NULL, feeder_main, &f), 0);
	CHECK_EQ(from_stream(sv[0], 51, &rs), total);
	pthread_join(t, NULL);
	CHECK_EQ(f.err, 0);
	close(sv[0]);
	close(sv[1]);
	/* pipe -> socket */
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	struct drainer d = { .fd = sv[1], .seed = 52 };
	CHECK_EQ(pthread_create(&t, NULL, drainer_main, &d), 0);
	to_stream(sv[0], total, 52, &rs);
	shutdown(sv[0], SHUT_WR);
	pthread_join(t, NULL);
	CHECK_EQ(d.got, total);
	CHECK_EQ(d.bad, 0);
	close(sv[0]);
	close(sv[1]);
}

/* A non-blocking socket that fills up: each call writes what the socket
 * takes and leaves the rest at the front of the pipe; the socket's bytes
 * followed by the pipe's are what was written. */
static void socket_short_write(void)
{
	int sv[2], small = 4096;
	struct pp_end *e[2];
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
	CHECK_EQ(set_nonblock(sv[0], 1), 0);
	CHECK_EQ(set_nonblock(sv[1], 1), 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	const size_t total = 300000;
	size_t written = 0, sent = 0, checked = 0;
	int shorts = 0, eagains = 0, rounds = 0;
	while (checked < total && rounds++ < 10000) {
		size_t add = min2(65536 - (written - sent), total - written);
		written += put_some(e[1], add, 61, written);
		size_t have = written - sent;
		if (have) {
			ssize_t n = pp_splice_to_fd(e[0], sv[0], NULL, 1u << 20, 0);
			if (n > 0) {
				CHECK((size_t)n <= have);
				shorts += (size_t)n < have;
				sent += (size_t)n;
			} else {
				CHECK(n == -1 && errno == EAGAIN);
				eagains++;
			}
			CHECK_EQ(pp_nread(e[0]), written - sent);
			if (n > 0 || errno != EAGAIN)
				continue;
		}
		/* The socket is full (or we are done): what it got so far is
		 * exactly the stream up to what the pipe let go of. */
		int q = fd_nread(sv[1]);
		CHECK_EQ(q, sent - checked);
		if (!fd_take_verify(sv[1], sent - checked, 61, checked)) {
			CHECK(0);
			break;
		}
		checked = sent;
	}
	CHECK_EQ(checked, total);
	CHECK(shorts > 0);
	CHECK(eagains > 0);
	CHECK_EQ(pp_nread(e[0]), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(sv[0]);
	close(sv[1]);
}

/* An empty non-blocking socket: EAGAIN, the pipe untouched, no page kept. */
static void socket_eagain_when_empty(void)
{
	int sv[2];
	struct pp_end *e[2];
	CHECK_EQ(open_pair(sv, SOCK_STREAM | SOCK_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_ERR(pp_splice_from_fd(sv[0], NULL, e[1], 4096, 0), EAGAIN);
	CHECK_ERR(pp_splice_from_fd(sv[0], NULL, e[1], 1u << 20, PP_SPLICE_NONBLOCK), EAGAIN);
	CHECK_EQ(pp_nread(e[0]), 0);
	CHECK_EQ(tp_pages_in_use(), 0);
	/* The failed calls gave their reserved slots back. */
	CHECK_EQ(pp_free_slots(e[1]), 16);
	char sink[65536];
	CHECK_EQ(pp_read(e[0], sink, sizeof sink), 65536);
	CHECK_EQ(write(sv[1], "0123456789", 10), 10);
	CHECK_EQ(pp_splice_from_fd(sv[0], NULL, e[1], 1u << 20, 0), 10);
	CHECK_EQ(pp_read(e[0], sink, sizeof sink), 10);
	CHECK(memcmp(sink, "0123456789", 10) == 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(sv[0]);
	close(sv[1]);
}

/* The descriptor side blocks by its own O_NONBLOCK only (the header's
 * contract): PP_SPLICE_NONBLOCK with a blocking, empty socket waits for it. */
struct late_write {
	int fd;
	long ms;
};

static void *late_write_main(void *arg)
{
	struct late_write *lw = arg;
	t_sleep_ms(lw->ms);
	(void)!write(lw->fd, "late!", 5);
	return NULL;
}

static void socket_blocks_by_its_own_flag(void)
{
	int sv[2];
	struct pp_end *e[2];
	pthread_t t;
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	struct late_write lw = { sv[1], 100 };
	CHECK_EQ(pthread_create(&t, NULL, late_write_main, &lw), 0);
	double t0 = t_now();
	CHECK_EQ(pp_splice_from_fd(sv[0], NULL, e[1], 100, PP_SPLICE_NONBLOCK), 5);
	CHECK(t_now() - t0 > 0.05);
	pthread_join(t, NULL);
	char b[5];
	CHECK_EQ(pp_read(e[0], b, 5), 5);
	CHECK(memcmp(b, "late!", 5) == 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(sv[0]);
	close(sv[1]);
}

/* A closed peer: into it, EPIPE and the kernel's SIGPIPE (seen while
 * blocked; nothing when ignored), the pipe keeps its bytes; out of it,
 * what was left, then 0. */
static void socket_closed_peer(void)
{
	int sv[2];
	struct pp_end *e[2];
	sigset_t old;
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(write(sv[1], "left over", 9), 9);
	close(sv[1]);
	CHECK(put_stream(e[1], 100, 71, 0));
	tp_sigpipe_block(&old);
	CHECK_ERR(pp_splice_to_fd(e[0], sv[0], NULL, 100, 0), EPIPE);
	CHECK(tp_sigpipe_taken());
	tp_sigpipe_restore(&old);
	CHECK_EQ(pp_nread(e[0]), 100);
	signal(SIGPIPE, SIG_IGN);
	CHECK_ERR(pp_splice_to_fd(e[0], sv[0], NULL, 100, PP_SPLICE_NONBLOCK), EPIPE);
	signal(SIGPIPE, SIG_DFL);
	CHECK_EQ(pp_nread(e[0]), 100);
	CHECK(take_verify(e[0], 100, 71, 0));
	CHECK_EQ(pp_splice_from_fd(sv[0], NULL, e[1], 100, 0), 9);
	CHECK_EQ(pp_splice_from_fd(sv[0], NULL, e[1], 100, 0), 0);
	CHECK_EQ(pp_splice_from_fd(sv[0], NULL, e[1], 100, PP_SPLICE_NONBLOCK), 0);
	char b[9];
	CHECK_EQ(pp_read(e[0], b, 9), 9);
	CHECK(memcmp(b, "left over", 9) == 0);
	CHECK_EQ(tp_pages_in_use(), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(sv[0]);
}

int main(void)
{
	t_around_cases(count_fds_before, nothing_left_after);
	RUN(socket_stream_both_ways);
	RUN(socket_short_write);
	RUN(socket_eagain_when_empty);
	RUN(socket_blocks_by_its_own_flag);
	RUN(socket_closed_peer);
	return T_DONE();
}
