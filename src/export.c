/*
 * export.c - reaching a shared pipe from another process: pp_export and
 * pp_import (an end as a descriptor, for SCM_RIGHTS or exec), and named
 * pipes, pp_mkfifo and pp_open (an end by path, for unrelated processes).
 *
 * An exported end is a SOCK_SEQPACKET socket with one message queued on
 * it, whose peer is closed: the message carries a description of the ctl
 * memory (with the export's own liveness lock on it), the data memory
 * (read-only for a read end), the end's two tokens and the two readiness
 * pipes.  pp_import reads it with MSG_PEEK, so the descriptor can be
 * imported again, by any process it reaches; and everything in the message
 * lives exactly as long as some copy of the descriptor does, which is what
 * makes the descriptor an open end, as a pipe descriptor in flight is.
 *
 * A named pipe is a directory whose entries play the same parts as files
 * anyone with the right permission bits can open:
 *   ctl, data  the shared memory (regular files; put the pipe on a tmpfs);
 *   w          a FIFO: readers hold it open for reading, writers for writing,
 *              so the kernel gives pp_open the blocking rules of fifo(7)
 *              (and ENXIO), and hangs it up when one side is gone;
 *   r          a FIFO: writers hold it open for reading, readers read-write
 *              (an O_RDONLY|O_NONBLOCK open never waits; an O_RDWR one
 *              neither), the readers' token;
 *   e0, e1     FIFOs every holder opens read-write: pp_fd's readiness.
 * pp_mkfifo gives each the permission bits its part needs from the mode's:
 * w as given (reading is the read side, writing the write side), r with
 * read and write for classes that may read, read for classes that may write,
 * and so on below.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "end.h"

#define EXPORT_MAGIC 0x70706578u /* "ppex" */
#define EXPORT_FDS 6             /* ctl, data, 2 tokens, 2 readiness pipes */

struct export_msg {
	uint32_t magic, version;
	uint32_t side, desc;
	uint32_t ring; /* the pipe's ring in its memory (pp_pipe_in) */
};

/* ---- export and import ---------------------------------------------------- */

/* A new handle, for this process, on description d of v's pipe, or with
 * d < 0 on a new description with status flags fl (pp_open).  NULL with
 * errno; then, if the process holds nothing else of the pipe, it lets go
 * of it. */
static struct pp_end *handle_on(struct ppi_shm *v, int side, int d, int fl)
{
	struct pp_end *e = ppi_end_new(v->ring, side, v, 0);
	int err = e ? ppi_shm_lock(v) : ENOMEM;
	if (!err) {
		if (d < 0 && (d = ppi_shm_desc_new(v, side, fl)) < 0)
			err = EMFILE;
		else if ((LOAD(ppi_shm_descs(v)[d].side) & 1) != (uint32_t)side ||
		         (LOAD(ppi_shm_descs(v)[d].ring) & (PPI_SHM_RINGS - 1)) != v->ri)
			err = EIO; /* the description is not what the export said */
		if (!err) {
			unsigned closed;
			int gone;
			e->desc = (uint32_t)d;
			ppi_shm_handles(v, (uint32_t)d, side, 1, &closed, &gone);
		}
		if (err && ppi_shm_holds_nothing(v))
			ppi_shm_holder_is(v, v->m->holder, PPI_HOLDER_FREE);
		ppi_shm_unlock(v);
	}
	if (err) {
		free(e);
		if (!v->handles[PPI_READ] && !v->handles[PPI_WRITE])
			ppi_shm_detach(v);
		errno = err;
		return NULL;
	}
	return e;
}

static int dup_or_err(int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return d >= 0 ? d : -errno;
}

