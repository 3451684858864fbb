/*
 * fault.h - a fault injector for the library's allocations and system calls.
 *
 * Include it (after harness.h) in exactly one source file of a test program.
 * It defines malloc, calloc, free, mmap, munmap, eventfd, read, write,
 * close, readv, preadv, writev, pwritev, fstat, lseek and fcntl in the
 * test executable.  The executable is linked with build/libpagepipe.a, and a
 * definition in the executable takes precedence over the C library's (and a
 * sanitizer runtime's) for every caller in the process, so these wrappers see
 * every such call the library makes.  Outside an armed window (fi_arm() ..
 * fi_disarm(), which the test puts around single pp_* calls) they only pass
 * the call on; inside one, each call that can fail gets the next number, and
 * call number fail_at, or every fail_every-th call, fails instead of running:
 *
 *   malloc, calloc  NULL, errno ENOMEM
 *   mmap            MAP_FAILED, errno ENOMEM
 *   eventfd         -1, errno EMFILE, ENFILE or ENOMEM in turn
 *   read, write     -1, errno EAGAIN (what a non-blocking eventfd reports
 *                   when its counter is 0 or would overflow)
 *   close           the descriptor IS closed, then -1 with errno EINTR: the
 *                   only way close(2) fails on Linux without leaking it
 *   readv, preadv   (the descriptor side of pp_splice_from_fd) by call
 *                   number n: n % 4 == 0 a short transfer instead (the call
 *                   runs with its segments cut to half the bytes, at least
 *                   one; FI_BIT in op_short), else -1 with errno EIO, EINTR
 *                   or EAGAIN, chosen by n
 *   writev, pwritev (pp_splice_to_fd) likewise: short, or EIO, ENOSPC,
 *                   EINTR, EAGAIN
 *   fstat           -1, errno ENOMEM (the library checks the descriptor)
 *   lseek           -1, errno EOVERFLOW (the library checks it can seek)
 *   fcntl           -1, errno EINVAL (the library asks for O_APPEND)
 * The errno of each kind's last failure in the window is in op_kind_errno.
 *
 * Not failed, on purpose:
 *   munmap  counted (to account for mapped pages, by length) but not
 *           failed in the numbered sequence: unmapping one page fails only
 *           when it splits a mapping at vm.max_map_count, invisible to the
 *           caller (the pool keeps the page).  test/pool_batch.c checks
 *           that case with fi.munmap_refuse, which fails every munmap;
 *   futex   the library calls syscall(SYS_futex) for its lock and its waits
 *           and treats it as infallible (a failed wake would be a lost
 *           wakeup, a failed wait a spin); a single-threaded workload makes
 *           no futex call anyway, so syscall() is not wrapped at all;
 *   free    wrapped only to account for the library's live blocks: calloc
 *           ones (rings, slot arrays, page-table leaves) and malloc ones
 *           (end handles, vmsplice gift records), each with the tag the
 *           test set in fi.tag when it was made;
 *   raise   (SIGPIPE) not wrapped: the library's only signal.
 *
 * Forwarding.  Under ASan and TSan the sanitizer runtime intercepts most of
 * these functions itself and exports the interceptors as __interceptor_NAME
 * (the runtime's plain NAME is a weak alias that our strong definition
 * overrides).  A weak reference to __interceptor_NAME is non-NULL exactly
 * when such a runtime is linked in, static (clang) or shared (gcc), and
 * intercepts NAME; the wrapper then forwards to it, so the sanitizer still sees every allocation
 * and descriptor.  Otherwise allocations go to glibc's __libc_malloc /
 * __libc_calloc / __libc_free, and system calls straight to syscall(2), so
 * dlsym(RTLD_NEXT) (which itself allocates) is never needed and no -ldl.
 * The wrappers run before the sanitizer runtime is initialised (its
 * start-up code calls mmap and malloc through the PLT), so they and all
 * they call are exempt from sanitizer instrumentation (FI_NOSAN).
 *
 * Fork mode (fork_each): at every failable call the wrapper forks; the
 * child fails that call and carries on as a run failing exactly that call,
 * the parent waits for it and carries on unharmed.  The child first swaps
 * the library's eventfds for private copies (same numbers and counters),
 * since a forked child would otherwise share them with its parent; the
 * test's on_child hook does the same for the test's own descriptors.
 *
 * Single-threaded use only: the counters are plain globals.
 */
