/*
 * splice_fd.h - what the programs on pp_splice_from_fd and pp_splice_to_fd
 * (splice_fd_*.c) share, after harness.h and helpers.h:
 *   - the check around every case (t_around_cases(count_fds_before,
 *     nothing_left_after)): afterwards no pool page is in use and as many
 *     descriptors are open as before;
 *   - descriptors: tmp_file (an unlinked temporary file holding a test
 *     stream), reopen, file_is, pread_all, write_all, open_pair (a
 *     socketpair), set_nonblock, fd_nread, k_free_slots; BIG_LEN, a length
 *     larger than anything there is;
 *   - the pipe side: put_stream, put_some, take_verify, fd_take_verify,
 *     pp_free_slots;
 *   - threads on the other side of a descriptor: a feeder that writes a
 *     stream into it in random pieces (from_stream checks what arrives),
 *     a drainer that reads one out of it (to_stream writes it);
 *   - a descriptor splice blocked in a thread of its own (struct blocked,
 *     start_blocked waits until it sleeps in the call).
 *
 * Everything is static inline, so a program using part of it compiles
 * warning-free.
 */
#ifndef PP_TEST_SPLICE_FD_H
#define PP_TEST_SPLICE_FD_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "pagepipe.h"
#include "harness/harness.h"
#include "harness/helpers.h"

/* ---- helpers ------------------------------------------------------------ */

/* Around every case (t_around_cases): afterwards no pool page is in use
 * and the number of open descriptors is what it was before. */
static int fds_before_case;

static inline void count_fds_before(void)
{
	fds_before_case = tp_count_fds();
}

static inline void nothing_left_after(void)
{
	CHECK_EQ(tp_pages_in_use(), 0);
	CHECK_EQ(tp_count_fds(), fds_before_case);
}

/* A length larger than anything there is (splice(2) takes up to SSIZE_MAX). */
#define BIG_LEN ((size_t)1 << 40)

static inline size_t min2(size_t a, size_t b)
{
	return a < b ? a : b;
}

static inline size_t min3(size_t a, size_t b, size_t c)
{
	return min2(min2(a, b), c);
}

