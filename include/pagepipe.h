/*
 * pagepipe.h - the public interface of libpagepipe.
 *
 * A pagepipe is Linux's pipe brought into user space: a circular ring of
 * buffers, each naming a page, an offset and a length, with free-running
 * head and tail counters masked by a power-of-two ring size.  Pages are
 * taken from a shared pool when data arrives and given back as soon as they
 * are drained.  Any number of threads may read and write.
 *
 * Every call behaves like the matching system call on a Linux pipe: the same
 * return values, the same errno, the same blocking, atomicity and
 * write-coalescing rules.  Errors return -1 (or NULL) and set errno.
 *
 * Handles.  A struct pp_end is like a file descriptor: pp_pipe() makes two,
 * pp_dup() makes another on the same open end (sharing its status flags,
 * like dup(2)), pp_close() drops one.  Calls on one handle may run in many
 * threads at once, but a handle must not be used after, or while, it is
 * passed to pp_close(): give each thread its own handle with pp_dup() when
 * threads close independently.  A closed handle is detected (EBADF) while
 * its memory has not been reused; beyond that, use after close is undefined.
 *
 * Shared pipes (PP_SHARED, pp_import, pp_open) add one error to every call
 * that takes the pipe's lock: EIO, when the pipe's shared memory was found
 * corrupt (another process wrote over it) or its lock stayed held by a
 * live process for more than a second.  A call that had moved bytes
 * returns their count; the next one fails.  pp_close closes the handle
 * even then.
 *
 * Signal handlers.  pp_nread, pp_events, pp_getfl, pp_setfl, pp_getsize,
 * pp_getmaxsize, pp_setmaxsize and pp_version are async-signal-safe: they
 * take no lock.  Every other call takes the pipe's lock (or the page
 * pool's) in user space, so unlike read(2) and write(2) they are NOT
 * async-signal-safe: a handler that calls one on a pipe (or, for the pool
 * calls, any pipe) that the interrupted code may be using can deadlock.
 *
 * Link with -lpagepipe -pthread (or pkg-config --libs pagepipe).
 */
#ifndef PAGEPIPE_H
#define PAGEPIPE_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PAGEPIPE_VERSION "0.1.0"

/* Size of one ring page, and the atomic-write limit (as PIPE_BUF). */
#define PP_PAGE_SIZE 4096
#define PP_PIPE_BUF 4096

/* Flags for pp_pipe(), pp_getfl() and pp_setfl(). */
#define PP_NONBLOCK 0x1  /* like O_NONBLOCK: EAGAIN instead of waiting */
#define PP_PACKET 0x2    /* like O_DIRECT: packet mode, see pp_pipe(3) */
#define PP_NOSIGPIPE 0x4 /* EPIPE without raising SIGPIPE */
#define PP_SHARED 0x8    /* pp_pipe(): in shared memory, for several processes */

/* Flags for pp_open(): exactly one of these (like O_RDONLY / O_WRONLY),
 * plus PP_NONBLOCK, PP_PACKET and PP_NOSIGPIPE. */
#define PP_RDONLY 0x10
#define PP_WRONLY 0x20

/* One end of a pagepipe (opaque). */
struct pp_end;

/*
 * Create a pipe.  ends[0] is the read end, ends[1] the write end.  flags is
 * an OR of PP_NONBLOCK, PP_PACKET and PP_NOSIGPIPE, applied to both ends,
 * and PP_SHARED.  Capacity starts at 16 pages (65536 bytes).
 *
 * Without PP_SHARED the pipe lives in the process's memory and connects its
 * threads; in a child made by fork(2) its handles are not open (every call
 * on them fails with EBADF, as if the child had closed them), so the child
 * can never disturb the parent's pipe.
 *
 * With PP_SHARED the ring and its pages live in shared memory (memfds) and
 * the pipe connects processes, as a kernel pipe does.  After fork(2) the
 * child holds every shared end the parent held, as it holds inherited
 * descriptors; each process's handles count as open ends: readers see end
 * of file when the last write end in every process is closed, writers get
 * EPIPE when the last read end is.  A process that exits, is killed, or
 * execs without closing its handles has closed them (its half-done call
 * leaves no torn record and no lost page behind).  Across exec, or to an
 * unrelated process, an end travels as a descriptor: see pp_export().
 * Returns 0, or -1 with errno EINVAL (unknown flag), EFAULT (ends is NULL),
 * ENOMEM, or for PP_SHARED EMFILE/ENFILE (descriptors) or ENOSYS (no
 * memfd_create, or /proc is not mounted).
 */
