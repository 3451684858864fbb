/*
 * splice_fd_matches_kernel.c - pp_splice_from_fd and pp_splice_to_fd
 * against splice(2) on a kernel pipe: the same calls compared count by
 * count where the semantics should match (page-aligned file offsets),
 * byte by byte where counts may legitimately differ (page cache
 * granularity), and errno by errno (kernel_errors_and_edges).  The
 * kernel_* cases after that one each pin down one place where the two
 * should agree and, when this was written, did not: len 0 and unknown
 * flags are answered before the descriptors are looked at and a len above
 * SSIZE_MAX is EINVAL; splice into an O_APPEND file is EINVAL; O_NONBLOCK
 * on the pipe's end makes the pipe side non-blocking; bytes spliced in
 * are not merged into by later writes; in packet mode spliced-in buffers
 * are not packets and a splice out crosses packets; poll does not wait
 * while a splice sleeps in the descriptor's write.
 * After every case: no page of the pool in use and no descriptor leaked
 * (splice_fd.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice_fd.h"

/* splice(2) with a kernel pipe, or the pagepipe call, on a struct tp. */
static ssize_t t_from(struct tp *t, int fd, off_t *off, size_t len, unsigned flags)
{
	if (!t->kernel)
		return pp_splice_from_fd(fd, off, t->e[1], len, flags);
	loff_t o = off ? *off : 0;
	ssize_t n = splice(fd, off ? &o : NULL, t->fd[1], NULL, len, flags);
	if (off)
		*off = o;
	return n;
}

static ssize_t t_to(struct tp *t, int fd, off_t *off, size_t len, unsigned flags)
{
	if (!t->kernel)
		return pp_splice_to_fd(t->e[0], fd, off, len, flags);
	loff_t o = off ? *off : 0;
	ssize_t n = splice(t->fd[0], NULL, fd, off ? &o : NULL, len, flags);
	if (off)
		*off = o;
	return n;
}

static long hash_bytes(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return (long)(h >> 1);
}

static long file_hash(int fd)
{
	struct stat st;
	if (fstat(fd, &st))
		return -1;
	unsigned char *b = malloc((size_t)st.st_size + 1);
	if (!b)
		return -1;
	size_t n = pread_all(fd, b, (size_t)st.st_size, 0);
	long h = hash_bytes(b, n) ^ (long)n;
	free(b);
	return h;
}

/* A random sequence of splices from a file (page-aligned offsets, so the
 * kernel's page-cache buffers line up with ours), splices to another file,
 * reads and FIONREAD, every count, errno, offset and position recorded. */
static size_t ks_size;
static int ks_src = -1;
static int ks_seen[4][2]; /* kernel run: [op][0 moved bytes, 1 EAGAIN] */

static void ks_count(int kernel, int op, ssize_t n)
{
	if (kernel && n > 0)
		ks_seen[op][0]++;
	else if (kernel && n < 0 && errno == EAGAIN)
		ks_seen[op][1]++;
}

