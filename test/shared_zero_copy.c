/*
 * shared_zero_copy.c - the zero-copy calls on PP_SHARED pipes whose other
 * end is in another process: every byte delivered once, in order.
 *
 * Rules checked:
 *   - pp_peek in the reader process names the writer process's bytes in
 *     place (the shared pages, mapped read-only there), oldest first, one
 *     segment per buffer; pp_consume of any amount, a part of a page
 *     included, takes exactly that; through a four-page ring that wraps
 *     hundreds of times; consuming more than is there is EINVAL;
 *   - pp_splice_from_fd fills a shared pipe from a regular file, a sealed
 *     memfd (whose pages a shared pipe reads rather than maps), a socket
 *     and a kernel pipe, and the reader process gets the source's bytes;
 *   - pp_splice_to_fd empties a shared pipe a writer process fills into a
 *     regular file, a socket and a kernel pipe; a process blocked in it on
 *     a full descriptor keeps no other process of the pipe waiting (the
 *     descriptor's reader may need a pagepipe call first) or failing;
 *   - pp_splice and pp_tee between a shared pipe and a private one (both
 *     ways) and between two shared pipes, and pp_fanout from a shared or a
 *     private pipe to a private and a shared one, the shared pipes' other
 *     ends in other processes (the bytes are copied across memories):
 *     every byte arrives in every output, and tee leaves its source
 *     unchanged (the source's own reader gets every byte too);
 *   - pp_vmsplice into a shared pipe copies the caller's memory once into
 *     the pipe's pages (the reader process could not see the caller's):
 *     each segment that went in is released before the call returns, the
 *     caller may then change its memory and the reader process still gets
 *     the bytes as they were; the buffers are never appended to.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"
#include "harness/pipe.h"
#include "harness/procs.h"

#define SEED 31u
#define CHUNK 20000

static unsigned char buf[1 << 17];

/* ---- the processes at the other ends ----------------------------------- */

/* Write `total` stream bytes in random sizes to a pipe end or a
 * descriptor, then close it. */
struct feed {
	struct pp_end *e;  /* a shared write end, or NULL: fd */
	int fd;
	size_t total;
	struct pp_end *drop[4]; /* shared ends this process closes first */
	int dropfd[4];
};

static void drop_all(struct pp_end *const *e, const int *fd)
{
	for (int i = 0; i < 4; i++) {
		if (e[i])
			CHECK_EQ(pp_close(e[i]), 0);
		if (fd[i] > 0)
			close(fd[i]);
	}
}

static void feeder(void *arg)
{
	struct feed *f = arg;
	static unsigned char wb[CHUNK];
	uint32_t rs = (uint32_t)f->total | 1;
	drop_all(f->drop, f->dropfd);
	for (size_t pos = 0; pos < f->total;) {
		size_t n = tp_chunk(wb, CHUNK, &rs, SEED, pos, f->total);
		if (f->e) {
			ssize_t r = pp_write(f->e, wb, n);
			CHECK_EQ(r, n);
			if (r != (ssize_t)n)
				break;
		} else {
			struct tp t = { 1, { -1, f->fd }, { NULL, NULL }, 0 };
			CHECK_EQ(tp_write_all(&t, wb, n), 0);
		}
		pos += n;
		t_progress();
	}
	if (f->e)
		CHECK_EQ(pp_close(f->e), 0);
	else
		close(f->fd);
}

/* Read a pipe end or a descriptor to end of file; check it is the stream
 * of `total` bytes. */
static void drainer(void *arg)
{
	struct feed *f = arg;
	drop_all(f->drop, f->dropfd);
	size_t got = 0;
	long bad = -1;
	for (;;) {
		ssize_t r = f->e ? pp_read(f->e, buf, sizeof buf) : read(f->fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			CHECK_EQ(r, 0);
			break;
		}
		tp_take(buf, (size_t)r, SEED, &got, &bad);
		t_progress();
	}
	if (got != f->total || bad >= 0) {
		fprintf(stderr, "drainer: %zu of %zu bytes, first bad at %ld\n", got, f->total, bad);
		t_case_failed = 1;
	}
	if (f->e)
		CHECK_EQ(pp_close(f->e), 0);
	else
		close(f->fd);
}

/* Read to EOF in this process, checking the stream. */
static void read_check(struct pp_end *e, size_t total)
{
	struct feed f = { e, -1, total, { 0 }, { 0 } };
	drainer(&f);
}

/* ---- peek and consume ---------------------------------------------------- */

