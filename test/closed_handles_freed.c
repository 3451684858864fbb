/*
 * closed_handles_freed.c - a closed handle's memory goes back to the heap
 * once it has left the quarantine, so a burst of pipes made and closed
 * does not keep its handles for the life of the process.
 *
 * pp_close keeps the last closed handles (a FIFO quarantine) so that a
 * call on a handle closed a moment ago fails with EBADF instead of reading
 * freed memory.  Before the quarantine was bounded it kept every closed
 * handle: 100,000 pipes made, then closed, left 6 MB more in the heap
 * than at the start, and the handles were reused only as new ones were
 * made.  (The pipes stay empty: the pool's page table, which grows with
 * the most pages ever in use and is never freed, is not what this checks.)  The bytes in use are counted by this program's own allocation
 * functions, which forward to glibc's; under a sanitizer or valgrind,
 * which bring their own allocator, the case is skipped.
 */
#include <malloc.h>
#include <stdatomic.h>

#include "harness/harness.h"
#include "pagepipe.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OWN_ALLOCATOR 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define OWN_ALLOCATOR 0
#endif
#endif
#ifndef OWN_ALLOCATOR
#define OWN_ALLOCATOR 1
#endif

static _Atomic long live_bytes; /* usable bytes of live allocations */

#if OWN_ALLOCATOR
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static void *counted(void *p)
{
	if (p)
		live_bytes += (long)malloc_usable_size(p);
	return p;
}

void *malloc(size_t n)
{
	return counted(__libc_malloc(n));
}

void *calloc(size_t n, size_t size)
{
	return counted(__libc_calloc(n, size));
}

void *aligned_alloc(size_t align, size_t n)
{
	return counted(__libc_memalign(align, n));
}

void free(void *p)
{
	if (p)
		live_bytes -= (long)malloc_usable_size(p);
	__libc_free(p);
}

void *realloc(void *p, size_t n)
{
	long old = p ? (long)malloc_usable_size(p) : 0;
	void *q = __libc_realloc(p, n);
	if (q || !n)
		live_bytes -= old;
	return counted(q);
}
#endif

static size_t heap_in_use(void)
{
	return (size_t)live_bytes;
}

static void burst_of_pipes_returns_its_memory(void)
{
	if (!OWN_ALLOCATOR || getenv("PP_VALGRIND"))
		SKIP("a sanitizer's or valgrind's allocator is in use");

	struct pp_end *e[2];
	/* Warm up: the quarantine fills and the pool's page table exists. */
	for (int i = 0; i < 1000; i++) {
		CHECK_EQ(pp_pipe(e, 0), 0);
		pp_close(e[0]);
		pp_close(e[1]);
	}
	pp_pool_trim();
	enum { PIPES = 100000 };
	struct pp_end **ends = calloc(2 * PIPES, sizeof *ends);
	CHECK(ends != NULL);
	if (!ends)
		return;
	size_t before = heap_in_use();
	int made = 0;
	for (; made < PIPES; made++) {
		if (pp_pipe(&ends[2 * made], 0) != 0) {
			CHECK(!"pp_pipe failed");
			break;
		}
	}
	size_t held = heap_in_use();
	for (int i = 0; i < 2 * made; i++)
		CHECK_EQ(pp_close(ends[i]), 0);
	pp_pool_trim();
	size_t after = heap_in_use();
	fprintf(stderr, "heap in use: %zu bytes before, %zu with %d pipes open, %zu once closed\n",
	        before, held, made, after);
	CHECK(after < before + 256 * 1024);
	free(ends);
}

static void recently_closed_handle_is_ebadf(void)
{
	struct pp_end *e[2];
	char c;
	CHECK_EQ(pp_pipe(e, 0), 0);
	CHECK_EQ(pp_close(e[0]), 0);
	/* Within the quarantine the memory is still valid and marked dead. */
	CHECK_ERR(pp_read(e[0], &c, 1), EBADF);
	CHECK_ERR(pp_close(e[0]), EBADF);
	CHECK_EQ(pp_close(e[1]), 0);
	CHECK_ERR(pp_write(e[1], &c, 1), EBADF);
}

int main(void)
{
	RUN(burst_of_pipes_returns_its_memory);
	RUN(recently_closed_handle_is_ebadf);
	return T_DONE();
}