static void kernel_sequence(struct tp_rec *r, int kernel)
{
	struct tp t;
	uint32_t rs = 0xc0ffee;
	int src = reopen(ks_src, O_RDONLY), dst = tmp_file(0, 0);
	if (src < 0 || dst < 0 || tp_open(&t, kernel, 0)) {
		TP_REC(r, "setup", -1);
		return;
	}
	static unsigned char buf[70000];
	for (int i = 0; i < 400; i++) {
		int op = (int)(tp_rand(&rs) % 6);
		size_t len = tp_rand(&rs) % 3 ? 1 + tp_rand(&rs) % 70000 : 4096 * (1 + tp_rand(&rs) % 20);
		off_t off;
		ssize_t n;
		switch (op) {
		case 0:
			off = (off_t)(4096 * (tp_rand(&rs) % (ks_size / 4096 + 3)));
			n = t_from(&t, src, &off, len, PP_SPLICE_NONBLOCK);
			ks_count(kernel, 0, n);
			TP_REC(r, "from file at offset", tp_res(n));
			TP_REC(r, "offset after", off);
			break;
		case 1:
			n = t_from(&t, src, NULL, 4096 * (1 + tp_rand(&rs) % 20), PP_SPLICE_NONBLOCK);
			ks_count(kernel, 1, n);
			TP_REC(r, "from file at position", tp_res(n));
			TP_REC(r, "position after", lseek(src, 0, SEEK_CUR));
			if (tp_rand(&rs) % 8 == 0)
				lseek(src, (off_t)(4096 * (tp_rand(&rs) % (ks_size / 4096 + 1))), SEEK_SET);
			break;
		case 2:
			off = (off_t)(tp_rand(&rs) % 300000);
			n = t_to(&t, dst, &off, len, PP_SPLICE_NONBLOCK);
			ks_count(kernel, 2, n);
			TP_REC(r, "to file at offset", tp_res(n));
			TP_REC(r, "offset after", off);
			break;
		case 3:
			n = t_to(&t, dst, NULL, len, PP_SPLICE_NONBLOCK);
			ks_count(kernel, 3, n);
			TP_REC(r, "to file at position", tp_res(n));
			TP_REC(r, "position after", lseek(dst, 0, SEEK_CUR));
			break;
		case 4:
			if (tp_nread(&t, 0) > 0) {
				n = tp_read(&t, buf, len);
				TP_REC(r, "read", tp_res(n));
				TP_REC(r, "read bytes", n > 0 ? hash_bytes(buf, (size_t)n) : 0);
			}
			break;
		default:
			break;
		}
		TP_REC(r, "FIONREAD", tp_nread(&t, 0));
	}
	/* Drain, and compare what came out and what the file got. */
	for (;;) {
		int left = tp_nread(&t, 0);
		if (left <= 0)
			break;
		ssize_t n = tp_read(&t, buf, sizeof buf);
		TP_REC(r, "final read", tp_res(n));
		TP_REC(r, "final read bytes", n > 0 ? hash_bytes(buf, (size_t)n) : 0);
		if (n <= 0)
			break;
	}
	TP_REC(r, "destination file", file_hash(dst));
	tp_close(&t);
	close(src);
	close(dst);
}

static void kernel_file_aligned_sequence(void)
{
	ks_size = 300000;
	ks_src = tmp_file(ks_size, 161);
	CHECK(ks_src >= 0);
	memset(ks_seen, 0, sizeof ks_seen);
	TP_BOTH(kernel_sequence);
	/* The sequence did reach both full and empty pipes and moved data
	 * every way, so the comparison means something. */
	for (int op = 0; op < 4; op++) {
		CHECK(ks_seen[op][0] > 5);
		CHECK(ks_seen[op][1] > 0);
	}
	close(ks_src);
	ks_src = -1;
}

/* Unaligned offsets and a part-filled pipe: the kernel may take less (its
 * buffers are page-cache pages); compare only the bytes each one moved. */
static void kernel_file_unaligned_bytes(void)
{
	uint32_t rs = 0xbadcafe;
	const size_t size = 400000;
	int f = tmp_file(size, 171);
	CHECK(f >= 0);
	static unsigned char a[65536], b[65536];
	for (long i = 0, rounds = t_scaled(60); i < rounds; i++) {
		struct tp k, p;
		CHECK_EQ(tp_open(&k, 1, 0), 0);
		CHECK_EQ(tp_open(&p, 0, 0), 0);
		size_t pre = tp_rand(&rs) % 3 ? 0 : tp_rand(&rs) % 60000;
		if (pre) {
			memset(a, 'p', pre);
			CHECK_EQ(tp_write(&k, a, pre), pre);
			CHECK_EQ(tp_write(&p, a, pre), pre);
		}
		off_t o0 = (off_t)(tp_rand(&rs) % (size + 100)), ok = o0, op = o0;
		size_t len = 1 + tp_rand(&rs) % 100000;
		ssize_t nk = t_from(&k, f, &ok, len, PP_SPLICE_NONBLOCK);
		ssize_t np = t_from(&p, f, &op, len, PP_SPLICE_NONBLOCK);
		CHECK(nk >= 0 || errno == EAGAIN);
		CHECK(np >= 0 || errno == EAGAIN);
		if (nk > 0) {
			CHECK_EQ(ok, o0 + nk);
			CHECK_EQ(tp_read(&k, a, pre), pre);
			CHECK_EQ(tp_read(&k, a, sizeof a), nk);
			CHECK(tp_verify(a, (size_t)nk, 171, (size_t)o0) < 0);
		}
		if (np > 0) {
			CHECK_EQ(op, o0 + np);
			CHECK_EQ(tp_read(&p, b, pre), pre);
			CHECK_EQ(tp_read(&p, b, sizeof b), np);
			CHECK(tp_verify(b, (size_t)np, 171, (size_t)o0) < 0);
		}
		/* End of file and "nothing fits" agree even where counts do not. */
		CHECK_EQ(nk == 0, np == 0);
		tp_close(&k);
		tp_close(&p);
	}
	close(f);
}

