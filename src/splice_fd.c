/*
 * splice_fd.c - moving data between a pagepipe and any file descriptor:
 * pp_splice_from_fd (descriptor -> pipe) and pp_splice_to_fd (pipe ->
 * descriptor), for regular files with or without an offset, sockets,
 * kernel pipes, terminals, /dev/null.
 *
 * Into a descriptor: the pipe's buffers go to writev(2)/pwritev(2) straight
 * from their pages, and exactly the bytes the kernel took are consumed; a
 * short write leaves the rest in the pipe.  The ring lock is held across
 * the system call, as Linux holds the pipe lock across a splice, because
 * another reader must not take bytes we may still have to leave in place;
 * for a shared ring only across writes that cannot sleep (sink_write).
 *
 * From a descriptor: free slots are reserved under the lock (they count as
 * used for everyone else, see ppi_ring_room), fresh pages are filled by
 * readv(2)/preadv(2) with the lock dropped, so a read that blocks on a
 * socket does not stall the pipe's readers, and the filled pages are pushed.
 * Bytes taken from the descriptor always land in the pipe: the reservation
 * guarantees them room.  It is the two-step write of pp_reserve/pp_commit,
 * with a read in the middle, and takes the same steps (ppi_resv_*,
 * reserve.c).
 *
 * From a file sealed against shrinking (F_SEAL_SHRINK, a memfd(2) that its
 * owner sealed) the pages are mapped instead of read: the buffers are of
 * kind PPI_KIND_FILE, name the file's own pages, and one loan (kinds.c) per
 * call unmaps them when the last reference goes.  Only such files: a file
 * that can be truncated would turn a mapped page still in a pipe into
 * SIGBUS for its reader, which the kernel's splice never risks (it holds
 * page-cache pages, not a mapping).  Like splice(2), a reader sees the
 * file's bytes as they are when it reads them, not as they were at the
 * call, if someone writes to the file meanwhile.  Other files are read into
 * pool pages.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "end.h"

#define SEGS_MAX 64

/*
 * Checks common to both directions, in the order splice(2) makes them (the
 * caller has already returned 0 for len 0, which comes first): unknown
 * flags and len above SSIZE_MAX are EINVAL; the pipe end and the descriptor
 * EBADF; an offset with a kernel pipe ESPIPE, with any other descriptor that
 * cannot seek (socket, terminal) EINVAL, a negative one EINVAL; writing to an
 * O_APPEND file EINVAL.  Clamps *len as read(2) does.  Sets *nonblock: the
 * flag or the pipe end's PP_NONBLOCK, as Linux folds O_NONBLOCK in.
 * The ring, or NULL with errno set.
 */
static struct ppi_ring *fd_prologue(struct pp_end *end, int side, int fd, const off_t *off,
                                   unsigned flags, size_t *len, bool *nonblock,
                                   struct stat *stp)
{
	struct stat st_own, *st = stp ? stp : &st_own;
	if ((flags & ~PPI_SPLICE_FLAGS) || *len > (size_t)SSIZE_MAX) {
		errno = EINVAL;
		return NULL;
	}
	struct ppi_ring *r = ppi_end_ring_side(end, side);
	if (!r)
		return NULL;
	if (fd < 0 || fstat(fd, st) < 0) {
		errno = EBADF;
		return NULL;
	}
	if (off) {
		if (S_ISFIFO(st->st_mode)) {
			errno = ESPIPE;
			return NULL;
		}
		if (lseek(fd, 0, SEEK_CUR) < 0 || *off < 0) {
			errno = EINVAL;
			return NULL;
		}
	}
	if (side == PPI_READ) { /* the descriptor is written */
		int fdfl = fcntl(fd, F_GETFL);
		if (fdfl >= 0 && (fdfl & O_APPEND)) {
			errno = EINVAL;
			return NULL;
		}
	}
	if (*len > PPI_MAX_RW)
		*len = PPI_MAX_RW;
	*nonblock = (flags & PP_SPLICE_NONBLOCK) || (ppi_end_flags(end) & PP_NONBLOCK);
	return r;
}

