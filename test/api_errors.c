/*
 * api_errors.c - argument checking and handles.
 *
 * Every call given a NULL end fails with EBADF (pp_dup returns NULL); a
 * read on a write end and a write on a read end fail with EBADF (checked
 * before anything else, as the kernel does); pp_pipe rejects unknown flags
 * (EINVAL) and a NULL array (EFAULT); a NULL buffer with a nonzero count is
 * EFAULT and consumes nothing; readv/writev reject iovcnt < 0 or > IOV_MAX
 * and a segment longer than SSIZE_MAX with EINVAL, and take IOV_MAX and 0
 * segments; kernel results are compared wherever there is a kernel
 * equivalent.  Also: pp_dup handles see the same pipe (pp_events,
 * pp_nread, pp_getsize) and keep the end open, and failed calls leave the
 * pipe working.
 */
#include "harness/harness.h"
#include "harness/helpers.h"

/* NULL end: EBADF everywhere. */
static void null_end_is_ebadf(void)
{
	char buf[16] = { 0 };
	struct iovec iov = { buf, sizeof buf };
	CHECK_ERR(pp_close(NULL), EBADF);
	CHECK_ERR(pp_read(NULL, buf, sizeof buf), EBADF);
	CHECK_ERR(pp_write(NULL, buf, sizeof buf), EBADF);
	CHECK_ERR(pp_read(NULL, buf, 0), EBADF);  /* even for 0 bytes, */
	CHECK_ERR(pp_write(NULL, buf, 0), EBADF); /* like read(-1, b, 0) */
	CHECK_ERR(pp_readv(NULL, &iov, 1), EBADF);
	CHECK_ERR(pp_writev(NULL, &iov, 1), EBADF);
	CHECK_ERR(pp_readv(NULL, &iov, -1), EBADF);
	CHECK_ERR(pp_nread(NULL), EBADF);
	CHECK_ERR(pp_getsize(NULL), EBADF);
	CHECK_ERR(pp_setsize(NULL, 8192), EBADF);
	CHECK_ERR(pp_getfl(NULL), EBADF);
	CHECK_ERR(pp_setfl(NULL, PP_NONBLOCK), EBADF);
	CHECK_ERR(pp_events(NULL), EBADF);
	CHECK_ERR(pp_fd(NULL), EBADF);
	errno = 0;
	CHECK(pp_dup(NULL) == NULL);
	CHECK_EQ(errno, EBADF);
	/* The kernel agrees on the 0-byte cases. */
	CHECK_ERR(read(-1, buf, 0), EBADF);
	CHECK_ERR(write(-1, buf, 0), EBADF);
}

/* Reading a write end or writing a read end: EBADF, before any other
 * check (NULL buffer, bad iovcnt, zero count). */
static void sc_wrong_end(struct tp_rec *r, int kernel)
{
	struct tp t;
	char buf[16] = { 0 };
	struct iovec iov = { buf, sizeof buf };
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	/* Swap the ends: tp_read now reads the write end, and so on. */
	int fd0 = t.fd[0];
	struct pp_end *e0 = t.e[0];
	t.fd[0] = t.fd[1];
	t.e[0] = t.e[1];
	t.fd[1] = fd0;
	t.e[1] = e0;
	TP_REC(r, "read write end", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "write read end", tp_res(tp_write(&t, buf, sizeof buf)));
	TP_REC(r, "readv write end", tp_res(tp_readv(&t, &iov, 1)));
	TP_REC(r, "writev read end", tp_res(tp_writev(&t, &iov, 1)));
	TP_REC(r, "read write end, 0 bytes", tp_res(tp_read(&t, buf, 0)));
	TP_REC(r, "write read end, 0 bytes", tp_res(tp_write(&t, buf, 0)));
	TP_REC(r, "read write end, NULL", tp_res(tp_read(&t, NULL, 5)));
	TP_REC(r, "write read end, NULL", tp_res(tp_write(&t, NULL, 5)));
	TP_REC(r, "readv write end, bad iovcnt", tp_res(tp_readv(&t, &iov, -1)));
	TP_REC(r, "writev read end, bad iovcnt", tp_res(tp_writev(&t, &iov, IOV_MAX + 1)));
	/* Swap back: the pipe still works. */
	t.fd[1] = t.fd[0];
	t.e[1] = t.e[0];
	t.fd[0] = fd0;
	t.e[0] = e0;
	TP_REC(r, "write", tp_res(tp_write(&t, "ok", 2)));
	TP_REC(r, "read", tp_res(tp_read(&t, buf, sizeof buf)));
	tp_close(&t);
	for (int i = 0; i < 10 && i < r->n; i++)
		CHECK_EQ(r->v[i], -EBADF);
	CHECK_EQ(r->v[10], 2);
	CHECK_EQ(r->v[11], 2);
}

static void wrong_end_is_ebadf(void)
{
	TP_BOTH(sc_wrong_end);
}

