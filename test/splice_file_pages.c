/*
 * splice_file_pages.c - pp_splice_from_fd from a file sealed against
 * shrinking maps the file's pages into the pipe (buffer kind PP_KIND_FILE)
 * instead of reading them into pool pages.
 *
 * Checks, on memfds with F_SEAL_SHRINK:
 *   - the bytes: random lengths and offsets (with and without *off; odd
 *     offsets that start inside a page), read back byte for byte, the file
 *     position or *off moved by the count, 0 at and past end of file;
 *   - zero copy: while the buffers sit in the pipe no pool page is in use,
 *     and the mapping shows in /proc/self/maps; once every reader has taken
 *     the bytes (read, tee'd copy read too, pp_fanout outputs, spliced on
 *     to another pipe or to a descriptor) the mapping is gone, and not
 *     before;
 *   - no write reaches the file: small writes after a splice (which would
 *     merge into a pool page) leave the file as it was; packet mode alike;
 *   - closing a pipe that still holds file buffers unmaps them;
 *   - files that are not sealed (no sealing allowed, or F_SEAL_GROW only)
 *     are read into pool pages, as before, with the same bytes.
 */

#include "harness/harness.h"
#include "harness/helpers.h"
#include "memfd_maps.h"

#include <stdbool.h>
#include <sys/mman.h>

#define NAME "ppfile-test"

/* Mappings of our memfd now (one a call that mapped). */
static int file_maps(void)
{
	int n = -1;
	CHECK(memfd_mapped(NAME, &n) >= 0);
	return n;
}

static long pool_in_use(void)
{
	return tp_pool_stats().pages_in_use;
}

/* A memfd of size bytes of stream seed, sealed with seals (or not
 * sealable at all when seals is -1). */
static int make_file(size_t size, unsigned seed, int seals)
{
	int fd = memfd_create(NAME, MFD_CLOEXEC | (seals >= 0 ? MFD_ALLOW_SEALING : 0));
	CHECK(fd >= 0);
	static unsigned char buf[1 << 16];
	for (size_t done = 0; done < size;) {
		size_t c = size - done < sizeof buf ? size - done : sizeof buf;
		tp_fill(buf, c, seed, done);
		CHECK_EQ(write(fd, buf, c), (ssize_t)c);
		done += c;
	}
	if (seals > 0)
		CHECK_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/* Read n bytes from r and check they are stream seed from pos. */
static void read_check(struct pp_end *r, size_t n, unsigned seed, size_t pos)
{
	static unsigned char buf[1 << 16];
	while (n) {
		ssize_t got = pp_read(r, buf, n < sizeof buf ? n : sizeof buf);
		CHECK(got > 0);
		if (got <= 0)
			return;
		CHECK_EQ(tp_verify(buf, (size_t)got, seed, pos), -1);
		pos += (size_t)got;
		n -= (size_t)got;
	}
}

/* Random splices, with and without an offset: bytes, counts, positions,
 * and no pool page while the data sits in the pipe. */
static void random_splices(void)
{
	uint32_t rs = 12345;
	for (int round = 0; round < (int)t_scaled(40); round++) {
		size_t size = 1 + tp_rand(&rs) % (600 * 1024);
		int fd = make_file(size, (unsigned)round, F_SEAL_SHRINK);
		struct pp_end *e[2];
		CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
		CHECK_EQ(pp_setsize(e[1], 1 << 20), 1 << 20);
		bool use_off = round % 2;
		off_t pos = (off_t)(tp_rand(&rs) % (size + 1));
		if (!use_off)
			CHECK_EQ(lseek(fd, pos, SEEK_SET), pos);
		size_t want = 1 + tp_rand(&rs) % (300 * 1024);
		off_t o = pos;
		size_t expect = (size_t)pos == size ? 0 : want < size - (size_t)pos ? want : size - (size_t)pos;
		/* A call may move less than asked (it fills a bounded number of
		 * slots): go on until it has all, as a caller of splice would. */
		size_t moved = 0;
		for (;;) {
			ssize_t n = pp_splice_from_fd(fd, use_off ? &o : NULL, e[1], want - moved, 0);
			CHECK(n >= 0);
			if (n <= 0 || (moved += (size_t)n) == want)
				break;
		}
		CHECK_EQ(moved, expect);
		if (use_off) {
			CHECK_EQ(o, pos + (off_t)expect);
			CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0);
		} else {
			CHECK_EQ(lseek(fd, 0, SEEK_CUR), pos + (off_t)expect);
		}
		CHECK_EQ(pp_nread(e[0]), (int)expect);
		CHECK_EQ(pool_in_use(), 0); /* the file's pages, not copies */
		CHECK(file_maps() >= (expect ? 1 : 0)); /* one a call */
		read_check(e[0], expect, (unsigned)round, (size_t)pos);
		CHECK_EQ(file_maps(), 0);
		/* At the end of the file: 0. */
		o = (off_t)size;
		CHECK_EQ(pp_splice_from_fd(fd, &o, e[1], 100, 0), 0);
		o = (off_t)size + 5000;
		CHECK_EQ(pp_splice_from_fd(fd, &o, e[1], 100, 0), 0);
		pp_close(e[0]);
		pp_close(e[1]);
		close(fd);
	}
}

