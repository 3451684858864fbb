/*
 * pool_batch.c - how the pool maps fresh pages, and what happens when the
 * system will not take a page back.
 *
 * The pool maps pages in batches once many are in use (in_use/8 at a time,
 * at most 64, within the room for idle pages and the pool's limit), and the
 * part of a batch not needed yet counts as cached.  It keeps idle pages up
 * to the room left in the open pipes (at least 64), never above a
 * cache_max the caller set.  test/fault.h stands in for
 * mmap and munmap here, so the test sees the library's real calls:
 *   - a small pipe still maps its pages one or two at a time (nothing held
 *     beyond what it uses), a deep one in few calls;
 *   - mapped pages always equal pages_in_use + pages_cached (no page
 *     unaccounted for), and pages_cached never exceeds cache_max or the
 *     pipes' room (or 64);
 *   - a deep pipe refilled after a drain maps nothing new, and closing or
 *     shrinking it gives back what it no longer has room for;
 *   - a cache_max set by the caller holds even when the pipes have room;
 *   - a batch never maps beyond the pool's limit;
 *   - with every munmap refused (ENOMEM, as at vm.max_map_count, where
 *     cutting a page out of a batch mapping cannot split it), drained pages
 *     stay cached even above cache_max, are reused before anything new is
 *     mapped, and go back to the system once munmap works again; no byte of
 *     the data is lost or changed on the way.
 * Single-threaded: fault.h counts while armed, and the armed window covers
 * each case.
 */
#include <limits.h>
#include <sys/mman.h>

#include "harness/harness.h"
#include "fault.h"
#include "harness/helpers.h"

#define DEFAULT_CACHE LONG_MAX /* no hard bound: the pipes' room rules */
#define CACHE_FLOOR 64         /* idle pages kept with no room left */

static struct pp_pool_stats stats(void)
{
	return tp_pool_stats();
}

/* Every page mapped is in use or cached, and the cache within its bounds
 * (unless munmap is being refused): cache_max, and the room left in the
 * open pipes or CACHE_FLOOR, whichever is more. */
static void check_accounting(void)
{
	struct pp_pool_stats st = stats();
	CHECK_EQ(fi.maps, st.pages_in_use + st.pages_cached);
	if (!fi.munmap_refuse) {
		long room = st.pipe_pages - st.pages_in_use;
		CHECK(st.pages_cached <= st.cache_max);
		CHECK(st.pages_cached <= (room > CACHE_FLOOR ? room : CACHE_FLOOR));
	}
}

/* Start from an empty pool with cache bound `cache`, counting. */
static void start(long cache)
{
	pp_pool_setlimit(0);
	pp_pool_setcache(cache);
	pp_pool_trim();
	struct pp_pool_stats st = stats();
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(st.pages_cached, 0);
	memset(fi.per_kind, 0, sizeof fi.per_kind);
	fi.maps = 0;
	fi_arm();
}

static void finish(void)
{
	fi.munmap_refuse = 0;
	pp_pool_trim();
	check_accounting();
	CHECK_EQ(fi.maps, 0);
	fi_disarm();
	pp_pool_setlimit(0);
	pp_pool_setcache(DEFAULT_CACHE);
}

/* Write n bytes of stream seed from *wpos; returns what went in. */
static size_t put(struct pp_end *w, size_t n, unsigned seed, size_t *wpos)
{
	static char buf[1 << 16];
	size_t done = 0;
	while (done < n) {
		size_t c = n - done < sizeof buf ? n - done : sizeof buf;
		tp_fill(buf, c, seed, *wpos);
		ssize_t r = pp_write(w, buf, c);
		if (r <= 0)
			break;
		*wpos += (size_t)r;
		done += (size_t)r;
	}
	return done;
}

/* Read everything there is and check it is the stream from *rpos on. */
static size_t drain_check(struct pp_end *r, unsigned seed, size_t *rpos)
{
	static char buf[1 << 16];
	size_t total = 0;
	ssize_t n;
	while ((n = pp_read(r, buf, sizeof buf)) > 0) {
		CHECK_EQ(tp_verify(buf, (size_t)n, seed, *rpos), -1);
		*rpos += (size_t)n;
		total += (size_t)n;
	}
	CHECK_EQ(n == -1 && errno == EAGAIN, 1); /* stopped only because empty */
	return total;
}

/* A default pipe filled from an empty cache: batches stay tiny (in_use/8
 * is at most 2 here), so nearly one map per page and almost nothing held
 * beyond the 16 pages in use. */