int pp_pipe(struct pp_end *ends[2], int flags);

/*
 * Another handle on the same open end, like dup(2): it reads or writes the
 * same pipe and shares the status flags (pp_setfl on one changes both).
 * The end stays open until its last handle is closed.
 * Returns the new handle, or NULL with errno EBADF or ENOMEM.
 */
struct pp_end *pp_dup(struct pp_end *end);

/*
 * Close a handle.  Closing the last handle of the write end makes readers
 * see end of file once the pipe is drained; closing the last handle of the
 * read end makes writers fail with EPIPE.  Both wake every sleeper that the
 * change concerns.  Data still in the pipe is freed with its last end.
 * Returns 0, or -1 with errno EBADF.
 */
int pp_close(struct pp_end *end);

/*
 * Read up to count bytes.  Returns what is there without waiting for more;
 * waits while the pipe is empty and a writer exists; returns 0 at end of
 * file.  In packet mode a read returns at most one packet and discards the
 * part of it that did not fit.  Counts above 0x7ffff000 are clamped as
 * read(2) does.
 * Errors: EBADF (not a read end), EAGAIN (empty, non-blocking), EINTR (a
 * signal handler ran before anything was read), EFAULT (buf NULL, or a
 * count above SSIZE_MAX or running past the end of the address space, as
 * read(2) fails it).
 */
ssize_t pp_read(struct pp_end *end, void *buf, size_t count);

/*
 * Write count bytes.  Blocking: returns only when all are written, or with
 * the count written so far when interrupted by a signal handler, when the
 * last reader goes away, or when no page can be had.  Non-blocking: a write
 * of at most PP_PIPE_BUF bytes goes in whole or fails with EAGAIN; a longer
 * one writes what fits.  Writes of at most PP_PIPE_BUF bytes are atomic.
 * A zero-length write returns 0.
 * Counts above 0x7ffff000 are clamped as write(2) does.
 * Errors: EBADF (not a write end), EPIPE (no reader left; SIGPIPE is raised
 * in the calling thread first unless PP_NOSIGPIPE), EAGAIN, EINTR, ENOMEM
 * (no page and nothing written), EFAULT (buf NULL, or a count above
 * SSIZE_MAX or running past the end of the address space).
 */
ssize_t pp_write(struct pp_end *end, const void *buf, size_t count);

/*
 * Vectored read and write, like readv(2) and writev(2): the segments are
 * one call, so a writev of at most PP_PIPE_BUF bytes in all is atomic.
 * Additional errors: EINVAL (iovcnt < 0 or > IOV_MAX, or lengths summing
 * past SSIZE_MAX).
 */
ssize_t pp_readv(struct pp_end *end, const struct iovec *iov, int iovcnt);
ssize_t pp_writev(struct pp_end *end, const struct iovec *iov, int iovcnt);

/* Bytes ready to read (FIONREAD), on either end; -1 with EBADF.
 * Async-signal-safe. */
int pp_nread(struct pp_end *end);

/* Capacity in bytes (F_GETPIPE_SZ), on either end; -1 with EBADF. */
long pp_getsize(struct pp_end *end);

/*
 * Set the capacity (F_SETPIPE_SZ), on either end: size is rounded up to a
 * power-of-two number of pages, at least one.  Returns the new capacity in
 * bytes, or -1 with errno EINVAL (size above 2^31), EPERM (growing past the
 * limit of pp_setmaxsize), EBUSY (fewer pages than the buffers in use),
 * ENOMEM, EBADF.
 */
long pp_setsize(struct pp_end *end, size_t size);

/*
 * The limit pp_setsize() may grow a pipe to, for all pipes of the process
 * (like /proc/sys/fs/pipe-max-size; default 1048576).  pp_setmaxsize rounds
 * like pp_setsize and returns the new limit, or -1 with EINVAL (size 0 or
 * above 2^31).
 */
long pp_getmaxsize(void);
long pp_setmaxsize(size_t size);

/* Status flags of the end (PP_NONBLOCK, PP_PACKET, PP_NOSIGPIPE); -1 EBADF. */
int pp_getfl(struct pp_end *end);

