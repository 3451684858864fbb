/*
 * splice_fd_file.c - pp_splice_from_fd and pp_splice_to_fd on regular
 * files (mkstemp in /tmp, unlinked at once): with an offset the file
 * position never moves and *off advances by the count (pread and pwrite
 * semantics), without one the position moves; random sizes up to 1 MiB,
 * random offsets, lengths past the end (a short count, then 0 at end of
 * file); a splice into a pipe followed by small writes that merge never
 * changes the file; a splice to an offset beyond the end leaves a hole of
 * zeros; a splice out of a pipe of many buffers writes them all.
 * After every case: no page of the pool in use and no descriptor leaked
 * (splice_fd.h).
 * PP_TEST_SCALE scales the random rounds.
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "splice_fd.h"

/* Splice a random file from a random start (maybe past its end) to its
 * end, in calls of random length, draining the pipe after each. */
static void from_file_round(int use_off, uint32_t *rs, size_t size)
{
	unsigned seed = tp_rand(rs) & 0xffff;
	int fd = tmp_file(size, seed);
	struct pp_end *e[2];
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_EQ(pp_pipe(e, 0), 0);
	off_t start = (off_t)(tp_rand(rs) % (size + 5000));
	if (tp_rand(rs) % 3 == 0)
		start &= ~(off_t)4095;
	if (tp_rand(rs) % 5 == 0)
		start = 0;
	/* With an offset the position is elsewhere and must stay there. */
	off_t pos = use_off ? (off_t)(tp_rand(rs) % (size + 1)) : start;
	CHECK_EQ(lseek(fd, pos, SEEK_SET), pos);
	off_t off = start;
	size_t remain = (size_t)start < size ? size - (size_t)start : 0, total = 0;
	for (int calls = 0; calls < 200; calls++) {
		size_t len = tp_rand(rs) % 4 == 0 ? 1 + tp_rand(rs) % 5000
		                                  : 1 + tp_rand(rs) % (1u << 20);
		off_t before = off;
		ssize_t n = pp_splice_from_fd(fd, use_off ? &off : NULL, e[1], len, 0);
		/* At most what is asked, left, and fits; at least that less the
		 * page-cache granularity a zero-copy version may have. */
		size_t hi = min3(len, remain - total, 65536);
		size_t lo = min3(len, remain - total, 65536 - 4095);
		if (n < 0 || (size_t)n > hi || (size_t)n < lo) {
			fprintf(stderr, "from file (size %zu, %s %lld, len %zu) = %zd (%s), "
			        "want %zu..%zu\n", size, use_off ? "offset" : "position",
			        (long long)before, len, n, strerror(errno), lo, hi);
			CHECK(0);
			break;
		}
		if (use_off) {
			CHECK_EQ(off, before + n);
			CHECK_EQ(lseek(fd, 0, SEEK_CUR), pos);
		} else {
			CHECK_EQ(lseek(fd, 0, SEEK_CUR), start + (off_t)(total + (size_t)n));
		}
		CHECK_EQ(pp_nread(e[0]), n);
		if (n == 0)
			break;
		if (!take_verify(e[0], (size_t)n, seed, (size_t)start + total)) {
			CHECK(0);
			break;
		}
		total += (size_t)n;
	}
	CHECK_EQ(total, remain);
	/* At the end: 0 again, nothing moved. */
	off = (off_t)size + 3;
	CHECK_EQ(pp_splice_from_fd(fd, use_off ? &off : NULL, e[1], 100, 0), 0);
	CHECK_EQ(pp_nread(e[0]), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(fd);
}

static void from_file_rounds(int use_off)
{
	uint32_t rs = use_off ? 0x1234567u : 0x7654321u;
	from_file_round(use_off, &rs, 0);
	from_file_round(use_off, &rs, 1 + tp_rand(&rs) % 4095);
	from_file_round(use_off, &rs, 4096);
	from_file_round(use_off, &rs, 65536);
	from_file_round(use_off, &rs, 1u << 20);
	for (long i = 0, n = t_scaled(6); i < n; i++)
		from_file_round(use_off, &rs, tp_rand(&rs) % ((1u << 20) + 1));
}

static void file_from_offset(void)
{
	from_file_rounds(1);
}

static void file_from_position(void)
{
	from_file_rounds(0);
}

/* Random writes from the pipe into a file, at offsets (maybe past the
 * end) or at the position, against a model of the file. */
static void to_file_round(int use_off, uint32_t *rs)
{
	const size_t cap = 1u << 21;
	size_t s0 = tp_rand(rs) % 200000;
	unsigned fseed = tp_rand(rs) & 0xffff, pseed = fseed + 1;
	int fd = tmp_file(s0, fseed);
	unsigned char *model = calloc(1, cap), *got = malloc(cap);
	struct pp_end *e[2];
	CHECK(fd >= 0 && model && got);
	if (fd < 0 || !model || !got) {
		free(model);
		free(got);
		if (fd >= 0)
			close(fd);
		return;
	}
	tp_fill(model, s0, fseed, 0);
	size_t msize = s0, wpos = 0, rpos = 0;
	CHECK_EQ(pp_pipe(e, 0), 0);
	off_t pos = (off_t)(tp_rand(rs) % (s0 + 1));
	CHECK_EQ(lseek(fd, pos, SEEK_SET), pos);
	for (int i = 0; i < 40; i++) {
		size_t have = wpos - rpos;
		size_t add = tp_rand(rs) % 4 ? tp_rand(rs) % (65536 - have + 1) : 0;
		add = put_some(e[1], add, pseed, wpos);
		wpos += add;
		have += add;
		size_t len = tp_rand(rs) % 3 ? 1 + tp_rand(rs) % 70000 : 1 + tp_rand(rs) % 5000;
		off_t at = use_off ? (off_t)(tp_rand(rs) % (msize + 20000)) : pos;
		if ((size_t)at + 65536 > cap)
			at = (off_t)(cap - 65536);
		if (!use_off && (size_t)at + 65536 > cap)
			break;
		off_t o = at;
		ssize_t n = pp_splice_to_fd(e[0], fd, use_off ? &o : NULL, len, PP_SPLICE_NONBLOCK);
		if (!have) {
			CHECK(n == -1 && errno == EAGAIN);
			n = 0;
		} else if (n != (ssize_t)min2(len, have)) {
			fprintf(stderr, "to file (at %lld, len %zu, %zu in pipe) = %zd (%s)\n",
			        (long long)at, len, have, n, strerror(errno));
			CHECK(0);
			break;
		}
		tp_fill(model + at, (size_t)n, pseed, rpos);
		rpos += (size_t)n;
		if ((size_t)at + (size_t)n > msize)
			msize = (size_t)at + (size_t)n;
		if (use_off) {
			CHECK_EQ(o, at + n);
		} else {
			pos += n;
		}
		CHECK_EQ(lseek(fd, 0, SEEK_CUR), pos);
		CHECK_EQ(pp_nread(e[0]), wpos - rpos);
	}
	struct stat st;
	CHECK_EQ(fstat(fd, &st), 0);
	CHECK_EQ(st.st_size, msize);
	CHECK_EQ(pread_all(fd, got, cap, 0), msize);
	CHECK(memcmp(got, model, msize) == 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(fd);
	free(model);
	free(got);
}

static void file_to_offset(void)
{
	uint32_t rs = 0xabcdef1u;
	for (long i = 0, n = t_scaled(4); i < n; i++)
		to_file_round(1, &rs);
}

static void file_to_position(void)
{
	uint32_t rs = 0x1fedcbau;
	for (long i = 0, n = t_scaled(4); i < n; i++)
		to_file_round(0, &rs);
}

/* A file shorter than len: the short count, then 0 at end of file, with
 * and without an offset; an offset past the end gives 0. */
static void file_short_then_eof(void)
{
	int fd = tmp_file(1000, 7), empty = tmp_file(0, 8);
	struct pp_end *e[2];
	CHECK(fd >= 0 && empty >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	off_t off = 0;
	CHECK_EQ(pp_splice_from_fd(fd, &off, e[1], 5000, 0), 1000);
	CHECK_EQ(off, 1000);
	CHECK_EQ(pp_splice_from_fd(fd, &off, e[1], 5000, 0), 0);
	CHECK_EQ(off, 1000);
	off = 5000;
	CHECK_EQ(pp_splice_from_fd(fd, &off, e[1], 5000, 0), 0);
	CHECK_EQ(off, 5000);
	off = 990;
	CHECK_EQ(pp_splice_from_fd(fd, &off, e[1], 5000, 0), 10);
	CHECK_EQ(off, 1000);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0);
	CHECK_EQ(pp_nread(e[0]), 1010);
	CHECK(take_verify(e[0], 1000, 7, 0));
	CHECK(take_verify(e[0], 10, 7, 990));
	/* The position: short, then 0, and it stops at the end. */
	CHECK_EQ(lseek(fd, 300, SEEK_SET), 300);
	CHECK_EQ(pp_splice_from_fd(fd, NULL, e[1], 1u << 20, 0), 700);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 1000);
	CHECK_EQ(pp_splice_from_fd(fd, NULL, e[1], 1u << 20, 0), 0);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 1000);
	CHECK(take_verify(e[0], 700, 7, 300));
	/* An empty file. */
	CHECK_EQ(pp_splice_from_fd(empty, NULL, e[1], 1, 0), 0);
	off = 0;
	CHECK_EQ(pp_splice_from_fd(empty, &off, e[1], 1, 0), 0);
	CHECK_EQ(pp_nread(e[0]), 0);
	CHECK_EQ(tp_pages_in_use(), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(fd);
	close(empty);
}

/* Bytes spliced from a file into a pipe are the pipe's now: writes that
 * merge into their buffer, before or after part of it is read, must never
 * reach the file. */
static void file_unchanged_by_merging_writes(void)
{
	const size_t size = 3 * 4096 + 100;
	static const struct {
		off_t off;
		size_t len;
		int use_off;
	} how[] = {
		{ 0, 100, 1 }, { 4096 + 7, 5000, 1 }, { 0, 3 * 4096 + 100, 1 },
		{ 4000, 90, 1 }, { 0, 100, 0 },       { 12000, 1u << 20, 0 },
	};
	for (size_t h = 0; h < sizeof how / sizeof how[0]; h++) {
		int fd = tmp_file(size, 21);
		struct pp_end *e[2];
		CHECK(fd >= 0);
		CHECK_EQ(pp_pipe(e, 0), 0);
		off_t off = how[h].off;
		if (!how[h].use_off)
			lseek(fd, off, SEEK_SET);
		ssize_t n = pp_splice_from_fd(fd, how[h].use_off ? &off : NULL, e[1], how[h].len, 0);
		size_t want = min2(how[h].len, size - (size_t)how[h].off);
		CHECK_EQ(n, want);
		if (n != (ssize_t)want) {
			pp_close(e[0]);
			pp_close(e[1]);
			close(fd);
			continue;
		}
		/* Small writes that fit in the last buffer's page, one larger
		 * write with an odd-sized front, then read a little and write
		 * again. */
		for (int i = 0; i < 30; i++)
			CHECK_EQ(pp_write(e[1], "merge-me!", 9), 9);
		static char big[4096 + 50];
		memset(big, 'Z', sizeof big);
		CHECK_EQ(pp_write(e[1], big, sizeof big), sizeof big);
		char head[50];
		size_t first = min2(sizeof head, want);
		CHECK_EQ(pp_read(e[0], head, first), first);
		CHECK(tp_verify(head, first, 21, (size_t)how[h].off) < 0);
		CHECK_EQ(pp_write(e[1], "tail", 4), 4);
		CHECK(file_is(fd, size, 21));
		/* The pipe holds the rest of the file bytes, then the writes. */
		CHECK(take_verify(e[0], want - first, 21, (size_t)how[h].off + first));
		for (int i = 0; i < 30; i++) {
			char m[9];
			CHECK_EQ(pp_read(e[0], m, 9), 9);
			CHECK(memcmp(m, "merge-me!", 9) == 0);
		}
		static char back[4096 + 50];
		CHECK_EQ(pp_read(e[0], back, sizeof back), sizeof back);
		CHECK(memcmp(back, big, sizeof big) == 0);
		char t[4];
		CHECK_EQ(pp_read(e[0], t, 4), 4);
		CHECK(memcmp(t, "tail", 4) == 0);
		pp_close(e[0]);
		pp_close(e[1]);
		CHECK(file_is(fd, size, 21));
		close(fd);
	}
}

/* Writing past the end of a file leaves a hole that reads as zeros. */
static void file_to_hole(void)
{
	int fd = tmp_file(100, 31);
	struct pp_end *e[2];
	CHECK(fd >= 0);
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK(put_stream(e[1], 5000, 32, 0));
	const off_t at = (1 << 20) + 3;
	off_t off = at;
	CHECK_EQ(pp_splice_to_fd(e[0], fd, &off, 1u << 20, 0), 5000);
	CHECK_EQ(off, at + 5000);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0);
	/* And at the position, moved past the end. */
	CHECK(put_stream(e[1], 3000, 32, 5000));
	CHECK_EQ(lseek(fd, 2 << 20, SEEK_SET), 2 << 20);
	CHECK_EQ(pp_splice_to_fd(e[0], fd, NULL, 1u << 20, 0), 3000);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), (2 << 20) + 3000);
	struct stat st;
	CHECK_EQ(fstat(fd, &st), 0);
	CHECK_EQ(st.st_size, (2 << 20) + 3000);
	size_t total = (size_t)st.st_size;
	unsigned char *buf = malloc(total);
	CHECK(buf != NULL);
	if (buf) {
		CHECK_EQ(pread_all(fd, buf, total, 0), total);
		CHECK(tp_verify(buf, 100, 31, 0) < 0);
		size_t zeros = 0;
		for (size_t i = 100; i < (size_t)at; i++)
			zeros += buf[i] == 0;
		CHECK_EQ(zeros, (size_t)at - 100);
		CHECK(tp_verify(buf + at, 5000, 32, 0) < 0);
		zeros = 0;
		for (size_t i = (size_t)at + 5000; i < (2u << 20); i++)
			zeros += buf[i] == 0;
		CHECK_EQ(zeros, (2u << 20) - (size_t)at - 5000);
		CHECK(tp_verify(buf + (2 << 20), 3000, 32, 5000) < 0);
		free(buf);
	}
	CHECK_EQ(pp_nread(e[0]), 0);
	pp_close(e[0]);
	pp_close(e[1]);
	close(fd);
}

