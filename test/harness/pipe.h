/*
 * pipe.h - one pipe, a kernel pipe or a pagepipe, behind one interface
 * ("struct tp"), shared by the test programs and the benchmarks.
 *
 * Most tests are about a pagepipe behaving like a kernel pipe, and most
 * benchmarks about how the two compare, so a scenario or a measurement is
 * written once against struct tp and run on both: tp_open(&t, kernel,
 * flags) makes a kernel pipe (pipe2) or a pagepipe (pp_pipe), and tp_read,
 * tp_write, tp_readv, tp_writev, tp_close_end, tp_nread, tp_getsize,
 * tp_setsize, tp_setnonblock and tp_events make the kernel call or the
 * pp_* call.  Only the public API (pagepipe.h) is used.
 *
 * A third kind, the shared pagepipe, is tp_open with PP_SHARED in flags (a
 * kernel pipe ignores it): the same calls, with the ends usable in any
 * process forked after tp_open, as a kernel pipe's descriptors are.  So a
 * scenario written for the two runs with its ends in two processes: fork,
 * and each process closes the end it does not use (tp_close_end).  tp_kind
 * names the three in a loop (TP_KINDS of them).
 *
 * The kernel calls take their arguments through TP_HIDE, so that a test
 * can hand the kernel deliberately bad ones (NULL buffers, negative
 * counts) without -Werror objecting; the cost is nil.
 *
 * Everything is static inline, so a program using only part of it compiles
 * warning-free.
 */
#ifndef PP_TEST_PIPE_H
#define PP_TEST_PIPE_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pagepipe.h"

struct tp {
	int kernel;          /* 1: fd[] is a kernel pipe; 0: e[] a pagepipe */
	int fd[2];
	struct pp_end *e[2];
	int shared;          /* a pagepipe made with PP_SHARED */
};

static inline const char *tp_name(const struct tp *t)
{
	return t->kernel ? "kernel" : t->shared ? "shared pagepipe" : "pagepipe";
}

/* The three kinds of pipe a scenario can run on, for loops over them. */
enum { TP_KERNEL, TP_PRIVATE, TP_SHARED, TP_KINDS };

/* Open a pipe; flags are PP_* (PP_PACKET is O_DIRECT for the kernel;
 * PP_NOSIGPIPE has no kernel equivalent and is ignored there). */
static inline int tp_open(struct tp *t, int kernel, int flags)
{
	memset(t, 0, sizeof *t);
	t->kernel = kernel;
	t->fd[0] = t->fd[1] = -1;
	t->shared = !kernel && (flags & PP_SHARED);
	if (kernel) {
		int kf = O_CLOEXEC;
		if (flags & PP_NONBLOCK)
			kf |= O_NONBLOCK;
		if (flags & PP_PACKET)
			kf |= O_DIRECT;
		return pipe2(t->fd, kf);
	}
	return pp_pipe(t->e, flags);
}

/* tp_open for kind (TP_KERNEL, TP_PRIVATE or TP_SHARED). */
static inline int tp_open_kind(struct tp *t, int kind, int flags)
{
	flags &= ~PP_SHARED;
	return tp_open(t, kind == TP_KERNEL, kind == TP_SHARED ? flags | PP_SHARED : flags);
}

/* A struct tp for the two ends of a pagepipe made elsewhere (either may be
 * NULL). */
static inline struct tp tp_of(struct pp_end *rd, struct pp_end *wr)
{
	struct tp t = { 0, { -1, -1 }, { rd, wr }, 0 };
	return t;
}

/* Hide a value from the compiler, so that deliberately bad arguments (NULL
 * buffers, negative counts) reach the kernel without -Werror objecting. */
#define TP_HIDE(x)                                                           \
	({                                                                       \
		__typeof__(x) h_ = (x);                                              \
		__asm__("" : "+r"(h_));                                              \
		h_;                                                                  \
	})