static inline int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* pread until n bytes or end of file; the count. */
static inline size_t pread_all(int fd, void *buf, size_t n, off_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* A temporary file of size bytes of stream seed, already unlinked, its
 * position at 0. */
static inline int tmp_file(size_t size, unsigned seed)
{
	char path[] = "/tmp/pp_splice_fd.XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -1;
	unlink(path);
	unsigned char *buf = malloc(65536);
	if (!buf) {
		close(fd);
		return -1;
	}
	for (size_t done = 0; done < size;) {
		size_t n = min2(65536, size - done);
		tp_fill(buf, n, seed, done);
		if (write_all(fd, buf, n)) {
			free(buf);
			close(fd);
			return -1;
		}
		done += n;
	}
	free(buf);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* Another open file description of the file behind fd, with other flags
 * (its own position); works for unlinked files too. */
static inline int reopen(int fd, int flags)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	return open(path, flags | O_CLOEXEC);
}

/* The file is exactly size bytes of stream seed. */
static inline int file_is(int fd, size_t size, unsigned seed)
{
	struct stat st;
	if (fstat(fd, &st) || (size_t)st.st_size != size) {
		fprintf(stderr, "file size %lld, want %zu\n", (long long)st.st_size, size);
		return 0;
	}
	unsigned char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	size_t got = pread_all(fd, buf, size, 0);
	long bad = got == size ? tp_verify(buf, size, seed, 0) : 0;
	free(buf);
	if (got != size || bad >= 0) {
		fprintf(stderr, "file content differs at byte %ld\n", bad);
		return 0;
	}
	return 1;
}

/* Read n bytes (the pipe must hold them) and check they are stream seed
 * from off on. */
static inline int take_verify(struct pp_end *r, size_t n, unsigned seed, size_t off)
{
	unsigned char buf[16384];
	while (n) {
		ssize_t got = pp_read(r, buf, min2(n, sizeof buf));
		if (got <= 0) {
			fprintf(stderr, "take_verify: pp_read = %zd (%s), %zu bytes due\n", got,
			        strerror(errno), n);
			return 0;
		}
		long bad = tp_verify(buf, (size_t)got, seed, off);
		if (bad >= 0) {
			fprintf(stderr, "take_verify: stream %u byte %zu differs\n", seed,
			        off + (size_t)bad);
			return 0;
		}
		off += (size_t)got;
		n -= (size_t)got;
	}
	return 1;
}

/* Write n bytes of stream seed from off into the pipe (they must fit). */
static inline int put_stream(struct pp_end *w, size_t n, unsigned seed, size_t off)
{
	unsigned char buf[16384];
	while (n) {
		size_t k = min2(n, sizeof buf);
		tp_fill(buf, k, seed, off);
		if (pp_write(w, buf, k) != (ssize_t)k)
			return 0;
		off += k;
		n -= k;
	}
	return 1;
}

/* Write up to n bytes of stream seed from off, as many as the free slots
 * take without waiting; the count. */
static inline size_t put_some(struct pp_end *w, size_t n, unsigned seed, size_t off)
{
	unsigned char buf[16384];
	size_t done = 0;
	int fl = pp_getfl(w);
	pp_setfl(w, fl | PP_NONBLOCK);
	while (done < n) {
		size_t k = min2(n - done, sizeof buf);
		tp_fill(buf, k, seed, off + done);
		ssize_t got = pp_write(w, buf, k);
		if (got <= 0)
			break;
		done += (size_t)got;
		if ((size_t)got < k)
			break;
	}
	pp_setfl(w, fl);
	return done;
}

/* Read exactly n bytes from fd (blocking, or polling a non-blocking one for
 * up to 5 s) and check they are stream seed from off. */
static inline int fd_take_verify(int fd, size_t n, unsigned seed, size_t off)
{
	unsigned char buf[16384];
	while (n) {
		ssize_t got = read(fd, buf, min2(n, sizeof buf));
		if (got < 0 && errno == EAGAIN) {
			struct pollfd p = { fd, POLLIN, 0 };
			if (poll(&p, 1, 5000) == 1)
				continue;
		}
		if (got <= 0) {
			fprintf(stderr, "fd_take_verify: read = %zd (%s), %zu bytes due\n", got,
			        strerror(errno), n);
			return 0;
		}
		long bad = tp_verify(buf, (size_t)got, seed, off);
		if (bad >= 0) {
			fprintf(stderr, "fd_take_verify: byte %zu differs\n", off + (size_t)bad);
			return 0;
		}
		off += (size_t)got;
		n -= (size_t)got;
	}
	return 1;
}

/* Bytes waiting in a socket or kernel pipe. */
static inline int fd_nread(int fd)
{
	int n = -1;
	if (ioctl(fd, FIONREAD, &n))
		return -1;
	return n;
}

static inline int set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* How many 4096-byte non-blocking writes fit now: the free slots. */
static inline int pp_free_slots(struct pp_end *w)
{
	static const char page[4096];
	int fl = pp_getfl(w), n = 0;
	pp_setfl(w, fl | PP_NONBLOCK);
	while (n < 1024 && pp_write(w, page, sizeof page) == (ssize_t)sizeof page)
		n++;
	pp_setfl(w, fl);
	return n;
}

static inline int k_free_slots(int w)
{
	static const char page[4096];
	int n = 0;
	set_nonblock(w, 1);
	while (n < 1024 && write(w, page, sizeof page) == (ssize_t)sizeof page)
		n++;
	set_nonblock(w, 0);
	return n;
}

static inline int open_pair(int sv[2], int type)
{
	return socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv);
}

/* ---- threads on the other side of a descriptor -------------------------- */

/* Writes total bytes of stream seed to fd in random chunks, then shuts the
 * socket down for writing (how = 1) or closes fd (how = 2). */
struct feeder {
	int fd;
	unsigned seed;
	size_t total;
	uint32_t rs;
	int how;
	int err;
};

static inline void *feeder_main(void *arg)
{
	struct feeder *f = arg;
	unsigned char *buf = malloc(20000);
	size_t done = 0;
	while (buf && done < f->total) {
		size_t n = tp_chunk(buf, 20000, &f->rs, f->seed, done, f->total);
		if (write_all(f->fd, buf, n)) {
			f->err = errno;
			break;
		}
		done += n;
	}
	free(buf);
	if (f->how == 1)
		shutdown(f->fd, SHUT_WR);
	else if (f->how == 2)
		close(f->fd);
	return NULL;
}