#ifndef PP_TEST_FAULT_H
#define PP_TEST_FAULT_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__clang__)
#define FI_NOSAN                                                             \
	__attribute__((disable_sanitizer_instrumentation,                        \
	               no_sanitize("address", "thread", "undefined")))
#else
#define FI_NOSAN __attribute__((no_sanitize("address", "thread", "undefined")))
#endif

enum fi_kind {
	FI_MALLOC, FI_CALLOC, FI_MMAP, FI_EVENTFD, FI_READ, FI_WRITE, FI_CLOSE,
	FI_READV, FI_WRITEV, FI_FSTAT, FI_LSEEK, FI_FCNTL, FI_NKINDS
};
static const char *const fi_kind_name[FI_NKINDS] = {
	"malloc", "calloc", "mmap", "eventfd", "read", "write", "close",
	"readv", "writev", "fstat", "lseek", "fcntl",
};
#define FI_BIT(k) (1u << (k))
#define FI_ALLOC_BITS (FI_BIT(FI_MALLOC) | FI_BIT(FI_CALLOC) | FI_BIT(FI_MMAP))
#define FI_EFDIO_BITS (FI_BIT(FI_READ) | FI_BIT(FI_WRITE))

#define FI_MAX_BLOCKS 4096
#define FI_MAX_FDS 64

static struct {
	int armed;
	unsigned long calls;      /* failable calls made while armed, in all */
	unsigned long fail_at;    /* fail call number fail_at (1-based); 0: none */
	unsigned long fail_every; /* fail every fail_every-th call; 0: none */
	unsigned long injected;   /* failures injected */
	unsigned op_mask;         /* FI_BIT of the kinds failed in this window */
	unsigned op_calls;        /* failable calls in this window */
	int op_errno;             /* errno of the last failure injected */
	unsigned op_short;        /* FI_BIT of the kinds cut short in this window */
	int op_kind_errno[FI_NKINDS]; /* errno of each kind's last failure in it */
	int tag;                  /* set by the test: recorded with each block */
	unsigned long per_kind[FI_NKINDS];
	unsigned char *trace;     /* if set: kind of call n goes to trace[n-1] */
	unsigned long trace_cap;
	const unsigned char *expect; /* if set: call n must be of kind expect[n-1] */
	unsigned long expect_len;
	int mismatch;             /* a call was not of the expected kind */
	/* Fork mode: at every failable call, fork; the child fails the call
	 * (it becomes a run with fail_at = that call), the parent waits for
	 * it, hands its wait status to on_child and goes on unharmed. */
	int fork_each;
	void (*on_child)(pid_t pid, unsigned long n, int status); /* pid 0: in the child */
	unsigned long unexpected; /* read/write/close on a descriptor not ours */

	/* What the library holds: pages it mapped (minus unmapped), its
	 * calloc blocks not yet freed, its eventfds not yet closed. */
	long maps;
	int munmap_refuse; /* set: every munmap fails with ENOMEM, unmapping nothing */
	unsigned nblocks;
	struct { void *p; size_t nmemb, size; int tag; bool is_malloc; } blocks[FI_MAX_BLOCKS];
	unsigned nfds;
	int fds[FI_MAX_FDS];
} fi;