static void peek_consume_in_place(void)
{
	struct pp_end *e[2];
	size_t total = (size_t)t_scaled_san(2 << 20);
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	CHECK_EQ(pp_setsize(e[1], 4 * PP_PAGE_SIZE), 4 * PP_PAGE_SIZE);
	struct feed f = { e[1], -1, total, { e[0] }, { 0 } };
	pid_t pid = t_child(feeder, &f);
	CHECK_EQ(pp_close(e[1]), 0);
	size_t pos = 0;
	long bad = -1;
	uint32_t rs = 4242;
	long partial = 0, calls = 0;
	struct iovec iov[16];
	for (size_t have; (have = tp_peek_check(e[0], iov, 16, SEED, pos, &bad)) > 0;) {
		CHECK(have <= (size_t)pp_nread(e[0]));
		size_t c;
		switch (tp_rand(&rs) % 3) {
		case 0:
			c = have;
			break;
		case 1: /* a part of the first buffer */
			c = 1 + tp_rand(&rs) % iov[0].iov_len;
			break;
		default:
			c = 1 + tp_rand(&rs) % have;
			break;
		}
		partial += c < iov[0].iov_len;
		/* More than the pipe can ever hold (the feeder may add bytes
		 * between a pp_nread and the consume, so nread + 1 would race). */
		if (calls++ == 10)
			CHECK_ERR(pp_consume(e[0], total + 1), EINVAL);
		CHECK_EQ(pp_consume(e[0], c), c);
		pos += c;
		t_progress();
	}
	if (pos != total || bad >= 0) {
		fprintf(stderr, "peek: %zu of %zu bytes, first bad at %ld\n", pos, total, bad);
		t_case_failed = 1;
	}
	CHECK(partial > 0);
	CHECK_EQ(pp_close(e[0]), 0);
	t_reap(pid);
}

/* ---- splicing to and from descriptors ------------------------------------ */

enum { FD_FILE, FD_MEMFD, FD_SOCKET, FD_KPIPE, FD_KINDS };
static const char *const fd_name[] = { "file", "sealed memfd", "socket", "kernel pipe" };

/* A pair of descriptors: [0] to read, [1] to write. */
static int fd_pair(int kind, int fd[2])
{
	switch (kind) {
	case FD_FILE:
		fd[0] = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		fd[1] = fd[0] < 0 ? -1 : dup(fd[0]);
		return fd[1] < 0 ? -1 : 0;
	case FD_MEMFD:
		fd[0] = memfd_create("shared_zero_copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		fd[1] = fd[0] < 0 ? -1 : dup(fd[0]);
		return fd[1] < 0 ? -1 : 0;
	case FD_SOCKET:
		return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd);
	default:
		return pipe2(fd, O_CLOEXEC);
	}
}

/* Fill a file with the stream (and seal a memfd against shrinking). */
static void file_fill(int kind, int fd, size_t total)
{
	uint32_t rs = 1;
	for (size_t pos = 0; pos < total;) {
		size_t n = tp_chunk(buf, CHUNK, &rs, SEED, pos, total);
		CHECK_EQ(pwrite(fd, buf, n, (off_t)pos), n);
		pos += n;
	}
	if (kind == FD_MEMFD)
		CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
}

struct splicer {
	struct pp_end *e;
	int fd;
	struct pp_end *drop[4];
	int dropfd[4];
};

static void splice_in_child(void *arg)
{
	struct splicer *s = arg;
	drop_all(s->drop, s->dropfd);
	ssize_t r;
	while ((r = pp_splice_from_fd(s->fd, NULL, s->e, 65536, 0)) > 0)
		t_progress();
	CHECK_EQ(r, 0);
	CHECK_EQ(pp_close(s->e), 0);
	close(s->fd);
}

/* pp_splice_to_fd from a shared read end to a descriptor, to the end. */
static void splice_out_child(void *arg)
{
	struct splicer *s = arg;
	drop_all(s->drop, s->dropfd);
	ssize_t r;
	while ((r = pp_splice_to_fd(s->e, s->fd, NULL, 65536, 0)) > 0)
		t_progress();
	CHECK_EQ(r, 0);
	CHECK_EQ(pp_close(s->e), 0);
	close(s->fd);
}

static void splice_from_fd_into_shared(void)
{
	size_t total = (size_t)t_scaled_san(2 << 20) + 123;
	for (int kind = 0; kind < FD_KINDS; kind++) {
		struct pp_end *e[2];
		int fd[2];
		pid_t feed = -1;
		CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
		CHECK_EQ(fd_pair(kind, fd), 0);
		if (kind == FD_FILE || kind == FD_MEMFD) {
			file_fill(kind, fd[1], total);
			close(fd[1]);
			fd[1] = -1;
		} else {
			struct feed f = { NULL, fd[1], total, { e[0], e[1] }, { fd[0] } };
			feed = t_child(feeder, &f);
			close(fd[1]);
		}
		struct splicer s = { e[1], fd[0], { e[0] }, { 0 } };
		pid_t sp = t_child(splice_in_child, &s);
		close(fd[0]);
		CHECK_EQ(pp_close(e[1]), 0);
		fprintf(stderr, "  from a %s\n", fd_name[kind]);
		read_check(e[0], total);
		t_reap(sp);
		t_reap(feed);
	}
}