/* Reads fd to end of file, checking stream seed; counts the bytes. */
struct drainer {
	int fd;
	unsigned seed;
	size_t got;
	int bad;
};

static inline void *drainer_main(void *arg)
{
	struct drainer *d = arg;
	unsigned char buf[16384];
	for (;;) {
		ssize_t n = read(d->fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				d->bad = 1;
			break;
		}
		if (!d->bad && tp_verify(buf, (size_t)n, d->seed, d->got) >= 0)
			d->bad = 1;
		d->got += (size_t)n;
	}
	return NULL;
}

/* Splice everything fd delivers into a fresh pipe until end of input,
 * checking it is stream seed; the count. */
static inline size_t from_stream(int fd, unsigned seed, uint32_t *rs)
{
	struct pp_end *e[2];
	size_t got = 0;
	CHECK_EQ(pp_pipe(e, 0), 0);
	for (;;) {
		size_t len = tp_rand(rs) % 3 ? 1 + tp_rand(rs) % 100000 : 1 + tp_rand(rs) % 3000;
		ssize_t n = pp_splice_from_fd(fd, NULL, e[1], len, 0);
		if (n < 0) {
			CHECK(n >= 0);
			break;
		}
		if (n == 0)
			break;
		CHECK((size_t)n <= len);
		CHECK_EQ(pp_nread(e[0]), n);
		if (!take_verify(e[0], (size_t)n, seed, got)) {
			CHECK(0);
			break;
		}
		got += (size_t)n;
	}
	pp_close(e[0]);
	pp_close(e[1]);
	return got;
}

/* Write total bytes of stream seed through a fresh pipe into fd with
 * pp_splice_to_fd; each call must take from the front of the pipe. */
static inline void to_stream(int fd, size_t total, unsigned seed, uint32_t *rs)
{
	struct pp_end *e[2];
	size_t written = 0, sent = 0;
	CHECK_EQ(pp_pipe(e, 0), 0);
	while (sent < total) {
		size_t have = written - sent;
		size_t add = min2(tp_rand(rs) % (65536 - have + 1), total - written);
		add = put_some(e[1], add, seed, written);
		written += add;
		have += add;
		if (!have)
			continue;
		size_t len = tp_rand(rs) % 3 ? 1 + tp_rand(rs) % 100000 : 1 + tp_rand(rs) % 3000;
		ssize_t n = pp_splice_to_fd(e[0], fd, NULL, len, 0);
		if (n <= 0 || (size_t)n > min2(len, have)) {
			fprintf(stderr, "to_stream: to_fd(len %zu, %zu in pipe) = %zd (%s)\n", len,
			        have, n, strerror(errno));
			CHECK(0);
			break;
		}
		sent += (size_t)n;
		CHECK_EQ(pp_nread(e[0]), written - sent);
	}
	pp_close(e[0]);
	pp_close(e[1]);
}

struct blocked {
	struct pp_end *end;
	int fd;
	off_t off;
	int use_off;
	int to; /* 1: pp_splice_to_fd, 0: pp_splice_from_fd */
	size_t len;
	_Atomic pid_t tid;
	ssize_t ret;
	int err;
	int sigpipe;
	_Atomic int done;
};

static inline void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	sigset_t old;
	tp_sigpipe_block(&old);
	atomic_store(&b->tid, tp_gettid());
	off_t *op = b->use_off ? &b->off : NULL;
	b->ret = b->to ? pp_splice_to_fd(b->end, b->fd, op, b->len, 0)
	               : pp_splice_from_fd(b->fd, op, b->end, b->len, 0);
	b->err = errno;
	b->sigpipe = tp_sigpipe_taken();
	tp_sigpipe_restore(&old);
	atomic_store(&b->done, 1);
	return NULL;
}

/* Start b in a thread and wait until it sleeps in the call. */
static inline int start_blocked(pthread_t *t, struct blocked *b)
{
	atomic_store(&b->tid, 0);
	atomic_store(&b->done, 0);
	if (pthread_create(t, NULL, blocked_main, b))
		return 0;
	while (!atomic_load(&b->tid))
		t_sleep_ms(1);
	return tp_wait_asleep(atomic_load(&b->tid), 5.0) && !atomic_load(&b->done);
}

#endif