/* Sanitizer interceptors, NULL without a sanitizer runtime. */
extern void *__interceptor_malloc(size_t) __attribute__((weak));
extern void *__interceptor_calloc(size_t, size_t) __attribute__((weak));
extern void __interceptor_free(void *) __attribute__((weak));
extern void *__interceptor_mmap(void *, size_t, int, int, int, off_t) __attribute__((weak));
extern int __interceptor_munmap(void *, size_t) __attribute__((weak));
extern int __interceptor_eventfd(unsigned, int) __attribute__((weak));
extern ssize_t __interceptor_read(int, void *, size_t) __attribute__((weak));
extern ssize_t __interceptor_write(int, const void *, size_t) __attribute__((weak));
extern int __interceptor_close(int) __attribute__((weak));
extern ssize_t __interceptor_readv(int, const struct iovec *, int) __attribute__((weak));
extern ssize_t __interceptor_preadv(int, const struct iovec *, int, off_t) __attribute__((weak));
extern ssize_t __interceptor_writev(int, const struct iovec *, int) __attribute__((weak));
extern ssize_t __interceptor_pwritev(int, const struct iovec *, int, off_t) __attribute__((weak));
extern int __interceptor_fstat(int, struct stat *) __attribute__((weak));
/* glibc's own entry points to its allocator. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void __libc_free(void *);

static inline void fi_arm(void)
{
	fi.op_mask = 0;
	fi.op_short = 0;
	memset(fi.op_kind_errno, 0, sizeof fi.op_kind_errno);
	fi.op_calls = 0;
	fi.armed = 1;
}

static inline void fi_disarm(void)
{
	fi.armed = 0;
}

/* A forked child shares its parent's open eventfds (one kernel object):
 * give the child private copies, same numbers, same counters, so that what
 * the child's library does to them does not change the parent's. */
FI_NOSAN static void fi_private_fds(void)
{
	for (unsigned i = 0; i < fi.nfds; i++) {
		char path[64], buf[512];
		snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fi.fds[i]);
		int in = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t len = in < 0 ? -1 : read(in, buf, sizeof buf - 1);
		if (in >= 0)
			close(in);
		const char *cnt = len > 0 ? (buf[len] = 0, strstr(buf, "eventfd-count:")) : NULL;
		const char *fl = len > 0 ? strstr(buf, "flags:") : NULL;
		if (!cnt || !fl)
			abort();
		unsigned long long count = strtoull(cnt + 14, NULL, 16);
		unsigned long flags = strtoul(fl + 6, NULL, 8);
		int efl = EFD_CLOEXEC | ((flags & O_NONBLOCK) ? EFD_NONBLOCK : 0);
		int nfd = __interceptor_eventfd ? __interceptor_eventfd((unsigned)count, efl)
		                                : (int)syscall(SYS_eventfd2, (unsigned)count, efl);
		if (nfd < 0 || dup3(nfd, fi.fds[i], O_CLOEXEC) < 0)
			abort();
		close(nfd);
	}
}

/* Fork mode, at call n: returns in the child, which fails call n, or in
 * the parent once the child has exited. */
__attribute__((noinline)) FI_NOSAN static void fi_fork_point(unsigned long n)
{
	fi.armed = 0;
	/* The child goes on with the private pipes it had: a debugging switch
	 * of the library's lets it (they are otherwise not the child's). */
	setenv("PP_DEBUG_FORK_KEEPS_PRIVATE", "1", 1);
	pid_t pid = fork();
	if (pid == 0) {
		fi.fork_each = 0;
		fi.fail_at = n;
		fi_private_fds();
		fi.on_child(0, n, 0);
	} else {
		int st = -1;
		if (pid > 0)
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
		fi.on_child(pid, n, st);
	}
	fi.armed = 1;
}