/* pp_pipe: unknown flags EINVAL (like pipe2), NULL array EFAULT. */
static void pipe_flag_and_array_errors(void)
{
	struct pp_end *e[2] = { NULL, NULL };
	static const int bad[] = { 0x40, PP_RDONLY, PP_WRONLY, 0x100, 0x40000000, -1,
	                           PP_NONBLOCK | 0x80 };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK_ERR(pp_pipe(e, bad[i]), EINVAL);
		CHECK(e[0] == NULL && e[1] == NULL); /* untouched */
	}
	int fds[2];
	CHECK_ERR(pipe2(fds, 0x8 | 0x10 | 0x100 | 0x40000000), EINVAL);
	CHECK_ERR(pp_pipe(NULL, 0), EFAULT);
	CHECK_ERR(pp_pipe(NULL, PP_NONBLOCK), EFAULT);
	CHECK_ERR(pipe(TP_HIDE((int *)NULL)), EFAULT);
	/* Every valid combination is accepted. */
	for (int fl = 0; fl < 8; fl++) {
		CHECK_EQ(pp_pipe(e, fl), 0);
		CHECK(e[0] != NULL && e[1] != NULL && e[0] != e[1]);
		CHECK_EQ(pp_close(e[0]), 0);
		CHECK_EQ(pp_close(e[1]), 0);
	}
}

