/*
 * vmsplice_no_copy.c - pp_vmsplice lends the caller's memory, it does not
 * copy it:
 *   no_pool_pages            vmspliced data takes no pool page, even tee'd
 *                            and spliced; a later 1-byte write takes a
 *                            fresh one;
 *   contract_reader_sees_caller_changes  documents the zero-copy contract:
 *                            a change to the caller's memory before release
 *                            IS what the reader (and a tee'd copy) gets.
 *                            Callers must not do this; the test proves
 *                            there is no copy;
 *   writes_never_touch_caller_memory  small writes that would merge into
 *                            the last buffer, after vmsplice, after a
 *                            whole-buffer splice and after a tee, never
 *                            write into the caller's memory (guard bytes
 *                            around it checked).
 * After every case: no pool page in use, no callback with a foreign arg
 * (vmsplice.h).
 */
#include "harness/harness.h"
#include "harness/helpers.h"
#include "vmsplice.h"

static void no_pool_pages(void)
{
	CHECK_EQ(tp_pages_in_use(), 0);
	struct pp_end *p[2], *q[2], *s[2];
	struct rel_log log;
	log_init(&log);
	mkpipe(p, 0);
	mkpipe(q, 0);
	mkpipe(s, 0);
	CHECK_EQ(pp_setsize(p[1], 1 << 20), 1 << 20);
	CHECK_EQ(pp_setsize(q[1], 1 << 20), 1 << 20);
	CHECK_EQ(pp_setsize(s[1], 1 << 20), 1 << 20);
	size_t len = 100 * 1024 + 3;
	unsigned char *a = malloc(len);
	fill_random(a, len);
	struct iovec iov[2] = { { a, 1 }, { a + 1, len - 1 } };
	CHECK_EQ(pp_vmsplice(p[1], iov, 2, 0, on_release, &log), (ssize_t)len);
	CHECK_EQ(tp_pages_in_use(), 0);
	CHECK_EQ(pp_tee(p[0], q[1], len, 0), (ssize_t)len);
	CHECK_EQ(tp_pages_in_use(), 0);
	CHECK_EQ(pp_splice(q[0], s[1], 10000, 0), 10000);
	CHECK_EQ(tp_pages_in_use(), 0);
	/* A write after vmspliced data cannot merge: one fresh page. */
	CHECK_EQ(pp_write(p[1], "z", 1), 1);
	CHECK_EQ(tp_pages_in_use(), 1);
	CHECK_EQ(drain(p[0]), len + 1);
	CHECK_EQ(tp_pages_in_use(), 0);
	CHECK_EQ(drain(q[0]), len - 10000);
	CHECK_EQ(drain(s[0]), 10000);
	CHECK_EQ(tp_pages_in_use(), 0);
	CHECK_EQ(log_count(&log), 2);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pp_close(p[i]), 0);
		CHECK_EQ(pp_close(q[i]), 0);
		CHECK_EQ(pp_close(s[i]), 0);
	}
	log_fini(&log);
	free(a);
}

/* ---- the zero-copy contract, and no write into caller memory ---------- */

static void contract_reader_sees_caller_changes(void)
{
	/* NOT something a caller may do: the memory is lent until release.
	 * The test does it to prove the reader gets the caller's memory
	 * itself, not a copy taken at vmsplice time. */
	struct pp_end *p[2], *q[2];
	struct rel_log log;
	unsigned char *buf = malloc(8192), got[8192];
	memset(buf, 'a', 8192);
	log_init(&log);
	mkpipe(p, 0);
	mkpipe(q, 0);
	struct iovec iov = { buf, 8192 };
	CHECK_EQ(pp_vmsplice(p[1], &iov, 1, 0, on_release, &log), 8192);
	CHECK_EQ(pp_tee(p[0], q[1], 8192, 0), 8192);
	buf[0] = 'Z';
	buf[5000] = 'Y';
	CHECK_EQ(read_n(p[0], got, 10), 10);
	CHECK_EQ(got[0], 'Z');
	CHECK_EQ(got[1], 'a');
	buf[20] = 'X'; /* after a partial read of the same chunk */
	CHECK_EQ(read_n(p[0], got + 10, 8182), 8182);
	CHECK_EQ(got[20], 'X');
	CHECK_EQ(got[5000], 'Y');
	CHECK_EQ(log_count(&log), 0); /* q still holds it */
	buf[8191] = 'W';
	CHECK_EQ(read_n(q[0], got, 8192), 8192);
	CHECK_EQ(got[0], 'Z');
	CHECK_EQ(got[20], 'X');
	CHECK_EQ(got[5000], 'Y');
	CHECK_EQ(got[8191], 'W');
	CHECK_EQ(log_count(&log), 1);
	CHECK_RELEASED(&log, buf, 8192);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pp_close(p[i]), 0);
		CHECK_EQ(pp_close(q[i]), 0);
	}
	log_fini(&log);
	free(buf);
}