/* Count a failable call; true when it must fail. */
FI_NOSAN static bool fi_hit(int kind)
{
	if (!fi.armed)
		return false;
	unsigned long n = ++fi.calls;
	fi.per_kind[kind]++;
	fi.op_calls++;
	if (fi.trace && n <= fi.trace_cap)
		fi.trace[n - 1] = (unsigned char)kind;
	/* Up to the first failure a run must make the same calls as the
	 * run that recorded expect[]. */
	if (fi.expect && n <= fi.expect_len && !fi.fail_every && (!fi.fail_at || n <= fi.fail_at) &&
	    fi.expect[n - 1] != kind)
		fi.mismatch = 1;
	if (fi.fork_each) {
		int e = errno;
		fi_fork_point(n);
		errno = e;
	}
	bool fail = (fi.fail_at && n == fi.fail_at) ||
	            (fi.fail_every && n % fi.fail_every == 0);
	if (fail) {
		fi.injected++;
		fi.op_mask |= FI_BIT(kind);
	}
	return fail;
}

FI_NOSAN static void fi_track_block(void *p, size_t nmemb, size_t size, bool is_malloc)
{
	if (!fi.armed || !p)
		return;
	if (fi.nblocks < FI_MAX_BLOCKS) {
		fi.blocks[fi.nblocks].p = p;
		fi.blocks[fi.nblocks].nmemb = nmemb;
		fi.blocks[fi.nblocks].size = size;
		fi.blocks[fi.nblocks].tag = fi.tag;
		fi.blocks[fi.nblocks].is_malloc = is_malloc;
		fi.nblocks++;
	}
}

/* A failure of kind is injected: its errno. */
FI_NOSAN static void fi_set_errno(int kind, int e)
{
	errno = fi.op_errno = fi.op_kind_errno[kind] = e;
}

FI_NOSAN static int fi_fd_index(int fd)
{
	for (unsigned i = 0; i < fi.nfds; i++)
		if (fi.fds[i] == fd)
			return (int)i;
	return -1;
}

/* ---- the wrappers ------------------------------------------------------- */

FI_NOSAN void *malloc(size_t n)
{
	if (fi_hit(FI_MALLOC)) {
		fi_set_errno(FI_MALLOC, ENOMEM);
		return NULL;
	}
	/* Tracked with the test's tag: end handles (kept in the library's
	 * quarantine for good) and vmsplice gift records (freed after their
	 * release). */
	void *p = __interceptor_malloc ? __interceptor_malloc(n) : __libc_malloc(n);
	fi_track_block(p, 1, n, true);
	return p;
}

FI_NOSAN void *calloc(size_t n, size_t size)
{
	if (fi_hit(FI_CALLOC)) {
		fi_set_errno(FI_CALLOC, ENOMEM);
		return NULL;
	}
	void *p = __interceptor_calloc ? __interceptor_calloc(n, size) : __libc_calloc(n, size);
	fi_track_block(p, n, size, false);
	return p;
}

FI_NOSAN void free(void *p)
{
	/* Also when disarmed: the library frees a gift record wherever its
	 * last reference goes. */
	if (fi.nblocks && p) {
		for (unsigned i = 0; i < fi.nblocks; i++) {
			if (fi.blocks[i].p == p) {
				fi.blocks[i] = fi.blocks[--fi.nblocks];
				break;
			}
		}
	}
	if (__interceptor_free)
		__interceptor_free(p);
	else
		__libc_free(p);
}

FI_NOSAN void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fi_hit(FI_MMAP)) {
		fi_set_errno(FI_MMAP, ENOMEM);
		return MAP_FAILED;
	}
	void *p = __interceptor_mmap
	              ? __interceptor_mmap(addr, len, prot, flags, fd, off)
	              : (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (fi.armed && p != MAP_FAILED)
		fi.maps += (long)(len / 4096);
	return p;
}

FI_NOSAN int munmap(void *addr, size_t len)
{
	if (fi.munmap_refuse) { /* as the kernel at vm.max_map_count */
		errno = ENOMEM;
		return -1;
	}
	int r = __interceptor_munmap ? __interceptor_munmap(addr, len)
	                             : (int)syscall(SYS_munmap, addr, len);
	if (fi.armed && r == 0)
		fi.maps -= (long)(len / 4096);
	return r;
}