/* NULL buffer with a nonzero count: EFAULT, and the data stays. */
static void sc_efault(struct tp_rec *r, int kernel)
{
	struct tp t;
	char buf[16];
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "write NULL", tp_res(tp_write(&t, NULL, 5)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "write NULL, 0 bytes", tp_res(tp_write(&t, NULL, 0)));
	TP_REC(r, "write", tp_res(tp_write(&t, "hello", 5)));
	TP_REC(r, "read NULL", tp_res(tp_read(&t, NULL, 5)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	struct iovec niov[2] = { { NULL, 3 }, { buf, 3 } };
	TP_REC(r, "readv NULL segment", tp_res(tp_readv(&t, niov, 2)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "writev NULL segment", tp_res(tp_writev(&t, niov, 2)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "read", tp_res(tp_read(&t, buf, sizeof buf)));
	CHECK(memcmp(buf, "hello", 5) == 0);
	tp_close(&t);
	CHECK_EQ(r->v[0], -EFAULT);
	CHECK_EQ(r->v[1], 0);
	CHECK_EQ(r->v[2], 0);
	CHECK_EQ(r->v[4], -EFAULT);
	CHECK_EQ(r->v[5], 5);
	CHECK_EQ(r->v[6], -EFAULT);
	CHECK_EQ(r->v[7], 5);
	CHECK_EQ(r->v[8], -EFAULT);
	CHECK_EQ(r->v[9], 5);
	CHECK_EQ(r->v[10], 5);
}

static void null_buffer_is_efault(void)
{
	TP_BOTH(sc_efault);
}

/* iovcnt and segment-length checks, against the kernel. */
static void sc_iovcnt(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[IOV_MAX + 1];
	static struct iovec iov[IOV_MAX + 1];
	for (int i = 0; i <= IOV_MAX; i++) {
		buf[i] = (char)i;
		iov[i].iov_base = buf + i;
		iov[i].iov_len = 1;
	}
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "writev -1", tp_res(tp_writev(&t, iov, -1)));
	TP_REC(r, "writev IOV_MAX+1", tp_res(tp_writev(&t, iov, IOV_MAX + 1)));
	TP_REC(r, "writev INT_MIN", tp_res(tp_writev(&t, iov, INT_MIN)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "writev 0", tp_res(tp_writev(&t, iov, 0)));
	TP_REC(r, "writev IOV_MAX", tp_res(tp_writev(&t, iov, IOV_MAX)));
	TP_REC(r, "readv -1", tp_res(tp_readv(&t, iov, -1)));
	TP_REC(r, "readv IOV_MAX+1", tp_res(tp_readv(&t, iov, IOV_MAX + 1)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	TP_REC(r, "readv 0", tp_res(tp_readv(&t, iov, 0)));
	memset(buf, 0x55, sizeof buf);
	TP_REC(r, "readv IOV_MAX", tp_res(tp_readv(&t, iov, IOV_MAX)));
	int ok = 1;
	for (int i = 0; i < IOV_MAX; i++)
		ok &= buf[i] == (char)i;
	TP_REC(r, "segments filled in order", ok);
	/* One segment longer than SSIZE_MAX. */
	struct iovec big[2] = { { buf, 10 }, { buf, (size_t)SSIZE_MAX + 1 } };
	TP_REC(r, "writev len > SSIZE_MAX", tp_res(tp_writev(&t, big, 2)));
	TP_REC(r, "write", tp_res(tp_write(&t, buf, 10)));
	TP_REC(r, "readv len > SSIZE_MAX", tp_res(tp_readv(&t, big, 2)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close(&t);
	const long E = -EINVAL;
	TP_WANT(r, kernel, E, E, E, 0, 0, IOV_MAX, E, E, IOV_MAX, 0, IOV_MAX, 1,
	        E, 10, E, 10);
}

static void iovcnt_checks_like_kernel(void)
{
	TP_BOTH(sc_iovcnt);
	/* pagepipe only (the kernel fails these with EFAULT from its address
	 * check first): lengths that each fit but sum past SSIZE_MAX. */
	struct pp_end *e[2];
	static char buf[16];
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	struct iovec sum[3] = {
		{ buf, 1 }, { buf, (size_t)SSIZE_MAX / 2 + 1 }, { buf, (size_t)SSIZE_MAX / 2 + 1 },
	};
	CHECK_ERR(pp_writev(e[1], sum, 3), EINVAL);
	CHECK_EQ(pp_nread(e[0]), 0);
	CHECK_EQ(pp_write(e[1], "abc", 3), 3);
	CHECK_ERR(pp_readv(e[0], sum, 3), EINVAL);
	CHECK_EQ(pp_nread(e[0]), 3);
	pp_close(e[0]);
	pp_close(e[1]);
}

/* NULL iovec array with a nonzero count: EFAULT like the kernel. */
static void sc_null_iov(struct tp_rec *r, int kernel)
{
	struct tp t;
	CHECK_EQ(tp_open(&t, kernel, PP_NONBLOCK), 0);
	TP_REC(r, "write", tp_res(tp_write(&t, "abc", 3)));
	TP_REC(r, "readv NULL, 1", tp_res(tp_readv(&t, NULL, 1)));
	TP_REC(r, "writev NULL, 1", tp_res(tp_writev(&t, NULL, 1)));
	TP_REC(r, "readv NULL, 0", tp_res(tp_readv(&t, NULL, 0)));
	TP_REC(r, "nread", tp_nread(&t, 0));
	tp_close(&t);
	TP_WANT(r, kernel, 3, -EFAULT, -EFAULT, 0, 3);
}

static void null_iov_is_efault(void)
{
	TP_BOTH(sc_null_iov);
}

/* pp_dup handles: the same pipe seen through each; the end stays open
 * until the last handle closes. */
static void dup_handles_share_the_end(void)
{
	struct pp_end *e[2];
	char buf[100];
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	struct pp_end *r2 = pp_dup(e[0]), *w2 = pp_dup(e[1]);
	CHECK(r2 && w2 && r2 != e[0] && w2 != e[1]);
	struct pp_end *r3 = pp_dup(r2); /* a dup of a dup */
	CHECK(r3 != NULL);
	CHECK_EQ(pp_write(w2, "abcdef", 6), 6);
	CHECK_EQ(pp_nread(e[0]), 6);
	CHECK_EQ(pp_nread(r3), 6);
	CHECK_EQ(pp_nread(w2), 6);
	CHECK_EQ(pp_events(r2), pp_events(e[0]));
	CHECK_EQ(pp_events(w2), pp_events(e[1]));
	CHECK_EQ(pp_events(r3), POLLIN | POLLRDNORM);
	CHECK_EQ(pp_setsize(r3, 8192), 8192);
	CHECK_EQ(pp_getsize(e[0]), 8192);
	CHECK_EQ(pp_getsize(w2), 8192);
	CHECK_EQ(pp_read(r3, buf, 2), 2);
	CHECK_EQ(pp_read(e[0], buf, 2), 2);
	CHECK(memcmp(buf, "cd", 2) == 0);
	/* Closing the first read handle is not the end of the read side. */
	CHECK_EQ(pp_close(e[0]), 0);
	CHECK_EQ(pp_write(e[1], "g", 1), 1);
	CHECK_EQ(pp_events(e[1]) & POLLERR, 0);
	CHECK_EQ(pp_close(r2), 0);
	CHECK_EQ(pp_read(r3, buf, sizeof buf), 3);
	CHECK(memcmp(buf, "efg", 3) == 0);
	/* The write side likewise. */
	CHECK_EQ(pp_close(e[1]), 0);
	CHECK_ERR(pp_read(r3, buf, sizeof buf), EAGAIN); /* w2 still open */
	CHECK_EQ(pp_events(r3) & POLLHUP, 0);
	CHECK_EQ(pp_close(w2), 0);
	CHECK_EQ(pp_read(r3, buf, sizeof buf), 0);
	CHECK_EQ(pp_events(r3), POLLHUP);
	CHECK_EQ(pp_close(r3), 0);
}

static void version_string(void)
{
	CHECK(pp_version() != NULL);
	if (pp_version())
		CHECK(strcmp(pp_version(), PAGEPIPE_VERSION) == 0);
}

int main(void)
{
	RUN(null_end_is_ebadf);
	RUN(wrong_end_is_ebadf);
	RUN(pipe_flag_and_array_errors);
	RUN(null_buffer_is_efault);
	RUN(iovcnt_checks_like_kernel);
	RUN(dup_handles_share_the_end);
	RUN(version_string);
	RUN(null_iov_is_efault); /* last: a crash here hides nothing else */
	return T_DONE();
}