static void splice_to_fd_from_shared(void)
{
	size_t total = (size_t)t_scaled_san(2 << 20) + 321;
	for (int kind = 0; kind < FD_KINDS; kind++) {
		if (kind == FD_MEMFD)
			continue;
		struct pp_end *e[2];
		int fd[2];
		pid_t drain = -1;
		CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
		CHECK_EQ(fd_pair(kind, fd), 0);
		struct feed f = { e[1], -1, total, { e[0] }, { fd[0], fd[1] } };
		pid_t wr = t_child(feeder, &f);
		CHECK_EQ(pp_close(e[1]), 0);
		if (kind != FD_FILE) {
			struct feed d = { NULL, fd[0], total, { e[0] }, { fd[1] } };
			drain = t_child(drainer, &d);
			close(fd[0]);
			fd[0] = -1;
		}
		fprintf(stderr, "  to a %s\n", fd_name[kind]);
		ssize_t r;
		size_t moved = 0;
		while ((r = pp_splice_to_fd(e[0], fd[1], NULL, 65536, 0)) > 0) {
			moved += (size_t)r;
			t_progress();
		}
		CHECK_EQ(r, 0);
		CHECK_EQ(moved, total);
		CHECK_EQ(pp_close(e[0]), 0);
		close(fd[1]);
		if (kind == FD_FILE) {
			size_t got = 0;
			long bad = -1;
			ssize_t k;
			while ((k = pread(fd[0], buf, sizeof buf, (off_t)got)) > 0)
				tp_take(buf, (size_t)k, SEED, &got, &bad);
			CHECK_EQ(got, total);
			CHECK_EQ(bad, -1);
			close(fd[0]);
		}
		t_reap(wr);
		t_reap(drain);
	}
}

/* Whether process pid sleeps in system call nr: /proc/PID/stat's state
 * and /proc/PID/syscall's number. */
static int asleep_in(pid_t pid, long nr)
{
	char path[64], line[512];
	int in = 0, sleeping = 0;
	snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
	FILE *f = fopen(path, "r");
	if (f) {
		in = fgets(line, sizeof line, f) && strtol(line, NULL, 10) == nr &&
		     strncmp(line, "running", 7) != 0;
		fclose(f);
	}
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f) {
		char *p = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
		sleeping = p && p[1] == ' ' && p[2] == 'S';
		fclose(f);
	}
	return in && sleeping;
}

/*
 * A process blocked in pp_splice_to_fd on a full descriptor must not keep
 * the other processes of the shared pipe out: the descriptor's reader may
 * itself be one of them, and must be able to make pagepipe calls (here:
 * close its inherited end) before it reads, and the writer must not fail
 * with EIO ("lock held for more than a second") while the splicer waits.
 * A kernel pipe: a reader blocked on its sink holds the pipe lock, and
 * the others wait (no error), but close(2) of a dup never needs the lock.
 */