FI_NOSAN int eventfd(unsigned initval, int flags)
{
	if (fi_hit(FI_EVENTFD)) {
		static const int errs[] = { EMFILE, ENFILE, ENOMEM };
		fi_set_errno(FI_EVENTFD, errs[fi.injected % 3]);
		return -1;
	}
	int fd = __interceptor_eventfd ? __interceptor_eventfd(initval, flags)
	                               : (int)syscall(SYS_eventfd2, initval, flags);
	if (fi.armed && fd >= 0 && fi.nfds < FI_MAX_FDS)
		fi.fds[fi.nfds++] = fd;
	return fd;
}

FI_NOSAN ssize_t read(int fd, void *buf, size_t n)
{
	if (fi.armed && fi_fd_index(fd) < 0)
		fi.unexpected++;
	if (fi_hit(FI_READ)) {
		fi_set_errno(FI_READ, EAGAIN);
		return -1;
	}
	return __interceptor_read ? __interceptor_read(fd, buf, n)
	                          : syscall(SYS_read, fd, buf, n);
}

FI_NOSAN ssize_t write(int fd, const void *buf, size_t n)
{
	if (fi.armed && fi_fd_index(fd) < 0)
		fi.unexpected++;
	if (fi_hit(FI_WRITE)) {
		fi_set_errno(FI_WRITE, EAGAIN);
		return -1;
	}
	return __interceptor_write ? __interceptor_write(fd, buf, n)
	                           : syscall(SYS_write, fd, buf, n);
}

FI_NOSAN int close(int fd)
{
	int idx = fi.armed ? fi_fd_index(fd) : -1;
	if (fi.armed && idx < 0)
		fi.unexpected++;
	bool fail = fi_hit(FI_CLOSE);
	int r = __interceptor_close ? __interceptor_close(fd) : (int)syscall(SYS_close, fd);
	if (r == 0 && idx >= 0)
		fi.fds[idx] = fi.fds[--fi.nfds];
	if (fail) {
		fi_set_errno(FI_CLOSE, EINTR);
		return -1;
	}
	return r;
}

/*
 * The descriptor I/O of pp_splice_from_fd / pp_splice_to_fd.  On a
 * failure: 1 with the call to make instead, its segments cut to half the
 * bytes (short), or -1 with errno set.  0: make the call as it is.
 */
#define FI_SHORT_SEGS 64
FI_NOSAN static int fi_vec_fault(int kind, const struct iovec *iov, int cnt,
                                 struct iovec *cut, int *ncut)
{
	if (!fi_hit(kind))
		return 0;
	unsigned long n = fi.calls;
	size_t total = 0;
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	if (n % 4 == 0 && total > 1 && cnt > 0 && cnt <= FI_SHORT_SEGS) {
		size_t left = total / 2;
		int k = 0;
		for (; k < cnt && left; k++) {
			cut[k] = iov[k];
			if (cut[k].iov_len > left)
				cut[k].iov_len = left;
			left -= cut[k].iov_len;
		}
		*ncut = k;
		fi.op_short |= FI_BIT(kind);
		return 1;
	}
	static const int rerrs[] = { EIO, EINTR, EAGAIN };
	static const int werrs[] = { EIO, ENOSPC, EINTR, EAGAIN };
	/* (n % 4 == 0 is mostly the short case: mix the quarter in too.) */
	unsigned long k = n + n / 4;
	fi_set_errno(kind, kind == FI_READV ? rerrs[k % 3] : werrs[k % 4]);
	return -1;
}

/* readv, preadv, writev or pwritev, as the fault says: failed, cut short,
 * or passed on (to the sanitizer's interceptor when there is one, else
 * straight to the kernel, an offset as two longs, low then high: high is
 * 0 on 64-bit). */