static uint64_t checksum(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void writes_never_touch_caller_memory(void)
{
	/* Each segment is 100 bytes inside a 4096-byte region: a write merged
	 * into its buffer would land in the region right after it. */
	enum { REG = 4096, NSEG = 4 };
	unsigned char *reg = malloc(NSEG * REG);
	fill_random(reg, NSEG * REG);
	uint64_t sum = checksum(reg, NSEG * REG);
	struct rel_log log;
	log_init(&log);
	struct pp_end *p[2], *q[2], *t[2];
	mkpipe(p, 0);
	mkpipe(q, 0);
	mkpipe(t, 0);
	struct iovec iov[NSEG];
	for (int i = 0; i < NSEG; i++)
		iov[i] = (struct iovec){ reg + i * REG + 7, 100 };

	/* 1: vmsplice, then small writes right after it. */
	CHECK_EQ(pp_vmsplice(p[1], &iov[0], 1, 0, on_release, &log), 100);
	for (int i = 0; i < 20; i++)
		CHECK_EQ(pp_write(p[1], "0123456789", 1 + (size_t)i % 10), 1 + i % 10);
	struct iovec wv[2] = { { "ab", 2 }, { "cd", 2 } };
	CHECK_EQ(pp_writev(p[1], wv, 2), 4);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);

	/* 2: the user buffer moved whole to q, then writes to q. */
	CHECK_EQ(pp_vmsplice(t[1], &iov[1], 1, 0, on_release, &log), 100);
	CHECK_EQ(pp_splice(t[0], q[1], 100, 0), 100);
	CHECK_EQ(pp_write(q[1], "xyz", 3), 3);
	CHECK_EQ(pp_write(q[1], "w", 1), 1);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);

	/* 3: tee'd to t, then writes to both. */
	unsigned char head[214];
	CHECK_EQ(drain(t[0]), 0);
	CHECK_EQ(pp_nread(p[0]), 214); /* step 1: 100 + 110 + 4 */
	CHECK_EQ(read_n(p[0], head, sizeof head), sizeof head);
	CHECK(memcmp(head, iov[0].iov_base, 100) == 0);
	for (int i = 0, at = 100; i < 20; at += 1 + i % 10, i++)
		CHECK(memcmp(head + at, "0123456789", 1 + (size_t)i % 10) == 0);
	CHECK(memcmp(head + 210, "abcd", 4) == 0);
	CHECK_EQ(pp_vmsplice(p[1], &iov[2], 1, 0, on_release, &log), 100);
	CHECK_EQ(pp_tee(p[0], t[1], 100, 0), 100);
	CHECK_EQ(pp_write(p[1], "P", 1), 1);
	CHECK_EQ(pp_write(t[1], "T", 1), 1);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);

	/* 4: packet mode. */
	struct pp_end *k[2];
	mkpipe(k, PP_PACKET);
	CHECK_EQ(pp_vmsplice(k[1], &iov[3], 1, 0, on_release, &log), 100);
	CHECK_EQ(pp_write(k[1], "k", 1), 1);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);

	/* What the readers get: the caller's bytes, then the writes. */
	unsigned char got[200];
	CHECK_EQ(read_n(p[0], got, 101), 101);
	CHECK(memcmp(got, iov[2].iov_base, 100) == 0);
	CHECK_EQ(got[100], 'P');
	CHECK_EQ(read_n(t[0], got, 101), 101);
	CHECK(memcmp(got, iov[2].iov_base, 100) == 0);
	CHECK_EQ(got[100], 'T');
	CHECK_EQ(read_n(q[0], got, 104), 104);
	CHECK(memcmp(got, iov[1].iov_base, 100) == 0);
	CHECK(memcmp(got + 100, "xyzw", 4) == 0);
	/* vmspliced buffers are not packets, as in Linux: the read runs on
	 * into the 'k' packet and stops after it. */
	CHECK_EQ(pp_read(k[0], got, sizeof got), 101);
	CHECK(memcmp(got, iov[3].iov_base, 100) == 0);
	CHECK_EQ(got[100], 'k');
	CHECK_EQ(log_count(&log), 4);
	for (int i = 0; i < NSEG; i++)
		CHECK_RELEASED(&log, iov[i].iov_base, 100);
	CHECK_EQ(checksum(reg, NSEG * REG), sum);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(pp_close(p[i]), 0);
		CHECK_EQ(pp_close(q[i]), 0);
		CHECK_EQ(pp_close(t[i]), 0);
		CHECK_EQ(pp_close(k[i]), 0);
	}
	log_fini(&log);
	free(reg);
}

int main(void)
{
	t_around_cases(NULL, vmsplice_case_end);
	RUN(no_pool_pages);
	RUN(contract_reader_sees_caller_changes);
	RUN(writes_never_touch_caller_memory);
	return T_DONE();
}