/*
 * Set the status flags, like F_SETFL: only PP_NONBLOCK changes; other bits
 * are ignored.  Shared by every handle pp_dup() made of the end.
 * Returns 0, or -1 with EBADF.
 */
int pp_setfl(struct pp_end *end, int flags);

/*
 * The poll(2) events a kernel pipe end would report now: on the read end
 * POLLIN|POLLRDNORM while data waits and POLLHUP once every writer is gone;
 * on the write end POLLOUT|POLLWRNORM while a buffer slot is free and
 * POLLERR once every reader is gone.  Returns the mask, or -1 with EBADF.
 */
short pp_events(struct pp_end *end);

/*
 * A file descriptor for event loops: poll(2)/epoll(7) report it readable
 * (POLLIN; wait for that only, an eventfd is always writable) exactly while
 * the end is ready (read end: data or hang-up; write end: a
 * free slot or error).  Made on first call; dup handles of the same end
 * share it; it belongs to the pipe and is closed with the end's last handle,
 * so do not read, write or close it.  Every write that adds data signals the
 * read end's descriptor again, so edge-triggered epoll sees each write.
 * Returns the descriptor, or -1 with errno EBADF, EMFILE, ENFILE, ENOMEM.
 */
int pp_fd(struct pp_end *end);

/* ---- Pipes between processes ------------------------------------------ */

/*
 * A new descriptor (close-on-exec set) that names `end` of a PP_SHARED pipe,
 * to pass to another process with SCM_RIGHTS, or across execve(2) once
 * FD_CLOEXEC is cleared.  The descriptor is itself an open end, as a pipe
 * descriptor in flight is: while it exists anywhere (in a process, or in a
 * socket's queue) the end stays open.  Handles made from it by pp_import()
 * share the end's status flags (PP_NONBLOCK) with `end`.
 * Returns the descriptor, or -1 with errno EBADF, EINVAL (a private pipe),
 * EMFILE, ENFILE, ENOMEM.
 */
int pp_export(struct pp_end *end);

/*
 * The end that a descriptor from pp_export() names, as a new handle in the
 * calling process; the caller keeps fd (and closes it when it wants).  An
 * exported read end gives a read end only: pp_write() on it fails with
 * EBADF, as on a kernel pipe.  Returns the handle, or NULL with errno EBADF
 * (fd is not open), EINVAL (fd is not a pagepipe export), EIO (the pipe's
 * shared memory is not a valid pagepipe), EMFILE, ENFILE, ENOMEM.
 */
struct pp_end *pp_import(int fd);

/*
 * A named pagepipe, like mkfifo(3): creates at `path` what pp_open() opens,
 * with the permission bits of `mode` (less the umask) deciding who may open
 * it for reading and for writing.  `path` is a directory holding the
 * pipe's FIFOs and shared memory.  Returns 0, or -1 with errno as mkdir(2)
 * and mkfifo(3): EEXIST, EACCES, ENOENT, ENOTDIR, ENAMETOOLONG, EROFS,
 * ENOSPC, EDQUOT, ELOOP, EPERM.
 */
int pp_mkfifo(const char *path, mode_t mode);

/*
 * Open a named pagepipe, following fifo(7): flags is PP_RDONLY or
 * PP_WRONLY, or'ed with PP_NONBLOCK, PP_PACKET, PP_NOSIGPIPE.  A blocking
 * open waits until the other side is opened too; a non-blocking open for
 * reading succeeds at once, one for writing with no reader fails with ENXIO.
 * Each open is its own open end (its own status flags).  Returns the
 * handle, or NULL with errno EINVAL (bad flags, or path is not a named
 * pagepipe), ENXIO, EACCES (the permission bits do not allow it), ENOENT,
 * ENOTDIR, EINTR (a signal handler interrupted a blocking open), EIO,
 * EMFILE, ENFILE, ENOMEM.
 */
struct pp_end *pp_open(const char *path, int flags);