/* The mapping lives until the last reader is done: a tee'd copy, fan-out
 * outputs, a pipe it was spliced on to, a descriptor it went to. */
static void mapping_released_by_last_reader(void)
{
	size_t size = 200 * 1024 + 77;
	ssize_t n;
	int fd = make_file(size, 7, F_SEAL_SHRINK | F_SEAL_GROW);
	struct pp_end *a[2], *b[2], *c[2], *d[2];
	CHECK_EQ(pp_pipe(a, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(b, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(c, PP_NONBLOCK), 0);
	CHECK_EQ(pp_pipe(d, PP_NONBLOCK), 0);
	CHECK_EQ(pp_setsize(a[1], 1 << 20), 1 << 20);
	CHECK_EQ(pp_setsize(b[1], 1 << 20), 1 << 20);
	CHECK_EQ(pp_setsize(c[1], 1 << 20), 1 << 20);
	CHECK_EQ(pp_setsize(d[1], 1 << 20), 1 << 20);
	off_t o = 1000; /* starts inside a page */
	ssize_t got = 0;
	while ((n = pp_splice_from_fd(fd, &o, a[1], size, 0)) > 0)
		got += n;
	CHECK_EQ(got, (ssize_t)(size - 1000));
	CHECK(file_maps() >= 1);
	CHECK_EQ(pp_tee(a[0], b[1], SIZE_MAX, 0), (ssize_t)(size - 1000));
	struct pp_end *outs[2] = { c[1], d[1] };
	CHECK_EQ(pp_fanout(a[0], outs, 2, SIZE_MAX, 0), (ssize_t)(size - 1000));
	CHECK_EQ(pp_nread(a[0]), 0);
	CHECK_EQ(pool_in_use(), 0);
	read_check(b[0], size - 1000, 7, 1000);
	CHECK(file_maps() >= 1); /* c and d still hold it */
	/* c: half read, half spliced on to a; d: to a kernel pipe. */
	read_check(c[0], 50000, 7, 1000);
	CHECK_EQ(pp_splice(c[0], a[1], SIZE_MAX, 0), (ssize_t)(size - 1000 - 50000));
	int kp[2];
	CHECK_EQ(pipe2(kp, O_CLOEXEC | O_NONBLOCK), 0);
	CHECK_EQ(fcntl(kp[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
	ssize_t sent = 0;
	while ((n = pp_splice_to_fd(d[0], kp[1], NULL, 1 << 20, 0)) > 0)
		sent += n;
	CHECK_EQ(sent, (ssize_t)(size - 1000));
	CHECK(file_maps() >= 1); /* a holds what c passed on */
	read_check(a[0], size - 1000 - 50000, 7, 1000 + 50000);
	CHECK_EQ(file_maps(), 0);
	static unsigned char buf[1 << 20];
	CHECK_EQ(read(kp[0], buf, sizeof buf), (ssize_t)(size - 1000));
	CHECK_EQ(tp_verify(buf, size - 1000, 7, 1000), -1);
	close(kp[0]);
	close(kp[1]);
	struct pp_end **all[] = { a, b, c, d };
	for (int i = 0; i < 4; i++) {
		pp_close(all[i][0]);
		pp_close(all[i][1]);
	}
	close(fd);
}

/* Writes after a splice never reach the file; closing a pipe that still
 * holds file buffers unmaps them. */
static void writes_do_not_reach_file(void)
{
	for (int packet = 0; packet < 2; packet++) {
		size_t size = 3 * 4096 + 100; /* the last page partly filled */
		int fd = make_file(size, 9, F_SEAL_SHRINK);
		struct pp_end *e[2];
		CHECK_EQ(pp_pipe(e, PP_NONBLOCK | (packet ? PP_PACKET : 0)), 0);
		CHECK_EQ(pp_splice_from_fd(fd, NULL, e[1], size, 0), (ssize_t)size);
		for (int i = 0; i < 10; i++) /* packets: a slot each */
			CHECK_EQ(pp_write(e[1], "XYZ", 3), 3);
		CHECK(pool_in_use() >= 1); /* the writes went to a pool page */
		unsigned char *m = mmap(NULL, 4 * 4096, PROT_READ, MAP_SHARED, fd, 0);
		CHECK(m != MAP_FAILED);
		CHECK_EQ(tp_verify(m, size, 9, 0), -1);
		for (size_t i = size; i < 4 * 4096; i++)
			if (m[i] != 0) {
				CHECK_EQ(m[i], 0); /* past the end: still zero */
				break;
			}
		munmap(m, 4 * 4096);
		CHECK_EQ(file_maps(), 1);
		read_check(e[0], size, 9, 0);
		char xyz[3];
		for (int i = 0; i < 10; i++) {
			CHECK_EQ(pp_read(e[0], xyz, 3), 3);
			CHECK(!memcmp(xyz, "XYZ", 3));
		}
		pp_close(e[1]);
		pp_close(e[0]);
		CHECK_EQ(file_maps(), 0);
		CHECK_EQ(pool_in_use(), 0);

		/* Closed while holding file buffers. */
		CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
		off_t o = 0;
		CHECK_EQ(pp_splice_from_fd(fd, &o, e[1], size, 0), (ssize_t)size);
		CHECK_EQ(file_maps(), 1);
		pp_close(e[0]);
		pp_close(e[1]);
		CHECK_EQ(file_maps(), 0);
		close(fd);
	}
}

/* Files that may shrink are read into pool pages, same bytes. */
static void unsealed_files_are_read(void)
{
	int seals[] = { -1, 0, F_SEAL_GROW };
	for (unsigned i = 0; i < sizeof seals / sizeof seals[0]; i++) {
		size_t size = 100 * 1024 + 3;
		int fd = make_file(size, 11, seals[i]);
		struct pp_end *e[2];
		CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
		CHECK_EQ(pp_setsize(e[1], 1 << 20), 1 << 20);
		CHECK_EQ(pp_splice_from_fd(fd, NULL, e[1], size, 0), (ssize_t)size);
		CHECK_EQ(pool_in_use(), 26); /* copies */
		CHECK_EQ(file_maps(), 0);
		read_check(e[0], size, 11, 0);
		pp_close(e[0]);
		pp_close(e[1]);
		close(fd);
	}
}

/* A stream larger than the pipe, the file's position moving: the same as
 * reading the file. */
static void stream_through_small_pipe(void)
{
	size_t size = (size_t)t_scaled(8) << 20;
	int fd = make_file(size, 13, F_SEAL_SHRINK | F_SEAL_WRITE);
	struct pp_end *e[2];
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	size_t pos = 0;
	for (;;) {
		ssize_t n = pp_splice_from_fd(fd, NULL, e[1], 100000, 0);
		CHECK(n >= 0);
		if (n <= 0)
			break;
		CHECK(n <= 65536);
		read_check(e[0], (size_t)n, 13, pos);
		pos += (size_t)n;
	}
	CHECK_EQ(pos, size);
	CHECK_EQ(file_maps(), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(fd);
}

int main(void)
{
	RUN(random_splices);
	RUN(mapping_released_by_last_reader);
	RUN(writes_do_not_reach_file);
	RUN(unsealed_files_are_read);
	RUN(stream_through_small_pipe);
	return T_DONE();
}
