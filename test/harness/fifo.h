/*
 * fifo.h - a named pipe that is either a kernel FIFO (mkfifo(3)) or a
 * named pagepipe (pp_mkfifo), behind one handle, so that a test runs the
 * same steps on both and compares (named_pipes.c, crash_named.c).  The
 * calls return what the underlying call returns: -1 with errno on error.
 */
#ifndef PP_TEST_HARNESS_FIFO_H
#define PP_TEST_HARNESS_FIFO_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pagepipe.h>

struct tp_fifo {
	int kernel;
	int fd;           /* the kernel FIFO's descriptor, or -1 */
	struct pp_end *e; /* the pagepipe's end, or NULL */
};

static inline int tp_fifo_mk(int kernel, const char *path, mode_t mode)
{
	return kernel ? mkfifo(path, mode) : pp_mkfifo(path, mode);
}

/* Remove what tp_fifo_mk made (a named pagepipe is a directory of files). */
static inline void tp_fifo_rm(int kernel, const char *path)
{
	if (kernel) {
		unlink(path);
		return;
	}
	static const char *const parts[] = { "w", "r", "e0", "e1", "data", "ctl" };
	char p[256];
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", path, parts[i]);
		unlink(p);
	}
	rmdir(path);
}

/* Open for writing (wr) or reading, non-blocking with nb: 0, or -1. */
static inline int tp_fifo_open(struct tp_fifo *f, int kernel, const char *path, int wr, int nb)
{
	f->kernel = kernel;
	f->fd = -1;
	f->e = NULL;
	if (kernel) {
		f->fd = open(path, (wr ? O_WRONLY : O_RDONLY) | (nb ? O_NONBLOCK : 0) | O_CLOEXEC);
		return f->fd >= 0 ? 0 : -1;
	}
	f->e = pp_open(path, (wr ? PP_WRONLY : PP_RDONLY) | (nb ? PP_NONBLOCK : 0));
	return f->e ? 0 : -1;
}

static inline ssize_t tp_fifo_read(struct tp_fifo *f, void *buf, size_t n)
{
	return f->kernel ? read(f->fd, buf, n) : pp_read(f->e, buf, n);
}

static inline ssize_t tp_fifo_write(struct tp_fifo *f, const void *buf, size_t n)
{
	return f->kernel ? write(f->fd, buf, n) : pp_write(f->e, buf, n);
}

static inline void tp_fifo_close(struct tp_fifo *f)
{
	if (f->kernel && f->fd >= 0)
		close(f->fd);
	else if (!f->kernel && f->e)
		pp_close(f->e);
	f->fd = -1;
	f->e = NULL;
}

#endif