/*
 * A new shared pipe in the same shared memory as `member` (an end of a
 * PP_SHARED pipe, or of a pipe made by pp_pipe_in, or imported), as
 * pp_pipe() makes one: ends[0] reads, ends[1] writes, flags as pp_pipe()'s
 * (PP_SHARED is implied).  Pipes of one memory share its pages, so
 * pp_tee(), pp_splice() and pp_fanout() between them, in any process, move
 * page references and copy no byte: a stream written once can be read by
 * several consumer processes, each at its own pace, with its data held in
 * memory once.  The price is trust: every process that holds an end of
 * any pipe of the memory maps all of its data (read-only if it holds only
 * read ends) and could read or, with a write end, change the others'
 * bytes; so put together only pipes whose readers may see each other's
 * data.  A memory holds up to 8 pipes; a pipe's ring is free again when
 * its last end anywhere is closed.  The calling process must map the
 * memory writable: it holds a write end of one of its pipes (the new
 * pipe's writer puts pages there).  Returns 0, or -1 with errno EFAULT
 * (ends NULL), EBADF (member is not a live handle), EINVAL (bad flags, or
 * member is a private pipe's), EACCES (the process holds only read ends of
 * the memory's pipes), EMFILE (8 pipes in the memory already, or no free
 * open description; or descriptors), ENFILE, ENOMEM, EIO.
 */
int pp_pipe_in(struct pp_end *ends[2], int flags, struct pp_end *member);

/*
 * The shared memory of the pipe of a PP_SHARED end, now: pages holding
 * data in rings (each counted once, however many buffers of the memory's
 * pipes name it: see pp_pipe_in), pages held outside them by calls in
 * progress (a writer filling them, a reader copying out of them), idle
 * pages kept for reuse, and the processes and exported descriptors holding
 * the memory.
 */
struct pp_shared_stats {
	long pages_in_ring;   /* pages the rings' buffers name */
	long pages_held;      /* pages calls in progress hold outside the rings */
	long pages_idle;      /* mapped, kept for reuse */
	long pages_mapped;    /* size of the data memory, in pages */
	long holders;         /* processes and exports holding the memory */
};

/* Fill *st for the pipe of end; returns 0, or -1 with errno EBADF, EINVAL
 * (a private pipe), EFAULT (st NULL), EIO. */
int pp_shared_stats(struct pp_end *end, struct pp_shared_stats *st);

/* ---- Zero copy between pipes ------------------------------------------ */

/* Flags for pp_splice(), pp_tee() and pp_fanout(), as SPLICE_F_*. */
#define PP_SPLICE_MOVE 0x1     /* a hint; buffers always move when they can */
#define PP_SPLICE_NONBLOCK 0x2 /* EAGAIN instead of waiting (so does PP_NONBLOCK on an end) */
#define PP_SPLICE_MORE 0x4     /* a hint; ignored between pipes */
#define PP_SPLICE_GIFT 0x8     /* for vmsplice; ignored here */

/*
 * Move up to len bytes from the pipe of `in` (a read end) to the pipe of
 * `out` (a write end) by moving buffer references, without copying data,
 * like splice(2) between two pipes.  Waits while `in` is empty and has a
 * writer, and while `out` is full, unless PP_SPLICE_NONBLOCK or either end
 * has PP_NONBLOCK.  Moves at most
 * what `in` holds and what fits in `out`'s free slots.
 * Returns the bytes moved, 0 when `in` is empty and has no writer left, or
 * -1 with errno EBADF (not a read end / write end), EINVAL (both ends of one
 * pipe, or an unknown flag), EAGAIN, EPIPE (`out` has no reader; SIGPIPE is
 * raised first unless `out` has PP_NOSIGPIPE), EINTR.
 */
ssize_t pp_splice(struct pp_end *in, struct pp_end *out, size_t len, unsigned flags);

/*
 * Like pp_splice(), but `in` keeps its data: `out` gets references to the
 * same pages (tee(2)).  A write to either pipe never changes what the other
 * reads: shared pages are never appended to.
 */
ssize_t pp_tee(struct pp_end *in, struct pp_end *out, size_t len, unsigned flags);

/*
 * Move up to len bytes from `in` to every one of the n write ends in outs[]
 * (1 <= n <= 64), each getting the same bytes by reference; at most what
 * fits in the fullest of them.  Atomic with respect to other readers of
 * `in`: no other reader gets a byte between.  Waits as pp_splice() does,
 * for data in `in` and room in every output.  Errors as pp_splice(), and
 * EINVAL for n out of range or the same pipe twice, EFAULT for outs NULL.
 */
ssize_t pp_fanout(struct pp_end *in, struct pp_end *const outs[], int n, size_t len,
                  unsigned flags);