PPI_API int pp_export(struct pp_end *end)
{
	if (!ppi_end_ring(end))
		return -1;
	struct ppi_shm *v = end->shm;
	if (!v) {
		errno = EINVAL;
		return -1;
	}
	int side = end->side;
	int fds[EXPORT_FDS] = { -1, -1, -1, -1, -1, -1 };
	int sv[2] = { -1, -1 };
	int err = 0, h = -1;
	/* The export's own description of ctl, carrying its liveness lock. */
	fds[0] = ppi_shm_reopen(v->m->ctl_fd, O_RDWR);
	if (fds[0] < 0) {
		errno = -fds[0];
		return -1;
	}
	if ((h = ppi_shm_holder_new(v, fds[0], PPI_HOLDER_EXPORT)) < 0) {
		close(fds[0]);
		errno = -h;
		return -1;
	}
	pthread_mutex_lock(&v->m->mu);
	fds[1] = side == PPI_READ ? ppi_shm_reopen(v->m->data_fd, O_RDONLY) : dup_or_err(v->m->data_fd);
	fds[2] = dup_or_err(side == PPI_READ ? v->d_rd : v->d_wr);
	fds[3] = dup_or_err(side == PPI_READ ? v->r_wr : v->r_rd);
	fds[4] = dup_or_err(v->efd[0]);
	fds[5] = dup_or_err(v->efd[1]);
	pthread_mutex_unlock(&v->m->mu);
	for (int i = 1; i < EXPORT_FDS; i++)
		if (fds[i] < 0) {
			err = -fds[i];
			goto fail;
		}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		err = errno;
		goto fail;
	}
	struct export_msg msg = { EXPORT_MAGIC, PPI_SHM_VERSION, (uint32_t)side, end->desc, v->ri };
	struct iovec io = { &msg, sizeof msg };
	union {
		char buf[CMSG_SPACE(sizeof fds)];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct msghdr mh = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl.buf,
		             .msg_controllen = sizeof ctl.buf };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(cm), fds, sizeof fds);
	if (sendmsg(sv[1], &mh, MSG_NOSIGNAL) != (ssize_t)sizeof msg) {
		err = errno;
		goto fail;
	}
	/* The export holds a handle on the end's description. */
	if ((err = ppi_shm_lock(v)))
		goto fail;
	ppi_shm_count(v, (uint32_t)h, end->desc, 1);
	ppi_shm_unlock(v);
	for (int i = 0; i < EXPORT_FDS; i++)
		close(fds[i]); /* the message holds them now */
	close(sv[1]);
	return sv[0];
fail:
	/* Free while its lock still holds it ours: once fds[0] is closed a
	 * reaper may free it and another process take it. */
	ppi_shm_holder_is(v, (uint32_t)h, PPI_HOLDER_FREE);
	for (int i = 0; i < EXPORT_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	errno = err ? err : EMFILE;
	return -1;
}

PPI_API struct pp_end *pp_import(int fd)
{
	struct export_msg msg;
	int fds[EXPORT_FDS];
	union {
		char buf[CMSG_SPACE(sizeof fds)];
		struct cmsghdr align;
	} ctl;
	struct iovec io = { &msg, sizeof msg };
	struct msghdr mh = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl.buf,
		             .msg_controllen = sizeof ctl.buf };
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		errno = EBADF;
		return NULL;
	}
	if (!S_ISSOCK(st.st_mode)) {
		errno = EINVAL;
		return NULL;
	}
	ssize_t n = recvmsg(fd, &mh, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0) {
		errno = errno == EMFILE || errno == ENFILE || errno == ENOMEM ? errno : EINVAL;
		return NULL;
	}
	int got = 0;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		got = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (got > EXPORT_FDS)
			got = EXPORT_FDS;
		memcpy(fds, CMSG_DATA(cm), (size_t)got * sizeof(int));
	}
	if (n == (ssize_t)sizeof msg && msg.magic == EXPORT_MAGIC && got < EXPORT_FDS &&
	    (mh.msg_flags & MSG_CTRUNC)) {
		/* The kernel could not give us the descriptors (it truncates
		 * the control data when the process is at its limit). */
		for (int i = 0; i < got; i++)
			close(fds[i]);
		errno = EMFILE;
		return NULL;
	}
	if (n != (ssize_t)sizeof msg || got != EXPORT_FDS || (mh.msg_flags & MSG_CTRUNC) ||
	    msg.magic != EXPORT_MAGIC || msg.version != PPI_SHM_VERSION || msg.side > 1 ||
	    msg.desc >= PPI_SHM_DESCS || msg.ring >= PPI_SHM_RINGS) {
		for (int i = 0; i < got; i++)
			close(fds[i]);
		errno = EINVAL;
		return NULL;
	}
	int side = (int)msg.side;
	struct ppi_shm *v;
	int err = ppi_shm_attach(fds[0], fds[1], side, msg.ring, &fds[2], &fds[4], &v);
	if (err) {
		errno = err == EINVAL ? EINVAL : err;
		return NULL;
	}
	return handle_on(v, side, (int)msg.desc, 0);
}