static void splice_to_full_fd_lets_others_in(void)
{
	size_t total = (size_t)t_scaled_san(1 << 20) + 1000;
	struct pp_end *e[2];
	int kp[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	CHECK_EQ(pipe2(kp, O_CLOEXEC), 0);
	struct feed f = { e[1], -1, total, { e[0] }, { kp[0], kp[1] } };
	pid_t wr = t_child(feeder, &f);
	CHECK_EQ(pp_close(e[1]), 0);
	struct splicer sp = { NULL, kp[1], { NULL }, { kp[0] } };
	pid_t spl;
	{
		/* the splicer: a child holding the read end and the sink */
		struct pp_end *mine = pp_dup(e[0]);
		CHECK(mine != NULL);
		sp.e = mine;
		spl = t_child(splice_out_child, &sp);
		CHECK_EQ(pp_close(mine), 0);
	}
	close(kp[1]);
	/* wait until the splicer sleeps on the full sink: in writev(2) (the
	 * only sleep of a kernel pipe's writer when nobody else uses it) if it
	 * writes with the lock held, in poll(2) if it waits with it dropped */
	double end = t_now() + 10;
	int blocked = 0;
	while (!(blocked = asleep_in(spl, SYS_writev) || asleep_in(spl, SYS_poll)) &&
	       t_now() < end)
		t_sleep_ms(1);
	double t0 = t_now();
	CHECK_EQ(pp_close(e[0]), 0);
	double took = t_now() - t0;
	if (took > 0.5) {
		fprintf(stderr, "pp_close waited %.2f s for a splicer blocked on its sink\n", took);
		t_case_failed = 1;
	}
	struct feed d = { NULL, kp[0], total, { NULL }, { 0 } };
	drainer(&d);
	t_reap(spl);
	t_reap(wr);
	if (!blocked && !t_case_failed)
		SKIP("the splicer was never seen asleep on its sink");
}

/* ---- between pipes: shared and private ----------------------------------- */

enum { OP_SPLICE, OP_TEE, OP_FANOUT };
static const char *const op_name[] = { "pp_splice", "pp_tee", "pp_fanout" };

/* Read exactly n bytes of the stream from a private read end now. */
static void take_now(struct pp_end *e, size_t n, size_t *got, long *bad)
{
	while (n) {
		ssize_t r = pp_read(e, buf, n < sizeof buf ? n : sizeof buf);
		if (r <= 0) {
			fprintf(stderr, "read %zd of %zu expected\n", r, n);
			t_case_failed = 1;
			return;
		}
		tp_take(buf, (size_t)r, SEED, got, bad);
		n -= (size_t)r;
	}
}

/*
 * op from a source pipe (shared: a child writes it; private: this process
 * does, a chunk whenever it is empty) to a destination (shared: a child
 * reads it; private: this process reads what arrived after each call); a
 * fan-out goes to the destination and a second one of the other kind.
 */
static void between(int op, int src_shared, int dst_shared)
{
	size_t total = (size_t)t_scaled_san(1 << 20) + 77;
	struct pp_end *s[2] = { NULL, NULL }, *d[2] = { NULL, NULL }, *d2[2] = { NULL, NULL };
	pid_t wr = -1, rd = -1;
	/* the shared pipes before the children, the private ones after: a
	 * child could never free a private pipe it inherited (its handles are
	 * closed there), and memcheck would count it lost */
	if (src_shared)
		CHECK_EQ(pp_pipe(s, PP_SHARED), 0);
	if (dst_shared)
		CHECK_EQ(pp_pipe(d, PP_SHARED), 0);
	else if (op == OP_FANOUT)
		CHECK_EQ(pp_pipe(d2, PP_SHARED), 0);
	struct pp_end *sd = dst_shared ? d[0] : d2[0]; /* the shared output */
	struct pp_end *sdw = dst_shared ? d[1] : d2[1];
	if (src_shared) {
		struct feed f = { s[1], -1, total, { s[0], sd, sdw }, { 0 } };
		wr = t_child(feeder, &f);
		CHECK_EQ(pp_close(s[1]), 0);
		s[1] = NULL;
	}
	if (sd) {
		struct feed f = { sd, -1, total, { sdw, src_shared ? s[0] : NULL }, { 0 } };
		rd = t_child(drainer, &f);
		CHECK_EQ(pp_close(sd), 0);
	}
	if (!src_shared)
		CHECK_EQ(pp_pipe(s, 0), 0);
	if (!dst_shared)
		CHECK_EQ(pp_pipe(d, 0), 0);
	else if (op == OP_FANOUT)
		CHECK_EQ(pp_pipe(d2, 0), 0);
	struct pp_end *pd = dst_shared ? d2[0] : d[0]; /* the private output */
	size_t wpos = 0, got = 0, src_got = 0;
	long bad = -1, src_bad = -1;
	uint32_t rs = 99;
	for (;;) {
		if (!src_shared && s[1] && pp_nread(s[0]) == 0) {
			if (wpos == total) {
				CHECK_EQ(pp_close(s[1]), 0);
				s[1] = NULL;
			} else {
				size_t n = tp_chunk(buf, CHUNK, &rs, SEED, wpos, total);
				CHECK_EQ(pp_write(s[1], buf, n), n);
				wpos += n;
			}
		}
		size_t len = 1 + tp_rand(&rs) % 65536;
		ssize_t k;
		if (op == OP_SPLICE) {
			k = pp_splice(s[0], d[1], len, 0);
		} else if (op == OP_TEE) {
			k = pp_tee(s[0], d[1], len, 0);
		} else {
			struct pp_end *outs[2] = { d[1], d2[1] };
			k = pp_fanout(s[0], outs, 2, len, 0);
		}
		if (k <= 0) {
			CHECK_EQ(k, 0);
			break;
		}
		CHECK(k <= (ssize_t)len);
		if (pd)
			take_now(pd, (size_t)k, &got, &bad);
		if (op == OP_TEE)
			take_now(s[0], (size_t)k, &src_got, &src_bad);
		t_progress();
	}
	if (pd && (got != total || bad >= 0)) {
		fprintf(stderr, "private output: %zu of %zu bytes, first bad at %ld\n", got, total,
		        bad);
		t_case_failed = 1;
	}
	if (op == OP_TEE && (src_got != total || src_bad >= 0)) {
		fprintf(stderr, "tee's source: %zu of %zu bytes, first bad at %ld\n", src_got,
		        total, src_bad);
		t_case_failed = 1;
	}
	CHECK_EQ(pp_close(s[0]), 0);
	if (s[1])
		CHECK_EQ(pp_close(s[1]), 0);
	CHECK_EQ(pp_close(d[1]), 0);
	if (op == OP_FANOUT)
		CHECK_EQ(pp_close(d2[1]), 0);
	if (pd)
		CHECK_EQ(pp_close(pd), 0);
	t_reap(wr);
	t_reap(rd);
}

static void splice_tee_shared_private(void)
{
	for (int op = OP_SPLICE; op <= OP_TEE; op++) {
		fprintf(stderr, "  %s shared -> private, private -> shared\n", op_name[op]);
		between(op, 1, 0);
		between(op, 0, 1);
	}
}

static void splice_tee_shared_shared(void)
{
	for (int op = OP_SPLICE; op <= OP_TEE; op++)
		between(op, 1, 1);
}

static void fanout_to_private_and_shared(void)
{
	between(OP_FANOUT, 1, 1);
	between(OP_FANOUT, 1, 0);
	between(OP_FANOUT, 0, 1);
}

/* ---- vmsplice into a shared pipe ---------------------------------------- */

struct rel {
	int calls;
	size_t bytes;
};

static void on_release(void *arg, const struct iovec *seg)
{
	struct rel *r = arg;
	r->calls++;
	r->bytes += seg->iov_len;
}

/* The reader process: 10 + 5000 + 3 bytes, in four buffers (the vmsplice'd
 * ones never merged into), then end of file. */
static void vmsplice_reader(void *arg)
{
	struct pp_end *rd = arg;
	size_t want[] = { 10, 4096, 904, 3 };
	size_t pos = 0;
	for (int i = 0; i < 4; i++) {
		struct iovec iov[8];
		ssize_t k = pp_peek(rd, iov, 1);
		CHECK_EQ(k, 1);
		if (k != 1)
			break;
		CHECK_EQ(iov[0].iov_len, want[i]);
		CHECK_EQ(tp_verify(iov[0].iov_base, iov[0].iov_len, SEED, pos), -1);
		CHECK_EQ(pp_consume(rd, iov[0].iov_len), (ssize_t)iov[0].iov_len);
		pos += iov[0].iov_len;
	}
	unsigned char b[8];
	CHECK_EQ(pp_read(rd, b, sizeof b), 0);
	CHECK_EQ(pp_close(rd), 0);
}

static void vmsplice_into_shared_copies(void)
{
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_SHARED), 0);
	static unsigned char a[10], b[5000], c[3];
	tp_fill(a, sizeof a, SEED, 0);
	tp_fill(b, sizeof b, SEED, 10);
	tp_fill(c, sizeof c, SEED, 5010);
	struct rel r = { 0, 0 };
	struct iovec iov[3] = { { a, sizeof a }, { NULL, 0 }, { b, sizeof b } };
	CHECK_EQ(pp_vmsplice(e[1], iov, 3, 0, on_release, &r), 5010);
	/* released at once, each segment that went in (not the empty one) */
	CHECK_EQ(r.calls, 2);
	CHECK_EQ(r.bytes, 5010);
	/* the caller's memory is its own again: the pipe holds copies */
	memset(a, 0xa5, sizeof a);
	memset(b, 0x5a, sizeof b);
	CHECK_EQ(pp_write(e[1], c, sizeof c), 3); /* a buffer of its own */
	CHECK_EQ(pp_close(e[1]), 0);
	pid_t pid = t_child(vmsplice_reader, e[0]);
	CHECK_EQ(pp_close(e[0]), 0);
	t_reap(pid);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	RUN(peek_consume_in_place);
	RUN(splice_from_fd_into_shared);
	RUN(splice_to_fd_from_shared);
	RUN(splice_to_full_fd_lets_others_in);
	RUN(splice_tee_shared_private);
	RUN(splice_tee_shared_shared);
	RUN(fanout_to_private_and_shared);
	RUN(vmsplice_into_shared_copies);
	return T_DONE();
}