/*
 * Between a pipe and any file descriptor (regular file, socket, kernel
 * pipe, terminal, /dev/null), like splice(2) with one side a pipe.
 * pp_splice_from_fd reads up to len bytes from fd into the pipe of `out`;
 * pp_splice_to_fd writes up to len bytes of the pipe of `in` to fd, straight
 * from its pages, and consumes exactly what fd took (a short write leaves the
 * rest in the pipe).  off: NULL to use and move fd's file position, or a
 * pointer to an offset to read or write at, advanced by the count (fd must
 * be seekable).  The pipe side waits as pp_splice() does unless
 * PP_SPLICE_NONBLOCK; the descriptor side blocks or not by its own
 * O_NONBLOCK.  Returns the bytes moved, 0 at end of input (fd at EOF, or the
 * pipe empty with no writer), or -1 with errno: EBADF, ESPIPE (an offset
 * with a kernel pipe), EINVAL (an offset with a descriptor that cannot
 * seek, such as a socket; a negative offset; an unknown flag; len above
 * SSIZE_MAX; writing to an O_APPEND file), EAGAIN, EPIPE (no reader on
 * `out`; SIGPIPE unless PP_NOSIGPIPE), EINTR, ENOMEM, or any error of
 * read(2)/write(2) on fd.  PP_NONBLOCK on the pipe end acts as
 * PP_SPLICE_NONBLOCK, as O_NONBLOCK does for splice(2).  Spliced-in
 * buffers are neither merged into nor packets, as in Linux.  From a regular
 * file sealed with F_SEAL_SHRINK (a memfd) the file's pages are mapped into
 * the pipe instead of copied, until every pipe holding them has consumed
 * them; other files are read into pool pages.
 */
ssize_t pp_splice_from_fd(int fd, off_t *off, struct pp_end *out, size_t len, unsigned flags);
ssize_t pp_splice_to_fd(struct pp_end *in, int fd, off_t *off, size_t len, unsigned flags);

/*
 * Put the caller's memory into the pipe of `out` without copying, like
 * vmsplice(2) with the memory handed over.  Each segment of iov[0..n) is cut
 * into buffers of at most a page; never merged into, they are read, spliced,
 * tee'd and fanned out like any others.  For each segment that went in (in
 * part or whole), release(arg, seg) is called exactly once, where seg is the
 * part that went in, when every pipe that received its bytes is done with
 * them; until then the caller must not change or free that memory.  release
 * may be NULL.  It runs in the thread that drops the last reference, maybe
 * with a pipe's lock held: it must not call pagepipe functions.
 * Waits while the pipe is full and nothing has gone in yet, unless
 * PP_SPLICE_NONBLOCK or the end has PP_NONBLOCK; once something went in it
 * returns what fitted, as vmsplice(2) does.  The buffers are not packets,
 * even in packet mode (as in Linux).  Returns the bytes placed (release is
 * then due for them; at most 0x7ffff000), or
 * -1 with errno EBADF, EINVAL (n > IOV_MAX, unknown flag), EFAULT (iov or a
 * segment NULL), EAGAIN, EPIPE (no reader; SIGPIPE unless PP_NOSIGPIPE),
 * EINTR, ENOMEM -- and then no release call is due.
 */
ssize_t pp_vmsplice(struct pp_end *out, const struct iovec *iov, unsigned long n,
                    unsigned flags, void (*release)(void *arg, const struct iovec *iov),
                    void *arg);

/*
 * The zero-copy reader.  pp_peek fills iov[0..max) with the readable bytes
 * of the pipe in place, one segment per buffer, oldest first, without
 * consuming them; it waits like pp_read() for data (EAGAIN with
 * PP_NONBLOCK) and returns the number of segments, 0 at end of file (or
 * when max is 0).  The segments stay valid until they are consumed; only
 * one thread may peek and consume an end at a time, and nothing else may
 * take data from that end (pp_read, pp_splice, pp_fanout) while it holds
 * segments.  pp_consume releases the first n
 * readable bytes (freeing their pages) and returns n, or -1 with EINVAL when
 * fewer than n bytes are there.  Errors: EBADF, EINVAL (max < 0 or above
 * IOV_MAX), EFAULT (iov NULL), EINTR.
 */
ssize_t pp_peek(struct pp_end *in, struct iovec *iov, int max);
ssize_t pp_consume(struct pp_end *in, size_t n);