/* Errors and edge results both ways, compared with splice(2). */
static void kernel_errors(struct tp_rec *r, int kernel)
{
	struct tp t;
	sigset_t old;
	int f = tmp_file(20000, 181), sv[2], kp[2];
	int ro = reopen(f, O_RDONLY), wo = reopen(f, O_WRONLY);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	off_t off;
	tp_sigpipe_block(&old);

	tp_open(&t, kernel, 0);
	int closed = dup(f); /* a number nothing uses until it is used */
	close(closed);
	tp_write(&t, "0123456789", 10);
	/* wrong ends, wrong descriptors */
	if (kernel) {
		TP_REC(r, "from file into a read end",
		       tp_res(splice(f, NULL, t.fd[0], NULL, 10, 0)));
		TP_REC(r, "to file from a write end",
		       tp_res(splice(t.fd[1], NULL, f, NULL, 10, 0)));
	} else {
		TP_REC(r, "from file into a read end", tp_res(pp_splice_from_fd(f, NULL, t.e[0], 10, 0)));
		TP_REC(r, "to file from a write end", tp_res(pp_splice_to_fd(t.e[1], f, NULL, 10, 0)));
	}
	TP_REC(r, "from fd -1", tp_res(t_from(&t, -1, NULL, 10, 0)));
	TP_REC(r, "to fd -1", tp_res(t_to(&t, -1, NULL, 10, 0)));
	TP_REC(r, "from closed fd", tp_res(t_from(&t, closed, NULL, 10, 0)));
	TP_REC(r, "to closed fd", tp_res(t_to(&t, closed, NULL, 10, 0)));
	TP_REC(r, "from write-only file", tp_res(t_from(&t, wo, NULL, 10, 0)));
	TP_REC(r, "to read-only file", tp_res(t_to(&t, ro, NULL, 10, 0)));
	pipe2(kp, O_CLOEXEC);
	TP_REC(r, "from a kernel pipe's write end", tp_res(t_from(&t, kp[1], NULL, 10, 0)));
	TP_REC(r, "to a kernel pipe's read end", tp_res(t_to(&t, kp[0], NULL, 10, 0)));
	off = 0;
	TP_REC(r, "offset with a kernel pipe (from)", tp_res(t_from(&t, kp[0], &off, 10, 0)));
	TP_REC(r, "offset with a kernel pipe (to)", tp_res(t_to(&t, kp[1], &off, 10, 0)));
	off = -1;
	TP_REC(r, "negative offset (from)", tp_res(t_from(&t, f, &off, 10, 0)));
	TP_REC(r, "negative offset (to)", tp_res(t_to(&t, f, &off, 10, 0)));
	TP_REC(r, "unknown flag (from)", tp_res(t_from(&t, f, NULL, 10, 0x10)));
	TP_REC(r, "unknown flag (to)", tp_res(t_to(&t, f, NULL, 10, 0x100)));
	TP_REC(r, "len 0 (from)", tp_res(t_from(&t, f, NULL, 0, 0)));
	TP_REC(r, "len 0 (to)", tp_res(t_to(&t, f, NULL, 0, 0)));
	off = INT64_MAX - 5;
	TP_REC(r, "from file near the largest offset", tp_res(t_from(&t, f, &off, 10, 0)));
	TP_REC(r, "offset after", off);
	off = INT64_MAX - 5;
	TP_REC(r, "to file near the largest offset", tp_res(t_to(&t, f, &off, 10, 0)));
	TP_REC(r, "offset after", off);
	off = (off_t)1 << 50;
	TP_REC(r, "to file at 2^50", tp_res(t_to(&t, f, &off, 3, 0)));
	TP_REC(r, "offset after", off);
	off = 20000;
	TP_REC(r, "from file at its end", tp_res(t_from(&t, f, &off, 10, 0)));
	off = 19995;
	TP_REC(r, "from file, 5 bytes left", tp_res(t_from(&t, f, &off, 10, 0)));
	TP_REC(r, "offset after", off);
	TP_REC(r, "FIONREAD", tp_nread(&t, 0));
	TP_REC(r, "to /dev/null", tp_res(t_to(&t, null, NULL, BIG_LEN, 0)));
	TP_REC(r, "FIONREAD", tp_nread(&t, 0));
	TP_REC(r, "to file, empty pipe, nonblock", tp_res(t_to(&t, f, NULL, 10, PP_SPLICE_NONBLOCK)));
	TP_REC(r, "from /dev/zero", tp_res(t_from(&t, zero, NULL, 1u << 20, 0)));
	TP_REC(r, "from file, full pipe, nonblock", tp_res(t_from(&t, f, NULL, 10, PP_SPLICE_NONBLOCK)));
	TP_REC(r, "position", lseek(f, 0, SEEK_CUR));
	/* kernel pipe at the other side: EOF, EPIPE */
	close(kp[1]);
	TP_REC(r, "to_fd, drain", tp_res(t_to(&t, null, NULL, BIG_LEN, 0)));
	TP_REC(r, "from a kernel pipe without writer", tp_res(t_from(&t, kp[0], NULL, 10, 0)));
	close(kp[0]);
	pipe2(kp, O_CLOEXEC);
	close(kp[0]);
	tp_write(&t, "abc", 3);
	TP_REC(r, "to a kernel pipe without reader", tp_res(t_to(&t, kp[1], NULL, 10, 0)));
	TP_REC(r, "SIGPIPE", tp_sigpipe_taken());
	close(kp[1]);
	/* sockets */
	open_pair(sv, SOCK_STREAM | SOCK_NONBLOCK);
	TP_REC(r, "from an empty non-blocking socket", tp_res(t_from(&t, sv[0], NULL, 10, 0)));
	close(sv[1]);
	TP_REC(r, "from a socket without peer", tp_res(t_from(&t, sv[0], NULL, 10, 0)));
	TP_REC(r, "to a socket without peer", tp_res(t_to(&t, sv[0], NULL, 10, 0)));
	TP_REC(r, "SIGPIPE", tp_sigpipe_taken());
	TP_REC(r, "FIONREAD", tp_nread(&t, 0));
	close(sv[0]);
	/* the pipe's ends */
	tp_close_end(&t, 1);
	TP_REC(r, "to file, writer gone, data left", tp_res(t_to(&t, null, NULL, 10, 0)));
	TP_REC(r, "to file, writer gone, empty", tp_res(t_to(&t, null, NULL, 10, 0)));
	TP_REC(r, "same, nonblock", tp_res(t_to(&t, null, NULL, 10, PP_SPLICE_NONBLOCK)));
	tp_close(&t);
	tp_open(&t, kernel, 0);
	tp_close_end(&t, 0);
	off = 0;
	TP_REC(r, "from file, reader gone", tp_res(t_from(&t, f, &off, 10, 0)));
	TP_REC(r, "SIGPIPE", tp_sigpipe_taken());
	TP_REC(r, "offset after", off);
	tp_close(&t);

	tp_sigpipe_restore(&old);
	close(f);
	close(ro);
	close(wo);
	close(null);
	close(zero);
}