/* More buffers than one call may gather: every byte still arrives, in
 * order, in several calls. */
static void file_to_many_buffers(void)
{
	struct pp_end *e[2];
	int fd = tmp_file(0, 0);
	CHECK(fd >= 0);
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(pp_setsize(e[1], 1u << 20), 1u << 20);
	size_t written = 0;
	unsigned char buf[4096];
	/* 256 buffers, every other one short so they cannot merge. */
	for (int i = 0; i < 256; i++) {
		size_t n = i % 2 ? 4096 : 1000;
		tp_fill(buf, n, 41, written);
		CHECK_EQ(pp_write(e[1], buf, n), n);
		written += n;
	}
	size_t done = 0;
	int calls = 0;
	while (done < written && calls < 1000) {
		ssize_t n = pp_splice_to_fd(e[0], fd, NULL, BIG_LEN, 0);
		if (n <= 0) {
			CHECK(n > 0);
			break;
		}
		done += (size_t)n;
		calls++;
		CHECK_EQ(pp_nread(e[0]), written - done);
	}
	CHECK_EQ(done, written);
	CHECK(file_is(fd, written, 41));
	pp_close(e[0]);
	pp_close(e[1]);
	close(fd);
}

int main(void)
{
	t_around_cases(count_fds_before, nothing_left_after);
	RUN(file_from_offset);
	RUN(file_from_position);
	RUN(file_to_offset);
	RUN(file_to_position);
	RUN(file_short_then_eof);
	RUN(file_unchanged_by_merging_writes);
	RUN(file_to_hole);
	RUN(file_to_many_buffers);
	return T_DONE();
}