static void small_pipe_maps_few_extra(void)
{
	struct pp_end *e[2];
	size_t wpos = 0, rpos = 0;
	start(DEFAULT_CACHE);
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	unsigned long maps0 = fi.per_kind[FI_MMAP];
	CHECK_EQ(put(e[1], 16 * 4096, 1, &wpos), 16 * 4096);
	unsigned long calls = fi.per_kind[FI_MMAP] - maps0;
	struct pp_pool_stats st = stats();
	CHECK_EQ(st.pages_in_use, 16);
	CHECK(st.pages_cached <= 2);
	CHECK(calls >= 14 && calls <= 16);
	check_accounting();
	CHECK_EQ(drain_check(e[0], 1, &rpos), 16 * 4096);
	CHECK_EQ(stats().pages_in_use, 0);
	check_accounting();
	pp_close(e[0]);
	pp_close(e[1]);
	finish();
}

/* Four 4 MiB pipes filled: 4096 pages, taken in batches of up to 64, so
 * far fewer map calls than pages; and the cache stays within its bound. */
static void deep_pipes_map_in_batches(void)
{
	enum { NP = 4, PAGES = 1024 };
	struct pp_end *e[NP][2];
	size_t wpos[NP] = { 0 }, rpos[NP] = { 0 };
	long oldmax = pp_getmaxsize();
	CHECK(pp_setmaxsize(PAGES * 4096) >= 0);
	start(DEFAULT_CACHE);
	unsigned long maps0 = fi.per_kind[FI_MMAP];
	for (int i = 0; i < NP; i++) {
		CHECK_EQ(pp_pipe(e[i], PP_NONBLOCK), 0);
		CHECK_EQ(pp_setsize(e[i][1], PAGES * 4096), PAGES * 4096);
		CHECK_EQ(put(e[i][1], PAGES * 4096, 10 + i, &wpos[i]), PAGES * 4096);
		check_accounting();
	}
	unsigned long calls = fi.per_kind[FI_MMAP] - maps0;
	fprintf(stderr, "info: %d pages in %lu map calls\n", NP * PAGES, calls);
	CHECK_EQ(stats().pages_in_use, NP * PAGES);
	CHECK(calls <= NP * PAGES / 16);
	for (int i = 0; i < NP; i++) {
		CHECK_EQ(drain_check(e[i][0], 10 + i, &rpos[i]), PAGES * 4096);
		check_accounting();
		pp_close(e[i][0]);
		pp_close(e[i][1]);
	}
	CHECK_EQ(stats().pages_in_use, 0);
	CHECK_EQ(stats().pages_cached, CACHE_FLOOR);
	finish();
	pp_setmaxsize((size_t)oldmax);
}

/* With a limit, a batch never maps a page the limit would not let a pipe
 * have: mapped pages stay within the limit. */
static void batches_stay_within_limit(void)
{
	enum { LIMIT = 200 }; /* below the pipe's 256 pages */
	struct pp_end *e[2];
	size_t wpos = 0, rpos = 0;
	start(DEFAULT_CACHE);
	CHECK_EQ(pp_pool_setlimit(LIMIT), 0);
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(pp_setsize(e[1], 1 << 20), 1 << 20);
	CHECK_EQ(put(e[1], 1 << 20, 3, &wpos), LIMIT * 4096);
	CHECK_ERR(pp_write(e[1], "x", 1), ENOMEM);
	CHECK_EQ(stats().pages_in_use, LIMIT);
	CHECK(fi.maps <= LIMIT);
	check_accounting();
	CHECK_EQ(drain_check(e[0], 3, &rpos), LIMIT * 4096);
	pp_close(e[0]);
	pp_close(e[1]);
	finish();
}

/* munmap refused: pages are kept (above cache_max), reused, and released
 * once the system takes them again. */