/* ---- named pipes ----------------------------------------------------------- */

/* The permission bits of a named pipe's parts, from mkfifo's mode (per
 * class: r means "may open for reading", w "may open for writing"). */
static mode_t bits(mode_t mode, int (*part)(int r, int w))
{
	mode_t out = 0;
	for (int shift = 0; shift <= 6; shift += 3) {
		int r = (mode >> (shift + 2)) & 1, w = (mode >> (shift + 1)) & 1;
		out |= (mode_t)part(r, w) << shift;
	}
	return out;
}

static int part_dir(int r, int w)
{
	return r || w ? 5 : 0; /* r-x: list and reach the parts */
}

static int part_w(int r, int w)
{
	return r << 2 | w << 1; /* as given */
}

static int part_r(int r, int w)
{
	return (r || w) << 2 | r << 1; /* readers open it read-write, writers read-only */
}

static int part_shared(int r, int w)
{
	return r || w ? 6 : 0; /* ctl, e0, e1: both sides write them */
}

static int part_data(int r, int w)
{
	return (r || w) << 2 | w << 1; /* read-only for a class that may only read */
}

/* An open file of the named pipe at dir/name: the descriptor, or -errno. */
static int open_part(int dir, const char *name, int flags)
{
	int fd = openat(dir, name, flags | O_CLOEXEC | O_NOCTTY);
	return fd >= 0 ? fd : -errno;
}

PPI_API int pp_mkfifo(const char *path, mode_t mode)
{
	if (!path) {
		errno = EFAULT;
		return -1;
	}
	mode &= 0777;
	if (mkdir(path, bits(mode, part_dir) | S_IRWXU) != 0)
		return -1;
	int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int err = dir < 0 ? errno : 0;
	if (!err && (mkfifoat(dir, "w", bits(mode, part_w)) != 0 ||
	             mkfifoat(dir, "r", bits(mode, part_r)) != 0 ||
	             mkfifoat(dir, "e0", bits(mode, part_shared)) != 0 ||
	             mkfifoat(dir, "e1", bits(mode, part_shared)) != 0))
		err = errno;
	int data = -1, ctl = -1;
	if (!err && (data = open_part(dir, "data", O_RDWR | O_CREAT | O_EXCL)) < 0)
		err = -data;
	if (!err && fchmod(data, bits(mode, part_data)) != 0)
		err = errno;
	if (!err && (ctl = open_part(dir, "ctl", O_RDWR | O_CREAT | O_EXCL)) < 0)
		err = -ctl;
	if (!err && fchmod(ctl, bits(mode, part_shared)) != 0)
		err = errno;
	if (!err)
		err = ppi_shm_format(ctl);
	if (ctl >= 0)
		close(ctl);
	if (data >= 0)
		close(data);
	if (err) {
		if (dir >= 0) {
			static const char *const parts[] = { "w", "r", "e0", "e1", "data", "ctl" };
			for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
				unlinkat(dir, parts[i], 0);
			close(dir);
		}
		rmdir(path);
		errno = err;
		return -1;
	}
	/* The directory got rwx for its owner to make the parts; leave it as
	 * the mode says for the others, and let the owner remove it. */
	fchmod(dir, (bits(mode, part_dir) | S_IRWXU) & ~(mode_t)0);
	close(dir);
	return 0;
}