static void kernel_errors_and_edges(void)
{
	TP_BOTH_ALL(kernel_errors);
}

/* Known disagreements with the kernel, one per case. */

/* Splice with len 0 returns 0 before looking at anything, unknown flags
 * are EINVAL before the descriptors are looked at, and a length above
 * SSIZE_MAX is EINVAL. */
static void kernel_precedence(struct tp_rec *r, int kernel)
{
	struct tp t;
	tp_open(&t, kernel, 0);
	int f = tmp_file(10, 1);
	TP_REC(r, "len 0, fd -1 (from)", tp_res(t_from(&t, -1, NULL, 0, 0)));
	TP_REC(r, "len 0, fd -1 (to)", tp_res(t_to(&t, -1, NULL, 0, 0)));
	TP_REC(r, "unknown flag, fd -1 (from)", tp_res(t_from(&t, -1, NULL, 10, 0x100)));
	TP_REC(r, "unknown flag, fd -1 (to)", tp_res(t_to(&t, -1, NULL, 10, 0x100)));
	/* A length above SSIZE_MAX is EINVAL, as for read(2) and write(2). */
	TP_REC(r, "len SIZE_MAX (from file)", tp_res(t_from(&t, f, NULL, SIZE_MAX, 0)));
	tp_write(&t, "abc", 3);
	TP_REC(r, "len SIZE_MAX (to file)", tp_res(t_to(&t, f, NULL, SIZE_MAX, 0)));
	TP_REC(r, "FIONREAD", tp_nread(&t, 0));
	if (kernel)
		TP_REC(r, "unknown flag, wrong end", tp_res(splice(f, NULL, t.fd[0], NULL, 10, 0x100)));
	else
		TP_REC(r, "unknown flag, wrong end", tp_res(pp_splice_from_fd(f, NULL, t.e[0], 10, 0x100)));
	tp_close(&t);
	close(f);
}