static inline ssize_t tp_read(struct tp *t, void *buf, size_t n)
{
	return t->kernel ? read(t->fd[0], TP_HIDE(buf), TP_HIDE(n))
	                 : pp_read(t->e[0], buf, n);
}

static inline ssize_t tp_write(struct tp *t, const void *buf, size_t n)
{
	return t->kernel ? write(t->fd[1], TP_HIDE(buf), TP_HIDE(n))
	                 : pp_write(t->e[1], buf, n);
}

/* Write all n bytes, again after a short count or EINTR; 0, or an errno. */
static inline int tp_write_all(struct tp *t, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	while (n) {
		ssize_t r = tp_write(t, p, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static inline ssize_t tp_readv(struct tp *t, const struct iovec *iov, int cnt)
{
	return t->kernel ? readv(t->fd[0], TP_HIDE(iov), TP_HIDE(cnt))
	                 : pp_readv(t->e[0], iov, cnt);
}

static inline ssize_t tp_writev(struct tp *t, const struct iovec *iov, int cnt)
{
	return t->kernel ? writev(t->fd[1], TP_HIDE(iov), TP_HIDE(cnt))
	                 : pp_writev(t->e[1], iov, cnt);
}

/* Close one end (0 read, 1 write); closing an end already closed is a no-op. */
static inline int tp_close_end(struct tp *t, int which)
{
	int r = 0;
	if (t->kernel) {
		if (t->fd[which] >= 0)
			r = close(t->fd[which]);
		t->fd[which] = -1;
	} else {
		if (t->e[which])
			r = pp_close(t->e[which]);
		t->e[which] = NULL;
	}
	return r;
}

static inline void tp_close(struct tp *t)
{
	tp_close_end(t, 0);
	tp_close_end(t, 1);
}

/* FIONREAD / pp_nread on an end. */
static inline int tp_nread(struct tp *t, int which)
{
	if (t->kernel) {
		int n = -1;
		if (ioctl(t->fd[which], FIONREAD, &n) == -1)
			return -1;
		return n;
	}
	return pp_nread(t->e[which]);
}

static inline long tp_getsize(struct tp *t, int which)
{
	return t->kernel ? (long)fcntl(t->fd[which], F_GETPIPE_SZ)
	                 : pp_getsize(t->e[which]);
}

static inline long tp_setsize(struct tp *t, int which, size_t size)
{
	if (t->kernel)
		return (long)fcntl(t->fd[which], F_SETPIPE_SZ, (unsigned long)size);
	return pp_setsize(t->e[which], size);
}

static inline int tp_setnonblock(struct tp *t, int which, int on)
{
	if (t->kernel) {
		int fl = fcntl(t->fd[which], F_GETFL);
		if (fl == -1)
			return -1;
		fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
		return fcntl(t->fd[which], F_SETFL, fl);
	}
	int fl = pp_getfl(t->e[which]);
	if (fl == -1)
		return -1;
	return pp_setfl(t->e[which], on ? (fl | PP_NONBLOCK) : (fl & ~PP_NONBLOCK));
}

/* Every poll event bit a pipe can report. */
#define TP_ALL_EVENTS                                                        \
	(POLLIN | POLLPRI | POLLOUT | POLLRDNORM | POLLRDBAND | POLLWRNORM |      \
	 POLLWRBAND)

/* The events of an end now: poll(2) with timeout 0 for the kernel,
 * pp_events for a pagepipe. */
static inline int tp_events(struct tp *t, int which)
{
	if (t->kernel) {
		struct pollfd p = { t->fd[which], TP_ALL_EVENTS, 0 };
		if (poll(&p, 1, 0) == -1)
			return -1;
		return p.revents;
	}
	return pp_events(t->e[which]);
}

/* Write/read results as one number: the count, or -errno. */
static inline long tp_res(ssize_t r)
{
	return r < 0 ? -(long)errno : (long)r;
}

#endif