/* Can this file's pages be mapped into pipes safely (see the top)? */
static bool file_pages_mappable(int fd, const struct stat *st)
{
	if (!S_ISREG(st->st_mode))
		return false;
	int seals = fcntl(fd, F_GET_SEALS);
	return seals >= 0 && (seals & F_SEAL_SHRINK);
}

/* A mapped run of a file, for up to k buffers. */
struct file_run {
	struct ppi_loan *loan; /* unmaps the run; one reference is ours */
	uint32_t lead;  /* offset of the first byte in the first page */
	unsigned pages; /* handles made, in pages[] */
};

/*
 * Map the file's bytes from pos (up to len, and what k buffers hold) and
 * make a handle per page into pages[].  The byte count (0 at end of file),
 * or -1 when it cannot be done: then nothing is held and *run is left as it
 * was (no loan, no lead), since the caller reads into pool pages instead.
 */
static ssize_t map_file(int fd, off_t pos, size_t len, uint32_t k, const struct stat *st,
                        uint32_t *pages, struct file_run *run)
{
	if (pos >= st->st_size)
		return 0;
	if ((uint64_t)(st->st_size - pos) < len)
		len = (size_t)(st->st_size - pos);
	off_t start = pos & ~(off_t)PPI_PAGE_MASK;
	uint32_t lead = (uint32_t)(pos - start);
	if (len > (size_t)k * PP_PAGE_SIZE - lead)
		len = (size_t)k * PP_PAGE_SIZE - lead;
	size_t maplen = (lead + len + PPI_PAGE_MASK) & ~(size_t)PPI_PAGE_MASK;
	unsigned char *m = mmap(NULL, maplen, PROT_READ, MAP_SHARED, fd, start);
	if (m == MAP_FAILED)
		return -1;
	struct ppi_loan *loan = ppi_loan_new_unmap(m, maplen);
	if (!loan) {
		munmap(m, maplen);
		return -1;
	}
	unsigned want = (unsigned)(maplen / PP_PAGE_SIZE);
	unsigned made = ppi_loan_handles(loan, m, want, pages);
	if (made < want) { /* give back what was made; the last put unmaps */
		ppi_buf_kinds[PPI_KIND_FILE]->put(pages, made);
		ppi_loan_put(loan);
		return -1;
	}
	*run = (struct file_run){ .loan = loan, .lead = lead, .pages = made };
	return (ssize_t)len;
}