static void kernel_len_and_check_order(void)
{
	if (t_valgrind())
		SKIP("valgrind fails splice(2) on a bad descriptor with EBADF before the kernel checks len and flags");
	TP_BOTH_ALL(kernel_precedence);
}

/* splice(2) into a file opened O_APPEND is EINVAL. */
static void kernel_append(struct tp_rec *r, int kernel)
{
	struct tp t;
	int f = tmp_file(10, 1);
	int app = reopen(f, O_WRONLY | O_APPEND);
	tp_open(&t, kernel, 0);
	tp_write(&t, "abc", 3);
	TP_REC(r, "to O_APPEND file", tp_res(t_to(&t, app, NULL, 3, PP_SPLICE_NONBLOCK)));
	off_t off = 0;
	TP_REC(r, "to O_APPEND file at offset", tp_res(t_to(&t, app, &off, 3, PP_SPLICE_NONBLOCK)));
	struct stat st;
	fstat(f, &st);
	TP_REC(r, "file size", st.st_size);
	tp_close(&t);
	close(app);
	close(f);
}

static void kernel_append_file(void)
{
	TP_BOTH_ALL(kernel_append);
}

/* O_NONBLOCK on the pipe's end makes splice(2) non-blocking on the pipe
 * side (the kernel ORs SPLICE_F_NONBLOCK in).  Here with PP_NONBLOCK on
 * the end: EAGAIN expected; a pagepipe call still waiting after 300 ms is
 * recorded as 1 ("blocked") and unblocked. */
static void kernel_nonblock_end(struct tp_rec *r, int kernel)
{
	struct tp t;
	int f = tmp_file(100000, 191);
	tp_open(&t, kernel, PP_NONBLOCK);
	static char page[4096];
	while (tp_write(&t, page, sizeof page) == (ssize_t)sizeof page)
		;
	for (int to = 0; to < 2; to++) {
		if (to) {
			/* empty it, writer stays */
			while (tp_read(&t, page, sizeof page) > 0)
				;
		}
		if (kernel) {
			off_t off = 0;
			ssize_t n = to ? t_to(&t, f, &off, 10, 0) : t_from(&t, f, &off, 10, 0);
			TP_REC(r, to ? "to_fd, empty non-blocking pipe" : "from_fd, full non-blocking pipe",
			       tp_res(n));
			continue;
		}
		struct blocked b = { .end = t.e[to ? 0 : 1], .fd = f, .use_off = 1, .to = to,
		                     .len = 10 };
		pthread_t th;
		atomic_store(&b.tid, 0);
		atomic_store(&b.done, 0);
		if (pthread_create(&th, NULL, blocked_main, &b)) {
			TP_REC(r, "thread", -1);
			continue;
		}
		double end = t_now() + 0.3;
		while (!atomic_load(&b.done) && t_now() < end)
			t_sleep_ms(2);
		long res;
		if (atomic_load(&b.done)) {
			pthread_join(th, NULL);
			res = b.ret < 0 ? -(long)b.err : (long)b.ret;
		} else {
			res = 1; /* blocked: let it go */
			if (to)
				pp_write(t.e[1], "x", 1);
			else
				pp_read(t.e[0], page, sizeof page);
			pthread_join(th, NULL);
		}
		TP_REC(r, to ? "to_fd, empty non-blocking pipe" : "from_fd, full non-blocking pipe", res);
	}
	tp_close(&t);
	close(f);
}

static void kernel_nonblocking_pipe_end(void)
{
	TP_BOTH_ALL(kernel_nonblock_end);
}

/* Buffers spliced in from a descriptor are not merged into by later
 * writes in Linux (they are not PIPE_BUF_FLAG_CAN_MERGE), so a small write
 * after them takes a slot of its own. */
static const char zeros[4096];