/*
 * The zero-copy writer.  pp_reserve fills iov[0..max) with free space of
 * the pipe of `out` to write in place: up to len bytes of fresh pages, at
 * most max pages and 64, and on a PP_SHARED pipe at most half its capacity
 * (so the reader drains one half while the writer fills the other, as
 * pp_write's batches do), not yet visible to readers.  The pages come in
 * address order, one segment per run of pages adjacent in memory (whole
 * pages, PP_PAGE_SIZE bytes each, the last segment ending where len does):
 * a run filled in one copy is faster than page by page when a reader on
 * another CPU has just read those pages.  In packet mode each segment is
 * one page.  It waits like pp_write() for room
 * (EAGAIN with PP_NONBLOCK) and returns the number of segments (at least
 * one), or 0 when len or max is 0.  The space counts as used for other
 * writers until pp_commit publishes the first n bytes of it, in order
 * (after anything written before the commit), and gives the rest back:
 * a commit of at most PP_PIPE_BUF bytes is atomic; in packet mode each
 * page committed is a packet.  pp_commit returns n, or 0 with nothing
 * reserved and n 0.  One reservation per handle at a time; pp_close()
 * gives back an uncommitted one, and so does the death of the process
 * (on a PP_SHARED pipe: the space comes back, readers never see it).  A
 * forked child does not inherit its parent's reservation.  With pp_peek
 * and pp_consume on the other end no byte is copied, between threads or,
 * on a PP_SHARED pipe, between processes.  Errors: EBADF (not a write
 * end), EINVAL (max < 0 or above IOV_MAX; for pp_commit, n more than was
 * reserved, and the reservation stays), EFAULT (iov NULL), EBUSY (the
 * handle has a reservation, or another thread is ending it), EAGAIN,
 * EPIPE (no reader: SIGPIPE unless PP_NOSIGPIPE; a pp_commit that fails
 * so has given the space back), EINTR, ENOMEM, EIO (a shared pipe whose
 * lock a stopped process holds, or a corrupt one; a pp_commit that fails
 * so keeps the reservation, to commit again or close).
 */
ssize_t pp_reserve(struct pp_end *out, struct iovec *iov, int max, size_t len);
ssize_t pp_commit(struct pp_end *out, size_t n);

/*
 * The page pool shared by all private pipes of the process (a PP_SHARED
 * pipe's pages live in its own shared memory: see pp_shared_stats; the
 * pool's bounds and counts do not include them).  A page a pipe drains
 * goes back to the pool, which keeps idle pages for reuse up to the room
 * left in the open pipes (pipe_pages - pages_in_use) or 64, whichever is
 * more, but never more than cache_max (default LONG_MAX: no bound beyond
 * that), and returns the rest to the system at once.  So streaming through
 * a deep pipe does not unmap and map pages afresh, and once the pipes are
 * closed at most 64 idle pages are kept.  While many pages are in use,
 * fresh ones are mapped in batches (in_use/8, at most 64, never beyond the
 * room for idle pages); the unused part of a batch counts as cached.  A
 * page the system refuses to unmap (ENOMEM from munmap at vm.max_map_count)
 * stays cached, even above the bound.
 */
struct pp_pool_stats {
	long pages_in_use; /* pages holding pipe data now */
	long pages_cached; /* idle pages kept for reuse */
	long cache_max;    /* hard bound on pages_cached (LONG_MAX: none) */
	long limit;        /* bound on pages_in_use, 0 for none */
	long pipe_pages;   /* capacity of all open pipes, in pages */
};

/* Fill *st; returns 0, or -1 with EFAULT. */
int pp_pool_stats(struct pp_pool_stats *st);

/* Set the hard bound on cached idle pages (trimming at once; 0 keeps none,
 * LONG_MAX is the default); returns the old one, or -1 with EINVAL for a
 * negative bound. */
long pp_pool_setcache(long pages);

/* Return every cached idle page to the system; returns how many. */
long pp_pool_trim(void);

/*
 * Bound the pages holding data in all pipes (0, the default: no bound).  A write that
 * needs a page beyond it fails with ENOMEM, or returns what it wrote before.
 * Returns the old bound, or -1 with EINVAL for a negative one.
 */
long pp_pool_setlimit(long pages);

/* The library's version string, PAGEPIPE_VERSION at build time. */
const char *pp_version(void);

#ifdef __cplusplus
}
#endif
#endif /* PAGEPIPE_H */