PPI_API ssize_t pp_splice_from_fd(int fd, off_t *off, struct pp_end *out, size_t len,
                                 unsigned flags)
{
	bool nonblock;
	struct stat st;
	if (!len)
		return 0;
	struct ppi_ring *r = fd_prologue(out, PPI_WRITE, fd, off, flags, &len, &nonblock, &st);
	if (!r)
		return -1;

	int fl = ppi_end_flags(out);
	size_t pages_wanted = (len + PPI_PAGE_MASK) / PP_PAGE_SIZE;
	uint32_t want = (uint32_t)(pages_wanted < SEGS_MAX ? pages_wanted : SEGS_MAX);
	struct ppi_call c;
	bool sigpipe = false;
	int err = ppi_call_lock(&c, r, out->shm, false);
	uint32_t k = err ? 0 : ppi_resv_room(&c, want, nonblock, &err, &sigpipe);
	if (!k) {
		if (err != EIO) /* else the lock is not ours */
			ppi_call_unlock(&c);
		return ppi_result(-1, err, sigpipe, fl);
	}
	/* Reserve k slots, and on a shared ring take the pages now, under its
	 * lock (they are held by us until pushed, so that they come back if we
	 * die reading).  All k slots stay reserved until the relock below,
	 * also when a shared ring had fewer pages. */
	uint32_t pages[SEGS_MAX];
	unsigned got = ppi_resv_take(&c, pages, k);
	ppi_call_drop(&c); /* the call goes on below: what it owes is kept */

	struct iovec iov[SEGS_MAX];
	struct file_run run = { NULL, 0, 0 };
	uint32_t kind = PPI_KIND_ANON;
	ssize_t n = -1;
	err = ENOMEM;
	off_t pos = off ? *off : -1;
	if (!c.shm && file_pages_mappable(fd, &st) && (off || (pos = lseek(fd, 0, SEEK_CUR)) >= 0) &&
	    (n = map_file(fd, pos, len, k, &st, pages, &run)) >= 0) {
		got = run.pages;
		kind = PPI_KIND_FILE;
		if (!off && n > 0 && lseek(fd, pos + n, SEEK_SET) < 0) { /* cannot fail: it seeks */
			err = errno;
			n = -1;
		}
	} else {
		if (!c.shm) /* a private ring's pages come from the pool, unlocked */
			got = ppi_call_pages(&c, pages, k);
		if (got) {
			size_t laid; /* len, or less when the pages are fewer */
			int segs = (int)ppi_resv_iov(&c, pages, got, len, false, iov, &laid);
			n = off ? preadv(fd, iov, segs, *off) : readv(fd, iov, segs);
			err = errno;
		}
	}

	if (ppi_call_relock(&c) == EIO)
		return ppi_result(-1, EIO, false, fl); /* what was read is lost with the pipe */
	ppi_resv_slots(&c, -(int)k);
	/* Like Linux's spliced-in buffers: neither merged into nor packets,
	 * whatever the pipe's mode. */
	uint32_t bflags = kind << PPI_BUF_KIND_SHIFT;
	unsigned pushed = n > 0 ? ppi_resv_push(&c, pages, (size_t)n, run.lead, bflags) : 0;
	/* Slots not filled are room again, a wake we were passed goes on, the
	 * pages not pushed go back. */
	ppi_resv_close(&c, k, pushed, bflags, pages, got);
	if (run.loan)
		ppi_loan_put(run.loan); /* ours; the buffers hold theirs */
	if (n >= 0 && off)
		*off += n;
	return ppi_result(n, n < 0 ? err : 0, false, 0);
}

/*
 * How a shared ring's bytes go to a descriptor without sleeping in the
 * system call with the ring locked (see pp_splice_to_fd): SINK_ANY, one
 * writev, which cannot sleep on a reader (a private ring, a regular file,
 * a device other than a terminal, a descriptor with O_NONBLOCK);
 * SINK_SOCKET, sendmsg with MSG_DONTWAIT; SINK_POLLED (a kernel pipe or
 * FIFO, a terminal), writes of at most PIPE_BUF bytes while poll(2) says
 * the descriptor is writable, so each fits without waiting.
 */
enum { SINK_ANY, SINK_SOCKET, SINK_POLLED };

static int sink_kind(int fd, const struct stat *st, bool shared)
{
	if (!shared || S_ISREG(st->st_mode) || S_ISBLK(st->st_mode) ||
	    (S_ISCHR(st->st_mode) && !isatty(fd)))
		return SINK_ANY;
	int fdfl = fcntl(fd, F_GETFL);
	if (fdfl >= 0 && (fdfl & O_NONBLOCK))
		return SINK_ANY;
	return S_ISSOCK(st->st_mode) ? SINK_SOCKET : SINK_POLLED;
}

static bool sink_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	return poll(&p, 1, 0) == 1 && p.revents;
}

/* Write iov[0..cnt) (planned bytes) to fd as kind allows: the count, or -1
 * with errno (EAGAIN: nothing could go without waiting). */