static void kernel_merge(struct tp_rec *r, int kernel)
{
	int f = tmp_file(1000, 1), sv[2];
	for (int src = 0; src < 2; src++) {
		struct tp t;
		tp_open(&t, kernel, 0);
		open_pair(sv, SOCK_STREAM);
		(void)!write(sv[1], "hello", 5);
		off_t off = 0;
		TP_REC(r, "splice in", tp_res(src ? t_from(&t, sv[0], NULL, 100, 0)
		                                  : t_from(&t, f, &off, 100, 0)));
		TP_REC(r, "write 100", tp_res(tp_write(&t, zeros, 100)));
		TP_REC(r, "free slots after", kernel ? k_free_slots(t.fd[1]) : pp_free_slots(t.e[1]));
		close(sv[0]);
		close(sv[1]);
		tp_close(&t);
	}
	close(f);
}

static void kernel_no_merge_after_splice(void)
{
	TP_BOTH_ALL(kernel_merge);
}

/* Packet mode (O_DIRECT): buffers spliced in from a file are not packets
 * in Linux (a read crosses them), and a splice out of a packet pipe into a
 * file moves several packets in one call. */
static void kernel_packet(struct tp_rec *r, int kernel)
{
	struct tp t;
	static char buf[65536];
	int f = tmp_file(20000, 201), dst = tmp_file(0, 0);
	tp_open(&t, kernel, PP_PACKET);
	off_t off = 0;
	TP_REC(r, "splice 8192 in", tp_res(t_from(&t, f, &off, 8192, 0)));
	TP_REC(r, "read", tp_res(tp_read(&t, buf, sizeof buf)));
	TP_REC(r, "FIONREAD", tp_nread(&t, 0));
	while (tp_nread(&t, 0) > 0)
		tp_read(&t, buf, sizeof buf);
	tp_write(&t, zeros, 4096);
	tp_write(&t, zeros, 4096);
	tp_write(&t, zeros, 300);
	TP_REC(r, "splice out 3 packets", tp_res(t_to(&t, dst, NULL, sizeof buf, 0)));
	TP_REC(r, "FIONREAD", tp_nread(&t, 0));
	tp_close(&t);
	close(f);
	close(dst);
}

static void kernel_packet_mode(void)
{
	TP_BOTH_ALL(kernel_packet);
}

/* poll(2) on a kernel pipe never waits for the pipe lock; pp_events should
 * not wait for a pp_splice_to_fd that sleeps in a socket write either. */
struct slow_drain {
	int fd;
	size_t want;
	long delay_ms;
};

static void *slow_drain_main(void *arg)
{
	struct slow_drain *d = arg;
	unsigned char buf[16384];
	size_t got = 0;
	t_sleep_ms(d->delay_ms);
	while (got < d->want) {
		ssize_t n = read(d->fd, buf, sizeof buf);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return NULL;
}

static void kernel_events_while_to_fd_sleeps(void)
{
	struct pp_end *e[2];
	int sv[2], small = 4096;
	pthread_t t, d;
	CHECK_EQ(open_pair(sv, SOCK_STREAM), 0);
	CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK(put_stream(e[1], 65536, 211, 0));
	struct blocked b = { .end = e[0], .fd = sv[0], .to = 1, .len = 1u << 20 };
	CHECK(start_blocked(&t, &b)); /* asleep in the socket write */
	struct slow_drain sd = { sv[1], 65536, 1000 };
	CHECK_EQ(pthread_create(&d, NULL, slow_drain_main, &sd), 0);
	double t0 = t_now();
	short ev = pp_events(e[0]);
	double took = t_now() - t0;
	if (took > 0.5)
		fprintf(stderr, "pp_events waited %.2f s for the splice's socket write\n", took);
	CHECK(took < 0.5);
	CHECK(ev & POLLIN);
	t0 = t_now();
	ev = pp_events(e[1]);
	CHECK(t_now() - t0 < 0.5);
	pthread_join(d, NULL);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, 65536);
	pp_close(e[0]);
	pp_close(e[1]);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	t_around_cases(count_fds_before, nothing_left_after);
	RUN(kernel_file_aligned_sequence);
	RUN(kernel_file_unaligned_bytes);
	RUN(kernel_errors_and_edges);
	RUN(kernel_len_and_check_order);
	RUN(kernel_append_file);
	RUN(kernel_nonblocking_pipe_end);
	RUN(kernel_no_merge_after_splice);
	RUN(kernel_packet_mode);
	RUN(kernel_events_while_to_fd_sleeps);
	return T_DONE();
}
