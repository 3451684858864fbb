/*
 * spill.c - an output's spill file (-T DIR): an unlinked temporary file
 * used as a byte stream at growing offsets (see spill.h for the rules).
 * Why these calls:
 *   - O_TMPFILE: the file has no name at any instant, so nothing is left
 *     behind even by a SIGKILL; where the filesystem refuses it, mkstemp and
 *     an immediate unlink leave a name for a few microseconds only.
 *   - pwritev/pread at explicit offsets: the input thread writes and the
 *     output thread reads the one descriptor at once, so neither may move
 *     a shared file position.
 *   - FALLOC_FL_PUNCH_HOLE: what was read back goes back to the disk, so a
 *     long spill uses at most its backlog, not everything ever spilled.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "spill.h"

#define PUNCH_STEP (1u << 20)
/* The read-back buffer (made when first needed, so only outputs that spill
 * hold one): a block, at most this. */
#define READ_BACK_MAX (256u << 10)

/* An unlinked temporary file in dir, read-write: the descriptor, or -1 with errno. */
static int tmpfile_in(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	/* No O_TMPFILE on this filesystem (or kernel): a name for an instant. */
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/.pagepipe-spill-XXXXXX", dir) >= (int)sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0 && unlink(path) != 0) {
		int err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int pt_spill_open(struct pt_spill *s, const char *dir, size_t block)
{
	*s = (struct pt_spill){ .fd = -1, .efd = -1 };
	s->buf_size = block < READ_BACK_MAX ? block : READ_BACK_MAX;
	s->fd = tmpfile_in(dir);
	if (s->fd >= 0)
		s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->fd < 0 || s->efd < 0) {
		int err = errno;
		pt_spill_close(s);
		errno = err;
		return -1;
	}
	return 0;
}

void pt_spill_close(struct pt_spill *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->efd >= 0)
		close(s->efd);
	free(s->buf);
	*s = (struct pt_spill){ .fd = -1, .efd = -1 };
}

int pt_spill_put(struct pt_spill *s, const struct iovec *iov_in, int n, uint64_t off)
{
	struct iovec iov[n > 0 ? n : 1];
	memcpy(iov, iov_in, sizeof iov[0] * (size_t)n);
	int k = 0;
	while (k < n) {
		ssize_t w = pwritev(s->fd, iov + k, n - k, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (w == 0) { /* a regular file never takes nothing without an error */
			errno = EIO;
			return -1;
		}
		off += (uint64_t)w;
		while (k < n && (size_t)w >= iov[k].iov_len)
			w -= (ssize_t)iov[k++].iov_len;
		if (k < n) {
			iov[k].iov_base = (char *)iov[k].iov_base + w;
			iov[k].iov_len -= (size_t)w;
		}
	}
	return 0;
}

ssize_t pt_spill_get(struct pt_spill *s, size_t len, uint64_t off)
{
	/* Page-aligned, as engine_kernel.c's copy buffer: the kernel copies
	 * into and out of it faster. */
	if (!s->buf && (errno = posix_memalign((void **)&s->buf, 4096, s->buf_size)) != 0) {
		s->buf = NULL;
		return -1;
	}
	if (len > s->buf_size)
		len = s->buf_size;
	for (;;) {
		ssize_t r = pread(s->fd, s->buf, len, (off_t)off);
		if (r > 0)
			return r;
		if (r == 0) { /* shorter than what was spilled: someone truncated it */
			errno = EIO;
			return -1;
		}
		if (errno != EINTR)
			return -1;
	}
}

void pt_spill_done_upto(struct pt_spill *s, uint64_t upto, bool caught_up)
{
	if (upto <= s->punched || (!caught_up && upto - s->punched < PUNCH_STEP))
		return;
	/* A failure (EOPNOTSUPP) only keeps the blocks: nothing reads them again. */
	(void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)s->punched,
	                (off_t)(upto - s->punched));
	s->punched = upto;
}

void pt_spill_signal(struct pt_spill *s)
{
	/* EAGAIN only when the counter is near overflow: a wakeup is pending anyway. */
	(void)eventfd_write(s->efd, 1);
}