static ssize_t sink_write(int fd, int kind, const off_t *off, struct iovec *iov, int cnt,
                          size_t planned)
{
	if (kind == SINK_ANY)
		return off ? pwritev(fd, iov, cnt, *off) : writev(fd, iov, cnt);
	if (kind == SINK_SOCKET) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
		return sendmsg(fd, &m, MSG_DONTWAIT);
	}
	size_t done = 0;
	int i = 0;
	size_t skip = 0; /* bytes of iov[i] already written */
	while (done < planned) {
		if (!sink_writable(fd))
			break;
		struct iovec part[SEGS_MAX];
		int k = 0;
		size_t want = 0;
		for (int j = i; j < cnt && want < PP_PIPE_BUF && k < SEGS_MAX; j++) {
			size_t from = j == i ? skip : 0;
			size_t l = iov[j].iov_len - from;
			if (l > PP_PIPE_BUF - want)
				l = PP_PIPE_BUF - want;
			part[k++] = (struct iovec){ (char *)iov[j].iov_base + from, l };
			want += l;
		}
		ssize_t n = off ? pwritev(fd, part, k, *off + (off_t)done) : writev(fd, part, k);
		if (n < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)n;
		for (size_t adv = (size_t)n; adv && i < cnt;) {
			size_t l = iov[i].iov_len - skip;
			if (adv < l) {
				skip += adv;
				adv = 0;
			} else {
				adv -= l;
				skip = 0;
				i++;
			}
		}
		if ((size_t)n < want)
			break;
	}
	if (!done) {
		errno = EAGAIN;
		return -1;
	}
	return (ssize_t)done;
}

/*
 * The ring lock is held across the write, so that no other reader takes
 * bytes we may have to leave in place.  Linux holds the pipe's lock across
 * a splice that sleeps on its sink, and the other users of the pipe wait.
 * A shared ring's lock must not be held that way: waiters in other
 * processes give up after a second with EIO (a holder that long is taken
 * for a stopped or broken one), and the sink's reader may itself need the
 * pipe's lock before it reads (to close an end it inherited), which would
 * deadlock.  So a shared ring's bytes only go to a descriptor as far as it
 * takes them at once (sink_write); when it takes nothing, the call waits
 * for it to be writable with the lock dropped, and starts again.
 */
PPI_API ssize_t pp_splice_to_fd(struct pp_end *in, int fd, off_t *off, size_t len, unsigned flags)
{
	bool nonblock;
	struct stat st;
	if (!len)
		return 0;
	struct ppi_ring *r = fd_prologue(in, PPI_READ, fd, off, flags, &len, &nonblock, &st);
	if (!r)
		return -1;
	int kind = sink_kind(fd, &st, in->shm != NULL);

	ssize_t n = 0;
	struct ppi_call c;
again:;
	int err = ppi_call_lock(&c, r, in->shm, true);
	if (err)
		return ppi_result(-1, err, false, 0);
	if ((err = ppi_call_wait_data(&c, nonblock)) == EIO)
		return ppi_result(-1, err, false, 0);
	if (!err && LOAD(r->head) != LOAD(r->tail)) {
		struct iovec iov[SEGS_MAX];
		int cnt = 0;
		size_t planned = 0;
		for (uint32_t i = LOAD(r->tail); i != LOAD(r->head) && cnt < SEGS_MAX && planned < len;
		     i++) {
			struct ppi_buf b;
			if (!ppi_call_buf(&c, i, &b)) {
				err = EIO;
				break;
			}
			size_t take = b.len < len - planned ? b.len : len - planned;
			iov[cnt].iov_base = ppi_call_addr(&c, b.page) + b.offset;
			iov[cnt++].iov_len = take;
			planned += take; /* packets too: splice is not read(2) */
		}
		n = err ? -1 : sink_write(fd, kind, off, iov, cnt, planned);
		if (n < 0 && !err && errno == EAGAIN && kind != SINK_ANY) {
			/* the sink is full: wait for it without the lock */
			ppi_call_unlock(&c);
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			if (poll(&p, 1, -1) < 0)
				return ppi_result(-1, errno, false, 0);
			goto again;
		}
		if (n < 0 && !err)
			err = errno;
		else if (n > 0) /* exactly what the descriptor took */
			err = ppi_call_drop_bytes(&c, (size_t)n);
	}
	ppi_call_unlock(&c);
	if (!err && off)
		*off += n;
	return ppi_result(n, err, false, 0);
}