static void refused_unmap_keeps_pages(void)
{
	struct pp_end *e[2];
	size_t wpos = 0, rpos = 0;
	start(0); /* no cache: every drained page is unmapped at once */
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(pp_setsize(e[1], 32 * 4096), 32 * 4096);
	CHECK_EQ(put(e[1], 32 * 4096, 5, &wpos), 32 * 4096);
	CHECK_EQ(fi.maps, 32);

	fi.munmap_refuse = 1;
	CHECK_EQ(drain_check(e[0], 5, &rpos), 32 * 4096);
	struct pp_pool_stats st = stats();
	CHECK_EQ(st.pages_in_use, 0);
	CHECK_EQ(st.pages_cached, 32); /* kept, though cache_max is 0 */
	check_accounting();
	CHECK_EQ(pp_pool_trim(), 0);
	CHECK_EQ(pp_pool_setcache(0), 0);
	CHECK_EQ(stats().pages_cached, 32);

	/* Kept pages are reused before anything new is mapped. */
	unsigned long maps0 = fi.per_kind[FI_MMAP];
	CHECK_EQ(put(e[1], 8 * 4096 + 100, 5, &wpos), 8 * 4096 + 100);
	CHECK_EQ(fi.per_kind[FI_MMAP], maps0);
	CHECK_EQ(stats().pages_in_use, 9);
	CHECK_EQ(stats().pages_cached, 23);
	check_accounting();

	/* The system takes pages again: the next drain gives everything
	 * back, the pages kept before with the ones drained now. */
	fi.munmap_refuse = 0;
	CHECK_EQ(drain_check(e[0], 5, &rpos), 8 * 4096 + 100);
	CHECK_EQ(stats().pages_in_use, 0);
	CHECK_EQ(stats().pages_cached, 0);
	CHECK_EQ(pp_pool_trim(), 0);
	CHECK_EQ(fi.maps, 0);
	CHECK_EQ(rpos, wpos);
	pp_close(e[0]);
	pp_close(e[1]);
	finish();
}

/* A pipe deeper than CACHE_FLOOR, filled, drained and filled again: the
 * second fill maps nothing (the pool kept what the pipe has room for);
 * closing it gives back all but CACHE_FLOOR.  pipe_pages follows the
 * pipe's size. */
static void deep_pipe_keeps_its_pages(void)
{
	enum { PAGES = 256 };
	struct pp_end *e[2];
	size_t wpos = 0, rpos = 0;
	start(DEFAULT_CACHE);
	long base = stats().pipe_pages;
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(stats().pipe_pages, base + 16);
	CHECK_EQ(pp_setsize(e[1], PAGES * 4096), PAGES * 4096);
	CHECK_EQ(stats().pipe_pages, base + PAGES);
	for (int round = 0; round < 3; round++) {
		unsigned long maps0 = fi.per_kind[FI_MMAP];
		CHECK_EQ(put(e[1], PAGES * 4096, 7, &wpos), PAGES * 4096);
		if (round > 0)
			CHECK_EQ(fi.per_kind[FI_MMAP], maps0);
		check_accounting();
		CHECK_EQ(drain_check(e[0], 7, &rpos), PAGES * 4096);
		CHECK_EQ(stats().pages_cached, PAGES);
		check_accounting();
	}
	/* A smaller pipe has less room: the pages beyond it go at once. */
	CHECK_EQ(pp_setsize(e[1], 128 * 4096), 128 * 4096);
	CHECK_EQ(stats().pipe_pages, base + 128);
	CHECK_EQ(stats().pages_cached, 128);
	check_accounting();
	pp_close(e[0]);
	pp_close(e[1]);
	CHECK_EQ(stats().pipe_pages, base);
	CHECK_EQ(stats().pages_cached, CACHE_FLOOR);
	CHECK_EQ(fi.maps, CACHE_FLOOR);
	finish();
}

/* A cache bound the caller sets holds even when the pipes have room: the
 * pages beyond it are unmapped as they drain and mapped again. */
static void set_bound_is_hard(void)
{
	enum { PAGES = 256, BOUND = 16 };
	struct pp_end *e[2];
	size_t wpos = 0, rpos = 0;
	start(BOUND);
	CHECK_EQ(pp_pipe(e, PP_NONBLOCK), 0);
	CHECK_EQ(pp_setsize(e[1], PAGES * 4096), PAGES * 4096);
	CHECK_EQ(put(e[1], PAGES * 4096, 8, &wpos), PAGES * 4096);
	CHECK_EQ(drain_check(e[0], 8, &rpos), PAGES * 4096);
	CHECK_EQ(stats().pages_cached, BOUND);
	check_accounting();
	unsigned long maps0 = fi.per_kind[FI_MMAP];
	CHECK_EQ(put(e[1], PAGES * 4096, 8, &wpos), PAGES * 4096);
	CHECK(fi.per_kind[FI_MMAP] > maps0); /* fresh pages were needed */
	CHECK_EQ(drain_check(e[0], 8, &rpos), PAGES * 4096);
	check_accounting();
	pp_close(e[0]);
	pp_close(e[1]);
	finish();
}

int main(void)
{
	RUN(small_pipe_maps_few_extra);
	RUN(deep_pipes_map_in_batches);
	RUN(batches_stay_within_limit);
	RUN(refused_unmap_keeps_pages);
	RUN(deep_pipe_keeps_its_pages);
	RUN(set_bound_is_hard);
	return T_DONE();
}