enum fi_vec_op { FI_OP_READV, FI_OP_PREADV, FI_OP_WRITEV, FI_OP_PWRITEV };
FI_NOSAN static ssize_t fi_vec_call(enum fi_vec_op op, int fd, const struct iovec *iov, int cnt,
                                    off_t off)
{
	struct iovec cut[FI_SHORT_SEGS];
	bool rd = op == FI_OP_READV || op == FI_OP_PREADV;
	int f = fi_vec_fault(rd ? FI_READV : FI_WRITEV, iov, cnt, cut, &cnt);
	if (f < 0)
		return -1;
	if (f)
		iov = cut;
	long lo = (long)off, hi = (long)((unsigned long long)off >> 32 >> (8 * sizeof(long) - 32));
	switch (op) {
	case FI_OP_READV:
		return __interceptor_readv ? __interceptor_readv(fd, iov, cnt)
		                           : syscall(SYS_readv, fd, iov, cnt);
	case FI_OP_PREADV:
		return __interceptor_preadv ? __interceptor_preadv(fd, iov, cnt, off)
		                            : syscall(SYS_preadv, fd, iov, cnt, lo, hi);
	case FI_OP_WRITEV:
		return __interceptor_writev ? __interceptor_writev(fd, iov, cnt)
		                            : syscall(SYS_writev, fd, iov, cnt);
	default:
		return __interceptor_pwritev ? __interceptor_pwritev(fd, iov, cnt, off)
		                             : syscall(SYS_pwritev, fd, iov, cnt, lo, hi);
	}
}

FI_NOSAN ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	return fi_vec_call(FI_OP_READV, fd, iov, cnt, 0);
}

FI_NOSAN ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return fi_vec_call(FI_OP_PREADV, fd, iov, cnt, off);
}

FI_NOSAN ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	return fi_vec_call(FI_OP_WRITEV, fd, iov, cnt, 0);
}

FI_NOSAN ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return fi_vec_call(FI_OP_PWRITEV, fd, iov, cnt, off);
}

FI_NOSAN int fstat(int fd, struct stat *st)
{
	if (fi_hit(FI_FSTAT)) {
		fi_set_errno(FI_FSTAT, ENOMEM);
		return -1;
	}
	if (__interceptor_fstat)
		return __interceptor_fstat(fd, st);
#ifdef SYS_fstat
	return (int)syscall(SYS_fstat, fd, st);
#else
	return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
#endif
}

FI_NOSAN off_t lseek(int fd, off_t off, int whence)
{
	if (fi_hit(FI_LSEEK)) {
		fi_set_errno(FI_LSEEK, EOVERFLOW);
		return -1;
	}
	return (off_t)syscall(SYS_lseek, fd, off, whence);
}

FI_NOSAN int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *); /* as glibc takes it: one word, whatever it is */
	va_end(ap);
	if (fi_hit(FI_FCNTL)) {
		fi_set_errno(FI_FCNTL, EINVAL);
		return -1;
	}
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

/* ---- accounting -------------------------------------------------------- */

/* Live blocks the library got from calloc, leaving out those of exactly
 * skip_nmemb elements (0: leave out none). */
static inline unsigned fi_live_callocs(size_t skip_nmemb)
{
	unsigned n = 0;
	for (unsigned i = 0; i < fi.nblocks; i++)
		if (!fi.blocks[i].is_malloc && (!skip_nmemb || fi.blocks[i].nmemb != skip_nmemb))
			n++;
	return n;
}

/* Live blocks the library got from malloc while the test's tag was tag. */
static inline unsigned fi_live_mallocs(int tag)
{
	unsigned n = 0;
	for (unsigned i = 0; i < fi.nblocks; i++)
		if (fi.blocks[i].is_malloc && fi.blocks[i].tag == tag)
			n++;
	return n;
}

#endif