PPI_API struct pp_end *pp_open(const char *path, int flags)
{
	if (!path) {
		errno = EFAULT;
		return NULL;
	}
	int side_bits = flags & (PP_RDONLY | PP_WRONLY);
	if ((side_bits != PP_RDONLY && side_bits != PP_WRONLY) ||
	    (flags & ~(PP_RDONLY | PP_WRONLY | PPI_END_FLAGS))) {
		errno = EINVAL;
		return NULL;
	}
	int side = side_bits == PP_RDONLY ? PPI_READ : PPI_WRITE;
	int nb = (flags & PP_NONBLOCK) ? O_NONBLOCK : 0;
	int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		/* ENOTDIR: path itself is not a directory (not a named pagepipe:
		 * EINVAL), or a component of it is not (ENOTDIR, as open(2)). */
		struct stat st;
		if (errno == ENOTDIR && stat(path, &st) == 0)
			errno = EINVAL;
		return NULL;
	}
	int tok[2] = { -1, -1 }, rdy[2] = { -1, -1 }, ctl = -1, data = -1;
	int err = 0;
	struct stat st;
	if (fstatat(dir, "w", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISFIFO(st.st_mode))
		err = errno == EACCES ? EACCES : EINVAL;
	/* The side's end of r first (it never waits: writers open it read-only
	 * and non-blocking, readers read-write). */
	else if ((tok[1] = open_part(dir, "r", side == PPI_READ ? O_RDWR | O_NONBLOCK
	                                                        : O_RDONLY | O_NONBLOCK)) < 0)
		err = -tok[1];
	for (int i = 0; !err && i < 2; i++)
		if ((rdy[i] = open_part(dir, i ? "e1" : "e0", O_RDWR | O_NONBLOCK)) < 0)
			err = -rdy[i];
	if (!err && (data = open_part(dir, "data", side == PPI_READ ? O_RDONLY : O_RDWR)) < 0)
		err = -data;
	if (!err && (ctl = open_part(dir, "ctl", O_RDWR)) < 0)
		err = -ctl;
	if (err) {
		int fds[] = { tok[1], rdy[0], rdy[1], data, ctl };
		for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		close(dir);
		errno = err;
		return NULL;
	}
	struct ppi_shm *v;
	if ((err = ppi_shm_attach(ctl, data, side, 0, tok, rdy, &v))) {
		close(dir);
		errno = err;
		return NULL;
	}
	/*
	 * The end counts as open before the FIFO's open returns, in this
	 * process and the other: whoever the kernel lets through first must
	 * find the other side already counted (a reader would see end of file,
	 * a writer EPIPE).  Then fifo(7) by the kernel's own FIFO w: a
	 * reader's open waits for a writer, a writer's for a reader, or fails
	 * with ENXIO when non-blocking.
	 */
	if (ppi_shm_lock(v) == 0) {
		ppi_shm_opened(v);
		ppi_shm_unlock(v);
	}
	struct pp_end *e = handle_on(v, side, -1, flags & PPI_END_FLAGS);
	if (!e) {
		close(dir);
		return NULL;
	}
	int w = open_part(dir, "w", (side == PPI_READ ? O_RDONLY : O_WRONLY) | nb);
	close(dir);
	if (w < 0) {
		int saved = -w;
		pp_close(e);
		errno = saved;
		return NULL;
	}
	pthread_mutex_lock(&v->m->mu);
	int *slot = side == PPI_READ ? &v->d_rd : &v->d_wr;
	if (*slot < 0)
		*slot = w;
	else
		close(w);
	pthread_mutex_unlock(&v->m->mu);
	return e;
}
